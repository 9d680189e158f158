"""``lower()``: nn.Module -> torch.export -> (PT2E quantization) -> passes -> TOSA 1.0."""

from __future__ import annotations

import copy
import re

import torch
import torch.fx as fx

from .emitter import Emitter
from .errors import LoweringError
from .graph_utils import DQ_OPS, Q_OPS, propagate_values, target_name, val
from .lowered import CpuNode, LoweredModel, Partition
from .passes.base import PassContext
from .pipeline import run_pipeline
from .quantizer import QuantConfig, TosaQuantizer
from .serialize import TORCH_TO_TOSA

SUPPORTED_DTYPES = set(TORCH_TO_TOSA)


def _export_error(e: Exception) -> LoweringError:
    msg = str(e).strip()
    first = msg.splitlines()[0] if msg else type(e).__name__
    node = None
    m = re.search(r"node (\w+)", msg) or re.search(r"`([\w.]+)`", msg)
    if m:
        node = m.group(1)
    line = re.search(r'File "([^"]+)", line (\d+)', msg)
    loc = f" at {line.group(1)}:{line.group(2)}" if line else ""
    kind = "data-dependent shape" if ("data-dependent" in msg or "GuardOnDataDependent" in
                                      type(e).__name__ or "Could not guard" in msg) else \
        "torch.export cannot trace the model"
    return LoweringError(f"{kind}: {type(e).__name__}: {first}{loc}", node=node)


def _check_dtypes(gm: fx.GraphModule) -> None:
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "call_function"):
            v = val(n)
            vals = [v] if v is not None else [x for x in (n.meta.get("val") or [])
                                               if isinstance(x, torch.Tensor)] \
                if isinstance(n.meta.get("val"), (list, tuple)) else []
            for t in vals:
                if t.dtype not in SUPPORTED_DTYPES:
                    raise LoweringError(f"unsupported dtype {t.dtype} (TOSA 1.0 has no such type)",
                                        node=n.name, target=target_name(n) if n.op == "call_function" else None)
            if n.op == "call_function" and v is not None and any(
                    not isinstance(s, int) for s in v.shape):
                raise LoweringError("data-dependent / dynamic shape", node=n.name,
                                    target=target_name(n))


def _is_quantized_graph(model) -> bool:
    return isinstance(model, fx.GraphModule) and any(
        n.op == "call_function" and (n.target in Q_OPS or n.target in DQ_OPS)
        for n in model.graph.nodes)


def _calibration_batches(calibration, example_inputs):
    if calibration is None:
        return [example_inputs]
    batches = []
    for b in calibration:
        if isinstance(b, torch.Tensor):
            batches.append((b,))
        else:
            batches.append(tuple(b))
    return batches


def export_module(model, example_inputs) -> fx.GraphModule:
    """``torch.export`` -> GraphModule, turning failures into :class:`LoweringError`.

    Example:
        >>> gm = export_module(torch.nn.ReLU(), (torch.ones(2),))
        >>> [n.op for n in gm.graph.nodes]
        ['placeholder', 'call_function', 'output']
    """
    try:
        ep = torch.export.export(model, tuple(example_inputs))
        return ep.module(check_guards=False)
    except LoweringError:
        raise
    except Exception as e:  # noqa: BLE001
        raise _export_error(e) from e


def lower(model, example_inputs, *, profile: str = "INT", quantization: QuantConfig | None = None,
          calibration=None) -> LoweredModel:
    """Lower ``model`` to a TOSA 1.0.0 flatbuffer.

    ``profile="INT"`` quantizes with :class:`TosaQuantizer` (``quantization`` config,
    ``calibration`` = iterable of input tuples; default: the example inputs) unless
    ``model`` already is a ``convert_pt2e`` graph (e.g. after QAT). ``profile="FP"``
    keeps float32.

    Example:
        >>> m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(),
        ...                         torch.nn.Flatten(), torch.nn.Linear(16, 3)).eval()
        >>> x = torch.randn(1, 1, 4, 4)
        >>> lm = lower(m, (x,), profile="INT", calibration=[(torch.randn(1, 1, 4, 4),) for _ in range(4)])
        >>> sorted(lm.op_counts)[:3], lm.input_qparams[0].dtype
        (['CONV2D', 'RESCALE', 'RESHAPE'], torch.int8)
    """
    profile = profile.upper()
    if profile not in ("INT", "FP"):
        raise ValueError(f"profile must be 'INT' or 'FP', got {profile!r}")
    example_inputs = tuple(example_inputs)
    if isinstance(model, torch.nn.Module) and not isinstance(model, fx.GraphModule):
        model = model.eval()
    already_q = _is_quantized_graph(model)
    if already_q:
        gm = copy.deepcopy(model)
        float_model = None
    else:
        gm = export_module(model, example_inputs)
        float_model = copy.deepcopy(gm)
    _check_dtypes(gm)
    propagate_values(gm, example_inputs)
    quantized_model = None
    if profile == "INT" and not already_q:
        from torchao.quantization.pt2e.quantize_pt2e import (
            convert_pt2e,
            prepare_pt2e,
            prepare_qat_pt2e,
        )

        cfg = quantization or QuantConfig()
        quantizer = TosaQuantizer(cfg, example_inputs)
        try:
            prepared = (prepare_qat_pt2e if cfg.qat else prepare_pt2e)(gm, quantizer)
            with torch.no_grad():
                for batch in _calibration_batches(calibration, example_inputs):
                    prepared(*batch)
            gm = convert_pt2e(prepared)
        except LoweringError:
            raise
        except Exception as e:  # noqa: BLE001
            raise LoweringError(f"PT2E quantization failed: {type(e).__name__}: {e}") from e
        quantized_model = copy.deepcopy(gm)
    elif already_q:
        quantized_model = copy.deepcopy(model)
    ctx = PassContext(profile=profile, example_inputs=example_inputs)
    if profile == "INT":
        propagate_values(gm, example_inputs)  # FP: already fresh from above
    log: list[str] = []
    run_pipeline(gm, ctx, log=log)
    cpu = _unsupported(gm, profile)
    if cpu:
        return _report_partial(gm, profile, cpu, float_model, quantized_model, log)
    em = Emitter(gm, profile)
    tosa = em.emit()
    w = em.writer
    [n for n in gm.graph.nodes if n.op == "placeholder"]
    outs = gm.graph.output_node().args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return LoweredModel(
        profile=profile,
        tosa=tosa,
        partitions=[Partition("tosa_0", tosa, [n.name for n in gm.graph.nodes
                                                 if n.op == "call_function"],
                              list(w.inputs), list(w.outputs))],
        cpu_nodes=[],
        provenance=em.provenance,
        quant_params=em.quant_params,
        float_model=float_model,
        quantized_model=quantized_model,
        input_names=list(w.inputs),
        output_names=list(w.outputs),
        input_qparams=[em.io_qparams.get(n) for n in w.inputs],
        output_qparams=[em.io_qparams.get(n) for n in w.outputs],
        input_dtypes=[w.dtypes[n] for n in w.inputs],
        output_torch_dtypes=[o.meta.get("torch_dtype", val(o).dtype if val(o) is not None else None)
                             for o in outs],
        op_counts=dict(w.op_counts),
        pass_log=log,
        graph_module=gm,
    )


def _unsupported(gm: fx.GraphModule, profile: str) -> list[CpuNode]:
    from .ops import REGISTRY

    cpu = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target not in REGISTRY:
            cpu.append(CpuNode(n.name, target_name(n), "operator not supported by the TOSA lowering"))
        elif profile == "INT" and val(n) is not None and val(n).is_floating_point() \
                and "qout" not in n.meta and "tosa_dtype" not in n.meta:
            cpu.append(CpuNode(n.name, target_name(n), "not quantized (left in float)"))
    return cpu


def _report_partial(gm, profile, cpu, float_model, quantized_model, log) -> LoweredModel:
    """Partition around unsupported nodes: supported islands become TOSA graphs."""
    from .partition import partition_and_lower

    return partition_and_lower(gm, profile, cpu, float_model, quantized_model, log)
