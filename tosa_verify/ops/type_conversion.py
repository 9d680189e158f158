"""Type conversion operators (spec chapter "Type Conversion"): CAST, RESCALE.

Integer arithmetic is done in int64 and wrapped or saturated explicitly. Float results are rounded
once, to nearest even, straight from float64 (which holds every TOSA input value exactly).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from ..numerics import apply_scale_16, apply_scale_32, int_range, round_to_float, saturate, wrap
from ._layout_support import check_rank
from ._levels import MAX_RANK
from .registry import OpCall, register, register_prepare

_FLOATS = ("FP16", "BF16", "FP32", "FP8E4M3", "FP8E5M2")
_INTS = ("INT8", "INT16", "INT32")

#: CAST in_t -> allowed out_t (spec supported data types table, TOSA 1.0).
_CAST_TYPES: dict[str, tuple[str, ...]] = {
    "BOOL": ("INT8", "INT16", "INT32"),
    "INT8": ("BOOL", "INT16", "INT32", "FP16", "BF16", "FP32"),
    "INT16": ("BOOL", "INT8", "INT32", "FP16", "BF16", "FP32"),
    "INT32": ("BOOL", "INT8", "INT16", "FP16", "BF16", "FP32"),
    "BF16": ("INT8", "INT16", "INT32", "FP8E4M3", "FP8E5M2", "FP32"),
    "FP8E4M3": ("FP16", "BF16", "FP32"),
    "FP8E5M2": ("FP16", "BF16", "FP32"),
    "FP16": ("INT8", "INT16", "INT32", "FP8E4M3", "FP8E5M2", "FP32"),
    "FP32": ("INT8", "INT16", "INT32", "FP8E4M3", "FP8E5M2", "BF16", "FP16"),
}


def _widen(x: np.ndarray) -> np.ndarray:
    """float64 copy of ``x``: exact for int32 and every TOSA float type."""
    with np.errstate(invalid="ignore"):  # ml_dtypes warns when widening a NaN
        return x.astype(np.float64)


@register("CAST")
def cast(call: OpCall) -> list[np.ndarray]:
    """CAST: convert every element from in_t to out_t.

    * to BOOL: ``in != 0``; from BOOL: 1 or 0.
    * integer to integer: sign-extend when widening, two's-complement truncate when narrowing.
    * float to integer: round to nearest, ties to even, then saturate (NaN is unpredictable).
    * to float: round to nearest even from the exact value; overflow gives infinity (NaN for
      FP8E4M3, OCP non-saturating mode).
    """
    call.check_arity(1, 1)
    in_t, out_t = call.in_dtype(), call.out_dtype()
    call.error_if(out_t not in _CAST_TYPES.get(in_t, ()), f"unsupported CAST {in_t} -> {out_t}")
    shape = tuple(call.input_decls[0].shape)
    check_rank(call, len(shape), 0, MAX_RANK, "input")
    call.error_if(tuple(call.out_shape()) != shape, "shape(output) != shape(input)")
    x = call.inputs[0]
    working = dtype_info(out_t).working
    if out_t == "BOOL":
        return [x != 0]
    if in_t == "BOOL":
        return [x.astype(working)]
    if out_t in _FLOATS:
        # one rounding from the exact value: the spec's round_to_nearest_float
        return [round_to_float(_widen(x), out_t)]
    if in_t in _FLOATS:
        xf = _widen(x)
        call.require(
            not np.isnan(xf).any(), "input is not NaN (float to integer of NaN is unpredictable)"
        )
        # round_to_nearest_int (np.rint: ties to even), then clip; clipping in float64 first keeps
        # infinities and huge values out of the int64 conversion.
        lo, hi = int_range(out_t)
        return [np.clip(np.rint(xf), lo, hi).astype(working)]
    # integer -> integer: sign_extend or truncate
    return [wrap(x.astype(np.int64), out_t).astype(working)]


#: RESCALE in_t -> allowed out_t.
_RESCALE_TYPES: dict[str, tuple[str, ...]] = {
    "INT8": _INTS,
    "INT16": _INTS,
    "INT32": _INTS,
    "INT48": _INTS,
}


def _zero_point(call: OpCall, i: int, dtype: str, unsigned: bool) -> int:
    """Zero-point operand ``i`` (a [1] tensor of ``dtype``), zero- or sign-extended."""
    call.error_if(call.in_dtype(i) != dtype, f"zero point type {call.in_dtype(i)} != {dtype}")
    call.error_if(tuple(call.input_decls[i].shape) != (1,), f"shape of zero point input {i} != [1]")
    zp = int(np.asarray(call.inputs[i]).reshape(-1)[0])
    if unsigned:
        zp &= (1 << dtype_info(dtype).bits) - 1
    return zp


@register("RESCALE")
def rescale(call: OpCall) -> list[np.ndarray]:
    """RESCALE: ``out = clip(apply_scale(in - input_zp, multiplier, shift) + output_zp)``.

    ``scale32`` selects apply_scale_32 (INT32 multiplier, SINGLE/INEXACT/DOUBLE_ROUND) or
    apply_scale_16 (INT16 multiplier); ``per_channel`` indexes multiplier and shift by the last
    axis. Unsigned INT8/INT16 values travel as the bit patterns of the signed working dtype, like
    tosa_reference_model's inputs and outputs.
    """
    return [_rescale(call, call.inputs[0], _rescale_setup(call))]


@register_prepare("RESCALE")
def prepare_rescale(call: OpCall):
    """RESCALE with constant multiplier, shift and zero points: every check but the data's, once."""
    if len(call.inputs) != 5 or any(v is None for v in call.inputs[1:]):
        return None
    params = _rescale_setup(call)
    fast = _proven_in_range(params)
    if fast is None:
        return lambda run: [_rescale(run, run.inputs[0], params)]
    m, s, rounding, input_zp, mask, lo, hi, working = fast

    def kernel(run: OpCall) -> list[np.ndarray]:
        value = run.inputs[0].astype(np.int64)
        if mask:
            value &= mask  # zero_extend
        if input_zp:
            value -= input_zp
        value *= m
        value += rounding
        value >>= s
        np.maximum(value, lo, out=value)
        np.minimum(value, hi, out=value)
        return [value.astype(working)]

    return kernel


def _proven_in_range(params: tuple):
    """Parameters of a RESCALE whose data REQUIREs hold for *every* input value, else None.

    The scaled value is monotonic in the input (multiplier >= 0), so the extremes of the input
    type bound every intermediate: when they pass the REQUIREs (value within the shift's range,
    results within int32), no input can fail them, and a run skips the checks. Kept to the
    common case: signed output, single rounding (or double rounding with every shift <= 31,
    where it is the same), no int64 overflow in the product.
    """
    (in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned, input_zp, output_zp,
     m, s, bounds) = params
    ms, ss = np.atleast_1d(m).tolist(), np.atleast_1d(s).tolist()
    if output_unsigned or (rounding_mode == "DOUBLE_ROUND" and max(ss) > 31):
        return None
    lo_in, hi_in = int_range(in_t, unsigned=input_unsigned)
    vmin, vmax = lo_in - input_zp, hi_in - input_zp
    # every int64 intermediate of the kernel below, bounded
    if max(abs(vmin), abs(vmax)) * max(ms) + (abs(output_zp) + 1 << max(ss)) >= 1 << 62:
        return None
    lo32, hi32 = _INT32_RANGE
    for mc, sc in zip(ms, ss, strict=True):
        if scale32 and not (-(1 << (sc - 1)) <= vmin and vmax < (1 << (sc - 1))):
            return None
        for v in (vmin, vmax):
            r = (v * mc + (1 << (sc - 1))) >> sc
            if not (lo32 <= r <= hi32 and lo32 <= r + output_zp <= hi32):
                return None
    # (v * m + round) >> s, then + output_zp: folded into the rounding term, exact because the
    # zero point is an integer: ((v*m + round) >> s) + zp == (v*m + round + (zp << s)) >> s.
    shift = s if not np.ndim(s) else np.asarray(s, np.int64)
    mult = m if not np.ndim(m) else np.asarray(m, np.int64)
    rounding = (np.int64(1) << (shift - 1)) + (np.int64(output_zp) << shift)
    lo, hi = int_range(out_t)
    mask = (1 << dtype_info(in_t).bits) - 1 if input_unsigned else 0
    return mult, shift, rounding, input_zp, mask, np.int64(lo), np.int64(hi), dtype_info(out_t).working


def _rescale_setup(call: OpCall) -> tuple:
    """The ERROR_IFs and the scale REQUIREs of RESCALE; its parameters for :func:`_rescale`."""
    call.check_arity(5, 1)
    in_t, out_t = call.in_dtype(0), call.out_dtype()
    call.error_if(
        out_t not in _RESCALE_TYPES.get(in_t, ()), f"unsupported RESCALE {in_t} -> {out_t}"
    )
    attrs = call.attrs
    scale32 = bool(attrs.get("scale32", False))
    rounding_mode = attrs.get("rounding_mode", "SINGLE_ROUND")
    per_channel = bool(attrs.get("per_channel", False))
    input_unsigned = bool(attrs.get("input_unsigned", False))
    output_unsigned = bool(attrs.get("output_unsigned", False))
    shape = tuple(call.input_decls[0].shape)
    check_rank(call, len(shape), 0, MAX_RANK, "input")
    call.error_if(tuple(call.out_shape()) != shape, "shape(output) != shape(input)")
    call.error_if(
        rounding_mode not in ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND"),
        f"rounding_mode {rounding_mode} unknown",
    )

    # Attribute/type ERROR_IFs of the pseudocode (the zero-point ones follow below).
    call.error_if(scale32 and in_t == "INT48", "scale32 && is_same<in_t,i48_t>()")
    call.error_if(
        not scale32 and rounding_mode == "DOUBLE_ROUND",
        "!scale32 && (rounding_mode == DOUBLE_ROUND)",
    )
    call.error_if(input_unsigned and output_unsigned, "input_unsigned && output_unsigned")
    call.error_if(out_t == "INT32" and input_unsigned, "is_same<out_t,i32_t>() && input_unsigned")
    call.error_if(in_t == "INT32" and output_unsigned, "is_same<in_t,i32_t>() && output_unsigned")
    call.error_if(in_t == "INT48" and output_unsigned, "is_same<in_t,i48_t>() && output_unsigned")
    call.error_if(in_t == "INT48" and input_unsigned, "is_same<in_t, i48_t> && input_unsigned")
    call.error_if(in_t == "INT32" and input_unsigned, "is_same<in_t, i32_t> && input_unsigned")
    call.error_if(out_t == "INT32" and output_unsigned, "is_same<out_t, i32_t> && output_unsigned")
    call.error_if(per_channel and len(shape) < 1, "per_channel && rank(input) < 1")

    # multiplier [NC] (INT32 if scale32 else INT16) and shift [NC] (INT8)
    nc = shape[-1] if per_channel else 1
    mul_t = "INT32" if scale32 else "INT16"
    call.error_if(call.in_dtype(1) != mul_t, f"multiplier type {call.in_dtype(1)} != {mul_t}")
    call.error_if(call.in_dtype(2) != "INT8", f"shift type {call.in_dtype(2)} != INT8")
    call.error_if(tuple(call.input_decls[1].shape) != (nc,), f"shape(multiplier) != [NC] = [{nc}]")
    call.error_if(tuple(call.input_decls[2].shape) != (nc,), f"shape(shift) != [NC] = [{nc}]")

    input_zp = _zero_point(call, 3, in_t, input_unsigned)
    output_zp = _zero_point(call, 4, out_t, output_unsigned)
    call.error_if(
        in_t != "INT8" and (in_t != "INT16" or not input_unsigned) and input_zp != 0,
        "!is_same<in_t,i8_t>() && (!is_same<in_t,i16_t>() || input_unsigned == false) && input_zp != 0",
    )
    call.error_if(
        out_t != "INT8" and (out_t != "INT16" or not output_unsigned) and output_zp != 0,
        "!is_same<out_t,i8_t>() && (!is_same<out_t,i16_t>() || output_unsigned == false) && output_zp != 0",
    )
    call.error_if(
        in_t == "INT16" and input_unsigned and input_zp not in (0, 32768),
        "is_same<in_t,i16_t>() && input_unsigned == true && input_zp != 0 && input_zp != 32768",
    )
    call.error_if(
        out_t == "INT16" and output_unsigned and output_zp not in (0, 32768),
        "is_same<out_t,i16_t>() && output_unsigned == true && output_zp != 0 && output_zp != 32768",
    )

    multiplier = call.inputs[1].astype(np.int64).reshape(-1)
    shift = call.inputs[2].astype(np.int64).reshape(-1)
    # REQUIREs of apply_scale_32/16 on the scale factors actually used.
    if np.prod(shape, dtype=np.int64) > 0:
        call.require(bool(np.all(multiplier >= 0)), "multiplier >= 0")
        call.require(bool(np.all((shift >= 2) & (shift <= 62))), "2 <= shift && shift <= 62")

    m = multiplier if per_channel else multiplier[0]
    s = shift if per_channel else shift[0]
    bounds = (-np.left_shift(np.int64(1), s - 1), np.left_shift(np.int64(1), s - 1)) if scale32 else None
    return (in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned, input_zp, output_zp,
            m, s, bounds)


def _within(value: np.ndarray, lo, hi, *, inclusive: bool = True) -> bool:
    """Every element in [lo, hi] (or [lo, hi) when not ``inclusive``); scalars bound by min/max."""
    if not value.size:
        return True
    if np.ndim(lo) == 0 and np.ndim(hi) == 0:
        top = value.max()
        return bool(value.min() >= lo and (top <= hi if inclusive else top < hi))
    return bool(np.all((value >= lo) & ((value <= hi) if inclusive else (value < hi))))


def _rescale(call: OpCall, x: np.ndarray, params: tuple) -> np.ndarray:
    """RESCALE of ``x`` with the parameters of :func:`_rescale_setup`, with its data REQUIREs."""
    (in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned, input_zp, output_zp,
     m, s, bounds) = params
    value = x.astype(np.int64)
    if input_unsigned:
        value = value & ((1 << dtype_info(in_t).bits) - 1)  # zero_extend
    value = value - input_zp
    # Per-channel: multiplier[c] with c = index[rank - 1] broadcasts along the last axis.
    lo32, hi32 = _INT32_RANGE
    if scale32:
        call.require(
            _within(value, *bounds, inclusive=False),
            "value >= (-1 << (shift - 1)) && value < (1 << (shift - 1))",
        )
        # INEXACT_ROUND permits any result within its error bound, and the exact single rounding
        # is always inside it (spec note). tosa_reference_model instead returns the lower edge
        # of the permitted range, so INEXACT_ROUND results are compared with the verifier's
        # RESCALE_INEXACT mode, not bit for bit.
        result = apply_scale_32(value, m, s, double_round=rounding_mode == "DOUBLE_ROUND")
    else:
        result = apply_scale_16(value, m, s)
        call.require(_within(result, lo32, hi32), "apply_scale_16 result within int32")

    # apply_add_s<int32_t>(result, output_zp) REQUIREs the sum to fit int32.
    result = result + output_zp
    call.require(_within(result, lo32, hi32), "apply_add_s<int32_t>: result + output_zp within int32")
    if output_unsigned:
        # Clamp to [0, 2**bits - 1] and keep the bit pattern in the signed working dtype. (Read
        # literally, apply_clip_u's zero-extending compares would send negative results to the
        # maximum; the intent, and tosa_reference_model, clamp them to 0.)
        out = wrap(saturate(result, out_t, unsigned=True), out_t)
    else:
        out = saturate(result, out_t)
    return out.astype(dtype_info(out_t).working)


_INT32_RANGE = int_range("INT32")
