"""Special functions in terms of ops with a TOSA visitor: ``torch.atan2`` (FP; INT is one
2-D table, :mod:`lowering.ops.unary`), ``torch.ldexp`` (FP; INT for a constant exponent), and the FP forms of
``torch.sinc``, ``torch.special.ndtr``, ``log_ndtr``, ``erfcx``, ``i0``, ``torch.digamma``
and ``torch.lgamma`` (in INT each of those is one TABLE, :mod:`lowering.ops.unary`).

Every piece of each decomposition lowers in the profile it is built for (a piece left on the
CPU would leave a partition boundary with no PyTorch node, see :mod:`.composite`); an input
the decomposition does not cover (integer tensors, a python-number operand) leaves the op
whole on the CPU. Where a form is not exact its measured error bound is stated next to it
(measured in tests/lowering/test_lowering_special.py against float64).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.fx as fx

from ...graph_utils import get_constant, val
from ._common import const_like, decomposition, is_float

aten = torch.ops.aten
INF = math.inf


def _c(gm, b, value: float, ref: fx.Node, hint: str) -> fx.Node:
    """A float constant next to ``ref`` (0-d next to a 0-d tensor)."""
    return const_like(gm, b, value, ref, hint)


def _float_nodes(*xs) -> bool:
    """Every operand a float32 tensor node (float16/bfloat16 and numbers stay on the CPU)."""
    return all(isinstance(x, fx.Node) and is_float(x) and val(x).dtype == torch.float32 for x in xs)


# ----------------------------------------------------------------------------- atan2
@decomposition(aten.atan2.default, profiles={"FP"})
def atan2(gm, n, b):
    """``atan2(y, x)``, the angle of the point (x, y) in [-pi, pi].

    Range reduction onto atan's polynomial (:func:`lowering.ops.unary.atan`, which the INT
    profile takes as one TABLE): ``r = min(|y|, |x|) / max(|y|, |x|)`` in [0, 1],
    ``a = atan(r)``, then ``pi/2 - a`` where ``|y| > |x|`` (the octant above the diagonal),
    ``pi - a`` where x's sign bit is set (the left half-plane, -0.0 included in FP), and
    finally y's sign (``copysign``, so ``atan2(-0.0, x) = -0.0`` / ``-pi`` as in PyTorch).
    ``r`` is set to 0 where both are zero (``0 / 0``: the angle is then 0 or +-pi by the signs,
    as PyTorch gives) and to 1 where both are infinite (``inf / inf``: +-pi/4, +-3pi/4). NaN
    propagates. FP error: within 4.8e-7 of the float64 angle (measured; atan's polynomial
    within 2e-7, plus the roundings of the division and of ``pi - a``).

    FP only: this form quantized piece by piece (the reciprocal of max(|y|, |x|) over its
    whole range in int8, then the ratio, atan, the corrections) matched its own fake-quant
    graph but was up to 7.8 output steps (mean 1.4) from quantize(atan2(dequantized inputs)).
    INT takes atan2 whole instead, as one 2-D table of the int8 pairs
    (:func:`lowering.ops.unary.atan2_table`).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, y, x):
        ...         return torch.atan2(y, x)
        >>> lm = lowering.lower(M(), (torch.randn(4), torch.randn(4)), profile="FP")
        >>> lm.cpu_nodes
        []
    """
    y, x = n.args[0], n.args[1]
    if not _float_nodes(y, x) or val(n) is None or val(n).dtype != torch.float32:
        return None
    ay, ax = b(aten.abs.default, y), b(aten.abs.default, x)
    lo, hi = b(aten.minimum.default, ay, ax), b(aten.maximum.default, ay, ax)
    ratio = b(aten.div.Tensor, lo, hi)
    zero, one = _c(gm, b, 0.0, ratio, "zero"), _c(gm, b, 1.0, ratio, "one")
    ratio = b(aten.where.self, b(aten.eq.Tensor, lo, _c(gm, b, INF, lo, "inf")), one, ratio)
    ratio = b(aten.where.self, b(aten.eq.Tensor, hi, _c(gm, b, 0.0, hi, "zero")), zero, ratio)
    angle = b(aten.atan.default, ratio)
    steep = b(aten.gt.Tensor, ay, ax)
    angle = b(aten.where.self, steep, b(aten.sub.Tensor, _c(gm, b, math.pi / 2, angle, "half_pi"), angle),
              angle)
    left = b(aten.signbit.default, x)
    angle = b(aten.where.self, left, b(aten.sub.Tensor, _c(gm, b, math.pi, angle, "pi"), angle), angle)
    return b(aten.copysign.Tensor, angle, y)


# ----------------------------------------------------------------------------- FP helpers
def _horner(gm, b, t: fx.Node, coefficients) -> fx.Node:
    """``sum(c[k] * t**k)`` by Horner's rule (``coefficients`` lowest power first)."""
    acc = _c(gm, b, float(coefficients[-1]), t, "c")
    for c in reversed(coefficients[:-1]):
        acc = b(aten.add.Tensor, b(aten.mul.Tensor, acc, t), _c(gm, b, float(c), t, "c"))
    return acc


def _log1p(gm, b, v: fx.Node) -> fx.Node:
    """``log1p(v)`` to a few float32 ulps: ``log(w) * v / (w - 1)`` with ``w = 1 + v`` (the
    factor corrects the rounding of ``1 + v``; Goldberg 1991, Theorem 4), and ``v`` itself
    where ``w`` rounds to 1. The lowered ``log1p`` is ``log(1 + v)``, whose relative error
    grows as 2**-24 / |v| for small v."""
    w = b(aten.add.Tensor, v, _c(gm, b, 1.0, v, "one"))
    corrected = b(aten.mul.Tensor, b(aten.log.default, w),
                  b(aten.div.Tensor, v, b(aten.sub.Tensor, w, _c(gm, b, 1.0, w, "one"))))
    return b(aten.where.self, b(aten.eq.Tensor, w, _c(gm, b, 1.0, w, "one")), v, corrected)


#: erfc(z) = t * exp(-z*z + P(t)), t = 1 / (1 + z/2), z >= 0: the Chebyshev fit of Numerical
#: Recipes (Press et al., 2nd ed., section 6.2, ``erfcc``), fractional error below 1.2e-7
#: everywhere; P's coefficients, lowest power first.
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erfcx_nonnegative(gm, b, z: fx.Node) -> fx.Node:
    """``erfcx(z) = exp(z*z) * erfc(z)`` for ``z >= 0``: ``t * exp(P(t))`` (the fit above
    without its ``exp(-z*z)``, so nothing overflows or underflows: +inf gives 0)."""
    t = b(aten.reciprocal.default,
          b(aten.add.Tensor, b(aten.mul.Tensor, z, _c(gm, b, 0.5, z, "half")), _c(gm, b, 1.0, z, "one")))
    return b(aten.mul.Tensor, t, b(aten.exp.default, _horner(gm, b, t, _ERFC_P)))


def _exp_of_minus_square(gm, b, z: fx.Node) -> fx.Node:
    """``exp(-z*z)`` without the rounding of ``z*z`` (whose relative error 2**-24 would
    become ``z*z * 2**-24`` in the result, 5e-6 at z = 9): ``z = h + l`` with ``h`` z's value
    to 1/4096, so ``h*h`` is exact for |z| < 2048 and ``z*z = h*h + l*(z + h)``."""
    # (clamped: +inf would give inf - inf; exp(-2048**2) is 0 anyway)
    z = b(aten.minimum.default, z, _c(gm, b, 2048.0, z, "z_max"))
    scale = _c(gm, b, 4096.0, z, "scale")
    h = b(aten.div.Tensor, b(aten.floor.default, b(aten.mul.Tensor, z, scale)), scale)
    low = b(aten.mul.Tensor, b(aten.sub.Tensor, z, h), b(aten.add.Tensor, z, h))
    return b(aten.mul.Tensor, b(aten.exp.default, b(aten.neg.default, b(aten.mul.Tensor, h, h))),
             b(aten.exp.default, b(aten.neg.default, low)))


def _erfc(gm, b, t: fx.Node) -> fx.Node:
    """``erfc(t)`` with a small relative error where it is tiny (``1 - erf(t)`` has an
    absolute one): ``E(|t|) = erfcx(|t|) * exp(-t*t)``, and ``2 - E(|t|)`` below zero."""
    z = b(aten.abs.default, t)
    e = b(aten.mul.Tensor, _erfcx_nonnegative(gm, b, z), _exp_of_minus_square(gm, b, z))
    negative = b(aten.lt.Tensor, t, _c(gm, b, 0.0, t, "zero"))
    return b(aten.where.self, negative, b(aten.sub.Tensor, _c(gm, b, 2.0, e, "two"), e), e)


def _unary_float(n) -> fx.Node | None:
    """The input of a unary special function lowered here: a float32 tensor (else None)."""
    x = n.args[0]
    return x if _float_nodes(x) else None


# ----------------------------------------------------------------------------- FP unary forms
@decomposition(aten.sinc.default, aten.special_sinc.default, profiles={"FP"})
def sinc(gm, n, b):
    """``sinc(x) = sin(pi x) / (pi x)``, 1 at x = 0: PyTorch's kernel (its float32 product
    ``pi * x`` too); NaN for +-inf as in PyTorch. In INT one TABLE (:mod:`lowering.ops.unary`).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.sinc(x)
        >>> lowering.lower(M(), (torch.randn(4),), profile="FP").cpu_nodes
        []
    """
    x = _unary_float(n)
    if x is None:
        return None
    product = b(aten.mul.Tensor, x, _c(gm, b, math.pi, x, "pi"))
    ratio = b(aten.div.Tensor, b(aten.sin.default, product), product)
    return b(aten.where.self, b(aten.eq.Tensor, x, _c(gm, b, 0.0, x, "zero")), _c(gm, b, 1.0, x, "one"), ratio)


@decomposition(aten.special_ndtr.default, profiles={"FP"})
def ndtr(gm, n, b):
    """``ndtr(x) = (1 + erf(x / sqrt(2))) / 2``, the standard normal CDF, as PyTorch defines
    it (its own formula: like PyTorch, 0 below about -5.8 and an absolute error near float32's
    spacing at 1 in the far left tail).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.special.ndtr(x)
        >>> lowering.lower(M(), (torch.randn(4),), profile="FP").cpu_nodes
        []
    """
    x = _unary_float(n)
    if x is None:
        return None
    e = b(aten.erf.default, b(aten.mul.Tensor, x, _c(gm, b, math.sqrt(0.5), x, "rsqrt2")))
    return b(aten.mul.Tensor, b(aten.add.Tensor, e, _c(gm, b, 1.0, e, "one")), _c(gm, b, 0.5, e, "half"))


def _erfcx(gm, b, x: fx.Node) -> fx.Node:
    """``erfcx(x)`` for every x: :func:`_erfcx_nonnegative` of ``|x|``, and below zero
    ``2 exp(x*x) - erfcx(-x)`` (PyTorch's reflection: +inf once ``exp(x*x)`` overflows, from
    about x = -9.38)."""
    z = b(aten.abs.default, x)
    pos = _erfcx_nonnegative(gm, b, z)
    reflected = b(aten.sub.Tensor, b(aten.mul.Tensor, b(aten.exp.default, b(aten.mul.Tensor, x, x)),
                                     _c(gm, b, 2.0, x, "two")), pos)
    return b(aten.where.self, b(aten.lt.Tensor, x, _c(gm, b, 0.0, x, "zero")), reflected, pos)


@decomposition(aten.special_erfcx.default, profiles={"FP"})
def erfcx(gm, n, b):
    """``erfcx(x) = exp(x^2) erfc(x)``: for x >= 0 the Numerical Recipes fit :data:`_ERFC_P`
    without its ``exp(-x^2)`` (``t exp(P(t))``, ``t = 1 / (1 + x/2)``: 0 at +inf, ``1 / (x
    sqrt(pi))`` asymptotically), below zero the reflection of :func:`_erfcx`. Measured
    relative error below 1e-6 (float64 reference) on [-9, 1e4]; NaN propagates.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.special.erfcx(x)
        >>> lowering.lower(M(), (torch.randn(4),), profile="FP").cpu_nodes
        []
    """
    x = _unary_float(n)
    return None if x is None else _erfcx(gm, b, x)


@decomposition(aten.special_log_ndtr.default, profiles={"FP"})
def log_ndtr(gm, n, b):
    """``log(ndtr(x))`` as PyTorch computes it (SciPy's form), with ``t = x / sqrt(2)``:
    ``log(erfcx(-t) / 2) - t^2`` below x = -1 (no underflow: about ``-x^2 / 2`` far left),
    ``log1p(-erfc(t) / 2)`` from -1 on, with an accurate erfc (:func:`_erfc`) and log1p
    (:func:`_log1p`), so the far right tail (``-ndtr(-x)``, -7.6e-24 at x = 10) keeps its
    relative precision. Measured relative error below 2e-6 (float64 reference).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.special.log_ndtr(x)
        >>> lowering.lower(M(), (torch.randn(4),), profile="FP").cpu_nodes
        []
    """
    x = _unary_float(n)
    if x is None:
        return None
    t = b(aten.mul.Tensor, x, _c(gm, b, math.sqrt(0.5), x, "rsqrt2"))
    half = _c(gm, b, 0.5, t, "half")
    left = b(aten.sub.Tensor,
             b(aten.log.default, b(aten.mul.Tensor, _erfcx(gm, b, b(aten.neg.default, t)), half)),
             b(aten.mul.Tensor, t, t))
    right = _log1p(gm, b, b(aten.neg.default, b(aten.mul.Tensor, _erfc(gm, b, t), half)))
    return b(aten.where.self, b(aten.lt.Tensor, x, _c(gm, b, -1.0, x, "minus_one")), left, right)


#: Abramowitz & Stegun 9.8.1: I0(x) = sum(c[k] (x / 3.75)**(2k)) for |x| <= 3.75, |error| < 1.6e-7
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
#: A&S 9.8.2: sqrt(x) exp(-x) I0(x) = sum(c[k] (3.75 / x)**k) for x >= 3.75, |error| < 1.9e-7
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537,
             -0.01647633, 0.00392377)


@decomposition(aten.special_i0.default, aten.i0.default, profiles={"FP"})
def i0(gm, n, b):
    """The modified Bessel function ``I0(x)`` (even): the polynomials of Abramowitz & Stegun
    9.8.1 (|x| <= 3.75) and 9.8.2 (beyond: ``exp(|x|) / sqrt(|x|)`` times a polynomial in
    ``3.75 / |x|``, the exponential taken as ``exp(|x|/2)`` twice so it overflows only where
    I0 itself does, near |x| = 91.9). Measured relative error below 1e-6 (float64 reference).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.special.i0(x)
        >>> lowering.lower(M(), (torch.randn(4),), profile="FP").cpu_nodes
        []
    """
    x = _unary_float(n)
    if x is None:
        return None
    a = b(aten.abs.default, x)
    s = b(aten.mul.Tensor, a, _c(gm, b, 1 / 3.75, a, "inv_3_75"))
    small = _horner(gm, b, b(aten.mul.Tensor, s, s), _I0_SMALL)
    # clamped to [3.75, 100] so the unused branch stays finite where |x| is small (0 would give
    # inf) and +-inf gives inf, not inf * 0 (I0 overflows float32 from 91.9 on anyway)
    big_a = b(aten.clamp.default, a, 3.75, 100.0)
    poly = _horner(gm, b, b(aten.mul.Tensor, b(aten.reciprocal.default, big_a), _c(gm, b, 3.75, a, "3_75")),
                   _I0_LARGE)
    half_exp = b(aten.exp.default, b(aten.mul.Tensor, big_a, _c(gm, b, 0.5, a, "half")))
    large = b(aten.mul.Tensor, half_exp,
              b(aten.mul.Tensor, b(aten.mul.Tensor, half_exp, b(aten.rsqrt.default, big_a)), poly))
    return b(aten.where.self, b(aten.gt.Tensor, a, _c(gm, b, 3.75, a, "3_75")), large, small)


# ----------------------------------------------------------------------------- ldexp
def _power_of_two_constants(e: torch.Tensor) -> list[torch.Tensor]:
    """``2**e`` of a constant exponent as float32 factors whose product is ``2**e``: one
    factor where every ``2**e`` is a normal float32, else ``2**h`` and ``2**(e - h)``,
    ``h = trunc(e / 2)`` (each normal for |e| < 252)."""
    e = e.double()
    whole = torch.pow(2.0, e)
    if bool(((whole >= 2.0**-126) & (whole <= 2.0**127)).all()):
        return [whole.float()]
    h = torch.trunc(e / 2)
    return [torch.pow(2.0, h).float(), torch.pow(2.0, e - h).float()]


#: |e| beyond this gives 0 or inf (or x's 0 / inf / NaN) for every float32 x: 2**-300 * 2**128
#: is below half the smallest subnormal, 2**300 * 2**-149 above the largest float
_LDEXP_LIMIT = 300.0


def _times_power_of_two(gm, b, x: fx.Node, e: fx.Node) -> fx.Node:
    """``x * 2**e`` for an integer-valued float ``e``, with exact powers of two: ``|e|``
    (clamped to 300) is ``64 q + r``; ``x`` is multiplied by ``2**(+-2**i)`` for each set bit
    i of ``r`` (a select of the factor or 1; the factors are squares of ``2**+-1``), then by
    ``2**+-64`` for each of the ``q`` sixty-fours. Every factor is a normal float32, so each
    product is exact while it stays in float32's normal range: where ``e > 0`` the products
    grow monotonically, and overflow only where the result does; where ``e < 0`` a result
    below 2**-126 (subnormal) may be rounded more than once (one subnormal step apart)."""
    negative = b(aten.lt.Tensor, e, _c(gm, b, 0.0, e, "zero"))
    a = b(aten.clamp.default, b(aten.abs.default, e), None, _LDEXP_LIMIT)
    q = b(aten.floor.default, b(aten.mul.Tensor, a, _c(gm, b, 1 / 64, a, "inv64")))
    r = b(aten.sub.Tensor, a, b(aten.mul.Tensor, q, _c(gm, b, 64.0, q, "64")))
    one = _c(gm, b, 1.0, x, "one")
    p = b(aten.where.self, negative, _c(gm, b, 0.5, x, "half"), _c(gm, b, 2.0, x, "two"))
    y = x
    for i in range(6):  # the bits of r in [0, 64), each a difference of exact floors
        high = b(aten.floor.default, b(aten.mul.Tensor, r, _c(gm, b, 2.0 ** -(i + 1), r, "bit")))
        bit = b(aten.sub.Tensor, b(aten.floor.default, b(aten.mul.Tensor, r, _c(gm, b, 2.0 ** -i, r, "bit"))),
                b(aten.mul.Tensor, high, _c(gm, b, 2.0, high, "two")))
        y = b(aten.mul.Tensor, y, b(aten.where.self, b(aten.gt.Tensor, bit, _c(gm, b, 0.5, bit, "half")), p, one))
        p = b(aten.mul.Tensor, p, p)
    for j in range(1, int(_LDEXP_LIMIT // 64) + 1):  # p is now 2**+-64
        y = b(aten.mul.Tensor, y, b(aten.where.self, b(aten.ge.Tensor, q, _c(gm, b, float(j), q, "q")), p, one))
    return y


@decomposition(aten.ldexp.Tensor)
def ldexp(gm, n, b):
    """``ldexp(x, e) = x * 2**e`` rounded once, as PyTorch gives it (``ldexp(0.75, 128)`` is
    2.55e38, not ``0.75 * inf``).

    A constant ``e`` (a buffer): constant factors ``2**e`` (or ``2**h`` and ``2**(e - h)``,
    ``h = trunc(e / 2)``, where ``2**e`` is not a normal float32), so in INT the op is a
    quantized multiply by a constant. A tensor ``e`` lowers in FP only (in INT a computed
    ``2**e`` would be quantized to int8, so the op stays on the CPU): an integer ``e`` by
    exact powers of two (:func:`_times_power_of_two`; no POW, which the lowering computes
    as ``exp(e ln 2)``, 2e-6 off at e = 127). A float ``e``: PyTorch's ``x * pow(2, e)``
    (``2**e`` rounded to float32 first: 0 below -149, inf from 128), ``2**floor(e)`` made
    as above times ``exp2`` of the fraction (exact for integer values; measured within 1e-7
    relative otherwise).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x, e):
        ...         return torch.ldexp(x, e)
        >>> lm = lowering.lower(M(), (torch.randn(4), torch.tensor([1, -2, 3, 0])), profile="FP")
        >>> lm.cpu_nodes
        []
    """
    x, e = n.args[0], n.args[1]
    if not _float_nodes(x) or not isinstance(e, fx.Node) or val(e) is None or val(n) is None or \
            val(n).dtype != torch.float32 or val(e).dtype in (torch.bool, torch.float64):
        return None
    ct = get_constant(gm, e)
    if ct is not None:
        y = x
        for factor in _power_of_two_constants(ct):
            y = b(aten.mul.Tensor, y, b.const(gm, factor, "exp2"))
        return y
    if b.profile != "FP":
        return None
    if not val(e).is_floating_point():
        return _times_power_of_two(gm, b, x, b(aten._to_copy.default, e, dtype=torch.float32))
    if val(e).dtype != torch.float32:
        return None
    # PyTorch computes x * pow(2, e) here: 2**e itself rounds (0 below e = -150, inf from 128)
    whole = b(aten.floor.default, e)
    fraction = b(aten.exp2.default, b(aten.sub.Tensor, e, whole))
    power = b(aten.mul.Tensor, _times_power_of_two(gm, b, _c(gm, b, 1.0, x, "one"), whole), fraction)
    return b(aten.mul.Tensor, x, power)


# ----------------------------------------------------------------------------- digamma, lgamma
#: below this the argument is shifted up by the recurrence before the asymptotic series
_SHIFT = 8


def _shifted(gm, b, w: fx.Node) -> tuple[fx.Node, fx.Node, list[fx.Node]]:
    """``(z, small, terms)``: ``z = w + 8`` where ``w < 8`` (``small``), else ``w``; ``terms``
    the ``w + k``, k = 0..7, that the recurrence divides out."""
    small = b(aten.lt.Tensor, w, _c(gm, b, float(_SHIFT), w, "shift"))
    terms = [w] + [b(aten.add.Tensor, w, _c(gm, b, float(k), w, "k")) for k in range(1, _SHIFT)]
    z = b(aten.where.self, small, b(aten.add.Tensor, w, _c(gm, b, float(_SHIFT), w, "shift")), w)
    return z, small, terms


def _fraction_sine(gm, b, x: fx.Node) -> fx.Node:
    """``|sin(pi x)|`` computed on ``t = |x - trunc(x)|`` in [0, 1) (exact: ``x - floor(x)``
    would round ``x + 1`` for a small negative x) folded to ``min(t, 1 - t)`` in [0, 1/2]
    (``1 - t`` exact for t >= 1/2), so every argument keeps its accuracy; 0 at the integers."""
    t = b(aten.abs.default, b(aten.sub.Tensor, x, b(aten.trunc.default, x)))
    t = b(aten.minimum.default, t, b(aten.sub.Tensor, _c(gm, b, 1.0, t, "one"), t))
    return b(aten.sin.default, b(aten.mul.Tensor, t, _c(gm, b, math.pi, t, "pi")))


#: Stirling's series of lgamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2) in 1/z: the odd
#: powers 1/(12 z) - 1/(360 z^3) + 1/(1260 z^5) - 1/(1680 z^7), in u = 1/z^2 times 1/z;
#: truncation below 1/(1188 z^9), 7e-12 for z >= 8 (the digamma shift's bound too)
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680)
#: digamma(z) - (log z - 1/(2z)) = -1/(12 z^2) + 1/(120 z^4) - 1/(252 z^6) + 1/(240 z^8), in
#: u = 1/z^2; truncation below 1/(132 z^10), 7e-12 for z >= 8
_DIGAMMA_SERIES = (0.0, -1 / 12, 1 / 120, -1 / 252, 1 / 240)


def _lgamma_quotient_coefficients(degree: int = 12) -> np.ndarray:
    """Coefficients ``c`` with ``lgamma(2 + u) ~ u (u + 1) sum(c[k] u**k)`` on u in [-1, 1].

    lgamma's zeros at 1 and 2 are factored out, so the polynomial (a least-squares fit at
    Chebyshev nodes of ``lgamma(x) / ((x - 1)(x - 2))``, analytic on [1, 3]) keeps a relative
    error there: degree 12 evaluated in float32 is within 1.9e-7 relative of lgamma on [1, 3]
    (checked against float64 in tests/lowering/test_lowering_special.py).
    """
    nodes = 400
    u = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)  # no node at u = -1 or 0 (x = 1, 2)
    x = u + 2
    quotient = np.array([math.lgamma(t) for t in x]) / ((x - 1) * (x - 2))
    cheb = np.polynomial.chebyshev.chebfit(u, quotient, degree)
    return np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(cheb)).coef


_LGAMMA_QUOTIENT = _lgamma_quotient_coefficients()


def _lgamma_nonnegative(gm, b, w: fx.Node) -> fx.Node:
    """``lgamma(w)`` for ``w >= 0``, no cancellation anywhere:

    * [1, 3]: the fit :data:`_LGAMMA_QUOTIENT` times ``(w - 1)(w - 2)``;
    * below 1: ``lgamma(w + 1) - log(w)`` (the first term small, the second dominant);
    * (3, 8): ``lgamma(m) + log(m (m + 1) ... (w - 1))``, ``m = w - floor(w) + 2`` in [2, 3)
      (exact), both terms positive;
    * 8 on: Stirling's series (:data:`_STIRLING`, truncation below 7e-12).
    """
    one = _c(gm, b, 1.0, w, "one")
    below_one = b(aten.lt.Tensor, w, one)
    above_three = b(aten.gt.Tensor, w, _c(gm, b, 3.0, w, "three"))
    m = b(aten.add.Tensor, b(aten.sub.Tensor, w, b(aten.floor.default, w)), _c(gm, b, 2.0, w, "two"))
    core = b(aten.where.self, below_one, b(aten.add.Tensor, w, one), b(aten.where.self, above_three, m, w))
    core = b(aten.clamp.default, core, 1.0, 3.0)  # (w >= 8 takes Stirling's branch)
    u = b(aten.sub.Tensor, core, _c(gm, b, 2.0, core, "two"))
    zeros = b(aten.mul.Tensor, u, b(aten.add.Tensor, u, _c(gm, b, 1.0, u, "one")))
    # (+ 0.0: lgamma(1) is +0, where u (u + 1) = -1 * 0 is -0)
    fit = b(aten.add.Tensor, b(aten.mul.Tensor, _horner(gm, b, u, _LGAMMA_QUOTIENT), zeros),
            _c(gm, b, 0.0, u, "zero"))
    # (3, 8): the factors m, m + 1, ... below w, at most five (m + j < w - 1/2: both exact)
    product = one
    limit = b(aten.sub.Tensor, w, _c(gm, b, 0.5, w, "half"))
    for j in range(5):
        factor = b(aten.add.Tensor, m, _c(gm, b, float(j), m, "j"))
        product = b(aten.mul.Tensor, product, b(aten.where.self, b(aten.lt.Tensor, factor, limit), factor, one))
    shifted_up = b(aten.add.Tensor, fit, b(aten.log.default, product))
    shifted_down = b(aten.sub.Tensor, fit, b(aten.log.default, w))
    inv = b(aten.reciprocal.default, b(aten.maximum.default, w, _c(gm, b, float(_SHIFT), w, "shift")))
    big = b(aten.maximum.default, w, _c(gm, b, float(_SHIFT), w, "shift"))
    series = b(aten.mul.Tensor, _horner(gm, b, b(aten.mul.Tensor, inv, inv), _STIRLING), inv)
    main = b(aten.sub.Tensor, b(aten.mul.Tensor, b(aten.sub.Tensor, big, _c(gm, b, 0.5, big, "half")),
                                b(aten.log.default, big)), big)
    stirling = b(aten.add.Tensor, b(aten.add.Tensor, main, _c(gm, b, 0.5 * math.log(2 * math.pi), w, "half_log_2pi")),
                 series)
    y = b(aten.where.self, above_three, shifted_up, fit)
    y = b(aten.where.self, below_one, shifted_down, y)
    return b(aten.where.self, b(aten.ge.Tensor, w, _c(gm, b, float(_SHIFT), w, "shift")), stirling, y)


@decomposition(aten.lgamma.default, aten.special_gammaln.default, profiles={"FP"})
def lgamma(gm, n, b):
    """``lgamma(x) = log|Gamma(x)|``: :func:`_lgamma_nonnegative` for ``x >= 0``; for ``x < 0``
    the reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` (:func:`_fraction_sine`: +inf at
    the poles 0, -1, -2, ...). +-inf give +inf, NaN NaN, as in PyTorch. Measured (float64
    reference): within 1e-6 x max(1, |lgamma|) for x >= 0 (relative 4e-7 next to the zeros at
    1 and 2), and on the negative axis within 1e-6 x max(1, |lgamma|) (there the reflection's
    two terms cancel next to lgamma's zeros, as they do in every reflection).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.lgamma(x)
        >>> lowering.lower(M(), (torch.rand(4) + 0.5,), profile="FP").cpu_nodes
        []
    """
    x = _unary_float(n)
    if x is None:
        return None
    negative = b(aten.lt.Tensor, x, _c(gm, b, 0.0, x, "zero"))
    w = b(aten.where.self, negative, b(aten.sub.Tensor, _c(gm, b, 1.0, x, "one"), x), x)
    positive = _lgamma_nonnegative(gm, b, w)
    reflected = b(aten.sub.Tensor,
                  b(aten.log.default, b(aten.div.Tensor, _c(gm, b, math.pi, x, "pi"), _fraction_sine(gm, b, x))),
                  positive)
    y = b(aten.where.self, negative, reflected, positive)
    # +-inf: inf - inf in the series, floor(-inf) - -inf in the reflection; lgamma(+-inf) is +inf
    infinite = b(aten.eq.Tensor, b(aten.abs.default, x), _c(gm, b, INF, x, "inf"))
    return b(aten.where.self, infinite, _c(gm, b, INF, x, "inf"), y)


@decomposition(aten.digamma.default, aten.special_digamma.default, aten.special_psi.default, profiles={"FP"})
def digamma(gm, n, b):
    """``digamma(x) = d/dx lgamma(x)``: for ``w >= 0`` the asymptotic series
    ``log z - 1/(2z) + ...`` (:data:`_DIGAMMA_SERIES`) at ``z = w + 8`` minus
    ``sum 1/(w + k)``, k = 0..7, where ``w < 8``; for ``x < 0`` PyTorch's reflection
    ``digamma(1 - x) - pi / tan(pi r)``, ``r = x - trunc(x)``; PyTorch's special values:
    ``-inf`` at +0, ``+inf`` at -0, NaN at the negative integers and -inf, +inf at +inf.
    Measured (float64 reference): within 1e-6 relative, or 2e-6 absolute next to its zeros
    (1.4616..., and one in each negative unit interval).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.digamma(x)
        >>> lowering.lower(M(), (torch.rand(4) + 0.5,), profile="FP").cpu_nodes
        []
    """
    x = _unary_float(n)
    if x is None:
        return None
    zero = _c(gm, b, 0.0, x, "zero")
    negative = b(aten.lt.Tensor, x, zero)
    w = b(aten.where.self, negative, b(aten.sub.Tensor, _c(gm, b, 1.0, x, "one"), x), x)
    z, small, terms = _shifted(gm, b, w)
    inv = b(aten.reciprocal.default, z)
    series = _horner(gm, b, b(aten.mul.Tensor, inv, inv), _DIGAMMA_SERIES)
    asymptotic = b(aten.add.Tensor, b(aten.sub.Tensor, b(aten.log.default, z),
                                      b(aten.mul.Tensor, inv, _c(gm, b, 0.5, inv, "half"))), series)
    total = b(aten.reciprocal.default, terms[-1])
    for t in reversed(terms[:-1]):  # smallest terms first
        total = b(aten.add.Tensor, total, b(aten.reciprocal.default, t))
    positive = b(aten.sub.Tensor, asymptotic, b(aten.where.self, small, total, zero))
    r = b(aten.sub.Tensor, x, b(aten.trunc.default, x))
    # tan(pi r) has period 1 in r: r + 1 (exact) where r < -1/2 keeps pi r near 0, where its
    # float32 rounding is small next to the distance to tan's pole or zero (at r = -0.9999962
    # the unfolded pi r was 2% off, and digamma with it)
    folded = b(aten.where.self, b(aten.lt.Tensor, r, _c(gm, b, -0.5, r, "minus_half")),
               b(aten.add.Tensor, r, _c(gm, b, 1.0, r, "one")), r)
    cotangent = b(aten.div.Tensor, _c(gm, b, math.pi, x, "pi"),
                  b(aten.tan.default, b(aten.mul.Tensor, folded, _c(gm, b, math.pi, r, "pi"))))
    y = b(aten.where.self, negative, b(aten.sub.Tensor, positive, cotangent), positive)
    pole = b(aten.logical_and.default, negative, b(aten.eq.Tensor, r, zero))  # -1, -2, ..., -inf
    y = b(aten.where.self, pole, _c(gm, b, math.nan, x, "nan"), y)
    at_zero = b(aten.eq.Tensor, x, zero)
    signed_inf = b(aten.where.self, b(aten.signbit.default, x), _c(gm, b, INF, x, "inf"), _c(gm, b, -INF, x, "minus_inf"))
    return b(aten.where.self, at_zero, signed_inf, y)
