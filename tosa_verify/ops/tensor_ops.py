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

import itertools
import math

import numpy as np

from ..dtypes import BLOCK_SCALED, dtype_info, float_values
from ..numerics import int_range
from ._conv_small import small_conv2d, small_depthwise2d, small_matmul
from ._layout_support import shape_input
from ._levels import MAX_KERNEL, MAX_STRIDE
from ._mx import MX_ELEMENT_TYPES, SCALE_TYPE, block_size, expand_scales, scale_shape
from ._tensor_common import (
    _IM2COL_MAX,
    _IM2COL_MAX_K,
    F64,
    INT64,
    TINY_GEMM,
    _check_bias,
    _check_rank,
    _check_zero_point,
    _conv_operands,
    _conv_taps,
    _depthwise_blocked,
    _exact_dtype,
    _finish_float,
    _finish_int,
    _gemm,
    _gemm_int,
    _ints,
    _is_float,
    _l1_max,
    _level,
    _one_blas_thread,
    _one_pass_finish,
    _out_size,
    _patches,
    _quiet,
    _shift_to,
    _shifted,
    _shifted_max,
    _zero_padded,
    _zero_point,
)
from .facts import DOT_PRODUCT, input_dims
from .registry import OpCall, register, register_prepare

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


def _check_conv_common(
    call: OpCall, spatial_rank: int, weight_rank: int, zero_points: dict | None = None
) -> tuple[str, str, str, str]:
    """Arity, ranks, type signature, zero points and bias shape shared by all convolutions;
    ``zero_points`` (if given) receives the zero points as ``izp`` and ``wzp``."""
    call.check_arity(5, 1)
    in_dt, w_dt, out_dt = call.in_dtype(0), call.in_dtype(1), call.out_dtype()
    acc_dt = call.attrs.get("acc_type")
    sig = (in_dt, w_dt, out_dt, acc_dt)
    if sig not in CONV_TYPES:
        call.fail(f"unsupported (in_t, weight_t, out_t, acc_t) {sig}")
    call.error_if(call.in_dtype(2) != out_dt, "bias element type != out_t")
    _check_rank(call, call.input_decls[0].shape, spatial_rank + 2, "input")
    _check_rank(call, call.input_decls[1].shape, weight_rank, "weight")
    _check_rank(call, call.input_decls[2].shape, 1, "bias")
    _check_rank(call, call.out_shape(), spatial_rank + 2, "output")
    izp = _zero_point(call, 3, in_dt, "input_zp")
    wzp = _zero_point(call, 4, w_dt, "weight_zp")
    _check_zero_point(call, izp, in_dt, "input_zp")
    _check_zero_point(call, wzp, w_dt, "weight_zp")
    if zero_points is not None:
        zero_points["izp"], zero_points["wzp"] = izp, wzp
    return in_dt, w_dt, out_dt, acc_dt


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
    # (each check an ``if`` in front of error_if: one call per failing check, not per check;
    # min/max over the few entries read as the spec's any-of conditions)
    if pad and min(pad) < 0:
        call.fail("pad < 0")
    if stride and min(stride) < 1:
        call.fail("stride < 1")
    if dilation and min(dilation) < 1:
        call.fail("dilation < 1")
    if on != n:
        call.fail("output batch != input batch")
    if wic != ic:
        call.fail("weight IC != input IC")
    if ooc != oc:
        call.fail("output OC != weight OC")
    _level(call, [k * d for k, d in zip(kernel, dilation, strict=True)], MAX_KERNEL, "dilation * kernel")
    _level(call, pad, MAX_KERNEL, "pad")
    _level(call, stride, MAX_STRIDE, "stride")
    names = ("D", "H", "W")[-spatial_rank:]
    for i in range(spatial_rank):
        numerator = in_spatial[i] - 1 + pad[2 * i] + pad[2 * i + 1] - (kernel[i] - 1) * dilation[i]
        _out_size(call, out_spatial[i], numerator, stride[i], names[i])
    return kernel, out_spatial


def _conv_sums(
    x: np.ndarray, w_taps: np.ndarray, dt, kernel, stride, dilation, pad, out_spatial, integer: bool
) -> np.ndarray:
    """Direct convolution sums of ``x`` [N, *S, IC] with weight taps ``w_taps`` [*K, IC, OC], in
    dtype ``dt`` (``integer``: integer operands, so the one-GEMM im2col form is exact too)."""
    n, ic, oc = x.shape[0], x.shape[-1], w_taps.shape[-1]
    if all(k == 1 for k in kernel) and not any(pad):
        # pointwise: one GEMM over the strided input, no accumulator to zero and add into
        region = x[
            (
                slice(None),
                *(slice(None, o * st, st) for o, st in zip(out_spatial, stride, strict=True)),
            )
        ]
        return _gemm(region.reshape(-1, ic), w_taps.reshape(ic, oc)).reshape(n, *out_spatial, oc)
    taps = int(np.prod(kernel))
    if (
        integer
        and taps * ic <= _IM2COL_MAX_K
        and n * int(np.prod(out_spatial)) * taps * ic <= _IM2COL_MAX
    ):
        # few input channels: one GEMM over all taps (K = taps * IC) instead of one thin GEMM
        # per tap, each added into the accumulator
        patches = _patches(_zero_padded(x, pad), kernel, stride, dilation, out_spatial)
        return _gemm(patches.reshape(-1, taps * ic), w_taps.reshape(taps * ic, oc)).reshape(
            n, *out_spatial, oc
        )
    acc = np.zeros((n, *out_spatial, oc), dtype=dt)

    def contribute(region: np.ndarray, tap: tuple[int, ...]) -> np.ndarray:
        rows = _gemm(region.reshape(-1, ic), w_taps[tap])
        return rows.reshape(*region.shape[:-1], oc)

    return _conv_taps(x, kernel, stride, dilation, pad[0::2], out_spatial, acc, contribute)


def _conv_accumulate(
    x: np.ndarray,
    w: np.ndarray,
    dt,
    kernel,
    stride,
    dilation,
    pad,
    out_spatial,
    integer: bool = False,
) -> np.ndarray:
    """Direct convolution sums of ``x`` [N, *S, IC] and ``w`` [OC, *K, IC], in dtype ``dt``."""
    # [OC, *K, IC] -> [*K, IC, OC]: one [IC, OC] matrix per kernel tap
    w_taps = np.ascontiguousarray(np.moveaxis(w, 0, -1))
    return _conv_sums(x, w_taps, dt, kernel, stride, dilation, pad, out_spatial, integer)


def _conv_nd(call: OpCall, spatial_rank: int) -> list[np.ndarray]:
    """CONV2D (spatial_rank 2) and CONV3D (3): weight ``[OC, *K, IC]``, NHWC / NDHWC layout."""
    return [_conv_run(call, _conv_setup(call, spatial_rank))]


def _conv_setup(call: OpCall, spatial_rank: int) -> dict:
    """Every ERROR_IF of CONV2D/CONV3D; the static parameters :func:`_conv_run` computes with
    (the zero points as ``izp`` and ``wzp``)."""
    zero_points: dict = {}
    in_dt, w_dt, out_dt, _ = _check_conv_common(call, spatial_rank, spatial_rank + 2, zero_points)
    pad = _ints(call, "pad", 2 * spatial_rank)
    stride = _ints(call, "stride", spatial_rank)
    dilation = _ints(call, "dilation", spatial_rank)
    kernel, out_spatial = _check_conv_geometry(call, 1, pad, stride, dilation)
    n, ic, oc = (
        call.input_decls[0].shape[0],
        call.input_decls[0].shape[-1],
        call.input_decls[1].shape[0],
    )
    bias = _check_bias(call, oc)
    return {
        "in_dt": in_dt,
        "w_dt": w_dt,
        "out_dt": out_dt,
        "pad": pad,
        "stride": stride,
        "dilation": dilation,
        "n": n,
        "ic": ic,
        "oc": oc,
        "kernel": kernel,
        "out_spatial": out_spatial,
        "bias": bias,
        "terms": math.prod(kernel) * ic,
        **zero_points,
    }


def _conv_run(call: OpCall, p: dict, weights: dict | None = None) -> np.ndarray:
    """The convolution itself; ``weights`` caches the weight taps by compute dtype (prepared)."""
    if weights is None:
        x, w, dt, bound = _conv_operands(call, p["in_dt"], p["w_dt"], call.inputs[1], p["terms"])
        # [OC, *K, IC] -> [*K, IC, OC]: one [IC, OC] matrix per kernel tap
        w_taps = np.ascontiguousarray(np.moveaxis(w, 0, -1))
    else:
        x, dt, bound = _conv_input(call, p, weights)
        w_taps = weights[dt]
        out = _pointwise_int(x, w_taps, p, bound)
        if out is not None:
            return out
    acc = _conv_sums(
        x,
        w_taps,
        dt,
        p["kernel"],
        p["stride"],
        p["dilation"],
        p["pad"],
        p["out_spatial"],
        integer=not _is_float(p["in_dt"]),
    )
    if _is_float(p["out_dt"]):
        return _finish_float(acc, p["bias"], p["out_dt"])
    return _finish_int(acc, p["bias"], p["out_dt"], bound)


def _pointwise_int(x: np.ndarray, w_taps: np.ndarray, p: dict, bound: int) -> np.ndarray | None:
    """A pointwise (1x1, unpadded) integer convolution as one chunked GEMM with the bias and the
    cast to out_t fused in (see :func:`_gemm_int`), or None where that does not apply."""
    if _is_float(p["in_dt"]) or any(k != 1 for k in p["kernel"]) or any(p["pad"]):
        return None
    spatial = (slice(None, o * st, st) for o, st in zip(p["out_spatial"], p["stride"], strict=True))
    region = x[(slice(None), *spatial)]
    ic, oc = x.shape[-1], w_taps.shape[-1]
    out = _gemm_int(np.ascontiguousarray(region).reshape(-1, ic), w_taps.reshape(ic, oc), p["bias"],
                    p["out_dt"], bound)
    return None if out is None else out.reshape(x.shape[0], *p["out_spatial"], oc)


def _conv_input(call: OpCall, p: dict, weights: dict) -> tuple[np.ndarray, type, int]:
    """The input operand of a prepared convolution, in the dtype :func:`_conv_operands` picks."""
    x = call.inputs[0]
    if weights["float"]:
        return x.astype(F64), F64, 0
    # bound max|x - zp| * max_oc sum |w[oc] - w_zp|, tighter than terms * max|x| * max|w|
    dt, bound = _exact_dtype(1, _shifted_max(x, weights["izp"]), weights["l1"])
    if dt not in weights:
        weights[dt] = np.ascontiguousarray(np.moveaxis(weights["shifted"].astype(dt), 0, -1))
    # shifted straight into dt: one pass over the int8/int16 input, no int64 copy
    return _shift_to(x, weights["izp"], dt), dt, bound


@register(
    "CONV2D", operands=("input", "weight", "bias", "input_zp", "weight_zp"), compliance=DOT_PRODUCT,
    kernel_size=input_dims(1, (1, 2, 3), rank=4), int16=True,
)
@_quiet
def conv2d(call: OpCall) -> list[np.ndarray]:
    """CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], bias [BC] -> [N,OH,OW,OC]."""
    return _conv_nd(call, 2)


@register(
    "CONV3D", operands=("input", "weight", "bias", "input_zp", "weight_zp"), compliance=DOT_PRODUCT,
    kernel_size=input_dims(1, (1, 2, 3, 4), rank=5),
)
@_quiet
def conv3d(call: OpCall) -> list[np.ndarray]:
    """CONV3D: input [N,ID,IH,IW,IC], weight [OC,KD,KH,KW,IC], bias [BC] -> [N,OD,OH,OW,OC]."""
    return _conv_nd(call, 3)


# after conv2d/conv3d: register_prepare pairs with the op functions registered at this point
@register_prepare("CONV2D", "CONV3D")
def prepare_conv(call: OpCall):
    """CONV2D/CONV3D with constant weight, bias and zero points: checks once, weights converted once."""
    if len(call.inputs) != 5 or any(v is None for v in call.inputs[1:]):
        return None
    p = _conv_setup(call, 3 if call.op == "CONV3D" else 2)
    weights: dict = {"float": _is_float(p["in_dt"])}
    if weights["float"]:
        w = call.inputs[1].astype(F64)  # [OC, *K, IC] -> [*K, IC, OC] (np.moveaxis without its wrapper)
        weights[F64] = np.ascontiguousarray(w.transpose((*range(1, w.ndim), 0)))
    else:
        weights["izp"] = p["izp"]
        shifted = call.inputs[1]  # (as _shifted, without its max)
        wzp = p["wzp"]
        if wzp:  # (without one, the weight as it is: each use converts it to its compute dtype)
            shifted = shifted.astype(np.int64)
            shifted -= wzp
        weights["shifted"] = shifted
        weights["l1"] = _l1_max(shifted, 0)  # weight [OC, *K, IC]
    small = small_conv2d(p, weights, tuple(call.input_decls[0].shape)) if call.op == "CONV2D" else None
    return small or (lambda run: [_conv_run(run, p, weights)])  # (run and fold: warnings off)


@register(
    "DEPTHWISE_CONV2D", operands=("input", "weight", "bias", "input_zp", "weight_zp"), compliance=DOT_PRODUCT,
    kernel_size=input_dims(1, (0, 1), rank=4), int16=True,
)
@_quiet
def depthwise_conv2d(call: OpCall) -> list[np.ndarray]:
    """DEPTHWISE_CONV2D: input [N,IH,IW,C], weight [KH,KW,C,M], bias [BC] -> [N,OH,OW,C*M]."""
    in_dt, w_dt, out_dt, pad, stride, dilation, bias = _depthwise_setup(call)
    n, ih, iw, c = call.input_decls[0].shape
    kh, kw, wc, m = call.input_decls[1].shape
    on, oh, ow, oc = call.out_shape()

    if not _is_float(in_dt):
        x_zp, w_zp = (
            _zero_point(call, 3, in_dt, "input_zp"),
            _zero_point(call, 4, w_dt, "weight_zp"),
        )
        dt, bound = _exact_dtype(
            kh * kw, _shifted_max(call.inputs[0], x_zp), _shifted_max(call.inputs[1], w_zp)
        )
        acc = _depthwise_blocked(
            call.inputs[0], x_zp, pad, _shift_to(call.inputs[1], w_zp, dt), stride, dilation, (oh, ow), dt
        )
        return [_finish_int(acc.reshape(n, oh, ow, c * m), bias, out_dt, bound)]
    x, w, dt, bound = _conv_operands(call, in_dt, w_dt, call.inputs[1], kh * kw)
    if m == 1 and bool(np.isfinite(w).all()):
        # the padding's 0 * w is +-0 where the spec skips the tap: with finite weights and a +0
        # start (plus_zero) every sum is the spec's, in the same tap order (see _depthwise_blocked)
        acc = _depthwise_blocked(x, 0, pad, w, stride, dilation, (oh, ow), dt, plus_zero=True)
        return [_finish_float(acc.reshape(n, oh, ow, c), bias, out_dt)]
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


@register_prepare("DEPTHWISE_CONV2D")
def prepare_depthwise_conv2d(call: OpCall):
    """Integer DEPTHWISE_CONV2D with constant weight, bias and zero points on a small tensor:
    checks once, one gather per run (see ``_conv_small``)."""
    if len(call.inputs) != 5 or any(v is None for v in call.inputs[1:]):
        return None
    in_dt, w_dt, out_dt, pad, stride, dilation, bias = _depthwise_setup(call)
    if _is_float(in_dt):
        return None
    shifted, _ = _shifted(call.inputs[1], _zero_point(call, 4, w_dt, "weight_zp"))
    p = {"in_dt": in_dt, "out_dt": out_dt, "pad": pad, "stride": stride, "dilation": dilation, "bias": bias,
         "out_spatial": tuple(call.out_shape()[1:3]), "izp": _zero_point(call, 3, in_dt, "input_zp")}
    return small_depthwise2d(p, shifted, tuple(call.input_decls[0].shape))


def _depthwise_setup(call: OpCall):
    """Every ERROR_IF of DEPTHWISE_CONV2D: (in_t, weight_t, out_t, pad, stride, dilation, bias)."""
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
    return in_dt, w_dt, out_dt, pad, stride, dilation, _check_bias(call, c * m)


@register(
    "TRANSPOSE_CONV2D", operands=("input", "weight", "bias", "input_zp", "weight_zp"), compliance=DOT_PRODUCT,
    kernel_size=input_dims(1, (1, 2, 3), rank=4),
)
@_quiet
def transpose_conv2d(call: OpCall) -> list[np.ndarray]:
    """TRANSPOSE_CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], bias [BC] -> [N,OH,OW,OC].

    Computed as a scatter: input pixel (iy, ix) and tap (ky, kx) contribute to output
    ``(iy * stride_y + ky + out_pad_top, ix * stride_x + kx + out_pad_left)``, which is the
    spec's gather with ``y = oy - out_pad_top - ky`` divisible by the stride.
    """
    return [_transpose_conv_run(call, _transpose_conv_setup(call), {})]


@register_prepare("TRANSPOSE_CONV2D")
def prepare_transpose_conv2d(call: OpCall):
    """TRANSPOSE_CONV2D with constant weight, bias and zero points: every ERROR_IF once, and the
    weight's GEMM matrix and the bias made once.

    Integer operands: when the worst input the input type allows keeps the sums exact in a
    float dtype and ``acc + bias`` within out_t, that dtype is fixed here and a run reads no
    input extremes; otherwise each run picks its dtype from its input's extremes (as the op
    function does), with the weight's copies kept per dtype.
    """
    if len(call.inputs) != 5 or any(call.inputs[i] is None for i in (1, 2, 3, 4)):
        return None
    geometry = _transpose_conv_setup(call)
    # (each kernel below runs with numpy's floating-point warnings off: see register_prepare)
    in_dt, w_dt, out_dt, (n, ih, iw, ic), (oc, kh, kw), (oh, ow), (pt, pl), (sy, sx), bias = geometry
    weight = call.inputs[1]
    if _is_float(in_dt):
        dt, izp, shifted = F64, 0, weight
        # -0 + -0 is -0, but the spec's sum starts at +0: a +0 bias gives every sum the op
        # function's value even where a single product is the whole sum (the block form below)
        bias_in_dt = bias.astype(F64) + 0.0
    else:
        izp = _zero_point(call, 3, in_dt, "input_zp")
        shifted, _ = _shifted(weight, _zero_point(call, 4, w_dt, "weight_zp"))
        dt = _static_transpose_conv_dtype(shifted, in_dt, out_dt, izp, bias, (sy, sx))
        if dt is None:  # (only the input's extremes can prove a float dtype exact: the op's path)
            arranged: dict = {}

            def transpose_conv_by_extremes(run: OpCall) -> list[np.ndarray]:
                return [_transpose_conv_run(run, geometry, arranged)]

            return transpose_conv_by_extremes
        bias_in_dt = bias.astype(dt)  # exact: |bias| is within the bound checked above
    weight_in_dt, working = shifted.astype(dt), dtype_info(out_dt).working
    if (sy, sx) == (kh, kw) and (pt, pl) == (0, 0) and (oh, ow) == (ih * sy, iw * sx):
        return _transpose_conv_blocks_kernel(geometry, weight_in_dt, bias_in_dt, izp)
    w_mat = _transpose_conv_matrix(weight_in_dt)

    def transpose_conv_kernel(run: OpCall) -> list[np.ndarray]:
        operand = _shift_to(run.inputs[0], izp, dt)  # (a float input: izp is 0, a plain conversion)
        products = _gemm(operand.reshape(-1, ic), w_mat).reshape(n, ih, iw, kh, kw, oc)
        out = np.empty((n, oh, ow, oc), working)
        # exact integer sums (+ bias, checked above) / float64 sums rounded once, as they are cast
        np.add(_transpose_conv_sums(products, geometry, dt), bias_in_dt, out=out, casting="unsafe")
        return [out]

    return transpose_conv_kernel


def _transpose_conv_blocks_kernel(geometry: tuple, weight: np.ndarray, bias: np.ndarray, izp: int):
    """The prepared kernel of a TRANSPOSE_CONV2D whose stride is its kernel size, without
    out_pad: input pixel (iy, ix) alone makes output block ``[iy * KH : (iy + 1) * KH, ix * KW :
    (ix + 1) * KW]``, so output row ``iy * KH + ky`` is input row iy times the tap-row-ky weight
    matrix [IC, KW * OC]. One batched GEMM writes the products in the output's own layout;
    ``weight`` [OC, KH, KW, IC] and ``bias`` are in the compute dtype (float64 for floats, one
    that keeps every integer sum and ``sum + bias`` exact)."""
    _, _, out_dt, (n, ih, iw, ic), (oc, kh, kw), (oh, ow), _, _, _ = geometry
    dt = weight.dtype
    # [OC, KH, KW, IC] -> [KH, IC, KW, OC] -> one [IC, KW * OC] matrix per tap row ky
    tap_rows = np.ascontiguousarray(weight.transpose(1, 3, 2, 0)).reshape(kh, ic, kw * oc)
    bias_per_column = np.tile(bias, kw)  # column kx * OC + oc
    working, rows = dtype_info(out_dt).working, n * ih
    macs = n * ih * iw * ic * kh * kw * oc
    tiny = macs < TINY_GEMM  # (no thread limit to set: see _one_blas_thread)

    def transpose_conv_blocks(run: OpCall) -> list[np.ndarray]:
        operand = run.inputs[0].astype(dt, order="C")  # (C order: the reshape below is then a view)
        if izp:
            operand -= izp  # exact: |x - zp| <= 2**16 (see _shift_to)
        # [N * IH, 1, IW, IC] @ [KH, IC, KW * OC] -> [N * IH, KH, IW, KW * OC], i.e. [N, OH, OW, OC]
        if tiny:
            products = np.matmul(operand.reshape(rows, 1, iw, ic), tap_rows)
        else:
            with _one_blas_thread(macs):
                products = np.matmul(operand.reshape(rows, 1, iw, ic), tap_rows)
        out = np.empty((n, oh, ow, oc), working)
        # exact integer sums (+ bias, checked by the prepare) / float64 sums rounded once, as cast
        np.add(products, bias_per_column, out=out.reshape(products.shape), casting="unsafe")
        return [out]

    return transpose_conv_blocks


def _static_transpose_conv_dtype(shifted_weight: np.ndarray, in_dt: str, out_dt: str, izp: int,
                                 bias: np.ndarray, stride: tuple[int, int]):
    """The float dtype in which every integer TRANSPOSE_CONV2D sum and ``sum + bias`` is exact
    and within out_t for *any* input of type ``in_dt`` (so a run needs no input extremes), or
    None when only a run's own input extremes could show that."""
    oc, kh, kw, ic = shifted_weight.shape
    if stride[0] >= kh and stride[1] >= kw:
        # taps never overlap: each output sums the IC products of a single (tap, oc)
        l1 = _l1_max(shifted_weight.reshape(oc * kh * kw, ic), 0)
    else:
        l1 = _l1_max(shifted_weight, 0)  # at most all taps of one oc
    lo, hi = int_range(in_dt)
    bound = max(abs(lo - izp), abs(hi - izp)) * l1  # |partial sum| (see _exact_dtype)
    # (bound + |bias| exact in the dtype and within out_t: the sums are exact too)
    return next((dt for dt in (np.float32, F64) if _one_pass_finish(bias, out_dt, bound, dt)), None)


def _transpose_conv_matrix(weight: np.ndarray) -> np.ndarray:
    """Weight [OC, KH, KW, IC] as the GEMM matrix [IC, KH * KW * OC]: one GEMM of the input
    rows [N * IH * IW, IC] gives every (pixel, tap, oc) product sum over IC."""
    oc, kh, kw, ic = weight.shape
    return np.ascontiguousarray(weight.transpose(3, 1, 2, 0)).reshape(ic, kh * kw * oc)


def _transpose_conv_sums(products: np.ndarray, geometry: tuple, dt) -> np.ndarray:
    """The accumulators [N, OH, OW, OC] (in ``dt``, each sum started at +0 as the spec's) from
    the products [N, IH, IW, KH, KW, OC] of :func:`_transpose_conv_matrix`: input pixel (iy, ix)
    and tap (ky, kx) add to output ``(iy * stride_y + ky + out_pad_top, ix * stride_x + kx +
    out_pad_left)``."""
    _, _, _, (n, ih, iw, _), (oc, kh, kw), (oh, ow), (pt, pl), (sy, sx), _ = geometry
    if sy >= kh and sx >= kw:
        # no two taps meet: the stride-sized block of input pixel (iy, ix) holds its KH x KW
        # products (and zeros where the stride leaves gaps); one copy instead of a tap loop
        blocks = np.zeros((n, ih, sy, iw, sx, oc), dtype=dt)
        blocks[:, :, :kh, :, :kw] += products.transpose(0, 1, 3, 2, 4, 5)  # (+=: -0 sums to +0)
        full = blocks.reshape(n, ih * sy, iw * sx, oc)  # rows past (IH - 1) * stride_y + KH: 0
    else:
        full = np.zeros((n, (ih - 1) * sy + kh, (iw - 1) * sx + kw, oc), dtype=dt)
        for ky, kx in itertools.product(range(kh), range(kw)):
            rows = slice(ky, ky + (ih - 1) * sy + 1, sy)
            cols = slice(kx, kx + (iw - 1) * sx + 1, sx)
            full[:, rows, cols] += products[:, :, :, ky, kx]
    full_h, full_w = full.shape[1:3]
    if (pt, pl) == (0, 0) and (full_h, full_w) == (oh, ow):
        return full
    # Output row oy holds full row oy - out_pad_top (zero outside): crop or zero-pad.
    acc = np.zeros((n, oh, ow, oc), dtype=dt)
    y0, x0 = max(0, -pt), max(0, -pl)
    y1, x1 = min(full_h, oh - pt), min(full_w, ow - pl)
    if y1 > y0 and x1 > x0:
        acc[:, y0 + pt : y1 + pt, x0 + pl : x1 + pl] = full[:, y0:y1, x0:x1]
    return acc


def _transpose_conv_setup(call: OpCall) -> tuple:
    """The ERROR_IFs of TRANSPOSE_CONV2D; returns what a run needs of the declarations."""
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
    return in_dt, w_dt, out_dt, (n, ih, iw, ic), (oc, kh, kw), (oh, ow), (pt, pl), (sy, sx), bias


def _transpose_conv_run(call: OpCall, geometry: tuple, arranged: dict) -> np.ndarray:
    """TRANSPOSE_CONV2D of ``call``'s input by the ``geometry`` of :func:`_transpose_conv_setup`,
    in the compute dtype its input's extremes pick; ``arranged`` keeps the weight's copies and
    GEMM matrix per compute dtype (empty: made here)."""
    in_dt, w_dt, out_dt, (n, ih, iw, ic), (oc, kh, kw), (oh, ow), (pt, pl), (sy, sx), bias = geometry
    # Each output sums at most KH * KW * IC products: that is the exactness bound's length.
    x, w, dt, bound = _conv_operands(call, in_dt, w_dt, call.inputs[1], kh * kw * ic, weight_cache=arranged)
    w_mat = arranged.get(("matrix", dt))
    if w_mat is None:
        w_mat = arranged[("matrix", dt)] = _transpose_conv_matrix(w)
    products = _gemm(x.reshape(-1, ic), w_mat).reshape(n, ih, iw, kh, kw, oc)
    acc = _transpose_conv_sums(products, geometry, dt)
    if _is_float(out_dt):
        return _finish_float(acc, bias, out_dt)
    return _finish_int(acc, bias, out_dt, bound)


# --------------------------------------------------------------------------------------------
# MATMUL
# --------------------------------------------------------------------------------------------


@register(
    "MATMUL", operands=("A", "B", "A_zp", "B_zp"), compliance=DOT_PRODUCT, kernel_size=input_dims(0, (2,), rank=3),
    int16=True,
)
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
    in_dt, out_dt, _, a_zp, b_zp = params
    shapes = (tuple(call.input_decls[0].shape), tuple(call.input_decls[1].shape))
    # (a prepared kernel runs with numpy's floating-point warnings off: in a run and in a fold)
    if _is_float(in_dt):
        if in_dt in ("FP32", "FP16") and math.prod(shapes[0]) * shapes[1][2] < TINY_GEMM:
            # _matmul's float path for a product _gemm would pass straight to np.matmul
            working = dtype_info(out_dt).working
            return lambda run: [np.matmul(run.inputs[0].astype(F64), run.inputs[1].astype(F64)).astype(working)]
        return lambda run: [_matmul(run, *params)]
    return small_matmul(in_dt, out_dt, shapes, a_zp, b_zp) or (lambda run: [_matmul(run, *params)])


def _rank3_operands(call: OpCall) -> tuple:
    """Shapes of A, B and the output of MATMUL/MATMUL_T, each checked to be of rank 3."""
    a_shape, b_shape, o_shape = call.input_decls[0].shape, call.input_decls[1].shape, call.out_shape()
    _check_rank(call, a_shape, 3, "A")
    _check_rank(call, b_shape, 3, "B")
    _check_rank(call, o_shape, 3, "output")
    return a_shape, b_shape, o_shape


def _int_matmul(a: np.ndarray, b: np.ndarray, a_zp: int, b_zp: int, c: int, out_dt: str) -> np.ndarray:
    """Integer ``(A - A_zp) @ (B - B_zp)`` (B as [.., C, W]) in the cheapest exact dtype for ``c``
    terms, then wrapped or saturated to ``out_dt`` as the reference model does."""
    a64, a_max = _shifted(a, a_zp)
    b64, b_max = _shifted(b, b_zp)
    dt, bound = _exact_dtype(c, a_max, b_max)
    acc = _gemm(a64.astype(dt), b64.astype(dt))
    return _finish_int(acc, np.zeros(1, INT64), out_dt, bound)


def _matmul_checks(call: OpCall) -> tuple[str, str, int, int | float, int | float]:
    """The ERROR_IFs of MATMUL; returns (in_t, out_t, C, A_zp, B_zp)."""
    call.check_arity(4, 1)
    in_dt, out_dt = call.in_dtype(0), call.out_dtype()
    call.error_if(call.in_dtype(1) != in_dt, "B element type != in_t")
    if (in_dt, out_dt) not in MATMUL_TYPES:
        call.fail(f"unsupported (in_t, out_t) {(in_dt, out_dt)}")
    a_shape, b_shape, o_shape = _rank3_operands(call)
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
    return _int_matmul(a, b, a_zp, b_zp, c, out_dt)


#: MATMUL_T (TOSA 1.1) floating-point operand types: fp8, fp16, bf16, fp32 and the block-scaled
#: types (bs32_fp8ue8m0_set_t), whose zero point is fp32 (as tosa-tools generates and runs them).
MATMUL_T_FLOATS = ("FP8E4M3", "FP8E5M2", "FP16", "BF16", "FP32", *BLOCK_SCALED)


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


def _matmul_t_zero_points(call: OpCall, a_dt: str, b_dt: str) -> list[int | float]:
    """A_zp and B_zp after their ERROR_IFs: the operand's type (fp32 for a block-scaled one),
    zero unless the operand is i8_t."""
    zps = []
    for i, dt, what in ((2, a_dt, "A_zp"), (3, b_dt, "B_zp")):
        zp_dt, want = call.in_dtype(i), "FP32" if dt in BLOCK_SCALED else dt
        if zp_dt != want:
            call.fail(f"{what} element type {zp_dt} is not {want}")
        zp = _zero_point(call, i, zp_dt, what)
        if dt != "INT8" and not zp == 0:
            call.fail(f"!is_same<{dt}, i8_t>() && {what} != 0")
        zps.append(zp)
    return zps


@register(
    "MATMUL_T", operands=("A", "B", "A_zp", "B_zp"), compliance=DOT_PRODUCT, kernel_size=input_dims(0, (2,), rank=3),
    int16=True,
)
@_quiet
def matmul_t(call: OpCall) -> list[np.ndarray]:
    """MATMUL_T (TOSA 1.1): A [N,H,C] x B [D,W,C] -> [N,H,W], B broadcast when D == 1.

    ``output[n, h, w] = sum_c (A[n, h, c] - A_zp) * (B[d, w, c] - B_zp)``, ``d = 0 if D == 1``.
    A and B may have different float types (mixed precision), block-scaled ones among them: a
    block-scaled element reads as value * scale.
    """
    call.check_arity(4, 1)
    a_dt, b_dt, out_dt = call.in_dtype(0), call.in_dtype(1), call.out_dtype()
    if out_dt not in _matmul_t_out_types(a_dt, b_dt):
        call.fail(f"unsupported (A_t, B_t, out_t) {(a_dt, b_dt, out_dt)}")
    a_shape, b_shape, o_shape = _rank3_operands(call)
    n, h, c = a_shape
    d, w, bc = b_shape
    call.error_if(d != n and d != 1, "D != N && D != 1")
    call.error_if(bc != c, "shape(B)[2] != C")
    call.error_if(tuple(o_shape) != (n, h, w), "shape(output) != [N, H, W]")
    zps = _matmul_t_zero_points(call, a_dt, b_dt)
    for dt, what in ((a_dt, "A_t"), (b_dt, "B_t")):
        block = dtype_info(dt).block
        if block > 0 and c % block != 0:
            call.fail(f"is_block_scale<{what}>() && C % {block} != 0")
    a, b = call.inputs[0], call.inputs[1]
    b_t = np.swapaxes(b, 1, 2)  # [D, C, W]
    if _is_float(out_dt):
        acc = _gemm(float_values(a, a_dt), float_values(b_t, b_dt))  # [N, H, W] by broadcast
        return [acc.astype(dtype_info(out_dt).working)]
    return [_int_matmul(a, b_t, zps[0], zps[1], c, out_dt)]


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
    if d_dt not in MX_ELEMENT_TYPES:
        call.fail(f"{what} type {d_dt} is not an MX element type")
    if s_dt != SCALE_TYPE:
        call.fail(f"{what} scale type {s_dt} != {SCALE_TYPE}")
    d_shape, s_shape = tuple(call.input_decls[data].shape), tuple(call.input_decls[scale].shape)
    if d_shape[-1] % size != 0:
        call.fail(f"{what}: C % block_size != 0")
    if s_shape != scale_shape(d_shape, size):
        call.fail(f"shape({what}_scale) != {list(scale_shape(d_shape, size))}")
    return float_values(call.inputs[data], d_dt) * expand_scales(call.inputs[scale], size)


@register(
    "MATMUL_T_BLOCK_SCALED", operands=("A_data", "A_scale", "B_data", "B_scale"), compliance=DOT_PRODUCT,
    kernel_size=input_dims(0, (2,), rank=3), extensions=("EXT-MX-COMMON",),
)
@_quiet
def matmul_t_block_scaled(call: OpCall) -> list[np.ndarray]:
    """MATMUL_T_BLOCK_SCALED (TOSA 1.1): block-scaled A [N,H,C] x B [D,W,C] -> fp32 [N,H,W].

    Inputs A_data, A_scale [N,H,C/block_size], B_data, B_scale [D,W,C/block_size].
    """
    call.check_arity(4, 1)
    size = block_size(call)
    call.error_if(size == 1, "block_size == 1")
    if call.out_dtype() != "FP32":
        call.fail(f"out_t {call.out_dtype()} != FP32")
    call.error_if(call.in_dtype(0) != call.in_dtype(2), "A_t != B_t")
    a_shape, b_shape, o_shape = (
        call.input_decls[0].shape,
        call.input_decls[2].shape,
        call.out_shape(),
    )
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


@register(
    "CONV2D_BLOCK_SCALED",
    operands=("input_data", "input_scale", "weight_data", "weight_scale", "bias", "pad", "stride", "dilation"),
    compliance=DOT_PRODUCT, kernel_size=input_dims(2, (1, 2, 3), rank=4),
    extensions=("EXT-MX-COMMON", "EXT-MXFP-CONV"),
)
@_quiet
def conv2d_block_scaled(call: OpCall) -> list[np.ndarray]:
    """CONV2D_BLOCK_SCALED (TOSA 1.1): block-scaled CONV2D, fp32 bias and output.

    Inputs input_data, input_scale, weight_data, weight_scale, bias [BC], pad [4], stride [2],
    dilation [2] (shape_t). Padding reads as value 0 (its scale is 1).
    """
    call.check_arity(8, 1)
    size = block_size(call)
    call.error_if(size == 1, "block_size == 1")
    if call.out_dtype() != "FP32":
        call.fail(f"out_t {call.out_dtype()} != FP32")
    call.error_if(call.in_dtype(4) != "FP32", "bias element type != out_t")
    call.error_if(call.in_dtype(0) != call.in_dtype(2), "in_t != weight_t")
    # the spec's type table has every MX element type but MXINT8 (the reference model agrees)
    call.error_if(call.in_dtype(0) == "MXINT8", "in_t mxint8_t not supported")
    for i, rank, what in (
        (0, 4, "input_data"),
        (1, 4, "input_scale"),
        (2, 4, "weight_data"),
        (3, 4, "weight_scale"),
        (4, 1, "bias"),
    ):
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
