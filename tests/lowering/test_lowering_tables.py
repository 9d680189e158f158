"""INT8 TABLEs equal the float64 fake-quant evaluation of their function, entry for entry.

The fake-quant model is the yardstick evaluated in float64 (``lowering.reference``) at
PyTorch's float32 dequantized inputs; a table
built in float32 rounds some entries the other way (swin_t's softmax reciprocal: 6 entries one
step off, 6 steps at the model's output). The reference here is numpy's float64 formula, not
our code."""

from __future__ import annotations

import numpy as np
import torch

from lowering.ops.activation import int8_table
from lowering.qparams import QParams


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
