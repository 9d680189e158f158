"""Elementwise binary operators (spec chapter "Elementwise Binary Operators").

ADD, ARITHMETIC_RIGHT_SHIFT, BITWISE_AND/OR/XOR, INTDIV, LOGICAL_AND/OR/XOR,
LOGICAL_LEFT_SHIFT, LOGICAL_RIGHT_SHIFT, MAXIMUM, MINIMUM, MUL, POW, SUB, TABLE.

Integer ops compute in int64 and then wrap (where the pseudocode truncates) or check a REQUIRE
(where it says the result must fit). Float ops compute in float64 and round once to the output
type, which is within the spec's ULP bounds (fp64 holds every product/sum of two fp32 values
exactly or with one rounding that is innocuous before the final one).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from ..numerics import int_range, round_to_float, wrap
from . import _int64
from ._broadcast import (
    FP_TYPES,
    apply_max,
    apply_min,
    broadcast_inputs,
    check_broadcast,
    check_same_shape,
    nan_mode,
    to_f64,
)
from .facts import PRECOMPUTED, ulp
from .registry import OpCall, register, register_prepare

I64 = np.int64

_INT_BITWISE = (("INT8",) * 3, ("INT16",) * 3, ("INT32",) * 3)
_ADD_TYPES = (("INT32",) * 3,) + tuple((t,) * 3 for t in FP_TYPES)
_BOOL = (("BOOL",) * 3,)
#: Shift amounts the shift ops' REQUIRE allows: 0 <= shift <= bits - 1.
_SHIFT_MAX = {"INT8": 7, "INT16": 15, "INT32": 31, "INT64": 63}
_I64_ROW = ("INT64",) * 3


def _binary(call: OpCall, types, int64: bool = False) -> tuple[np.ndarray, np.ndarray, str]:
    """Common prologue: arity, type signature, broadcasting. Returns (a, b, dtype of input1).

    ``int64`` also allows the all-INT64 signature of EXT-INT64 (TOSA 1.1 graphs only).
    """
    _binary_checks(call, types, int64)
    a, b = broadcast_inputs(call, 0, 1)
    return a, b, call.in_dtype(0)


def _binary_checks(call: OpCall, types, int64: bool = False) -> None:
    """The arity and type-signature ERROR_IFs of :func:`_binary` (a prepare's static checks)."""
    call.check_arity(2, 1)
    call.check_types(_int64.with_int64(call, types, _I64_ROW) if int64 else types)


def _require_fits(call: OpCall, values: np.ndarray, dtype: str, what: str) -> None:
    """REQUIRE every int64 value lies in the signed range of ``dtype``."""
    lo, hi = int_range(dtype)
    bad = (values < lo) | (values > hi)
    if bad.any():
        first = int(np.asarray(values)[bad].reshape(-1)[0])
        call.require(
            False, f"{what} in [{lo}, {hi}] ({int(bad.sum())} elements outside, e.g. {first})"
        )


def _working(call: OpCall) -> np.dtype:
    """The working numpy dtype of the (single) output."""
    return dtype_info(call.out_dtype()).working


def _out(values: np.ndarray, call: OpCall) -> np.ndarray:
    """Cast values already inside the output type's range to its working dtype."""
    return np.asarray(values).astype(_working(call), copy=False)


def _add_sub(call: OpCall, sign: int) -> list[np.ndarray]:
    a, b, dt = _binary(call, _ADD_TYPES, int64=True)
    return _add_sub_values(call, a, b, dt, sign)


@register_prepare("ADD", "SUB")
def prepare_add_sub(call: OpCall):
    """ADD/SUB with the (static) arity, type and broadcast checks made once.

    A run relies on numpy's broadcasting, which equals the spec's once the ranks match.
    """
    _binary_checks(call, _ADD_TYPES, int64=True)
    check_broadcast(call, 0, 1)
    dt, sign = call.in_dtype(0), (1 if call.op == "ADD" else -1)
    if dt == "FP32":
        # float32 +/- rounds the exact result once, as the float64 sum then one rounding does
        # (float64 holds 2 * 24 + 2 bits: the double rounding is innocuous for FP32).
        ufunc = np.add if sign > 0 else np.subtract
        return lambda run: [ufunc(run.inputs[0], run.inputs[1])]
    if dt == "INT32":
        return _checked_int32(np.add if sign > 0 else np.subtract, _working(call),
                              lambda run: _add_sub_values(run, run.inputs[0], run.inputs[1], dt, sign))
    return lambda run: _add_sub_values(run, run.inputs[0], run.inputs[1], dt, sign)


def _checked_int32(ufunc, working: np.dtype, full, rounding: int = 0):
    """The kernel of an INT32 ``ufunc`` (ADD, SUB, MUL) whose exact int64 result, optionally
    rounded right by ``rounding`` bits, must fit int32: one int64 ufunc, one cast and one
    comparison per run. Any value outside int32 makes ``full`` (the op's general path) report
    the REQUIRE failure as it always does."""
    if rounding:
        half, shift = I64(1) << I64(rounding - 1), I64(rounding)

    def kernel(run: OpCall) -> list[np.ndarray]:
        c = ufunc(run.inputs[0], run.inputs[1], dtype=I64)
        if rounding:
            c += half  # int64 wraps here exactly as in _mul_values (C++ int64 arithmetic)
            c >>= shift
        out = c.astype(working)
        if np.count_nonzero(out != c):  # (ndarray.any's Python wrapper costs more)
            return full(run)
        return [out]

    return kernel


def _add_sub_values(call: OpCall, a: np.ndarray, b: np.ndarray, dt: str, sign: int) -> list[np.ndarray]:
    if dt == "INT32":
        # apply_add_s / apply_sub_s: exact in int64, REQUIRE the result fits int32
        c = a.astype(I64) + sign * b.astype(I64)
        _require_fits(call, c, dt, "apply_add_s/apply_sub_s result")
        return [_out(c, call)]
    if dt == "INT64":
        return [_int64.add_sub(call, a, b, sign)]
    with np.errstate(all="ignore"):  # inf - inf -> NaN is the specified result
        c = to_f64(a) + sign * to_f64(b)
    return [round_to_float(c, dt)]


@register("ADD", compliance=ulp(0.5, BF16=1.0))
def add(call: OpCall) -> list[np.ndarray]:
    """ADD: ``input1 + input2`` with broadcasting; int32 overflow is a REQUIRE failure."""
    return _add_sub(call, +1)


@register("SUB", compliance=ulp(0.5, BF16=1.0))
def sub(call: OpCall) -> list[np.ndarray]:
    """SUB: ``input1 - input2`` with broadcasting; int32 overflow is a REQUIRE failure."""
    return _add_sub(call, -1)


def _require_shift(call: OpCall, shift: np.ndarray, dtype: str) -> None:
    top = _SHIFT_MAX[dtype]
    call.require(np.all((shift >= 0) & (shift <= top)), f"0 <= value2 <= {top} for {dtype}")


@register("ARITHMETIC_RIGHT_SHIFT")
def arithmetic_right_shift(call: OpCall) -> list[np.ndarray]:
    """ARITHMETIC_RIGHT_SHIFT: ``input1 >> input2`` (sign-propagating), optionally rounded.

    With ``round`` the result is incremented when the last bit shifted out was 1.
    """
    a, b, dt = _binary(call, _INT_BITWISE, int64=True)
    a64, b64 = a.astype(I64), b.astype(I64)
    _require_shift(call, b64, dt)
    result = a64 >> b64
    if call.attrs.get("round", False):
        # b64 - 1 is only used where b64 > 0, clamp it so the shift count stays valid
        last_out = (a64 >> np.maximum(b64 - 1, 0)) & 1
        result = result + ((b64 > 0) & (last_out != 0))
    # a >> b (b >= 1) plus 1 never leaves the type's range; b == 0 leaves a unchanged
    return [_out(result, call)]


def _bitwise(call: OpCall, fn) -> list[np.ndarray]:
    a, b, _ = _binary(call, _INT_BITWISE, int64=True)
    return [fn(a, b).astype(_working(call), copy=False)]


@register("BITWISE_AND")
def bitwise_and(call: OpCall) -> list[np.ndarray]:
    """BITWISE_AND: ``input1 & input2``."""
    return _bitwise(call, np.bitwise_and)


@register("BITWISE_OR")
def bitwise_or(call: OpCall) -> list[np.ndarray]:
    """BITWISE_OR: ``input1 | input2``."""
    return _bitwise(call, np.bitwise_or)


@register("BITWISE_XOR")
def bitwise_xor(call: OpCall) -> list[np.ndarray]:
    """BITWISE_XOR: ``input1 ^ input2``."""
    return _bitwise(call, np.bitwise_xor)


@register("INTDIV")
def intdiv(call: OpCall) -> list[np.ndarray]:
    """INTDIV: int32 division truncating toward zero.

    REQUIRE the divisor is non-zero and the quotient fits (``INT32_MIN / -1`` does not).
    """
    a, b, dt = _binary(call, (("INT32",) * 3,), int64=True)
    if dt == "INT64":
        return [_int64.intdiv(call, a, b)]
    a64, b64 = a.astype(I64), b.astype(I64)
    call.require(np.all(b64 != 0), "value2 != 0")
    # numpy's // floors; truncation toward zero is |a| // |b| with the sign of a * b
    q = (np.abs(a64) // np.abs(b64)) * (np.sign(a64) * np.sign(b64))
    _require_fits(call, q, dt, "apply_intdiv_s result")
    return [_out(q, call)]


def _logical(call: OpCall, fn) -> list[np.ndarray]:
    a, b, _ = _binary(call, _BOOL)
    return [fn(a, b).astype(np.bool_, copy=False)]


@register("LOGICAL_AND")
def logical_and(call: OpCall) -> list[np.ndarray]:
    """LOGICAL_AND: ``input1 && input2`` on BOOL."""
    return _logical(call, np.logical_and)


@register("LOGICAL_OR")
def logical_or(call: OpCall) -> list[np.ndarray]:
    """LOGICAL_OR: ``input1 || input2`` on BOOL."""
    return _logical(call, np.logical_or)


@register("LOGICAL_XOR")
def logical_xor(call: OpCall) -> list[np.ndarray]:
    """LOGICAL_XOR: ``input1 != input2`` on BOOL."""
    return _logical(call, np.not_equal)


@register("LOGICAL_LEFT_SHIFT")
def logical_left_shift(call: OpCall) -> list[np.ndarray]:
    """LOGICAL_LEFT_SHIFT: ``input1 << input2``, bits shifted past the type width are lost."""
    a, b, dt = _binary(call, _INT_BITWISE, int64=True)
    b64 = b.astype(I64)
    _require_shift(call, b64, dt)
    # |a| < 2**31 (an int64 shift wraps to the low 64 bits itself) and b <= 31, so the int64 shift is exact before wrapping to the width
    return [_out(wrap(a.astype(I64) << b64, dt), call)]


@register("LOGICAL_RIGHT_SHIFT")
def logical_right_shift(call: OpCall) -> list[np.ndarray]:
    """LOGICAL_RIGHT_SHIFT: ``input1 >> input2`` shifting in zeros.

    The value is taken as unsigned of its own width (the reference model zero-extends an
    int8 -128 to 0x80, so ``-128 >> 1 == 64``), then cast back to the signed type.
    """
    a, b, dt = _binary(call, _INT_BITWISE, int64=True)
    b64 = b.astype(I64)
    _require_shift(call, b64, dt)
    if dt == "INT64":
        return [_int64.logical_right_shift(a, b64)]
    bits = {"INT8": 8, "INT16": 16, "INT32": 32}[dt]
    unsigned = a.astype(I64) & ((1 << bits) - 1)
    return [_out(wrap(unsigned >> b64, dt), call)]


def _min_max(call: OpCall, fn) -> list[np.ndarray]:
    a, b, dt = _binary(call, _ADD_TYPES, int64=True)
    mode = nan_mode(call)
    return [fn(a, b, mode, dt in FP_TYPES).astype(_working(call), copy=False)]


@register_prepare("MAXIMUM", "MINIMUM")
def prepare_min_max(call: OpCall):
    """MAXIMUM/MINIMUM with the (static) arity, type, broadcast and ``nan_mode`` checks made
    once; a run relies on numpy's broadcasting, which equals the spec's once the ranks match."""
    _binary_checks(call, _ADD_TYPES, int64=True)
    check_broadcast(call, 0, 1)
    mode, is_float, working = nan_mode(call), call.in_dtype(0) in FP_TYPES, _working(call)
    fn = apply_max if call.op == "MAXIMUM" else apply_min
    return lambda run: [fn(run.inputs[0], run.inputs[1], mode, is_float).astype(working, copy=False)]


@register("MAXIMUM")
def maximum(call: OpCall) -> list[np.ndarray]:
    """MAXIMUM: elementwise ``apply_max_s`` honouring ``nan_mode``."""
    return _min_max(call, apply_max)


@register("MINIMUM")
def minimum(call: OpCall) -> list[np.ndarray]:
    """MINIMUM: elementwise ``apply_min_s`` honouring ``nan_mode``."""
    return _min_max(call, apply_min)


_MUL_TYPES = (
    ("INT8", "INT8", "INT8", "INT32"),
    ("INT16", "INT16", "INT8", "INT32"),
    ("INT32", "INT32", "INT8", "INT32"),
) + tuple((t, t, "INT8", t) for t in FP_TYPES)


@register("MUL", operands=("input1", "input2", "shift"), compliance=ulp(0.5, BF16=1.0))
def mul(call: OpCall) -> list[np.ndarray]:
    """MUL: ``input1 * input2``; for int32 an optional rounding right ``shift`` (input 3).

    int8/int16 products widen to int32 (always exact). int32 with shift 0 keeps the low 32
    bits; with shift > 0 the int64 product is rounded, shifted and REQUIREd to fit int32.
    """
    a, b = broadcast_inputs(call, *_mul_checks(call))
    return _mul_values(call, a, b, _mul_shift(call))


@register_prepare("MUL")
def prepare_mul(call: OpCall):
    """MUL with a constant shift: the checks (and the shift's REQUIREs) made once."""
    if len(call.inputs) != 3 or call.inputs[2] is None:
        return None
    check_broadcast(call, *_mul_checks(call))
    shift = _mul_shift(call)
    dt = call.in_dtype(0)
    if dt == "FP32":
        # one rounding of the exact product, as in _mul_values (see prepare_add_sub)
        return lambda run: [np.multiply(run.inputs[0], run.inputs[1])]
    if dt in ("INT8", "INT16"):
        # shift is 0 (REQUIRE above) and the product of two int16 values fits int32 exactly
        return lambda run: [np.multiply(run.inputs[0], run.inputs[1], dtype=np.int32)]
    full = lambda run: _mul_values(run, run.inputs[0], run.inputs[1], shift)  # noqa: E731
    if dt == "INT32" and shift > 0:
        return _checked_int32(np.multiply, _working(call), full, shift)
    if dt == "INT32":
        # apply_mul_s<int32> with shift 0 keeps the low 32 bits: numpy's wrapping int32 product
        working = _working(call)
        return lambda run: [np.multiply(run.inputs[0], run.inputs[1], dtype=working)]
    return full


def _mul_checks(call: OpCall) -> tuple[int, int]:
    """The ERROR_IFs of MUL but broadcasting; returns the indices of the broadcast inputs."""
    call.check_arity(3, 1)
    call.check_types(_int64.with_int64(call, _MUL_TYPES, ("INT64", "INT64", "INT8", "INT64")))
    shift_decl = call.input_decls[2]
    if len(shift_decl.shape) != 1:
        call.fail(f"rank(shift) != 1 (shape {list(shift_decl.shape)})")
    if tuple(shift_decl.shape) != (1,):
        call.fail(f"shape(shift) != [1] ({list(shift_decl.shape)})")
    return 0, 1


def _mul_shift(call: OpCall) -> int:
    """The shift operand, with its REQUIREs."""
    dt = call.in_dtype(0)
    value = call.inputs[2]
    shift = int(value.item(0) if type(value) is np.ndarray else np.asarray(value).reshape(-1)[0])
    if not 0 <= shift <= 63:  # (messages formatted only for a failing REQUIRE)
        call.require(False, f"0 <= shift <= 63 (shift {shift})")
    if shift and dt != "INT32":
        call.require(False, f"shift == 0 for in_t {dt} (shift {shift})")
    return shift


def _mul_values(call: OpCall, a: np.ndarray, b: np.ndarray, shift: int) -> list[np.ndarray]:
    dt = call.in_dtype(0)
    if dt in FP_TYPES:
        # the float64 product of two fp32 values is exact: one rounding to the output type
        with np.errstate(all="ignore"):  # 0 * inf -> NaN is the specified result
            return [round_to_float(to_f64(a) * to_f64(b), dt)]
    # int32 * int32 < 2**62 in magnitude: the int64 product is exact; apply_mul_s<i64_t> keeps
    # the low 64 bits, which is numpy's wrapping int64 product
    product = a.astype(I64) * b.astype(I64)
    if dt == "INT64":
        return [product]
    if dt == "INT32" and shift > 0:
        # (product + round) can only exceed int64 for (-2**31)**2 with shift 63; int64 wraps
        # there exactly like the reference model's C++ int64 arithmetic.
        product = (product + (I64(1) << I64(shift - 1))) >> I64(shift)
        _require_fits(call, product, "INT32", "product")
        return [_out(product, call)]
    # apply_mul_s<int32>: low 32 bits of the product
    return [_out(wrap(product, "INT32"), call)]


_POW_TYPES = tuple((t,) * 3 for t in FP_TYPES)


@register("POW", compliance=PRECOMPUTED)
def pow_(call: OpCall) -> list[np.ndarray]:
    """POW: ``input1 ** input2`` for floats.

    REQUIREs (data-dependent, as in the reference model): input1 >= 0, input1 > 0 or
    input2 > 0, no NaN, both finite.
    """
    a, b, dt = _binary(call, _POW_TYPES)
    return [_pow_values(call, a, b, dt)]


@register_prepare("POW")
def prepare_pow(call: OpCall):
    """POW with the (static) arity, type and broadcast checks made once; a run makes the data
    REQUIREs and computes (numpy's broadcasting equals the spec's once the ranks match)."""
    _binary_checks(call, _POW_TYPES)
    check_broadcast(call, 0, 1)
    dt = call.in_dtype(0)

    def pow_kernel(run: OpCall) -> list[np.ndarray]:
        # every REQUIRE in one pass (NaN is not finite); a failing element sends the run through
        # the ordered checks, which name the first REQUIRE it breaks (a run ignores float warnings)
        x, y = to_f64(run.inputs[0]), to_f64(run.inputs[1])
        if not (np.isfinite(x) & np.isfinite(y) & (x >= 0) & ((x > 0) | (y > 0))).all():
            return [_pow_values(run, run.inputs[0], run.inputs[1], dt)]
        return [round_to_float(np.power(x, y), dt)]

    return pow_kernel


def _pow_values(call: OpCall, a: np.ndarray, b: np.ndarray, dt: str) -> np.ndarray:
    """POW's REQUIREs and its value: the float64 power rounded once to ``dt``."""
    x, y = to_f64(a), to_f64(b)
    with np.errstate(invalid="ignore"):
        call.require(not np.any(x < 0), "value1 >= 0")
        call.require(
            np.all((x > 0) | (y > 0) | np.isnan(x) | np.isnan(y)), "value1 > 0 || value2 > 0"
        )
    call.require(not np.any(np.isnan(x) | np.isnan(y)), "!isNaN(value1) && !isNaN(value2)")
    call.require(np.all(np.isfinite(x) & np.isfinite(y)), "is_finite(value1) && is_finite(value2)")
    with np.errstate(all="ignore"):  # overflow to inf is the correctly rounded result
        return round_to_float(np.power(x, y), dt)


_TABLE_TYPES = (("INT8", "INT8", "INT8"), ("INT16", "INT16", "INT32"))


@register("TABLE", operands=("input1", "table"), int16=True)
def table(call: OpCall) -> list[np.ndarray]:
    """TABLE: int8 lookup in a 256-entry table, or int16 interpolated lookup in 513 entries.

    int16 follows ``apply_lookup_s``: the top 9 bits of ``value + 32768`` index the table,
    the low 7 bits interpolate linearly to the next entry, giving a 23-bit int32 result.
    """
    _table_checks(call)
    return [_lookup(call, call.inputs[0], np.asarray(call.inputs[1]).astype(I64).reshape(-1), None)]


@register_prepare("TABLE")
def prepare_table(call: OpCall):
    """TABLE with a constant table: checks once, the table widened (and its slopes checked) once."""
    if len(call.inputs) != 2 or call.inputs[1] is None:
        return None
    _table_checks(call)
    if call.in_dtype(0) == "INT8":
        # tab[x + 128] is by_bits[x's bit pattern as uint8]: one lookup, no conversions
        # (the table rolled by 128 entries: its upper half, then its lower half)
        values = np.asarray(call.inputs[1]).reshape(-1).astype(np.int8)
        by_bits = np.concatenate((values[128:], values[:128]))
        return lambda run: [by_bits.take(run.inputs[0].view(np.uint8))]  # (take: numpy's faster gather)
    tab = np.asarray(call.inputs[1]).astype(I64).reshape(-1)
    # int16: the entries whose slope breaks apply_lookup_s's REQUIRE (slope fits int16)
    lo, hi = int_range("INT16")
    slopes = tab[1:] - tab[:-1]  # (np.diff without its Python wrapper)
    unfit = (slopes < lo) | (slopes > hi)
    if _working(call) != np.int32:
        return lambda run: [_lookup(run, run.inputs[0], tab, not unfit.any())]
    # apply_lookup_s in int32, exactly: base << 7 is 23 bits, |slope * fraction| < 2**24 for
    # int16 entries. (value + 32768) is the int16's bit pattern with the sign bit flipped; its
    # low 7 bits equal value & 0x7F (32768 is a multiple of 128).
    base7 = (tab[:512] << 7).astype(np.int32)
    slope = slopes.astype(np.int32)
    unfit = unfit if np.count_nonzero(unfit) else None  # (one C call: ndarray.any has a Python wrapper)
    # the numpy scalars made once; take() is numpy's faster gather for a 1-D table
    sign, seven, low = np.uint16(0x8000), np.uint16(7), np.uint16(0x7F)

    def kernel(run: OpCall) -> list[np.ndarray]:
        biased = run.inputs[0].view(np.uint16) ^ sign
        index = biased >> seven
        if unfit is not None and np.count_nonzero(unfit.take(index)):  # the general path reports the REQUIRE
            return [_lookup(run, run.inputs[0], tab, False)]
        return [base7.take(index) + slope.take(index) * (biased & low)]

    return kernel


def _table_checks(call: OpCall) -> None:
    call.check_arity(2, 1)
    call.check_types(_TABLE_TYPES)
    check_same_shape(call, 0)
    dt = call.in_dtype(0)
    size = 256 if dt == "INT8" else 513
    tdecl = call.input_decls[1]
    # The reference model rejects a wrongly sized table as an ERROR_IF (the spec writes
    # REQUIRE(length(table) == TABLE_SIZE), but the length is static).
    if len(tdecl.shape) != 1:
        call.fail(f"rank(table) != 1 (shape {list(tdecl.shape)})")
    if tdecl.shape[0] != size:
        call.fail(f"length(table) != TABLE_SIZE ({tdecl.shape[0]} vs {size})")


def _lookup(call: OpCall, x: np.ndarray, tab: np.ndarray, slopes_fit: bool | None) -> np.ndarray:
    """The TABLE lookup of ``x`` in the int64 table ``tab`` (``slopes_fit``: see prepare_table)."""
    value = np.asarray(x).astype(I64)
    if call.in_dtype(0) == "INT8":
        return _out(tab[value + 128], call)
    index = (value + 32768) >> 7
    fraction = value & 0x7F
    base = tab[index]
    slope = tab[index + 1] - base
    if not slopes_fit:
        _require_fits(call, slope, "INT16", "slope")
    return _out((base << 7) + slope * fraction, call)
