"""Shared helpers of the elementwise chapters: broadcasting, shape checks, NaN-aware min/max.

Not an op module (the leading underscore keeps :mod:`tosa_verify.ops` from importing it as one).
The spec's broadcasting lives in ``pseudocode/library/broadcast_shape.tosac`` and
``apply_broadcast.tosac``: ranks must match and a dimension broadcasts only when it is 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..numerics import round_to_float
from .registry import OpCall

#: Types the elementwise chapters list, by spec family.
FP_TYPES = ("FP16", "BF16", "FP32")


def broadcast_shape(call: OpCall, shape1: Sequence[int], shape2: Sequence[int]) -> tuple[int, ...]:
    """Spec ``broadcast_shape``: the common shape of two same-rank shapes, e.g. (1, 3), (4, 1) -> (4, 3).

    ERROR_IF the ranks differ or a dimension pair is neither equal nor has a 1.
    """
    if shape1 == shape2 and type(shape1) is tuple:  # (the common case: nothing to broadcast)
        return shape1
    if len(shape1) != len(shape2):
        call.fail(f"rank(shape1) != rank(shape2) ({len(shape1)} vs {len(shape2)})")
    shape = list(shape1)
    for i, (d1, d2) in enumerate(zip(shape1, shape2, strict=True)):
        if d1 == 1:
            shape[i] = d2
        else:
            if d2 != 1 and d2 != d1:
                call.fail(f"shape2[{i}] != 1 && shape2[{i}] != shape1[{i}] ({d2} vs {d1})")
    return tuple(shape)


def check_broadcast(call: OpCall, *indices: int) -> tuple[int, ...]:
    """ERROR_IF the output shape is not the broadcast of the inputs ``indices``; return it.

    Covers the spec's ``ERROR_IF(shape != broadcast_shape(shape1, shape2))`` (and the nested
    three-input form of SELECT) including the rank checks inside ``broadcast_shape``.
    """
    shape = tuple(call.input_decls[indices[0]].shape)
    for i in indices[1:]:
        shape = broadcast_shape(call, shape, call.input_decls[i].shape)
    if tuple(call.out_shape()) != shape:
        call.fail(f"shape != broadcast_shape(...) (output {list(call.out_shape())}, broadcast {list(shape)})")
    return shape


def broadcast_inputs(call: OpCall, *indices: int) -> list[np.ndarray]:
    """Check broadcasting of inputs ``indices`` and return them expanded to the output shape.

    ``np.broadcast_to`` returns read-only views, so no element is copied here; the spec's
    ``apply_broadcast`` (index 0 along size-1 axes) is exactly numpy's broadcasting once the
    ranks are known to match.
    """
    shape = check_broadcast(call, *indices)
    return [np.broadcast_to(call.inputs[i], shape) for i in indices]


def check_same_shape(call: OpCall, in_index: int = 0) -> None:
    """ERROR_IF input ``in_index`` and the output have different shapes (unary ops)."""
    if tuple(call.input_decls[in_index].shape) != tuple(call.out_shape()):
        call.fail(f"shape(input) != shape(output) ({list(call.input_decls[in_index].shape)} vs {list(call.out_shape())})")


def nan_mode(call: OpCall) -> str:
    """The op's ``nan_mode`` attribute; ERROR_IF it is neither PROPAGATE nor IGNORE.

    The reference model rejects an unset (UNKNOWN) mode when it validates the graph.
    """
    mode = call.attrs.get("nan_mode", "PROPAGATE")
    if mode not in ("PROPAGATE", "IGNORE"):
        call.fail(f"nan_mode {mode!r} is not PROPAGATE or IGNORE")
    return mode


def float_rounder(dtype: str) -> Callable[[np.ndarray], np.ndarray]:
    """A function rounding float64 values once to the float ``dtype`` (its working array).

    FP32 and FP16 are numpy's cast (IEEE round to nearest even in one step; out of range gives
    infinity, numpy's overflow warning is off while the interpreter runs kernels); the other
    types go through :func:`~tosa_verify.numerics.round_to_float`.

    >>> float_rounder("FP32")(np.array([0.1])).dtype
    dtype('float32')
    """
    if dtype in ("FP32", "FP16"):
        working = np.dtype(np.float32 if dtype == "FP32" else np.float16)
        return lambda values: values.astype(working)
    return lambda values: round_to_float(values, dtype)


def to_f64(values: np.ndarray) -> np.ndarray:
    """Widen a float working array to float64 (exact for every TOSA float type)."""
    return np.asarray(values).astype(np.float64)


def apply_max(a: np.ndarray, b: np.ndarray, mode: str, is_float: bool) -> np.ndarray:
    """Spec ``apply_max_s``: ``a >= b ? a : b`` with ``compare_nan`` for floats.

    PROPAGATE: a NaN operand gives NaN. IGNORE: a NaN operand yields the other operand (NaN
    only when both are NaN). The sign of zero follows the pseudocode literally (``-0 >= +0``).
    """
    with np.errstate(invalid="ignore"):
        result = np.where(a >= b, a, b)
    if is_float:
        result = _apply_nan(result, a, b, mode)
    return result


def apply_min(a: np.ndarray, b: np.ndarray, mode: str, is_float: bool) -> np.ndarray:
    """Spec ``apply_min_s``: ``a < b ? a : b`` with ``compare_nan`` for floats."""
    with np.errstate(invalid="ignore"):
        result = np.where(a < b, a, b)
    if is_float:
        result = _apply_nan(result, a, b, mode)
    return result


def _apply_nan(result: np.ndarray, a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    # compare_nan: PROPAGATE -> NaN; IGNORE -> isNaN(a) ? b : a
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if mode == "PROPAGATE":
        nan = np.array(np.nan, dtype=result.dtype)
        return np.where(nan_a | nan_b, nan, result)
    return np.where(nan_a, b, np.where(nan_b, a, result))
