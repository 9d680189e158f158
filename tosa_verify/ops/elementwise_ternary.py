"""Elementwise ternary operators (spec chapter "Elementwise Ternary Operators"): SELECT."""

from __future__ import annotations

import numpy as np

from . import _int64
from ._broadcast import FP_TYPES, broadcast_inputs, check_broadcast
from .registry import OpCall, register, register_prepare

_SELECT_TYPES = tuple(("BOOL", t, t, t) for t in ("BOOL", "INT8", "INT16", "INT32", *FP_TYPES))


@register("SELECT", operands=("input1", "input2", "input3"))
def select(call: OpCall) -> list[np.ndarray]:
    """SELECT: ``input1 ? input2 : input3`` elementwise, all three inputs broadcast.

    ERROR_IF ``shape != broadcast_shape(broadcast_shape(shape1, shape2), shape3)``.
    """
    _select_checks(call)
    cond, on_true, on_false = broadcast_inputs(call, 0, 1, 2)
    # np.where copies the chosen elements bit for bit (NaN payloads and -0 included)
    return [np.where(cond, on_true, on_false)]


def _select_checks(call: OpCall) -> None:
    call.check_arity(3, 1)
    call.check_types(_int64.with_int64(call, _SELECT_TYPES, ("BOOL", "INT64", "INT64", "INT64")))


@register_prepare("SELECT")
def prepare_select(call: OpCall):
    """SELECT with its (static) arity, type and broadcast checks made once; a run relies on
    numpy's broadcasting, which equals the spec's once the ranks match."""
    _select_checks(call)
    check_broadcast(call, 0, 1, 2)
    return lambda run: [np.where(run.inputs[0], run.inputs[1], run.inputs[2])]
