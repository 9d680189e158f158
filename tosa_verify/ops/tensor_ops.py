"""Tensor operators (spec chapter "Tensor Operators"): ARGMAX, AVG_POOL2D, CONV2D, CONV3D,
DEPTHWISE_CONV2D, FFT2D, MATMUL, MAX_POOL2D, RFFT2D, TRANSPOSE_CONV2D, and from the TOSA 1.1
draft AVG_POOL2D_ADAPTIVE, MAX_POOL2D_ADAPTIVE, MATMUL_T, MATMUL_T_BLOCK_SCALED and
CONV2D_BLOCK_SCALED.

Integer dot products (convolutions, MATMUL, AVG_POOL2D sums) are exact: zero points are
subtracted in int64, then the products are summed in the cheapest numpy dtype that a bound
proves exact (see :func:`_exact_dtype`). Floating-point dot products are computed in float64 and
rounded once to the output dtype: the "Dot product accuracy requirements" compare against an
fp64 reference, and fp64 accumulation is at least as precise as any ``acc_type`` the spec allows.

Integer accumulator overflow is a REQUIRE in the spec (``apply_add_s``); there we mirror the
reference model, which wraps INT32 results (two's complement) and saturates INT48 results.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import numpy as np

from ..dtypes import dtype_info, float_values
from ..numerics import apply_scale_32, int_range, reciprocal_scale, saturate, wrap
from ._layout_support import shape_input
from ._levels import MAX_KERNEL, MAX_RANK, MAX_STRIDE
from ._mx import MX_ELEMENT_TYPES, SCALE_TYPE, block_size, expand_scales, scale_shape
from .registry import OpCall, register, register_prepare

INT64 = np.int64
F64 = np.float64


#: Supported (in_t, weight_t, out_t, acc_t) of CONV2D, CONV3D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D.
CONV_TYPES = (
    ("INT8", "INT8", "INT32", "INT32"),  # PRO-INT
    ("INT8", "INT4", "INT32", "INT32"),  # EXT-INT4
    ("INT16", "INT8", "INT48", "INT48"),  # EXT-INT16
    ("FP8E4M3", "FP8E4M3", "FP16", "FP16"),  # EXT-FP8E4M3
    ("FP8E5M2", "FP8E5M2", "FP16", "FP16"),  # EXT-FP8E5M2
    ("FP16", "FP16", "FP16", "FP16"),  # PRO-FP
    ("FP16", "FP16", "FP16", "FP32"),  # PRO-FP
    ("BF16", "BF16", "BF16", "FP32"),  # EXT-BF16
    ("FP32", "FP32", "FP32", "FP32"),  # PRO-FP
)

#: Supported (in_t, out_t) of MATMUL.
MATMUL_TYPES = (
    ("INT8", "INT32"),
    ("INT16", "INT48"),
    ("FP8E4M3", "FP16"),
    ("FP8E5M2", "FP16"),
    ("FP16", "FP16"),
    ("FP16", "FP32"),
    ("BF16", "FP32"),
    ("FP32", "FP32"),
)

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
# Shared helpers
# --------------------------------------------------------------------------------------------


def _quiet(fn):
    """Run ``fn`` with numpy floating-point warnings off: inf/NaN data is legitimate input."""

    @functools.wraps(fn)
    def wrapper(call: OpCall, *args) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return fn(call, *args)

    return wrapper


def _level(call: OpCall, values: Sequence[int], limit: int, what: str) -> None:
    """Level 8K LEVEL_CHECK(value <= limit) for each of ``values``."""
    call.error_if(any(v > limit for v in values), f"level 8K: {what} > {limit}")


#: GEMMs below this many multiply-adds run on one BLAS thread (see :func:`_gemm`).
SMALL_GEMM = 1 << 26
#: ... and below this many OpenBLAS uses one thread by itself (its SMP threshold, 65536 times
#: GEMM_MULTITHREAD_THRESHOLD 4), so limiting its threads would only cost time.
TINY_GEMM = 1 << 18
_BLAS_CONTROLLER: list = []  # lazily created threadpoolctl.ThreadpoolController (or None)


def _blas_controller():
    if not _BLAS_CONTROLLER:
        try:
            import threadpoolctl

            _BLAS_CONTROLLER.append(threadpoolctl.ThreadpoolController())
        except Exception:  # noqa: BLE001 - optional: without it BLAS keeps its own threading
            _BLAS_CONTROLLER.append(None)
    return _BLAS_CONTROLLER[0]


def _gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``; small products run on a single BLAS thread.

    Network layers are many small GEMMs (MobileNetV2's largest is ~20M multiply-adds), where
    OpenBLAS threads gain little and, on a busy machine, spin-wait so badly that a layer can run
    ten times slower. Big products keep BLAS's default threading.
    """
    macs = a.size * b.shape[-1]  # multiply-adds of a @ b
    controller = _blas_controller() if a.dtype.kind == "f" and macs >= TINY_GEMM else None
    if controller is None or macs >= SMALL_GEMM:
        return np.matmul(a, b)
    with controller.limit(limits=1, user_api="blas"):
        return np.matmul(a, b)


def _is_float(dtype: str) -> bool:
    return dtype_info(dtype).is_float


def _ints(call: OpCall, name: str, length: int) -> list[int]:
    """An integer-list attribute of exactly ``length`` entries (ERROR_IF otherwise)."""
    value = call.attrs.get(name)
    call.error_if(value is None, f"missing attribute {name}")
    value = [int(v) for v in value]
    call.error_if(len(value) != length, f"length({name}) != {length}")
    return value


def _check_rank(call: OpCall, shape: Sequence[int], rank: int, what: str) -> None:
    call.error_if(len(shape) != rank, f"rank({what}) != {rank}")


def _zero_point(call: OpCall, i: int, dtype: str, what: str) -> int | float:
    """The scalar value of zero-point input ``i`` (shape [1], element type ``dtype``)."""
    decl = call.input_decls[i]
    call.error_if(decl.dtype != dtype, f"{what} element type {decl.dtype} != {dtype}")
    call.error_if(tuple(decl.shape) != (1,), f"shape({what}) != [1]")
    value = call.inputs[i].reshape(-1)[0]
    return float(value) if _is_float(dtype) else int(value)


def _check_zero_point(call: OpCall, zp: int | float, dtype: str, what: str) -> None:
    """Spec: ``ERROR_IF(!is_same<t, i8_t>() && zp != 0)`` (a NaN zero point is also not 0)."""
    call.error_if(dtype != "INT8" and not zp == 0, f"!is_same<{dtype}, i8_t>() && {what} != 0")


def _exact_dtype(terms: int, max_a: int, max_b: int) -> tuple[type, int]:
    """The numpy dtype in which a sum of ``terms`` integer products is computed exactly, and the
    bound on |sum| that justifies it.

    Every partial sum of ``sum_k a_k * b_k`` (in any order, with or without FMA) is bounded by
    ``sum_k |a_k| |b_k| <= terms * max|a| * max|b|``. When that bound is below 2**24 every
    partial sum is an integer exactly representable in float32, below 2**53 in float64, so BLAS
    returns the exact integer result whatever its blocking and summation order. Otherwise we fall
    back to int64, which holds every intermediate the spec allows (int16 x int16 products times
    any realistic kernel size stay far below 2**63).
    """
    bound = terms * max_a * max_b
    if bound < 1 << 24:
        return np.float32, bound
    if bound < 1 << 53:
        return F64, bound
    return INT64, bound


def _finish_int(acc: np.ndarray, bias: np.ndarray, out_dtype: str, bound: int) -> np.ndarray:
    """``out = static_cast<out_t>(acc); out = apply_add_s<out_t>(out, bias)`` for INT32/INT48.

    ``acc`` holds exact integers with ``|acc| <= bound``. Overflow is a REQUIRE in the spec; the
    reference model wraps INT32 and saturates INT48, and we do the same so our outputs stay
    bit-exact with it.
    """
    working = dtype_info(out_dtype).working
    lo, hi = int_range(out_dtype)
    total = bound + (max(abs(int(bias.max())), abs(int(bias.min()))) if bias.size else 0)
    exact = {np.dtype(np.float32): 1 << 24, np.dtype(F64): 1 << 53}.get(acc.dtype, 1 << 62)
    if total < exact and total <= hi:
        # acc + bias is exact in acc's dtype and cannot leave out_t's range: no int64 detour
        # (in place: every caller passes a fresh accumulator it does not use afterwards)
        acc += bias.astype(acc.dtype)
        return acc.astype(working)
    out = acc.astype(INT64)
    out += bias.astype(INT64)
    if out.size and (int(out.min()) < lo or int(out.max()) > hi):
        out = wrap(out, out_dtype) if out_dtype == "INT32" else saturate(out, out_dtype)
    return out.astype(working)


def _finish_float(acc: np.ndarray, bias: np.ndarray, out_dtype: str) -> np.ndarray:
    """Add the bias in float64 and round once to the output dtype."""
    return (acc + bias.astype(F64)).astype(dtype_info(out_dtype).working)


def _out_size(call: OpCall, out: int, numerator: int, stride: int, what: str) -> None:
    """``ERROR_IF(out != idiv_check(numerator, stride) + 1)``, idiv_check included."""
    call.error_if(
        numerator % stride != 0,
        f"idiv_check: ({what} numerator {numerator}) % stride {stride} != 0",
    )
    call.error_if(out != numerator // stride + 1, f"O{what} != idiv_check(..., stride) + 1")


def _tap_ranges(
    tap: int, dilation: int, stride: int, pad_before: int, in_size: int, out_size: int
) -> tuple[slice, slice] | None:
    """For one kernel tap along one axis: (output slice, input slice) of in-range positions.

    Output position ``o`` reads input ``i = o * stride - pad_before + tap * dilation``; only
    ``0 <= i < in_size`` contributes (the spec skips multiplies in the padding area).
    """
    offset = tap * dilation - pad_before
    # lo: the smallest o with i >= 0; hi: one past the largest o with i < in_size
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    hi = min(out_size, (in_size - 1 - offset) // stride + 1)
    if hi <= lo:
        return None
    start = lo * stride + offset
    return slice(lo, hi), slice(start, start + (hi - lo - 1) * stride + 1, stride)


def _conv_taps(
    x: np.ndarray,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    pad_before: Sequence[int],
    out_spatial: Sequence[int],
    acc: np.ndarray,
    contribute,
) -> np.ndarray:
    """Accumulate a direct convolution one kernel tap at a time into ``acc``.

    ``x`` is ``[N, *spatial, C]``; for each tap ``contribute(x_region, tap)`` returns the
    products for the output region whose reads are in range, which is added to
    ``acc[N, *region, ...]``. Padding positions are simply not visited.
    """
    in_spatial = x.shape[1:-1]
    for tap in itertools.product(*(range(k) for k in kernel)):
        ranges = [
            _tap_ranges(t, d, s, p, i, o)
            for t, d, s, p, i, o in zip(
                tap, dilation, stride, pad_before, in_spatial, out_spatial, strict=True
            )
        ]
        if any(r is None for r in ranges):
            continue
        out_idx = (slice(None), *(r[0] for r in ranges))
        in_idx = (slice(None), *(r[1] for r in ranges))
        acc[out_idx] += contribute(x[in_idx], tap)
    return acc


def _shifted(values: np.ndarray, zp: int) -> tuple[np.ndarray, int]:
    """``values - zp`` as int64 (apply_sub_s<acc_t> cannot overflow: |v - zp| <= 2**16) and its
    max |.|, found from the extremes of ``values`` without a pass over the shifted copy."""
    shifted = values.astype(INT64)
    if zp:
        shifted -= zp
    if values.size == 0:
        return shifted, 0
    return shifted, max(abs(int(values.max()) - zp), abs(int(values.min()) - zp))


def _conv_operands(call: OpCall, in_dtype: str, w_dtype: str, weight: np.ndarray, terms: int):
    """Zero-point-shifted input and weight in a compute dtype that keeps the sums exact."""
    x = call.inputs[0]
    if _is_float(in_dtype):
        return x.astype(F64), weight.astype(F64), F64, 0
    x_zp, w_zp = _zero_point(call, 3, in_dtype, "input_zp"), _zero_point(call, 4, w_dtype, "weight_zp")
    x_max, w_max = _shifted_max(x, x_zp), _shifted_max(weight, w_zp)
    dt, bound = _exact_dtype(terms, x_max, w_max)
    return _shift_to(x, x_zp, dt), _shift_to(weight, w_zp, dt), dt, bound


def _shifted_max(values: np.ndarray, zp: int) -> int:
    """max |values - zp|, from the extremes of ``values`` (no pass over a shifted copy)."""
    if values.size == 0:
        return 0
    return max(abs(int(values.max()) - zp), abs(int(values.min()) - zp))


def _shift_to(values: np.ndarray, zp: int, dt: type) -> np.ndarray:
    """``values - zp`` in ``dt``: one conversion, then the subtraction in place. Exact: the
    operands are int8/int16 (or int4) values and zero points, so |v - zp| <= 2**16, which
    float32, float64 and int64 all hold."""
    if not zp:
        return values.astype(dt)
    return np.subtract(values, dt(zp), dtype=dt)  # one pass; computed in dt, so no int8 wrap


#: Integer convolutions with at most this many products per output (taps * IC) and at most
#: _IM2COL_MAX patch elements run as one GEMM over gathered patches (see :func:`_patches`).
_IM2COL_MAX_K = 256
_IM2COL_MAX = 1 << 26
#: Output elements per block of :func:`_depthwise_blocked` (its working set stays in cache).
_DEPTHWISE_BLOCK = 1 << 15


def _zero_padded(x: np.ndarray, pad: Sequence[int]) -> np.ndarray:
    """``x`` ([N, *spatial, C], zero point already subtracted) with explicit zero padding.

    Integer paths only: the spec skips padded positions, and a zero-point-shifted zero
    contributes an exact 0 to an integer sum, so the results agree. (In floating point a
    skipped position and ``0 * w`` differ when w is infinite or NaN.)
    """
    if not any(pad):
        return x
    widths = [(0, 0), *zip(pad[0::2], pad[1::2], strict=True), (0, 0)]
    return np.pad(x, widths)


def _tap_slice(tap: int, dilation: int, stride: int, out: int, start: int = 0, stop: int | None = None) -> slice:
    """Input positions read by kernel tap ``tap`` for outputs ``start .. stop`` (padded input)."""
    stop = out if stop is None else stop
    first = start * stride + tap * dilation
    return slice(first, first + (stop - start - 1) * stride + 1, stride)


def _patches(xp: np.ndarray, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
             out_spatial: Sequence[int]) -> np.ndarray:
    """im2col: ``[N, *out, taps * C]`` with taps in ``itertools.product`` order, C fastest."""
    n, c = xp.shape[0], xp.shape[-1]
    taps = list(itertools.product(*(range(k) for k in kernel)))
    out = np.empty((n, *out_spatial, len(taps), c), dtype=xp.dtype)
    for i, tap in enumerate(taps):
        idx = (slice(None), *(_tap_slice(t, d, s, o) for t, d, s, o in
                              zip(tap, dilation, stride, out_spatial, strict=True)))
        out[..., i, :] = xp[idx]
    return out.reshape(n, *out_spatial, len(taps) * c)


def _depthwise_blocked(xp: np.ndarray, w: np.ndarray, stride: Sequence[int], dilation: Sequence[int],
                       out_hw: Sequence[int], dt: type) -> np.ndarray:
    """Integer DEPTHWISE_CONV2D sums ``[N, OH, OW, C, M]`` in ``dt`` (exact, see
    :func:`_exact_dtype`) of the zero-point-shifted, zero-padded input ``xp`` (padding as zeros
    is exact for integer sums, see :func:`_zero_padded`), block of output rows by block: every
    tap's multiply and add for a block run while the block is in cache, instead of one pass over
    the whole output per tap.

    The input is split into ``stride_x`` column phases (contiguous copies), so that each tap
    reads whole output rows as one contiguous run of ``OW * C`` values; multiplied by the tap's
    weights tiled along the row, numpy's inner loops then span a row, not one pixel's C values.
    """
    n, c = xp.shape[0], xp.shape[-1]
    kh, kw, _, m = w.shape
    oh, ow = out_hw
    sy, sx = stride
    dy, dx = dilation
    if m != 1:
        acc = np.empty((n, oh, ow, c, m), dtype=dt)
        for ky, kx in itertools.product(range(kh), range(kw)):
            region = xp[:, _tap_slice(ky, dy, sy, oh), _tap_slice(kx, dx, sx, ow), :, None] * w[ky, kx]
            if ky == 0 and kx == 0:
                acc[...] = region
            else:
                acc += region
        return acc
    phases = [np.ascontiguousarray(xp[:, :, p::sx]) for p in range(sx)] if sx > 1 else [xp]
    # tap kx reads padded column ox * sx + kx * dx: phase (kx * dx) % sx, offset (kx * dx) // sx
    where = [((kx * dx) % sx, (kx * dx) // sx) for kx in range(kw)]
    tiled = np.tile(w[:, :, :, 0], (1, 1, ow))  # [KH, KW, OW * C]
    row = ow * c
    acc = np.empty((n, oh, row), dtype=dt)
    rows = max(1, _DEPTHWISE_BLOCK // row)
    scratch = np.empty((min(rows, oh), row), dtype=dt)
    for b in range(n):
        for y0 in range(0, oh, rows):
            y1 = min(oh, y0 + rows)
            block, tmp = acc[b, y0:y1], scratch[: y1 - y0]
            for ky in range(kh):
                ys = _tap_slice(ky, dy, sy, oh, y0, y1)
                for kx in range(kw):
                    phase, offset = where[kx]
                    region = phases[phase][b, ys, offset:offset + ow].reshape(y1 - y0, row)
                    if ky == 0 and kx == 0:
                        np.multiply(region, tiled[0, 0], out=block)
                    else:
                        np.multiply(region, tiled[ky, kx], out=tmp)
                        block += tmp
    return acc.reshape(n, oh, ow, c, 1)


def _check_conv_common(
    call: OpCall, spatial_rank: int, weight_rank: int
) -> tuple[str, str, str, str]:
    """Arity, ranks, type signature, zero points and bias shape shared by all convolutions."""
    call.check_arity(5, 1)
    in_dt, w_dt, out_dt = call.in_dtype(0), call.in_dtype(1), call.out_dtype()
    acc_dt = call.attrs.get("acc_type")
    sig = (in_dt, w_dt, out_dt, acc_dt)
    call.error_if(sig not in CONV_TYPES, f"unsupported (in_t, weight_t, out_t, acc_t) {sig}")
    call.error_if(call.in_dtype(2) != out_dt, "bias element type != out_t")
    _check_rank(call, call.input_decls[0].shape, spatial_rank + 2, "input")
    _check_rank(call, call.input_decls[1].shape, weight_rank, "weight")
    _check_rank(call, call.input_decls[2].shape, 1, "bias")
    _check_rank(call, call.out_shape(), spatial_rank + 2, "output")
    izp = _zero_point(call, 3, in_dt, "input_zp")
    wzp = _zero_point(call, 4, w_dt, "weight_zp")
    _check_zero_point(call, izp, in_dt, "input_zp")
    _check_zero_point(call, wzp, w_dt, "weight_zp")
    return in_dt, w_dt, out_dt, acc_dt


def _check_bias(call: OpCall, channels: int, index: int = 2) -> np.ndarray:
    """``ERROR_IF(BC != OC && BC != 1)``; returns bias input ``index`` broadcast to ``channels``."""
    bc = call.input_decls[index].shape[0]
    call.error_if(bc != channels and bc != 1, f"BC != OC && BC != 1 (BC={bc}, OC={channels})")
    return np.broadcast_to(call.inputs[index].reshape(-1), (channels,))


# --------------------------------------------------------------------------------------------
# Convolutions
# --------------------------------------------------------------------------------------------


def _check_conv_geometry(
    call: OpCall, weight: int, pad: list[int], stride: list[int], dilation: list[int]
) -> tuple[list[int], list[int]]:
    """Pad / stride / dilation ERROR_IFs, level checks and output size of a convolution whose
    input is operand 0 and weight ``[OC, *K, IC]`` operand ``weight``; returns (kernel, out
    spatial sizes)."""
    in_shape, w_shape, out_shape = (
        call.input_decls[0].shape,
        call.input_decls[weight].shape,
        call.out_shape(),
    )
    spatial_rank = len(in_shape) - 2
    n, *in_spatial, ic = in_shape
    oc, *kernel, wic = w_shape
    on, *out_spatial, ooc = out_shape
    call.error_if(any(p < 0 for p in pad), "pad < 0")
    call.error_if(any(s < 1 for s in stride), "stride < 1")
    call.error_if(any(d < 1 for d in dilation), "dilation < 1")
    call.error_if(on != n, "output batch != input batch")
    call.error_if(wic != ic, "weight IC != input IC")
    call.error_if(ooc != oc, "output OC != weight OC")
    _level(
        call,
        [k * d for k, d in zip(kernel, dilation, strict=True)],
        MAX_KERNEL,
        "dilation * kernel",
    )
    _level(call, pad, MAX_KERNEL, "pad")
    _level(call, stride, MAX_STRIDE, "stride")
    names = ("D", "H", "W")[-spatial_rank:]
    for i in range(spatial_rank):
        numerator = in_spatial[i] - 1 + pad[2 * i] + pad[2 * i + 1] - (kernel[i] - 1) * dilation[i]
        _out_size(call, out_spatial[i], numerator, stride[i], names[i])
    return kernel, out_spatial


def _conv_sums(x: np.ndarray, w_taps: np.ndarray, dt, kernel, stride, dilation, pad, out_spatial,
               integer: bool) -> np.ndarray:
    """Direct convolution sums of ``x`` [N, *S, IC] with weight taps ``w_taps`` [*K, IC, OC], in
    dtype ``dt`` (``integer``: integer operands, so the one-GEMM im2col form is exact too)."""
    n, ic, oc = x.shape[0], x.shape[-1], w_taps.shape[-1]
    if all(k == 1 for k in kernel) and not any(pad):
        # pointwise: one GEMM over the strided input, no accumulator to zero and add into
        region = x[(slice(None), *(slice(None, o * st, st) for o, st in zip(out_spatial, stride, strict=True)))]
        return _gemm(region.reshape(-1, ic), w_taps.reshape(ic, oc)).reshape(n, *out_spatial, oc)
    taps = int(np.prod(kernel))
    if integer and taps * ic <= _IM2COL_MAX_K and n * int(np.prod(out_spatial)) * taps * ic <= _IM2COL_MAX:
        # few input channels: one GEMM over all taps (K = taps * IC) instead of one thin GEMM
        # per tap, each added into the accumulator
        patches = _patches(_zero_padded(x, pad), kernel, stride, dilation, out_spatial)
        return _gemm(patches.reshape(-1, taps * ic), w_taps.reshape(taps * ic, oc)).reshape(n, *out_spatial, oc)
    acc = np.zeros((n, *out_spatial, oc), dtype=dt)

    def contribute(region: np.ndarray, tap: tuple[int, ...]) -> np.ndarray:
        rows = _gemm(region.reshape(-1, ic), w_taps[tap])
        return rows.reshape(*region.shape[:-1], oc)

    return _conv_taps(x, kernel, stride, dilation, pad[0::2], out_spatial, acc, contribute)


def _conv_accumulate(x: np.ndarray, w: np.ndarray, dt, kernel, stride, dilation, pad, out_spatial,
                     integer: bool = False) -> np.ndarray:
    """Direct convolution sums of ``x`` [N, *S, IC] and ``w`` [OC, *K, IC], in dtype ``dt``."""
    # [OC, *K, IC] -> [*K, IC, OC]: one [IC, OC] matrix per kernel tap
    w_taps = np.ascontiguousarray(np.moveaxis(w, 0, -1))
    return _conv_sums(x, w_taps, dt, kernel, stride, dilation, pad, out_spatial, integer)


def _conv_nd(call: OpCall, spatial_rank: int) -> list[np.ndarray]:
    """CONV2D (spatial_rank 2) and CONV3D (3): weight ``[OC, *K, IC]``, NHWC / NDHWC layout."""
    return [_conv_run(call, _conv_setup(call, spatial_rank))]


def _conv_setup(call: OpCall, spatial_rank: int) -> dict:
    """Every ERROR_IF of CONV2D/CONV3D; the static parameters :func:`_conv_run` computes with."""
    in_dt, w_dt, out_dt, _ = _check_conv_common(call, spatial_rank, spatial_rank + 2)
    pad = _ints(call, "pad", 2 * spatial_rank)
    stride = _ints(call, "stride", spatial_rank)
    dilation = _ints(call, "dilation", spatial_rank)
    kernel, out_spatial = _check_conv_geometry(call, 1, pad, stride, dilation)
    n, ic, oc = call.input_decls[0].shape[0], call.input_decls[0].shape[-1], call.input_decls[1].shape[0]
    bias = _check_bias(call, oc)
    return {"in_dt": in_dt, "w_dt": w_dt, "out_dt": out_dt, "pad": pad, "stride": stride,
            "dilation": dilation, "n": n, "ic": ic, "oc": oc, "kernel": kernel,
            "out_spatial": out_spatial, "bias": bias, "terms": int(np.prod(kernel)) * ic}


def _conv_run(call: OpCall, p: dict, weights: dict | None = None) -> np.ndarray:
    """The convolution itself; ``weights`` caches the weight taps by compute dtype (prepared)."""
    if weights is None:
        x, w, dt, bound = _conv_operands(call, p["in_dt"], p["w_dt"], call.inputs[1], p["terms"])
        # [OC, *K, IC] -> [*K, IC, OC]: one [IC, OC] matrix per kernel tap
        w_taps = np.ascontiguousarray(np.moveaxis(w, 0, -1))
    else:
        x, dt, bound = _conv_input(call, p, weights)
        w_taps = weights[dt]
    acc = _conv_sums(x, w_taps, dt, p["kernel"], p["stride"], p["dilation"], p["pad"], p["out_spatial"],
                     integer=not _is_float(p["in_dt"]))
    if _is_float(p["out_dt"]):
        return _finish_float(acc, p["bias"], p["out_dt"])
    return _finish_int(acc, p["bias"], p["out_dt"], bound)


def _conv_input(call: OpCall, p: dict, weights: dict) -> tuple[np.ndarray, type, int]:
    """The input operand of a prepared convolution, in the dtype :func:`_conv_operands` picks."""
    x = call.inputs[0]
    if weights["float"]:
        return x.astype(F64), F64, 0
    xs, x_max = _shifted(x, weights["izp"])
    dt, bound = _exact_dtype(p["terms"], x_max, weights["w_max"])
    if dt not in weights:
        weights[dt] = np.ascontiguousarray(np.moveaxis(weights["shifted"].astype(dt), 0, -1))
    return xs.astype(dt, copy=False), dt, bound


@register_prepare("CONV2D", "CONV3D")
def prepare_conv(call: OpCall):
    """CONV2D/CONV3D with constant weight, bias and zero points: checks once, weights converted once."""
    if len(call.inputs) != 5 or any(v is None for v in call.inputs[1:]):
        return None
    p = _conv_setup(call, 3 if call.op == "CONV3D" else 2)
    weights: dict = {"float": _is_float(p["in_dt"])}
    if weights["float"]:
        weights[F64] = np.ascontiguousarray(np.moveaxis(call.inputs[1].astype(F64), 0, -1))
    else:
        weights["izp"] = _zero_point(call, 3, p["in_dt"], "input_zp")
        weights["shifted"], weights["w_max"] = _shifted(
            call.inputs[1], _zero_point(call, 4, p["w_dt"], "weight_zp"))
    return _quiet(lambda run: [_conv_run(run, p, weights)])


@register("CONV2D")
@_quiet
def conv2d(call: OpCall) -> list[np.ndarray]:
    """CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], bias [BC] -> [N,OH,OW,OC]."""
    return _conv_nd(call, 2)


@register("CONV3D")
@_quiet
def conv3d(call: OpCall) -> list[np.ndarray]:
    """CONV3D: input [N,ID,IH,IW,IC], weight [OC,KD,KH,KW,IC], bias [BC] -> [N,OD,OH,OW,OC]."""
    return _conv_nd(call, 3)


@register("DEPTHWISE_CONV2D")
@_quiet
def depthwise_conv2d(call: OpCall) -> list[np.ndarray]:
    """DEPTHWISE_CONV2D: input [N,IH,IW,C], weight [KH,KW,C,M], bias [BC] -> [N,OH,OW,C*M]."""
    in_dt, w_dt, out_dt, _ = _check_conv_common(call, 2, 4)
    pad = _ints(call, "pad", 4)
    stride = _ints(call, "stride", 2)
    dilation = _ints(call, "dilation", 2)
    n, ih, iw, c = call.input_decls[0].shape
    kh, kw, wc, m = call.input_decls[1].shape
    on, oh, ow, oc = call.out_shape()
    call.error_if(
        any(p < 0 for p in pad), "pad_top < 0 || pad_bottom < 0 || pad_left < 0 || pad_right < 0"
    )
    call.error_if(stride[0] < 1 or stride[1] < 1, "stride_y < 1 || stride_x < 1")
    call.error_if(dilation[0] < 1 or dilation[1] < 1, "dilation_y < 1 || dilation_x < 1")
    call.error_if(on != n, "output batch != input batch")
    call.error_if(wc != c, "weight C != input C")
    call.error_if(oc != c * m, "output channels != C * M")
    _level(call, [dilation[0] * kh, dilation[1] * kw, *pad], MAX_KERNEL, "dilation * kernel or pad")
    _level(call, stride, MAX_STRIDE, "stride")
    _out_size(call, oh, ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0], stride[0], "H")
    _out_size(call, ow, iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1], stride[1], "W")
    bias = _check_bias(call, c * m)

    if not _is_float(in_dt):
        x_zp, w_zp = _zero_point(call, 3, in_dt, "input_zp"), _zero_point(call, 4, w_dt, "weight_zp")
        dt, bound = _exact_dtype(kh * kw, _shifted_max(call.inputs[0], x_zp), _shifted_max(call.inputs[1], w_zp))
        # the shifted input is written straight into its zero-padded buffer (one pass, no copy)
        xp = np.zeros((n, ih + pad[0] + pad[1], iw + pad[2] + pad[3], c), dtype=dt)
        np.subtract(call.inputs[0], dt(x_zp), out=xp[:, pad[0]:pad[0] + ih, pad[2]:pad[2] + iw], dtype=dt)
        acc = _depthwise_blocked(xp, _shift_to(call.inputs[1], w_zp, dt), stride, dilation, (oh, ow), dt)
        return [_finish_int(acc.reshape(n, oh, ow, c * m), bias, out_dt, bound)]
    x, w, dt, bound = _conv_operands(call, in_dt, w_dt, call.inputs[1], kh * kw)
    acc = np.zeros((n, oh, ow, c, m), dtype=dt)
    scratch = np.empty(acc.size, dtype=dt)  # one product buffer reused by every tap

    def contribute(region: np.ndarray, tap: tuple[int, ...]) -> np.ndarray:
        # elementwise per channel: [N, h, w, C, 1] * [C, M]
        out = scratch[: region.size * m].reshape(*region.shape, m)
        return np.multiply(region[..., None], w[tap], out=out)

    _conv_taps(x, (kh, kw), stride, dilation, pad[0::2], (oh, ow), acc, contribute)
    acc = acc.reshape(n, oh, ow, c * m)  # output channel index c * M + m
    if _is_float(out_dt):
        return [_finish_float(acc, bias, out_dt)]
    return [_finish_int(acc, bias, out_dt, bound)]


@register("TRANSPOSE_CONV2D")
@_quiet
def transpose_conv2d(call: OpCall) -> list[np.ndarray]:
    """TRANSPOSE_CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], bias [BC] -> [N,OH,OW,OC].

    Computed as a scatter: input pixel (iy, ix) and tap (ky, kx) contribute to output
    ``(iy * stride_y + ky + out_pad_top, ix * stride_x + kx + out_pad_left)``, which is the
    spec's gather with ``y = oy - out_pad_top - ky`` divisible by the stride.
    """
    in_dt, w_dt, out_dt, _ = _check_conv_common(call, 2, 4)
    out_pad = _ints(call, "out_pad", 4)
    stride = _ints(call, "stride", 2)
    n, ih, iw, ic = call.input_decls[0].shape
    oc, kh, kw, wic = call.input_decls[1].shape
    on, oh, ow, ooc = call.out_shape()
    pt, pb, pl, pr = out_pad
    sy, sx = stride
    call.error_if(pt <= -kh or pb <= -kh, "out_pad_top <= -KH || out_pad_bottom <= -KH")
    call.error_if(pl <= -kw or pr <= -kw, "out_pad_left <= -KW || out_pad_right <= -KW")
    call.error_if(sy < 1 or sx < 1, "stride_y < 1 || stride_x < 1")
    call.error_if(on != n, "output batch != input batch")
    call.error_if(wic != ic, "weight IC != input IC")
    call.error_if(ooc != oc, "output OC != weight OC")
    _level(call, [kh, kw, *out_pad], MAX_KERNEL, "kernel or out_pad")
    _level(call, stride, MAX_STRIDE, "stride")
    call.error_if(
        oh != (ih - 1) * sy + pt + pb + kh,
        "OH != (IH - 1) * stride_y + out_pad_top + out_pad_bottom + KH",
    )
    call.error_if(
        ow != (iw - 1) * sx + pl + pr + kw,
        "OW != (IW - 1) * stride_x + out_pad_left + out_pad_right + KW",
    )
    bias = _check_bias(call, oc)

    # Each output sums at most KH * KW * IC products: that is the exactness bound's length.
    x, w, dt, bound = _conv_operands(call, in_dt, w_dt, call.inputs[1], kh * kw * ic)
    # One GEMM gives every (pixel, tap, oc) product sum over IC: [N*IH*IW, KH*KW*OC].
    w_mat = np.moveaxis(w, 0, -1).transpose(2, 0, 1, 3).reshape(ic, kh * kw * oc)
    contrib = _gemm(x.reshape(-1, ic), w_mat).reshape(n, ih, iw, kh, kw, oc)
    full_h, full_w = (ih - 1) * sy + kh, (iw - 1) * sx + kw
    full = np.zeros((n, full_h, full_w, oc), dtype=dt)
    for ky, kx in itertools.product(range(kh), range(kw)):
        rows = slice(ky, ky + (ih - 1) * sy + 1, sy)
        cols = slice(kx, kx + (iw - 1) * sx + 1, sx)
        full[:, rows, cols] += contrib[:, :, :, ky, kx]
    # Output row oy holds full row oy - out_pad_top (zero outside): crop or zero-pad.
    acc = np.zeros((n, oh, ow, oc), dtype=dt)
    y0, x0 = max(0, -pt), max(0, -pl)
    y1, x1 = min(full_h, oh - pt), min(full_w, ow - pl)
    if y1 > y0 and x1 > x0:
        acc[:, y0 + pt : y1 + pt, x0 + pl : x1 + pl] = full[:, y0:y1, x0:x1]
    if _is_float(out_dt):
        return [_finish_float(acc, bias, out_dt)]
    return [_finish_int(acc, bias, out_dt, bound)]


# --------------------------------------------------------------------------------------------
# MATMUL
# --------------------------------------------------------------------------------------------


@register("MATMUL")
@_quiet
def matmul(call: OpCall) -> list[np.ndarray]:
    """MATMUL: A [N,H,C] x B [N,C,W] -> [N,H,W], with A_zp / B_zp (int8 only)."""
    return [_matmul(call, *_matmul_checks(call))]


@register_prepare("MATMUL")
def prepare_matmul(call: OpCall):
    """MATMUL with constant zero points: every check once."""
    if len(call.inputs) != 4 or call.inputs[2] is None or call.inputs[3] is None:
        return None
    params = _matmul_checks(call)
    return _quiet(lambda run: [_matmul(run, *params)])


def _matmul_checks(call: OpCall) -> tuple[str, str, int, int | float, int | float]:
    """The ERROR_IFs of MATMUL; returns (in_t, out_t, C, A_zp, B_zp)."""
    call.check_arity(4, 1)
    in_dt, out_dt = call.in_dtype(0), call.out_dtype()
    call.error_if(call.in_dtype(1) != in_dt, "B element type != in_t")
    call.error_if(
        (in_dt, out_dt) not in MATMUL_TYPES, f"unsupported (in_t, out_t) {(in_dt, out_dt)}"
    )
    a_shape, b_shape, o_shape = (
        call.input_decls[0].shape,
        call.input_decls[1].shape,
        call.out_shape(),
    )
    _check_rank(call, a_shape, 3, "A")
    _check_rank(call, b_shape, 3, "B")
    _check_rank(call, o_shape, 3, "output")
    n, h, c = a_shape
    call.error_if(b_shape[0] != n or b_shape[1] != c, "shape(B) != [N, C, W]")
    call.error_if(tuple(o_shape) != (n, h, b_shape[2]), "shape(output) != [N, H, W]")
    a_zp = _zero_point(call, 2, in_dt, "A_zp")
    b_zp = _zero_point(call, 3, in_dt, "B_zp")
    # v1.0.2 pseudocode reads ERROR_IF(is_same<in_t,i8_t> && ...), a typo fixed in later spec
    # versions; the argument text ("must be zero for non-int8 types") is the intended rule.
    _check_zero_point(call, a_zp, in_dt, "A_zp")
    _check_zero_point(call, b_zp, in_dt, "B_zp")
    return in_dt, out_dt, c, a_zp, b_zp


def _matmul(call: OpCall, in_dt: str, out_dt: str, c: int, a_zp, b_zp) -> np.ndarray:
    a, b = call.inputs[0], call.inputs[1]
    if _is_float(in_dt):
        return _gemm(a.astype(F64), b.astype(F64)).astype(dtype_info(out_dt).working)
    a64, a_max = _shifted(a, a_zp)
    b64, b_max = _shifted(b, b_zp)
    dt, bound = _exact_dtype(c, a_max, b_max)
    acc = _gemm(a64.astype(dt), b64.astype(dt))
    return _finish_int(acc, np.zeros(1, INT64), out_dt, bound)


#: MATMUL_T (TOSA 1.1) floating-point operand types: the 1.0 float types plus the MX element
#: types, whose zero point may be FP32 (the generator's block-scaled operands).
MATMUL_T_FLOATS = ("FP8E4M3", "FP8E5M2", "FP16", "BF16", "FP32", "FP6E2M3", "FP6E3M2", "FP4E2M1", "MXINT8")


def _matmul_t_out_types(a_dt: str, b_dt: str) -> tuple[str, ...]:
    """Allowed out_t of MATMUL_T for operand types ``a_dt``, ``b_dt`` (spec type table)."""
    if a_dt in ("INT8", "INT16") or b_dt in ("INT8", "INT16"):
        return {("INT8", "INT8"): ("INT32",), ("INT16", "INT16"): ("INT48",)}.get((a_dt, b_dt), ())
    if a_dt not in MATMUL_T_FLOATS or b_dt not in MATMUL_T_FLOATS:
        return ()
    if "FP32" in (a_dt, b_dt):
        return ("FP32",)
    if (a_dt, b_dt) == ("FP16", "FP16"):
        return ("FP16", "FP32")
    return ("BF16", "FP32")


@register("MATMUL_T")
@_quiet
def matmul_t(call: OpCall) -> list[np.ndarray]:
    """MATMUL_T (TOSA 1.1): A [N,H,C] x B [D,W,C] -> [N,H,W], B broadcast when D == 1.

    ``output[n, h, w] = sum_c (A[n, h, c] - A_zp) * (B[d, w, c] - B_zp)``, ``d = 0 if D == 1``.
    A and B may have different float types (mixed precision).
    """
    call.check_arity(4, 1)
    a_dt, b_dt, out_dt = call.in_dtype(0), call.in_dtype(1), call.out_dtype()
    call.error_if(
        out_dt not in _matmul_t_out_types(a_dt, b_dt),
        f"unsupported (A_t, B_t, out_t) {(a_dt, b_dt, out_dt)}",
    )
    a_shape, b_shape, o_shape = call.input_decls[0].shape, call.input_decls[1].shape, call.out_shape()
    _check_rank(call, a_shape, 3, "A")
    _check_rank(call, b_shape, 3, "B")
    _check_rank(call, o_shape, 3, "output")
    n, h, c = a_shape
    d, w, bc = b_shape
    call.error_if(d != n and d != 1, "D != N && D != 1")
    call.error_if(bc != c, "shape(B)[2] != C")
    call.error_if(tuple(o_shape) != (n, h, w), "shape(output) != [N, H, W]")
    zps = []
    for i, dt, what in ((2, a_dt, "A_zp"), (3, b_dt, "B_zp")):
        zp_dt = call.in_dtype(i)
        # a block-scaled operand's zero point is fp32 (the generator's scaled types)
        call.error_if(
            zp_dt != dt and not (zp_dt == "FP32" and dt in MATMUL_T_FLOATS),
            f"{what} element type {zp_dt} does not match {dt}",
        )
        zp = _zero_point(call, i, zp_dt, what)
        call.error_if(dt != "INT8" and not zp == 0, f"!is_same<{dt}, i8_t>() && {what} != 0")
        zps.append(zp)
    a, b = call.inputs[0], call.inputs[1]
    b_t = np.swapaxes(b, 1, 2)  # [D, C, W]
    if _is_float(out_dt):
        acc = _gemm(float_values(a, a_dt), float_values(b_t, b_dt))  # [N, H, W] by broadcast
        return [acc.astype(dtype_info(out_dt).working)]
    a64, a_max = _shifted(a, zps[0])
    b64, b_max = _shifted(b_t, zps[1])
    dt, bound = _exact_dtype(c, a_max, b_max)
    acc = _gemm(a64.astype(dt), b64.astype(dt))
    return [_finish_int(acc, np.zeros(1, INT64), out_dt, bound)]


# --------------------------------------------------------------------------------------------
# Block-scaled (TOSA 1.1 draft, EXT-MX*): MATMUL_T_BLOCK_SCALED, CONV2D_BLOCK_SCALED
# --------------------------------------------------------------------------------------------
#
# The spec accumulates each block in fp32 and scales it by scale_A * scale_B (powers of two);
# the compliance check is the dot-product one against an fp64 reference. Scaling every element
# by its block scale first is exact in float64 (|value| < 2**16, scales in [2**-127, 2**127]),
# so one float64 dot product of the scaled operands is that reference.


def _scaled_operand(call: OpCall, data: int, scale: int, size: int, what: str) -> np.ndarray:
    """Operand ``data`` times its expanded block scales (operand ``scale``), as float64."""
    d_dt, s_dt = call.in_dtype(data), call.in_dtype(scale)
    call.error_if(d_dt not in MX_ELEMENT_TYPES, f"{what} type {d_dt} is not an MX element type")
    call.error_if(s_dt != SCALE_TYPE, f"{what} scale type {s_dt} != {SCALE_TYPE}")
    d_shape, s_shape = tuple(call.input_decls[data].shape), tuple(call.input_decls[scale].shape)
    call.error_if(d_shape[-1] % size != 0, f"{what}: C % block_size != 0")
    call.error_if(s_shape != scale_shape(d_shape, size), f"shape({what}_scale) != {list(scale_shape(d_shape, size))}")
    return float_values(call.inputs[data], d_dt) * expand_scales(call.inputs[scale], size)


@register("MATMUL_T_BLOCK_SCALED")
@_quiet
def matmul_t_block_scaled(call: OpCall) -> list[np.ndarray]:
    """MATMUL_T_BLOCK_SCALED (TOSA 1.1): block-scaled A [N,H,C] x B [D,W,C] -> fp32 [N,H,W].

    Inputs A_data, A_scale [N,H,C/block_size], B_data, B_scale [D,W,C/block_size].
    """
    call.check_arity(4, 1)
    size = block_size(call)
    call.error_if(size == 1, "block_size == 1")
    call.error_if(call.out_dtype() != "FP32", f"out_t {call.out_dtype()} != FP32")
    call.error_if(call.in_dtype(0) != call.in_dtype(2), "A_t != B_t")
    a_shape, b_shape, o_shape = call.input_decls[0].shape, call.input_decls[2].shape, call.out_shape()
    _check_rank(call, a_shape, 3, "A_data")
    _check_rank(call, b_shape, 3, "B_data")
    _check_rank(call, call.input_decls[1].shape, 3, "A_scale")
    _check_rank(call, call.input_decls[3].shape, 3, "B_scale")
    _check_rank(call, o_shape, 3, "output")
    n, h, c = a_shape
    d, w, bc = b_shape
    call.error_if(c % size != 0, "C % block_size != 0")
    call.error_if(d != n and d != 1, "D != N && D != 1")
    call.error_if(bc != c, "shape(B_data)[2] != C")
    call.error_if(tuple(o_shape) != (n, h, w), "shape(output) != [N, H, W]")
    a = _scaled_operand(call, 0, 1, size, "A")
    b = _scaled_operand(call, 2, 3, size, "B")
    return [_gemm(a, np.swapaxes(b, 1, 2)).astype(np.float32)]


@register("CONV2D_BLOCK_SCALED")
@_quiet
def conv2d_block_scaled(call: OpCall) -> list[np.ndarray]:
    """CONV2D_BLOCK_SCALED (TOSA 1.1): block-scaled CONV2D, fp32 bias and output.

    Inputs input_data, input_scale, weight_data, weight_scale, bias [BC], pad [4], stride [2],
    dilation [2] (shape_t). Padding reads as value 0 (its scale is 1).
    """
    call.check_arity(8, 1)
    size = block_size(call)
    call.error_if(size == 1, "block_size == 1")
    call.error_if(call.out_dtype() != "FP32", f"out_t {call.out_dtype()} != FP32")
    call.error_if(call.in_dtype(4) != "FP32", "bias element type != out_t")
    call.error_if(call.in_dtype(0) != call.in_dtype(2), "in_t != weight_t")
    # the spec's type table has every MX element type but MXINT8 (the reference model agrees)
    call.error_if(call.in_dtype(0) == "MXINT8", "in_t mxint8_t not supported")
    for i, rank, what in ((0, 4, "input_data"), (1, 4, "input_scale"), (2, 4, "weight_data"),
                          (3, 4, "weight_scale"), (4, 1, "bias")):
        _check_rank(call, call.input_decls[i].shape, rank, what)
    _check_rank(call, call.out_shape(), 4, "output")
    pad = shape_input(call, 5, 4, "pad")
    stride = shape_input(call, 6, 2, "stride")
    dilation = shape_input(call, 7, 2, "dilation")
    kernel, out_spatial = _check_conv_geometry(call, 2, pad, stride, dilation)
    oc = call.input_decls[2].shape[0]
    bias = _check_bias(call, oc, 4)
    call.error_if(call.input_decls[0].shape[-1] % size != 0, "IC % block_size != 0")
    x = _scaled_operand(call, 0, 1, size, "input")
    w = _scaled_operand(call, 2, 3, size, "weight")
    acc = _conv_accumulate(x, w, F64, kernel, stride, dilation, pad, out_spatial)
    return [_finish_float(acc, bias, "FP32")]


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
) -> np.ndarray:
    """Number of in-range input positions of each pooling window along one axis."""
    start = np.arange(out_size, dtype=INT64) * stride - pad_before
    return np.minimum(start + kernel, in_size) - np.maximum(start, 0)


@register("AVG_POOL2D")
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
    return _quiet(lambda run: [_avg_pool(run, p)])


def _avg_pool_setup(call: OpCall) -> dict:
    """The ERROR_IFs of AVG_POOL2D; window counts and (integer) their reciprocal scales."""
    call.check_arity(3, 1)
    return _avg_pool_params(call, _pool_attrs(call))


@register("AVG_POOL2D_ADAPTIVE")
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
    call.error_if(
        (dt, acc_dt) not in AVG_POOL_TYPES, f"unsupported (in_out_t, acc_t) {(dt, acc_dt)}"
    )
    in_zp = _zero_point(call, 1, dt, "input_zp")
    out_zp = _zero_point(call, 2, dt, "output_zp")
    _check_zero_point(call, in_zp, dt, "input_zp")
    _check_zero_point(call, out_zp, dt, "output_zp")
    kernel, stride, pad = _check_pool(call, *window)
    n, oh, ow, c = call.out_shape()
    ih, iw = call.input_decls[0].shape[1:3]
    count = np.multiply.outer(
        _window_counts(ih, oh, kernel[0], stride[0], pad[0]),
        _window_counts(iw, ow, kernel[1], stride[1], pad[2]),
    )[None, :, :, None]  # [1, OH, OW, 1]; >= 1 because pad < kernel
    p = {"dt": dt, "in_zp": in_zp, "out_zp": out_zp, "kernel": kernel, "stride": stride,
         "pad": pad, "shape": (n, oh, ow, c), "count": count}
    if not _is_float(dt):
        scales = {int(k): reciprocal_scale(int(k)) for k in np.unique(count)}
        p["multiplier"] = np.vectorize(lambda k: scales[int(k)][0], otypes=[INT64])(count)
        p["shift"] = np.vectorize(lambda k: scales[int(k)][1], otypes=[INT64])(count)
    return p


def _avg_pool(call: OpCall, p: dict) -> np.ndarray:
    dt, shape = p["dt"], p["shape"]
    kernel, stride, pad, out_hw = p["kernel"], p["stride"], p["pad"], shape[1:3]
    if _is_float(dt):
        acc = _pool_taps(call.inputs[0].astype(F64), kernel, stride, pad, out_hw, np.zeros(shape), np.add)
        return (acc / p["count"]).astype(dtype_info(dt).working)
    # The sum is exact in int64 (|sum| <= count * 2**16 <= 2**42). The spec's int32 acc_t makes
    # an int32 overflow a REQUIRE (only windows over 2**16 elements can); the reference model
    # wraps, and so do we.
    x = call.inputs[0].astype(INT64) - p["in_zp"]
    acc = _pool_taps(x, kernel, stride, pad, out_hw, np.zeros(shape, INT64), np.add)
    acc = wrap(acc, "INT32")
    out = apply_scale_32(acc, p["multiplier"], p["shift"], double_round=False) + p["out_zp"]
    lo, hi = int_range(dt)
    return np.clip(out, lo, hi).astype(dtype_info(dt).working)


@register("MAX_POOL2D")
def max_pool2d(call: OpCall) -> list[np.ndarray]:
    """MAX_POOL2D: maximum over each window's in-range values, with the NaN mode for floats."""
    call.check_arity(1, 1)
    return _max_pool(call, _pool_attrs(call))


@register("MAX_POOL2D_ADAPTIVE")
def max_pool2d_adaptive(call: OpCall) -> list[np.ndarray]:
    """MAX_POOL2D_ADAPTIVE (TOSA 1.1): MAX_POOL2D with kernel [2], stride [2], pad [4] inputs."""
    call.check_arity(4, 1)
    return _max_pool(call, _pool_shape_inputs(call, 1))


@_quiet
def _max_pool(call: OpCall, window: tuple[list[int], list[int], list[int]]) -> list[np.ndarray]:
    dt = call.in_dtype(0)
    call.error_if(call.out_dtype() != dt, "output element type != in_out_t")
    call.error_if(dt not in MAX_TYPES, f"unsupported in_out_t {dt}")
    kernel, stride, pad = _check_pool(call, *window)
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
    call.error_if(dt not in MAX_TYPES, f"unsupported in_t {dt}")
    call.error_if(call.out_dtype() != "INT32", "out_t != i32_t")
    shape1 = tuple(call.input_decls[0].shape)
    axis = int(call.attrs.get("axis", 0))
    call.error_if(
        len(shape1) < 1 or len(shape1) > MAX_RANK, f"rank(input) not in [1, MAX_RANK={MAX_RANK}]"
    )
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
    return [np.asarray(index, dtype=np.int32)]


# --------------------------------------------------------------------------------------------
# FFT2D / RFFT2D (EXT-FFT)
# --------------------------------------------------------------------------------------------


def _power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


@register("FFT2D")
@_quiet
def fft2d(call: OpCall) -> list[np.ndarray]:
    """FFT2D: unnormalized complex 2D DFT of [N,H,W] (inverse: positive exponent)."""
    call.check_arity(2, 2)
    for decl in (*call.input_decls, *call.output_decls):
        call.error_if(decl.dtype != "FP32", f"{decl.name} element type {decl.dtype} != fp32_t")
        _check_rank(call, decl.shape, 3, decl.name)
    shape = tuple(call.input_decls[0].shape)
    call.error_if(
        tuple(call.input_decls[1].shape) != shape, "shape(input_imag) != shape(input_real)"
    )
    for i in range(2):
        call.error_if(tuple(call.out_shape(i)) != shape, f"shape(output {i}) != [N,H,W]")
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


@register("RFFT2D")
@_quiet
def rfft2d(call: OpCall) -> list[np.ndarray]:
    """RFFT2D: unnormalized 2D DFT of real [N,H,W], first W/2+1 columns."""
    call.check_arity(1, 2)
    for decl in (*call.input_decls, *call.output_decls):
        call.error_if(decl.dtype != "FP32", f"{decl.name} element type {decl.dtype} != fp32_t")
        _check_rank(call, decl.shape, 3, decl.name)
    n, h, w = call.input_decls[0].shape
    for i in range(2):
        call.error_if(
            tuple(call.out_shape(i)) != (n, h, w // 2 + 1), f"shape(output {i}) != [N,H,W/2 + 1]"
        )
    call.error_if(not _power_of_two(h), "!power_of_two(H)")
    call.error_if(not _power_of_two(w), "!power_of_two(W)")
    _level(call, [h, w], MAX_KERNEL, "H or W")
    y = np.fft.rfft2(call.inputs[0].astype(F64), axes=(1, 2))
    imag = y.imag.copy()
    # The spec sums no imaginary terms at rows {0, H/2} x columns {0, W/2}: those must be exactly 0.
    rows, cols = sorted({0, h // 2}), sorted({0, w // 2})
    imag[np.ix_(range(n), rows, cols)] = 0.0
    return [y.real.astype(np.float32), imag.astype(np.float32)]
