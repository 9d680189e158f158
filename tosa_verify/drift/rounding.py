"""The rounding explainer: each RESCALE and TABLE under the other rounding, and how far it travels.

Every RESCALE is re-run with the other rounding mode (SINGLE_ROUND <-> DOUBLE_ROUND; INEXACT_ROUND
-> SINGLE_ROUND) and every INT8/INT16 TABLE with its near-tie entries rounded the other way (the
exact function comes from the fake-quant model through ``torch_ref``, a
``lowering.reference.TorchReference``); the changed elements are then propagated downstream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtypes import dtype_info
from ..graph import Block, Graph, Operator
from .local import _Overlay, _propagate, run_operators
from .metrics import _Q, _qparams
from .report import DriftReport, DriftRow, RoundingRow

_FLIP = {"SINGLE_ROUND": "DOUBLE_ROUND", "DOUBLE_ROUND": "SINGLE_ROUND", "INEXACT_ROUND": "SINGLE_ROUND"}


def _travel(graph: Graph, env: Mapping[str, np.ndarray], changed: Mapping[str, np.ndarray],
            rows: Sequence[DriftRow]) -> tuple[int, str, int, int]:
    row_names = [r.tensor for r in rows if r.tensor in changed]
    out_changed = out_max = 0
    for name in graph.main.outputs:
        if name in changed:
            d = np.abs(changed[name].astype(np.int64) - env[name].astype(np.int64)) \
                if changed[name].dtype.kind in "iu" else np.abs(changed[name] - env[name])
            out_changed += int(np.count_nonzero(d))
            out_max = max(out_max, int(np.max(d)))
    return len(row_names), (row_names[-1] if row_names else ""), out_changed, out_max


def _rounding(graph: Graph, env: Mapping[str, np.ndarray], report: DriftReport,
              provenance: Mapping[str, Mapping[str, Any]], quant_params: Mapping[str, Mapping[str, Any]],
              torch_ref: Any, alias: Mapping[str, str], budget: int | None, tie_window: float) -> None:
    block = graph.main
    items: list[tuple[RoundingRow, dict[int, Operator], dict[str, np.ndarray]]] = []
    for i, op in enumerate(block.operators):
        if op.op not in ("RESCALE", "TABLE"):
            continue
        out = op.outputs[0]
        prov = provenance.get(out) or {}
        decl = block.tensors[out]
        row = RoundingRow(i, op.op, out, str(prov.get("fx_node", "")), str(prov.get("nn_module_stack", "")),
                          "", "", int(decl.size))
        replaced_ops: dict[int, Operator] = {}
        replaced_values: dict[str, np.ndarray] = {}
        if op.op == "RESCALE":
            mode = str(op.attrs.get("rounding_mode", "SINGLE_ROUND"))
            row.mode = mode
            alt = _FLIP.get(mode, "")
            if alt == "DOUBLE_ROUND" and not op.attrs.get("scale32", False):
                row.alternative, row.note = "-", "16-bit multiplier: no double rounding"
            elif not alt:
                row.alternative, row.note = "-", f"unknown mode {mode}"
            else:
                row.alternative = alt
                replaced_ops[i] = dataclasses.replace(op, attrs={**op.attrs, "rounding_mode": alt})
        else:
            row.mode, row.alternative = "table", "near-ties flipped"
            new_table, note = _table_alternative(block, op, provenance, quant_params, torch_ref, alias, tie_window)
            row.note = note
            if new_table is not None:
                replaced_values[op.inputs[1]] = new_table
        if replaced_ops or replaced_values:
            try:
                single = run_operators(graph, [replaced_ops.get(i, op)], _Overlay(replaced_values, env))[out]
                d = np.abs(single.astype(np.int64) - env[out].astype(np.int64))
                row.changed, row.max_change = int(np.count_nonzero(d)), int(d.max()) if d.size else 0
            except Exception as exc:  # noqa: BLE001 - e.g. a REQUIRE under the other mode
                row.note = f"alternative fails: {type(exc).__name__}: {exc}"
                replaced_ops, replaced_values = {}, {}
        items.append((row, replaced_ops, replaced_values))
    ranked = sorted((it for it in items if it[0].changed), key=lambda it: -it[0].changed)
    chosen = {id(it[0]) for it in (ranked if budget is None else ranked[:budget])}
    for row, r_ops, r_vals in items:
        if not (r_ops or r_vals):
            continue
        if row.changed == 0:
            row.travelled = False
            continue
        if id(row) not in chosen:
            continue
        changed = _propagate(graph, env, r_ops, r_vals)
        row.rows_changed, row.last_row_changed, row.output_changed, row.output_max_change = \
            _travel(graph, env, changed, report.rows)
        row.travelled = True
    flips = {i: ops[i] for _, ops, _ in items for i in ops}
    if flips:
        changed = _propagate(graph, env, flips, {})
        n_rows, last, out_changed, out_max = _travel(graph, env, changed, report.rows)
        report.all_flipped = {"ops": len(flips), "rows_changed": n_rows, "last_row_changed": last,
                              "output_changed": out_changed, "output_max_change": out_max}
    report.rounding = [it[0] for it in items]


def _consumer_rescale(block: Block, tensor: str) -> Operator | None:
    """The RESCALE that reads ``tensor``, if that is its only reader."""
    readers = [op for op in block.operators if tensor in op.inputs]
    return readers[0] if len(readers) == 1 and readers[0].op == "RESCALE" else None


def _const_scalar(block: Block, name: str) -> int | None:
    decl = block.tensors.get(name)
    if decl is None or decl.data is None or np.asarray(decl.data).size != 1:
        return None
    return int(np.asarray(decl.data).reshape(-1)[0])


def _table_samples(block: Block, op: Operator, quant_params: Mapping[str, Mapping[str, Any]],
                   alias: Mapping[str, str]) -> tuple[np.ndarray, _Q | None, float, float, str, str] | str:
    """Where a TABLE samples its function and what one entry is worth.

    Returns (input levels of the entries, input qparams, real value of one entry step, entry
    zero point, the tensor whose quantization is the op's result, its dtype), or why not.
    INT8: 256 entries, one per input level, in the output's own steps. INT16: 513 entries
    every 128 input levels; the INT32 result carries 7 fractional bits and the RESCALE after it
    (multiplier m, shift s) brings it to the output, so one entry step is worth
    ``128 * m / 2**s`` output steps.
    """
    in_decl = block.tensors[op.inputs[0]]
    out = op.outputs[0]
    if in_decl.dtype == "INT8":
        q_out = _qparams(quant_params.get(alias.get(out, out)), "INT8")
        if q_out is None:
            return "function unknown: not analysed"
        levels = np.arange(-128, 128, dtype=np.int64)
        return levels, _qparams(quant_params.get(alias.get(op.inputs[0], op.inputs[0])), "INT8"), \
            q_out.scale, float(q_out.zp), out, "INT8"
    if in_decl.dtype != "INT16":
        return f"{in_decl.dtype} table: not analysed"
    rescale = _consumer_rescale(block, out)
    if rescale is None:
        return "INT16 table without a single RESCALE after it: not analysed"
    multiplier, shift = (_const_scalar(block, n) for n in rescale.inputs[1:3])
    in_zp = _const_scalar(block, rescale.inputs[3]) if len(rescale.inputs) > 3 else 0
    final = rescale.outputs[0]
    q_final = _qparams(quant_params.get(alias.get(final, final)), block.tensors[final].dtype)
    if multiplier is None or shift is None or in_zp != 0 or q_final is None:
        return "INT16 table with a per-channel or offset RESCALE: not analysed"
    levels = np.clip(np.arange(513, dtype=np.int64) * 128 - 32768, -32768, 32767)
    q_in = _qparams(quant_params.get(alias.get(op.inputs[0], op.inputs[0])), "INT16")
    return levels, q_in, q_final.scale * 128.0 * multiplier / 2.0**shift, 0.0, final, "INT16"


def _table_alternative(block: Block, op: Operator, provenance: Mapping[str, Mapping[str, Any]],
                       quant_params: Mapping[str, Mapping[str, Any]], torch_ref: Any,
                       alias: Mapping[str, str], tie_window: float) -> tuple[np.ndarray | None, str]:
    """A TABLE with its near-tie entries rounded the other way (from the exact function).

    INT8 tables hold one entry per input level; INT16 tables hold 513 samples that TOSA
    interpolates, so a flipped entry moves every output within 128 input levels of it.
    """
    table_name = op.inputs[1] if len(op.inputs) > 1 else ""
    table_decl = block.tensors.get(table_name)
    in_decl = block.tensors.get(op.inputs[0])
    if table_decl is None or table_decl.data is None or in_decl is None:
        return None, "table not constant"
    samples = _table_samples(block, op, quant_params, alias)
    if isinstance(samples, str):
        return None, samples
    levels, q_in, entry_scale, entry_zp, result, kind = samples
    fx = str((provenance.get(result) or provenance.get(op.outputs[0]) or {}).get("fx_node", ""))
    if q_in is None:
        return None, "function unknown: not analysed"
    try:
        y = torch_ref.evaluate_node(fx, q_in.dequantize(levels)) if torch_ref is not None else None
    except Exception:  # noqa: BLE001 - not an elementwise function of one tensor
        return None, "function not evaluable: not analysed"
    if y is None:
        return None, "function unknown: not analysed"
    info = dtype_info(table_decl.dtype)
    lo, hi = int(info.min), int(info.max)
    with np.errstate(all="ignore"):
        exact = y / entry_scale + entry_zp
        exact = np.where(np.isfinite(exact), exact, np.sign(np.nan_to_num(exact)) * 1e9)
        table = np.asarray(table_decl.data).astype(np.int64).reshape(-1)
        if exact.shape != table.shape:
            return None, "table size mismatch: not analysed"
        frac = exact - np.floor(exact)
        near = (np.abs(frac - 0.5) < tie_window) & (exact > lo) & (exact < hi)
    other = np.where(table >= exact, table - 1, table + 1)
    alt = np.clip(np.where(near, other, table), lo, hi)
    off = int(np.count_nonzero(np.abs(table - np.clip(np.rint(exact), lo, hi)) >= 1))
    note = f"{int(near.sum())} near-tie entries" + (f"; {off} entries off the exact value" if off else "")
    if kind == "INT16":
        note += " (513 interpolated samples)"
    return alt.astype(info.working), note
