"""Special functions lowered whole (lowering.passes.decompositions.special and the INT TABLEs of
lowering.ops.unary): torch.atan2 (FP; int8 as one 2-D table), torch.ldexp (FP; INT for a constant exponent), and
sinc, special.ndtr, log_ndtr, erfcx, special.i0 / torch.i0, digamma and lgamma (and their
torch.special aliases): FP decompositions, one TABLE each in INT (digamma and lgamma with int16
activations: an exact 65536-entry lookup).

Every lowering case asserts that the model lowers whole (no CPU partition) and compares values:
FP against PyTorch (each tolerance states why) and against float64, INT against the fake-quant
model in output steps. The ops whose FP or INT form is left on the CPU are checked to stay
there in one piece and to run as PyTorch computes them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from lowering_checks import Fn, check_fp, check_int

import lowering
from lowering import QuantConfig
from lowering.qparams import quantize_f64

gen = torch.Generator().manual_seed(31)
INF, NAN = math.inf, math.nan
F32 = np.finfo(np.float32)


def randn(*shape, scale: float = 1.0):
    return torch.randn(shape, generator=gen) * scale


def lower_fp_whole(fn, *inputs):
    """``fn`` lowered in FP, asserted whole; (lowered model, its outputs, PyTorch's)."""
    model = Fn(fn).eval()
    lm = lowering.lower(model, inputs, profile="FP")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    with torch.no_grad():
        return lm, lm.run(*inputs)[0], model(*inputs)


def same_special_values(ours: torch.Tensor, theirs: torch.Tensor):
    """NaN where PyTorch has NaN, and every infinity and zero equal to PyTorch's, sign included."""
    assert torch.equal(ours.isnan(), theirs.isnan()), (ours, theirs)
    exact = ~theirs.isfinite() | (theirs == 0)
    exact &= ~theirs.isnan()
    assert torch.equal(ours[exact], theirs[exact]), (ours[exact], theirs[exact])
    assert torch.equal(ours[exact].signbit(), theirs[exact].signbit())


def relative_error(ours: torch.Tensor, exact: torch.Tensor) -> float:
    """Largest |ours - exact| / |exact| where ``exact`` (float64) is a normal float32 number."""
    keep = (exact.abs() >= F32.tiny) & (exact.abs() <= F32.max)
    return float(((ours.double() - exact).abs() / exact.abs())[keep].max())


# ----------------------------------------------------------------------------- atan2
#: the points where atan2's branches meet: both axes, signed zeros, infinities, NaN
_Y_EDGES = [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0, -0.0, 0.0, -0.0, 1.0, -1.0, INF, -INF, INF, INF, -INF, -INF,
            2.0, -2.0, INF, -INF, 3.0, NAN, 1.0, NAN, 1e-30, -1e-30, 1e30, 5.0, -5.0]
_X_EDGES = [0.0, 0.0, -0.0, -0.0, 0.0, 0.0, 1.0, 1.0, -1.0, -1.0, -0.0, -0.0, 1.0, 1.0, INF, -INF, INF, -INF,
            INF, -INF, -3.0, -3.0, 3.0, 1.0, NAN, NAN, 1e30, -1e30, 1e-30, 5.0, -5.0]
#: FP atan2 within this of the float64 angle: atan's polynomial (2e-7 on [0, 1]) plus the
#: roundings of the ratio and of pi/2 - a, pi - a (half an ulp of pi is 1.2e-7); found 3.2e-7
ATAN2_BOUND = 4.8e-7


def test_atan2_fp_matches_float64_within_its_bound_in_every_octant():
    y, x = randn(4000, scale=3.0), randn(4000, scale=3.0)
    # the diagonals |y| = |x| and points near them (the branch between the ratio and its complement)
    y = torch.cat([y, x[:500], -x[500:1000], x[1000:1500] * (1 + 1e-6)])
    x = torch.cat([x, x[:500], x[500:1000], x[1000:1500]])
    _, out, expected = lower_fp_whole(torch.atan2, y, x)
    exact = torch.atan2(y.double(), x.double())
    err = float((out.double() - exact).abs().max())
    torch_err = float((expected.double() - exact).abs().max())
    assert err <= ATAN2_BOUND, (err, torch_err)
    # against PyTorch's float32: the two bounds together
    torch.testing.assert_close(out, expected, atol=ATAN2_BOUND + torch_err, rtol=0)
    assert torch.equal(out.signbit(), expected.signbit())


def test_atan2_fp_axes_signed_zeros_and_infinities_as_pytorch():
    y, x = torch.tensor(_Y_EDGES), torch.tensor(_X_EDGES)
    _, out, expected = lower_fp_whole(torch.atan2, y, x)
    same_special_values(out, expected)
    both = ~expected.isnan()
    torch.testing.assert_close(out[both], expected[both], atol=ATAN2_BOUND, rtol=0)
    # the sign of every result, +-0 and +-pi included (atan2(-0, -1) = -pi, atan2(0, -0) = pi)
    assert torch.equal(out[both].signbit(), expected[both].signbit())


@pytest.mark.parametrize("shapes", [((3, 1, 4), (5, 1)), ((), (6,)), ((2, 3), ())], ids=["broadcast", "0d_y", "0d_x"])
def test_atan2_fp_broadcasts(shapes):
    y, x = randn(*shapes[0]), randn(*shapes[1])
    lm = check_fp(Fn(torch.atan2), (y, x), atol=ATAN2_BOUND + 2e-7, rtol=0)
    assert lm.cpu_nodes == []


def _dequantized_inputs(lm, inputs) -> list[torch.Tensor]:
    """The int8 inputs the lowered model sees, dequantized (float64)."""
    return [(torch.from_numpy(np.asarray(q).astype(np.float64)) - float(qp.zp)) * float(qp.s)
            for q, qp in zip(lm.quantize_inputs(*inputs), lm.input_qparams, strict=True)]


@pytest.mark.parametrize("shapes", [((2000,), (2000,)), ((3, 1, 4), (5, 1)), ((2, 3, 4, 5), (2, 3, 4, 5))],
                         ids=["flat", "broadcast", "4d"])
def test_atan2_int8_is_one_2d_table(shapes):
    """INT: one GATHER from the 65536-entry table of the int8 pairs, the fake-quant model's
    atan2 within one step (found 0), and the float64 angle of the dequantized inputs,
    quantized, within one step (a float32 rounding tie; found 0): the one rounding of
    atan2 itself, not the several of a piecewise quantized form."""
    y, x = randn(*shapes[0], scale=3.0), randn(*shapes[1], scale=3.0)
    lm = check_int(Fn(torch.atan2), (y, x), max_steps=1)
    assert lm.tosa is not None and lm.cpu_nodes == [] and lm.op_counts.get("GATHER") == 1, lm.op_counts
    qo = lm.output_qparams[0]
    ideal = quantize_f64(torch.atan2(*_dequantized_inputs(lm, (y, x))), qo.s, qo.zp, qo.qmin, qo.qmax, qo.dtype)
    raw = torch.from_numpy(np.asarray(lm.run_raw(lm.quantize_inputs(y, x))[0]).astype(np.int64))
    assert int((raw - ideal.long()).abs().max()) <= 1


def test_atan2_int8_on_the_axes_and_between_convolutions():
    """Inputs with exact zeros (the axes, atan2(0, 0) = 0, atan2(0, x < 0) = pi) and an NHWC
    producer on each side: still one table, within one step of the fake-quant model."""
    y, x = randn(64, scale=2.0), randn(64, scale=2.0)
    y[:8], x[8:16], x[:4] = 0.0, 0.0, -1.0
    x[4:6] = 0.0
    lm = check_int(Fn(torch.atan2), (y, x), max_steps=1)
    assert lm.cpu_nodes == []

    class Convs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 3)

        def forward(self, t):
            return torch.atan2(self.a(t), self.b(t)).relu()

    lm = check_int(Convs(), (randn(1, 3, 8, 8),), max_steps=1)
    assert lm.cpu_nodes == [] and "GATHER" in lm.op_counts


def test_atan2_int16_stays_whole_on_the_cpu():
    """int16 operands would need a table of 2**32 pairs: atan2 stays on the CPU in one piece."""
    y, x = randn(16), randn(16)
    lm = lowering.lower(Fn(torch.atan2).eval(), (y, x), profile="INT", quantization=QuantConfig.int16(),
                        calibration=[(y, x)])
    assert [c.target for c in lm.cpu_nodes] == ["aten.atan2.default"]


# ----------------------------------------------------------------------------- FP unary
#: (function, inputs, FP tolerance against float64, why). Relative errors are measured where
#: the float64 value is a normal float32; each bound is a little above the largest found.
FP_UNARY = {
    # PyTorch's own formula and its float32 product pi * x: the same roundings but the division
    # (x * 1/y) and SIN's: absolute error below 1e-7 (found 9e-8; relative error is unbounded
    # next to the zeros at the integers, for PyTorch too)
    "sinc": (torch.sinc, torch.cat([torch.linspace(-20, 20, 4001), torch.tensor([0.0, -0.0, 1e-20, 3.0, 1e7])])),
    "special_sinc": (torch.special.sinc, torch.linspace(-3, 3, 601)),
    # PyTorch's formula (1 + erf(x / sqrt 2)) / 2: an absolute error near float32's spacing at 1
    "ndtr": (torch.special.ndtr, torch.cat([torch.linspace(-12, 12, 4001), torch.tensor([40.0, -40.0])])),
    "log_ndtr": (torch.special.log_ndtr, torch.cat([torch.linspace(-40, 40, 8001),
                                                     torch.tensor([-1.0, -1e4, 13.0, -1.0000001])])),
    "erfcx": (torch.special.erfcx, torch.cat([torch.linspace(-9.3, 30, 8001), torch.logspace(1, 30, 300)])),
    "i0": (torch.special.i0, torch.cat([torch.linspace(-91.5, 91.5, 8001), torch.tensor([0.0, 3.75, -3.75])])),
    "torch_i0": (torch.i0, torch.linspace(-10, 10, 1001)),
}
#: relative error against float64 (where it is a normal float32): the largest found, rounded up
#:   erfcx: 3.6e-7 for x >= 0 (Numerical Recipes' fit, fractional error 1.2e-7, plus float32
#:     Horner and EXP), 3.9e-6 below 0: the rounding of x*x in 2 exp(x*x), PyTorch's own error
#:     there too (3.9e-6)
#:   log_ndtr: 2.8e-7 below -1, 1.8e-6 on [-1, 5], 1.5e-5 on [5, 13]: there the result is
#:     -ndtr(-x), whose relative condition is x^2 (the rounding of x, not of the form: PyTorch's
#:     float32 kernel is 1.2e-5 off too)
#:   i0: 3.9e-7 on [-3.75, 3.75] (A&S 9.8.1, 1.6e-7), 7.1e-7 beyond (A&S 9.8.2, 1.9e-7 on a value
#:     near 0.4, and EXP), up to 91.9 where float32 overflows (PyTorch overflows from 88.7)
RELATIVE_BOUND = {"erfcx": 4e-6, "log_ndtr": 2e-5, "i0": 1e-6, "torch_i0": 1e-6}
#: absolute error against float64 for the two bounded functions
ABSOLUTE_BOUND = {"sinc": 1.2e-7, "special_sinc": 1.2e-7, "ndtr": 1.2e-7}


@pytest.mark.parametrize("name", sorted(FP_UNARY))
def test_fp_unary_against_float64_and_pytorch(name):
    fn, x = FP_UNARY[name]
    _, out, expected = lower_fp_whole(fn, x)
    exact = fn(x.double())
    if name in ABSOLUTE_BOUND:
        err = float((out.double() - exact).abs().max())
        torch_err = float((expected.double() - exact).abs().max())
        assert err <= ABSOLUTE_BOUND[name], (err, torch_err)
        torch.testing.assert_close(out, expected, atol=ABSOLUTE_BOUND[name] + torch_err, rtol=0)
    else:
        err, torch_err = relative_error(out, exact), relative_error(expected, exact)
        assert err <= RELATIVE_BOUND[name], (err, torch_err)
        # PyTorch's float32 overflows i0 from 88.7 (it is finite to 91.9): compare where it is finite
        finite = expected.isfinite()
        # (atol: float32's smallest normal, for the subnormal far tail of log_ndtr)
        torch.testing.assert_close(out[finite], expected[finite], atol=float(F32.tiny),
                                   rtol=RELATIVE_BOUND[name] + 4e-6)


@pytest.mark.parametrize("name, fn", [("sinc", torch.sinc), ("ndtr", torch.special.ndtr),
                                      ("log_ndtr", torch.special.log_ndtr), ("erfcx", torch.special.erfcx),
                                      ("i0", torch.special.i0)])
def test_fp_unary_special_values(name, fn):
    """NaN and +-inf (and +-0) as PyTorch gives them: sinc(+-inf) = NaN, sinc(0) = 1, ndtr(+-inf)
    = 1 / 0, log_ndtr(inf) = -0, log_ndtr(-inf) = -inf, erfcx(inf) = 0, erfcx(-inf) = inf,
    i0(+-inf) = +inf here (the limit), where PyTorch's kernel gives NaN or inf depending on the
    element's place in its vectorized loop (i0 of [inf, -inf] is [nan, nan]; of a 9-element
    tensor holding them, [nan, inf])."""
    x = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1e30, -1e30, 60.0, -60.0])
    _, out, expected = lower_fp_whole(fn, x)
    if name == "i0":
        infinite = x.isinf()
        assert (out[infinite] == INF).all()
        out, expected = out[~infinite], expected[~infinite]
    same_special_values(out, expected)


def test_fp_tails_keep_their_relative_precision():
    """log_ndtr far right (-ndtr(-x): -7.6e-24 at 10) and far left (about -x^2 / 2), and
    erfcx far right (1 / (x sqrt(pi))): PyTorch's values to 2e-5 relative, not 0 or -inf."""
    x = torch.tensor([6.0, 8.0, 10.0, 12.0, -20.0, -38.0, -200.0])
    _, out, expected = lower_fp_whole(torch.special.log_ndtr, x)
    assert (out < 0).all() and out.isfinite().all()
    torch.testing.assert_close(out, expected, atol=0, rtol=2e-5)
    x = torch.tensor([50.0, 1e3, 1e6, 1e10, 1e30])
    _, out, expected = lower_fp_whole(torch.special.erfcx, x)
    torch.testing.assert_close(out, expected, atol=0, rtol=1e-6)


# ----------------------------------------------------------------------------- INT TABLEs
INT_UNARY = {
    "sinc": (torch.sinc, randn(256, scale=2.0)),
    "special_sinc": (torch.special.sinc, randn(256, scale=2.0)),
    "ndtr": (torch.special.ndtr, randn(256, scale=2.0)),
    "log_ndtr": (torch.special.log_ndtr, randn(256, scale=3.0)),
    "erfcx": (torch.special.erfcx, randn(256, scale=1.5)),
    "i0": (torch.special.i0, randn(256, scale=2.0)),
    "torch_i0": (torch.i0, randn(256, scale=2.0)),
    "digamma": (torch.digamma, torch.rand(256, generator=gen) * 5 + 0.2),
    "special_digamma": (torch.special.digamma, torch.rand(256, generator=gen) * 5 + 0.2),
    "special_psi": (torch.special.psi, torch.rand(256, generator=gen) * 5 + 0.2),
    # negative inputs: lgamma's poles at 0, -1, -2 (the table holds their saturated values)
    "lgamma": (torch.lgamma, randn(256, scale=2.0)),
    "special_gammaln": (torch.special.gammaln, torch.rand(256, generator=gen) * 6 + 0.1),
}
#: int16: an exact lookup, not a TABLE (the poles are jumps the int16 TABLE's interpolation
#: cannot follow)
INT16_LOOKUP = {"digamma", "special_digamma", "special_psi", "lgamma", "special_gammaln"}


@pytest.mark.parametrize("name", sorted(INT_UNARY))
def test_int8_table(name):
    """One TABLE, within one step of the fake-quant model (its entries are the fake-quant's
    quantize(f(dequantize(q))); a float32 rounding tie may land one step apart; found 0)."""
    fn, x = INT_UNARY[name]
    lm = check_int(Fn(fn), (x,), max_steps=1)
    assert lm.tosa is not None and lm.cpu_nodes == [] and lm.op_counts.get("TABLE") == 1, lm.op_counts


@pytest.mark.parametrize("name", sorted(set(INT_UNARY) - INT16_LOOKUP))
def test_int16_table(name):
    """int16 (a16w8): the interpolating 513-entry TABLE; these functions are smooth on the
    calibrated range, so within the 1e-3-of-range rule the other int16 tables are judged by
    (32 of 32767 steps; tests/lowering/test_lowering_math.py)."""
    fn, x = INT_UNARY[name]
    lm = check_int(Fn(fn), (x,), quantization=QuantConfig.int16(), max_steps=32)
    assert lm.cpu_nodes == [] and "TABLE" in lm.op_counts


@pytest.mark.parametrize("name", sorted(INT16_LOOKUP))
def test_int16_gamma_functions_are_exact_lookups(name):
    """digamma / lgamma with a16w8: one GATHER from a table of every int16 input level (their
    poles are jumps the int16 TABLE's interpolation cannot follow), the fake-quant model's
    value exactly."""
    fn, x = INT_UNARY[name]
    lm = check_int(Fn(fn), (x,), quantization=QuantConfig.int16(), max_steps=0)
    assert lm.cpu_nodes == [] and lm.op_counts.get("GATHER") == 1 and "TABLE" not in lm.op_counts, lm.op_counts


def _gamma_range(lo, hi, n=20001):
    x = torch.linspace(lo, hi, n)
    return x[x != x.round()] if lo < 0 else x


#: FP digamma / lgamma against float64, as |error| / max(1, |value|) (each function's zeros make
#: a plain relative error meaningless; PyTorch's float32 kernels are judged the same way):
#:   lgamma: found 2.4e-7 on the positive axis (the fit on [1, 3] 1.9e-7 relative, Stirling from
#:     8), 8.2e-7 on the negative axis (the reflection); PyTorch 6e-8
#:   digamma: found 6.2e-7 on the positive axis, 2.1e-6 on the negative one (the reflection's
#:     pi / tan(pi r) near the poles); PyTorch 1.2e-6
GAMMA_BOUND = {"lgamma": 1e-6, "digamma": 2.5e-6}
GAMMA_RANGES = {"small": (1e-6, 0.5), "zeros": (0.5, 3.0), "shifted": (3.0, 8.0), "series": (8.0, 1000.0),
                "huge": (1e3, 1e30), "negative": (-10.0, -1e-4), "more_negative": (-1e6, -10.0)}


@pytest.mark.parametrize("range_name", sorted(GAMMA_RANGES))
@pytest.mark.parametrize("name, fn", [("lgamma", torch.lgamma), ("digamma", torch.digamma)])
def test_gamma_functions_fp_against_float64(name, fn, range_name):
    lo, hi = GAMMA_RANGES[range_name]
    x = _gamma_range(lo, hi) if hi / max(lo, 1e-30) < 1e4 or lo < 0 else torch.logspace(
        math.log10(lo), math.log10(hi), 4001)
    _, out, expected = lower_fp_whole(fn, x)
    exact = fn(x.double())
    finite = exact.isfinite()
    scale = exact.abs().clamp(min=1.0)
    err = float(((out.double() - exact).abs() / scale)[finite].max())
    torch_err = float(((expected.double() - exact).abs() / scale)[finite].max())
    assert err <= GAMMA_BOUND[name], (err, torch_err)


@pytest.mark.parametrize("fn", [torch.lgamma, torch.special.gammaln, torch.digamma, torch.special.digamma,
                                torch.special.psi], ids=["lgamma", "gammaln", "digamma", "special_digamma", "psi"])
def test_gamma_functions_fp_special_values(fn):
    """The poles and infinities as PyTorch gives them: lgamma +inf at 0, -0 and the negative
    integers and at +-inf, lgamma(1) = lgamma(2) = +0; digamma -inf at +0, +inf at -0, NaN at
    the negative integers and -inf, +inf at +inf."""
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, -3e7, INF, -INF, NAN, 1.0, 2.0, 1e38])
    _, out, expected = lower_fp_whole(fn, x)
    same_special_values(out, expected)


# ----------------------------------------------------------------------------- ldexp
class ConstantExponent(torch.nn.Module):
    def __init__(self, e):
        super().__init__()
        self.register_buffer("e", e)

    def forward(self, x):
        return torch.ldexp(x, self.e)


def _exponents(dtype):
    e = torch.randint(-160, 160, (4, 12), generator=gen)
    e[0, :6] = torch.tensor([127, -130, 128, -149, -150, 100])  # overflowing 2**e, subnormal results
    e[1, :3] = torch.tensor([1000, -1000, 0])
    return e.to(dtype)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_ldexp_fp_equals_pytorch(dtype):
    """Exact: x * 2**e rounded once (every factor an exact power of two), equal to PyTorch's
    float32 result bit for bit, 0 / inf / NaN inputs, results past 2**127 and subnormals included."""
    x = randn(4, 12, scale=10.0)
    x[2, :5] = torch.tensor([0.0, INF, -INF, NAN, -0.0])
    e = _exponents(dtype)
    _, out, expected = lower_fp_whole(torch.ldexp, x, e)
    same = (out == expected) | (out.isnan() & expected.isnan())
    assert same.all(), (x[~same], e[~same], out[~same], expected[~same])
    assert torch.equal(out.signbit(), expected.signbit())


def test_ldexp_fp_fractional_exponent():
    """A fractional float exponent: 2**floor(e) exact times exp2 of the fraction; PyTorch's
    x * pow(2, e) to 2e-7 relative (found 1e-7)."""
    x, e = randn(200), torch.rand(200, generator=gen) * 40 - 20
    _, out, expected = lower_fp_whole(torch.ldexp, x, e)
    torch.testing.assert_close(out, expected, atol=0, rtol=2e-7)


@pytest.mark.parametrize("e", [torch.tensor([3]), torch.tensor([-2, 0, 1, 4, -1, 2]), torch.tensor([130, -140, 1, 0, 2, 3])],
                         ids=["scalar", "mixed", "beyond_normal"])
def test_ldexp_constant_exponent_fp_and_int(e):
    """A buffer exponent: constant factors (FP exact; INT a quantized multiply by a constant,
    within one step of the fake-quant model)."""
    x = randn(5, 6) * (2.0 ** -100 if int(e.abs().max()) > 100 else 1.0)
    lm = check_fp(ConstantExponent(e), (x,), atol=0, rtol=0)
    assert lm.cpu_nodes == [] and "POW" not in lm.op_counts
    if int(e.abs().max()) <= 100:
        lm = check_int(ConstantExponent(e), (randn(5, 6),), max_steps=1)
        assert lm.cpu_nodes == []


def test_ldexp_int_tensor_exponent_stays_on_the_cpu():
    x, e = randn(6), torch.tensor([1, -2, 0, 3, 1, -1])
    lm = lowering.lower(Fn(torch.ldexp).eval(), (x, e), profile="INT", calibration=[(x, e)])
    assert [c.target for c in lm.cpu_nodes] == ["aten.ldexp.Tensor"]
