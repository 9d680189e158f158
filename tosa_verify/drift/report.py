"""The drift report: result types (rows, rounding rows, the report) and their text and JSON forms."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from .._text import clip, db, json_float, table

#: Histogram bins (in quantization steps) of :attr:`DriftRow.steps_histogram`: -8 .. 8, the
#: outermost bins also count everything beyond.
HIST_RANGE = 8


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
        return {k: json_float(v) for k, v in dataclasses.asdict(self).items()}


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
                out[f.name] = json_float(value)
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
        return {"mismatched": self.mismatched, "max_diff": json_float(self.max_diff),
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
            "attribution": {k: {kk: json_float(vv) for kk, vv in v.items()}
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
                clip(r.tensor, 26),
                r.op,
                clip(node, 40),
                "x".join(str(d) for d in r.shape) + (f" {r.layout}" if r.layout not in ("same", "") else ""),
                db(r.total.sqnr_db) if r.total else "-",
                db(r.quantization.sqnr_db) if r.quantization else "-",
                db(r.local.sqnr_db) if r.local else "-",
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
        lines.extend(table(header, rows, right=set(range(5, len(header))) | {0}))
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
                f"output {name}: SQNR {db(a['sqnr_db'])} dB vs float; error power "
                f"{100 * a['quantization_share']:.1f} % quantization, {100 * a['lowering_share']:.1f} % lowering, "
                f"{100 * a['executor_share']:.1f} % executor"
                + "".join(f", {100 * v:.1f} % {k[:-6]}" for k, v in a.items() if k.endswith("_share")
                          and k[:-6] not in ("quantization", "lowering", "executor"))
            )
        worst = self.worst_local()
        if worst is not None:
            lines.append(f"largest local loss: {worst.tensor} ({_where(worst)}): local SQNR {db(worst.local.sqnr_db)} dB")
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
                    else f"SQNR {db(ll.sqnr_db)} dB")
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
                         f"{db(worst.executor.sqnr_db)} dB at {worst.tensor}; `tosa-verify diff` judges compliance)")
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
                str(r.op_index), r.op, clip(r.tensor, 24), clip(r.torch_node, 20),
                f"{r.mode} -> {r.alternative}", f"{r.changed}/{r.size}", str(r.max_change),
                "-" if r.travelled is None else str(r.rows_changed), travel, r.note,
            ))
        lines = ["rounding explainer (elements that change under the other rounding, and how far it travels)"]
        lines.extend(table(header, rows, right={0, 5, 6, 7, 8}))
        if self.all_flipped:
            a = self.all_flipped
            lines.append(
                f"all {a['ops']} RESCALEs flipped together: outputs change in {a['output_changed']} elements "
                f"(max {a['output_max_change']} steps)"
            )
        return lines


# --------------------------------------------------------------------------- formatting


def _num(x: float) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.3g}"


def _count(stats: ErrorStats | None) -> str:
    if stats is None:
        return "-"
    if stats.off == 0:
        return "0"
    if stats.max_steps is None:  # float tensors: SQNR in dB
        return f"{db(stats.sqnr_db)}dB"
    return f"{stats.off} ({_num(stats.max_steps)})"


def _exec(row: DriftRow) -> str:
    if row.executor_mismatched is None:
        return "-"
    if row.executor_mismatched == 0:
        return "="
    if row.scale is None and row.executor is not None:  # float tensors: how close, in dB
        return f"{db(row.executor.sqnr_db)}dB"
    return str(row.executor_mismatched)


def _exec_other(check: ExecutorCheck | None, scale: float | None) -> str:
    if check is None:
        return "-"
    if check.mismatched == 0:
        return "="
    if scale is None and check.stats is not None:
        return f"{db(check.stats.sqnr_db)}dB"
    return str(check.mismatched)


def _where(row: DriftRow) -> str:
    return row.torch_node + (f" in {row.module_path}" if row.module_path else "")


