"""Comparison operators (spec chapter "Comparison Operators"): EQUAL, GREATER, GREATER_EQUAL.

Results are BOOL. A NaN operand makes every comparison false, which is also IEEE-754's (and
numpy's) answer, so the pseudocode's explicit ``isNaN`` branch needs no extra code.
"""

from __future__ import annotations

import numpy as np

from . import _int64
from ._broadcast import FP_TYPES, broadcast_inputs, check_broadcast
from .registry import OpCall, register, register_prepare

_COMPARE_TYPES = tuple((t, t, "BOOL") for t in ("INT32", *FP_TYPES))


def _compare_checks(call: OpCall) -> None:
    call.check_arity(2, 1)
    call.check_types(_int64.with_int64(call, _COMPARE_TYPES, ("INT64", "INT64", "BOOL")))


def _compare(call: OpCall, fn) -> list[np.ndarray]:
    _compare_checks(call)
    a, b = broadcast_inputs(call, 0, 1)
    with np.errstate(invalid="ignore"):  # comparing NaN is the specified false
        return [np.asarray(fn(a, b), dtype=np.bool_)]


@register("EQUAL")
def equal(call: OpCall) -> list[np.ndarray]:
    """EQUAL: ``input1 == input2`` (false when either is NaN; -0 == +0)."""
    return _compare(call, np.equal)


@register("GREATER")
def greater(call: OpCall) -> list[np.ndarray]:
    """GREATER: ``input1 > input2`` (false when either is NaN)."""
    return _compare(call, np.greater)


@register("GREATER_EQUAL")
def greater_equal(call: OpCall) -> list[np.ndarray]:
    """GREATER_EQUAL: ``input1 >= input2`` (false when either is NaN)."""
    return _compare(call, np.greater_equal)


_COMPARE_UFUNCS = {"EQUAL": np.equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal}


@register_prepare(*_COMPARE_UFUNCS)
def prepare_compare(call: OpCall):
    """The comparisons with their (static) arity, type and broadcast checks made once; a run
    relies on numpy's broadcasting, which equals the spec's once the ranks match (a run's
    kernels run with numpy's floating-point warnings off, see ``register_prepare``)."""
    _compare_checks(call)
    check_broadcast(call, 0, 1)
    ufunc = _COMPARE_UFUNCS[call.op]
    return lambda run: [ufunc(run.inputs[0], run.inputs[1])]
