"""Terminal summaries and the HTML report of a check: drift, Vela cycles, diff, golden, gates.

Everything here takes results as values (a :class:`~tosa_verify.drift.DriftReport`, Vela programs,
a diff report, a golden diff report) and duck-types the ones from other packages, so this module
imports neither ``ethosu`` nor ``golden``. Figures are drawn with matplotlib's object API (no
pyplot, no global backend switch) and embedded in the HTML as base64 PNG.

>>> from tosa_verify.report import format_summary, write_html
>>> print(format_summary(drift_report, programs=[program]))        # doctest: +SKIP
>>> write_html("report.html", drift=drift_report, programs=[program])   # doctest: +SKIP
PosixPath('report.html')
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._text import clip, db, table
from .drift import HIST_RANGE, DriftReport
from .evaluate import EvalReport

__all__ = [
    "Gate",
    "LayerSummary",
    "cycles_figure",
    "error_histogram_figure",
    "figure_png",
    "format_summary",
    "layer_summaries",
    "rounding_lines",
    "sqnr_figure",
    "write_html",
]


@dataclass
class Gate:
    """One pass/fail criterion of a check (``value`` and ``limit`` as shown to the user).

    >>> Gate("min-sqnr", True, "output SQNR 41.5 dB >= 30 dB").status
    'pass'
    """

    name: str
    passed: bool
    detail: str = ""

    @property
    def status(self) -> str:
        return "pass" if self.passed else "FAIL"


@dataclass
class LayerSummary:
    """One PyTorch node: its value's errors (from the last drift row of the node) and cycles."""

    node: str
    module_path: str
    tensor: str
    ops: list[str]
    sqnr_db: float | None
    quant_sqnr_db: float | None
    local_sqnr_db: float | None
    max_steps: float | None
    mean_steps: float | None
    lowering_off: int | None
    own_off: int | None
    shares_range_with: str = ""
    cycles: dict[str, int] = field(default_factory=dict)


def _finite(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def layer_summaries(drift: DriftReport, programs: Sequence[Any] = ()) -> list[LayerSummary]:
    """One :class:`LayerSummary` per torch node, in network order, with Vela cycles per target.

    Vela layers are attributed through their TOSA operator index (``layer.tosa_op_index``) and
    the drift report's operator -> node map; cycles of layers without a source operator are
    collected under the node ``""``.

    >>> [s.node for s in layer_summaries(report)][:2]     # doctest: +SKIP
    ['x', 'conv2d']
    """
    by_node: dict[str, LayerSummary] = {}
    for row in drift.rows:  # the node's last row with a float reference stands for the node
        s = by_node.get(row.torch_node)
        if s is None:
            s = by_node[row.torch_node] = LayerSummary(row.torch_node, row.module_path, row.tensor, [], None, None,
                                                       None, None, None, None, None)
        s.ops.append(row.op)
        if row.total is None and s.sqnr_db is not None:
            continue
        s.tensor = row.tensor
        s.module_path = row.module_path or s.module_path
        s.sqnr_db = row.total.sqnr_db if row.total else None
        s.quant_sqnr_db = row.quantization.sqnr_db if row.quantization else None
        s.local_sqnr_db = row.local.sqnr_db if row.local else None
        s.max_steps = row.total.max_steps if row.total else None
        s.mean_steps = row.total.mean_steps if row.total else None
        s.lowering_off = row.lowering.off if row.lowering else None
        s.own_off = row.local_lowering.off if row.local_lowering else None
        s.shares_range_with = row.shares_range_with
    for program in programs:
        target = str(getattr(program, "target", "npu"))
        for layer in getattr(program, "layers", ()):
            index = getattr(layer, "tosa_op_index", None)
            node = drift.op_nodes.get(index, ("", "", ""))[1] if index is not None else ""
            s = by_node.get(node)
            if s is None:
                s = by_node[node] = LayerSummary(node, drift.op_nodes.get(index, ("", "", ""))[2] if index is not None else "",
                                                 "", [], None, None, None, None, None, None, None)
            s.cycles[target] = s.cycles.get(target, 0) + int(getattr(layer, "cycles", 0) or 0)
    return list(by_node.values())


# --------------------------------------------------------------------------- terminal


def format_summary(drift: DriftReport | None = None, *, programs: Sequence[Any] = (), diff: Any = None,
                   golden: Any = None, gates: Sequence[Gate] = (), max_layers: int | None = 40) -> str:
    """The terminal summary of a check: per-layer table, outputs, executors, Vela, golden, gates.

    With more than ``max_layers`` layers, the table keeps the layers with the lowest SQNR and
    local SQNR (and says how many it left out).

    >>> print(format_summary(drift_report, programs=[program], gates=gates))   # doctest: +SKIP
    """
    lines: list[str] = []
    targets = [str(getattr(p, "target", "npu")) for p in programs]
    if drift is not None:
        layers = [s for s in layer_summaries(drift, programs) if s.node]
        shown = layers
        if max_layers is not None and len(layers) > max_layers:
            def badness(s: LayerSummary) -> float:
                vals = [v for v in (s.sqnr_db, s.local_sqnr_db) if _finite(v) and not s.shares_range_with]
                return min(vals) if vals else math.inf
            keep = {id(s) for s in sorted(layers, key=badness)[:max_layers]}
            shown = [s for s in layers if id(s) in keep]
        header = ["node (module)", "SQNR dB", "quant dB", "local dB", "steps max/mean", "lower", "own",
                  *[f"cycles {t}" for t in targets]]
        rows = []
        for s in shown:
            rows.append([
                clip(s.node + (f" ({s.module_path})" if s.module_path else ""), 44),
                db(s.sqnr_db) + ("*" if s.shares_range_with else ""),
                db(s.quant_sqnr_db),
                db(s.local_sqnr_db),
                f"{s.max_steps:.1f}/{s.mean_steps:.2f}" if s.max_steps is not None and s.mean_steps is not None else "-",
                "-" if s.lowering_off is None else str(s.lowering_off),
                "-" if s.own_off is None else str(s.own_off),
                *[str(s.cycles.get(t, "")) if s.cycles.get(t) else "-" for t in targets],
            ])
        lines.append(f"per-layer drift ({drift.profile}): {len(layers)} layers"
                     + (f", {len(layers) - len(shown)} best ones not shown" if len(shown) < len(layers) else ""))
        lines.extend(table(header, rows, right=set(range(1, len(header)))))
        if any(s.shares_range_with for s in shown):
            lines.append("* clipped to the range of the activation that follows (fused): expected to be low")
        lines.append("")
        lines.extend(drift._summary_lines())
        lines.extend(rounding_lines(drift))
    if diff is not None:
        first = getattr(diff, "first_divergence", None)
        if getattr(diff, "ok", False):
            lines.append(f"interpreter vs reference model: all {len(getattr(diff, 'ops', []))} operators agree")
        elif first is not None:
            lines.append(f"interpreter vs reference model: first divergence at operator {first.index} {first.op}")
        elif getattr(diff, "error", ""):
            lines.append(f"interpreter vs reference model: {diff.error}")
    for p in programs:
        perf = getattr(p, "performance", None)
        if perf is not None:
            lines.append(f"Vela {p.target}: {perf.total_cycles} cycles, {perf.inference_time_ms:.3f} ms at "
                         f"{perf.core_clock_hz / 1e6:.0f} MHz, SRAM {perf.sram_used_kib:.1f} KiB, "
                         f"off-chip {perf.off_chip_used_kib:.1f} KiB")
    if golden is not None:
        text = golden.format() if hasattr(golden, "format") else str(golden)
        lines.append("golden: " + text.replace("\n", "\n  "))
    if gates:
        lines.append("")
        lines.extend(table(["gate", "status", "detail"], [[g.name, g.status, _short(g.detail)] for g in gates],
                           right=set()))
        # a long detail (Vela's list of refused operators) in full below, not as one table row
        # as wide as itself
        lines.extend(f"{g.name}: {g.detail}" for g in gates if _short(g.detail) != g.detail)
        failed = [g.name for g in gates if not g.passed]
        lines.append("RESULT: " + ("FAIL (" + ", ".join(failed) + ")" if failed else "PASS"))
    return "\n".join(lines)


#: widest gate detail the gate table shows in its row
_DETAIL_WIDTH = 72


def _short(detail: str) -> str:
    """``detail`` cut to :data:`_DETAIL_WIDTH` characters (``... (below)`` marks the cut).

    >>> _short("ok"), len(_short("x" * 200))
    ('ok', 72)
    """
    if len(detail) <= _DETAIL_WIDTH:
        return detail
    return detail[:_DETAIL_WIDTH - 12] + " ... (below)"


def rounding_lines(drift: DriftReport) -> list[str]:
    """The rounding explainer in two lines, every count named by its op kind.

    The explainer looks at RESCALEs (single vs double rounding) and TABLEs (near-ties); the
    "all flipped" run flips the RESCALEs only, so both lines say which ops they count.

    >>> rounding_lines(report)   # doctest: +SKIP
    ['rounding: 1 of 4 ops (2 RESCALE, 2 TABLE) change elements under the other rounding', ...]
    """
    if not drift.rounding:
        return []
    kinds = {op: sum(r.op == op for r in drift.rounding) for op in sorted({r.op for r in drift.rounding})}
    changed = [r for r in drift.rounding if r.changed]
    worst = max(drift.rounding, key=lambda r: r.output_changed)
    line = (f"rounding: {len(changed)} of {len(drift.rounding)} ops "
            f"({', '.join(f'{n} {op}' for op, n in kinds.items())}) change elements under the other rounding")
    if worst.output_changed:
        line += f"; most travelling: {worst.tensor} -> {worst.output_changed} output elements"
    lines = [line]
    if drift.all_flipped:
        a, n = drift.all_flipped, kinds.get("RESCALE", 0)
        plural = "s" if n != 1 else ""
        which = f"all {n} RESCALE{plural}" if a["ops"] == n else f"{a['ops']} of the {n} RESCALE{plural}"
        kept = ", TABLEs kept" if "TABLE" in kinds else ""
        lines.append(f"rounding: {which} flipped together{kept} -> outputs change in "
                     f"{a['output_changed']} elements (max {a['output_max_change']} steps)")
    return lines


# --------------------------------------------------------------------------- figures


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def figure_png(fig: Any) -> bytes:
    """Render a matplotlib Figure to PNG bytes (Agg canvas, no pyplot state).

    >>> png = figure_png(sqnr_figure(report))   # doctest: +SKIP
    >>> png[:4]                                  # doctest: +SKIP
    b'\\x89PNG'
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    buf = io.BytesIO()
    canvas.print_png(buf)
    return buf.getvalue()


def _xticks(ax: Any, labels: Sequence[str]) -> None:
    """Every layer gets its label (a reader looks for a layer by name); the font shrinks with
    the number of layers and the figure widens (:func:`_layers_width`)."""
    n = len(labels)
    ax.set_xticks(list(range(n)))
    ax.set_xticklabels(list(labels), rotation=90, fontsize=8 if n <= 25 else 7 if n <= 60 else 5.5)
    ax.set_xlim(-0.7, n - 0.3)


def _layers_width(n: int) -> float:
    """Figure width (inches) for ``n`` labelled layers: at least ~9 px per label at 110 dpi."""
    return min(26.0, 5.0 + 0.13 * n)


def _plot_db(ax: Any, xs: Sequence[int], ys: Sequence[float | None], top: float, **kw: Any) -> None:
    """A dB line where infinite values sit on the top edge as open triangles."""
    fin_x = [x for x, y in zip(xs, ys, strict=True) if _finite(y) and not math.isinf(y)]  # type: ignore[arg-type]
    fin_y = [y for y in ys if _finite(y) and not math.isinf(y)]  # type: ignore[arg-type]
    line = ax.plot(fin_x, fin_y, **kw)[0]
    inf_x = [x for x, y in zip(xs, ys, strict=True) if y is not None and math.isinf(y) and y > 0]
    if inf_x:
        ax.plot(inf_x, [top] * len(inf_x), linestyle="none", marker="^", markersize=5,
                markerfacecolor="none", color=line.get_color())


def _db_top(values: Sequence[float | None]) -> float:
    fin = [v for v in values if _finite(v) and not math.isinf(v)]  # type: ignore[arg-type]
    return (max(fin) if fin else 60.0) + 6.0


def sqnr_figure(drift: DriftReport) -> Any:
    """Per-layer SQNR along the network: float vs TOSA, local, and float vs fake-quant.

    >>> fig = sqnr_figure(report)   # doctest: +SKIP
    """
    layers = [s for s in layer_summaries(drift) if s.node and (s.sqnr_db is not None or s.local_sqnr_db is not None)]
    n = len(layers)
    fig = _figure(_layers_width(n), 4.6)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(n))
    total = [s.sqnr_db for s in layers]
    local = [s.local_sqnr_db for s in layers]
    quant = [s.quant_sqnr_db for s in layers]
    top = _db_top(total + local + quant)
    normal = [i for i, s in enumerate(layers) if not s.shares_range_with]
    # where the lowering adds no error, fake-quant and TOSA coincide: the quantization line is
    # drawn last, thin and with hollow markers, so it stays visible on top of the TOSA line
    same = all(quant[i] == total[i] for i in normal)
    _plot_db(ax, [xs[i] for i in normal], [local[i] for i in normal], top, color="#2a9d8f", linewidth=1.2,
             linestyle="--", marker=".", markersize=4, label="local: layer fed float-accurate inputs", zorder=2)
    _plot_db(ax, [xs[i] for i in normal], [total[i] for i in normal], top, color="#1d3557", linewidth=2.4,
             marker="o", markersize=4, label="float vs TOSA (propagated)", zorder=3)
    _plot_db(ax, [xs[i] for i in normal], [quant[i] for i in normal], top, color="#f4a261", linewidth=1,
             linestyle=":", marker="o", markersize=2.5, markerfacecolor="none", zorder=4,
             label="float vs fake-quant (quantization)" + (": equal to TOSA at every layer" if same else ""))
    clipped = [i for i, s in enumerate(layers) if s.shares_range_with and _finite(total[i])]
    if clipped:
        ax.plot([xs[i] for i in clipped], [total[i] for i in clipped], linestyle="none", marker="x",
                color="#e76f51", markersize=5, label="pre-activation, clipped to the activation's range")
    ax.set_ylabel("SQNR (dB, higher is better)")
    ax.set_title(f"Per-layer SQNR along the network ({drift.profile})", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_ylim(bottom=min(0.0, *(v for v in total if _finite(v) and not math.isinf(v))) if any(
        _finite(v) and not math.isinf(v) for v in total) else 0.0, top=top + 2)
    _xticks(ax, [s.node for s in layers])
    if any(v is not None and math.isinf(v) for v in total + local + quant):
        ax.annotate("▵ = exact (infinite SQNR)", xy=(1.0, 1.0), xycoords="axes fraction", ha="right",
                    va="bottom", fontsize=7, color="#555555")
    ax.legend(loc="lower left", fontsize=8, framealpha=0.85)
    return fig


def error_histogram_figure(drift: DriftReport) -> Any:
    """Histograms of the error in quantization steps: TOSA - float and TOSA - fake-quant.

    Summed over the layers' primary tensors; pre-activation tensors clipped to their
    activation's range are left out of the first panel (their clipping is removed downstream).
    """
    bins = 2 * HIST_RANGE + 1
    total = np.zeros(bins, dtype=np.int64)
    lowering = np.zeros(bins, dtype=np.int64)
    for r in drift.primary_rows:
        if r.steps_histogram and not r.shares_range_with:
            total += np.asarray(r.steps_histogram, dtype=np.int64)
        if r.lowering_histogram:
            lowering += np.asarray(r.lowering_histogram, dtype=np.int64)
    fig = _figure(10.0, 3.8)
    labels = [str(k) for k in range(-HIST_RANGE, HIST_RANGE + 1)]
    labels[0], labels[-1] = f"≤{-HIST_RANGE}", f"≥{HIST_RANGE}"
    for k, (counts, title, color) in enumerate((
        (total, "TOSA − float (quantization + lowering)", "#1d3557"),
        (lowering, "TOSA − fake-quant (lowering, propagated along the chain)", "#e76f51"),
    )):
        ax = fig.add_subplot(1, 2, k + 1)
        xs = np.arange(-HIST_RANGE, HIST_RANGE + 1)
        ax.bar(xs, counts, color=color, width=0.8)
        ax.set_yscale("log")
        ax.set_ylim(0.5, max(10.0, float(counts.max()) * 3))
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_xlabel("error in quantization steps of the tensor")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        n = int(counts.sum())
        if n:
            exact = int(counts[HIST_RANGE])
            ax.annotate(f"{n} elements, {100 * exact / n:.2f} % at 0", xy=(0.02, 0.97), xycoords="axes fraction",
                        va="top", fontsize=8)
        else:
            ax.annotate("no integer tensors", xy=(0.5, 0.5), xycoords="axes fraction", ha="center")
        if k == 0:
            ax.set_ylabel("elements (log scale)")
    return fig


def cycles_figure(drift: DriftReport, program: Any) -> Any:
    """Vela cycles per layer (bars) above the per-layer SQNR (lines), on a shared axis."""
    layers = [s for s in layer_summaries(drift, [program]) if s.node]
    target = str(getattr(program, "target", "npu"))
    n = len(layers)
    fig = _figure(_layers_width(n), 6.2)
    gs = fig.add_gridspec(2, 1, height_ratios=[1.1, 1.0])
    ax1 = fig.add_subplot(gs[0])
    ax2 = fig.add_subplot(gs[1], sharex=ax1)
    xs = list(range(n))
    cycles = [s.cycles.get(target, 0) for s in layers]
    ax1.bar(xs, cycles, color="#457b9d", width=0.8)
    if any(cycles):  # name the most expensive layer on the bar itself
        big = max(xs, key=lambda i: cycles[i])
        ax1.annotate(f"{layers[big].node}: {cycles[big]:,}", xy=(big, cycles[big]), xytext=(0, 2),
                     textcoords="offset points", ha="center", va="bottom", fontsize=7)
        ax1.set_ylim(top=max(cycles) * 1.12)
    total = getattr(getattr(program, "performance", None), "total_cycles", None)
    unattributed = sum(layer.cycles for layer in getattr(program, "layers", ())
                       if getattr(layer, "tosa_op_index", None) is None)
    title = f"Vela cycles per layer on {target}"
    if total:
        title += f" (network total {total:,} cycles"
        title += f"; {unattributed:,} in layers without a source op)" if unattributed else ")"
    ax1.set_title(title, fontsize=10)
    ax1.set_ylabel("cycles")
    ax1.grid(True, axis="y", alpha=0.3)
    ax1.tick_params(labelbottom=False)
    total_db = [s.sqnr_db for s in layers]
    local_db = [s.local_sqnr_db for s in layers]
    top = _db_top(total_db + local_db)
    _plot_db(ax2, xs, local_db, top, color="#2a9d8f", linestyle="--", marker=".", markersize=4,
             linewidth=1.2, label="local SQNR")
    _plot_db(ax2, xs, total_db, top, color="#1d3557", marker="o", markersize=3.5, linewidth=1.5,
             label="SQNR float vs TOSA")
    ax2.set_ylabel("SQNR (dB)")
    ax2.set_title("per-layer error", fontsize=10)
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.legend(loc="lower left", fontsize=8, framealpha=0.85)
    _xticks(ax2, [s.node for s in layers])
    return fig


def _png_tag(fig: Any, alt: str) -> str:
    data = base64.b64encode(figure_png(fig)).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1b1b1b;max-width:1500px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:3px}
table{border-collapse:collapse;font-size:12px;margin:8px 0} th,td{border:1px solid #ddd;padding:3px 7px}
th{background:#f3f4f6;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#1a7f37;font-weight:600} .fail{color:#cf222e;font-weight:600} .muted{color:#666}
img{max-width:100%;border:1px solid #eee;margin:6px 0} pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px}
tr.clip td{color:#8a8a8a}
"""


def _cell(value: Any, numeric: bool = False) -> str:
    cls = ' class="n"' if numeric else ""
    return f"<td{cls}>{html.escape(str(value))}</td>"


def _html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: set[int] = frozenset(),
                row_classes: Sequence[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for k, r in enumerate(rows):
        cls = f' class="{row_classes[k]}"' if row_classes and row_classes[k] else ""
        out.append(f"<tr{cls}>" + "".join(_cell(v, i in numeric) for i, v in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def write_html(path: str | os.PathLike, *, drift: DriftReport | None = None, programs: Sequence[Any] = (),
               diff: Any = None, golden: Any = None, gates: Sequence[Gate] = (), title: str = "tosa-verify report",
               meta: Mapping[str, Any] | None = None, partitions: Sequence[tuple[str, Any, Sequence[Any], Any, Any]] = (),
               cpu_nodes: Sequence[Any] = ()) -> Path:
    """Write a self-contained HTML report (figures embedded as base64 PNG) and return its path.

    ``meta`` is shown as a key/value table at the top (model, profile, versions, ...). A partly
    lowered model gives ``partitions``, one ``(title, drift, programs, diff, golden)`` per TOSA
    partition (each gets the sections of a whole model), and ``cpu_nodes`` (``node``, ``target``,
    ``reason``), listed in their own table.

    >>> write_html("report.html", drift=report, programs=[program], gates=gates)   # doctest: +SKIP
    PosixPath('report.html')
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             f"<div class='muted'>generated {html.escape(_dt.datetime.now().isoformat(timespec='seconds'))}</div>"]
    if meta:
        parts.append(_html_table(["", ""], [[k, v] for k, v in meta.items()]))
    if gates:
        failed = [g for g in gates if not g.passed]
        verdict = "<span class='fail'>FAIL</span>" if failed else "<span class='pass'>PASS</span>"
        parts.append(f"<h2>Gates: {verdict}</h2>")
        rows = "".join(
            f"<tr><td>{html.escape(g.name)}</td><td class='{'pass' if g.passed else 'fail'}'>{g.status}</td>"
            f"<td>{html.escape(g.detail)}</td></tr>" for g in gates)
        parts.append(f"<table><tr><th>gate</th><th>status</th><th>detail</th></tr>{rows}</table>")
    if cpu_nodes:
        parts.append(f"<h2>Nodes left on the CPU ({len(cpu_nodes)})</h2>")
        parts.append(_html_table(["node", "operator", "reason"], [[c.node, c.target, c.reason] for c in cpu_nodes]))
    parts.extend(_sections(drift, programs, diff, golden, level=2))
    for name, p_drift, p_programs, p_diff, p_golden in partitions:
        parts.append(f"<h2 class='partition'>TOSA partition {html.escape(name)}</h2>")
        if p_drift is None:
            parts.append("<p class='muted'>No drift analysis: the partition's inputs could not be computed "
                         "in PyTorch (checked on random inputs).</p>")
        parts.extend(_sections(p_drift, p_programs, p_diff, p_golden, level=3))
    parts.append("</body></html>")
    return write_text_atomic(path, "\n".join(parts))


def _sections(drift: DriftReport | None, programs: Sequence[Any], diff: Any, golden: Any, *,
              level: int) -> list[str]:
    """The HTML sections of one TOSA graph (a whole model or one partition), headings at ``level``."""
    h = f"h{level}"
    parts: list[str] = []
    if drift is not None:
        parts.append("<h2>Outputs</h2><ul>")
        parts.extend(f"<li>{html.escape(line)}</li>" for line in drift._summary_lines())
        parts.append("</ul>")
        parts.append("<h2>Per-layer SQNR along the network</h2>")
        parts.append("<p class='muted'>Propagated: the TOSA graph against the float model. Local: each layer run "
                     "alone on quantize(float inputs), i.e. the error the layer adds by itself. Crosses mark "
                     "pre-activation tensors whose quantized range is the following activation's, so their "
                     "negative part is clipped on purpose.</p>")
        parts.append(_png_tag(sqnr_figure(drift), "per-layer SQNR"))
        parts.append("<h2>Error in quantization steps</h2>")
        parts.append(_png_tag(error_histogram_figure(drift), "error histogram"))
    for p in programs:
        if drift is not None and getattr(p, "layers", ()):
            parts.append(f"<h2>Vela cycles and error per layer: {html.escape(str(p.target))}</h2>")
            parts.append(_png_tag(cycles_figure(drift, p), f"cycles per layer {p.target}"))
    if programs:
        parts.append("<h2>Vela performance</h2>")
        rows = []
        for p in programs:
            perf = p.performance
            rows.append([p.target, p.system_config, p.memory_mode, f"{perf.total_cycles:,}",
                         f"{perf.inference_time_ms:.3f}", f"{perf.sram_used_kib:.1f}", f"{perf.off_chip_used_kib:.1f}",
                         f"{perf.macs:,}", ", ".join(f"{k}: {v}" for k, v in sorted(p.tosa_ops_on_npu.items()))])
        parts.append(_html_table(["target", "system config", "memory mode", "cycles", "ms", "SRAM KiB",
                                  "off-chip KiB", "MACs", "TOSA ops on NPU"], rows, numeric={3, 4, 5, 6, 7}))
    if drift is not None:
        parts.append("<h2>Per-tensor drift</h2>")
        parts.append("<p class='muted'>quant: float vs fake-quant; lower: elements where TOSA differs from "
                     "fake-quant (max steps); own: the same with the layer fed fake-quant inputs; exec: "
                     "interpreter vs reference model.</p>")
        rows, classes = [], []
        for r in drift.rows:
            rows.append([r.position, r.tensor, r.op, r.torch_node, r.module_path, "x".join(map(str, r.shape)),
                         r.layout, db(r.sqnr_db), db(r.quantization.sqnr_db if r.quantization else None),
                         db(r.local.sqnr_db if r.local else None),
                         f"{r.total.cosine:.5f}" if r.total and _finite(r.total.cosine) else "-",
                         f"{r.total.max_abs:.4g}" if r.total else "-",
                         f"{r.total.max_steps:.1f}/{r.total.mean_steps:.2f}" if r.total and r.total.max_steps is not None
                         and r.total.mean_steps is not None else "-",
                         _off(r.lowering), _off(r.local_lowering),
                         "-" if r.executor_mismatched is None else r.executor_mismatched,
                         f"{100 * r.clipped_fraction:.1f}" if r.clipped_fraction is not None else "-",
                         r.note])
            classes.append("clip" if r.shares_range_with else "")
        parts.append(_html_table(["#", "tensor", "op", "torch node", "module", "shape", "layout", "SQNR", "quant",
                                  "local", "cosine", "max|err|", "steps max/mean", "lower", "own", "exec", "clip %",
                                  "note"], rows, numeric=set(range(7, 17)), row_classes=classes))
        if drift.rounding:
            parts.append("<h2>Rounding explainer</h2>")
            parts.append("<p class='muted'>Each RESCALE re-run with the other rounding mode (single vs double), "
                         "each INT8 TABLE with its near-tie entries rounded the other way: elements that change "
                         "at the op, and how far the change travels (rows and output elements changed).</p>")
            rows = [[r.op_index, r.op, r.tensor, r.torch_node, f"{r.mode} → {r.alternative}", f"{r.changed}/{r.size}",
                     r.max_change, "-" if r.travelled is None else r.rows_changed,
                     "-" if r.travelled is None else f"{r.output_changed} ({r.output_max_change})", r.note]
                    for r in drift.rounding]
            parts.append(_html_table(["#", "op", "tensor", "torch node", "rounding", "changed", "max",
                                      "rows changed", "output changed (max)", "note"], rows, numeric={0, 5, 6, 7, 8}))
            if drift.all_flipped:
                a = drift.all_flipped
                parts.append(f"<p>All {a['ops']} RESCALEs flipped together: outputs change in "
                             f"{a['output_changed']} elements (max {a['output_max_change']} steps).</p>")
    if diff is not None:
        parts.append("<h2>Interpreter vs reference model</h2>")
        text = diff.format_table(all_ops=False) if hasattr(diff, "format_table") else str(diff)
        parts.append(f"<pre>{html.escape(text)}</pre>")
    if golden is not None:
        parts.append("<h2>Golden comparison</h2>")
        text = golden.format() if hasattr(golden, "format") else str(golden)
        parts.append(f"<pre>{html.escape(text)}</pre>")
    if drift is not None and drift.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in drift.notes) + "</ul>")
    return [part.replace("<h2>", f"<{h}>").replace("</h2>", f"</{h}>") for part in parts]


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` (parents created) through a temporary file: all or nothing.

    >>> write_text_atomic("out/report.html", "<html></html>")   # doctest: +SKIP
    PosixPath('out/report.html')
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out


def _off(stats: Any) -> str:
    if stats is None:
        return "-"
    if stats.off == 0:
        return "0"
    if stats.max_steps is None:
        return f"{db(stats.sqnr_db)} dB"
    return f"{stats.off} ({stats.max_steps:.3g})"


# --------------------------------------------------------------------------- eval report


def write_eval_html(path: str | os.PathLike, report: EvalReport, *, title: str = "tosa-verify eval",
                    meta: dict[str, Any] | None = None, gates: Sequence[Any] = ()) -> Path:
    """A self-contained HTML page: summary, gates, SQNR histogram, worst inputs, confusion, layers.

    >>> write_eval_html("eval.html", rep)   # doctest: +SKIP
    PosixPath('eval.html')
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    if meta:
        parts.append(_html_table(["", ""], [[k, v] for k, v in meta.items()]))
    if gates:
        parts.append("<h2>Gates</h2>" + _html_table(["gate", "status", "detail"],
                                                      [[g.name, g.status, g.detail] for g in gates]))
    parts.append("<h2>Agreement and accuracy</h2><pre>" + html.escape(report.format_summary()) + "</pre>")
    if report.sqnr_db is not None:
        fig = _figure(7, 3)
        ax = fig.add_subplot()
        finite = report.sqnr_db[np.isfinite(report.sqnr_db)]
        if finite.size:
            ax.hist(finite, bins=min(50, max(10, finite.size // 10)), color="#4472c4", label="TOSA vs float")
        if report.fake_quant_sqnr_db is not None:
            fq = report.fake_quant_sqnr_db[np.isfinite(report.fake_quant_sqnr_db)]
            if fq.size:
                ax.hist(fq, bins=min(50, max(10, fq.size // 10)), histtype="step", color="#c55a11",
                        label="fake-quant vs float")
        exact = int(np.sum(np.isinf(report.sqnr_db)))
        ax.set_xlabel("output SQNR (dB)" + (f"; {exact} inputs exact (not shown)" if exact else ""))
        ax.set_ylabel("inputs")
        ax.legend(fontsize=8)
        parts.append("<h2>Output SQNR over the data set</h2>" + _png_tag(fig, "output SQNR histogram"))
        rows = []
        for i in report.worst(20):
            rows.append([i, db(report.sqnr_db[i]),
                         *(int(report.predictions[k][i]) if k in report.predictions else "-"
                           for k in ("float", "fake_quant", "tosa")),
                         int(report.labels[i]) if report.labels is not None else "-"])
        parts.append("<h2>Worst inputs</h2>" + _html_table(
            ["input", "SQNR dB", "float top-1", "fake-quant top-1", "TOSA top-1", "label"], rows, numeric={0, 1}))
    if report.confusion is not None and report.classes <= 50:
        c = report.classes
        fig = _figure(4.5, 4)
        ax = fig.add_subplot()
        im = ax.imshow(np.log1p(report.confusion), cmap="Blues")
        for f in range(c):
            for t in range(c):
                if report.confusion[f, t]:
                    ax.text(t, f, str(report.confusion[f, t]), ha="center", va="center", fontsize=6,
                            color="#cf222e" if f != t else "black")
        ax.set_xlabel("TOSA top-1")
        ax.set_ylabel("float top-1")
        fig.colorbar(im, ax=ax, label="log(1 + inputs)")
        parts.append("<h2>Confusion: TOSA vs float</h2>" + _png_tag(fig, "confusion"))
    if report.layers:
        fig = _figure(9, 3)
        ax = fig.add_subplot()
        ys = [r.mean_db if math.isfinite(r.mean_db) else np.nan for r in report.layers]
        ax.plot(range(len(ys)), ys, marker="o", ms=3, label="mean")
        ax.plot(range(len(ys)), [r.min_db if math.isfinite(r.min_db) else np.nan for r in report.layers],
                marker=".", ms=3, lw=0.8, label="min")
        ax.set_ylabel("SQNR vs float (dB)")
        ax.set_xticks(range(len(ys)))
        ax.set_xticklabels([r.tensor for r in report.layers], rotation=90, fontsize=7)
        ax.legend(fontsize=8)
        parts.append(f"<h2>Per-layer SQNR over {len(report.layer_samples)} inputs</h2>" + _png_tag(fig, "per-layer SQNR"))
        parts.append(_html_table(["tensor", "torch node", "op", "mean dB", "min dB", "inputs"],
                                 [[r.tensor, r.torch_node, r.op, db(r.mean_db), db(r.min_db), r.samples]
                                  for r in report.layers], numeric={3, 4, 5}))
    parts.append("</body></html>")
    return write_text_atomic(path, "\n".join(parts))


def write_eval_json(path: str | os.PathLike, report: EvalReport, extra: dict[str, Any] | None = None) -> Path:
    """Write ``report.to_dict()`` (plus ``extra``) as JSON; return the path."""
    return write_text_atomic(path, json.dumps({**(extra or {}), **report.to_dict()}, indent=1, default=str))
