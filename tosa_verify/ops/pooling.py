"""Tensor operators (spec chapter "Tensor Operators"), windows without weights: AVG_POOL2D,
MAX_POOL2D, ARGMAX, FFT2D, RFFT2D, and from the TOSA 1.1 draft AVG_POOL2D_ADAPTIVE and
MAX_POOL2D_ADAPTIVE. The dot-product operators of the chapter are in :mod:`.tensor_ops`.

AVG_POOL2D integer sums are exact int64 sums, rounded by the spec's reciprocal scale.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..dtypes import dtype_info
from ..numerics import apply_scale_32, clip_ufunc, int_range, reciprocal_scale, wrap
from ._int64 import int64_if_11
from ._layout_support import shape_input
from ._levels import MAX_KERNEL, MAX_RANK, MAX_STRIDE
from ._pool_small import small_avg_pool, small_float_avg_pool, small_float_max_pool, small_max_pool
from ._tensor_common import (
    F64,
    INT64,
    _check_rank,
    _check_zero_point,
    _ints,
    _is_float,
    _level,
    _out_size,
    _quiet,
    _tap_ranges,
    _zero_point,
)
from .facts import DOT_PRODUCT, attr_product, input_dims, shape_input_product
from .registry import OpCall, register, register_prepare

#: Supported (in_out_t, acc_t) of AVG_POOL2D.
AVG_POOL_TYPES = (
    ("INT8", "INT32"),
    ("INT16", "INT32"),
    ("FP8E4M3", "FP16"),
    ("FP8E5M2", "FP16"),
    ("FP16", "FP16"),
    ("FP16", "FP32"),
    ("BF16", "FP32"),
    ("FP32", "FP32"),
)

#: Supported in_t of ARGMAX (out_t is INT32) and in_out_t of MAX_POOL2D.
MAX_TYPES = ("INT8", "INT16", "FP8E4M3", "FP8E5M2", "FP16", "BF16", "FP32")


# --------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------


def _pool_attrs(call: OpCall) -> tuple[list[int], list[int], list[int]]:
    """AVG_POOL2D / MAX_POOL2D: kernel, stride and pad from the attributes."""
    return _ints(call, "kernel", 2), _ints(call, "stride", 2), _ints(call, "pad", 4)


def _pool_shape_inputs(call: OpCall, first: int) -> tuple[list[int], list[int], list[int]]:
    """The *_ADAPTIVE pools (TOSA 1.1): kernel, stride and pad from shape_t inputs ``first``..."""
    return (
        shape_input(call, first, 2, "kernel"),
        shape_input(call, first + 1, 2, "stride"),
        shape_input(call, first + 2, 4, "pad"),
    )


def _check_pool(
    call: OpCall, kernel: list[int], stride: list[int], pad: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """Kernel / stride / pad ERROR_IFs and output shape of the pooling ops."""
    in_shape, out_shape = call.input_decls[0].shape, call.out_shape()
    _check_rank(call, in_shape, 4, "input")
    _check_rank(call, out_shape, 4, "output")
    ky, kx = kernel
    pt, pb, pl, pr = pad
    call.error_if(ky < 1 or kx < 1, "kernel_y < 1 || kernel_x < 1")
    call.error_if(stride[0] < 1 or stride[1] < 1, "stride_y < 1 || stride_x < 1")
    call.error_if(min(pad) < 0, "pad_top < 0 || pad_bottom < 0 || pad_left < 0 || pad_right < 0")
    call.error_if(pr >= kx or pl >= kx, "pad_right >= kernel_x || pad_left >= kernel_x")
    call.error_if(pt >= ky or pb >= ky, "pad_top >= kernel_y || pad_bottom >= kernel_y")
    _level(call, [*kernel, *pad], MAX_KERNEL, "kernel or pad")
    _level(call, stride, MAX_STRIDE, "stride")
    n, ih, iw, c = in_shape
    on, oh, ow, oc = out_shape
    call.error_if(on != n or oc != c, "output N or C != input N or C")
    _out_size(call, oh, ih + pt + pb - ky, stride[0], "H")
    _out_size(call, ow, iw + pl + pr - kx, stride[1], "W")
    return kernel, stride, pad


def _pool_taps(x: np.ndarray, kernel, stride, pad, out_hw, acc: np.ndarray, combine) -> np.ndarray:
    """``acc = combine(acc, window element)`` over the in-range taps of every pooling window."""
    for tap in itertools.product(range(kernel[0]), range(kernel[1])):
        ranges = [
            _tap_ranges(tap[i], 1, stride[i], pad[2 * i], x.shape[1 + i], out_hw[i])
            for i in range(2)
        ]
        if any(r is None for r in ranges):
            continue
        out_idx = (slice(None), ranges[0][0], ranges[1][0])
        in_idx = (slice(None), ranges[0][1], ranges[1][1])
        acc[out_idx] = combine(acc[out_idx], x[in_idx])
    return acc


def _window_counts(
    in_size: int, out_size: int, kernel: int, stride: int, pad_before: int
) -> list[int]:
    """Number of in-range input positions of each pooling window along one axis.

    >>> _window_counts(4, 3, 3, 2, 1)  # windows over input rows -1..1, 1..3, 3..5
    [2, 3, 1]
    """
    # (Python's ints over the few windows: a handful of numpy calls cost more)
    return [min(start + kernel, in_size) - max(start, 0)
            for start in range(-pad_before, out_size * stride - pad_before, stride)]


@register(
    "AVG_POOL2D", operands=("input", "input_zp", "output_zp"), compliance=DOT_PRODUCT, kernel_size=attr_product("kernel"),
)
@_quiet
def avg_pool2d(call: OpCall) -> list[np.ndarray]:
    """AVG_POOL2D: mean over each window's in-range values (padding not counted)."""
    return [_avg_pool(call, _avg_pool_setup(call))]


@register_prepare("AVG_POOL2D")
def prepare_avg_pool2d(call: OpCall):
    """AVG_POOL2D with constant zero points: checks, window counts and their scales once."""
    if len(call.inputs) != 3 or call.inputs[1] is None or call.inputs[2] is None:
        return None
    p = _avg_pool_setup(call)
    shape = tuple(call.input_decls[0].shape)
    small = small_float_avg_pool(p, shape) if _is_float(p["dt"]) else small_avg_pool(p, shape)
    return small or (lambda run: [_avg_pool(run, p)])  # (run and fold: warnings off)


def _avg_pool_setup(call: OpCall) -> dict:
    """The ERROR_IFs of AVG_POOL2D; window counts and (integer) their reciprocal scales."""
    call.check_arity(3, 1)
    return _avg_pool_params(call, _pool_attrs(call))


@register(
    "AVG_POOL2D_ADAPTIVE", operands=("input", "input_zp", "output_zp", "kernel", "stride", "pad"), compliance=DOT_PRODUCT,
    kernel_size=shape_input_product(3), int16=True,
)
@_quiet
def avg_pool2d_adaptive(call: OpCall) -> list[np.ndarray]:
    """AVG_POOL2D_ADAPTIVE (TOSA 1.1): AVG_POOL2D with kernel, stride, pad as shape inputs.

    Inputs: input, input_zp, output_zp, kernel [2], stride [2], pad [4].
    """
    call.check_arity(6, 1)
    return [_avg_pool(call, _avg_pool_params(call, _pool_shape_inputs(call, 3)))]


def _avg_pool_params(call: OpCall, window: tuple[list[int], list[int], list[int]]) -> dict:
    """The ERROR_IFs of the average pools for a (kernel, stride, pad) window; window counts and
    (integer) their reciprocal scales, for :func:`_avg_pool`."""
    dt, acc_dt = call.in_dtype(0), call.attrs.get("acc_type")
    call.error_if(call.out_dtype() != dt, "output element type != in_out_t")
    if (dt, acc_dt) not in AVG_POOL_TYPES:
        call.fail(f"unsupported (in_out_t, acc_t) {(dt, acc_dt)}")
    in_zp = _zero_point(call, 1, dt, "input_zp")
    out_zp = _zero_point(call, 2, dt, "output_zp")
    _check_zero_point(call, in_zp, dt, "input_zp")
    _check_zero_point(call, out_zp, dt, "output_zp")
    kernel, stride, pad = _check_pool(call, *window)
    n, oh, ow, c = call.out_shape()
    ih, iw = call.input_decls[0].shape[1:3]
    rows = _window_counts(ih, oh, kernel[0], stride[0], pad[0])
    columns = _window_counts(iw, ow, kernel[1], stride[1], pad[2])
    count = np.array([[h * w for w in columns] for h in rows], INT64).reshape(1, len(rows), len(columns), 1)
    # ([1, OH, OW, 1]; each >= 1 because pad < kernel)
    p = {
        "dt": dt,
        "in_zp": in_zp,
        "out_zp": out_zp,
        "kernel": kernel,
        "stride": stride,
        "pad": pad,
        "shape": (n, oh, ow, c),
        "count": count,
    }
    if not _is_float(dt):
        # the distinct window counts, sorted (Python's set over the few windows: np.unique's
        # wrapper costs more); without padding, one count for every window
        values = sorted(set(count.ravel().tolist()))
        scales = [reciprocal_scale(k) for k in values]
        if len(values) == 1:
            p["multiplier"] = np.full(count.shape, scales[0][0], INT64)
            p["shift"] = np.full(count.shape, scales[0][1], INT64)
            return p
        at = np.searchsorted(np.array(values, INT64), count)  # each window's count among them
        p["multiplier"] = np.array([m for m, _ in scales], INT64)[at]
        p["shift"] = np.array([shift for _, shift in scales], INT64)[at]
    return p


def _avg_pool(call: OpCall, p: dict) -> np.ndarray:
    dt, shape = p["dt"], p["shape"]
    kernel, stride, pad, out_hw = p["kernel"], p["stride"], p["pad"], shape[1:3]
    if _is_float(dt):
        acc = _pool_taps(
            call.inputs[0].astype(F64), kernel, stride, pad, out_hw, np.zeros(shape), np.add
        )
        return (acc / p["count"]).astype(dtype_info(dt).working)
    # The sum is exact in int64 (|sum| <= count * 2**16 <= 2**42). The spec's int32 acc_t makes
    # an int32 overflow a REQUIRE (only windows over 2**16 elements can); the reference model
    # wraps, and so do we.
    x = call.inputs[0].astype(INT64) - p["in_zp"]
    acc = _pool_taps(x, kernel, stride, pad, out_hw, np.zeros(shape, INT64), np.add)
    acc = wrap(acc, "INT32")
    out = apply_scale_32(acc, p["multiplier"], p["shift"], double_round=False) + p["out_zp"]
    lo, hi = int_range(dt)
    return clip_ufunc(out, lo, hi).astype(dtype_info(dt).working)


@register("MAX_POOL2D")
def max_pool2d(call: OpCall) -> list[np.ndarray]:
    """MAX_POOL2D: maximum over each window's in-range values, with the NaN mode for floats."""
    call.check_arity(1, 1)
    return _max_pool(call, _pool_attrs(call))


@register("MAX_POOL2D_ADAPTIVE", operands=("input", "kernel", "stride", "pad"), int16=True)
def max_pool2d_adaptive(call: OpCall) -> list[np.ndarray]:
    """MAX_POOL2D_ADAPTIVE (TOSA 1.1): MAX_POOL2D with kernel [2], stride [2], pad [4] inputs."""
    call.check_arity(4, 1)
    return _max_pool(call, _pool_shape_inputs(call, 1))


@register_prepare("MAX_POOL2D")
def prepare_max_pool2d(call: OpCall):
    """MAX_POOL2D on a small tensor: checks once, one gather per run (see ``_pool_small``)."""
    call.check_arity(1, 1)
    dt, kernel, stride, pad = _max_pool_checks(call, _pool_attrs(call))
    if _is_float(dt):
        if dt not in ("FP32", "FP16"):
            return None
        mode = call.attrs.get("nan_mode", "PROPAGATE")
        return small_float_max_pool(kernel, stride, pad, tuple(call.input_decls[0].shape), call.out_shape()[1:3],
                                    dt, "IGNORE" if mode == "IGNORE" else "PROPAGATE")
    return small_max_pool(kernel, stride, pad, tuple(call.input_decls[0].shape), call.out_shape()[1:3], dt)


def _max_pool_checks(call: OpCall, window: tuple[list[int], list[int], list[int]]):
    """The ERROR_IFs of MAX_POOL2D: (in_out_t, kernel, stride, pad)."""
    dt = call.in_dtype(0)
    call.error_if(call.out_dtype() != dt, "output element type != in_out_t")
    if dt not in MAX_TYPES:
        call.fail(f"unsupported in_out_t {dt}")
    return (dt, *_check_pool(call, *window))


@_quiet
def _max_pool(call: OpCall, window: tuple[list[int], list[int], list[int]]) -> list[np.ndarray]:
    dt, kernel, stride, pad = _max_pool_checks(call, window)
    n, oh, ow, c = call.out_shape()
    x = call.inputs[0]
    if not _is_float(dt):
        init = np.full((n, oh, ow, c), int_range(dt)[0], dtype=x.dtype)
        return [_pool_taps(x, kernel, stride, pad, (oh, ow), init, np.maximum)]
    # float32 holds every fp8/fp16/bf16 value exactly, so max in float32 is exact. The spec's
    # apply_max_s(acc, value) is "acc >= value ? acc : value", so a tie (e.g. -0.0 vs +0.0)
    # keeps the earlier value in (ky, kx) scan order; np.maximum/np.fmax do not promise that.
    if call.attrs.get("nan_mode", "PROPAGATE") == "IGNORE":
        # acc starts as NaN and a NaN operand is ignored, so an all-NaN window stays NaN
        init = np.full((n, oh, ow, c), np.nan, np.float32)

        def combine(acc: np.ndarray, value: np.ndarray) -> np.ndarray:
            return np.where((acc >= value) | np.isnan(value), acc, value)
    else:
        # PROPAGATE: a NaN on either side wins
        init = np.full((n, oh, ow, c), -np.inf, np.float32)

        def combine(acc: np.ndarray, value: np.ndarray) -> np.ndarray:
            return np.where((acc >= value) | np.isnan(acc), acc, value)

    acc = _pool_taps(x.astype(np.float32), kernel, stride, pad, (oh, ow), init, combine)
    return [acc.astype(dtype_info(dt).working)]


# --------------------------------------------------------------------------------------------
# ARGMAX
# --------------------------------------------------------------------------------------------


@register("ARGMAX")
@_quiet
def argmax(call: OpCall) -> list[np.ndarray]:
    """ARGMAX: index of the first maximum along ``axis`` (NaN handling per ``nan_mode``)."""
    call.check_arity(1, 1)
    dt = call.in_dtype(0)
    out_t = call.out_dtype()
    # TOSA 1.1 (EXT-INT64): an i64_t result for every in_t, and i32_t / i64_t inputs with it
    if out_t not in ("INT32", *int64_if_11(call)):
        call.fail(f"out_t {out_t} is not i32_t")
    allowed = (*MAX_TYPES, "INT32", "INT64") if out_t == "INT64" else MAX_TYPES
    if dt not in allowed:
        call.fail(f"unsupported in_t {dt} (with out_t {out_t})")
    shape1 = tuple(call.input_decls[0].shape)
    axis = int(call.attrs.get("axis", 0))
    if len(shape1) < 1 or len(shape1) > MAX_RANK:
        call.fail(f"rank(input) not in [1, MAX_RANK={MAX_RANK}]")
    call.error_if(axis < 0 or axis >= len(shape1), "axis < 0 || axis >= rank(shape1)")
    call.error_if(
        tuple(call.out_shape()) != shape1[:axis] + shape1[axis + 1 :],
        "flatten(left_shape, right_shape) != shape",
    )
    x = call.inputs[0]
    if not _is_float(dt):
        index = np.argmax(x, axis=axis)
    elif call.attrs.get("nan_mode", "PROPAGATE") == "IGNORE":
        # NaNs never win; the first position equal to the non-NaN maximum wins (index 0 when all
        # values are NaN). Comparing with == also treats -0.0 and +0.0 as equal, as required.
        xf = x.astype(np.float32)
        nan = np.isnan(xf)
        best = np.max(np.where(nan, -np.inf, xf), axis=axis, keepdims=True)
        index = np.argmax(~nan & (xf == best), axis=axis)
    else:
        # PROPAGATE: NaN compares greater than everything; np.argmax returns the first NaN, else
        # the first maximum (ties, including -0.0 == +0.0, keep the earlier index).
        index = np.argmax(x.astype(np.float32), axis=axis)
    return [np.asarray(index, dtype=dtype_info(out_t).working)]


# --------------------------------------------------------------------------------------------
# FFT2D / RFFT2D (EXT-FFT)
# --------------------------------------------------------------------------------------------


def _power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


def _check_fft_tensors(call: OpCall) -> None:
    """The ERROR_IFs FFT2D and RFFT2D share: every input and output fp32_t of rank 3."""
    for decl in (*call.input_decls, *call.output_decls):
        if decl.dtype != "FP32":
            call.fail(f"{decl.name} element type {decl.dtype} != fp32_t")
        _check_rank(call, decl.shape, 3, decl.name)


@register(
    "FFT2D", compliance=DOT_PRODUCT, kernel_size=input_dims(0, (1, 2), rank=3, factor=2), extensions=("EXT-FFT",),
)
@_quiet
def fft2d(call: OpCall) -> list[np.ndarray]:
    """FFT2D: unnormalized complex 2D DFT of [N,H,W] (inverse: positive exponent)."""
    call.check_arity(2, 2)
    _check_fft_tensors(call)
    shape = tuple(call.input_decls[0].shape)
    call.error_if(
        tuple(call.input_decls[1].shape) != shape, "shape(input_imag) != shape(input_real)"
    )
    for i in range(2):
        if tuple(call.out_shape(i)) != shape:
            call.fail(f"shape(output {i}) != [N,H,W]")
    _, h, w = shape
    call.error_if(not _power_of_two(h), "!power_of_two(H)")
    call.error_if(not _power_of_two(w), "!power_of_two(W)")
    _level(call, [h, w], MAX_KERNEL, "H or W")
    x = call.inputs[0].astype(F64) + 1j * call.inputs[1].astype(F64)
    if call.attrs.get("inverse", False):
        y = np.fft.ifft2(x, axes=(1, 2), norm="forward")  # "forward" norm: the inverse is unscaled
    else:
        y = np.fft.fft2(x, axes=(1, 2))
    return [y.real.astype(np.float32), y.imag.astype(np.float32)]


@register(
    "RFFT2D", compliance=DOT_PRODUCT, kernel_size=input_dims(0, (1, 2), rank=3), extensions=("EXT-FFT",),
)
@_quiet
def rfft2d(call: OpCall) -> list[np.ndarray]:
    """RFFT2D: unnormalized 2D DFT of real [N,H,W], first W/2+1 columns."""
    call.check_arity(1, 2)
    _check_fft_tensors(call)
    n, h, w = call.input_decls[0].shape
    for i in range(2):
        if tuple(call.out_shape(i)) != (n, h, w // 2 + 1):
            call.fail(f"shape(output {i}) != [N,H,W/2 + 1]")
    call.error_if(not _power_of_two(h), "!power_of_two(H)")
    call.error_if(not _power_of_two(w), "!power_of_two(W)")
    _level(call, [h, w], MAX_KERNEL, "H or W")
    y = np.fft.rfft2(call.inputs[0].astype(F64), axes=(1, 2))
    imag = y.imag.copy()
    # The spec sums no imaginary terms at rows {0, H/2} x columns {0, W/2}: those must be exactly 0.
    rows, cols = sorted({0, h // 2}), sorted({0, w // 2})
    imag[np.ix_(range(n), rows, cols)] = 0.0
    return [y.real.astype(np.float32), imag.astype(np.float32)]
