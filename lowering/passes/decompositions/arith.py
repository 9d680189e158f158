"""Arithmetic: true and rounded division, remainder, powers, clamps with tensor bounds,
masked_fill, tril / triu, square and shifts by a number, in terms of ops with a TOSA visitor."""

from __future__ import annotations

import math

import torch
import torch.fx as fx

from ...graph_utils import get_constant, val
from ._common import arg, const_like, decomposition, is_float, number_const, tensor_operand

aten = torch.ops.aten


def _true_div(gm, b, x, y):
    """``x / y`` as ``x * (1 / y)``: TOSA has no float division; a constant divisor is
    inverted here, once."""
    if not isinstance(y, fx.Node):
        return b(aten.mul.Tensor, x, const_like(gm, b, 1.0 / float(y), x, "recip"))
    ct = get_constant(gm, y)
    if ct is not None:
        return b(aten.mul.Tensor, x, b.const(gm, 1.0 / ct.float(), "recip"))
    return b(aten.mul.Tensor, x, b(aten.reciprocal.default, y))


def _floor_quotient(gm, b, x, y):
    """``floor(x / y)`` for float tensors.

    ``x * (1 / y)`` may land just below an integer the exact quotient reaches
    (41 * fl(1/41) = 0.99999994). In FP the residual ``r = x - q * y`` moves ``q`` by one
    step when it falls outside ``[0, |y|)`` (taken with the sign of ``y``); it is exact when
    ``x``, ``y`` and ``q * y`` are integers below 2**24, the case where the quotient is
    exactly an integer. In INT every intermediate is requantized, so the correction would
    compare rounded values: the quotient is floored as the quantized graph computes it.
    """
    y = tensor_operand(gm, b, y, x, "divisor")
    q = b(aten.floor.default, _true_div(gm, b, x, y))
    if b.profile != "FP":
        return q
    residual = b(aten.sub.Tensor, x, b(aten.mul.Tensor, q, y))
    toward_y = b(aten.mul.Tensor, residual, b(aten.sign.default, y))
    one = const_like(gm, b, 1.0, x, "one")
    too_small = b(aten.ge.Tensor, toward_y, b(aten.abs.default, y))
    too_large = b(aten.lt.Tensor, toward_y, const_like(gm, b, 0.0, x, "zero"))
    q = b(aten.where.self, too_small, b(aten.add.Tensor, q, one), q)
    return b(aten.where.self, too_large, b(aten.sub.Tensor, q, one), q)


def _integer_floor_division(b, x, y):
    """Integer tensors divide in the integer domain: the visitor's INTDIV with a floor fix."""
    return b(aten.div.Tensor_mode, x, y, rounding_mode="floor")


@decomposition(aten.div.Tensor, aten.div.Scalar)
def div(gm, n, b):
    """Float ``x / y`` -> ``x * reciprocal(y)``; integer operands (a float result) stay."""
    x, y = n.args[0], n.args[1]
    if not is_float(x):
        return None
    return _true_div(gm, b, x, y)


@decomposition(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_rounding(gm, n, b):
    """``div(x, y, rounding_mode)``: None -> true division, "floor" -> floor of the quotient,
    "trunc" -> the quotient rounded toward zero. Integer tensors keep ``div.Tensor_mode``
    with a tensor divisor (the elementwise visitor's INTDIV)."""
    x, y = n.args[0], n.args[1]
    mode = arg(n, 2, "rounding_mode")
    if not is_float(x) and (is_float(y) or (isinstance(y, float) and not y.is_integer())):
        # an integer tensor by a float divides in float, as PyTorch promotes it
        x = b(aten._to_copy.default, x, dtype=torch.promote_types(
            val(x).dtype, val(y).dtype if isinstance(y, fx.Node) else torch.get_default_dtype()))
    if not is_float(x):
        if mode is None or (isinstance(y, fx.Node) and n.target == aten.div.Tensor_mode):
            return None
        return b(aten.div.Tensor_mode, x, tensor_operand(gm, b, y, x, "divisor"),
                 rounding_mode=mode)
    if mode is None:
        return _true_div(gm, b, x, y)
    if mode == "floor":
        return _floor_quotient(gm, b, x, y)
    if b.profile == "FP":
        # |x| // |y| with the sign of the quotient: the floor correction applies unchanged
        y = tensor_operand(gm, b, y, x, "divisor")
        magnitude = _floor_quotient(gm, b, b(aten.abs.default, x), b(aten.abs.default, y))
        sign = b(aten.mul.Tensor, b(aten.sign.default, x), b(aten.sign.default, y))
        return b(aten.mul.Tensor, magnitude, sign)
    return b(aten.trunc.default, _true_div(gm, b, x, y))


@decomposition(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(gm, n, b):
    """``x // y`` (rounds down, as Python does)."""
    x, y = n.args[0], n.args[1]
    if not is_float(x):
        return _integer_floor_division(b, x, tensor_operand(gm, b, y, x, "divisor"))
    return _floor_quotient(gm, b, x, y)


@decomposition(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(gm, n, b):
    """``x % y = x - (x // y) * y`` (the sign of ``y``, as Python's)."""
    x = n.args[0]
    y = tensor_operand(gm, b, n.args[1], x, "divisor")
    if is_float(x):
        q = _floor_quotient(gm, b, x, y)
    else:
        q = _integer_floor_division(b, x, y)
    return b(aten.sub.Tensor, x, b(aten.mul.Tensor, q, y))


@decomposition(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(gm, n, b):
    """``fmod(x, y) = sign(x) * (|x| % |y|)``: C's remainder takes the sign of ``x``, and
    the remainder of magnitudes is :func:`remainder`'s (floored, exact-quotient corrected).
    Integer tensors: :func:`.int_division.integer_fmod` (a truncated INTDIV)."""
    from .int_division import integer_fmod

    x = n.args[0]
    if not is_float(x):
        return integer_fmod(gm, n, b)
    y = tensor_operand(gm, b, n.args[1], x, "divisor")
    r = b(aten.remainder.Tensor, b(aten.abs.default, x), b(aten.abs.default, y))
    return b(aten.mul.Tensor, b(aten.sign.default, x), r)


@decomposition(aten.pow.Tensor_Scalar)
def pow_scalar_exponent(gm, n, b):
    """Exponents 2, 1, 0.5 and -1 are exact as mul / identity / sqrt / reciprocal, 0 is a
    constant of ones in FP; other exponents keep pow (a TABLE in INT, POW in FP)."""
    x, e = n.args[0], n.args[1]
    out = val(n)
    if e == 0 and b.profile != "INT" and out is not None:
        # x ** 0 is 1 for every x, NaN and 0 included, where TOSA's POW is undefined for a base
        # <= 0 (INT's TABLE of pow is exact already)
        return b.const(gm, torch.ones(tuple(out.shape), dtype=out.dtype), n.name)
    if e == 2:
        return b(aten.mul.Tensor, x, x)
    if e == 1:
        return x
    if e == 0.5:
        return b(aten.sqrt.default, x)
    if e == -1:
        return b(aten.reciprocal.default, x)
    if b.profile != "INT" and isinstance(e, (int, float)) and float(e).is_integer() \
            and 2 < abs(e) <= 16:
        # TOSA's POW is undefined for a negative base, which an integer power is defined for
        # (GPT-2's tanh GELU cubes x); INT keeps one exact TABLE instead
        y = _integer_power(b, x, int(abs(e)))
        return y if e > 0 else b(aten.reciprocal.default, y)
    return None


def _integer_power(b, x, k: int):
    """``x ** k`` (``k >= 1``) by square and multiply."""
    result, square = None, x
    while k:
        if k & 1:
            result = square if result is None else b(aten.mul.Tensor, result, square)
        k >>= 1
        if k:
            square = b(aten.mul.Tensor, square, square)
    return result


@decomposition(aten.pow.Scalar)
def pow_scalar_base(gm, n, b):
    """``c ** x = exp(x * ln c)`` for a positive base ``c``."""
    base, x = n.args[0], n.args[1]
    if not is_float(x) or not isinstance(base, (int, float)) or base <= 0:
        return None
    return b(aten.exp.default, b(aten.mul.Tensor, x, const_like(gm, b, math.log(base), x, "ln_base")))


@decomposition(aten.square.default)
def square(gm, n, b):
    """``x * x``."""
    return b(aten.mul.Tensor, n.args[0], n.args[0])


@decomposition(aten.clamp.Tensor, aten.clamp_min.Tensor, aten.clamp_max.Tensor)
def clamp_tensor(gm, n, b):
    """Tensor bounds: ``minimum(maximum(x, lo), hi)`` (either bound may be absent)."""
    x = n.args[0]
    if n.target == aten.clamp.Tensor:
        lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
    elif n.target == aten.clamp_min.Tensor:
        lo, hi = n.args[1], None
    else:
        lo, hi = None, n.args[1]
    y = x
    if lo is not None:
        y = b(aten.maximum.default, y, lo)
    if hi is not None:
        y = b(aten.minimum.default, y, hi)
    return y


@decomposition(aten.clamp_min.default, aten.clamp_max.default)
def clamp_one_side(gm, n, b):
    """clamp_min(x, lo) / clamp_max(x, hi) with a number: clamp(x, lo, None) / clamp(x, None, hi)."""
    x, bound = n.args[0], n.args[1]
    if n.target == aten.clamp_min.default:
        return b(aten.clamp.default, x, bound, None)
    return b(aten.clamp.default, x, None, bound)


@decomposition(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(gm, n, b):
    """``where(mask, value, x)``."""
    x, mask, value = n.args[:3]
    if not isinstance(value, fx.Node) and val(x) is not None:
        value = number_const(gm, b, value, val(x).dtype, n, "fill")
    return b(aten.where.self, mask, value, x)


@decomposition(aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def where_scalar(gm, n, b):
    """``where`` with a number for either branch (HuggingFace's extended attention masks):
    the number as a constant in the result's dtype, then ``where.self``."""
    cond, x, y = n.args[:3]
    if val(n) is None:
        return None
    dtype = val(n).dtype
    x, y = (t if isinstance(t, fx.Node) else number_const(gm, b, t, dtype, n, "where")
            for t in (x, y))
    return b(aten.where.self, cond, x, y)


@decomposition(aten.where.self)
def where_mixed_dtypes(gm, n, b):
    """``where(cond, x, y)`` with branches of different dtypes (float and bool, float and
    int8): both branches converted to the result's promoted dtype first (TOSA's SELECT takes
    one type)."""
    cond, x, y = n.args[:3]
    if val(n) is None or val(x) is None or val(y) is None or \
            val(x).dtype == val(y).dtype == val(n).dtype:
        return None
    dtype = val(n).dtype
    x, y = (t if val(t).dtype == dtype else b(aten._to_copy.default, t, dtype=dtype)
            for t in (x, y))
    return b(aten.where.self, cond, x, y)


@decomposition(aten.tril.default, aten.triu.default)
def triangle(gm, n, b):
    """tril / triu(x, diagonal): ``where(mask, x, 0)`` with the constant triangle ``mask``
    of the last two dims."""
    x = n.args[0]
    v = val(x)
    if v is None or v.dim() < 2:
        return None
    ones = torch.ones(v.shape[-2], v.shape[-1], dtype=torch.bool)
    diagonal = arg(n, 1, "diagonal", 0)
    mask = ones.tril(diagonal) if n.target == aten.tril.default else ones.triu(diagonal)
    zero = b.const(gm, torch.zeros(1, dtype=v.dtype), "zero")
    return b(aten.where.self, b.const(gm, mask, "triangle"), x, zero)


@decomposition(aten.__lshift__.Scalar, aten.__rshift__.Scalar,
               aten.bitwise_left_shift.Tensor_Scalar, aten.bitwise_right_shift.Tensor_Scalar)
def shift_by_number(gm, n, b):
    """``x << c`` / ``x >> c``: the shift ``c`` becomes a constant of the dtype of ``x`` (an
    int8 or int16 tensor stays in its dtype instead of being promoted with a float scalar)."""
    x, amount = n.args[0], n.args[1]
    v = val(x)
    if v is None or v.is_floating_point() or isinstance(amount, fx.Node):
        return None
    left = n.target in (aten.__lshift__.Scalar, aten.bitwise_left_shift.Tensor_Scalar)
    target = aten.bitwise_left_shift.Tensor if left else aten.bitwise_right_shift.Tensor
    return b(target, x, b.const(gm, torch.tensor([int(amount)], dtype=v.dtype), "shift"))


@decomposition(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(gm, n, b):
    """PyTorch's two-sided form: ``start + w * (end - start)`` where ``|w| < 0.5``, else
    ``end - (end - start) * (1 - w)``, so that ``w = 1`` gives ``end`` exactly."""
    start, end, weight = n.args[0], n.args[1], n.args[2]
    if not (is_float(start) and is_float(end)):
        return None
    delta = b(aten.sub.Tensor, end, start)
    one = const_like(gm, b, 1.0, start, "one")
    if not isinstance(weight, fx.Node):
        if abs(weight) < 0.5:
            return b(aten.add.Tensor, start, b(aten.mul.Tensor, delta, const_like(gm, b, weight, start, "w")))
        return b(aten.sub.Tensor, end, b(aten.mul.Tensor, delta, const_like(gm, b, 1.0 - weight, start, "1mw")))
    near_start = b(aten.lt.Tensor, b(aten.abs.default, weight), const_like(gm, b, 0.5, weight, "half"))
    from_start = b(aten.add.Tensor, start, b(aten.mul.Tensor, weight, delta))
    from_end = b(aten.sub.Tensor, end, b(aten.mul.Tensor, delta, b(aten.sub.Tensor, one, weight)))
    return b(aten.where.self, near_start, from_start, from_end)


@decomposition(aten.addcmul.default, aten.addcdiv.default)
def addcmul_addcdiv(gm, n, b):
    """``x + value * t1 * t2`` / ``x + value * (t1 / t2)``."""
    x, t1, t2 = n.args[0], n.args[1], n.args[2]
    value = arg(n, 3, "value", 1)
    if n.target == aten.addcdiv.default:
        if not (is_float(t1) or is_float(t2)):
            return None  # (integer addcdiv is an error in PyTorch)
        term = b(aten.div.Tensor, t1, t2)
        if value != 1:
            term = b(aten.mul.Tensor, term, const_like(gm, b, value, term, "value"))
    else:
        term = t1 if value == 1 else b(aten.mul.Tensor, t1, const_like(gm, b, value, t1, "value"))
        term = b(aten.mul.Tensor, term, t2)
    return b(aten.add.Tensor, x, term)


@decomposition(aten.hypot.default)
def hypot(gm, n, b):
    """``sqrt(a * a + b * b)``; unlike PyTorch's scaled form it overflows to infinity where
    a square does (|a| or |b| above about 1.8e19)."""
    x, y = n.args[0], n.args[1]
    if not (is_float(x) and is_float(y)):
        return None
    return b(aten.sqrt.default, b(aten.add.Tensor, b(aten.mul.Tensor, x, x), b(aten.mul.Tensor, y, y)))


@decomposition(aten.logaddexp.default)
def logaddexp(gm, n, b):
    """``max(a, b) + log1p(exp(-|a - b|))``, and ``a + ln 2`` where ``a == b`` (so equal
    infinities give that infinity, not NaN from ``inf - inf``)."""
    x, y = n.args[0], n.args[1]
    if not (is_float(x) and is_float(y)):
        return None
    gap = b(aten.neg.default, b(aten.abs.default, b(aten.sub.Tensor, x, y)))
    general = b(aten.add.Tensor, b(aten.maximum.default, x, y), b(aten.log1p.default, b(aten.exp.default, gap)))
    equal = b(aten.eq.Tensor, x, y)
    return b(aten.where.self, equal, b(aten.add.Tensor, x, const_like(gm, b, math.log(2.0), x, "ln2")), general)


@decomposition(aten.xlogy.Tensor)
def xlogy(gm, n, b):
    """``x * log(y)``, and 0 where ``x == 0`` unless ``y`` is NaN (PyTorch's rule)."""
    x, y = n.args[0], n.args[1]
    if not (isinstance(x, fx.Node) and isinstance(y, fx.Node) and is_float(x) and is_float(y)):
        return None
    product = b(aten.mul.Tensor, x, b(aten.log.default, y))
    zero_x = b(aten.logical_and.default, b(aten.eq.Tensor, x, const_like(gm, b, 0.0, x, "zero")),
               b(aten.eq.Tensor, y, y))
    return b(aten.where.self, zero_x, const_like(gm, b, 0.0, product, "zero"), product)


def _sign_bit(gm, b, x):
    """Whether the sign bit of the float ``x`` is set: ``x < 0``, or in FP also ``1 / x < 0``
    (the only way to tell -0.0, whose reciprocal is -inf, from +0.0). In INT every value is
    ``(q - zp) * scale``: zero is +0.0, and ``x < 0`` is the whole test."""
    negative = b(aten.lt.Tensor, x, const_like(gm, b, 0.0, x, "zero"))
    if b.profile != "FP":
        return negative
    negative_zero = b(aten.lt.Tensor, b(aten.reciprocal.default, x), const_like(gm, b, 0.0, x, "zero"))
    return b(aten.logical_or.default, negative, negative_zero)


@decomposition(aten.signbit.default)
def signbit(gm, n, b):
    """``signbit(x)`` of a float tensor: see :func:`_sign_bit` (a NaN's sign bit, which no
    comparison reads, is taken as clear). Integer tensors stay on the CPU."""
    x = n.args[0]
    if not is_float(x):
        return None
    return _sign_bit(gm, b, x)


@decomposition(aten.copysign.Tensor, aten.copysign.Scalar)
def copysign(gm, n, b):
    """``copysign(a, s) = where(signbit(s), -|a|, |a|)``: the magnitude of ``a`` with the
    sign of ``s`` (-0.0 counts as negative, as in PyTorch). Float tensors only (an integer
    ``a`` promotes to float in PyTorch)."""
    x, s = n.args[0], n.args[1]
    if not is_float(x) or val(n) is None or val(n).dtype != val(x).dtype:
        return None
    magnitude = b(aten.abs.default, x)
    if not isinstance(s, fx.Node):  # a number: its sign is known here
        negative = math.copysign(1.0, float(s)) < 0
        return b(aten.neg.default, magnitude) if negative else magnitude
    if not is_float(s):
        return None
    return b(aten.where.self, _sign_bit(gm, b, s), b(aten.neg.default, magnitude), magnitude)


@decomposition(aten.heaviside.default)
def heaviside(gm, n, b):
    """``heaviside(x, values)``: ``values`` where ``x == 0``, else 1 where ``x > 0`` and 0
    elsewhere (NaN included, as PyTorch's ``x > 0`` test gives)."""
    x, values = n.args[0], n.args[1]
    if not is_float(x) or val(n) is None or val(values) is None or val(values).dtype != val(x).dtype:
        return None
    step = b(aten.where.self, b(aten.gt.Tensor, x, const_like(gm, b, 0.0, x, "zero")),
             const_like(gm, b, 1.0, x, "one"), const_like(gm, b, 0.0, x, "zero"))
    return b(aten.where.self, b(aten.eq.Tensor, x, const_like(gm, b, 0.0, x, "zero")), values, step)


@decomposition(aten.rad2deg.default)
def rad2deg(gm, n, b):
    """``rad2deg(x) = x * (180 / pi)``, the factor rounded to the tensor's dtype once, as
    PyTorch multiplies by it (deg2rad lowers through PyTorch's own decomposition, see
    :mod:`.composite`)."""
    x = n.args[0]
    if not is_float(x):
        return None
    return b(aten.mul.Tensor, x, const_like(gm, b, 180.0 / math.pi, x, "angle"))


# --------------------------------------------------------------------------- round(decimals)

#: Veltkamp's splitting factor for float32 (2**12 + 1): ``c = a * 4097; hi = c - (c - a)``
#: leaves ``hi`` the upper 12 bits of ``a``'s 24-bit significand and ``lo = a - hi`` the rest,
#: so the product of two halves is exact in float32
_SPLIT = 4097.0
#: from here on a dividend is scaled by 2**-64 first: ``q0 * 4097`` of the splitting stays finite
_HUGE = 2.0**100
#: the splitting's ``a * 4097`` overflows above this (only inf and NaN get here): no correction
_SPLIT_SAFE = 2.0**115
#: round(x, d) with |d| beyond this is left to the CPU: fl(10**-d) nears float32's subnormals
#: (below 1.2e-38) and 10**d overflows past d = 38
_MAX_DECIMALS = 30


def _split(gm, b, a):
    """``(hi, lo)`` with ``a = hi + lo`` exactly and each half 12 bits wide (Veltkamp)."""
    c = b(aten.mul.Tensor, a, number_const(gm, b, _SPLIT, torch.float32, a, "split"))
    hi = b(aten.sub.Tensor, c, b(aten.sub.Tensor, c, a))
    return hi, b(aten.sub.Tensor, a, hi)


def _correctly_rounded_quotient(gm, b, y, p: float):
    """``fl(y / p)`` for a float32 tensor ``y`` and a positive float32 constant ``p``, as the
    IEEE division PyTorch's kernel performs (TOSA has none; ``y * fl(1 / p)`` is off by an ulp
    for 13 to 50% of inputs at 1 to 5 decimals, measured).

    ``q0 = y * fl(1 / p)`` is within an ulp or two; Dekker's product of its halves with ``p``'s
    (``p``'s split here, once) gives ``q0 * p = hi + lo`` exactly, so the residual
    ``e = (y - hi) - lo`` is exact (``y - hi`` by Sterbenz: the two are within a factor 2), and
    ``q0 + e * fl(1 / p)`` is the quotient corrected by the residual's share. (Without an FMA the
    last step rounds twice, so this is measured, not proven: against float32 division on 2e6
    values over 10 decades for p = 10**1 ... 10**10, no difference.) ``e == 0`` keeps ``q0`` (a
    -0.0 stays -0.0); NaN and inf keep ``q0``."""
    # a huge |y| is divided at 2**-64 of its size and scaled back (both exact: powers of two,
    # far from subnormal there), so the splitting below never overflows for finite y
    huge = b(aten.ge.Tensor, b(aten.abs.default, y),
             number_const(gm, b, _HUGE, torch.float32, y, "huge"))
    y = b(aten.mul.Tensor, y, b(aten.where.self, huge,
                                number_const(gm, b, 2.0**-64, torch.float32, y, "scale_down"),
                                number_const(gm, b, 1.0, torch.float32, y, "one")))
    q = _corrected_quotient(gm, b, y, p)
    return b(aten.mul.Tensor, q, b(aten.where.self, huge,
                                   number_const(gm, b, 2.0**64, torch.float32, y, "scale_up"),
                                   number_const(gm, b, 1.0, torch.float32, y, "one")))


def _corrected_quotient(gm, b, y, p: float):
    """:func:`_correctly_rounded_quotient` of a ``y`` below :data:`_HUGE` in magnitude."""
    p32 = float(torch.tensor(p, dtype=torch.float32))
    r32 = float(torch.tensor(1.0, dtype=torch.float32) / torch.tensor(p32, dtype=torch.float32))
    pt = torch.tensor([p32], dtype=torch.float32)
    c = pt * _SPLIT
    p_hi = c - (c - pt)
    p_lo = pt - p_hi
    q0 = b(aten.mul.Tensor, y, number_const(gm, b, r32, torch.float32, y, "recip"))
    q_hi, q_lo = _split(gm, b, q0)

    def times(t, k: float, hint: str):
        return b(aten.mul.Tensor, t, number_const(gm, b, k, torch.float32, y, hint))

    hi = times(q0, p32, "divisor")
    lo = b(aten.add.Tensor,
           b(aten.add.Tensor,
             b(aten.add.Tensor, b(aten.sub.Tensor, times(q_hi, float(p_hi), "p_hi"), hi),
               times(q_hi, float(p_lo), "p_lo")),
             times(q_lo, float(p_hi), "p_hi")),
           times(q_lo, float(p_lo), "p_lo"))
    e = b(aten.sub.Tensor, b(aten.sub.Tensor, y, hi), lo)
    q1 = b(aten.add.Tensor, q0, times(e, r32, "recip"))
    zero = number_const(gm, b, 0.0, torch.float32, y, "zero")
    q1 = b(aten.where.self, b(aten.eq.Tensor, e, zero), q0, q1)
    safe = b(aten.lt.Tensor, b(aten.abs.default, q0),
             number_const(gm, b, _SPLIT_SAFE, torch.float32, y, "split_safe"))
    return b(aten.where.self, safe, q1, q0)


@decomposition(aten.round.decimals)
def round_decimals(gm, n, b):
    """``torch.round(x, decimals=d)`` of a float32 tensor, in PyTorch's operation order (ATen's
    ``round_decimals_kernel``, with ``p = float(10 ** |d|)``): ``round(x * p) / p`` for
    ``d >= 0``, ``round(x / p) * p`` for ``d < 0``, round half to even (``aten.round``'s exact
    visitor). FP divides correctly rounded (:func:`_correctly_rounded_quotient`), so the result
    is PyTorch's bit for bit (measured through the lowering: 1.2e6 values per ``d`` for d in 0, 1,
    2, 3, 4, 5, 7, 10, -1, -2, -4, -7, 2e5 of them on rounding ties, none differ, signs of zero
    included). INT multiplies by the reciprocal: every piece is requantized there, and the
    fake-quant model computes the same chain (``x * p``, a round TABLE (an exact lookup for int16
    activations), ``* (1 / p)``).

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES["DecomposeForTosa"][aten.round.decimals].fn.__name__
        'round_decimals'
    """
    x = n.args[0]
    decimals = int(arg(n, 1, "decimals", 0))
    v = val(x)
    if v is None or v.dtype != torch.float32 or abs(decimals) > _MAX_DECIMALS:
        return None
    p = float(torch.tensor(10.0 ** abs(decimals), dtype=torch.float32))
    exact = b.profile == "FP"

    def divide(t):
        if exact:
            return _correctly_rounded_quotient(gm, b, t, p)
        return b(aten.mul.Tensor, t, number_const(gm, b, 1.0 / p, torch.float32, t, "recip"))

    def rounded(t):
        return b(aten.round.default, t)  # (its visitor keeps -0.0, as nearbyint does)

    if decimals == 0:
        return rounded(x)
    scale = number_const(gm, b, p, torch.float32, x, "ten_power")
    if decimals > 0:
        return divide(rounded(b(aten.mul.Tensor, x, scale)))
    return b(aten.mul.Tensor, rounded(divide(x)), scale)
