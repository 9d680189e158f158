"""lp_pool1d / lp_pool2d (and nn.LPPool1d / nn.LPPool2d): PyTorch traces them as
``(sign(a) * relu(|a|)) * k ** 2 ** (1 / p)`` of ``a = avg_pool(x ** p)``, which
:mod:`lowering.passes.decompositions.lp_pool` rewrites into one window sum (the average pool
with ``divisor_override``, times each window's ``k ** 2 / count`` where a ceil_mode window
overhangs). In INT that sum has its own observer: the traced form quantized the average with
the range of ``x ** p`` (a pool shares its input's), made one step of it several of the
output, and put it on rounding ties a float32 reference rounds either way (2 to 19 steps
off the fake-quant model). FP is checked against PyTorch, INT within one quantization step
of the fake-quant model (int8 and int16), and against float; every case must lower whole."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int

import lowering
from lowering import QuantConfig

_gen = torch.Generator().manual_seed(5)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


def _relu_first(fn):
    """``fn(relu(x))``: an odd ``p`` makes PyTorch's lp_pool NaN for a negative window sum
    (``sum ** (1 / p)``), the INT calibration refuses NaN."""
    return Fn(lambda x: fn(F.relu(x)))


#: name -> (model, inputs); the 8-wide inputs make kernel 3 / stride 2 ceil_mode windows
#: overhang (divisors 9, 9, 9, 6 / 3, 3, 3, 2), the 9-wide ones do not
CASES = {
    "p2_k2": (Fn(lambda x: F.lp_pool2d(x, 2, 2)), (_randn(2, 3, 8, 8),)),
    "p2_k3_s2": (Fn(lambda x: F.lp_pool2d(x, 2, 3, 2)), (_randn(1, 4, 9, 9),)),
    "p2_k3_s2_ceil_overhang": (Fn(lambda x: F.lp_pool2d(x, 2, 3, 2, ceil_mode=True)),
                               (_randn(2, 3, 8, 8),)),
    "p2_rect_kernel_stride_ceil": (Fn(lambda x: F.lp_pool2d(x, 2, (2, 3), (1, 2), ceil_mode=True)),
                                   (_randn(1, 3, 7, 8),)),
    "p1_k2_s1": (Fn(lambda x: F.lp_pool2d(x, 1, 2, 1)), (_randn(2, 3, 6, 7),)),
    "p1_k3_s2_ceil_overhang": (Fn(lambda x: F.lp_pool2d(x, 1, 3, 2, ceil_mode=True)),
                               (_randn(1, 3, 8, 10),)),
    "p3_k2": (_relu_first(lambda x: F.lp_pool2d(x, 3, 2)), (_randn(2, 3, 8, 8),)),
    "p3_k3_s2_ceil_overhang": (_relu_first(lambda x: F.lp_pool2d(x, 3, 3, 2, ceil_mode=True)),
                               (_randn(1, 3, 8, 8),)),
    "p1_5_k2_ceil": (_relu_first(lambda x: F.lp_pool2d(x, 1.5, 2, ceil_mode=True)),
                     (_randn(1, 2, 7, 7),)),
    "module_lppool2d": (nn.LPPool2d(2, 3, stride=2), (_randn(2, 4, 10, 10),)),
    "batchless_lp_pool2d": (Fn(lambda x: F.lp_pool2d(x, 2, 2)), (_randn(3, 6, 6),)),
    "after_conv": (nn.Sequential(nn.Conv2d(3, 4, 3), nn.LPPool2d(2, 2)), (_randn(1, 3, 10, 10),)),
    "lp_pool1d_p2_k3_s2": (Fn(lambda x: F.lp_pool1d(x, 2, 3, 2)), (_randn(2, 4, 11),)),
    "lp_pool1d_p2_ceil_overhang": (Fn(lambda x: F.lp_pool1d(x, 2, 3, 2, ceil_mode=True)),
                                   (_randn(2, 4, 10),)),
    "lp_pool1d_p1_batchless": (Fn(lambda x: F.lp_pool1d(x, 1, 2)), (_randn(3, 8),)),
    "module_lppool1d_p3": (_relu_first(nn.LPPool1d(3, 4, stride=2)), (_randn(2, 3, 12),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fp(name):
    model, inputs = CASES[name]
    lm = check_fp(model, inputs)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_int(name):
    model, inputs = CASES[name]
    lm = check_int(model, inputs)
    assert lm.cpu_nodes == []


#: p = 1: the window sums alone (int16 TABLEs of sqrt / cube root interpolate 128 levels
#: apart, far off near zero where a root is steep: see tests/lowering/test_lowering_math.py)
@pytest.mark.parametrize("name", ["p1_k2_s1", "p1_k3_s2_ceil_overhang", "lp_pool1d_p1_batchless"])
def test_int16(name):
    model, inputs = CASES[name]
    lm = check_int(model, inputs, quantization=QuantConfig.int16())
    assert lm.cpu_nodes == []


def _int_lowering(model, x):
    gen = torch.Generator().manual_seed(1)
    calibration = [(torch.randn(x.shape, generator=gen) * x.std() + x.mean(),) for _ in range(4)]
    return lowering.lower(model.eval(), (x,), quantization=QuantConfig(),
                          calibration=calibration + [(x,)])


@pytest.mark.parametrize("p, k, stride, ceil, worst", [(2, 2, None, False, 6), (2, 3, 2, True, 6),
                                                       (1, 3, 2, True, 2), (1, 2, 1, False, 2)])
def test_int_close_to_float(p, k, stride, ceil, worst):
    """INT against the float lp_pool, in output steps: one rounding of the window sum before
    ``** (1 / p)`` (whose slope near zero turns half a step of the sum into up to
    sqrt(255 / 2) ~ 11 steps of a square root; found at most 4.5 here) and the rounding of
    the output. The traced form was up to 24 steps off, the one of p = 1 up to 2.6."""
    model = Fn(lambda x: F.lp_pool2d(x, p, k, stride, ceil_mode=ceil))
    for seed in range(3):
        x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
        lm = _int_lowering(model, x)
        err = (lm.run(x)[0] - model(x)).abs() / lm.output_qparams[0].s
        assert float(err.max()) <= worst and float(err.mean()) <= 1.0, (seed, float(err.max()))


def test_window_sum_is_quantized_once_with_its_own_range():
    """One window sum between ``x ** 2`` and the square root, observed on its own (min/max:
    its range is the largest sum, where a shared scale clipped the sums at the largest
    ``x * x``), no sign / abs / relu and no product by the kernel area left."""
    x = _randn(2, 3, 8, 8)
    model = Fn(lambda x: F.lp_pool2d(x, 2, 2)).eval()
    lm = lowering.lower(model, (x,), quantization=QuantConfig(activation_observer="minmax"),
                        calibration=[(x,)])
    ops = [n for n in lm.quantized_model.graph.nodes if n.op == "call_function"
           and n.target.namespace == "aten"]
    assert [str(n.target) for n in ops] == ["aten.mul.Tensor", "aten.avg_pool2d.default",
                                            "aten.sqrt.default"]
    pool = ops[1]
    assert pool.args[6] == 1  # divisor_override: the sum
    square_scale, sum_scale = pool.args[0].args[1], next(iter(pool.users)).args[1]
    torch.testing.assert_close(255 * square_scale, float((x * x).max()), rtol=1e-5, atol=0)
    torch.testing.assert_close(255 * sum_scale, float(F.avg_pool2d(x * x, 2, divisor_override=1).max()),
                               rtol=1e-5, atol=0)
    assert "TABLE" in lm.op_counts and "DEPTHWISE_CONV2D" in lm.op_counts and lm.cpu_nodes == []
    out = lm.run(x)[0]
    torch.testing.assert_close(out, model(x), atol=6 * lm.output_qparams[0].s, rtol=0)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_average_pool_times_number(profile):
    """The same rewrite for a user's ``avg_pool2d(x) * c``: a window sum over ``D / c``
    (``c`` dividing every window's divisor ``D``), else the window sums times ``c / D`` (a
    number; per window where the divisors differ: padding not counted); a window sum over an
    override times a number stays. Before, the others were 3 steps off the fake-quant model in INT
    (the average, quantized with its input's scale, on ties a float32 reference rounds either
    way; the product made one step of it three)."""
    cases = [Fn(lambda x: F.avg_pool2d(x, 2) * 2), Fn(lambda x: 4 * F.avg_pool2d(x, 2, 1)),
             Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False) * 9),
             Fn(lambda x: F.avg_pool2d(x, 2, divisor_override=3) * 3),
             Fn(lambda x: F.avg_pool2d(x, 2) * 3)]
    x = _randn(1, 3, 7, 7)
    for model in cases:
        lm = check_fp(model, (x,)) if profile == "FP" else check_int(model, (x,))
        assert lm.cpu_nodes == []
