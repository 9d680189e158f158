"""INT8 TABLEs equal the float64 fake-quant evaluation of their function, entry for entry.

The fake-quant model is the yardstick evaluated in float64 (``lowering.reference``) at
PyTorch's float32 dequantized inputs; a table
built in float32 rounds some entries the other way (swin_t's softmax reciprocal: 6 entries one
step off, 6 steps at the model's output). The reference here is numpy's float64 formula, not
our code.

int16 TABLEs interpolate between 513 samples; at the edge of a function's domain (acos at
+-1) a sample whose level is NaN must not feed the interpolation: checked over every int16
level against PyTorch's own float32 fake-quant."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers quantized_decomposed
from lowering_checks import tosa_int16_lookup

from lowering.ops.activation import int8_table, int16_table
from lowering.qparams import QParams

qd = torch.ops.quantized_decomposed


def _numpy_table(fn, si: float, zi: int, so: float, zo: int) -> np.ndarray:
    # the inputs PyTorch's dequantize gives fn: float32 scale, float32 product
    x = ((np.arange(-128, 128, dtype=np.float32) - zi) * np.float32(si)).astype(np.float64)
    with np.errstate(divide="ignore"):  # 1/0 at the zero point: inf, clipped to 127 as torch does
        return np.clip(np.round(fn(x) / so) + zo, -128, 127).astype(np.int8)


def _float32_table(fn, si: float, zi: int, so: float, zo: int) -> np.ndarray:
    x = ((np.arange(-128, 128, dtype=np.float32) - zi) * np.float32(si)).astype(np.float32)
    with np.errstate(divide="ignore"):
        return np.clip(np.round(fn(x).astype(np.float32) / np.float32(so)) + zo, -128, 127
                       ).astype(np.int8)


def _q(s: float, z: int) -> QParams:
    return QParams(np.array([s]), np.array([z]), torch.int8, -128, 127)


#: swin_t's third softmax reciprocal at 64x64 (observer scales): entry 234 is a rounding tie
#: that float32 broke the other way (71 vs 72)
SWIN_RECIPROCAL = (0.18703079223632812, -128, 0.00011453234037617221, -128)


def test_reciprocal_table_is_float64_exact_at_swins_tie():
    si, zi, so, zo = SWIN_RECIPROCAL
    ref = _numpy_table(np.reciprocal, si, zi, so, zo)
    np.testing.assert_array_equal(int8_table(torch.reciprocal, _q(si, zi), _q(so, zo))[1:],
                                  ref[1:])  # entry 0 is 1/0
    # the case does discriminate: a float32 table misses it
    assert (_float32_table(np.reciprocal, si, zi, so, zo)[1:] != ref[1:]).any()


def test_reciprocal_tables_are_float64_exact():
    rng = np.random.default_rng(0)
    for _ in range(200):
        si, so = float(rng.uniform(0.01, 0.5)), float(rng.uniform(1e-3, 0.05))
        zi, zo = -128, int(rng.integers(-128, -100))  # a positive sum, a positive reciprocal
        np.testing.assert_array_equal(int8_table(torch.reciprocal, _q(si, zi), _q(so, zo))[1:],
                                      _numpy_table(np.reciprocal, si, zi, so, zo)[1:])


def test_exp_and_gelu_tables_are_float64_exact():
    from math import erf, sqrt

    rng = np.random.default_rng(1)
    gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / sqrt(2.0))))
    for _ in range(50):
        si, so, zi, zo = float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.005, 0.05)), \
            int(rng.integers(-128, 127)), int(rng.integers(-128, 0))
        np.testing.assert_array_equal(int8_table(torch.exp, _q(si, zi), _q(so, zo)),
                                      _numpy_table(np.exp, si, zi, so, zo))
        np.testing.assert_array_equal(
            int8_table(torch.nn.functional.gelu, _q(si, zi), _q(so, zo)),
            _numpy_table(gelu, si, zi, so, zo))


# ----------------------------------------------------------------------------- int16
# The int16 TABLE has 513 samples, one every 128 input levels from -32768, and TOSA
# interpolates between them. The reference is PyTorch's own float32 fake-quant of every level
# (quantized_decomposed dequantize -> fn -> quantize); the lookup is the TOSA spec's
# apply_lookup_s followed by the lowering's RESCALE by 1/128 (round half up), in numpy.

def _sym16(bound: float) -> QParams:
    """int16 symmetric qparams, as our quantizer and ExecuTorch's a16w8 observe [-bound, bound]."""
    return QParams(np.array([float(np.float32(bound / 32767))]), np.array([0]), torch.int16,
                   -32767, 32767)


def _int16_errors(fn, qi: QParams, qo: QParams):
    """(|TABLE - torch| per level, torch's fake-quant, the levels where fn is not NaN, table)."""
    q = torch.arange(qi.qmin, qi.qmax + 1).to(torch.int16)
    y = fn(qd.dequantize_per_tensor(q, qi.s, qi.zp, qi.qmin, qi.qmax, torch.int16))
    ref = qd.quantize_per_tensor(y, qo.s, qo.zp, qo.qmin, qo.qmax, torch.int16).numpy()
    tab = int16_table(fn, qi, qo)
    err = np.abs(tosa_int16_lookup(tab, q.numpy()) - ref.astype(np.int64))
    return err, ref.astype(np.int64), ~torch.isnan(y).numpy(), tab


@pytest.mark.parametrize("name, lo, hi", [("acos", -1.0, 1.0), ("asin", -1.0, 1.0),
                                          ("acosh", 1.0, 3.0)])
def test_int16_table_is_right_at_the_domain_edge(name, lo, hi):
    """acos/asin at +-1, acosh at 1: a sample below -1 (acos: NaN) or outside [qmin, qmax]
    was interpolated from (acos(-1): 249 instead of 32767, 32518 steps off)."""
    fn = getattr(torch, name)
    out = fn(torch.linspace(lo, hi, 10001))
    err, ref, valid, tab = _int16_errors(fn, _sym16(max(-lo, hi)), _sym16(float(out.abs().max())))
    r = ref[valid]
    rise = np.abs(r[128:] - r[:-128]).max()  # the reference's steepest rise over a segment
    # at the edge levels, a sample 1 level beyond can only be pinned to int16 (acos(-1) is
    # already 32767): within two levels' worth of that rise
    edges = np.flatnonzero(valid)[[0, -1]]
    assert err[edges].max() <= rise / 64, (err[edges], ref[edges], rise)
    # elsewhere only the interpolation's own error: fn is monotone, so the TABLE stays within
    # that rise
    assert err[valid].max() <= rise
    assert np.abs(np.diff(tab.astype(np.int64))).max() <= 32767  # TABLE REQUIREs int16 slopes


@pytest.mark.parametrize("name, bound", [("sigmoid", 8.0), ("tanh", 4.0)])
@pytest.mark.parametrize("qmin", [-32767, -32768])
def test_int16_table_of_smooth_functions_stays_within_two_steps(name, bound, qmin):
    fn = getattr(torch, name)
    qi = _sym16(bound)
    qi = QParams(qi.scale, qi.zero_point, torch.int16, qmin, 32767)
    qo = _sym16(float(fn(torch.tensor(bound))))
    err, _, valid, _ = _int16_errors(fn, qi, qo)
    assert valid.all() and err.max() <= 2


def _float64_errors(fn, qi: QParams, qo: QParams, tab: np.ndarray) -> np.ndarray:
    """|TABLE - fake-quant| at every level in [qmin, qmax], the fake-quant in float64 (fn at
    torch's float32 dequantized input, as the lowering's reference evaluates it)."""
    q = np.arange(qi.qmin, qi.qmax + 1)
    x = ((q.astype(np.float32) - np.float32(qi.zp)) * np.float32(qi.s)).astype(np.float64)
    y = fn(torch.from_numpy(x)).numpy()
    ref = np.clip(np.round(y / qo.s) + qo.zp, qo.qmin, qo.qmax).astype(np.int64)
    return np.abs(tosa_int16_lookup(tab, q) - ref)


def _sampled(fn, qi: QParams, qo: QParams, tab: np.ndarray) -> np.ndarray:
    """``tab`` with its interior samples (1-511) set to fn's own quantized values at their levels."""
    knots = np.arange(1, 512) * 128 - 32768
    x = ((knots.astype(np.float32) - np.float32(qi.zp)) * np.float32(qi.s)).astype(np.float64)
    out = tab.astype(np.int64)
    out[1:512] = np.clip(np.round(fn(torch.from_numpy(x)).numpy() / qo.s) + qo.zp, qo.qmin, qo.qmax)
    return out


@pytest.mark.parametrize("name, fn, bound", [
    ("reciprocal", lambda x: 1 / (x.abs() + 0.05), 4.0),   # softmax's 1/sum near a small sum
    ("rsqrt", lambda x: torch.rsqrt(x.abs() + 1e-3), 4.0),  # a norm's 1/sqrt(var) near 0
    ("gaussian", lambda x: torch.exp(-16 * x * x), 1.0),   # steep on both sides of its peak
])
def test_int16_table_shares_a_steep_segments_error_between_its_samples(name, fn, bound):
    """Where fn curves steeply, linear interpolation between fn's own samples is off on one
    side only; the table's samples move so that the largest and the total error over every
    level shrink (reciprocal: 530 -> 322 steps, rsqrt near 0: 11,796 -> 6,670), and a sample beside segments within a
    step keeps fn's value."""
    qi = _sym16(bound)
    qo = _sym16(float(fn(torch.linspace(-bound, bound, 65535, dtype=torch.float64)).abs().max()))
    tab = int16_table(fn, qi, qo)
    sampled = _sampled(fn, qi, qo, tab)
    err, err_sampled = _float64_errors(fn, qi, qo, tab), _float64_errors(fn, qi, qo, sampled)
    assert err_sampled.max() >= 3
    assert err.max() < err_sampled.max() and err.sum() < err_sampled.sum(), (err.max(), err_sampled.max())
    assert np.abs(np.diff(tab.astype(np.int64))).max() <= 32767  # TABLE REQUIREs int16 slopes


@pytest.mark.parametrize("name, bound", [("sigmoid", 8.0), ("tanh", 2.0), ("erf", 3.0)])
def test_int16_table_of_a_smooth_function_is_fns_own_samples(name, bound):
    fn = getattr(torch, name)
    qi, qo = _sym16(bound), _sym16(float(fn(torch.tensor(bound))))
    tab = int16_table(fn, qi, qo)
    np.testing.assert_array_equal(tab.astype(np.int64), _sampled(fn, qi, qo, tab))
