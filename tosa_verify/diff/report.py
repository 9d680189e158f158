"""The diff's results: one :class:`TensorDiff` per output, one :class:`OpDiff` per operator, the
:class:`DiffReport` with its table, JSON and the first divergence."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._text import clip, one_line
from ..compare import EXACT, MISMATCH, Verdict
from ..graph import Graph
from ._common import (
    _FLOAT_DTYPES,
    _STATUS_ORDER,
    INHERITED,
    OPERAND_NAMES,
    Executor,
    _jsonable,
    _num,
    _short,
)
from .repro import write_repro


@dataclass
class TensorDiff:
    """One output tensor of an operator: where it matched and how it compares.

    ``verdict`` is the global comparison with the other execution. ``local`` is the local check
    (see :func:`diff`): this execution's value against the operator re-run alone by the reference
    model (precise, with bounds) on the input values this execution fed it; ``None`` when no local
    check was needed (bit-identical output, or an integer output whose inputs were identical) or
    possible (``local_note`` then says why). ``inputs_identical`` tells whether every computed
    input of the operator was bit-identical in both executions.
    """

    tensor: str
    dtype: str
    shape: tuple[int, ...]
    other: str | None = None
    matched_by: str = ""
    verdict: Verdict | None = None
    note: str = ""
    local: Verdict | None = None
    inputs_identical: bool = True
    local_note: str = ""

    @property
    def is_float(self) -> bool:
        """True for floating-point outputs (their verdicts are local)."""
        return self.dtype in _FLOAT_DTYPES

    @property
    def status(self) -> str:
        """``exact``/``within_compliance``/``inherited``/``mismatch`` or ``unmatched``/``missing``.

        Float outputs are judged locally: ``mismatch`` when the local check fails, ``inherited``
        when it passes but the global difference exceeds the operator's own bound (the difference
        was accumulated upstream). An operator whose inputs were identical in both executions
        (graph inputs, constants, exact upstream outputs) has nothing to inherit: it gets the
        local status. Integer outputs keep their global, exact status: an integer output that
        differs is a ``mismatch`` even when its inputs already differed.
        """
        if self.verdict is None:
            return "unmatched" if self.other is None else "missing"
        if self.is_float and self.local is not None:
            if self.local.status == MISMATCH:
                return MISMATCH
            if self.verdict.status == MISMATCH:
                return self.local.status if self.inputs_identical else INHERITED
        return self.verdict.status

    @property
    def inherited(self) -> bool:
        """True when the output differs only because its inputs already differed (status ``inherited``)."""
        return self.status == INHERITED

    @property
    def diverges(self) -> bool:
        """True when this output is wrong for the inputs this execution gave its operator.

        That is the local check's mismatch when there is one, else the global mismatch (an output
        whose inputs were identical, or whose local check could not run).
        """
        if self.local is not None:
            return self.local.status == MISMATCH
        return self.verdict is not None and self.verdict.status == MISMATCH

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "tensor": self.tensor,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "other": self.other,
            "matched_by": self.matched_by,
            "status": self.status,
            "inherited": self.inherited,
            "diverges": self.diverges,
            "inputs_identical": self.inputs_identical,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "local": self.local.to_dict() if self.local else None,
            "local_note": self.local_note,
            "note": self.note,
        }


@dataclass
class OpDiff:
    """One operator of the source graph with the verdicts of its outputs."""

    index: int
    op: str
    location: str
    inputs: list[str]
    outputs: list[TensorDiff]
    attributes: dict[str, object] = field(default_factory=dict)
    error: str = ""

    @property
    def status(self) -> str:
        """The worst status of the outputs (``error`` when the interpreter raised here)."""
        if self.error:
            return "error"
        statuses = [t.status for t in self.outputs] or ["unmatched"]
        return min(statuses, key=_STATUS_ORDER.index)

    @property
    def diverges(self) -> bool:
        """True when the interpreter raised here or an output is wrong for its own inputs.

        See :attr:`TensorDiff.diverges`: a float output that differs only by what it inherited
        from upstream does not diverge, and neither does an integer output whose inputs already
        differed when the operator, re-run on this execution's inputs, gives the same result.
        """
        return bool(self.error) or any(t.diverges for t in self.outputs)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "index": self.index,
            "op": self.op,
            "location": self.location,
            "inputs": list(self.inputs),
            "status": self.status,
            "attributes": _jsonable(self.attributes),
            "outputs": [t.to_dict() for t in self.outputs],
            "error": self.error,
        }


@dataclass
class DiffReport:
    """The result of :func:`diff`; see :meth:`format_table`, :meth:`to_json`, :meth:`write_repro`.

    ``actual``/``expected`` hold every captured tensor of the two executions, ``bounds`` the
    reference model's bounds of the global run (precise mode), ``local_expected``/``local_bounds``
    the local checks' reference results by source tensor name, and ``local_inputs`` the values
    the local checks fed the other graph's operators (other tensor name -> this execution's value).
    """

    source: str
    against: str
    ops: list[OpDiff]
    outputs: list[TensorDiff]
    graph: Graph = field(repr=False)
    other_graph: Graph | None = field(repr=False, default=None)
    actual: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    expected: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    bounds: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    local_expected: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    local_bounds: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    local_inputs: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    constant_differences: dict[str, str] = field(default_factory=dict)
    error: str = ""
    precise: bool = False
    engine: str = "interpreter"
    #: The :class:`Executor` that ran the source (``None`` for the interpreter/reference model).
    executor: Executor | None = field(repr=False, default=None)

    @property
    def first_divergence(self) -> OpDiff | None:
        """The first operator (in graph order) whose output is wrong for its own inputs, or None.

        See :attr:`OpDiff.diverges`: differences an operator merely inherited do not count.
        """
        return next((op for op in self.ops if op.diverges), None)

    @property
    def ok(self) -> bool:
        """True when nothing diverges, neither execution failed and no graph output mismatches.

        Inherited float differences at the graph outputs are fine; an integer graph output that
        differs is not.
        """
        return not self.error and self.first_divergence is None and all(t.status != MISMATCH for t in self.outputs)

    def counts(self) -> dict[str, int]:
        """How many operators have each status (``exact``, ``inherited``, ``mismatch``, ...).

        >>> report.counts()   # doctest: +SKIP
        {'exact': 1, 'within_compliance': 12, 'inherited': 53}
        """
        out: dict[str, int] = {}
        for op in self.ops:
            out[op.status] = out.get(op.status, 0) + 1
        return out

    # ----------------------------------------------------------------- output formats

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict of the whole report."""
        first = self.first_divergence
        return {
            "source": self.source,
            "against": self.against,
            "ok": self.ok,
            "error": self.error,
            "precise": self.precise,
            "counts": self.counts(),
            "first_divergence": None if first is None else {
                **first.to_dict(),
                "worst": _worst(first),
            },
            "constant_differences": dict(self.constant_differences),
            "outputs": [t.to_dict() for t in self.outputs],
            "ops": [op.to_dict() for op in self.ops],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text.

        >>> json.loads(report.to_json())["ok"]   # doctest: +SKIP
        True
        """
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def format_table(self, *, all_ops: bool = True) -> str:
        """A readable terminal table: one row per operator output, then the first divergence.

        >>> print(report.format_table())   # doctest: +SKIP
        """
        header = ("#", "op", "output", "dtype", "shape", "status", "local", "differ", "max abs", "max LSB",
                  "SQNR dB", "cosine")
        rows: list[tuple[str, ...]] = []
        first = self.first_divergence
        for op in self.ops:
            if not all_ops and not op.diverges and op is not first:
                continue
            outs = op.outputs or [TensorDiff("-", "-", ())]
            for k, t in enumerate(outs):
                v = t.verdict
                status = "ERROR" if op.error and k == 0 else t.status
                if op is first and k == 0:
                    status = f">> {status}"
                rows.append((
                    str(op.index) if k == 0 else "",
                    op.op if k == 0 else "",
                    clip(t.tensor, 28),
                    t.dtype,
                    "x".join(str(d) for d in t.shape) or "scalar",
                    status,
                    _local_text(t),
                    f"{v.mismatched}/{v.size}" if v else "-",
                    _num(v.max_abs_error) if v else "-",
                    _num(v.max_lsb_error) if v else "-",
                    _num(v.sqnr_db) if v else "-",
                    f"{v.cosine:.6f}" if v and not math.isnan(v.cosine) else "-",
                ))
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        run_by = f" run by {self.engine}" if self.engine != "interpreter" else ""
        lines = [f"diff of {self.source}{run_by} against {self.against}" + (" (precise)" if self.precise else "")]
        fmt = "  ".join(f"{{:{'>' if i in (0, 7, 8, 9, 10, 11) else '<'}{w}}}" for i, w in enumerate(widths))
        lines.append(fmt.format(*header))
        lines.append("  ".join("-" * w for w in widths))
        lines.extend(fmt.format(*r) for r in rows)
        lines.append("")
        lines.append("differ/max abs/max LSB/SQNR/cosine compare with the other execution; local: the"
                     " operator re-run alone by the reference model on this execution's inputs")
        counts = self.counts()
        lines.append("operators: " + ", ".join(f"{n} {k}" for k, n in sorted(
            counts.items(), key=lambda kv: _STATUS_ORDER.index(kv[0]) if kv[0] in _STATUS_ORDER else -1)))
        if counts.get(INHERITED):
            lines.append(f"{INHERITED}: differs by more than the operator's own bound, but it is within"
                         " compliance on its own inputs (the difference comes from upstream)")
        if self.error:
            lines.append(f"ERROR: {one_line(self.error)}")  # (in full in the JSON)
        if first is None:
            if not self.error:
                lines.append(f"all {len(self.ops)} operators agree"
                             + (" on their own inputs" if self.counts().get(INHERITED) else ""))
        else:
            lines.extend(self._describe_first(first))
        if self.constant_differences:
            lines.append("constants that differ between the graphs:")
            for name, text in self.constant_differences.items():
                lines.append(f"  {name}: {text}")
        return "\n".join(lines)

    def _describe_first(self, op: OpDiff) -> list[str]:
        lines = [f"first divergence: operator {op.index} {op.op}" + (f" at {op.location}" if op.location else "")]
        if op.error:
            lines.append(f"  interpreter error: {op.error}")
        names = OPERAND_NAMES.get(op.op, ())
        block = self.graph.main
        for i, name in enumerate(op.inputs):
            decl = block.tensors.get(name) or block.shapes.get(name)
            label = names[i] if i < len(names) else f"input{i}"
            desc = f"{decl.dtype} {list(decl.shape)}" if decl is not None else "?"
            const = " const" if decl is not None and decl.data is not None else ""
            lines.append(f"  in  {label:<11} {name} : {desc}{const}")
        for t in op.outputs:
            lines.append(f"  out {t.tensor} : {t.dtype} {list(t.shape)} -> {t.status}")
        for key, value in op.attributes.items():
            lines.append(f"  {key} = {_short(value)}")
        for t in op.outputs:
            if t.verdict is not None and t.verdict.status == MISMATCH:
                lines.append(f"  {t.tensor}: {t.verdict.summary()}")
            if t.local is not None:
                lines.append(f"  {t.tensor}: local check: {t.local.summary()}")
            elif t.local_note:
                lines.append(f"  {t.tensor}: no local check: {t.local_note}")
        return lines

    def write_repro(self, directory: str | os.PathLike, op: OpDiff | int | None = None) -> Path:
        """Write a one-operator repro of the first divergence (or of ``op``) into ``directory``.

        Files: ``repro.tosa`` (the operator; non-constant inputs become graph inputs),
        ``against.tosa`` (the other graph's operator, when diffing two graphs), ``input-N.npy``,
        ``expected-N.npy`` and ``actual-N.npy`` (both executors re-run on the repro),
        ``desc.json`` (loadable by ``tosa_reference_model --test_desc``) and ``repro.json``
        (operator, attributes, verdicts). Returns the directory.

        >>> report.write_repro("repro")   # doctest: +SKIP
        PosixPath('repro')
        """
        target = op if isinstance(op, OpDiff) else (
            self.first_divergence if op is None else next(o for o in self.ops if o.index == op)
        )
        if target is None:
            raise ValueError("nothing diverges: pass op= to write a repro of a given operator")
        return write_repro(self, target, directory)


def _local_text(t: TensorDiff) -> str:
    """The table's ``local`` cell: the local check's outcome, ``n/a`` when it could not run."""
    if t.local is None:
        return "n/a" if t.local_note else "-"
    return {EXACT: "exact", MISMATCH: "MISMATCH"}.get(t.local.status, "within")


def _worst(op: OpDiff) -> dict[str, object] | None:
    for t in op.outputs:
        v = t.local if t.local is not None and t.local.status == MISMATCH else t.verdict
        if t.diverges and v is not None and v.status == MISMATCH:
            return {
                "tensor": t.tensor,
                "check": "local" if v is t.local else "global",
                "index": list(v.worst_index) if v.worst_index is not None else None,
                "expected": v.expected_at_worst,
                "actual": v.actual_at_worst,
                "abs_error": v.max_abs_error if math.isfinite(v.max_abs_error) else str(v.max_abs_error),
                "lsb_error": v.max_lsb_error if math.isfinite(v.max_lsb_error) else str(v.max_lsb_error),
            }
    return None
