"""Elementwise unary operators (spec chapter "Elementwise Unary Operators").

ABS, BITWISE_NOT, CEIL, CLZ, COS, EXP, FLOOR, LOG, LOGICAL_NOT, NEGATE, RECIPROCAL, RSQRT, SIN.

Ops whose float results must be exact (ABS, NEGATE, CEIL, FLOOR) work without any inexact
step; the transcendental ones evaluate in float64 and round once to the output type, far
inside their ULP/ABS_ERROR bounds. numpy's float64 functions already give the special-value
tables of the spec (e.g. ``log(-0) = -inf``, ``cos(inf) = NaN``).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from ..numerics import clip_ufunc, count_leading_zeros32, int_range, round_to_float
from . import _int64
from ._broadcast import FP_TYPES, check_same_shape, float_rounder, to_f64
from .facts import abs_error, ulp
from .registry import OpCall, register, register_prepare

I64 = np.int64

_FP = tuple((t, t) for t in FP_TYPES)


def _unary(call: OpCall, types) -> tuple[np.ndarray, str]:
    """Common prologue: one input, one output, type signature, same shape."""
    call.check_arity(1, 1)
    call.check_types(types)
    check_same_shape(call)
    return np.asarray(call.inputs[0]), call.in_dtype(0)


def _fp_unary(call: OpCall, fn) -> list[np.ndarray]:
    """Evaluate ``fn`` on float64 and round to the output type (errors are specified values)."""
    x, dt = _unary(call, _FP)
    with np.errstate(all="ignore"):
        return [round_to_float(fn(to_f64(x)), dt)]


@register("ABS")
def abs_(call: OpCall) -> list[np.ndarray]:
    """ABS: ``|input1|``; int32 REQUIREs the input is not INT32_MIN (``0 - x`` overflows).

    For floats -0 gives +0 and NaN stays NaN, which ``np.abs`` does exactly.
    """
    x, dt = _unary(call, _abs_types(call))
    if dt == "INT64":
        return [_int64.negate_abs(call, x, negate=False)]
    if dt == "INT32":
        _abs_int32(call, x)
    return [np.abs(x)]


def _abs_types(call: OpCall) -> tuple[tuple[str, ...], ...]:
    return _int64.with_int64(call, (("INT32", "INT32"),) + _FP, ("INT64",) * 2)


_INT32_MIN = int_range("INT32")[0]


def _abs_int32(call: OpCall, x: np.ndarray) -> None:
    """ABS's REQUIRE on int32: ``0 - x`` fits (no element is INT32_MIN)."""
    call.require(not (x == _INT32_MIN).any(), "apply_sub_s(0, value1) fits int32 (value1 != INT32_MIN)")


@register_prepare("ABS")
def prepare_abs(call: OpCall):
    """ABS with its (static) checks made once: ``np.abs``, for int32 after the data REQUIRE;
    INT64 keeps the op function."""
    _, dt = _unary(call, _abs_types(call))
    if dt == "INT64":
        return None
    if dt == "INT32":
        def abs_int32(run: OpCall) -> list[np.ndarray]:
            x = run.inputs[0]
            _abs_int32(run, x)
            return [np.abs(x)]

        return abs_int32
    return lambda run: [np.abs(run.inputs[0])]


@register("BITWISE_NOT")
def bitwise_not(call: OpCall) -> list[np.ndarray]:
    """BITWISE_NOT: ``~input1``."""
    x, _ = _unary(call, _int64.with_int64(call, (("INT8",) * 2, ("INT16",) * 2, ("INT32",) * 2), ("INT64",) * 2))
    return [np.invert(x)]


@register("CEIL", compliance=ulp(0.5))
def ceil(call: OpCall) -> list[np.ndarray]:
    """CEIL: round up to an integer; exact (the result is representable in the same type)."""
    return _fp_unary(call, np.ceil)


@register("FLOOR", compliance=ulp(0.5))
def floor(call: OpCall) -> list[np.ndarray]:
    """FLOOR: round down to an integer; exact (the result is representable in the same type)."""
    return _fp_unary(call, np.floor)


@register("CLZ")
def clz(call: OpCall) -> list[np.ndarray]:
    """CLZ: count leading zero bits of an int32 (32 for zero)."""
    x, dt = _unary(call, _int64.with_int64(call, (("INT32", "INT32"),), ("INT64",) * 2))
    if dt == "INT64":
        return [_int64.count_leading_zeros64(x)]
    return [count_leading_zeros32(x).astype(np.int32)]


@register("COS", compliance=abs_error({"base_bound": 1.0, "bound_as_magnitude": True, "normal_divisor": 2}))
def cos(call: OpCall) -> list[np.ndarray]:
    """COS: cosine of radians (NaN for infinities)."""
    return _fp_unary(call, np.cos)


@register("SIN", compliance=abs_error(
    {"base_bound": 2.0, "bound_as_magnitude": True, "normal_divisor": 2, "max_compare": 3.6929244168796014e-38},
    FP16={"max_compare": 0.00019174759848570515},
))
def sin(call: OpCall) -> list[np.ndarray]:
    """SIN: sine of radians (NaN for infinities, keeps the sign of zero)."""
    return _fp_unary(call, np.sin)


@register("EXP", compliance=abs_error({"base_bound": 1.0}, FP32={"base_bound": 3.0}))
def exp(call: OpCall) -> list[np.ndarray]:
    """EXP: ``e ** input1`` (``-inf -> +0``, ``+inf -> +inf``)."""
    return _fp_unary(call, np.exp)


@register("LOG", compliance=abs_error({"lower_bound": 0.5}))
def log(call: OpCall) -> list[np.ndarray]:
    """LOG: natural logarithm; ``apply_log``'s ``±0 -> -inf`` and negative -> NaN are np.log's."""
    return _fp_unary(call, np.log)


@register("LOGICAL_NOT")
def logical_not(call: OpCall) -> list[np.ndarray]:
    """LOGICAL_NOT: ``!input1`` on BOOL."""
    x, _ = _unary(call, (("BOOL", "BOOL"),))
    return [np.logical_not(x)]


_NEGATE_TYPES = (
    ("INT8",) * 4,
    ("INT16",) * 4,
    ("INT32",) * 4,
) + tuple((t,) * 4 for t in FP_TYPES)


@register("NEGATE", operands=("input1", "input1_zp", "output_zp"))
def negate(call: OpCall) -> list[np.ndarray]:
    """NEGATE: ``-(input1 - input1_zp) + output_zp`` clipped to the type's range.

    Zero points (inputs 2 and 3, shape [1]) may be non-zero only for int8. The int32 path
    accumulates in int32, so ``0 - INT32_MIN`` is a REQUIRE failure; int8/int16 accumulate
    in int32 without overflow and saturate at the end.
    """
    dt, in_zp, out_zp = _negate_checks(call)
    x = np.asarray(call.inputs[0])
    if dt in FP_TYPES:
        # zero points are zero here, so the result is the exact sign flip (NaN stays NaN)
        return [np.negative(x)]
    if dt == "INT64":  # zero points are 0 here: acc_t is i64_t, only 0 - INT64_MIN overflows
        return [_int64.negate_abs(call, x, negate=True)]
    return [_negate_int(call, x, dt, in_zp, out_zp)]


@register_prepare("NEGATE")
def prepare_negate(call: OpCall):
    """NEGATE with constant zero points: every declaration check once; a run computes (int32
    with its data REQUIRE). INT64 keeps the op function."""
    if len(call.inputs) != 3 or call.inputs[1] is None or call.inputs[2] is None:
        return None
    dt, in_zp, out_zp = _negate_checks(call)
    if dt in FP_TYPES:
        return lambda run: [np.negative(run.inputs[0])]
    if dt == "INT64":
        return None
    if dt == "INT8":
        # every int8 value's result, computed once by the op's own arithmetic, indexed by the
        # value's bit pattern: a run is one take
        values = np.arange(256, dtype=np.uint8).view(np.int8)
        table = _negate_int(call, values, dt, in_zp, out_zp)
        return lambda run: [table.take(run.inputs[0].view(np.uint8))]
    return lambda run: [_negate_int(run, run.inputs[0], dt, in_zp, out_zp)]


def _negate_checks(call: OpCall) -> tuple[str, int, int]:
    """The ERROR_IFs of NEGATE (declarations and zero points); returns (type, input1_zp, output_zp)."""
    call.check_arity(3, 1)
    call.check_types(_int64.with_int64(call, _NEGATE_TYPES, ("INT64",) * 4))
    check_same_shape(call)
    for i, name in ((1, "input1_zp"), (2, "output_zp")):
        shape = tuple(call.input_decls[i].shape)
        if len(shape) != 1:
            call.fail(f"rank({name}) != 1 (shape {list(shape)})")
        if shape != (1,):
            call.fail(f"shape({name}) != [1] ({list(shape)})")
    dt = call.in_dtype(0)
    in_zp = np.asarray(call.inputs[1]).reshape(-1)[0]
    out_zp = np.asarray(call.inputs[2]).reshape(-1)[0]
    if dt != "INT8" and in_zp != 0:
        call.fail(f"!is_same<in_out_t,i8_t>() && input1_zp != 0 ({in_zp})")
    if dt != "INT8" and out_zp != 0:
        call.fail(f"!is_same<in_out_t,i8_t>() && output_zp != 0 ({out_zp})")
    return dt, in_zp, out_zp


def _negate_int(call: OpCall, x: np.ndarray, dt: str, in_zp, out_zp) -> np.ndarray:
    """NEGATE of an INT8/INT16/INT32 ``x`` in int64, saturated to ``dt``; int32 REQUIREs the
    negation fits its int32 accumulator."""
    value = x.astype(I64) - I64(in_zp)
    if dt == "INT32":
        # acc_t is int32: apply_sub_s(0, value) REQUIREs the negation fits
        lo, hi = int_range("INT32")
        # (both zero points are 0 for int32, so this is the only step that can overflow)
        call.require(
            np.all((-value >= lo) & (-value <= hi)), "apply_sub_s<acc_t>(0, value) fits int32"
        )
    lo, hi = int_range(dt)
    result = clip_ufunc(-value + I64(out_zp), lo, hi)
    return result.astype(dtype_info(dt).working)


@register("RECIPROCAL", compliance=ulp(1.0))
def reciprocal(call: OpCall) -> list[np.ndarray]:
    """RECIPROCAL: ``1 / input1`` (``±0 -> ±inf``, ``±inf -> ±0``)."""
    return _fp_unary(call, _reciprocal)


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return 1.0 / x


def _rsqrt(x: np.ndarray) -> np.ndarray:
    # negative -> NaN (the pseudocode's branch); -0 -> 1 / sqrt(-0) = 1 / -0 = -inf
    return np.where(x < 0, np.nan, 1.0 / np.sqrt(np.where(x < 0, 1.0, x)))


@register("RSQRT", compliance=ulp(2.0))
def rsqrt(call: OpCall) -> list[np.ndarray]:
    """RSQRT: ``1 / sqrt(input1)``; negative inputs give NaN."""
    return _fp_unary(call, _rsqrt)


#: The float ops evaluated in float64 and rounded once (see :func:`_fp_unary`).
_FP_UNARY = {"CEIL": np.ceil, "FLOOR": np.floor, "COS": np.cos, "SIN": np.sin, "EXP": np.exp, "LOG": np.log,
             "RECIPROCAL": _reciprocal, "RSQRT": _rsqrt}


@register_prepare(*_FP_UNARY)
def prepare_fp_unary(call: OpCall):
    """The float64-evaluated unary ops with their (static) checks made once."""
    _, dt = _unary(call, _FP)
    if call.op == "RECIPROCAL" and dt in ("FP32", "FP16"):
        # IEEE division rounds 1 / x once in the working type, as float64 then one rounding
        # does (float64 holds 2 * 24 + 2 bits: the double rounding is innocuous)
        return lambda run: [np.divide(1.0, run.inputs[0], dtype=run.inputs[0].dtype)]
    fn, rounded = _FP_UNARY[call.op], float_rounder(dt)
    if call.op == "EXP":
        return lambda run: [rounded(_exp_f64(run.inputs[0]))]
    return lambda run: [rounded(fn(run.inputs[0].astype(np.float64)))]


def _exp_f64(x: np.ndarray) -> np.ndarray:
    """``np.exp`` of ``x`` widened to float64, in place in the widened copy."""
    wide = x.astype(np.float64)
    return np.exp(wide, out=wide)
