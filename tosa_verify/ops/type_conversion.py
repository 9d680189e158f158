"""Type conversion operators (spec chapter "Type Conversion"): CAST, RESCALE, and from the TOSA 1.1
draft CAST_TO_BLOCK_SCALED and CAST_FROM_BLOCK_SCALED.

Integer arithmetic is done in int64 and wrapped or saturated explicitly. Float results are rounded
once, to nearest even, straight from float64 (which holds every TOSA input value exactly).
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import dtype_info, float_values
from ..numerics import (
    apply_scale_16,
    apply_scale_32,
    clip_ufunc,
    int_range,
    round_to_float,
    saturate,
    wrap,
)
from ._layout_support import check_rank
from ._levels import MAX_RANK
from ._mx import MX_ELEMENT_TYPES, SCALE_TYPE, block_size, expand_scales, scale_shape
from ._rescale_common import common_rescale
from ._rescale_fast import fast_rescale
from ._rescale_proof import (
    _INT32_RANGE,
    _SIGNED_RANGES,
    _make_channels,
    _ndim,
    _proven_in_range,
    _safe_inputs,
    as_int64,
    proven_per_tensor,
    window_per_tensor,
)
from ._version import is_tosa_11
from .facts import FLOAT_DTYPES, MX_DTYPES, Compliance, rescale_inexact
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


#: The EXT-INT64 rows of the 1.1 draft: bool/i32 -> i64 and i64 -> bool/i32.
_CAST_INT64: dict[str, tuple[str, ...]] = {"BOOL": ("INT64",), "INT32": ("INT64",), "INT64": ("BOOL", "INT32")}


def _widen(x: np.ndarray) -> np.ndarray:
    """float64 copy of ``x``: exact for int32 and every TOSA float type."""
    with np.errstate(invalid="ignore"):  # ml_dtypes warns when widening a NaN
        return x.astype(np.float64)


@register("CAST", compliance=Compliance("ULP", {"ulp": 0.5, "ulp_lower": 1.0}))
def cast(call: OpCall) -> list[np.ndarray]:
    """CAST: convert every element from in_t to out_t.

    * to BOOL: ``in != 0``; from BOOL: 1 or 0.
    * integer to integer: sign-extend when widening, two's-complement truncate when narrowing.
    * float to integer: round to nearest, ties to even, then saturate (NaN is unpredictable).
    * to float: round to nearest even from the exact value; overflow gives infinity (NaN for
      FP8E4M3, OCP non-saturating mode).
    """
    in_t, out_t = _cast_checks(call)
    return [_cast_values(call, call.inputs[0], in_t, out_t)]


@register_prepare("CAST")
def prepare_cast(call: OpCall):
    """CAST with its (static) checks made once; a run converts (with the NaN REQUIRE of a float
    to integer CAST)."""
    in_t, out_t = _cast_checks(call)
    return lambda run: [_cast_values(run, run.inputs[0], in_t, out_t)]


def _cast_checks(call: OpCall) -> tuple[str, str]:
    """The ERROR_IFs of CAST (declarations only); returns ``(in_t, out_t)``."""
    call.check_arity(1, 1)
    in_t, out_t = call.in_dtype(), call.out_dtype()
    allowed = _CAST_TYPES.get(in_t, ()) + (_CAST_INT64.get(in_t, ()) if is_tosa_11(call) else ())
    if out_t not in allowed:
        call.fail(f"unsupported CAST {in_t} -> {out_t}")
    shape = tuple(call.input_decls[0].shape)
    check_rank(call, len(shape), 0, MAX_RANK, "input")
    call.error_if(tuple(call.out_shape()) != shape, "shape(output) != shape(input)")
    return in_t, out_t


def _cast_values(call: OpCall, x: np.ndarray, in_t: str, out_t: str) -> np.ndarray:
    """``x`` converted from ``in_t`` to ``out_t`` (see :func:`cast`)."""
    working = dtype_info(out_t).working
    if out_t == "BOOL":
        return x != 0
    if in_t == "BOOL":
        return x.astype(working)
    if out_t in _FLOATS:
        # one rounding from the exact value: the spec's round_to_nearest_float
        return round_to_float(_widen(x), out_t)
    if in_t in _FLOATS:
        xf = _widen(x)
        call.require(
            not np.isnan(xf).any(), "input is not NaN (float to integer of NaN is unpredictable)"
        )
        # round_to_nearest_int (np.rint: ties to even), then clip; clipping in float64 first keeps
        # infinities and huge values out of the int64 conversion.
        lo, hi = int_range(out_t)
        return clip_ufunc(np.rint(xf), lo, hi).astype(working)
    # integer -> integer: sign_extend or truncate
    return wrap(x.astype(np.int64), out_t).astype(working)


#: RESCALE in_t -> allowed out_t.
_RESCALE_TYPES: dict[str, tuple[str, ...]] = {
    "INT8": _INTS,
    "INT16": _INTS,
    "INT32": _INTS,
    "INT48": _INTS,
}


def _zero_point(call: OpCall, i: int, dtype: str, unsigned: bool) -> int:
    """Zero-point operand ``i`` (a [1] tensor of ``dtype``), zero- or sign-extended."""
    decl = call.input_decls[i]
    if decl.dtype != dtype:  # (messages formatted only for a failing check)
        call.fail(f"zero point type {decl.dtype} != {dtype}")
    shape = decl.shape
    if shape != (1,) and tuple(shape) != (1,):  # (a tuple compared as it is, a list converted)
        call.fail(f"shape of zero point input {i} != [1]")
    value = call.inputs[i]
    # (one numpy call: the first element; np.asarray only for a value that is no array)
    zp = int(value.item(0) if type(value) is np.ndarray else np.asarray(value).item(0))
    if unsigned:
        zp &= (1 << dtype_info(dtype).bits) - 1
    return zp


@register(
    "RESCALE", operands=("input", "multiplier", "shift", "input_zp", "output_zp"), compliance=rescale_inexact,
)
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
    """RESCALE with constant multiplier, shift and zero points: every check but the data's, once.

    The kernel closes over the parameters only (errors go through the run's call), so the
    RESCALEs of one plan with equal parameters share one: the plan's ``call.runtime.kernels``
    (see :class:`tosa_verify.plan._PlanRuntime`) holds them by their parameters, every check
    above still made per operator.
    """
    inputs = call.inputs
    # (four identity tests: a generator over them costs several times as much, per RESCALE)
    if len(inputs) != 5 or inputs[1] is None or inputs[2] is None or inputs[3] is None or inputs[4] is None:
        return None
    common = common_rescale(call)
    if common is not None:  # (most RESCALEs of a lowered graph: every check passed, in Python's ints)
        return _common_kernel(call, common)
    params, ms, ss, extremes = _setup(call)
    if not ms:  # per channel, no channel (an empty tensor): the op function runs, nothing to prepare
        return None
    # The float64 kernel pays off on large tensors only: on small ones numpy's fixed cost per
    # call dominates, and the int64 kernel makes fewer calls (and the prepare no float bounds).
    large = math.prod(call.input_decls[0].shape) > SMALL_RESCALE
    kernels = getattr(call.runtime, "kernels", None)
    if kernels is None:
        return _rescale_kernel(params, ms, ss, large, extremes)
    # (params[8]: a per-channel multiplier is an array, even of one channel: not the same kernel)
    # (per channel, the int64 arrays' bytes: equal exactly when the channels are, and hashed
    # without a tuple of hundreds of ints)
    channels = (params[8].tobytes(), params[9].tobytes()) if _ndim(params[8]) else (tuple(ms), tuple(ss))
    key = ("RESCALE", *params[:8], _ndim(params[8]), *channels, large)
    kernel = kernels.get(key)
    if kernel is None:
        kernel = kernels[key] = _rescale_kernel(params, ms, ss, large, extremes)
    return kernel


def _rescale_kernel(params: tuple, ms: list[int], ss: list[int], large: bool,
                    extremes: tuple[int, int, int, int] | None):
    """The kernel of a prepared RESCALE (see :func:`prepare_rescale`); ``extremes``: as
    :func:`_setup` returns them."""
    finish = fast_rescale if large else _unchanged
    lists = _make_channels(ms, ss, extremes)
    fast = _proven_in_range(params, lists=lists)
    if fast is not None:
        if not large and params[0] == "INT8" and not _ndim(params[8]):
            return _lookup_kernel(fast)

        def kernel(run: OpCall) -> list[np.ndarray]:  # no input can fail a REQUIRE
            return [_fast_rescale(run.inputs[0], fast)]

        return finish(params, kernel)  # float64 where a bound proves it exact
    return _window_kernel(params, _safe_inputs(params, lists), finish)


def _window_kernel(params: tuple, window: tuple | None, finish):
    """The kernel of a RESCALE whose REQUIREs may fail: the check-free path for a run's data within
    ``window`` (``(lo, hi, fast parameters)``, see :func:`_safe_inputs`), else the checked one."""
    if window is None:
        return finish(params, lambda run: [_rescale(run, run.inputs[0], params)])
    lo_x, hi_x, fast = window

    def checked_kernel(run: OpCall) -> list[np.ndarray]:
        # the REQUIREs hold for every input in [lo_x, hi_x] (monotonic scaling): two
        # reductions decide whether this run's data can take the check-free path
        x = run.inputs[0]
        if x.size and lo_x <= x.min() and x.max() <= hi_x:
            return [_fast_rescale(x, fast)]
        return [_rescale(run, x, params)]

    return finish(params, checked_kernel)


#: Largest input (elements) whose prepared RESCALE uses the int64 kernel (or, INT8 per tensor, a
#: lookup table) rather than the float64 blocks of ``_rescale_fast``.
SMALL_RESCALE = 8192


def _common_kernel(call: OpCall, common: tuple):
    """The kernel of a RESCALE :func:`common_rescale` accepted (``common``: its result), from the
    per-tensor proofs in Python's ints; shared by the plan's RESCALEs of equal parameters, as in
    :func:`prepare_rescale`."""
    kernels = getattr(call.runtime, "kernels", None)
    large = math.prod(call.input_decls[0].shape) > SMALL_RESCALE
    key = ("RESCALE1", *common, large)
    kernel = None if kernels is None else kernels.get(key)
    if kernel is None:
        in_t, out_t, rounding_mode, input_zp, output_zp, m, s = common
        lo_in, hi_in = _SIGNED_RANGES[in_t]
        fast = proven_per_tensor(out_t, input_zp, output_zp, m, s, lo_in, hi_in)
        if fast is not None and not large and in_t == "INT8":
            kernel = _lookup_kernel(fast)
        else:  # (what _setup and _rescale_kernel make of the same RESCALE)
            half = 1 << (s - 1)
            params = (in_t, out_t, True, rounding_mode, False, False, input_zp, output_zp, m, s, (-half, half))
            finish = fast_rescale if large else _unchanged
            if fast is not None:
                fast = as_int64(fast)
                kernel = finish(params, lambda run: [_fast_rescale(run.inputs[0], fast)])
            else:
                kernel = _window_kernel(params, window_per_tensor(in_t, out_t, input_zp, output_zp, m, s), finish)
        if kernels is not None:
            kernels[key] = kernel
    return kernel


def _unchanged(params: tuple, kernel):
    """The kernel as it is (in place of :func:`fast_rescale` for small tensors)."""
    return kernel


_BIT_PATTERNS = np.arange(256, dtype=np.uint8).view(np.int8)
#: the input value of each bit pattern, as int64: signed, and zero-extended (input_unsigned)
_PATTERN_VALUES = {False: _BIT_PATTERNS.astype(np.int64), True: np.arange(256, dtype=np.int64)}
for _values in _PATTERN_VALUES.values():
    _values.flags.writeable = False


def _lookup_kernel(fast: tuple):
    """A per-tensor RESCALE of INT8 input whose REQUIREs hold for every input: the outputs of all
    256 input values, as :func:`_fast_rescale` computes them, indexed by the input's bit pattern."""
    m, s, rounding, input_zp, mask, lo, hi, working = fast
    # (Python's ints for the scalar arithmetic: numpy's scalars cost more per operation)
    m, s = int(m), int(s)
    # _fast_rescale's formula in fewer numpy calls: the input values are precomputed (masked
    # when unsigned), and (v - zp) * m + rounding == v * m + (rounding - zp * m), exact in int64
    # (the prepare bounded |v - zp| * m + |rounding| < 2**62, and |zp * m| < 2**40)
    offset = int(rounding) - input_zp * m
    table = _PATTERN_VALUES[bool(mask)] * m
    table += offset
    table >>= s
    # the scaled value is non-decreasing in the input (m >= 0): a clip whose bound the extreme
    # input values do not cross changes nothing, and is left out
    lowest, highest = (0, 255) if mask else (-128, 127)
    if (lowest * m + offset) >> s < lo:
        np.maximum(table, lo, out=table)
    if (highest * m + offset) >> s > hi:
        np.minimum(table, hi, out=table)
    table = table.astype(working)  # entry i: the input whose bit pattern is i

    def lookup_kernel(run: OpCall) -> list[np.ndarray]:
        return [table.take(run.inputs[0].view(np.uint8))]

    return lookup_kernel


def _fast_rescale(x: np.ndarray, fast: tuple) -> np.ndarray:
    """RESCALE of ``x`` whose REQUIREs are known to hold (see :func:`_proven_in_range`)."""
    m, s, rounding, input_zp, mask, lo, hi, working = fast
    value = x.astype(np.int64)
    if mask:
        value &= mask  # zero_extend
    if input_zp:
        value -= input_zp
    value *= m
    value += rounding
    value >>= s
    np.maximum(value, lo, out=value)
    np.minimum(value, hi, out=value)
    return value.astype(working)


def _rescale_setup(call: OpCall) -> tuple:
    """The ERROR_IFs and the scale REQUIREs of RESCALE; its parameters for :func:`_rescale`."""
    return _setup(call)[0]


def _setup(call: OpCall) -> tuple[tuple, list[int], list[int], tuple[int, int, int, int] | None]:
    """:func:`_rescale_setup`'s parameters, the multipliers and shifts as lists of ints, and
    their extremes (smallest and largest multiplier, shift; None for an empty tensor, whose
    scales are not checked).

    Each check is an ``if`` in front of ``error_if`` (one call per failing check, not per check:
    a prepare runs this once per RESCALE of a graph, the most common operator of lowered ones).
    """
    if len(call.inputs) != 5 or len(call.output_decls) != 1:
        call.check_arity(5, 1)
    decls = call.input_decls
    in_t, out_t = decls[0].dtype, call.output_decls[0].dtype
    if out_t not in _RESCALE_TYPES.get(in_t, ()):  # (messages formatted only for a failing check)
        call.fail(f"unsupported RESCALE {in_t} -> {out_t}")
    attrs = call.attrs
    scale32 = bool(attrs.get("scale32", False))
    rounding_mode = attrs.get("rounding_mode", "SINGLE_ROUND")
    per_channel = bool(attrs.get("per_channel", False))
    input_unsigned = bool(attrs.get("input_unsigned", False))
    output_unsigned = bool(attrs.get("output_unsigned", False))
    shape = decls[0].shape
    if type(shape) is not tuple:
        shape = tuple(shape)
    if len(shape) > MAX_RANK:  # (check_rank: a rank is >= 0)
        check_rank(call, len(shape), 0, MAX_RANK, "input")
    out_shape = call.output_decls[0].shape
    if out_shape != shape and tuple(out_shape) != shape:
        call.fail("shape(output) != shape(input)")
    if rounding_mode not in ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND"):
        call.fail(f"rounding_mode {rounding_mode} unknown")
    # (the common case, signed and no INT48/DOUBLE_ROUND mismatch, passes every check there)
    if input_unsigned or output_unsigned or in_t == "INT48" or rounding_mode == "DOUBLE_ROUND":
        _check_attributes(call, in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned)
    if per_channel and not shape:
        call.fail("per_channel && rank(input) < 1")

    # multiplier [NC] (INT32 if scale32 else INT16) and shift [NC] (INT8)
    nc = shape[-1] if per_channel else 1
    mul_t = "INT32" if scale32 else "INT16"
    if decls[1].dtype != mul_t:
        call.fail(f"multiplier type {decls[1].dtype} != {mul_t}")
    if decls[2].dtype != "INT8":
        call.fail(f"shift type {decls[2].dtype} != INT8")
    if decls[1].shape != (nc,) and tuple(decls[1].shape) != (nc,):
        call.fail(f"shape(multiplier) != [NC] = [{nc}]")
    if decls[2].shape != (nc,) and tuple(decls[2].shape) != (nc,):
        call.fail(f"shape(shift) != [NC] = [{nc}]")

    input_zp = _zero_point(call, 3, in_t, input_unsigned)
    output_zp = _zero_point(call, 4, out_t, output_unsigned)
    if input_zp or output_zp or input_unsigned or output_unsigned:  # (else every check passes)
        _check_zero_points(call, in_t, out_t, input_unsigned, output_unsigned, input_zp, output_zp)

    ms, ss = _int_list(call.inputs[1]), _int_list(call.inputs[2])
    # REQUIREs of apply_scale_32/16 on the scale factors actually used.
    extremes = None
    if 0 not in shape:  # (an empty tensor uses none; shapes are checked to have nc entries)
        # (Python's min/max over the few channels: cheaper than numpy's reductions)
        extremes = (ms[0], ms[0], ss[0], ss[0]) if len(ms) == 1 else (min(ms), max(ms), min(ss), max(ss))
        if extremes[0] < 0:
            call.require(False, "multiplier >= 0")
        if not (2 <= extremes[2] and extremes[3] <= 62):
            call.require(False, "2 <= shift && shift <= 62")
    if per_channel:
        m, s = call.inputs[1].astype(np.int64).reshape(-1), call.inputs[2].astype(np.int64).reshape(-1)
        # (shifts proven in 2..62 above: 1 << (s - 1) looked up, one numpy call instead of two)
        half = None if not scale32 else _HALVES[s] if extremes is not None else np.left_shift(np.int64(1), s - 1)
    else:  # Python's ints (the checks and proofs read them; a prepared kernel makes its int64 scalars once)
        m, s = ms[0], ss[0]
        half = None if not scale32 else 1 << (s - 1) if 1 <= s <= 63 else np.left_shift(np.int64(1), np.int64(s) - 1)
    bounds = (-half, half) if scale32 else None
    params = (in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned, input_zp, output_zp,
              m, s, bounds)
    return params, ms, ss, extremes


def _int_list(value: np.ndarray) -> list[int]:
    """A constant multiplier or shift, flattened to a list of ints (one numpy call when 1-D)."""
    return value.tolist() if value.ndim == 1 else value.reshape(-1).tolist()


#: 1 << (s - 1) for each shift s in 1..63 as int64 (entry 0 unused: a checked shift is >= 2)
_HALVES = np.left_shift(np.int64(1), np.arange(64, dtype=np.int64) - 1)
_HALVES[0] = 0
_HALVES.flags.writeable = False


def _check_attributes(call: OpCall, in_t: str, out_t: str, scale32: bool, rounding_mode: str,
                      input_unsigned: bool, output_unsigned: bool) -> None:
    """The attribute/type ERROR_IFs of RESCALE's pseudocode, in its order."""
    if scale32 and in_t == "INT48":
        call.fail("scale32 && is_same<in_t,i48_t>()")
    if not scale32 and rounding_mode == "DOUBLE_ROUND":
        call.fail("!scale32 && (rounding_mode == DOUBLE_ROUND)")
    if not (input_unsigned or output_unsigned):
        return  # (the common case: every check below needs an unsigned side)
    call.error_if(input_unsigned and output_unsigned, "input_unsigned && output_unsigned")
    call.error_if(out_t == "INT32" and input_unsigned, "is_same<out_t,i32_t>() && input_unsigned")
    call.error_if(in_t == "INT32" and output_unsigned, "is_same<in_t,i32_t>() && output_unsigned")
    call.error_if(in_t == "INT48" and output_unsigned, "is_same<in_t,i48_t>() && output_unsigned")
    call.error_if(in_t == "INT48" and input_unsigned, "is_same<in_t, i48_t> && input_unsigned")
    call.error_if(in_t == "INT32" and input_unsigned, "is_same<in_t, i32_t> && input_unsigned")
    call.error_if(out_t == "INT32" and output_unsigned, "is_same<out_t, i32_t> && output_unsigned")


def _check_zero_points(call: OpCall, in_t: str, out_t: str, input_unsigned: bool, output_unsigned: bool,
                       input_zp: int, output_zp: int) -> None:
    """The zero-point ERROR_IFs of RESCALE's pseudocode, in its order."""
    if in_t != "INT8" and (in_t != "INT16" or not input_unsigned) and input_zp != 0:
        call.fail("!is_same<in_t,i8_t>() && (!is_same<in_t,i16_t>() || input_unsigned == false) "
                            "&& input_zp != 0")
    if out_t != "INT8" and (out_t != "INT16" or not output_unsigned) and output_zp != 0:
        call.fail("!is_same<out_t,i8_t>() && (!is_same<out_t,i16_t>() || output_unsigned == false) "
                            "&& output_zp != 0")
    if in_t == "INT16" and input_unsigned and input_zp not in (0, 32768):
        call.fail("is_same<in_t,i16_t>() && input_unsigned == true && input_zp != 0 && input_zp != 32768")
    if out_t == "INT16" and output_unsigned and output_zp not in (0, 32768):
        call.fail("is_same<out_t,i16_t>() && output_unsigned == true && output_zp != 0 "
                            "&& output_zp != 32768")


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
    if scale32 and rounding_mode != "DOUBLE_ROUND" and not input_unsigned and not output_unsigned and x.size:
        # the common case of quantized networks: float64 blocks where a bound proves them exact
        return _rescale_single_round(call, x, input_zp, output_zp, np.atleast_1d(m).astype(np.int64),
                                     np.atleast_1d(s).astype(np.int64), np.ndim(m) > 0, out_t)
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


# --- TOSA 1.1 draft: MX block-scaled casts (EXT-MX*) ---------------------------------------------

#: (normal_max, normal_frac) of the MX element types: the largest normal value and the number of
#: fraction bits; MXINT8 is q / 64 with |q| <= 127.
_MX_FORMATS = {
    "FP8E4M3": (448.0, 3),
    "FP8E5M2": (57344.0, 2),
    "FP6E2M3": (7.5, 3),
    "FP6E3M2": (28.0, 2),
    "FP4E2M1": (6.0, 1),
    "MXINT8": (127.0 / 64.0, 6),
}
_E8M0_MIN, _E8M0_MAX = 2.0**-127, 2.0**127
_BLOCK_FLOATS = ("BF16", "FP32")


def _largest_rounding_to_normal_max(out_dt: str) -> float:
    """Spec get_largest_value_rounding_to_normal_max<out_t>(): normal_max plus half its ulp."""
    largest, frac = _MX_FORMATS[out_dt]
    ulp = 1.0 / 64.0 if out_dt == "MXINT8" else 2.0 ** (np.floor(np.log2(largest)) - frac)
    return largest + 0.5 * ulp


def _block_scales(max_abs: np.ndarray, out_dt: str) -> np.ndarray:
    """Spec calc_block_scale<in_t, fp8ue8m0_t, out_t>(max_abs), elementwise, as float64."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log2(max_abs / _largest_rounding_to_normal_max(out_dt))
        exp = np.ceil(ratio) if out_dt == "FP8E4M3" else np.floor(ratio) + 1
        scale = np.clip(np.exp2(exp), _E8M0_MIN, _E8M0_MAX)
    scale = np.where(max_abs == 0, _E8M0_MIN, scale)
    return np.where(np.isfinite(max_abs), scale, np.nan)


def _round_mx(values: np.ndarray, out_dt: str) -> np.ndarray:
    """round_to_nearest_float<out_t> of float64 ``values`` into an MX element type's working array."""
    if out_dt == "MXINT8":
        # two's complement q / 64; |values| < 127.5 / 64 by the scale choice, NaN has no code
        q = np.clip(np.round(np.nan_to_num(values) * 64.0), -128, 127)
        return q.astype(np.int8)
    return round_to_float(values, out_dt)


def _check_block_shapes(call: OpCall, shape: tuple[int, ...], size: int) -> None:
    """ERROR_IF(rank(shape) == 0 || shape[rank(shape)-1] % block_size != 0), block_size != 1."""
    call.error_if(len(shape) == 0 or shape[-1] % size != 0, "rank(shape) == 0 || shape[rank(shape)-1] % block_size != 0")
    call.error_if(size == 1, "block_size == 1")
    check_rank(call, len(shape), 1, MAX_RANK, "input_data")


@register(
    "CAST_TO_BLOCK_SCALED", compliance=Compliance("ULP", {"ulp": 1.0}, dtypes=MX_DTYPES | {"FP8E4M3", "FP8E5M2"}),
    extensions=("EXT-MX-COMMON",),
)
def cast_to_block_scaled(call: OpCall) -> list[np.ndarray]:
    """CAST_TO_BLOCK_SCALED (TOSA 1.1): float data -> (MX element data, FP8UE8M0 block scales).

    Each block of ``block_size`` innermost elements gets the scale ``calc_block_scale(max |x|)``
    and the elements ``round_to_nearest_float(x / scale)``.
    """
    call.check_arity(1, 2)
    size = block_size(call)
    in_dt, out_dt, scale_dt = call.in_dtype(0), call.out_dtype(0), call.out_dtype(1)
    if in_dt not in _BLOCK_FLOATS:
        call.fail(f"in_t {in_dt} not bf16_t/fp32_t")
    if out_dt not in MX_ELEMENT_TYPES:
        call.fail(f"out_t {out_dt} is not an MX element type")
    if scale_dt != SCALE_TYPE:
        call.fail(f"scale_t {scale_dt} != {SCALE_TYPE}")
    shape = tuple(call.input_decls[0].shape)
    _check_block_shapes(call, shape, size)
    call.error_if(tuple(call.out_shape(0)) != shape, "shape(output_data) != shape")
    call.error_if(tuple(call.out_shape(1)) != scale_shape(shape, size), "shape(output_scale) != out_scale_shape")
    x = _widen(call.inputs[0])
    blocks = x.reshape(*shape[:-1], shape[-1] // size, size)
    with np.errstate(invalid="ignore"):
        # apply_max_s: a NaN anywhere in the block makes max_abs NaN
        max_abs = np.max(np.abs(blocks), axis=-1)
    scales = _block_scales(max_abs, out_dt)
    with np.errstate(invalid="ignore", divide="ignore"):
        data = _round_mx((blocks / scales[..., None]).reshape(shape), out_dt)
    return [data, scales.astype(dtype_info(SCALE_TYPE).working)]


@register(
    "CAST_FROM_BLOCK_SCALED", operands=("input_data", "input_scale"),
    compliance=Compliance("FROM_BLOCK", dtypes=FLOAT_DTYPES | MX_DTYPES), extensions=("EXT-MX-COMMON",),
)
def cast_from_block_scaled(call: OpCall) -> list[np.ndarray]:
    """CAST_FROM_BLOCK_SCALED (TOSA 1.1): (MX element data, FP8UE8M0 scales) -> bf16/fp32.

    ``output = round_to_nearest_float<out_t>(fp32(data) * fp32(scale))``, the product in fp32.
    """
    call.check_arity(2, 1)
    size = block_size(call)
    in_dt, scale_dt, out_dt = call.in_dtype(0), call.in_dtype(1), call.out_dtype()
    if in_dt not in MX_ELEMENT_TYPES:
        call.fail(f"in_t {in_dt} is not an MX element type")
    if scale_dt != SCALE_TYPE:
        call.fail(f"scale_t {scale_dt} != {SCALE_TYPE}")
    if out_dt not in _BLOCK_FLOATS:
        call.fail(f"out_t {out_dt} not bf16_t/fp32_t")
    shape, s_shape = tuple(call.input_decls[0].shape), tuple(call.input_decls[1].shape)
    _check_block_shapes(call, shape, size)
    call.error_if(len(shape) != len(s_shape), "rank(shape) != rank(in_scale_shape)")
    call.error_if(shape[:-1] != s_shape[:-1], "shape[axis_index] != in_scale_shape[axis_index]")
    call.error_if(shape[-1] != s_shape[-1] * size, "shape[rank(shape) - 1] != in_scale_shape[rank(shape) - 1] * block_size")
    call.error_if(tuple(call.out_shape()) != shape, "shape(output_data) != shape")
    values = float_values(call.inputs[0], in_dt).astype(np.float32)
    scales = expand_scales(call.inputs[1], size).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        product = values * scales  # apply_mul_s<fp32_t>: one fp32 rounding (overflow -> inf)
    return [round_to_float(product.astype(np.float64), out_dt)]


def _channel_extremes(x: np.ndarray, per_channel: bool) -> tuple[np.ndarray, np.ndarray]:
    """min and max of ``x`` per last-axis channel (per_channel) or overall, as int64 arrays."""
    if per_channel and x.ndim > 1:
        flat = x.reshape(-1, x.shape[-1])
        return flat.min(axis=0).astype(np.int64), flat.max(axis=0).astype(np.int64)
    if per_channel:
        return x.astype(np.int64), x.astype(np.int64)
    return np.array([x.min()], np.int64), np.array([x.max()], np.int64)


def _rescale_ranges_ok(lo_v: np.ndarray, hi_v: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                       bound: np.ndarray, output_zp: int) -> bool:
    """True when values in [lo_v, hi_v] meet both REQUIREs of RESCALE for every channel."""
    lo32, hi32 = int_range("INT32")
    if not np.all((lo_v >= -bound) & (hi_v < bound)):
        return False
    lo_r = apply_scale_32(lo_v, multiplier, shift) + output_zp
    hi_r = apply_scale_32(hi_v, multiplier, shift) + output_zp
    return bool(np.all((lo_r >= lo32) & (hi_r <= hi32)))


def _rescale_single_round(call: OpCall, x: np.ndarray, input_zp: int, output_zp: int, multiplier: np.ndarray,
                          shift: np.ndarray, per_channel: bool, out_t: str) -> np.ndarray:
    """RESCALE with scale32 and SINGLE_ROUND or INEXACT_ROUND on signed values: the common case
    of quantized networks. Computed in float64 blocks where a bound proves that exact
    (:func:`_rescale_f64`), else in place in int64; both are the integer formula of
    :func:`apply_scale_32`, bit for bit.

    The REQUIREs are checked on per-channel extremes instead of every element: with
    ``multiplier >= 0`` the result ``(v * m + r) >> s`` is non-decreasing in ``v``, so the value
    range holds for every element iff it holds for the channel's min and max, and the result
    range (after ``+ output_zp``) is reached at those same elements.
    """
    bound = np.left_shift(np.int64(1), shift - 1)
    # the whole tensor's extremes stand for every channel's when they already pass the checks
    # below (the checks are monotonic in the range); else the channels' own extremes decide
    lo_x, hi_x = _channel_extremes(x, False)
    if per_channel and not _rescale_ranges_ok(lo_x - input_zp, hi_x - input_zp, multiplier, shift,
                                              bound, output_zp):
        lo_x, hi_x = _channel_extremes(x, True)
    lo_v, hi_v = lo_x - input_zp, hi_x - input_zp
    call.require(bool(np.all((lo_v >= -bound) & (hi_v < bound))),
                 "value >= (-1 << (shift - 1)) && value < (1 << (shift - 1))")
    lo32, hi32 = int_range("INT32")
    lo_r = apply_scale_32(lo_v, multiplier, shift) + output_zp
    hi_r = apply_scale_32(hi_v, multiplier, shift) + output_zp
    call.require(bool(np.all((lo_r >= lo32) & (hi_r <= hi32))),
                 "apply_add_s<int32_t>: result + output_zp within int32")
    lo, hi = int_range(out_t)
    max_abs = np.maximum(np.abs(lo_v), np.abs(hi_v)).astype(np.float64)
    # float64 is exact when every |v| * m + 2**(s-1) + |output_zp| * 2**s < 2**53 (checked with
    # a factor-2 margin for the float arithmetic of the check itself), see _rescale_f64
    numerator = max_abs * multiplier + np.ldexp(1.0, shift - 1) + abs(output_zp) * np.ldexp(1.0, shift)
    if np.all(numerator < 2.0 ** 52):
        return _rescale_f64(x, input_zp, output_zp, multiplier, shift, per_channel, lo, hi, out_t)
    m = multiplier if per_channel else multiplier[0]
    s = shift if per_channel else shift[0]
    value = x.astype(np.int64)
    if input_zp:
        value -= input_zp
    value *= m
    value += bound if per_channel else bound[0]
    value >>= s
    if output_zp:
        value += output_zp
    clip_ufunc(value, lo, hi, out=value)
    return value.astype(dtype_info(out_t).working)


#: Elements per block of :func:`_rescale_f64`: the block's float64 passes stay in L2 cache.
_RESCALE_BLOCK = 1 << 15


def _rescale_f64(x: np.ndarray, input_zp: int, output_zp: int, multiplier: np.ndarray, shift: np.ndarray,
                 per_channel: bool, lo: int, hi: int, out_t: str) -> np.ndarray:
    """``clip(((v * m + 2**(s-1)) >> s) + output_zp)`` in float64, block by block.

    With ``v = x - input_zp`` an integer and ``N = v * m + 2**(s-1) + output_zp * 2**s``, the
    caller proved ``|N| < 2**53`` (and the same without the last term). Then
    ``v * (m * 2**-s)`` is exact (``m * 2**-s`` is m scaled by a power of two; the product is
    ``(v * m) * 2**-s`` with an integer numerator below 2**53), adding ``0.5 + output_zp`` gives
    ``N * 2**-s`` exactly, and ``floor`` of it is ``((v * m + 2**(s-1)) >> s) + output_zp``: the
    int64 formula of :func:`apply_scale_32` bit for bit, in SIMD float arithmetic on cache-sized
    blocks. Per-channel scales are tiled along a block, so every pass is one contiguous loop.
    """
    scale = multiplier.astype(np.float64) * np.ldexp(1.0, -shift)
    channels = x.shape[-1] if per_channel and x.ndim else 1
    flat = x.reshape(-1)
    out = np.empty(flat.shape, dtype=dtype_info(out_t).working)
    block = max(channels, _RESCALE_BLOCK // channels * channels)  # whole pixels per block
    block = min(block, flat.size)
    tiled = np.tile(scale, block // channels) if per_channel else scale[0]
    buf = np.empty(block, dtype=np.float64)
    for start in range(0, flat.size, block):
        part = flat[start:start + block]
        v = buf[: part.size]
        np.subtract(part, float(input_zp), out=v, dtype=np.float64)  # float loop: no int8 wrap
        v *= tiled[: part.size] if per_channel else tiled
        v += 0.5 + output_zp
        np.floor(v, out=v)
        clip_ufunc(v, lo, hi, out=v)
        out[start:start + block] = v
    return out.reshape(x.shape)
