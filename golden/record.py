"""Record a golden of a model: quantize, lower, run, per-tensor statistics, manifest.

:func:`record_model` is what the ``tosa_golden`` pytest fixture and ``tosa-verify check --golden``
use; :func:`record_lowered` does the same for a model that is already lowered (so ``check`` does
not lower twice). The golden holds

* the TOSA-quantized inputs and the TOSA outputs (numpy interpreter, bit-exact);
* per TOSA tensor (graph inputs and every tensor an operator computes), in topological order:
  :func:`golden.tensor_stats` in real units where the tensor has a scale (its own quantization
  parameters, or those of the tensor it is a RESHAPE/TRANSPOSE of), the SQNR against the float
  model from :func:`tosa_verify.drift`, and the torch node and module path from provenance;
* a manifest: tool versions, a model source hash (state_dict bytes + class source), the
  quantization config and a digest of the resulting quantization parameters, the input seed,
  ``tensor_order``, and a Vela summary per target (``{"cycles": ..., ...}``).

Inputs are deterministic from the seed: each example input's shape and dtype, floats drawn
from a normal distribution with the example's mean and standard deviation and clipped to its
range (so an image model still sees image-like values), integers uniform in the example's range.

>>> from golden.record import record_model
>>> from lowering import zoo
>>> model, example, calibration = zoo.digits_cnn()                          # doctest: +SKIP
>>> g = record_model(model, example, calibration=calibration, targets=("ethos-u55-128",))  # doctest: +SKIP
>>> g.performance["ethos-u55-128"]["cycles"]                                 # doctest: +SKIP
36400
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from .store import Golden, tensor_stats, tool_versions

__all__ = ["model_hash", "quantization_summary", "record_lowered", "record_model", "seeded_inputs"]


def seeded_inputs(example_inputs: Sequence[Any], seed: int = 0) -> tuple[Any, ...]:
    """Deterministic inputs shaped like ``example_inputs`` (see the module docstring).

    >>> import torch
    >>> a = seeded_inputs((torch.zeros(2, 3),), seed=1)[0]
    >>> tuple(a.shape), bool(torch.equal(a, seeded_inputs((torch.zeros(2, 3),), seed=1)[0]))
    ((2, 3), True)
    """
    import torch

    gen = torch.Generator().manual_seed(int(seed))
    out = []
    for x in example_inputs:
        t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
        if t.is_floating_point():
            tf = t.double()
            mean, std = float(tf.mean()), float(tf.std()) if t.numel() > 1 else 1.0
            lo, hi = float(tf.min()), float(tf.max())
            if not std > 0:
                std = 1.0
            v = torch.randn(t.shape, generator=gen, dtype=torch.float64) * std + mean
            if hi > lo:
                v = v.clamp(lo, hi)
            out.append(v.to(t.dtype))
        elif t.dtype == torch.bool:
            out.append(torch.randint(0, 2, t.shape, generator=gen).bool())
        else:
            lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, 1)
            out.append(torch.randint(lo, hi + 1, t.shape, generator=gen, dtype=torch.int64).to(t.dtype))
    return tuple(out)


def model_hash(model: Any) -> str:
    """SHA-256 of a model's state_dict bytes (names, dtypes, shapes, values) and class source.

    >>> import torch
    >>> model_hash(torch.nn.Linear(2, 2)) == model_hash(torch.nn.Linear(2, 2))
    False
    """
    import torch

    h = hashlib.sha256()
    state = model.state_dict() if hasattr(model, "state_dict") else {}
    for name in sorted(state):
        value = state[name]
        h.update(name.encode())
        if hasattr(value, "detach"):
            arr = value.detach().cpu().contiguous()
            h.update(f"{arr.dtype}{tuple(arr.shape)}".encode())
            h.update(arr.reshape(-1).view(torch.uint8).numpy().tobytes())
    cls = type(model)
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        source = getattr(model, "code", "") or f"{cls.__module__}.{cls.__qualname__}"
    h.update(source.encode())
    return "sha256:" + h.hexdigest()


def quantization_summary(lowered: Any, quantization: Any = None) -> dict[str, Any]:
    """The quantization config (as plain values) and a digest of the resulting parameters.

    >>> quantization_summary(type("L", (), {"profile": "FP", "quant_params": {}})())["profile"]
    'FP'
    """
    config: dict[str, Any] = {}
    if quantization is None and str(getattr(lowered, "profile", "INT")).upper() == "INT":
        import lowering

        quantization = lowering.QuantConfig()  # what lower() uses: spelled out, so goldens compare by value
    if quantization is not None and dataclasses.is_dataclass(quantization):
        config = {k: str(v) if not isinstance(v, (bool, int, float, str, type(None))) else v
                  for k, v in dataclasses.asdict(quantization).items()}
    elif quantization is not None:
        config = {"repr": repr(quantization)}
    params = json.dumps(getattr(lowered, "quant_params", {}) or {}, sort_keys=True, default=str)
    return {
        "profile": str(getattr(lowered, "profile", "")),
        "config": config or "default",
        "params_sha256": hashlib.sha256(params.encode()).hexdigest()[:16],
    }


def _performance(program: Any) -> dict[str, Any]:
    perf = program.performance
    return {
        "cycles": int(perf.total_cycles),
        "npu_cycles": int(perf.npu_cycles),
        "inference_time_ms": float(perf.inference_time_ms),
        "sram_kib": float(perf.sram_used_kib),
        "off_chip_kib": float(perf.off_chip_used_kib),
        "macs": int(perf.macs),
        "system_config": str(program.system_config),
        "memory_mode": str(program.memory_mode),
    }


def record_lowered(lowered: Any, inputs: Sequence[Any], *, programs: Sequence[Any] = (), model: Any = None,
                   quantization: Any = None, seed: int | None = None, drift_report: Any = None) -> Golden:
    """Record a golden of an already lowered model on ``inputs`` (float, as for the model).

    ``programs`` are Vela compilations (``ethosu.compiler.NpuProgram``) whose summaries go into
    ``manifest["performance"]``; ``drift_report`` a :func:`tosa_verify.drift` report of the same
    run, if already computed (otherwise a light one is computed for the SQNR column).

    >>> g = record_lowered(lm, example_inputs, model=model, seed=0)   # doctest: +SKIP
    """
    import tosa_verify
    from tosa_verify.dtypes import to_working

    graph = tosa_verify.load(lowered.tosa)
    block = graph.main
    tosa_inputs = list(lowered.quantize_inputs(*inputs))
    result = tosa_verify.run(graph, tosa_inputs, capture=True)
    if drift_report is None:
        drift_report = tosa_verify.drift(lowered, inputs, reference=False, local=False, rounding=False,
                                         captured=result.tensors)
    rows = {r.tensor: r for r in drift_report.rows}
    provenance = getattr(lowered, "provenance", {}) or {}
    quant_params = getattr(lowered, "quant_params", {}) or {}
    order = list(block.inputs) + [o for op in block.operators if op.op not in ("CONST", "CONST_SHAPE")
                                  for o in op.outputs]
    stats = {}
    for name in order:
        decl = block.tensors.get(name)
        if decl is None or name not in result.tensors:
            continue
        value = np.asarray(result.tensors[name])
        if value.dtype.kind == "V":
            value = to_working(value, decl.dtype, what=name).astype(np.float64)
        row = rows.get(name)
        scale, zp = None, 0
        if row is not None and row.scale is not None:
            scale, zp = row.scale, row.zero_point
        elif name in quant_params and len(quant_params[name].get("scale") or []) == 1:
            scale, zp = float(quant_params[name]["scale"][0]), int(quant_params[name]["zero_point"][0])
        prov = provenance.get(name) or {}
        s = tensor_stats(value, scale=scale, zero_point=zp, torch_node=str(prov.get("fx_node", "")),
                         module_path=str(prov.get("nn_module_stack", "")))
        if row is not None and row.total is not None:
            s.sqnr_db = float(row.total.sqnr_db)
        stats[name] = s
    manifest: dict[str, Any] = {
        "versions": tool_versions(),
        "profile": str(getattr(lowered, "profile", "")),
        "quantization": quantization_summary(lowered, quantization),
        "input_seed": seed,
        "tensor_order": [n for n in order if n in stats],
        "tosa_sha256": hashlib.sha256(bytes(lowered.tosa)).hexdigest(),
        "op_counts": dict(getattr(lowered, "op_counts", {}) or {}),
        "performance": {str(p.target): _performance(p) for p in programs},
    }
    if model is not None:
        manifest["model"] = f"{type(model).__module__}.{type(model).__qualname__}"
        manifest["model_hash"] = model_hash(model)
    return Golden(
        manifest=manifest,
        inputs={n: np.asarray(result.tensors[n]) for n in block.inputs},
        outputs={n: np.asarray(v) for n, v in zip(block.outputs, result.outputs, strict=True)},
        stats=stats,
    )


def record_model(model: Any, example_inputs: Sequence[Any], *, profile: str = "INT", calibration: Any = None,
                 targets: Sequence[str] = (), seed: int = 0, quantization: Any = None) -> Golden:
    """Quantize and lower ``model``, run it on seeded inputs and record a golden.

    ``targets`` are Ethos-U targets (``"ethos-u55-128"``, ...) compiled with Vela for the
    performance figures; ``quantization`` a ``lowering.QuantConfig`` (default config if None).

    >>> g = record_model(torch.nn.Linear(4, 2), (torch.randn(1, 4),))   # doctest: +SKIP
    >>> list(g.outputs)                                                  # doctest: +SKIP
    ['linear']
    """
    import lowering

    lowered = lowering.lower(model, tuple(example_inputs), profile=profile, quantization=quantization,
                             calibration=calibration)
    programs = []
    if targets:
        from ethosu.compiler import compile_tosa

        programs = [compile_tosa(lowered.tosa, t) for t in targets]
    inputs = seeded_inputs(tuple(example_inputs), seed)
    return record_lowered(lowered, inputs, programs=programs, model=model, quantization=quantization, seed=seed)
