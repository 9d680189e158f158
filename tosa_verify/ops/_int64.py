"""EXT-INT64 (TOSA 1.1 draft) on the TOSA 1.0 elementwise and reduction operators.

The 1.1 draft adds an i64_t row ("signed 64") to ADD, SUB, MUL, INTDIV, the shifts, the
bitwise ops, MAXIMUM, MINIMUM, ABS, BITWISE_NOT, CLZ, NEGATE, the comparisons, SELECT and
REDUCE_SUM/MAX/MIN. The rows exist only in a 1.1 graph (:func:`~._version.is_tosa_11`), so a
1.0 graph keeps the 1.0 ERROR_IFs.

int64 values cannot be widened, so the REQUIREs of ``apply_add_s`` / ``apply_sub_s`` /
``apply_intdiv_s`` are checked on the operands (as the pseudocode writes them) instead of on a
wider result.
"""

from __future__ import annotations

import numpy as np

from ._version import is_tosa_11
from .registry import OpCall

I64 = np.int64
I64_MIN, I64_MAX = int(np.iinfo(I64).min), int(np.iinfo(I64).max)


def with_int64(call: OpCall, types: tuple[tuple[str, ...], ...], row: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """``types`` plus the EXT-INT64 signature ``row`` when the graph is TOSA 1.1.

    Example: for ADD in a 1.1 graph, ``with_int64(call, ((\"INT32\",) * 3,), (\"INT64\",) * 3)``
    also accepts an all-INT64 ADD.
    """
    return (*types, row) if is_tosa_11(call) else types


def int64_if_11(call: OpCall) -> tuple[str, ...]:
    """``("INT64",)`` in a TOSA 1.1 graph, else ``()``: for type lists of one dtype per op.

    Example: ``("INT32", *int64_if_11(call))`` is REDUCE_SUM's integer in_out_t list.
    """
    return ("INT64",) if is_tosa_11(call) else ()


def add_sub(call: OpCall, a: np.ndarray, b: np.ndarray, sign: int) -> np.ndarray:
    """``apply_add_s<i64_t>`` (sign +1) or ``apply_sub_s<i64_t>`` (sign -1) with their REQUIREs.

    >>> # doctest: +SKIP
    >>> add_sub(call, np.array([1]), np.array([2]), -1).tolist()
    [-1]
    """
    a, b = np.asarray(a, I64), np.asarray(b, I64)
    if sign > 0:
        # REQUIRE(!(b > 0 && a > max - b)); REQUIRE(!(b < 0 && a < min - b)); neither bound overflows
        bad = ((b > 0) & (a > I64_MAX - np.maximum(b, 0))) | ((b < 0) & (a < I64_MIN - np.minimum(b, 0)))
        what = "apply_add_s<i64_t>: a + b fits i64_t"
    else:
        bad = ((b > 0) & (a < I64_MIN + np.maximum(b, 0))) | ((b < 0) & (a > I64_MAX + np.minimum(b, 0)))
        what = "apply_sub_s<i64_t>: a - b fits i64_t"
    call.require(not bad.any(), what)
    with np.errstate(over="ignore"):
        return a + b if sign > 0 else a - b


def intdiv(call: OpCall, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``apply_intdiv_s<i64_t>``: truncating division; REQUIRE b != 0 and not (min / -1)."""
    a, b = np.asarray(a, I64), np.asarray(b, I64)
    call.require(np.all(b != 0), "value2 != 0")
    call.require(not np.any((a == I64_MIN) & (b == -1)), "!(a == INT64_MIN && b == -1)")
    safe_b = np.where(b == 0, 1, b)
    q = a // safe_b  # floors; truncation toward zero differs where the signs differ and a % b != 0
    return q + ((a % safe_b != 0) & ((a < 0) != (safe_b < 0)))


def negate_abs(call: OpCall, x: np.ndarray, negate: bool) -> np.ndarray:
    """``apply_sub_s<i64_t>(0, x)`` (NEGATE, and ABS of negatives): REQUIRE x != INT64_MIN."""
    x = np.asarray(x, I64)
    call.require(not np.any(x == I64_MIN), "apply_sub_s<i64_t>(0, value) fits i64_t (value != INT64_MIN)")
    return -x if negate else np.abs(x)


def logical_right_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``input1 >> input2`` of int64 values taken as 64-bit unsigned patterns (zeros shift in)."""
    return (np.asarray(a, I64).view(np.uint64) >> np.asarray(b, I64).astype(np.uint64)).view(I64)


def count_leading_zeros64(values: np.ndarray) -> np.ndarray:
    """Leading zero bits of int64 values as 64-bit patterns (64 for zero).

    >>> count_leading_zeros64(np.array([0, 1, -1, 1 << 40])).tolist()
    [64, 63, 0, 23]
    """
    v = np.asarray(values, I64).view(np.uint64).copy()
    out = np.zeros(v.shape, I64)
    for width in (32, 16, 8, 4, 2, 1):  # binary search on the highest set bit, all elements at once
        small = v < (np.uint64(1) << np.uint64(64 - width))
        out += np.where(small, width, 0)
        v = np.where(small, v << np.uint64(width), v)
    return out + (v == 0)


def reduce_sum(call: OpCall, x: np.ndarray, axis: int) -> np.ndarray:
    """REDUCE_SUM of int64 along ``axis`` (keepdims): ``apply_add_s<i64_t>`` step by step.

    Each partial sum must fit (the REQUIRE of every step), which Python integers check exactly.
    """
    x = np.asarray(x, I64)
    moved = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
    sums = []
    for column in moved.T:
        acc = 0
        for v in column.tolist():
            acc += v
            call.require(I64_MIN <= acc <= I64_MAX, "apply_add_s<i64_t>: acc + value fits i64_t")
        sums.append(acc)
    shape = list(x.shape)
    shape[axis] = 1
    rest = [s for i, s in enumerate(x.shape) if i != axis]
    return np.moveaxis(np.asarray(sums, I64).reshape([1, *rest]), 0, axis).reshape(shape)
