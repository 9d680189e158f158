"""Quantization drift: float vs fake-quant vs TOSA, layer by layer, with the error attributed.

:func:`drift` takes a lowered model *as a value* (anything shaped like ``lowering.LoweredModel``:
``.tosa``, ``.provenance``, ``.quant_params``, ``.float_model``, ``.quantized_model``,
``.quantize_inputs``, optionally ``.graph_module``; this module never imports ``lowering``) and
float inputs. It runs

* the float model and the fake-quant (``convert_pt2e``) model, capturing every FX node's value
  (both evaluated in float64, so float32 accumulation noise does not pose as lowering error);
* the TOSA graph with the numpy interpreter, capturing every tensor;
* optionally the TOSA reference model on the same graph (executor error);

and joins them through provenance: one :class:`DriftRow` per TOSA tensor that holds a PyTorch
node's value (the tensors the lowering bound to a node, plus their RESHAPE/TRANSPOSE/IDENTITY
aliases). Per row, with ``s`` the tensor's scale:

==================  ==========================================================================
``quantization``    float vs fake-quant: what the quantization itself costs (propagated)
``lowering``        fake-quant vs TOSA: what the lowering adds (integer rescale, rounding, ...)
``total``           float vs TOSA: what a deployment sees
``executor``        interpreter vs reference model (bit-exact: 0 differing elements expected)
``local``           float vs this layer alone, fed float-accurate inputs (each input tensor is
                    ``quantize(float activation)``); ``total`` is the propagated counterpart
``local_lowering``  fake-quant vs this layer alone, fed the fake-quant inputs: the lowering
                    error this layer adds by itself (0 differing elements for a faithful layer)
==================  ==========================================================================

Each :class:`ErrorStats` carries SQNR (dB), cosine similarity, max abs error, the error in
quantization steps (max and mean of ``|err| / s``) and the count of elements more than half a step
off. SQNR and cosine are computed by :mod:`tosa_verify.compare` (the same definition as its verdicts).

Layout: TOSA tensors are NHWC where PyTorch is NCHW. For the tensor bound to a node the
lowering's ``graph_module`` records the permutation (``node.meta["layout"]``); otherwise the
permutation is chosen by shape (same, NHWC/NDHWC, or a reshape that only moves unit dimensions),
ties broken by the candidate that agrees best with the fake-quant value.

Folded nodes: a node that owns no computed TOSA tensor was folded into its input's tensor by
the lowering (a BatchNorm into the conv before it, a ReLU into the RESCALE before it), so the
tensor named after the conv holds the BatchNorm's or ReLU's value. The reference used (float and
fake-quant alike) is the last node of the single-user chain of such nodes that keep the shape;
the table shows it as ``conv2d→relu``. Of a decomposed node (softmax -> amax, sub, exp, ...),
the last piece stands for the original node; the other pieces have no float reference.

The rounding explainer (:class:`RoundingRow`) takes every RESCALE (SINGLE_ROUND <-> DOUBLE_ROUND;
INEXACT_ROUND -> SINGLE_ROUND) and every INT8 or INT16 TABLE (entries whose exact value lies
within ``tie_window`` steps of a rounding boundary are rounded the other way; an INT16 table's
513 samples are interpolated, so one flipped sample moves up to 256 input levels around it),
counts the elements that
change at that operator, and re-runs the graph downstream (only operators whose inputs changed)
to see how far the change travels.

>>> import lowering, tosa_verify                                          # doctest: +SKIP
>>> model, example, calib = lowering.zoo.digits_cnn()                     # doctest: +SKIP
>>> lm = lowering.lower(model, example, calibration=calib)                # doctest: +SKIP
>>> report = tosa_verify.drift(lm, example)                               # doctest: +SKIP
>>> print(report.format_table())                                          # doctest: +SKIP
>>> report.row("conv2d_1").total.sqnr_db                                  # doctest: +SKIP
31.2
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .compare import _stats as sqnr_and_cosine
from .dtypes import dtype_info, to_working
from .graph import Block, Graph, Operator, Tensor, load
from .interpreter import Interpreter, bind_inputs

__all__ = [
    "DriftReport",
    "DriftRow",
    "ErrorStats",
    "RoundingRow",
    "drift",
    "run_operators",
]

#: Operators that move data without changing values (aliases of a node's value).
ALIAS_OPS = frozenset({"RESHAPE", "TRANSPOSE", "IDENTITY"})
#: Histogram bins (in quantization steps) of :attr:`DriftRow.steps_histogram`: -8 .. 8, the
#: outermost bins also count everything beyond.
HIST_RANGE = 8
_CONST_OPS = frozenset({"CONST", "CONST_SHAPE"})
_LOCAL_CHAIN_LIMIT = 64
_QKEY, _QSCALE = "\0q:", "\0qs:"


# --------------------------------------------------------------------------- result types


@dataclass
class ErrorStats:
    """How far ``actual`` is from ``expected`` for one tensor.

    ``max_steps``/``mean_steps`` are ``|actual - expected| / scale`` (None without a scale);
    ``off`` counts elements more than half a quantization step away (for two values on the same
    grid: the elements that differ).
    """

    sqnr_db: float
    cosine: float
    max_abs: float
    max_steps: float | None
    mean_steps: float | None
    off: int
    size: int
    mse: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (non-finite floats as strings)."""
        return {k: _json_float(v) for k, v in dataclasses.asdict(self).items()}


@dataclass
class DriftRow:
    """One TOSA tensor that holds a PyTorch node's value, with its errors (see module doc)."""

    position: int
    tensor: str
    op: str
    op_index: int
    torch_node: str
    float_node: str
    target: str
    module_path: str
    dtype: str
    shape: tuple[int, ...]
    layout: str
    scale: float | None
    zero_point: int
    alias_of: str | None = None
    clipped_fraction: float | None = None
    quantization: ErrorStats | None = None
    lowering: ErrorStats | None = None
    total: ErrorStats | None = None
    local: ErrorStats | None = None
    local_lowering: ErrorStats | None = None
    executor_mismatched: int | None = None
    executor_max_diff: float | None = None
    executor: ErrorStats | None = None
    #: Other executors (e.g. ``"VGF"``) vs the interpreter on this tensor, by label.
    executors: dict[str, ExecutorCheck] = field(default_factory=dict)
    steps_histogram: list[int] = field(default_factory=list)
    lowering_histogram: list[int] = field(default_factory=list)
    shares_range_with: str = ""
    note: str = ""

    @property
    def sqnr_db(self) -> float | None:
        """SQNR of the TOSA value against float (None when there is no float reference)."""
        return self.total.sqnr_db if self.total else None

    @property
    def dominant(self) -> str:
        """Which source dominates the error here: quantization, lowering or executor."""
        parts = {
            "quantization": self.quantization.mse if self.quantization else 0.0,
            "lowering": self.lowering.mse if self.lowering else 0.0,
        }
        if self.executor_mismatched:
            return "executor"
        if max(parts.values()) == 0.0:
            return "none"
        return max(parts, key=lambda k: parts[k])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, ErrorStats):
                out[f.name] = value.to_dict()
            elif f.name == "executors":
                out[f.name] = {k: v.to_dict() for k, v in value.items()}
            elif isinstance(value, tuple):
                out[f.name] = list(value)
            else:
                out[f.name] = _json_float(value)
        out["dominant"] = self.dominant
        return out


@dataclass
class ExecutorCheck:
    """Another executor's value of one tensor against the interpreter's (a drift column).

    ``mismatched`` elements differ, by at most ``max_diff`` (integers: steps); ``stats`` is the
    error (dequantized for quantized tensors), ``None`` when they are identical.
    """

    mismatched: int
    max_diff: float
    stats: ErrorStats | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"mismatched": self.mismatched, "max_diff": _json_float(self.max_diff),
                "stats": self.stats.to_dict() if self.stats else None}


@dataclass
class RoundingRow:
    """The rounding explainer of one RESCALE or TABLE.

    ``changed`` elements of ``tensor`` change when ``mode`` is replaced by ``alternative``
    (by at most ``max_change`` integer steps). ``travelled`` is None when the downstream re-run
    was skipped (budget); otherwise ``rows_changed`` drift rows downstream change, and the graph
    outputs change in ``output_changed`` elements by at most ``output_max_change`` steps.
    """

    op_index: int
    op: str
    tensor: str
    torch_node: str
    module_path: str
    mode: str
    alternative: str
    size: int
    changed: int = 0
    max_change: int = 0
    travelled: bool | None = None
    rows_changed: int = 0
    last_row_changed: str = ""
    output_changed: int = 0
    output_max_change: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


@dataclass
class DriftReport:
    """The result of :func:`drift`: :attr:`rows`, :attr:`rounding`, an attribution summary.

    >>> report.format_table()          # doctest: +SKIP
    >>> json.loads(report.to_json())["rows"][0]["tensor"]   # doctest: +SKIP
    'x'
    """

    profile: str
    rows: list[DriftRow]
    rounding: list[RoundingRow] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    all_flipped: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    #: every non-constant operator of the entry block: index -> (op, torch node, module path)
    op_nodes: dict[int, tuple[str, str, str]] = field(default_factory=dict)

    # ----------------------------------------------------------------- lookups
    def row(self, name: str) -> DriftRow:
        """The row of a TOSA tensor (or, failing that, the primary row of a torch node).

        >>> report.row("conv2d").torch_node   # doctest: +SKIP
        'conv2d'
        """
        for r in self.rows:
            if r.tensor == name:
                return r
        for r in self.rows:
            if r.torch_node == name and r.alias_of is None:
                return r
        raise KeyError(name)

    @property
    def primary_rows(self) -> list[DriftRow]:
        """One row per torch node value (aliases such as ``x__nhwc`` left out)."""
        return [r for r in self.rows if r.alias_of is None]

    @property
    def output_rows(self) -> list[DriftRow]:
        """The rows of the graph outputs."""
        return [r for r in self.rows if r.tensor in self.outputs]

    def first_lowering_divergence(self, float_min_db: float = 100.0) -> DriftRow | None:
        """The first row whose layer, fed the fake-quant inputs, differs from fake-quant.

        This is where the lowering itself (not upstream propagation) first departs from the
        fake-quant model. Integer tensors count any differing element; float tensors (FP
        profile) count when their SQNR falls below ``float_min_db``.
        """
        for r in self.rows:
            ll = r.local_lowering
            if ll is None or ll.off == 0:
                continue
            if r.scale is None and ll.sqnr_db >= float_min_db:
                continue
            return r
        return None

    def worst_local(self) -> DriftRow | None:
        """The primary row with the lowest local SQNR (the layer that loses most on its own)."""
        cands = [r for r in self.primary_rows if r.local is not None and not math.isnan(r.local.sqnr_db)
                 and not r.shares_range_with]
        return min(cands, key=lambda r: r.local.sqnr_db) if cands else None

    def attribution(self) -> dict[str, dict[str, float]]:
        """Per graph output: noise power (MSE) of quantization, lowering, executor and total.

        >>> report.attribution()["linear_1"]["quantization_share"]   # doctest: +SKIP
        0.93
        """
        out: dict[str, dict[str, float]] = {}
        for r in self.output_rows:
            q = r.quantization.mse if r.quantization else 0.0
            lo = r.lowering.mse if r.lowering else 0.0
            tot = r.total.mse if r.total else 0.0
            ex = r.executor.mse if r.executor else 0.0
            others = {k: (c.stats.mse if c.stats else 0.0) for k, c in r.executors.items()}
            denom = q + lo + ex + sum(others.values())
            out[r.tensor] = {
                "total_mse": tot,
                "quantization_mse": q,
                "lowering_mse": lo,
                "executor_mse": ex,
                "quantization_share": q / denom if denom else 0.0,
                "lowering_share": lo / denom if denom else 0.0,
                "executor_share": ex / denom if denom else 0.0,
                "sqnr_db": r.total.sqnr_db if r.total else float("nan"),
                "local_sqnr_db": r.local.sqnr_db if r.local else float("nan"),
            }
            for label, mse in others.items():  # other executors vs the interpreter
                out[r.tensor][f"{label}_mse"] = mse
                out[r.tensor][f"{label}_share"] = mse / denom if denom else 0.0
        return out

    # ----------------------------------------------------------------- output
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the whole report."""
        first = self.first_lowering_divergence()
        return {
            "profile": self.profile,
            "outputs": list(self.outputs),
            "rows": [r.to_dict() for r in self.rows],
            "rounding": [r.to_dict() for r in self.rounding],
            "all_flipped": self.all_flipped,
            "attribution": {k: {kk: _json_float(vv) for kk, vv in v.items()}
                            for k, v in self.attribution().items()},
            "first_lowering_divergence": first.tensor if first else None,
            "notes": list(self.notes),
            "seconds": dict(self.seconds),
            "op_nodes": {str(k): list(v) for k, v in self.op_nodes.items()},
        }

    def to_json(self, indent: int | None = 1) -> str:
        """The report as JSON text (infinities as the strings ``"inf"``/``"-inf"``).

        >>> json.loads(report.to_json())["profile"]   # doctest: +SKIP
        'INT'
        """
        return json.dumps(self.to_dict(), indent=indent)

    def format_table(self, *, aliases: bool = True, rounding: bool = True) -> str:
        """A terminal table: one row per tensor, then attribution and the rounding explainer.

        Columns: SQNR (float vs TOSA), quant (float vs fake-quant), local (this layer fed
        float-accurate inputs), cosine and max |err| (float vs TOSA), steps max/mean (error in
        quantization steps), lower (elements where TOSA != fake-quant, max steps), own (same,
        with the layer fed fake-quant inputs), exec (interpreter vs reference model), clip
        (float values outside the quantized range).

        >>> print(report.format_table())   # doctest: +SKIP
        """
        labels = sorted({k for r in self.rows for k in r.executors})
        header = ("#", "tensor", "op", "torch node (module)", "shape", "SQNR", "quant", "local",
                  "cosine", "max|err|", "steps max/mean", "lower", "own", "exec", *labels, "clip%")
        rows = []
        for r in self.rows:
            if not aliases and r.alias_of is not None:
                continue
            node = r.torch_node + (f"→{r.float_node}" if r.float_node and r.float_node != r.torch_node else "")
            node += f" ({r.module_path})" if r.module_path else ""
            rows.append((
                str(r.position),
                _clip(r.tensor, 26),
                r.op,
                _clip(node, 40),
                "x".join(str(d) for d in r.shape) + (f" {r.layout}" if r.layout not in ("same", "") else ""),
                _db(r.total.sqnr_db) if r.total else "-",
                _db(r.quantization.sqnr_db) if r.quantization else "-",
                _db(r.local.sqnr_db) if r.local else "-",
                f"{r.total.cosine:.4f}" if r.total and not math.isnan(r.total.cosine) else "-",
                _num(r.total.max_abs) if r.total else "-",
                (f"{r.total.max_steps:.1f}/{r.total.mean_steps:.2f}"
                 if r.total and r.total.max_steps is not None else "-"),
                _count(r.lowering),
                _count(r.local_lowering),
                _exec(r),
                *(_exec_other(r.executors.get(k), r.scale) for k in labels),
                (f"{100 * r.clipped_fraction:.1f}" + ("*" if r.shares_range_with else ""))
                if r.clipped_fraction is not None else "-",
            ))
        lines = [f"quantization drift ({self.profile}): float vs fake-quant vs TOSA, {len(self.rows)} tensors"]
        lines.extend(_table(header, rows, right=set(range(5, len(header))) | {0}))
        if any(r.shares_range_with for r in self.rows):
            lines.append("* clipped to the range of the CLAMP that follows (a fused activation): "
                         "the clipped part is removed by that activation anyway")
        lines.append("")
        lines.extend(self._summary_lines())
        if rounding and self.rounding:
            lines.append("")
            lines.extend(self._rounding_lines())
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)

    def _summary_lines(self) -> list[str]:
        lines = []
        for name, a in self.attribution().items():
            lines.append(
                f"output {name}: SQNR {_db(a['sqnr_db'])} dB vs float; error power "
                f"{100 * a['quantization_share']:.1f} % quantization, {100 * a['lowering_share']:.1f} % lowering, "
                f"{100 * a['executor_share']:.1f} % executor"
                + "".join(f", {100 * v:.1f} % {k[:-6]}" for k, v in a.items() if k.endswith("_share")
                          and k[:-6] not in ("quantization", "lowering", "executor"))
            )
        worst = self.worst_local()
        if worst is not None:
            lines.append(f"largest local loss: {worst.tensor} ({_where(worst)}): local SQNR {_db(worst.local.sqnr_db)} dB")
        first = self.first_lowering_divergence()
        if first is None:
            # float rows that differ only in the last bits pass first_lowering_divergence: say so,
            # the table's "own" column shows their differing elements
            last_bits = sum(r.local_lowering.off for r in self.rows if r.local_lowering is not None)
            if last_bits:
                lines.append("lowering: every layer fed the fake-quant inputs reproduces fake-quant within "
                             f"float rounding (local SQNR >= 100 dB; {last_bits:,} elements differ in the "
                             "last bits)")
            elif any(r.local_lowering is not None for r in self.rows):
                lines.append("lowering: every layer fed the fake-quant inputs reproduces fake-quant exactly")
        else:
            ll = first.local_lowering
            size = (f"max {_num(ll.max_steps)} steps" if ll.max_steps is not None
                    else f"SQNR {_db(ll.sqnr_db)} dB")
            lines.append(
                f"lowering first departs from fake-quant at {first.tensor} ({_where(first)}): "
                f"{ll.off}/{ll.size} elements, {size}"
            )
        checked = [r for r in self.rows if r.executor_mismatched is not None]
        ex_int = [r for r in checked if r.executor_mismatched and r.scale is not None]
        ex_float = [r for r in checked if r.executor_mismatched and r.scale is None and r.executor]
        if checked and not ex_int and not ex_float:
            lines.append("executor: interpreter == reference model on every tensor")
        if ex_int:
            lines.append(f"executor: interpreter and reference model differ on {len(ex_int)} integer tensors, "
                         f"first {ex_int[0].tensor} ({ex_int[0].executor_mismatched} elements)")
        if ex_float:
            worst = min(ex_float, key=lambda r: r.executor.sqnr_db)  # type: ignore[union-attr]
            lines.append(f"executor: float tensors differ by accumulation order only (lowest SQNR "
                         f"{_db(worst.executor.sqnr_db)} dB at {worst.tensor}; `tosa-verify diff` judges compliance)")
        for label in sorted({k for r in self.rows for k in r.executors}):
            differ = [r for r in self.rows if label in r.executors and r.executors[label].mismatched]
            if not differ:
                lines.append(f"executor: interpreter == {label} on every tensor")
            else:
                lines.append(f"executor: interpreter and {label} differ on {len(differ)} tensors, first "
                             f"{differ[0].tensor} ({differ[0].executors[label].mismatched} elements)")
        return lines

    def _rounding_lines(self) -> list[str]:
        header = ("#", "op", "tensor", "torch node", "mode -> alternative", "changed", "max",
                  "rows changed", "output changed (max)", "note")
        rows = []
        for r in self.rounding:
            travel = "-" if r.travelled is None else (
                f"{r.output_changed} ({r.output_max_change})" if r.travelled else "0")
            rows.append((
                str(r.op_index), r.op, _clip(r.tensor, 24), _clip(r.torch_node, 20),
                f"{r.mode} -> {r.alternative}", f"{r.changed}/{r.size}", str(r.max_change),
                "-" if r.travelled is None else str(r.rows_changed), travel, r.note,
            ))
        lines = ["rounding explainer (elements that change under the other rounding, and how far it travels)"]
        lines.extend(_table(header, rows, right={0, 5, 6, 7, 8}))
        if self.all_flipped:
            a = self.all_flipped
            lines.append(
                f"all {a['ops']} RESCALEs flipped together: outputs change in {a['output_changed']} elements "
                f"(max {a['output_max_change']} steps)"
            )
        return lines


# --------------------------------------------------------------------------- formatting


def _json_float(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _num(x: float) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.3g}"


def _db(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.1f}"


def _count(stats: ErrorStats | None) -> str:
    if stats is None:
        return "-"
    if stats.off == 0:
        return "0"
    if stats.max_steps is None:  # float tensors: SQNR in dB
        return f"{_db(stats.sqnr_db)}dB"
    return f"{stats.off} ({_num(stats.max_steps)})"


def _exec(row: DriftRow) -> str:
    if row.executor_mismatched is None:
        return "-"
    if row.executor_mismatched == 0:
        return "="
    if row.scale is None and row.executor is not None:  # float tensors: how close, in dB
        return f"{_db(row.executor.sqnr_db)}dB"
    return str(row.executor_mismatched)


def _exec_other(check: ExecutorCheck | None, scale: float | None) -> str:
    if check is None:
        return "-"
    if check.mismatched == 0:
        return "="
    if scale is None and check.stats is not None:
        return f"{_db(check.stats.sqnr_db)}dB"
    return str(check.mismatched)


def _where(row: DriftRow) -> str:
    return row.torch_node + (f" in {row.module_path}" if row.module_path else "")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'>' if i in right else '<'}{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header), "  ".join("-" * w for w in widths), *(fmt.format(*r) for r in rows)]
    return [line.rstrip() for line in lines]


# --------------------------------------------------------------------------- execution helpers


def _is_const(block: Block, name: str) -> bool:
    decl = block.tensors.get(name) or block.shapes.get(name)
    return decl is not None and decl.data is not None


def run_operators(graph: Graph, operators: Iterable[Operator], values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``operators`` of ``graph``'s entry block in the given order on working-dtype ``values``.

    Every input is taken from ``values`` when present there (constants included, so a constant
    can be overridden), otherwise from its declared constant data. Returns the values of all
    outputs the operators produce.

    >>> g = load("model.tosa")                                          # doctest: +SKIP
    >>> run_operators(g, g.main.operators[5:7], captured)["conv2d"]     # doctest: +SKIP
    """
    main = graph.main
    interpreter = Interpreter(graph)
    produced: dict[str, np.ndarray] = {}
    for op in operators:
        names = list(dict.fromkeys(op.inputs))
        tensors: dict[str, Tensor] = {}
        shapes: dict[str, Tensor] = {}
        for n in names + list(op.outputs):
            if n in main.shapes:
                shapes[n] = main.shapes[n]
            elif n in main.tensors:
                tensors[n] = main.tensors[n]
        inputs = [n for n in names if n in produced or n in values]
        block = Block(main.name, [op], tensors, inputs, list(op.outputs), shapes)
        outs = interpreter.run_block(block, [produced[n] if n in produced else values[n] for n in inputs])
        produced.update(zip(op.outputs, outs, strict=True))
    return produced


def _propagate(graph: Graph, env: Mapping[str, np.ndarray], replaced_ops: Mapping[int, Operator],
               replaced_values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Re-run from the first change on, only operators whose inputs changed; return changed tensors."""
    ops = graph.main.operators
    changed: dict[str, np.ndarray] = dict(replaced_values)
    starts = list(replaced_ops) + [i for i, op in enumerate(ops) if set(op.outputs) & set(replaced_values)]
    consumers = [i for i, op in enumerate(ops) if set(op.inputs) & set(replaced_values)]
    start = min(starts + consumers) if (starts or consumers) else len(ops)
    for i in range(start, len(ops)):
        op = ops[i]
        if op.op in _CONST_OPS:
            continue
        if i not in replaced_ops and not any(n in changed for n in op.inputs):
            continue
        view = _Overlay(changed, env)
        outs = run_operators(graph, [replaced_ops.get(i, op)], view)
        for name, value in outs.items():
            base = env.get(name)
            if base is None or base.shape != value.shape or not np.array_equal(base, value):
                changed[name] = value
            else:
                changed.pop(name, None)
    return changed


class _Overlay(Mapping):
    """``top`` over ``base`` without copying either."""

    def __init__(self, top: Mapping[str, np.ndarray], base: Mapping[str, np.ndarray]) -> None:
        self.top, self.base = top, base

    def __getitem__(self, key: str) -> np.ndarray:
        return self.top[key] if key in self.top else self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.top or key in self.base

    def __iter__(self):
        yield from self.top
        yield from (k for k in self.base if k not in self.top)

    def __len__(self) -> int:
        return len(set(self.top) | set(self.base))


def _capture_tosa(graph: Graph, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of the entry block in its working dtype (constants and inputs included)."""
    block = graph.main
    values = bind_inputs(block, list(inputs))
    env: dict[str, np.ndarray] = {}
    Interpreter(graph).run_block(block, values, record=env)
    return env


# --------------------------------------------------------------------------- FX capture


def _is_qdq(target: Any) -> str:
    name = str(target)
    if "quantized_decomposed" not in name:
        return ""
    if "dequantize_per" in name:
        return "dq"
    if "quantize_per" in name:
        return "q"
    return ""


def _capture_fx(gm: Any, inputs: Sequence[Any], *, f64: bool) -> dict[str, np.ndarray]:
    """Run an FX graph and return every tensor-valued node's value (Q/DQ nodes left out).

    With ``f64`` the graph runs in float64 and quantize/dequantize are evaluated in float64 too
    (round half to even, clamp), so a fake-quant graph lands on the ideal integer grid; a
    quantize applied directly to a graph input stays in the graph's own precision, as the
    deployment quantizes its inputs. Falls back to the graph's own precision if a node refuses
    float64.
    """
    import torch

    values: dict[str, np.ndarray] = {}

    def up(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.dtype in (torch.float32, torch.float16, torch.bfloat16):
            return a.double()
        if isinstance(a, (list, tuple)):
            return type(a)(up(b) for b in a)
        return a

    class _Capture(torch.fx.Interpreter):
        def __init__(self, module: Any, wide: bool) -> None:
            super().__init__(module)
            self.wide = wide
            self.node: Any = None

        def run_node(self, n: Any) -> Any:
            self.node = n
            out = super().run_node(n)
            if n.op in ("placeholder", "call_function", "call_module", "call_method") and isinstance(out, torch.Tensor):
                kind = _is_qdq(n.target) if n.op == "call_function" else ""
                if not kind:
                    arr = out.detach()
                    values[n.name] = arr.double().numpy() if arr.is_floating_point() else arr.numpy().copy()
                elif kind == "q" and "per_tensor" in str(n.target) and n.args and hasattr(n.args[0], "name"):
                    # the model's own quantized value of its input node, with the scale it used
                    values[_QKEY + n.args[0].name] = out.detach().numpy().astype(np.int64)
                    values[_QSCALE + n.args[0].name] = np.asarray([float(n.args[1]), float(n.args[2])])
            return out

        def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
            v = super().get_attr(target, args, kwargs)
            return up(v) if self.wide else v

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            if not self.wide:
                return target(*args, **kwargs)
            kind = _is_qdq(target)
            if kind:
                src = self.node.args[0] if self.node is not None and self.node.args else None
                if kind == "q" and getattr(src, "op", "") == "placeholder":
                    return target(args[0].float(), *args[1:], **kwargs)
                return _qdq_f64(kind, str(target), args, kwargs)
            return target(*up(tuple(args)), **{k: up(v) for k, v in kwargs.items()})

    torch_inputs = [torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        if f64:
            try:
                _Capture(gm, True).run(*[up(x) for x in torch_inputs])
                return values
            except Exception:  # noqa: BLE001 - a node that refuses float64: run as exported
                values.clear()
        _Capture(gm, False).run(*torch_inputs)
    return values


def _qdq_f64(kind: str, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    import torch

    per_channel = "per_channel" in name
    if per_channel:
        x, scale, zp, axis, qmin, qmax, dtype = list(args[:7])
    else:
        x, scale, zp, qmin, qmax, dtype = list(args[:6])
        axis = None
    scale = torch.as_tensor(scale, dtype=torch.float64)
    zp = torch.as_tensor(zp, dtype=torch.float64)
    if axis is not None:
        shape = [1] * x.dim()
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    if kind == "q":
        q = torch.round(x.double() / scale) + zp
        return q.clamp(qmin, qmax).to(dtype)
    return (x.double() - zp) * scale


def _output_nodes(gm: Any) -> list[str]:
    """Names of the nodes an FX graph returns, in output order."""
    if gm is None:
        return []
    out = gm.graph.output_node().args[0]
    out = list(out) if isinstance(out, (list, tuple)) else [out]
    return [getattr(n, "name", "") for n in out]


def _folded_chains(gm: Any, owners: set[str]) -> dict[str, str]:
    """Node name -> the node whose value the node's TOSA tensor holds.

    Follows a node's single user while that user owns no TOSA tensor (it was folded away by
    the lowering) and keeps the shape; stops at quantize/dequantize nodes.
    """
    out: dict[str, str] = {}
    if gm is None:
        return out
    for node in gm.graph.nodes:
        cur = node
        for _ in range(8):
            users = list(cur.users)
            if len(users) != 1 or users[0].name in owners or users[0].op != "call_function" \
                    or _is_qdq(users[0].target):
                break
            nxt = users[0]
            a, b = cur.meta.get("val"), nxt.meta.get("val")
            if getattr(a, "shape", None) is None or getattr(a, "shape", None) != getattr(b, "shape", None):
                break
            cur = nxt
        if cur is not node:
            out[node.name] = cur.name
    return out


# --------------------------------------------------------------------------- metrics


def _stats(expected: np.ndarray, actual: np.ndarray, scale: float | None) -> ErrorStats:
    """Error statistics; SQNR and cosine are tosa_verify.compare's."""
    e = np.ravel(np.asarray(expected, np.float64))
    a = np.ravel(np.asarray(actual, np.float64))
    sqnr, cosine = sqnr_and_cosine(e, a)
    err = np.abs(a - e)
    if not np.isfinite(err).all():
        err = err[np.isfinite(err)]
    if err.size == 0:
        return ErrorStats(sqnr, cosine, float("nan"), None, None, 0, int(e.size), float("nan"))
    max_abs = float(err.max())
    mse = float(np.dot(err, err) / err.size)
    mean_abs = float(err.mean())
    if scale:
        return ErrorStats(sqnr, cosine, max_abs, max_abs / scale, mean_abs / scale,
                          int(np.count_nonzero(err > 0.5 * scale)), int(e.size), mse)
    return ErrorStats(sqnr, cosine, max_abs, None, None, int(np.count_nonzero(err)), int(e.size), mse)


def _grid_stats(expected_int: np.ndarray, actual_int: np.ndarray, q: _Q | None) -> ErrorStats | None:
    """Zero-error statistics when two integer tensors are equal (the common case), else None."""
    if q is None or np.shape(expected_int) != np.shape(actual_int):
        return None
    if not np.array_equal(np.asarray(expected_int), np.asarray(actual_int)):
        return None
    size = int(np.size(actual_int))
    return ErrorStats(math.inf, 1.0, 0.0, 0.0, 0.0, 0, size, 0.0)


def _histogram(diff_steps: np.ndarray) -> list[int]:
    r = np.clip(np.rint(diff_steps[np.isfinite(diff_steps)]), -HIST_RANGE, HIST_RANGE).astype(np.int64)
    return np.bincount(r + HIST_RANGE, minlength=2 * HIST_RANGE + 1).tolist()


# --------------------------------------------------------------------------- layout


def _layout_candidates(tosa_shape: tuple[int, ...], torch_shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...] | None]]:
    """Ways to bring a torch-layout array to ``tosa_shape``: (label, permutation or None=reshape)."""
    st, sa = tuple(tosa_shape), tuple(torch_shape)
    out: list[tuple[str, tuple[int, ...] | None]] = []
    if st == sa:
        out.append(("same", tuple(range(len(sa)))))
    for label, perm in (("NHWC", (0, 2, 3, 1)), ("NDHWC", (0, 2, 3, 4, 1))):
        if len(sa) == len(perm) and st == tuple(sa[p] for p in perm):
            out.append((label, perm))
    if st != sa and int(np.prod(st, dtype=np.int64)) == int(np.prod(sa, dtype=np.int64)) and \
            [d for d in st if d != 1] == [d for d in sa if d != 1]:
        out.append(("reshape", None))
    return out


def _to_tosa_layout(arr: np.ndarray, tosa_shape: tuple[int, ...], how: tuple[int, ...] | None) -> np.ndarray:
    if how is None:
        return np.reshape(arr, tosa_shape)
    return np.transpose(arr, how)


# --------------------------------------------------------------------------- quantization helpers


@dataclass
class _Q:
    scale: float
    zp: int
    qmin: int
    qmax: int

    def quantize(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(np.asarray(x, np.float64) / self.scale) + self.zp, self.qmin, self.qmax)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (np.asarray(q, np.float64) - self.zp) * self.scale


def _qparams(entry: Mapping[str, Any] | None, dtype: str) -> _Q | None:
    if not entry:
        return None
    scales = list(entry.get("scale") or [])
    zps = list(entry.get("zero_point") or [0])
    if len(scales) != 1:
        return None
    info = dtype_info(dtype)
    qmin = int(entry.get("qmin", info.min))
    qmax = int(entry.get("qmax", info.max))
    return _Q(float(scales[0]), int(zps[0]), qmin, qmax)


# --------------------------------------------------------------------------- drift


@dataclass
class _Ref:
    """Per-row working data (not part of the report)."""

    q: _Q | None
    float_value: np.ndarray | None
    fq_value: np.ndarray | None
    fq_int: np.ndarray | None = None


def _get(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default) if not isinstance(obj, Mapping) else obj.get(name, default)


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

    ``lowered`` is a ``lowering.LoweredModel`` or anything with the same attributes.
    ``reference``: run the TOSA reference model for the executor column (or pass its captured
    tensors, e.g. ``DiffReport.expected``); ``local``: compute the local errors (each layer run
    alone); ``rounding``: the rounding explainer, re-running downstream for every changed op, or
    only for the ``rounding_travel`` ops with most changed elements. ``captured``: the
    interpreter's tensors of this run, if already computed (reference form is accepted).
    ``executors``: other executors' captured tensors by label (e.g. ``{"VGF": vgf.capture(...)
    .tensors}``), each compared with the interpreter per row (:attr:`DriftRow.executors`, a
    table column and a share of the attribution).

    >>> report = drift(lm, example_inputs)     # doctest: +SKIP
    >>> report.output_rows[0].total.sqnr_db    # doctest: +SKIP
    24.6
    """
    t_start = time.perf_counter()
    seconds: dict[str, float] = {}
    tosa = _get(lowered, "tosa")
    if tosa is None:
        raise ValueError("drift needs a single TOSA graph; this model was split into partitions: "
                         "analyse each of lowered.partition_models()")
    graph = load(tosa)
    block = graph.main
    profile = str(_get(lowered, "profile", "INT") or "INT").upper()
    provenance: Mapping[str, Mapping[str, Any]] = _get(lowered, "provenance", {}) or {}
    quant_params: Mapping[str, Mapping[str, Any]] = _get(lowered, "quant_params", {}) or {}
    float_gm = _get(lowered, "float_model")
    quant_gm = _get(lowered, "quantized_model")
    graph_module = _get(lowered, "graph_module")
    notes: list[str] = []

    inputs = tuple(inputs)
    tosa_inputs = list(lowered.quantize_inputs(*inputs))

    # ---- executions
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
    float_acts = _capture_fx(float_gm, inputs, f64=False) if float_gm is not None else {}
    fq_acts = _capture_fx(quant_gm, inputs, f64=True) if quant_gm is not None else {}
    seconds["torch"] = time.perf_counter() - t
    if float_gm is None:
        notes.append("no float model (already-quantized input): float columns are missing")
    # nodes that own a computed TOSA tensor; a node that owns none was folded into its input's
    # tensor by the lowering (a BatchNorm into the conv, a ReLU into the RESCALE before it), so
    # that tensor holds the folded node's value
    owners: set[str] = set()
    for name in list(block.inputs) + [o for op in block.operators if op.op not in _CONST_OPS for o in op.outputs]:
        p = provenance.get(name) or {}
        owners |= {str(p.get("fx_node", "")), str(p.get("decomposed_from", "") or "")}
    # one partition of a partly lowered model: nodes computed elsewhere (on the CPU, in another
    # partition) are not folded into this graph's tensors
    owners |= set(_get(lowered, "nodes_elsewhere", ()) or ())
    float_chain = _folded_chains(float_gm, owners)
    fq_chain = _folded_chains(quant_gm, owners)
    layouts: dict[str, Any] = {}
    if graph_module is not None:
        layouts = {n.name: n.meta.get("layout") for n in graph_module.graph.nodes}

    ref_values: Mapping[str, np.ndarray] | None = None
    if isinstance(reference, Mapping):
        ref_values = reference
    elif reference:
        t = time.perf_counter()
        from . import reference as reference_model

        try:
            ref_values = reference_model.run(graph, tosa_inputs, capture=True).tensors
        except Exception as exc:  # noqa: BLE001 - the executor column is optional
            notes.append(f"reference model unavailable: {type(exc).__name__}: {exc}")
        seconds["reference"] = time.perf_counter() - t

    # ---- which tensors hold a node's value
    producer: dict[str, int] = {}
    for i, op in enumerate(block.operators):
        for o in op.outputs:
            producer[o] = i
    order = list(block.inputs) + [o for op in block.operators if op.op not in _CONST_OPS for o in op.outputs]

    def fx_of(name: str) -> str:
        return str((provenance.get(name) or {}).get("fx_node", ""))

    if profile == "INT" and quant_params:
        seeds = [n for n in order if n in quant_params]
    else:
        seeds = [n for n in order if fx_of(n) and n == fx_of(n)]
    alias: dict[str, str] = {s: s for s in seeds}
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

    # the PyTorch values of each row: fake-quant node (node_of) and float node (float_of); of a
    # decomposition (softmax -> amax, sub, exp, ...) only the last piece holds the original value
    def origin(name: str) -> str:
        return str((provenance.get(name) or {}).get("decomposed_from", "") or "")

    node_of: dict[str, str] = {}
    float_of: dict[str, str] = {}
    last_of_original: dict[str, str] = {}
    for name in order:
        if name not in alias:
            continue
        fx, orig = fx_of(name), origin(name)
        known = fx in fq_acts or fx in float_acts
        node_of[name] = fx if known or not (orig in fq_acts or orig in float_acts) else orig
        if fx in float_acts:
            float_of[name] = float_chain.get(fx, fx)
        elif orig in float_acts:
            last_of_original[orig] = alias[name]
    for name in order:
        if name in alias and name not in float_of:
            orig = origin(name)
            if orig and last_of_original.get(orig) == alias[name]:
                float_of[name] = float_chain.get(orig, orig)
    for name, node in zip(block.outputs, _output_nodes(float_gm), strict=False):
        if name in alias and name not in float_of and node in float_acts:
            float_of[name] = node

    # ---- rows: references (every row), metrics (primary rows; aliases copy them)
    rows: list[DriftRow] = []
    refs: dict[str, _Ref] = {}
    for name in order:
        if name not in alias or name not in block.tensors:
            continue
        row, ref = _make_row(name, len(rows), block, env, alias, provenance, quant_params, node_of,
                             float_of, fq_chain, producer, float_acts, fq_acts, layouts)
        rows.append(row)
        if ref is not None:
            refs[name] = ref
    by_name = {r.tensor: r for r in rows}
    for row in rows:
        ref = refs.get(row.tensor)
        if ref is not None and row.alias_of is None:
            _row_metrics(row, ref, env[row.tensor], quantized=quant_gm is not None)
        if ref_values is not None and row.tensor in ref_values and row.tensor in env:
            _executor(row, block, ref_values[row.tensor], env[row.tensor], ref.q if ref else None)
        for label, values in (executors or {}).items():
            if row.tensor in values and row.tensor in env:
                row.executors[label] = ExecutorCheck(*_executor_stats(
                    block, row.tensor, values[row.tensor], env[row.tensor], ref.q if ref else None))
    _mark_shared_ranges(block, rows, by_name)

    # ---- local errors
    if local:
        t = time.perf_counter()
        _local_errors(graph, env, rows, refs, producer, notes)
        seconds["local"] = time.perf_counter() - t
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

    # ---- rounding explainer
    op_nodes = {}
    for i, op in enumerate(block.operators):
        if op.op not in _CONST_OPS and op.outputs:
            prov = provenance.get(op.outputs[0]) or {}
            op_nodes[i] = (op.op, str(prov.get("fx_node", "")), str(prov.get("nn_module_stack", "")))
    report = DriftReport(profile=profile, rows=rows, outputs=list(block.outputs), notes=notes,
                         seconds=seconds, op_nodes=op_nodes)
    if rounding and profile == "INT":
        t = time.perf_counter()
        _rounding(graph, env, report, provenance, quant_params, quant_gm, alias, rounding_travel, tie_window)
        seconds["rounding"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t_start
    return report


def _make_row(name: str, position: int, block: Block, env: Mapping[str, np.ndarray], alias: Mapping[str, str],
              provenance: Mapping[str, Mapping[str, Any]], quant_params: Mapping[str, Mapping[str, Any]],
              node_of: Mapping[str, str], float_of: Mapping[str, str], fq_chain: Mapping[str, str],
              producer: Mapping[str, int], float_acts: Mapping[str, np.ndarray], fq_acts: Mapping[str, np.ndarray],
              layouts: Mapping[str, Any]) -> tuple[DriftRow, _Ref | None]:
    """The row of one tensor and its float / fake-quant references in TOSA layout."""
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
        own = fq_acts.get(_QKEY + qnode)
        used = fq_acts.get(_QSCALE + qnode)
        if own is not None and used is not None and own.shape == base.shape and \
                math.isclose(float(used[0]), q.scale, rel_tol=1e-9) and int(used[1]) == q.zp:
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


# --------------------------------------------------------------------------- local errors


def _layer_chain(block: Block, target: str, producer: Mapping[str, int],
                 boundary: set[str]) -> tuple[list[int], list[str]] | None:
    """Operators (indices, in order) computing ``target`` from ``boundary`` tensors or graph
    inputs, and those inputs; None if the layer is larger than ``_LOCAL_CHAIN_LIMIT`` ops."""
    ops: set[int] = set()
    used: list[str] = []
    stack = [producer[target]]
    while stack:
        i = stack.pop()
        if i in ops:
            continue
        ops.add(i)
        if len(ops) > _LOCAL_CHAIN_LIMIT:
            return None
        for n in block.operators[i].inputs:
            if _is_const(block, n):
                continue
            if n in boundary or n not in producer:
                if n not in used:
                    used.append(n)
                continue
            stack.append(producer[n])
    return sorted(ops), used


def _local_errors(graph: Graph, env: Mapping[str, np.ndarray], rows: list[DriftRow],
                  refs: Mapping[str, _Ref], producer: Mapping[str, int], notes: list[str]) -> None:
    """Run each layer (the ops from other nodes' tensors to this row) on ideal inputs."""
    block = graph.main
    node = {r.tensor: r.torch_node for r in rows}
    has_ref = {n for n, r in refs.items() if r.float_value is not None or r.fq_value is not None}
    failed = 0
    for row in rows:
        ref = refs.get(row.tensor)
        if ref is None or row.alias_of is not None or row.tensor not in producer:
            continue
        boundary = {n for n in has_ref if node.get(n) != row.torch_node}
        chain = _layer_chain(block, row.tensor, producer, boundary)
        if chain is None:
            continue
        indices, used = chain
        ops = [block.operators[i] for i in indices]
        for which in ("float", "fq"):
            feed: dict[str, np.ndarray] = {}
            for n in used:
                r = refs.get(n)
                src = None if r is None else (r.float_value if which == "float" else r.fq_value)
                if src is None:
                    feed[n] = env[n]
                    continue
                working = dtype_info(block.tensors[n].dtype).working
                feed[n] = (r.q.quantize(src) if r.q is not None else np.asarray(src)).astype(working)
            try:
                out = run_operators(graph, ops, _Overlay(feed, env))[row.tensor]
            except Exception as exc:  # noqa: BLE001 - e.g. a REQUIRE on out-of-range inputs
                failed += 1
                row.note = (row.note + "; " if row.note else "") + f"local run failed: {type(exc).__name__}"
                break
            q = ref.q
            scale = q.scale if q else None
            actual = q.dequantize(out) if q else np.asarray(out, np.float64)
            if which == "float" and ref.float_value is not None:
                row.local = _stats(ref.float_value, actual, scale)
            elif which == "fq" and ref.fq_value is not None:
                grid = _grid_stats(ref.fq_int, out, q) if ref.fq_int is not None else None
                row.local_lowering = grid or _stats(ref.fq_value, actual, scale)
    if failed:
        notes.append(f"{failed} local layer runs failed (see the rows' notes)")


# --------------------------------------------------------------------------- rounding


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
              quant_gm: Any, alias: Mapping[str, str], budget: int | None, tie_window: float) -> None:
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
            new_table, note = _table_alternative(block, op, provenance, quant_params, quant_gm, alias, tie_window)
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
                       quant_params: Mapping[str, Mapping[str, Any]], quant_gm: Any,
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
    node = None
    if quant_gm is not None:
        node = next((n for n in quant_gm.graph.nodes if n.name == fx and n.op == "call_function"), None)
    if q_in is None or node is None:
        return None, "function unknown: not analysed"
    import torch

    x = torch.tensor(q_in.dequantize(levels), dtype=torch.float64)
    try:
        with torch.no_grad():
            y = node.target(x, *node.args[1:], **node.kwargs).double().numpy()
    except Exception:  # noqa: BLE001 - not an elementwise function of one tensor
        return None, "function not evaluable: not analysed"
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
