"""Does a TOSA graph agree on VGF? One verdict per graph, for surveys of many graphs.

:func:`judge_graph` compiles a graph with the model converter and runs it once on VGF with every
tensor captured (:class:`~vgf.runner.VgfExecutor`), then compares operator by operator with the
interpreter (:func:`tosa_verify.diff`): integer tensors bit for bit, float tensors within their
operator's compliance bound. The verdict is one of

* ``agree`` -- every tensor exact or within its bound;
* ``differ`` -- the first operator VGF computes differently is named;
* ``refused`` -- the converter rejected the graph (its message, naming the operator when it does);
* ``error`` -- the runner failed or crashed (its message).

:func:`format_table` prints a list of verdicts as a Markdown table (``docs/vgf.md`` keeps one).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import tosa_verify
from tosa_verify.diff import random_inputs
from tosa_verify.interpreter import Inputs, Source

from .compiler import compile_tosa
from .errors import VgfCompileError, VgfError
from .runner import VgfExecutor

__all__ = ["SurveyResult", "format_table", "judge_graph"]


@dataclass
class SurveyResult:
    """The verdict on one graph: ``status`` (agree/differ/refused/error) and a one-line ``detail``.

    Example:
        >>> SurveyResult("add", "INT", "agree", "3 exact").row()
        '| add | INT | agree | 3 exact |'
    """

    name: str
    profile: str
    status: str
    detail: str
    ops: str = ""
    seconds: float = 0.0

    def row(self) -> str:
        """The Markdown table row."""
        return f"| {self.name} | {self.profile} | {self.status} | {self.detail.replace('|', '/')} |"


def _ops(graph) -> str:
    counts = Counter(op.op for op in graph.main.operators if op.op not in ("CONST", "CONST_SHAPE"))
    return ", ".join(sorted(counts))


def judge_graph(name: str, tosa: Source, *, profile: str = "", inputs: Inputs | None = None,
                seed: int = 0) -> SurveyResult:
    """Compile ``tosa`` to VGF, run it once with every tensor captured, compare with the interpreter.

    ``inputs`` default to :func:`tosa_verify.diff.random_inputs` of ``seed``. Never raises for a
    graph VGF cannot take or computes differently: that is the verdict.

    Example:
        >>> judge_graph("mlp", lowered.tosa, profile="INT").status      # doctest: +SKIP
        'agree'
    """
    start = time.perf_counter()
    graph = tosa_verify.load(tosa)
    values = random_inputs(graph, seed) if inputs is None else inputs
    ops = _ops(graph)
    try:
        compile_tosa(graph)
        report = tosa_verify.diff(graph, values, engine=VgfExecutor(), against="interpreter")
    except VgfCompileError as exc:
        return SurveyResult(name, profile, "refused", str(exc), ops, time.perf_counter() - start)
    except VgfError as exc:
        return SurveyResult(name, profile, "error", str(exc), ops, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    first = report.first_divergence
    if report.error:
        return SurveyResult(name, profile, "error", report.error, ops, seconds)
    if first is not None or not report.ok:
        where = f"operator {first.index} {first.op}" if first is not None else "an output"
        return SurveyResult(name, profile, "differ", f"first divergence at {where}", ops, seconds)
    counts = ", ".join(f"{n} {k}" for k, n in report.counts().items())
    return SurveyResult(name, profile, "agree", counts, ops, seconds)


def format_table(results: list[SurveyResult]) -> str:
    """The verdicts as a Markdown table, with a count per status on the last line.

    Example:
        >>> print(format_table([SurveyResult("add", "INT", "agree", "3 exact")]))
        | graph | profile | verdict | detail |
        | --- | --- | --- | --- |
        | add | INT | agree | 3 exact |
        <BLANKLINE>
        1 agree
    """
    lines = ["| graph | profile | verdict | detail |", "| --- | --- | --- | --- |"]
    lines += [r.row() for r in results]
    counts = Counter(r.status for r in results)
    return "\n".join(lines) + "\n\n" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
