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
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from .budget import check_graph_memory, load_npy
from .compare import EXACT, MISMATCH, Verdict, compare, compliance_config
from .dtypes import dtype_info, to_reference_form, to_working
from .errors import TosaError, TosaInputError
from .graph import Block, Graph, Operator, Region, Tensor, load
from .interpreter import Inputs, Interpreter, Source, bind_inputs
from .ops.facts import OperandNames

__all__ = [
    "DiffReport",
    "Executor",
    "OpDiff",
    "TensorDiff",
    "build_diff_parser",
    "describe_operator",
    "diff",
    "diff_main",
    "extract_operator",
    "random_inputs",
    "run_repro",
]

_CONST_OPS = {"CONST", "CONST_SHAPE"}
#: ``against`` values that run the same graph, and how reports name them.
_SAME_GRAPH = {"reference": "reference model", "interpreter": "interpreter"}
#: Operators not re-run for local checks (state lives outside the operator).
_NO_LOCAL_OPS = {"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "CUSTOM"}
#: Suffix of the renamed outputs in the batched local-check graph.
_LOCAL_SUFFIX = "__tv_local"
_FLOAT_DTYPES = {"FP64", "FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2", "FP6E2M3", "FP6E3M2", "FP4E2M1", "FP8UE8M0"}
INHERITED = "inherited"
_STATUS_ORDER = ["mismatch", "missing", INHERITED, "within_compliance", "exact", "unmatched"]

#: Names of the operands of operators whose extra inputs are parameters (declared with each op's
#: registration, see :mod:`tosa_verify.ops.facts`).
OPERAND_NAMES: Mapping[str, tuple[str, ...]] = OperandNames()


# --------------------------------------------------------------------------- report types


@runtime_checkable
class Executor(Protocol):
    """Another implementation of TOSA that :func:`diff` can compare (``engine=``).

    ``name`` labels it in reports; ``capture`` runs a graph and returns every tensor of its
    entry block by name, in the numpy form :func:`tosa_verify.run` uses (a
    :class:`~tosa_verify.errors.TosaError` when it cannot); ``run`` returns the outputs only
    (used to re-run a one-operator repro). ``vgf.VgfExecutor`` is one.

    >>> class Numpy:
    ...     name = "numpy"
    ...     def capture(self, graph, inputs): ...
    ...     def run(self, graph, inputs): ...
    >>> isinstance(Numpy(), Executor)
    True
    """

    name: str

    def capture(self, graph: Source, inputs: Inputs) -> Mapping[str, np.ndarray]:
        """Every tensor by name."""

    def run(self, graph: Source, inputs: Inputs) -> list[np.ndarray]:
        """The outputs in graph order."""


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
        was accumulated upstream). Integer outputs keep their global, exact status: an integer
        output that differs is a ``mismatch`` even when its inputs already differed.
        """
        if self.verdict is None:
            return "unmatched" if self.other is None else "missing"
        if self.is_float and self.local is not None:
            if self.local.status == MISMATCH:
                return MISMATCH
            if self.verdict.status == MISMATCH:
                return INHERITED
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
                    _clip(t.tensor, 28),
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
            lines.append(f"ERROR: {self.error}")
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

    # ----------------------------------------------------------------- repro

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
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        source_op = self.graph.main.operators[target.index]
        # the operator's inputs as this execution computed them (where the local check was made);
        # the other graph's operator gets the same values where its tensors match ours
        values = {**self.expected, **self.actual} if self.other_graph is None else dict(self.actual)
        one = extract_operator(self.graph, target.index, values)
        (out / "repro.tosa").write_bytes(_to_bytes(one))
        inputs = _write_inputs(out, one.main, values, "input")
        other_inputs: list[dict[str, object]] = []
        other_one = None
        if self.other_graph is not None:
            other_index = _other_op_index(self, target)
            if other_index is not None:
                theirs = {**self.expected, **self.local_inputs}
                other_one = extract_operator(self.other_graph, other_index, theirs)
                (out / "against.tosa").write_bytes(_to_bytes(other_one))
                other_inputs = _write_inputs(out, other_one.main, theirs, "against-input")
        block = one.main
        manifest: dict[str, object] = {
            "op": source_op.op,
            "index": target.index,
            "location": source_op.location,
            "source": self.source,
            "against": _same_graph_key(self.against) if self.other_graph is None else self.against,
            "engine": self.engine,
            # a local verdict was made against the precise reference model: reproduce that
            "precise": self.precise or any(t.local is not None for t in target.outputs),
            "tosa_file": "repro.tosa",
            "against_file": "against.tosa" if other_one is not None else None,
            "inputs": inputs,
            "against_inputs": other_inputs,
            "outputs": [
                {"name": n, "dtype": block.tensors[n].dtype, "shape": list(block.tensors[n].shape)}
                for n in block.outputs
            ],
            "attributes": _jsonable(target.attributes),
            "diff_verdicts": [t.to_dict() for t in target.outputs],
        }
        compliance = {
            n: compliance_config(source_op, block.tensors[n].dtype, block.tensors[n].shape, block=block)
            for n in block.outputs
        }
        manifest["compliance"] = compliance
        (out / "repro.json").write_text(json.dumps(manifest, indent=2, default=str))
        verdicts, expected, actual = _execute_repro(out, manifest, self.executor)
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            dt = block.tensors[block.outputs[i]].dtype
            if e is not None:
                _save(out / f"expected-{i}.npy", e, dt if e.dtype != np.float64 else "FP64")
            if a is not None:
                _save(out / f"actual-{i}.npy", a, dt)
        manifest["repro_verdicts"] = [v.to_dict() if v is not None else None for v in verdicts]
        manifest["reproduces"] = any(v is not None and v.status == MISMATCH for v in verdicts)
        (out / "repro.json").write_text(json.dumps(manifest, indent=2, default=str))
        desc = {
            "tosa_file": "repro.tosa",
            "ifm_name": [i["name"] for i in inputs],
            "ifm_file": [i["file"] for i in inputs],
            "ofm_name": list(block.outputs),
            "ofm_file": [f"ref-result-{i}.npy" for i in range(len(block.outputs))],
            "expected_failure": False,
            "meta": {"compliance": {"version": "1.0", "tensors": compliance}},
        }
        (out / "desc.json").write_text(json.dumps(desc, indent=1))
        return out


# --------------------------------------------------------------------------- helpers


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _num(x: float) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return f"{x:.4g}"


def _short(value: object, limit: int = 16) -> str:
    if isinstance(value, list) and len(value) > limit:
        return "[" + ", ".join(str(v) for v in value[:limit]) + f", ... ({len(value)} values)]"
    return str(value)


def _jsonable(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


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


def _decl(block: Block, name: str) -> Tensor | None:
    return block.tensors.get(name) or block.shapes.get(name)


def _readable(value: np.ndarray, dtype: str, limit: int = 64) -> object:
    arr = np.asarray(value)
    if dtype in ("BF16", "FP8E4M3", "FP8E5M2") and arr.dtype.kind in "Vu":
        arr = arr.view(dtype_info(dtype).working)
    if arr.size <= limit:
        flat = arr.reshape(-1)
        if arr.dtype.kind == "f" or dtype in ("BF16", "FP8E4M3", "FP8E5M2", "FP16", "FP32"):
            items: list[object] = [float(v) for v in flat.astype(np.float64)]
        elif arr.dtype.kind == "b":
            items = [bool(v) for v in flat]
        else:
            items = [int(v) for v in flat]
        return items[0] if arr.ndim == 0 else items
    f64 = arr.astype(np.float64)
    return f"{dtype}{list(arr.shape)} min {f64.min():.6g} max {f64.max():.6g}"


def describe_operator(graph: Graph, index: int, values: Mapping[str, np.ndarray] | None = None) -> dict[str, object]:
    """The attributes of operator ``index`` of the entry block, made readable.

    Plain attributes are kept (``acc_type``, ``rounding_mode``, ``per_channel``, ...), CLAMP's
    byte-encoded bounds are decoded, and parameter operands that are constants in TOSA 1.0
    (RESCALE multiplier/shift/zero points, CONV/MATMUL zero points, MUL shift, PAD value, ...)
    are added by their spec names with their values (``values`` supplies non-constant ones).

    >>> describe_operator(load("model.tosa"), 3)["multiplier"]   # doctest: +SKIP
    [1518500250]
    """
    block = graph.main
    op = block.operators[index]
    out: dict[str, object] = {}
    for key, value in op.attrs.items():
        if key in ("min_val", "max_val") and isinstance(value, (bytes, bytearray)) and op.inputs:
            decl = _decl(block, op.inputs[0])
            if decl is not None:
                try:
                    from .dtypes import decode_constant

                    value = _readable(decode_constant(bytes(value), decl.dtype, ()), decl.dtype)
                except TosaError:
                    value = list(value)
        out[key] = value
    names = OPERAND_NAMES.get(op.op, ())
    for i, name in enumerate(op.inputs):
        if i == 0 and op.op not in ("SELECT",):
            continue
        label = names[i] if i < len(names) else None
        decl = _decl(block, name)
        if decl is None:
            continue
        value = decl.data
        if value is None and values is not None and name in values and label is not None:
            value = values[name]
        if label is None:
            continue
        if value is None:
            out[label] = f"{decl.dtype}{list(decl.shape)} (runtime)"
        elif label in ("weight", "B", "values", "input", "input2", "input3", "table", "indices", "values_in"):
            out[label] = _readable(value, decl.dtype, limit=16)
        else:
            out[label] = _readable(value, decl.dtype)
    return out


def extract_operator(graph: Graph, index: int, values: Mapping[str, np.ndarray] | None = None) -> Graph:
    """A graph holding only operator ``index`` of ``graph``'s entry block.

    Constant inputs stay constants (with their CONST/CONST_SHAPE op); SHAPE inputs that are
    computed are frozen to their value from ``values``; every other input becomes a graph input.
    The operator's outputs are the graph's outputs. Other regions (control-flow bodies) are kept.

    >>> one = extract_operator(load("model.tosa"), 5)   # doctest: +SKIP
    """
    return _extract_operators(graph, [index], values)


def _extract_operators(
    graph: Graph, indices: Sequence[int], values: Mapping[str, np.ndarray] | None = None, suffix: str = ""
) -> Graph:
    """A graph of the operators ``indices`` of the entry block, each cut out on its own.

    As :func:`extract_operator`, for several operators at once: every non-constant input of any
    of them becomes one graph input, and every output is renamed ``name + suffix`` (so that an
    operator's output and a later operator's input of the same name stay apart: the later
    operator reads the graph input, not the earlier operator's result).
    """
    block = graph.main
    tensors: dict[str, Tensor] = {}
    shapes: dict[str, Tensor] = {}
    operators: list[Operator] = []
    inputs: list[str] = []
    outputs: list[str] = []
    for index in indices:
        op = block.operators[index]
        for name in op.inputs:
            if name in tensors or name in shapes:
                continue
            decl = _decl(block, name)
            if decl is None:
                raise TosaError(f"operator {index} {op.op}: input {name!r} is not declared")
            is_shape = name in block.shapes or decl.dtype == "SHAPE"
            data = decl.data
            if data is None and is_shape:
                if values is None or name not in values:
                    raise TosaError(f"operator {index} {op.op}: SHAPE input {name!r} has no known value")
                data = np.asarray(values[name], dtype=np.int64)
            if data is not None:
                copy = Tensor(decl.name, decl.shape, decl.dtype, data=np.asarray(data))
                (shapes if name in block.shapes else tensors)[name] = copy
                operators.append(Operator("CONST_SHAPE" if is_shape else "CONST", {}, [], [name]))
            else:
                tensors[name] = Tensor(decl.name, decl.shape, decl.dtype)
                inputs.append(name)
        renamed = []
        for name in op.outputs:
            decl = _decl(block, name)
            if decl is None:
                raise TosaError(f"operator {index} {op.op}: output {name!r} is not declared")
            new = name + suffix
            tensors[new] = Tensor(new, decl.shape, decl.dtype, variable=decl.variable,
                                  variable_name=decl.variable_name)
            renamed.append(new)
        operators.append(Operator(op.op, dict(op.attrs), list(op.inputs), renamed, op.location))
        outputs.extend(renamed)
    new_block = Block("main", operators, tensors, inputs, outputs, shapes)
    regions = [Region("main", [new_block, *graph.regions[0].blocks[1:]]), *graph.regions[1:]]
    return Graph(version=graph.version, regions=regions)


def _to_bytes(graph: Graph) -> bytes:
    from .writer import to_flatbuffer

    return to_flatbuffer(graph)


def _save(path: Path, value: np.ndarray, dtype: str) -> None:
    from .reference import _write_npy

    if dtype == "FP64":
        np.save(path, np.asarray(value))
        return
    _write_npy(path, to_reference_form(to_working(np.asarray(value), dtype, what=path.name), dtype), dtype)


def _write_inputs(out: Path, block: Block, values: Mapping[str, np.ndarray], prefix: str) -> list[dict[str, object]]:
    inputs: list[dict[str, object]] = []
    for i, name in enumerate(block.inputs):
        decl = block.tensors[name]
        fname = f"{prefix}-{i}.npy"
        _save(out / fname, _input_value(values, name, decl), decl.dtype)
        inputs.append({"name": name, "file": fname, "dtype": decl.dtype, "shape": list(decl.shape)})
    return inputs


def _input_value(values: Mapping[str, np.ndarray], name: str, decl: Tensor) -> np.ndarray:
    if name not in values:
        raise TosaError(f"no captured value for input {name!r} of the repro")
    value = np.asarray(values[name])
    info = dtype_info(decl.dtype)
    if value.dtype == np.float64 and info.is_float:  # precise reference values: round to the format
        value = to_reference_form(value.astype(info.working), decl.dtype)
    return value


def _other_op_index(report: DiffReport, target: OpDiff) -> int | None:
    other = report.other_graph
    if other is None:
        return None
    wanted = {t.other for t in target.outputs if t.other}
    for i, op in enumerate(other.main.operators):
        if wanted & set(op.outputs):
            return i
    return None


def _load_npy(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)


def _same_graph_key(against: str) -> str:
    return next((k for k, v in _SAME_GRAPH.items() if v == against), "reference")


def _execute_repro(directory: Path, manifest: Mapping[str, object],
                   executor: Executor | None = None) -> tuple[list[Verdict | None], list, list]:
    from . import reference
    from .interpreter import run as interp_run

    inputs = [_load_npy(directory / i["file"]) for i in manifest["inputs"]]  # type: ignore[index]
    other_inputs = [_load_npy(directory / i["file"]) for i in manifest.get("against_inputs") or []]  # type: ignore[index]
    graph = load(directory / str(manifest["tosa_file"]))
    engine = str(manifest.get("engine", "interpreter"))
    precise = bool(manifest.get("precise", False))

    bounds: dict[str, np.ndarray] = {}

    def execute(path: Path, how: str, values: list[np.ndarray]) -> list[np.ndarray | None]:
        try:
            if how == "reference":
                res = reference.run(path, values, bounds=precise)
                if isinstance(res, reference.ReferenceResult):
                    bounds.update(res.bounds)
                    return list(res.outputs)
                return list(res)
            if how == "interpreter":
                return list(interp_run(path, values))
            if executor is not None and how == executor.name:
                return list(executor.run(path, values))
            return [None] * len(graph.main.outputs)  # an executor this call was not given
        except TosaError:
            return [None] * len(graph.main.outputs)

    actual = execute(directory / str(manifest["tosa_file"]), engine, inputs)
    against_file = manifest.get("against_file")
    if against_file:
        expected = execute(directory / str(against_file), engine, other_inputs)
    else:
        same = str(manifest.get("against", "reference"))
        expected = execute(directory / str(manifest["tosa_file"]), same if same in _SAME_GRAPH else "reference", inputs)
    verdicts: list[Verdict | None] = []
    op = graph.main.operators[-1]
    for name, e, a in zip(graph.main.outputs, expected, actual, strict=True):
        if e is None or a is None:
            verdicts.append(None)
            continue
        decl = graph.main.tensors[name]
        verdicts.append(compare(e, a, op=op, block=graph.main, dtype=decl.dtype, bounds=bounds.get(name)))
    return verdicts, expected, actual


def run_repro(directory: str | os.PathLike, executor: Executor | None = None) -> list[Verdict | None]:
    """Re-run a repro written by :meth:`DiffReport.write_repro` with both executors and compare.

    Returns one verdict per output (``None`` when an executor failed). A repro of a diff whose
    engine was an :class:`Executor` needs that executor again (``executor=``).

    >>> [v.status for v in run_repro("repro")]   # doctest: +SKIP
    ['mismatch']
    """
    directory = Path(directory)
    manifest = json.loads((directory / "repro.json").read_text())
    verdicts, _, _ = _execute_repro(directory, manifest, executor)
    return verdicts


# --------------------------------------------------------------------------- executions


def _capture_interpreter(graph: Graph, inputs: Inputs) -> tuple[dict[str, np.ndarray], int | None, str]:
    """Run with the interpreter, recording every tensor; stop at the first failing operator."""
    block = graph.main
    values = bind_inputs(block, inputs)
    record: dict[str, np.ndarray] = {}
    for name, value in zip(block.inputs, values, strict=True):
        record[name] = value
    for name, decl in {**block.shapes, **block.tensors}.items():
        if decl.data is not None:
            record[name] = decl.data
    done: list[int] = []

    def hook(index: int, operator: Operator, _ins, outs) -> None:
        done.append(index)
        for name, value in zip(operator.outputs, outs, strict=False):
            record[name] = value

    error_index: int | None = None
    error = ""
    try:
        Interpreter(graph, hook).run_block(block, values, record=record)
    except TosaError as exc:
        error_index = (done[-1] + 1) if done else 0
        op_index = getattr(exc, "op_index", None)
        if isinstance(op_index, int):
            error_index = op_index
        error = f"{type(exc).__name__}: {exc}"
    out = {}
    for name, value in record.items():
        decl = _decl(block, name)
        out[name] = to_reference_form(value, decl.dtype) if decl is not None else value
    return out, error_index, error


def _execute(graph: Graph, inputs: Inputs, engine: str | Executor, *, precise: bool) -> tuple[dict, dict, int | None, str]:
    """Capture all tensors with ``engine``: (values, bounds, failing op index, error text)."""
    check_graph_memory(graph)  # before either engine allocates anything
    if engine == "interpreter":
        values, idx, err = _capture_interpreter(graph, inputs)
        return values, {}, idx, err
    if not isinstance(engine, str):  # an Executor: one run, every tensor captured
        try:
            return dict(engine.capture(graph, inputs)), {}, None, ""
        except TosaError as exc:
            return {}, {}, None, f"{type(exc).__name__}: {exc}"
    from . import reference

    try:
        res = reference.run(graph, inputs, capture=True, bounds=precise)
    except TosaError as exc:
        return {}, {}, None, f"{type(exc).__name__}: {exc}"
    return res.tensors, getattr(res, "bounds", {}), None, ""


def _run_local(
    graph: Graph, indices: Sequence[int], values: Mapping[str, np.ndarray], *, precise: bool
) -> tuple[dict, dict]:
    """Re-run operators ``indices`` of ``graph`` alone on ``values`` with the reference model.

    All of them go into one graph (:func:`_extract_operators`) run once (``precise``: in FP64
    with bounds); when that run fails, the group is halved until the failing operators are
    isolated.
    Returns ``(results, failures)``: ``results[index][output name] = (value, bounds or None)``
    and ``failures[index]`` the error text of an operator that could not be re-run.
    """
    from . import reference

    results: dict[int, dict[str, tuple[np.ndarray, np.ndarray | None]]] = {}
    failures: dict[int, str] = {}
    block = graph.main

    def attempt(group: Sequence[int]) -> None:
        try:
            batch = _extract_operators(graph, group, values, suffix=_LOCAL_SUFFIX)
            feed = {n: _input_value(values, n, batch.main.tensors[n]) for n in batch.main.inputs}
            res = reference.run(batch, feed, precise=precise, bounds=precise, capture=True)
        except (TosaError, ValueError) as exc:
            if len(group) > 1:
                half = len(group) // 2
                attempt(group[:half])
                attempt(group[half:])
            else:
                failures[group[0]] = f"{type(exc).__name__}: {exc}"[:400]
            return
        assert isinstance(res, reference.ReferenceResult)
        by_name = dict(zip(batch.main.outputs, res.outputs, strict=True))
        for index in group:
            results[index] = {
                name: (by_name[name + _LOCAL_SUFFIX], res.bounds.get(name + _LOCAL_SUFFIX))
                for name in block.operators[index].outputs
            }

    if indices:
        try:
            reference.reference_binary()
        except TosaError as exc:
            failures.update(dict.fromkeys(indices, f"{type(exc).__name__}: {exc}"))
            return results, failures
        attempt(list(indices))
    return results, failures


def _judge_locally(
    graph: Graph,
    other: Graph | None,
    ops: Sequence[OpDiff],
    verdict_of: Mapping[str, TensorDiff],
    actual: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Give the outputs that need one a local verdict (:attr:`TensorDiff.local`).

    An output needs one when it is a float that is not bit-identical to the other execution, or
    an integer that mismatches although some computed input of its operator already differed.
    The operator (against another graph: that graph's matching operator) is re-run alone by the
    reference model (precise with bounds when it has a float output) on this execution's input
    values, and this execution's
    output is compared with that under the operator's compliance mode. All operators go in one
    batch. Returns the local reference results and bounds (by source tensor name) and the values
    fed to the other graph's operators (by other tensor name).
    """
    block = graph.main
    job_graph = graph if other is None else other
    job_block = job_graph.main
    if other is None:
        values: dict[str, np.ndarray] = dict(actual)
    else:  # the other graph's tensors, valued as this execution computed them
        values = {n: expected[n] for n in job_block.inputs if n in expected}
        for td in verdict_of.values():
            if td.other is not None and td.tensor in actual:
                values[td.other] = actual[td.tensor]
    producer = {name: i for i, op in enumerate(job_block.operators) for name in op.outputs}

    def identical(name: str) -> bool:
        decl = _decl(block, name)
        if (decl is not None and decl.data is not None) or name in block.inputs:
            return True  # constants are the operator's own; graph inputs are fed alike
        td = verdict_of.get(name)
        return td is not None and td.verdict is not None and td.verdict.status == EXACT

    wanted: list[tuple[TensorDiff, int, str]] = []  # (output, job operator index, job output name)
    for entry in ops:
        if entry.error:
            continue
        same = all(identical(n) for n in entry.inputs)
        for td in entry.outputs:
            td.inputs_identical = same
            v = td.verdict
            if v is None or v.status == EXACT or td.tensor not in actual:
                continue
            if not td.is_float and (same or v.status != MISMATCH):
                continue
            job_name = td.tensor if other is None else td.other
            job_index = entry.index if other is None else producer.get(job_name or "")
            if job_index is None or job_name is None:
                td.local_note = "no operator of the other graph produces the matching tensor"
                continue
            job_op = job_block.operators[job_index]
            if job_op.op in _NO_LOCAL_OPS:
                td.local_note = f"{job_op.op} is not re-run on its own"
                continue
            missing = [n for n in job_op.inputs if n not in values and (_decl(job_block, n) is None
                                                                       or _decl(job_block, n).data is None)]
            if missing:
                td.local_note = f"no value of this execution for input {missing[0]!r} of the operator"
                continue
            wanted.append((td, job_index, job_name))

    # float results against the precise reference with bounds; operators without a float output
    # in normal mode (their results do not depend on it, and the reference model's precise mode
    # rejects integer convolutions and pools)
    jobs = sorted({j for _, j, _ in wanted})
    has_float = {j: any((_decl(job_block, n) or Tensor(n, (), "?")).dtype in _FLOAT_DTYPES
                        for n in job_block.operators[j].outputs) for j in jobs}
    results, failures = _run_local(job_graph, [j for j in jobs if has_float[j]], values, precise=True)
    int_results, int_failures = _run_local(job_graph, [j for j in jobs if not has_float[j]], values, precise=False)
    results.update(int_results)
    failures.update(int_failures)
    local_expected: dict[str, np.ndarray] = {}
    local_bounds: dict[str, np.ndarray] = {}
    for td, job_index, job_name in wanted:
        if job_index not in results:
            td.local_note = "the reference model could not re-run the operator: " + failures.get(job_index, "?")
            continue
        ref, bnd = results[job_index][job_name]
        job_op = job_block.operators[job_index]
        max_abs = None
        if job_op.op == "RESIZE" and job_op.inputs and job_op.inputs[0] in values:
            first = np.asarray(values[job_op.inputs[0]])
            decl = _decl(job_block, job_op.inputs[0])
            if decl is not None and first.size:
                max_abs = float(np.max(np.abs(to_working(first, decl.dtype).astype(np.float64))))
        td.local = compare(ref, actual[td.tensor], op=job_op, block=job_block, dtype=td.dtype,
                           bounds=bnd, max_abs_input=max_abs)
        local_expected[td.tensor] = ref
        if bnd is not None:
            local_bounds[td.tensor] = bnd
    return local_expected, local_bounds, (values if other is not None else {})


def _match_inputs(source: Block, other: Block, inputs: Inputs, provenance: Mapping[str, str]) -> Inputs:
    if not isinstance(inputs, Mapping):
        return inputs
    mapped: dict[str, np.ndarray] = {}
    for name in other.inputs:
        if name in inputs:
            mapped[name] = inputs[name]
            continue
        src = next((s for s, o in provenance.items() if o == name and s in inputs), None)
        if src is None:
            raise TosaInputError(f"no input value for {name!r} of the other graph (match by name or provenance)")
        mapped[name] = inputs[src]
    return mapped


def _match_tensor(name: str, op: Operator, other: Graph | None, provenance: Mapping[str, str],
                  other_values: Mapping[str, np.ndarray], location_map: Mapping[str, list[Operator]]) -> tuple[str | None, str]:
    if other is None:
        return (name, "name") if name in other_values else (None, "")
    if name in provenance:
        return provenance[name], "provenance"
    if _decl(other.main, name) is not None:
        return name, "name"
    if op.location and op.location in location_map:
        candidates = location_map[op.location]
        k = op.outputs.index(name)
        for cand in candidates:
            if cand.op == op.op and k < len(cand.outputs):
                return cand.outputs[k], "location"
        cand = candidates[-1]
        if k < len(cand.outputs):
            return cand.outputs[k], "location"
    return None, ""


def diff(
    source: Source,
    inputs: Inputs,
    *,
    against: str | Source = "reference",
    provenance: Mapping[str, str] | None = None,
    precise: bool = False,
    engine: str | Executor = "interpreter",
) -> DiffReport:
    """Run ``source`` and ``against`` with every tensor captured and compare operator by operator.

    ``against="reference"`` runs the reference model on the same graph, ``against="interpreter"``
    the interpreter on the same graph; any other value is a second graph (path, bytes or
    :class:`~tosa_verify.Graph`) run with ``engine``. ``engine`` runs ``source``: ``"interpreter"``,
    ``"reference"`` or an :class:`Executor` (another implementation of TOSA, e.g.
    ``vgf.VgfExecutor()``: ``diff(g, x, engine=VgfExecutor(), against="interpreter")`` compares
    the VGF execution with the interpreter and judges VGF's outputs locally).
    ``provenance`` maps source tensor names to other-graph tensor names (after that, tensors
    match by name, then by operator ``location``). ``precise=True`` runs the reference model in
    FP64 with bounds so the global float verdicts come from the tosa-tools verifier (compliance
    modes); by default they use the ULP fallback of :func:`~tosa_verify.compare.compare`.

    Either way, a float output that is not bit-identical to the other execution (and an integer
    output that mismatches although its inputs already differed) is judged locally: its operator
    is re-run alone by the reference model (precise with bounds for float outputs) on this
    execution's input values, and the verifier decides under the operator's compliance mode.
    :attr:`DiffReport.first_divergence` is the first operator whose local verdict is a mismatch
    (or, without a local check, whose output differs while its inputs were identical); float
    differences that only propagate are reported as ``inherited``. See the module docstring.

    >>> report = diff("model.tosa", [x])          # doctest: +SKIP
    >>> report.first_divergence.op                # doctest: +SKIP
    'RESCALE'
    """
    if isinstance(engine, str) and engine not in ("interpreter", "reference"):
        raise ValueError(f"engine must be 'interpreter', 'reference' or an Executor, not {engine!r}")
    if not isinstance(engine, str) and not callable(getattr(engine, "capture", None)):
        raise ValueError(f"engine {engine!r} has no capture(graph, inputs) method")
    engine_name = engine if isinstance(engine, str) else str(getattr(engine, "name", type(engine).__name__))
    graph = load(source)
    provenance = dict(provenance or {})
    same_graph = isinstance(against, str) and against in _SAME_GRAPH
    other = None if same_graph else load(against)  # type: ignore[arg-type]
    source_name = _name_of(source)
    against_name = _SAME_GRAPH[against] if same_graph else _name_of(against)  # type: ignore[index]

    # Precise (FP64) mode only means something for float tensors, and the reference model's
    # precise mode rejects integer CONV2D/DEPTHWISE_CONV2D/AVG_POOL2D: integer graphs run normally.
    precise = precise and any(
        dtype_info(t.dtype).is_float for r in graph.regions for b in r.blocks for t in b.tensors.values()
    )
    actual, _, err_index, err_text = _execute(graph, inputs, engine, precise=False)
    if same_graph:
        expected, bounds, _, ref_err = _execute(graph, inputs, against, precise=precise)  # type: ignore[arg-type]
    else:
        other_inputs = _match_inputs(graph.main, other.main, inputs, provenance)
        expected, bounds, other_idx, ref_err = _execute(other, other_inputs, engine, precise=False)
        if ref_err and other_idx is not None:
            ref_err = f"other graph, operator {other_idx}: {ref_err}"
    block = graph.main
    location_map: dict[str, list[Operator]] = {}
    if other is not None:
        for op in other.main.operators:
            if op.location:
                location_map.setdefault(op.location, []).append(op)

    ops: list[OpDiff] = []
    verdict_of: dict[str, TensorDiff] = {}
    for index, op in enumerate(block.operators):
        if op.op in _CONST_OPS:
            continue
        if err_index is not None and index > err_index:
            break
        outs: list[TensorDiff] = []
        for name in op.outputs:
            decl = _decl(block, name)
            td = TensorDiff(name, decl.dtype if decl else "?", tuple(decl.shape) if decl else ())
            other_name, how = _match_tensor(name, op, other, provenance, expected, location_map)
            td.other, td.matched_by = other_name, how
            if other_name is not None and name in actual and other_name in expected:
                td.verdict = compare(
                    expected[other_name], actual[name], op=op, block=block,
                    dtype=td.dtype if td.dtype != "?" else None, bounds=bounds.get(other_name),
                )
            elif other_name is not None:
                td.note = "value not captured on " + ("both sides" if name not in actual else "the other side")
            outs.append(td)
            verdict_of[name] = td
        entry = OpDiff(index, op.op, op.location, list(op.inputs), outs)
        if err_index == index:
            entry.error = err_text
        ops.append(entry)

    local_expected, local_bounds, local_inputs = _judge_locally(graph, other, ops, verdict_of, actual, expected)
    report = DiffReport(
        source=source_name, against=against_name, ops=ops, outputs=[], graph=graph, other_graph=other,
        actual=actual, expected=expected, bounds=bounds, precise=precise, engine=engine_name,
        local_expected=local_expected, local_bounds=local_bounds, local_inputs=local_inputs,
        executor=None if isinstance(engine, str) else engine,
    )
    if ref_err:
        report.error = f"{against_name}: {ref_err}"
    elif err_text and err_index is None:
        report.error = f"{engine_name}: {err_text}"
    for name in block.outputs:
        if name in verdict_of:
            report.outputs.append(verdict_of[name])
        else:
            decl = _decl(block, name)
            td = TensorDiff(name, decl.dtype if decl else "?", tuple(decl.shape) if decl else ())
            other_name, how = _match_tensor(name, Operator("", {}, [], [name]), other, provenance, expected, {})
            td.other, td.matched_by = other_name, how
            if other_name is not None and name in actual and other_name in expected:
                td.verdict = compare(expected[other_name], actual[name], dtype=td.dtype)
            report.outputs.append(td)
    if other is not None:
        report.constant_differences = _constant_differences(graph, other, provenance)
    first = report.first_divergence
    if first is not None:
        first.attributes = describe_operator(graph, first.index, actual)
        if other is not None:
            other_index = _other_op_index(report, first)
            if other_index is not None:
                theirs = describe_operator(other, other_index, expected)
                changed = {k: v for k, v in theirs.items() if first.attributes.get(k) != v}
                if changed:
                    first.attributes["against"] = changed
    return report


def _constant_differences(graph: Graph, other: Graph, provenance: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    mine, theirs = graph.main, other.main
    for name, decl in {**mine.tensors, **mine.shapes}.items():
        if decl.data is None:
            continue
        other_decl = _decl(theirs, provenance.get(name, name))
        if other_decl is None or other_decl.data is None:
            continue
        a, b = np.asarray(decl.data), np.asarray(other_decl.data)
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            out[name] = f"{_short(_readable(a, decl.dtype, 16))} vs {_short(_readable(b, other_decl.dtype, 16))}"
    return out


def _name_of(source: object) -> str:
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    if isinstance(source, Graph):
        return "<graph>"
    return "<bytes>"


# --------------------------------------------------------------------------- random inputs


#: Ranges of :func:`random_inputs` for integer dtypes (inclusive).
INT_RANGES = {
    "BOOL": (0, 1),
    "INT4": (-7, 7),  # the spec's int4_t range (-8 excluded)
    "INT8": (-128, 127),
    "INT16": (-32768, 32767),
    "INT32": (-(1 << 16), 1 << 16),
    "INT48": (-(1 << 24), 1 << 24),
    "INT64": (-(1 << 24), 1 << 24),
    "SHAPE": (1, 4),
}


def random_inputs(graph: Source, seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for every input of ``graph``'s entry block, by name, in the reference form.

    Integers are uniform over the dtype's range (INT8/INT16 full range, INT4 [-7, 7]; INT32 and wider
    within +-2**16 / +-2**24 so sums and products stay representable); floats are standard
    normal, rounded to the input format.

    >>> from tosa_verify.graph import Region
    >>> g = Graph((1, 0, 0, False), [Region("main", [Block("main", [], {"x": Tensor("x", (2,), "INT8")}, ["x"], ["x"])])])
    >>> random_inputs(g, seed=1)["x"].dtype
    dtype('int8')
    """
    graph = load(graph)
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name in graph.main.inputs:
        decl = _decl(graph.main, name)
        if decl is None:
            raise TosaInputError(f"graph input {name!r} is not declared")
        info = dtype_info(decl.dtype)
        if info.name == "FP8UE8M0":
            # block scales: powers of two near 1 (a normal sample would be mostly NaN codes)
            value = np.exp2(rng.integers(-4, 5, decl.shape)).astype(info.working)
        elif info.is_float:
            value = rng.standard_normal(decl.shape).astype(info.working)
        elif info.name == "BOOL":
            value = rng.integers(0, 2, decl.shape).astype(bool)
        else:
            lo, hi = INT_RANGES.get(info.name, (info.min, info.max))
            value = rng.integers(lo, hi, decl.shape, endpoint=True).astype(info.working)
        out[name] = to_reference_form(np.asarray(value), decl.dtype)
    return out


# --------------------------------------------------------------------------- CLI


def build_diff_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``diff`` options to ``parser`` (or a new parser) and return it.

    >>> build_diff_parser().parse_args(["g.tosa", "--seed", "3"]).seed
    3
    """
    if parser is None:
        parser = argparse.ArgumentParser(
            prog="tosa-verify diff",
            description="Compare a TOSA graph op by op against the reference model or another graph.",
        )
    parser.add_argument("graph", help="the TOSA graph (.tosa)")
    parser.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE.npy",
                        help="an input value; repeat in graph input order or give NAME=FILE")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs used when no --input is given")
    parser.add_argument("--against", default=None, metavar="reference|interpreter|OTHER.tosa",
                        help="the reference model (default; with --executor: the interpreter), the "
                             "interpreter, or another TOSA graph")
    parser.add_argument("--precise", action="store_true",
                        help="run the reference model in FP64 and judge floats with the compliance verifier")
    parser.add_argument("--repro-dir", metavar="DIR", help="write a one-operator repro of the first divergence here")
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON ('-' for stdout)")
    parser.add_argument("--only-diverging", action="store_true", help="print only diverging operators in the table")
    return parser


def _read_inputs(specs: Sequence[str], graph: Graph) -> Inputs:
    named: dict[str, np.ndarray] = {}
    ordered: list[np.ndarray] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or spec.endswith(".npy") and Path(spec).exists():
            name, path = "", spec
        value = load_npy(path, "input")
        if name:
            named[name] = value
        else:
            ordered.append(value)
    if named and ordered:
        raise TosaInputError("give inputs either all by NAME=FILE or all in order, not mixed")
    return named if named else ordered


def diff_command(args: argparse.Namespace) -> int:
    """Run ``tosa-verify diff`` from parsed arguments; returns the exit code (0/1/2).

    >>> diff_command(build_diff_parser().parse_args(["model.tosa"]))   # doctest: +SKIP
    0
    """
    import sys

    try:
        graph = load(args.graph)
        check_graph_memory(graph)  # before random inputs are drawn for it
        inputs = _read_inputs(args.input, graph) if args.input else random_inputs(graph, args.seed)
        engine = getattr(args, "engine", None) or "interpreter"
        # another executor is compared with the interpreter unless told otherwise
        against = args.against or ("reference" if engine == "interpreter" else "interpreter")
        report = diff(graph, inputs, against=against, precise=args.precise, engine=engine)
        report.source = args.graph
    except TosaError as exc:
        print(f"tosa-verify diff: error: {exc}", file=sys.stderr)
        return 2
    print(report.format_table(all_ops=not args.only_diverging))
    if args.json:
        text = report.to_json()
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text)
    if args.repro_dir and report.first_divergence is not None:
        try:
            path = report.write_repro(args.repro_dir)
            print(f"repro written to {path}")
        except TosaError as exc:
            print(f"tosa-verify diff: error: cannot write the repro: {exc}", file=sys.stderr)
            return 2
    if report.error:
        return 2
    return 0 if report.ok else 1


def diff_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tosa-verify diff ...``: parse ``argv`` (without the verb) and run.

    Exit codes: 0 every operator agrees, 1 a divergence, 2 an error.

    >>> diff_main(["model.tosa", "--seed", "1", "--repro-dir", "repro"])   # doctest: +SKIP
    1
    """
    parser = build_diff_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    return diff_command(args)
