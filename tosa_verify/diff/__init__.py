"""Operator-by-operator diff of two executions of a TOSA graph.

:func:`diff` runs ``source`` with the numpy interpreter and, with every intermediate tensor
captured, either the reference model on the same graph (``against="reference"``) or the
interpreter on another graph (``against=OTHER``). It walks the operators of the entry block in
order, gives each output tensor a :class:`~tosa_verify.compare.Verdict`, and names the first
diverging operator with its inputs, attributes (RESCALE's multiplier/shift/zero points are const
inputs in TOSA 1.0 and are shown with their values; CONV/MATMUL show their accumulator type) and
its worst element. :meth:`DiffReport.write_repro` cuts that operator out into a one-operator graph
with its input values and both results.

Verdicts are local. Once one float operator rounds differently (within its compliance bound),
every operator after it sees different inputs, so comparing whole executions would blame a
RESHAPE that only moved values along. So an output that differs is also checked on its own: the
operator (against another graph: that graph's operator) is re-run alone by the reference model,
precise with bounds, on the input values this execution fed it, and this execution's output is
judged against that under the operator's compliance mode (``local`` column; data-layout ops must
match it exactly). A float output that passes is ``within_compliance``, or ``inherited`` when the
global difference exceeds the operator's own bound (accumulated upstream); it is a ``mismatch``
only when the local check fails. Integer outputs stay exact and global: one that differs is a
``mismatch`` even if its inputs differed, but it is a divergence only when its inputs were
identical or the local re-run disagrees, so the first integer divergence is the first operator
whose output differs while its inputs were identical. The local re-runs of a graph go to the
reference model as one batched graph.

Tensors of the other graph are matched by name, then by provenance: an explicit ``provenance``
mapping (source tensor name -> other tensor name) and the operators' ``location`` strings.
Constants (CONST/CONST_SHAPE outputs) are not walked as operators; constants that differ between
two graphs are listed in :attr:`DiffReport.constant_differences` and shown with the consuming op.

>>> report = diff("model.tosa", random_inputs(load("model.tosa"), seed=0))   # doctest: +SKIP
>>> print(report.format_table())                                             # doctest: +SKIP
>>> report.write_repro("repro/")                                             # doctest: +SKIP

The package, by concern: :mod:`.judge` (executions, verdicts, :func:`diff`), :mod:`.report`
(results, table, JSON), :mod:`.repro` (one-operator repros), :mod:`.inputs` (random inputs),
:mod:`.cli` (the ``diff`` verb).
"""

from __future__ import annotations

from ._common import INHERITED, OPERAND_NAMES, Executor
from .cli import build_diff_parser, diff_command, diff_main
from .inputs import INT_RANGES, random_inputs
from .judge import diff
from .report import DiffReport, OpDiff, TensorDiff
from .repro import describe_operator, extract_operator, run_repro

__all__ = [
    "INHERITED",
    "INT_RANGES",
    "OPERAND_NAMES",
    "DiffReport",
    "Executor",
    "OpDiff",
    "TensorDiff",
    "build_diff_parser",
    "describe_operator",
    "diff",
    "diff_command",
    "diff_main",
    "extract_operator",
    "random_inputs",
    "run_repro",
]
