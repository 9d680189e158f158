"""Reduction operators (spec chapter "Reduction"): REDUCE_ALL, REDUCE_ANY, REDUCE_MAX, REDUCE_MIN,
REDUCE_PRODUCT, REDUCE_SUM.

Every reduction keeps the reduced axis with size 1. Integer results are exact; floating-point
sums and products are computed in float64 and rounded once to the output type, which is inside
the spec's dot-product and product error bounds.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from ..numerics import int_range, round_to_float
from . import _int64
from ._layout_support import check_rank
from ._levels import MAX_RANK
from .facts import DOT_PRODUCT, REDUCE_PRODUCT, axis_dim
from .registry import OpCall, register, register_prepare

_FLOATS = ("FP16", "BF16", "FP32")


def _reduce_checks(call: OpCall, allowed: tuple[str, ...]) -> tuple[np.ndarray, int]:
    """The ERROR_IFs every REDUCE_* shares; returns (input, axis)."""
    call.check_arity(1, 1)
    dtype = call.out_dtype()
    if dtype not in allowed:
        call.fail(f"in_out_t {dtype} not supported by {call.op}")
    if call.in_dtype() != dtype:
        call.fail(f"input is {call.in_dtype()}, output is {dtype}")
    x = call.inputs[0]
    in_shape = tuple(call.input_decls[0].shape)
    out_shape = tuple(call.out_shape())
    check_rank(call, len(in_shape), 1, MAX_RANK, "input")
    check_rank(call, len(out_shape), 1, MAX_RANK, "output")
    axis = int(call.attrs.get("axis", 0))
    call.error_if(axis < 0 or axis >= len(in_shape), "axis < 0 || axis >= rank(shape1)")
    call.error_if(len(out_shape) != len(in_shape), "rank(shape) != rank(shape1)")
    call.error_if(out_shape[axis] != 1, "shape[axis] != 1")
    # The other dimensions are copied through (the output shape is the input's with axis -> 1).
    expected = in_shape[:axis] + (1,) + in_shape[axis + 1 :]
    if out_shape != expected:
        call.fail(f"output shape {list(out_shape)} != {list(expected)}")
    return x, axis


@register("REDUCE_ALL")
def reduce_all(call: OpCall) -> list[np.ndarray]:
    """REDUCE_ALL: logical AND along ``axis`` (true for an empty axis)."""
    x, axis = _reduce_checks(call, ("BOOL",))
    return [np.all(x, axis=axis, keepdims=True)]


@register("REDUCE_ANY")
def reduce_any(call: OpCall) -> list[np.ndarray]:
    """REDUCE_ANY: logical OR along ``axis`` (false for an empty axis)."""
    x, axis = _reduce_checks(call, ("BOOL",))
    return [np.any(x, axis=axis, keepdims=True)]


def _nan_mode(call: OpCall, dtype: str) -> str:
    mode = call.attrs.get("nan_mode", "PROPAGATE")
    # nan_mode only matters for floats; integer graphs may leave it unset.
    if dtype in _FLOATS and mode not in ("PROPAGATE", "IGNORE"):
        call.fail(f"nan_mode {mode} is not PROPAGATE or IGNORE")
    return mode


def _extreme(call: OpCall, largest: bool) -> list[np.ndarray]:
    x, axis = _reduce_checks(call, ("INT8", "INT16", "INT32", *_int64.int64_if_11(call), *_FLOATS))
    dtype = call.out_dtype()
    return [_extreme_values(x, axis, dtype, _nan_mode(call, dtype), largest)]


@register_prepare("REDUCE_MAX", "REDUCE_MIN")
def prepare_extreme(call: OpCall):
    """REDUCE_MAX/REDUCE_MIN with the (static) checks made once."""
    _, axis = _reduce_checks(call, ("INT8", "INT16", "INT32", *_FLOATS))
    dtype = call.out_dtype()
    mode, largest = _nan_mode(call, dtype), call.op == "REDUCE_MAX"
    if dtype not in _FLOATS:
        ufunc = np.maximum if largest else np.minimum
        return lambda run: [ufunc.reduce(run.inputs[0], axis=axis, keepdims=True)]
    return lambda run: [_extreme_values(run.inputs[0], axis, dtype, mode, largest)]


def _extreme_values(x: np.ndarray, axis: int, dtype: str, mode: str, largest: bool) -> np.ndarray:
    """The REDUCE_MAX (``largest``) or REDUCE_MIN of ``x`` along ``axis``, checks done."""
    if dtype not in _FLOATS:
        fn = np.max if largest else np.min
        return fn(x, axis=axis, keepdims=True)
    # float32 holds FP16/BF16 values exactly, so the comparison and the copy back are exact.
    # PROPAGATE: any NaN gives NaN (np.max/np.min). IGNORE: NaN only when the whole axis is NaN
    # (np.fmax/np.fmin ignore a NaN operand). The sign of a zero result is free per the spec.
    xf = x if x.dtype == np.float32 else x.astype(np.float32)  # (only read below)
    if mode == "IGNORE":
        ufunc = np.fmax if largest else np.fmin
    else:
        ufunc = np.maximum if largest else np.minimum  # np.max/np.min's ufuncs, without the wrapper
    result = ufunc.reduce(xf, axis=axis, keepdims=True)
    # Equal values have equal bits except the zeros. The pseudocode folds in axis order with
    # apply_max_s (``a >= b ? a : b``: the first of tied zeros wins) and apply_min_s
    # (``a < b ? a : b``: the last wins). Either sign is allowed, but following the fold keeps
    # us bit-identical with the reference model.
    # (only a zero result can be a tied zero: the whole input is compared only then; NaN is
    # nonzero, so the count falls short exactly when some result is ±0; count_nonzero is one C
    # call where ndarray.all goes through a Python wrapper)
    if np.count_nonzero(result) != result.size:
        zeros = xf == 0
        if largest:
            pick = np.argmax(zeros, axis=axis)
        else:
            pick = zeros.shape[axis] - 1 - np.argmax(np.flip(zeros, axis=axis), axis=axis)
        chosen = np.take_along_axis(xf, np.expand_dims(pick, axis), axis=axis)
        result = np.where(result == 0, chosen, result)
    if x.dtype == np.float32:  # FP32: result is new, of the working dtype
        return result
    return result.astype(dtype_info(dtype).working)


@register("REDUCE_MAX")
def reduce_max(call: OpCall) -> list[np.ndarray]:
    """REDUCE_MAX: maximum along ``axis``, NaN handling per ``nan_mode`` for floats."""
    return _extreme(call, largest=True)


@register("REDUCE_MIN")
def reduce_min(call: OpCall) -> list[np.ndarray]:
    """REDUCE_MIN: minimum along ``axis``, NaN handling per ``nan_mode`` for floats."""
    return _extreme(call, largest=False)


@register("REDUCE_PRODUCT", compliance=REDUCE_PRODUCT, kernel_size=axis_dim)
def reduce_product(call: OpCall) -> list[np.ndarray]:
    """REDUCE_PRODUCT: product along ``axis`` (floats only), float64 then one rounding."""
    x, axis = _reduce_checks(call, _FLOATS)
    product = np.prod(x.astype(np.float64), axis=axis, keepdims=True)
    return [round_to_float(product, call.out_dtype())]


@register_prepare("REDUCE_ALL", "REDUCE_ANY", "REDUCE_PRODUCT")
def prepare_reduce_logical_product(call: OpCall):
    """REDUCE_ALL / REDUCE_ANY / REDUCE_PRODUCT with their (static) checks made once."""
    if call.op == "REDUCE_PRODUCT":
        _, axis = _reduce_checks(call, _FLOATS)
        dtype = call.out_dtype()
        return lambda run: [round_to_float(np.prod(run.inputs[0].astype(np.float64), axis=axis, keepdims=True),
                                           dtype)]
    _, axis = _reduce_checks(call, ("BOOL",))
    reduce = np.all if call.op == "REDUCE_ALL" else np.any
    return lambda run: [reduce(run.inputs[0], axis=axis, keepdims=True)]


@register("REDUCE_SUM", compliance=DOT_PRODUCT, kernel_size=axis_dim)
def reduce_sum(call: OpCall) -> list[np.ndarray]:
    """REDUCE_SUM: sum along ``axis``; INT32 exact with the spec's per-step overflow REQUIRE."""
    x, axis = _reduce_checks(call, ("INT32", *_int64.int64_if_11(call), *_FLOATS))
    return [_sum(call, x, axis, call.out_dtype())]


@register_prepare("REDUCE_SUM")
def prepare_reduce_sum(call: OpCall):
    """REDUCE_SUM with its (static) checks made once."""
    _, axis = _reduce_checks(call, ("INT32", *_int64.int64_if_11(call), *_FLOATS))
    dtype = call.out_dtype()
    if dtype in ("FP32", "FP16"):
        # _sum's float path without its copies: float64 accumulators (dtype=), one rounding by
        # numpy's cast (round_to_float's for these types; a run already ignores overflow)
        working = dtype_info(dtype).working
        return lambda run: [_sum_f64(run.inputs[0], axis).astype(working)]
    if dtype == "INT32":
        return _int32_sum_kernel(axis, call.input_decls[0].shape[axis])
    return lambda run: [_sum(run, run.inputs[0], axis, dtype)]


def _int32_sum_kernel(axis: int, length: int):
    """:func:`_sum`'s INT32 path for an axis of ``length``: when no partial sum can leave int32
    (``length`` times the largest magnitude inside it), the int64 sum cast back; otherwise
    :func:`_sum`, which checks the partial sums' REQUIRE."""
    hi = int_range("INT32")[1]

    def int32_sum(run: OpCall) -> list[np.ndarray]:
        x = run.inputs[0]
        if x.size and max(-int(x.min()), int(x.max())) * length > hi:
            return [_sum(run, x, axis, "INT32")]
        return [np.add.reduce(x, axis=axis, dtype=np.int64, keepdims=True).astype(np.int32)]

    return int32_sum


def _sum_f64(x: np.ndarray, axis: int) -> np.ndarray:
    """The float64 sum of ``x`` along ``axis`` (kept), from the spec's +0 accumulator."""
    total = np.add.reduce(x, axis=axis, dtype=np.float64, keepdims=True)
    total += 0.0
    return total


def _sum(call: OpCall, x: np.ndarray, axis: int, dtype: str) -> np.ndarray:
    if dtype == "INT64":
        return _int64.reduce_sum(call, x, axis)
    if dtype == "INT32":
        # apply_add_s<i32_t> REQUIREs every partial sum (in the spec's order) to fit int32;
        # int64 cumulative sums of at most 2**31 int32 values cannot overflow.
        # (int64 accumulators via dtype=: no int64 copy of x, small tensors are call-bound)
        lo, hi = int_range("INT32")
        # no partial sum leaves int32 when axis length * the largest magnitude stays inside it
        if x.size and max(-int(x.min()), int(x.max())) * x.shape[axis] > hi:
            partial = np.cumsum(x, axis=axis, dtype=np.int64)
            call.require(partial.min() >= lo and partial.max() <= hi, "apply_add_s<i32_t>: partial sum within int32")
        return np.sum(x, axis=axis, keepdims=True, dtype=np.int64).astype(np.int32)
    # Float sums: a dot product with a vector of ones. float64 accumulation is far inside the
    # dot-product error bound, and a single final rounding to the output type.
    # "+ 0.0" because the spec's accumulator starts at +0: a sum of only -0.0 is +0.0.
    total = np.sum(x.astype(np.float64), axis=axis, keepdims=True) + 0.0
    return round_to_float(total, dtype)
