"""The join: TOSA tensors matched with the PyTorch nodes whose values they hold, and :func:`drift`.

The PyTorch side (float and fake-quant values of every node, in float64) comes from the lowered
model's :meth:`lowering.LoweredModel.torch_reference`, so this package never imports torch or
``lowering``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import reference as reference_model
from ..dtypes import dtype_info, to_working
from ..graph import Block, Graph, Operator, load
from .local import _CONST_OPS, _capture_tosa, _is_const, _local_errors
from .metrics import (
    _Q,
    _grid_stats,
    _histogram,
    _layout_candidates,
    _qparams,
    _Ref,
    _stats,
    _to_tosa_layout,
)
from .report import DriftReport, DriftRow, ErrorStats, ExecutorCheck
from .rounding import _rounding

#: Operators that move data without changing values (aliases of a node's value).
ALIAS_OPS = frozenset({"RESHAPE", "TRANSPOSE", "IDENTITY"})


def _get(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default) if not isinstance(obj, Mapping) else obj.get(name, default)


@dataclass
class _Join:
    """What the join knows about one graph and its PyTorch models (working data)."""

    block: Block
    env: Mapping[str, np.ndarray]
    provenance: Mapping[str, Mapping[str, Any]]
    quant_params: Mapping[str, Mapping[str, Any]]
    float_cap: Any
    fq_cap: Any
    float_chain: Mapping[str, str] = field(default_factory=dict)
    fq_chain: Mapping[str, str] = field(default_factory=dict)
    layouts: Mapping[str, Any] = field(default_factory=dict)
    producer: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    alias: dict[str, str] = field(default_factory=dict)
    node_of: dict[str, str] = field(default_factory=dict)
    float_of: dict[str, str] = field(default_factory=dict)
    float_outputs: list[str] = field(default_factory=list)

    def fx_of(self, name: str) -> str:
        return str((self.provenance.get(name) or {}).get("fx_node", ""))

    def origin(self, name: str) -> str:
        return str((self.provenance.get(name) or {}).get("decomposed_from", "") or "")


def drift(
    lowered: Any,
    inputs: Sequence[Any],
    *,
    reference: bool | Mapping[str, np.ndarray] = True,
    local: bool = True,
    rounding: bool = True,
    rounding_travel: int | None = None,
    tie_window: float = 0.05,
    captured: Mapping[str, np.ndarray] | None = None,
    executors: Mapping[str, Mapping[str, np.ndarray]] | None = None,
) -> DriftReport:
    """Per-layer quantization drift of a lowered model on ``inputs`` (float, as for the model).

    ``lowered`` is a ``lowering.LoweredModel`` (or anything with its attributes and
    ``torch_reference()``). ``reference``: run the TOSA reference model for the executor column
    (or pass its captured tensors, e.g. ``DiffReport.expected``); ``local``: compute the local
    errors (each layer run alone); ``rounding``: the rounding explainer, re-running downstream for
    every changed op, or only for the ``rounding_travel`` ops with most changed elements.
    ``captured``: the interpreter's tensors of this run, if already computed (reference form is
    accepted). ``executors``: other executors' captured tensors by label (e.g. ``{"VGF":
    vgf.capture(...).tensors}``), each compared with the interpreter per row
    (:attr:`DriftRow.executors`, a table column and a share of the attribution).

    >>> report = drift(lm, example_inputs)     # doctest: +SKIP
    >>> report.output_rows[0].total.sqnr_db    # doctest: +SKIP
    24.6
    """
    t_start = time.perf_counter()
    seconds: dict[str, float] = {}
    notes: list[str] = []
    tosa = _get(lowered, "tosa")
    if tosa is None:
        raise ValueError("drift needs a single TOSA graph; this model was split into partitions: "
                         "analyse each of lowered.partition_models()")
    graph = load(tosa)
    profile = str(_get(lowered, "profile", "INT") or "INT").upper()
    inputs = tuple(inputs)
    tosa_inputs = list(lowered.quantize_inputs(*inputs))
    torch_ref = lowered.torch_reference()
    j = _execute(lowered, graph, inputs, tosa_inputs, torch_ref, captured, seconds, notes)
    ref_values = _reference_values(graph, tosa_inputs, reference, seconds, notes)
    _bind(j, profile)
    rows, refs = _rows(j, ref_values, executors, quantized=torch_ref.quantized_model is not None)
    by_name = {r.tensor: r for r in rows}
    _mark_shared_ranges(j.block, rows, by_name)
    if local:
        t = time.perf_counter()
        _local_errors(graph, j.env, rows, refs, j.producer, notes)
        seconds["local"] = time.perf_counter() - t
    _copy_to_aliases(rows, refs, by_name)
    report = DriftReport(profile=profile, rows=rows, outputs=list(j.block.outputs), notes=notes,
                         seconds=seconds, op_nodes=_op_nodes(j))
    if rounding and profile == "INT":
        t = time.perf_counter()
        _rounding(graph, j.env, report, j.provenance, j.quant_params, torch_ref, j.alias, rounding_travel,
                  tie_window)
        seconds["rounding"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t_start
    return report


def _execute(lowered: Any, graph: Graph, inputs: tuple, tosa_inputs: list, torch_ref: Any,
             captured: Mapping[str, np.ndarray] | None, seconds: dict[str, float], notes: list[str]) -> _Join:
    """Run the interpreter (unless ``captured``) and the PyTorch models; the join's inputs."""
    block = graph.main
    t = time.perf_counter()
    if captured is not None:
        env = {}
        for name, value in captured.items():
            decl = block.tensors.get(name) or block.shapes.get(name)
            env[name] = to_working(np.asarray(value), decl.dtype, what=name) if decl is not None else value
    else:
        env = _capture_tosa(graph, tosa_inputs)
    seconds["interpreter"] = time.perf_counter() - t
    t = time.perf_counter()
    float_cap = torch_ref.capture(inputs, fake_quant=False)
    fq_cap = torch_ref.capture(inputs, fake_quant=True)
    seconds["torch"] = time.perf_counter() - t
    if torch_ref.float_model is None:
        notes.append("no float model (already-quantized input): float columns are missing")
    j = _Join(block, env, _get(lowered, "provenance", {}) or {}, _get(lowered, "quant_params", {}) or {},
              float_cap, fq_cap, layouts=torch_ref.layouts())
    owners = _owners(j, set(_get(lowered, "nodes_elsewhere", ()) or ()))
    j.float_chain = torch_ref.folded_chains(owners, fake_quant=False)
    j.fq_chain = torch_ref.folded_chains(owners, fake_quant=True)
    j.float_outputs = torch_ref.output_nodes()
    return j


def _owners(j: _Join, elsewhere: set[str]) -> set[str]:
    """Nodes that own a computed TOSA tensor.

    A node that owns none was folded into its input's tensor by the lowering (a BatchNorm into the
    conv, a ReLU into the RESCALE before it), so that tensor holds the folded node's value. Of one
    partition of a partly lowered model, nodes computed elsewhere (``elsewhere``: on the CPU, in
    another partition) are not folded into this graph's tensors.
    """
    block = j.block
    owners: set[str] = set()
    for name in list(block.inputs) + [o for op in block.operators if op.op not in _CONST_OPS for o in op.outputs]:
        p = j.provenance.get(name) or {}
        owners |= {str(p.get("fx_node", "")), str(p.get("decomposed_from", "") or "")}
    return owners | elsewhere


def _reference_values(graph: Graph, tosa_inputs: list, reference: bool | Mapping[str, np.ndarray],
                      seconds: dict[str, float], notes: list[str]) -> Mapping[str, np.ndarray] | None:
    """The reference model's tensors for the executor column (given, computed, or None)."""
    if isinstance(reference, Mapping):
        return reference
    if not reference:
        return None
    t = time.perf_counter()
    try:
        return reference_model.run(graph, tosa_inputs, capture=True).tensors
    except Exception as exc:  # noqa: BLE001 - the executor column is optional
        notes.append(f"reference model unavailable: {type(exc).__name__}: {exc}")
        return None
    finally:
        seconds["reference"] = time.perf_counter() - t


def _bind(j: _Join, profile: str) -> None:
    """Which TOSA tensors hold a node's value (``alias``) and which node values they hold."""
    block = j.block
    for i, op in enumerate(block.operators):
        for o in op.outputs:
            j.producer[o] = i
    j.order = list(block.inputs) + [o for op in block.operators if op.op not in _CONST_OPS for o in op.outputs]
    if profile == "INT" and j.quant_params:
        seeds = [n for n in j.order if n in j.quant_params]
    else:
        seeds = [n for n in j.order if j.fx_of(n) and n == j.fx_of(n)]
    j.alias = {s: s for s in seeds}
    _follow_aliases(j)
    _node_values(j)


def _follow_aliases(j: _Join) -> None:
    """RESHAPE/TRANSPOSE/IDENTITY of a bound tensor hold the same node's value (both directions)."""
    block, alias, fx_of = j.block, j.alias, j.fx_of
    for op in block.operators:
        if op.op in ALIAS_OPS and op.inputs and op.outputs:
            src, dst = op.inputs[0], op.outputs[0]
            if fx_of(src) and fx_of(src) == fx_of(dst):
                if src in alias and dst not in alias:
                    alias[dst] = alias[src]
    # backwards aliases (a RESHAPE whose output is the bound tensor, e.g. linear__conv -> linear)
    for op in reversed(block.operators):
        if op.op in ALIAS_OPS and op.inputs and op.outputs:
            src, dst = op.inputs[0], op.outputs[0]
            if fx_of(src) and fx_of(src) == fx_of(dst) and dst in alias and src not in alias \
                    and not _is_const(block, src):
                decl_s, decl_d = block.tensors.get(src), block.tensors.get(dst)
                if decl_s is not None and decl_d is not None and decl_s.dtype == decl_d.dtype:
                    alias[src] = alias[dst]


def _node_values(j: _Join) -> None:
    """The PyTorch values of each row: fake-quant node (``node_of``) and float node (``float_of``).

    Of a decomposition (softmax -> amax, sub, exp, ...) only the last piece holds the original
    node's value.
    """
    fq_acts, float_acts = j.fq_cap.values, j.float_cap.values
    last_of_original: dict[str, str] = {}
    for name in j.order:
        if name not in j.alias:
            continue
        fx, orig = j.fx_of(name), j.origin(name)
        known = fx in fq_acts or fx in float_acts
        j.node_of[name] = fx if known or not (orig in fq_acts or orig in float_acts) else orig
        if fx in float_acts:
            j.float_of[name] = j.float_chain.get(fx, fx)
        elif orig in float_acts:
            last_of_original[orig] = j.alias[name]
    for name in j.order:
        if name in j.alias and name not in j.float_of:
            orig = j.origin(name)
            if orig and last_of_original.get(orig) == j.alias[name]:
                j.float_of[name] = j.float_chain.get(orig, orig)
    for name, node in zip(j.block.outputs, j.float_outputs, strict=False):
        if name in j.alias and name not in j.float_of and node in float_acts:
            j.float_of[name] = node


def _rows(j: _Join, ref_values: Mapping[str, np.ndarray] | None,
          executors: Mapping[str, Mapping[str, np.ndarray]] | None,
          *, quantized: bool) -> tuple[list[DriftRow], dict[str, _Ref]]:
    """Rows with references (every row) and metrics (primary rows; aliases copy them later)."""
    block, env = j.block, j.env
    rows: list[DriftRow] = []
    refs: dict[str, _Ref] = {}
    for name in j.order:
        if name not in j.alias or name not in block.tensors:
            continue
        row, ref = _make_row(j, name, len(rows))
        rows.append(row)
        if ref is not None:
            refs[name] = ref
    for row in rows:
        ref = refs.get(row.tensor)
        if ref is not None and row.alias_of is None:
            _row_metrics(row, ref, env[row.tensor], quantized=quantized)
        if ref_values is not None and row.tensor in ref_values and row.tensor in env:
            _executor(row, block, ref_values[row.tensor], env[row.tensor], ref.q if ref else None)
        for label, values in (executors or {}).items():
            if row.tensor in values and row.tensor in env:
                row.executors[label] = ExecutorCheck(*_executor_stats(
                    block, row.tensor, values[row.tensor], env[row.tensor], ref.q if ref else None))
    return rows, refs


def _copy_to_aliases(rows: Sequence[DriftRow], refs: Mapping[str, _Ref], by_name: Mapping[str, DriftRow]) -> None:
    """An alias row shows its seed row's errors."""
    for row in rows:
        seed = by_name.get(row.alias_of or "")
        if seed is not None and row.tensor in refs:
            for attr in ("quantization", "lowering", "total", "local", "local_lowering"):
                value = getattr(seed, attr)
                setattr(row, attr, dataclasses.replace(value) if value is not None else None)
            row.clipped_fraction = seed.clipped_fraction
            row.steps_histogram = list(seed.steps_histogram)
            row.lowering_histogram = list(seed.lowering_histogram)
            row.shares_range_with = seed.shares_range_with


def _op_nodes(j: _Join) -> dict[int, tuple[str, str, str]]:
    """Every non-constant operator: index -> (op, torch node, module path)."""
    out = {}
    for i, op in enumerate(j.block.operators):
        if op.op not in _CONST_OPS and op.outputs:
            prov = j.provenance.get(op.outputs[0]) or {}
            out[i] = (op.op, str(prov.get("fx_node", "")), str(prov.get("nn_module_stack", "")))
    return out


def _make_row(j: _Join, name: str, position: int) -> tuple[DriftRow, _Ref | None]:
    """The row of one tensor and its float / fake-quant references in TOSA layout."""
    block, env, alias, provenance, quant_params = j.block, j.env, j.alias, j.provenance, j.quant_params
    node_of, float_of, fq_chain, producer, layouts = j.node_of, j.float_of, j.fq_chain, j.producer, j.layouts
    float_acts, fq_acts = j.float_cap.values, j.fq_cap.values
    decl = block.tensors[name]
    seed = alias[name]
    prov = provenance.get(name) or {}
    fx = node_of.get(name, "")
    op_index = producer.get(name, -1)
    is_int = not dtype_info(decl.dtype).is_float
    q = _qparams(quant_params.get(seed), block.tensors[seed].dtype) if is_int else None
    row = DriftRow(
        position=position, tensor=name, op=block.operators[op_index].op if op_index >= 0 else "input",
        op_index=op_index, torch_node=fx or str(prov.get("fx_node", "")), float_node="",
        target=str(prov.get("target", "")), module_path=str(prov.get("nn_module_stack", "")),
        dtype=decl.dtype, shape=tuple(decl.shape), layout="", scale=q.scale if q else None,
        zero_point=q.zp if q else 0, alias_of=None if seed == name else seed,
    )
    value = env.get(name)
    if value is None:
        row.note = "not computed by the interpreter"
        return row, None
    if is_int and q is None:
        row.note = "no per-tensor quantization parameters"
        return row, None
    fnode = float_of.get(name, "")
    fval = float_acts.get(fnode) if fnode else None
    qnode = fq_chain.get(fx, fx)
    qval = fq_acts.get(qnode)
    base = qval if qval is not None else fval
    if base is None:
        row.note = "no PyTorch value for this tensor's node"
        return row, None
    row.float_node = fnode if fval is not None else ""
    cands = _layout_candidates(decl.shape, base.shape)
    if not cands:
        row.note = f"shape {list(decl.shape)} does not match the node's {list(base.shape)}"
        return row, None
    choice = cands[0]
    recorded = layouts.get(fx, "missing")
    if len(cands) > 1 and name == fx and recorded != "missing":
        want = tuple(recorded) if recorded else None
        choice = next((c for c in cands if (want is None and c[0] in ("same", "reshape"))
                       or (want is not None and c[1] == want)), choice)
    elif len(cands) > 1:
        actual = q.dequantize(value) if q else np.asarray(value, np.float64)

        def err(c: tuple[str, tuple[int, ...] | None]) -> float:
            ref = _to_tosa_layout(base, decl.shape, c[1])
            ref = q.dequantize(q.quantize(ref)) if q else ref
            return float(np.mean(np.abs(ref - actual)))

        choice = min(cands, key=err)
    row.layout = choice[0]
    f_t = _to_tosa_layout(fval, decl.shape, choice[1]) if fval is not None and fval.shape == base.shape else None
    q_t = _to_tosa_layout(qval, decl.shape, choice[1]) if qval is not None else None
    if q is not None and q_t is not None:
        q_int = q.quantize(q_t)
        own, used_scale, used_zp = j.fq_cap.own_quantization.get(qnode, (None, 0.0, 0))
        if own is not None and own.shape == base.shape and \
                math.isclose(used_scale, q.scale, rel_tol=1e-9) and used_zp == q.zp:
            q_int = _to_tosa_layout(own, decl.shape, choice[1]).astype(np.float64)
        return row, _Ref(q, f_t, q.dequantize(q_int), q_int)
    return row, _Ref(q, f_t, q_t if q_t is not None else f_t, None)  # FP: fake-quant == float


def _row_metrics(row: DriftRow, ref: _Ref, value: np.ndarray, *, quantized: bool) -> None:
    q = ref.q
    scale = q.scale if q else None
    actual = q.dequantize(value) if q else np.asarray(value, np.float64)
    f_t, fq = ref.float_value, ref.fq_value
    if f_t is not None:
        row.total = _stats(f_t, actual, scale)
        if q is not None:
            lo, hi = q.dequantize(q.qmin), q.dequantize(q.qmax)
            row.clipped_fraction = float(np.mean((f_t < lo - 0.5 * q.scale) | (f_t > hi + 0.5 * q.scale)))
            row.steps_histogram = _histogram((actual - f_t) / q.scale)
        if quantized and fq is not None:
            row.quantization = _stats(f_t, fq, scale)
    if fq is not None:
        if ref.fq_int is not None:
            row.lowering = _grid_stats(ref.fq_int, value, q) or _stats(fq, actual, scale)
            row.lowering_histogram = _histogram(np.asarray(value, np.float64) - ref.fq_int)
        else:
            row.lowering = _stats(fq, actual, scale)


def _executor(row: DriftRow, block: Block, ref_value: np.ndarray, value: np.ndarray, q: _Q | None) -> None:
    """Interpreter vs reference model on one tensor: differing elements and error statistics."""
    row.executor_mismatched, row.executor_max_diff, row.executor = _executor_stats(
        block, row.tensor, ref_value, value, q)


def _executor_stats(block: Block, name: str, other: np.ndarray, value: np.ndarray,
                    q: _Q | None) -> tuple[int, float, ErrorStats | None]:
    """Another executor's value vs the interpreter's: (differing elements, max diff, stats)."""
    decl = block.tensors[name]
    r_arr = np.asarray(other)
    if r_arr.dtype != value.dtype:
        r_arr = to_working(r_arr, decl.dtype, what=name)
    if r_arr.shape == value.shape and np.array_equal(r_arr, value):
        return 0, 0.0, None
    if r_arr.shape != value.shape:
        return int(value.size), float("inf"), None
    diff = np.abs(r_arr.astype(np.float64) - value.astype(np.float64))
    if q is not None:
        stats = _stats(q.dequantize(r_arr), q.dequantize(value), q.scale)
    else:
        stats = _stats(r_arr, value, None)
    return int(np.count_nonzero(diff)), float(diff.max()), stats


def _mark_shared_ranges(block: Block, rows: Sequence[DriftRow], by_name: Mapping[str, DriftRow]) -> None:
    """Note rows clipped to the range of the CLAMP that consumes them (a fused activation)."""
    consumers: dict[str, list[Operator]] = {}
    for op in block.operators:
        for n in op.inputs:
            consumers.setdefault(n, []).append(op)
    for row in rows:
        if not row.clipped_fraction or row.alias_of is not None:
            continue
        users = consumers.get(row.tensor, [])
        outs = [by_name.get(op.outputs[0]) for op in users if op.op == "CLAMP"]
        if users and len(outs) == len(users) and all(
                o is not None and o.scale == row.scale and o.zero_point == row.zero_point for o in outs):
            row.shares_range_with = outs[0].tensor  # type: ignore[union-attr]


