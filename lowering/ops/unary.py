"""Unary math: inverse trigonometric and hyperbolic functions, sinh/cosh/tan, logarithms to
other bases, erfinv, logit, celu/selu, sign and rounding; the INT TABLEs of special functions
whose FP forms are decompositions (sinc, ndtr, log_ndtr, erfcx, i0, digamma, lgamma); and
atan2 of two int8 tensors as one 2-D table (GATHER).

In INT each op is one TABLE of the op itself (:func:`~lowering.ops.activation.unary_function`);
in FP each is composed from TOSA FP32 operators. Where the composition is not exact, its
error bound is stated next to it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.fx as fx

from ..errors import LoweringError
from ..qparams import dequantize_f32, quantize_f64
from .activation import elu_like, fp_const, lookup, unary_function
from .common import cast_to, clamp, compare, fp_binary, fp_sqrt, fp_unary, select
from .registry import register

aten = torch.ops.aten


def _atan_coefficients(degree: int = 7) -> np.ndarray:
    """Coefficients ``c`` with ``atan(r) ~ r * sum(c[k] * r**(2k))`` on [0, 1].

    A least-squares fit at Chebyshev nodes of ``atan(r) / r`` as a polynomial in ``r**2``:
    degree 7 keeps the float32 Horner evaluation within 2e-7 of atan on [0, 1] (checked in
    tests/lowering against torch.atan).
    """
    nodes = 256
    u = (np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes) + 1) / 2  # r**2 in (0, 1)
    r = np.sqrt(u)
    cheb = np.polynomial.chebyshev.chebfit(2 * u - 1, np.arctan(r) / r, degree)
    in_t = np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(cheb))
    return in_t(np.polynomial.Polynomial([-1.0, 2.0])).coef  # t = 2u - 1 -> powers of u


_ATAN_COEFFICIENTS = _atan_coefficients()


def _with_sign_of(em, node, magnitude: str, x: str, suffix: str, out: str | None = None) -> str:
    """``magnitude`` where ``x >= 0``, ``-magnitude`` where ``x < 0``."""
    negative = compare(em, "GREATER", fp_const(em, node, 0.0, suffix + "_zero"), x,
                        suffix + "_neg")
    negated = fp_unary(em, "NEGATE", magnitude, suffix + "_negated")
    return select(em, negative, negated, magnitude, suffix, out=out)


def _atan_ratio(em, node, y: str, w: str, suffix: str, out: str | None = None) -> str:
    """``atan(y / w)`` for ``w >= 0`` (``w`` may be 0 where ``y`` is not).

    The smaller of ``|y|`` and ``w`` over the larger is in [0, 1], where the polynomial holds;
    when ``|y| > w`` the angle is pi/2 minus the polynomial's. The sign is ``y``'s.
    """
    a = fp_unary(em, "ABS", y, suffix + "_abs")
    lo = fp_binary(em, "MINIMUM", a, w, suffix + "_lo")
    hi = fp_binary(em, "MAXIMUM", a, w, suffix + "_hi")
    r = fp_binary(em, "MUL", lo, fp_unary(em, "RECIPROCAL", hi, suffix + "_inv"), suffix + "_r")
    u = fp_binary(em, "MUL", r, r, suffix + "_u")
    acc = fp_const(em, node, float(_ATAN_COEFFICIENTS[-1]), f"{suffix}_c{len(_ATAN_COEFFICIENTS) - 1}")
    for k in range(len(_ATAN_COEFFICIENTS) - 2, -1, -1):  # Horner in u = r**2
        acc = fp_binary(em, "ADD", fp_binary(em, "MUL", acc, u, f"{suffix}_h{k}"),
                        fp_const(em, node, float(_ATAN_COEFFICIENTS[k]), f"{suffix}_c{k}"),
                        f"{suffix}_p{k}")
    angle = fp_binary(em, "MUL", acc, r, suffix + "_small")
    swapped = compare(em, "GREATER", a, w, suffix + "_swapped")
    complement = fp_binary(em, "SUB", fp_const(em, node, math.pi / 2, suffix + "_half_pi"), angle,
                           suffix + "_complement")
    angle = select(em, swapped, complement, angle, suffix + "_angle")
    return _with_sign_of(em, node, angle, y, suffix, out)


def _one_minus_square(em, node, x: str, suffix: str) -> str:
    """``(1 - x) * (1 + x)``: no cancellation near |x| = 1, unlike ``1 - x * x``."""
    one = fp_const(em, node, 1.0, suffix + "_one")
    return fp_binary(em, "MUL", fp_binary(em, "SUB", one, x, suffix + "_1mx"),
                     fp_binary(em, "ADD", one, x, suffix + "_1px"), suffix)


@unary_function(aten.atan.default)
def atan(em, node, x, out):
    """atan(x): the odd polynomial on [0, 1] with range reduction (|error| < 2e-7)."""
    _atan_ratio(em, node, x, fp_const(em, node, 1.0, "one"), "atan", out)


@unary_function(aten.asin.default)
def asin(em, node, x, out):
    """asin(x) = atan(x / sqrt(1 - x^2)); NaN outside [-1, 1] as in PyTorch."""
    _atan_ratio(em, node, x, fp_sqrt(em, _one_minus_square(em, node, x, "w2"), "w"), "asin", out)


@unary_function(aten.acos.default)
def acos(em, node, x, out):
    """acos(x) = pi/2 - asin(x)."""
    a = _atan_ratio(em, node, x, fp_sqrt(em, _one_minus_square(em, node, x, "w2"), "w"), "asin")
    fp_binary(em, "SUB", fp_const(em, node, math.pi / 2, "half_pi"), a, "fp", out=out)


def _exp_pair(em, x: str):
    e = fp_unary(em, "EXP", x, "exp")
    return e, fp_unary(em, "RECIPROCAL", e, "exp_neg")


@unary_function(aten.sinh.default)
def sinh(em, node, x, out):
    """(exp(x) - exp(-x)) / 2."""
    e, inv = _exp_pair(em, x)
    fp_binary(em, "MUL", fp_binary(em, "SUB", e, inv, "diff"), fp_const(em, node, 0.5, "half"),
              "fp", out=out)


@unary_function(aten.cosh.default)
def cosh(em, node, x, out):
    """(exp(x) + exp(-x)) / 2."""
    e, inv = _exp_pair(em, x)
    fp_binary(em, "MUL", fp_binary(em, "ADD", e, inv, "sum"), fp_const(em, node, 0.5, "half"),
              "fp", out=out)


@unary_function(aten.tan.default)
def tan(em, node, x, out):
    """sin(x) / cos(x)."""
    fp_binary(em, "MUL", fp_unary(em, "SIN", x, "sin"),
              fp_unary(em, "RECIPROCAL", fp_unary(em, "COS", x, "cos"), "inv_cos"), "fp", out=out)


@unary_function(aten.asinh.default)
def asinh(em, node, x, out):
    """sign(x) * log(|x| + sqrt(x^2 + 1)) (odd, so the log never sees a cancellation)."""
    a = fp_unary(em, "ABS", x, "abs")
    root = fp_sqrt(em, fp_binary(em, "ADD", fp_binary(em, "MUL", a, a, "sq"),
                                 fp_const(em, node, 1.0, "one"), "sq1"), "root")
    magnitude = fp_unary(em, "LOG", fp_binary(em, "ADD", a, root, "arg"), "log")
    _with_sign_of(em, node, magnitude, x, "sign", out)


@unary_function(aten.acosh.default)
def acosh(em, node, x, out):
    """log(x + sqrt((x - 1)(x + 1))); NaN below 1 as in PyTorch."""
    one = fp_const(em, node, 1.0, "one")
    prod = fp_binary(em, "MUL", fp_binary(em, "SUB", x, one, "xm1"),
                     fp_binary(em, "ADD", x, one, "xp1"), "prod")
    fp_unary(em, "LOG", fp_binary(em, "ADD", x, fp_sqrt(em, prod, "root"), "arg"), "fp", out=out)


@unary_function(aten.atanh.default)
def atanh(em, node, x, out):
    """(log(1 + x) - log(1 - x)) / 2."""
    one = fp_const(em, node, 1.0, "one")
    diff = fp_binary(em, "SUB", fp_unary(em, "LOG", fp_binary(em, "ADD", one, x, "1px"), "log_p"),
                     fp_unary(em, "LOG", fp_binary(em, "SUB", one, x, "1mx"), "log_m"), "diff")
    fp_binary(em, "MUL", diff, fp_const(em, node, 0.5, "half"), "fp", out=out)


@unary_function(aten.log10.default, aten.log2.default)
def log_base(em, node, x, out):
    """log(x) / log(base)."""
    base = 10.0 if node.target == aten.log10.default else 2.0
    fp_binary(em, "MUL", fp_unary(em, "LOG", x, "ln"), fp_const(em, node, 1.0 / math.log(base),
                                                                "inv_ln_base"), "fp", out=out)


@unary_function(aten.logit.default)
def logit(em, node, x, out):
    """log(x) - log(1 - x), with x clamped to [eps, 1 - eps] when ``eps`` is given."""
    eps = node.args[1] if len(node.args) > 1 else node.kwargs.get("eps")
    if eps is not None:
        clamped = em.new("clamped", em.writer.shapes[x], "FP32")
        clamp(em, x, float(eps), 1.0 - float(eps), clamped)
        x = clamped
    one_minus = fp_binary(em, "SUB", fp_const(em, node, 1.0, "one"), x, "1mx")
    fp_binary(em, "SUB", fp_unary(em, "LOG", x, "log"), fp_unary(em, "LOG", one_minus, "log_1mx"),
              "fp", out=out)


@unary_function(aten.erfinv.default)
def erfinv(em, node, x, out):
    """Inverse error function: an initial estimate refined by two Newton steps on ERF.

    The estimate ``sign(x) * sqrt(sqrt(t^2 - L/a) - t)``, ``L = log(1 - x^2)``,
    ``t = 2/(pi a) + L/2``, ``a = 0.147`` is within 2e-3 relative; each Newton step
    ``y -= (erf(y) - x) * sqrt(pi)/2 * exp(y^2)`` squares the error, down to what float32
    ERF resolves: |error| < 1e-6 for |x| <= 0.99, < 5e-5 for |x| <= 0.9999. |x| = 1 gives
    +-inf, |x| > 1 NaN, as in PyTorch.
    """
    a = 0.147
    log_term = fp_unary(em, "LOG", _one_minus_square(em, node, x, "w2"), "L")
    t = fp_binary(em, "ADD", fp_const(em, node, 2 / (math.pi * a), "t0"),
                  fp_binary(em, "MUL", log_term, fp_const(em, node, 0.5, "half"), "hL"), "t")
    inner = fp_binary(em, "SUB", fp_binary(em, "MUL", t, t, "t2"),
                      fp_binary(em, "MUL", log_term, fp_const(em, node, 1 / a, "inv_a"), "La"),
                      "inner")
    estimate = fp_sqrt(em, fp_binary(em, "SUB", fp_sqrt(em, inner, "root_in"), t, "diff"),
                       "root_out")
    y = _with_sign_of(em, node, estimate, x, "y0")
    half_sqrt_pi = fp_const(em, node, math.sqrt(math.pi) / 2, "half_sqrt_pi")
    for step in (1, 2):
        residual = fp_binary(em, "SUB", fp_unary(em, "ERF", y, f"erf{step}"), x, f"res{step}")
        slope_inv = fp_binary(em, "MUL", fp_unary(em, "EXP", fp_binary(em, "MUL", y, y,
                                                                        f"y2_{step}"),
                                                  f"exp{step}"), half_sqrt_pi, f"dinv{step}")
        y = fp_binary(em, "SUB", y, fp_binary(em, "MUL", residual, slope_inv, f"delta{step}"),
                      f"y{step}")
    # |x| = 1: the Newton step computes 0 * inf; the limit is +-inf
    edge = compare(em, "EQUAL", fp_unary(em, "ABS", x, "abs"), fp_const(em, node, 1.0, "one"),
                    "edge")
    infinite = fp_binary(em, "MUL", x, fp_const(em, node, math.inf, "inf"), "infinite")
    select(em, edge, infinite, y, "fp", out=out)


@unary_function(aten.celu.default)
def celu(em, node, x, out):
    """celu(x, alpha) = x if x > 0 else alpha * (exp(x / alpha) - 1)."""
    alpha = float(node.args[1] if len(node.args) > 1 else node.kwargs.get("alpha", 1.0))
    elu_like(em, node, x, out, alpha, input_scale=1.0 / alpha)


#: SELU's fixed-point constants (Klambauer et al. 2017), as torch.nn.functional.selu uses them
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@unary_function(aten.selu.default)
def selu(em, node, x, out):
    """scale * elu(x, alpha) with SELU's constants."""
    elu_like(em, node, x, out, _SELU_ALPHA, scale=_SELU_SCALE)


@unary_function(aten.sign.default, aten.sgn.default, step=True)
def sign(em, node, x, out):
    """1 above zero, -1 below, +0 elsewhere: for -0.0 and NaN too, as PyTorch's sign gives."""
    dtype = em.writer.dtypes[x]
    zero = fp_const(em, node, 0, "zero", dtype)
    below = select(em, compare(em, "GREATER", zero, x, "neg"),
                    fp_const(em, node, -1, "minus_one", dtype), zero, "below")
    select(em, compare(em, "GREATER", x, zero, "pos"), fp_const(em, node, 1, "plus_one", dtype),
           below, "fp", out=out)


def _integer_identity(em, x, out) -> bool:
    """Rounding an integer tensor returns it: IDENTITY (True when ``x`` is an integer)."""
    if em.writer.dtypes[x] == "FP32":
        return False
    em.writer.op("IDENTITY", [x], out)
    return True


@unary_function(aten.floor.default, aten.ceil.default, step=True)
def floor_ceil(em, node, x, out):
    """TOSA FLOOR / CEIL."""
    if not _integer_identity(em, x, out):
        fp_unary(em, "FLOOR" if node.target == aten.floor.default else "CEIL", x, "fp", out=out)


@unary_function(aten.trunc.default, aten.fix.default, step=True)
def trunc(em, node, x, out):
    """Toward zero: CEIL below zero, FLOOR elsewhere."""
    if not _integer_identity(em, x, out):
        toward_zero(em, node, x, "fp", out)


def toward_zero(em, node, x, suffix: str, out: str | None = None) -> str:
    """FP ``trunc(x)``: CEIL below zero, FLOOR elsewhere."""
    negative = compare(em, "GREATER", fp_const(em, node, 0.0, "zero"), x, "neg")
    return select(em, negative, fp_unary(em, "CEIL", x, "ceil"), fp_unary(em, "FLOOR", x, "floor"), suffix,
                  out=out)


#: 2**23: from here on float32 holds only integers
_FP32_INTEGER_LIMIT = float(2**23)


@unary_function(aten.round.default, step=True)
def round_half_even(em, node, x, out):
    """Round half to even, as torch.round: exact.

    For 0 <= |x| < 2**23, ``|x| + 2**23`` lies in [2**23, 2**24) where float32's spacing is
    1, so the addition's round-to-nearest-even rounds |x| to an integer, ties to even, and
    subtracting 2**23 again is exact (both in [2**23, 2**24)). From 2**23 on |x| is already
    an integer. The sign is restored afterwards (round is odd).
    """
    if _integer_identity(em, x, out):
        return
    a = fp_unary(em, "ABS", x, "abs")
    limit = fp_const(em, node, _FP32_INTEGER_LIMIT, "limit")
    rounded = fp_binary(em, "SUB", fp_binary(em, "ADD", a, limit, "shifted"), limit, "rounded")
    # x itself where it is an integer already: from 2**23 on, and a zero (whose sign the
    # comparison with 0 would lose: round(-0.0) is -0.0)
    whole = fp_binary(em, "LOGICAL_OR", compare(em, "GREATER_EQUAL", a, limit, "large"),
                      compare(em, "EQUAL", a, fp_const(em, node, 0.0, "zero"), "zero_in"), "whole", dtype="BOOL")
    select(em, whole, x, _with_sign_of(em, node, rounded, x, "sign"), "fp", out=out)


@unary_function(aten.log_sigmoid.default)
def log_sigmoid(em, node, x, out):
    """``min(x, 0) - log(1 + exp(-|x|))``: exp never overflows, and the result stays finite
    down to float32's lowest values (log(sigmoid(x)) would take log(0) below about -104)."""
    zero = fp_const(em, node, 0.0, "zero")
    tail = fp_unary(em, "EXP", fp_unary(em, "NEGATE", fp_unary(em, "ABS", x, "abs"), "nabs"), "exp")
    log = fp_unary(em, "LOG", fp_binary(em, "ADD", tail, fp_const(em, node, 1.0, "one"), "p1"), "log")
    fp_binary(em, "SUB", fp_binary(em, "MINIMUM", x, zero, "low"), log, "fp", out=out)


def _lambd(node) -> float:
    return float(node.args[1] if len(node.args) > 1 else node.kwargs.get("lambd", 0.5))


def _inside(em, node, x, lambd: float) -> str:
    """``-lambd <= x <= lambd`` (False for NaN, as in PyTorch's shrink kernels)."""
    low = compare(em, "GREATER_EQUAL", x, fp_const(em, node, -lambd, "minus_lambd"), "ge_low")
    high = compare(em, "GREATER_EQUAL", fp_const(em, node, lambd, "lambd"), x, "le_high")
    return fp_binary(em, "LOGICAL_AND", low, high, "inside", dtype="BOOL")


@unary_function(aten.hardshrink.default, step=True)
def hardshrink(em, node, x, out):
    """0 for ``|x| <= lambd``, else ``x`` (NaN stays NaN)."""
    lambd = _lambd(node)
    select(em, _inside(em, node, x, lambd), fp_const(em, node, 0.0, "zero"), x, "fp", out=out)


@unary_function(aten.softshrink.default)
def softshrink(em, node, x, out):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between (NaN stays
    NaN)."""
    lambd = _lambd(node)
    shifted = select(em, compare(em, "GREATER", x, fp_const(em, node, 0.0, "zero"), "pos"),
                     fp_binary(em, "SUB", x, fp_const(em, node, lambd, "lambd"), "minus"),
                     fp_binary(em, "ADD", x, fp_const(em, node, lambd, "lambd"), "plus"), "shifted")
    select(em, _inside(em, node, x, lambd), fp_const(em, node, 0.0, "zero"), shifted, "fp", out=out)


@unary_function(aten.exp2.default)
def exp2(em, node, x, out):
    """``exp(x * ln 2)``: relative error within about ``|x| * 2**-24`` plus EXP's own."""
    fp_unary(em, "EXP", fp_binary(em, "MUL", x, fp_const(em, node, math.log(2.0), "ln2"), "xln2"),
             "fp", out=out)


@unary_function(aten.frac.default, step=True)
def frac(em, node, x, out):
    """``x - trunc(x)`` (exact; NaN and infinities give NaN, as in PyTorch)."""
    fp_binary(em, "SUB", x, toward_zero(em, node, x, "trunc"), "fp", out=out)


@unary_function(aten.special_erfc.default, aten.erfc.default)
def erfc(em, node, x, out):
    """``1 - erf(x)``: an absolute error within float32's spacing at 1 (about 6e-8), so its
    relative error grows where erfc is tiny (x above about 3)."""
    fp_binary(em, "SUB", fp_const(em, node, 1.0, "one"), fp_unary(em, "ERF", x, "erf"), "fp", out=out)


@unary_function(aten.nan_to_num.default)
def nan_to_num(em, node, x, out):
    """NaN -> ``nan`` (0), +inf -> ``posinf`` (float32's largest), -inf -> ``neginf`` (its
    lowest); finite values unchanged. An integer tensor holds none of them: IDENTITY."""
    if _integer_identity(em, x, out):
        return
    fmax = float(np.finfo(np.float32).max)
    values = [node.args[i] if len(node.args) > i else node.kwargs.get(k) for i, k in
              ((1, "nan"), (2, "posinf"), (3, "neginf"))]
    nan, posinf, neginf = (d if v is None else float(v) for v, d in zip(values, (0.0, fmax, -fmax), strict=True))
    big = compare(em, "GREATER", x, fp_const(em, node, fmax, "fmax"), "posinf_at")
    small = compare(em, "GREATER", fp_const(em, node, -fmax, "fmin"), x, "neginf_at")
    y = select(em, big, fp_const(em, node, posinf, "posinf"), x, "hi")
    y = select(em, small, fp_const(em, node, neginf, "neginf"), y, "lo")
    number = compare(em, "EQUAL", x, x, "number")  # False only for NaN
    select(em, number, y, fp_const(em, node, nan, "nan"), "fp", out=out)


# ----------------------------------------------------------------------------- special functions
# INT only: one TABLE of the function itself. Their FP forms are decompositions
# (lowering.passes.decompositions.special: sinc, ndtr, log_ndtr, erfcx, i0, digamma, lgamma).


def _table_only(em, node, x, out):
    raise LoweringError(f"{node.target} has no FP32 form here (an INT TABLE only)", node=node.name)


@unary_function(aten.sinc.default, aten.special_sinc.default, aten.special_ndtr.default, aten.special_log_ndtr.default,
                aten.special_erfcx.default, aten.special_i0.default, aten.i0.default,
                profiles={"INT"})
def special_table(em, node, x, out):
    """INT: one TABLE of the function (quantize(f(dequantize(q))) for each of the 256 int8
    inputs, 513 interpolated samples for int16). FP: see the decompositions of
    :mod:`lowering.passes.decompositions.special`."""
    _table_only(em, node, x, out)


@unary_function(aten.digamma.default, aten.special_digamma.default, aten.special_psi.default,
                aten.lgamma.default, aten.special_gammaln.default, step=True, profiles={"INT"})
def gamma_table(em, node, x, out):
    """INT (int8 only): one TABLE of digamma / lgamma. Their poles at 0, -1, -2, ... are jumps
    (to the saturated ends, or NaN, which the table holds as 0 like the fake-quant cast) that
    the interpolating int16 TABLE cannot follow, so int16 inputs stay on the CPU. FP: see the
    decompositions of :mod:`lowering.passes.decompositions.special`."""
    _table_only(em, node, x, out)


# ----------------------------------------------------------------------------- binary: 2-D TABLE
#: int8 levels per operand: the 2-D table of a function of two int8 inputs has 256 * 256 entries
_LEVELS = 256


def _int8_table_2d(fn, qa, qb, qo) -> np.ndarray:
    """``quantize(fn(dequantize(a), dequantize(b)))`` for every pair of int8 levels, entry
    ``(a + 128) * 256 + (b + 128)``, as the fake-quant graph computes it (the dequantized
    float32 inputs, fn in float32 as PyTorch runs it, the quantization in float64, as
    :func:`~lowering.ops.activation.int8_table` does)."""
    q = torch.arange(-128, 128, dtype=torch.int8)
    a = dequantize_f32(q, qa.s, qa.zp).float()[:, None].expand(_LEVELS, _LEVELS)
    b = dequantize_f32(q, qb.s, qb.zp).float()[None, :].expand(_LEVELS, _LEVELS)
    y = torch.as_tensor(fn(a, b)).double()
    return quantize_f64(y, qo.s, qo.zp, qo.qmin, qo.qmax, qo.dtype).to(torch.int8).reshape(-1).numpy()


@register(aten.atan2.default, profiles={"INT"})
def atan2_table(em, node):
    """INT atan2 of two int8 tensors: one GATHER from a 65536-entry table of the quantized
    angle of every pair of input levels (:func:`_int8_table_2d`), at the index
    ``(qy + 128) * 256 + (qx + 128)`` computed exactly in int32 (broadcast as the operands
    are). It is the fake-quant model's atan2 to the step (a float32 tie aside), as a TABLE is
    for a unary function. int16 operands (2**32 pairs) stay on the CPU; FP is the
    decomposition :func:`lowering.passes.decompositions.special.atan2`."""
    y, x = node.args[0], node.args[1]
    qy, qx, qo = (em.qin(node, y), em.qin(node, x), em.qout(node)) if em.is_int else (None,) * 3
    if not all(isinstance(a, fx.Node) for a in (y, x)) or \
            any(q is None or q.dtype != torch.int8 for q in (qy, qx, qo)):
        raise LoweringError("atan2 lowers for int8 operands and output only (a 2-D table)", node=node.name)
    layout = em.layout(node)
    rank = len(em.shape(node))
    ny, nx = (em.operand(a, layout, rank, f"arg{i}") for i, a in enumerate((y, x)))
    wy, wx = cast_to(em, ny, "INT32", "y_i32"), cast_to(em, nx, "INT32", "x_i32")  # exact
    ones = [1] * max(rank, 1)
    row = fp_binary(em, "MUL", wy, em.const("levels", [_LEVELS], "INT32", ones), "row")
    offset = em.const("offset", [128 * _LEVELS + 128], "INT32", ones)
    index = fp_binary(em, "ADD", fp_binary(em, "ADD", row, wx, "pair"), offset, "index")
    out = lookup(em, index, _int8_table_2d(torch.atan2, qy, qx, qo), "INT8", em.out(node, layout), "atan2")
    em.bind(node, out, layout)
