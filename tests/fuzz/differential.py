"""Run one fuzz case with both executors and decide whether they agree.

Agreement rules:

* both succeed: integer/bool outputs bit-exact; float outputs within the compliance mode of the
  producing operator (:func:`tosa_verify.compare.compare`, ULP fallback as both are FP32/16);
* both raise the same kind of error: ERROR (``TosaValidationError``) on both sides, or
  UNPREDICTABLE (``TosaRequireError``) on both sides;
* the interpreter raising ``TosaUnsupportedError`` is counted as "unsupported", not as agreement;
* the interpreter reporting a failed REQUIRE the reference model does not check
  (:data:`REFERENCE_UNCHECKED`, each with its spec line) is "reference-lenient": after a failed
  REQUIRE any result conforms, so the reference's result (or later error) is no disagreement.

Everything else is a disagreement, with a one-line reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

import tosa_verify
from tosa_verify import reference
from tosa_verify.compare import compare
from tosa_verify.errors import (
    TosaError,
    TosaRequireError,
    TosaUnsupportedError,
    TosaValidationError,
)

from .strategies import FuzzCase

#: (operator, REQUIRE condition) pairs of the spec that tosa-tools' reference model (2026.8.0)
#: does not check. MOD_SHAPE.tosac (1.1 draft): ``REQUIRE(input1[index] >= 0);`` and
#: ``REQUIRE(input2[index] >= 1);`` - the reference's applyMod only rejects a zero denominator and
#: computes C++ ``%`` of negative operands (``3 % -2 == 1``, ``-1 % 1 == 0``).
REFERENCE_UNCHECKED = {("MOD_SHAPE", "input1[index] >= 0"), ("MOD_SHAPE", "input2[index] >= 1")}


@dataclass
class Outcome:
    """``kind`` is ``agree``, ``both-error``, ``both-unpredictable``, ``unsupported``,
    ``reference-lenient`` or ``disagree``."""

    kind: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind != "disagree"


def _kind(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    if isinstance(exc, TosaRequireError):
        return "unpredictable"
    if isinstance(exc, TosaUnsupportedError):
        return "unsupported"
    if isinstance(exc, TosaValidationError):
        return "error"
    return f"other:{type(exc).__name__}"


def run_case(case: FuzzCase) -> Outcome:
    """Run ``case`` with the interpreter and the reference model and compare."""
    ours = theirs = None
    our_exc = their_exc = None
    try:
        ours = tosa_verify.run(case.data, case.inputs)
    except TosaError as exc:
        our_exc = exc
    try:
        theirs = reference.run(case.data, case.inputs)
    except TosaError as exc:
        their_exc = exc
    k_ours, k_theirs = _kind(our_exc), _kind(their_exc)
    if k_ours == "unsupported":
        return Outcome("unsupported", str(our_exc))
    if k_ours == "unpredictable" and k_theirs != "unpredictable" and _unchecked_by_reference(our_exc):
        return Outcome("reference-lenient", str(our_exc))
    if k_ours != "ok" or k_theirs != "ok":
        if k_ours == k_theirs:
            return Outcome("both-unpredictable" if k_ours == "unpredictable" else "both-error")
        return Outcome(
            "disagree",
            f"interpreter: {k_ours}{' (' + str(our_exc) + ')' if our_exc else ''}; "
            f"reference: {k_theirs}{' (' + str(their_exc)[:300] + ')' if their_exc else ''}",
        )
    graph = tosa_verify.load(case.data)
    block = graph.main
    producers = {name: op for op in block.operators for name in op.outputs}
    for name, mine, ref in zip(block.outputs, ours, theirs, strict=True):
        decl = block.tensors[name]
        verdict = compare(ref, mine, op=producers.get(name), block=block, dtype=decl.dtype)
        if not verdict.ok:
            return Outcome("disagree", f"output {name} ({decl.dtype}): {verdict.summary()}")
    return Outcome("agree")


def _unchecked_by_reference(exc: BaseException | None) -> bool:
    return (getattr(exc, "op", None), getattr(exc, "condition", None)) in REFERENCE_UNCHECKED


def summarize(outcomes: Counter) -> str:
    total = sum(outcomes.values())
    parts = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    return f"{total} graphs: {parts}"


def as_arrays(case: FuzzCase) -> dict[str, np.ndarray]:
    """The case's inputs (for writing regression tests)."""
    return {k: v if isinstance(v, tuple) else np.asarray(v) for k, v in case.inputs.items()}  # tuple: block scaled
