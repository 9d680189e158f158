"""``lower()``: nn.Module -> torch.export -> (PT2E quantization) -> passes -> TOSA 1.0."""

from __future__ import annotations

import copy
import functools
import operator
import re
from collections import Counter

import torch
import torch.fx as fx

from . import control_flow
from .calibration import first_non_finite
from .emitter import Emitter
from .errors import LoweringError
from .graph_utils import (
    DQ_OPS,
    Q_OPS,
    get_constant,
    has_dynamic_shape,
    propagate_values,
    target_name,
    tensor_values,
    touched_tensors,
    untyped_dtype,
    val,
)
from .lowered import CpuNode, LoweredModel, Partition
from .noise import quiet_export
from .ops.activation import EXACT_INT16_LOOKUPS
from .passes.base import PassContext
from .passes.fold_batch_norm import FoldBatchNorm
from .passes.functionalize import functionalize
from .passes.grad_regions import inline_grad_regions
from .passes.half import FP16_OPS
from .passes.int64 import fits_int32
from .pipeline import run_pipeline
from .quantizer import QuantConfig, TosaQuantizer
from .serialize import TORCH_TO_TOSA
from .threads import torch_threads

SUPPORTED_DTYPES = set(TORCH_TO_TOSA)
_aten = torch.ops.aten


def _export_error(e: Exception) -> LoweringError:
    msg = str(e).strip()
    first = msg.splitlines()[0] if msg else type(e).__name__
    node = None
    m = re.search(r"node (\w+)", msg) or re.search(r"`([\w.]+)`", msg)
    if m:
        node = m.group(1)
    line = re.search(r'File "([^"]+)", line (\d+)', msg)
    loc = f" at {line.group(1)}:{line.group(2)}" if line else ""
    # an `if` on a tensor's value guards on the data as a shape does: say both
    guard = "data-dependent" in msg or "GuardOnDataDependent" in type(e).__name__ or \
        "Could not guard" in msg
    kind = ("data-dependent control flow or shape (python branching on a tensor's value: "
            "torch.where or torch.cond instead)") if guard else "torch.export cannot trace the model"
    return LoweringError(f"{kind}: {type(e).__name__}: {first}{loc}", node=node)


def _dtype_problem(node: fx.Node) -> str | None:
    """Why ``node`` cannot be in a TOSA graph because of a dtype (of its result or of a
    tensor it reads), or None.

    Example:
        >>> gm = export_module(torch.nn.ReLU(), (torch.ones(2, dtype=torch.float64),))
        >>> _dtype_problem(next(n for n in gm.graph.nodes if n.op == "call_function"))
        'unsupported dtype torch.float64 (TOSA 1.0 has no such type)'
    """
    dtype = untyped_dtype(node)
    if dtype is not None:
        return f"unsupported dtype {dtype} (TOSA 1.0 has no such type)"
    if node.op == "call_function" and node.target not in FP16_OPS and any(
            t.dtype == torch.float16 for t in touched_tensors(node)):
        return "float16 tensors lower only through casts, data movement and basic element-wise ops"
    return None


def _check_shapes(gm: fx.GraphModule) -> None:
    for n in gm.graph.nodes:
        if n.op == "call_function" and has_dynamic_shape(val(n)):
            raise LoweringError("data-dependent / dynamic shape", node=n.name,
                                target=target_name(n))


#: why a node whose shape depends on the values (nonzero, masked_select...) stays on the CPU
DYNAMIC_SHAPE = "data-dependent output shape: TOSA 1.0 tensors have static shapes"


def _mark_dynamic(gm: fx.GraphModule) -> None:
    """Mark the nodes whose exported shape is data-dependent (read before value propagation
    replaces it by the example's concrete shape): :func:`_unsupported` keeps them on the CPU."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and has_dynamic_shape(n.meta.get("val")):
            n.meta["tv_dynamic"] = True


#: why a node with a tensor of no elements stays on the CPU (FoldConstants folds most of them)
ZERO_SIZED = "zero-element tensor: TOSA 1.0 tensors have no zero dimension"


def _zero_sized(node: fx.Node) -> str | None:
    """:data:`ZERO_SIZED` when ``node`` produces or reads a tensor with no elements (``cat``
    may read one: its emitter leaves it out), else None.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x"); x.meta["val"] = torch.zeros(2, 0)
        >>> _zero_sized(g.call_function(torch.ops.aten.relu.default, (x,)))
        'zero-element tensor: TOSA 1.0 tensors have no zero dimension'
    """
    reads = node.target is not torch.ops.aten.cat.default
    return ZERO_SIZED if any(t.numel() == 0 for t in touched_tensors(node, reads=reads)) else None


#: why a node computing on uint8 values stays on the CPU
UINT8 = "uint8 arithmetic: TOSA 1.0 has no unsigned 8-bit type (a uint8 tensor travels as INT8 bits)"
#: ops that move a uint8 tensor's bits unchanged (its value is only read by a cast, which
#: widens it as unsigned)
_UINT8_MOVES = frozenset({
    "view", "reshape", "_unsafe_view", "permute", "transpose", "t", "squeeze", "unsqueeze", "slice",
    "select", "cat", "stack", "flip", "expand", "clone", "alias", "contiguous", "flatten", "unflatten",
    "narrow", "index_select", "split", "split_with_sizes", "chunk", "unbind", "_to_copy", "to",
    "view_copy", "permute_copy", "squeeze_copy", "unsqueeze_copy", "slice_copy", "select_copy",
    "expand_copy"})


def _uint8_problem(node: fx.Node) -> str | None:
    """:data:`UINT8` when ``node`` computes with uint8 values (anything but moving them, or a
    cast from uint8 to another dtype), else None.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x"); x.meta["val"] = torch.zeros(2, dtype=torch.uint8)
        >>> add = g.call_function(torch.ops.aten.add.Tensor, (x, x)); add.meta["val"] = x.meta["val"]
        >>> _uint8_problem(add)[:16]
        'uint8 arithmetic'
    """
    made = tensor_values(node)
    if not any(t.dtype == torch.uint8 for t in touched_tensors(node)):
        return None
    if node.target is operator.getitem:
        return None
    name = getattr(node.target, "__name__", "").split(".")[0]
    if name not in _UINT8_MOVES:
        return UINT8
    if name in ("_to_copy", "to") and any(t.dtype == torch.uint8 for t in made):
        return UINT8  # (a cast to uint8 would have to wrap into 0..255: not done)
    return None


#: why a node whose int64 values do not fit in int32 stays on the CPU
INT64_RANGE = "int64 values beyond int32 (TOSA 1.0 carries int64 as int32; seen on the example inputs)"


def _int64_beyond_int32(gm: fx.GraphModule, node: fx.Node) -> str | None:
    """:data:`INT64_RANGE` when an int64 tensor ``node`` makes or reads holds, on the example
    inputs (or as a constant), a value int32 cannot hold: carried as int32 it would wrap
    (``ids * 3_000_000``, ``x + 2**40``, a hash). Else None.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x"); x.meta["tv_val"] = torch.tensor([5, 2**40])
        >>> add = g.call_function(torch.ops.aten.add.Tensor, (x, x)); add.meta["tv_val"] = x.meta["tv_val"] * 2
        >>> _int64_beyond_int32(fx.GraphModule(torch.nn.Module(), g), add)[:25]
        'int64 values beyond int32'
    """
    for n in (node, *node.all_input_nodes):
        value = n.meta.get("tv_val") if n.op != "get_attr" else get_constant(gm, n)
        values = value if isinstance(value, (tuple, list)) else (value,)
        for v in values:
            if isinstance(v, torch.Tensor) and v.dtype == torch.int64 and not fits_int32(v):
                return INT64_RANGE
    return None


def _check_dtypes(gm: fx.GraphModule) -> None:
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "call_function"):
            problem = _dtype_problem(n)
            if problem:
                raise LoweringError(problem, node=n.name,
                                    target=target_name(n) if n.op == "call_function" else None)
    _check_shapes(gm)


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
        with quiet_export():  # a failure is our one LoweringError line, not torch's log dump
            ep = torch.export.export(model, tuple(example_inputs))
        gm = ep.module(check_guards=False)
    except LoweringError:
        raise
    except Exception as e:  # noqa: BLE001
        raise _export_error(e) from e
    inline_grad_regions(gm)  # `with torch.no_grad():` inside forward: its ops, inline
    functionalize(gm)  # relu_, add_, copy_ ... -> relu, add, copy with readers rewired
    if control_flow.has_control_flow(gm):
        control_flow.inline_constant_operands(gm)  # a branch's weights: constants of the branch
    return gm


def _entry(fn):
    """``lower``'s frame: torch threads for the duration (``threads=``), the model named."""
    @functools.wraps(fn)
    def wrapper(model, example_inputs, **kwargs):
        with torch_threads(kwargs.get("threads")):
            lowered = fn(model, example_inputs, **kwargs)
        lowered.model_name = lowered.model_name or type(model).__name__
        return lowered

    return wrapper


@_entry
def lower(model, example_inputs, *, profile: str = "INT", quantization: QuantConfig | None = None,
          calibration=None, threads: int | None = None) -> LoweredModel:
    """Lower ``model`` to a TOSA 1.0.0 flatbuffer.

    ``profile="INT"`` quantizes with :class:`TosaQuantizer` (``quantization`` config,
    ``calibration`` = iterable of input tuples; default: the example inputs) unless
    ``model`` already is a ``convert_pt2e`` graph (e.g. after QAT). ``profile="FP"``
    keeps float32. ``threads``: torch's intra-op threads while lowering (default: the
    ``TOSA_VERIFY_THREADS`` environment variable, else half the cores; see
    :mod:`lowering.threads`), restored afterwards.

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
        functionalize(gm)  # e.g. a QAT BN's batch counter add_, a _guards_fn call
        float_model = None
    else:
        gm = export_module(model, example_inputs)
        float_model = copy.deepcopy(gm)
    _mark_dynamic(gm)  # such a node (nonzero...) stays on the CPU, as does a dtype TOSA lacks
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
        if not cfg.qat:
            # fold BNs ourselves first: prepare_pt2e's own conv-BN fusion breaks on grouped
            # transposed convolutions (QAT keeps its BNs: they train)
            FoldBatchNorm()(gm, PassContext(profile="INT"))
        try:
            if control_flow.has_control_flow(gm):  # every sub-graph prepared and converted too
                control_flow.attach_examples(gm)
                gm = control_flow.quantize(gm, quantizer,
                                           _calibration_batches(calibration, example_inputs),
                                           cfg.qat)
            else:
                prepared = (prepare_qat_pt2e if cfg.qat else prepare_pt2e)(gm, quantizer)
                with torch.no_grad():
                    for batch in _calibration_batches(calibration, example_inputs):
                        prepared(*batch)
                gm = convert_pt2e(prepared)
            gm.meta[EXACT_INT16_LOOKUPS] = cfg.exact_int16_lookups and cfg.activation_dtype == torch.int16
        except LoweringError:
            raise
        except Exception as e:  # noqa: BLE001
            # (a NaN or infinity in the float graph is the usual cause: name its node)
            cause = None if float_model is None else first_non_finite(
                float_model, _calibration_batches(calibration, example_inputs))
            raise LoweringError(cause or f"PT2E quantization failed: {type(e).__name__}: {e}") from e
        quantized_model = copy.deepcopy(gm)
    elif already_q:
        quantized_model = copy.deepcopy(model)
    ctx = PassContext(profile=profile, example_inputs=example_inputs)
    if profile == "INT":
        propagate_values(gm, example_inputs)  # FP: already fresh from above
    log: list[str] = []
    run_pipeline(gm, ctx, log=log)
    control_flow.prepare_subgraphs(gm, profile)
    cpu = _unsupported(gm, profile)
    if cpu:
        partial = _report_partial(gm, profile, cpu, float_model, quantized_model, log)
        if not partial.partitions and all(c.reason.startswith("unsupported dtype") for c in cpu):
            # nothing of the model has a TOSA type: a bad input, not a partial lowering
            raise LoweringError(cpu[0].reason, node=cpu[0].node, target=cpu[0].target)
        return partial
    em = Emitter(gm, profile)
    try:
        tosa = em.emit()
    except LoweringError as e:  # a visitor refused a node: it moves to the CPU, the rest is lowered
        partial = _report_partial(gm, profile, [], float_model, quantized_model, log)
        if not partial.cpu_nodes:  # every part emits alone: the whole graph must not fail silently
            raise LoweringError(f"the whole graph failed to emit: {e.reason}", node=e.node,
                                target=e.target) from e
        return partial
    w = em.writer
    outs = gm.graph.output_node().args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return LoweredModel(
        profile=profile,
        tosa=tosa,
        partitions=[Partition("tosa_0", tosa, [n.name for n in gm.graph.nodes
                                                 if n.op == "call_function"],
                              list(w.inputs), list(w.outputs),
                              [em.io_qparams.get(n) for n in w.inputs],
                              [em.io_qparams.get(n) for n in w.outputs])],
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
    """The call_function nodes of a prepared graph that cannot be in a TOSA ``profile`` graph,
    each with the reason."""
    from .ops import PROFILES, REGISTRY

    cpu = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        reason = DYNAMIC_SHAPE if n.meta.get("tv_dynamic") else \
            _dtype_problem(n) or _zero_sized(n) or _uint8_problem(n) or _int64_beyond_int32(gm, n)
        if reason is None and n.target not in REGISTRY:
            reason = _why_not_decomposed(n, profile)
        elif reason is None and profile not in PROFILES[n.target]:
            reason = f"operator has no TOSA {profile} lowering"
        elif reason is None and profile == "INT":
            reason = _unquantized_float(n)
        if reason is None and control_flow.is_control_flow(n):
            reason = control_flow.unsupported_inside(n, gm, lambda sub: _unsupported(sub, profile))
        if reason is None and n.target is operator.getitem and n.args[0].name in \
                {c.node for c in cpu}:
            reason = f"reads {n.args[0].name}, which stays on the CPU"
        if reason:
            cpu.append(CpuNode(n.name, target_name(n), reason))
    return cpu


def _why_not_decomposed(n: fx.Node, profile: str) -> str:
    """Why an op with no emitter is still in the graph: decomposed in another profile only
    (grid_sampler in FP), or not supported at all."""
    from .passes.rewrites import REWRITES

    other = REWRITES.get("DecomposeForTosa", {}).get(n.target)
    if other is not None and profile not in other.profiles:
        return f"operator has no TOSA {profile} lowering (decomposed in {'/'.join(sorted(other.profiles))} only)"
    return "operator not supported by the TOSA lowering"


def _unquantized_float(n: fx.Node) -> str | None:
    """In INT: why ``n`` would compute on float values (its result or an input not quantized)."""
    def quantized(x: fx.Node, reader: fx.Node | None) -> bool:
        v = val(x)
        return v is None or not v.is_floating_point() or "qout" in x.meta or \
            "tosa_dtype" in x.meta or (reader is not None and x.name in reader.meta.get("qin", {}))

    if not quantized(n, None):
        return "not quantized (left in float)"
    if any(not quantized(a, n) for a in n.all_input_nodes):
        return "reads a float tensor that is not quantized"
    return None


def _report_partial(gm, profile, cpu, float_model, quantized_model, log) -> LoweredModel:
    """Partition around unsupported nodes: each group of supported nodes becomes its own TOSA
    graph (``Partition.tosa``); ``LoweredModel.tosa`` stays ``None``.

    A group whose emission fails moves the failing node to the CPU (the reason is kept in
    ``cpu_nodes``) and the groups are formed again, so a partial lowering never raises.
    """
    cpu = list(cpu)
    cpu_names = {c.node for c in cpu}
    by_name = {n.name: n for n in gm.graph.nodes}
    while True:
        emitted = []
        for names in supported_groups(gm, cpu_names):
            em = Emitter(extract_subgraph(gm, names), profile)
            try:
                tosa = em.emit()
            except LoweringError as e:
                bad = [e.node] if e.node in names else names
                for name in bad:
                    cpu.append(CpuNode(name, target_name(by_name[name]), f"lowering failed: {e.reason}"))
                    cpu_names.add(name)
                break
            emitted.append((names, em, tosa))
        else:
            break
    parts, provenance, quant_params, counts = [], {}, {}, Counter()
    for i, (names, em, tosa) in enumerate(emitted):
        ins, outs = list(em.writer.inputs), list(em.writer.outputs)
        parts.append(Partition(f"tosa_{i}", tosa, names, ins, outs,
                               [em.io_qparams.get(t) for t in ins],
                               [em.io_qparams.get(t) for t in outs]))
        provenance.update(em.provenance)
        quant_params.update(em.quant_params)
        counts.update(em.writer.op_counts)
    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    cpu.sort(key=lambda c: order.get(c.node, -1))
    return LoweredModel(profile=profile, tosa=None, partitions=parts, cpu_nodes=cpu,
                        provenance=provenance, quant_params=quant_params, float_model=float_model,
                        quantized_model=quantized_model, op_counts=dict(counts), pass_log=log,
                        graph_module=gm)


# --------------------------------------------------------------------------- subgraphs
def supported_groups(gm: fx.GraphModule, cpu_names) -> list[list[str]]:
    """Group the call_function nodes of ``gm`` not named in ``cpu_names`` into partitions.

    Groups are as large as possible without a cycle through the CPU nodes (each can run as
    one TOSA graph), listed in an order they can run in (a group after every group it
    depends on, otherwise by graph position), each a list of node names in graph order.

    Example:
        >>> gm = export_module(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Sigmoid(),
        ...                                        torch.nn.Tanh()), (torch.ones(2),))
        >>> supported_groups(gm, {"sigmoid"})
        [['relu'], ['tanh']]
    """
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    cpu_names = set(cpu_names)

    class _Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node: fx.Node) -> bool:
            return node.op == "call_function" and node.name not in cpu_names

    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    proposed = CapabilityBasedPartitioner(gm, _Support(), allows_single_node_partition=True
                                          ).propose_partitions()
    groups = [sorted((n.name for n in p.nodes), key=order.__getitem__) for p in proposed]
    groups = [g for g in groups if g]
    # execution order: a group runs after every group it depends on (through any path)
    group_of = {name: i for i, g in enumerate(groups) for name in g}
    upstream: dict[str, set[int]] = {}
    for n in gm.graph.nodes:
        deps: set[int] = set()
        for a in n.all_input_nodes:
            deps |= upstream.get(a.name, set())
            if a.name in group_of:
                deps.add(group_of[a.name])
        upstream[n.name] = deps
    needs = {i: set().union(*(upstream[name] for name in g)) - {i} for i, g in enumerate(groups)}
    done: list[int] = []
    while len(done) < len(groups):
        ready = [i for i in needs if i not in done and needs[i] <= set(done)]
        done.append(min(ready, key=lambda i: order[groups[i][0]]))
    return [groups[i] for i in done]


_PLACEHOLDER_META_DROP = ("layout", "qin", "fused_activation")


def extract_subgraph(gm: fx.GraphModule, names) -> fx.GraphModule:
    """A standalone GraphModule computing the nodes ``names`` of ``gm``.

    Values produced outside become placeholders named after their producer (first use
    first), carrying its value and quantization metadata in PyTorch dimension order;
    constants stay ``get_attr`` (shared with ``gm``); every node used outside the group or
    by the graph output becomes an output, in graph order. Node names are kept.

    Example:
        >>> gm = export_module(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Sigmoid()),
        ...                    (torch.ones(2),))
        >>> sub = extract_subgraph(gm, ["sigmoid"])
        >>> [(n.op, n.name) for n in sub.graph.nodes]
        [('placeholder', 'relu'), ('call_function', 'sigmoid'), ('output', 'output')]
    """
    group = set(names)
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    outputs = []
    for node in gm.graph.nodes:
        if node.name not in group:
            continue
        for a in node.all_input_nodes:
            if a in env or a.name in group:
                continue
            if a.op == "get_attr":
                env[a] = graph.create_node("get_attr", a.target, name=a.name)
                env[a].meta = dict(a.meta)
            else:
                env[a] = graph.placeholder(a.name)
                env[a].meta = {k: v for k, v in a.meta.items() if k not in _PLACEHOLDER_META_DROP}
                env[a].meta["layout"] = None
        env[node] = graph.node_copy(node, env.__getitem__)
        if any(u.name not in group for u in node.users):
            outputs.append(env[node])
    graph.output(outputs)
    sub = fx.GraphModule(gm, graph)
    sub.meta.update({k: v for k, v in gm.meta.items() if k.startswith("tv_")})  # (lowering options)
    return sub


def prepare_graph_module(gm: fx.GraphModule, profile: str, log: list | None = None) -> tuple:
    """Give ``gm`` value metadata and run the pass pipeline over it, in place.

    ``gm`` holds aten ops (plus quantize/dequantize ops in the INT profile) with constants as
    ``get_attr``; every placeholder must carry ``meta["val"]`` (values are propagated from
    zeros of that shape and dtype). In INT, an integer placeholder read through dequantize
    nodes takes their parameters -- the shape of a delegated partition: int8 in, int8 out.
    Returns the example inputs used.

    Example:
        >>> gm = export_module(torch.nn.ReLU(), (torch.ones(2),))
        >>> prepare_graph_module(gm, "FP")[0].shape
        torch.Size([2])
    """
    from .passes.fold_qdq import qparams_from

    profile = profile.upper()
    example = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta.get("val")
            if not isinstance(v, torch.Tensor):
                raise LoweringError("graph input without tensor metadata", node=n.name)
            example.append(torch.zeros(tuple(int(s) for s in v.shape), dtype=v.dtype))
    example = tuple(example)
    propagate_values(gm, example)
    if profile == "INT":
        for n in gm.graph.nodes:
            dqs = [u for u in n.users if u.op == "call_function" and u.target in DQ_OPS]
            if n.op == "placeholder" and dqs and not val(n).is_floating_point():
                n.meta["qout"] = qparams_from(gm, dqs[0])
    run_pipeline(gm, PassContext(profile=profile, example_inputs=example), log=log)
    return example


def lower_graph_module(gm: fx.GraphModule, profile: str,
                       log: list | None = None) -> tuple[bytes, Emitter]:
    """:func:`prepare_graph_module`, then emit ``gm`` as one TOSA graph.

    Raises :class:`LoweringError` naming the first node that cannot be lowered.

    Example:
        >>> gm = export_module(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()),
        ...                    (torch.ones(1, 4),))
        >>> tosa, em = lower_graph_module(gm, "FP")
        >>> tosa[4:8], sorted(em.writer.op_counts)
        (b'TOSA', ['CLAMP', 'CONV2D', 'RESHAPE'])
    """
    _check_dtypes(gm)
    prepare_graph_module(gm, profile, log)
    cpu = _unsupported(gm, profile.upper())
    if cpu:
        raise LoweringError(cpu[0].reason, node=cpu[0].node, target=cpu[0].target)
    em = Emitter(gm, profile.upper())
    return em.emit(), em
