"""torch.round(x, decimals=d) (positive, zero and negative d; ties, -0.0, inf, NaN, huge values)
lowered by ``lowering/passes/decompositions/arith.py``'s ``round_decimals``, and F.max_pool3d /
nn.MaxPool3d (kernel, stride, padding, ceil_mode, dilation; batchless; the with-indices form)
by ``lowering/passes/decompositions/bags_pools.py``'s ``max_pool3d``.

FP is checked against PyTorch bit for bit (atol = rtol = 0, NaN where PyTorch has NaN, and the
sign of every zero): round(decimals) multiplies as PyTorch does and divides correctly rounded;
max_pool3d's two max pools select input values (after a Conv3d: 1e-5, the convolution's sums
run in another order). INT: max_pool3d exactly (0 steps) against the
fake-quant model (max commutes with the quantization); round(decimals) within one output step
of it (``x * 10**d``, a round TABLE and ``* 10**-d``, each requantized as the fake-quant model
does; found 0 steps against the float64 fake-quant model).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int, judge_int, judge_whole

import lowering

torch.set_num_threads(1)

NAN, INF = float("nan"), float("inf")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=_gen(seed))


def _round_inputs(d: int, seed: int) -> torch.Tensor:
    """Values over nine decades, ties of the rounding (``(k + 0.5) * 10**-d`` as float32),
    and the special values."""
    spread = _x(4000, seed=seed) * torch.logspace(-3, 6, 4000)
    ties = (torch.arange(-500, 500) + 0.5) * 10.0 ** -d
    special = torch.tensor([0.0, -0.0, INF, -INF, NAN, 3.4e38, -3.0e38, 1e30, 5e34, -1e-40, 1e-45])
    return torch.cat([spread, ties.float(), special])


def _same_bits(got: torch.Tensor, ref: torch.Tensor) -> None:
    torch.testing.assert_close(got, ref, atol=0.0, rtol=0.0, equal_nan=True)
    assert torch.equal(torch.signbit(got), torch.signbit(ref))


@pytest.mark.parametrize("d", [1, 2, 3, 4, 6, 0, -1, -2, -3, -6])
def test_fp_round_decimals_is_pytorchs_bit_for_bit(d):
    model = Fn(lambda x: torch.round(x, decimals=d)).eval()
    x = _round_inputs(d, seed=10 + d)
    lm = lowering.lower(model, (x,), profile="FP")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    _same_bits(lm.run(x)[0], model(x))


def test_fp_round_decimals_multiplying_by_the_reciprocal_would_differ():
    """The case the correctly rounded division exists for: ``round(x * 100) * fl(0.01)`` differs
    from PyTorch's ``round(x * 100) / 100`` on many of these inputs; the lowering on none."""
    x = _round_inputs(2, seed=30)
    ref = torch.round(x, decimals=2)
    naive = torch.round(x * 100.0) * torch.tensor(0.01)
    finite = ref.isfinite()
    assert int((naive[finite] != ref[finite]).sum()) > 100
    lm = lowering.lower(Fn(lambda t: torch.round(t, decimals=2)), (x,), profile="FP")
    _same_bits(lm.run(x)[0], ref)


@pytest.mark.parametrize("d", [1, 2, -1])
def test_int_round_decimals_within_a_step_of_fake_quant(d):
    model = Fn(lambda x: torch.round(x * 3.0, decimals=d))
    x = (_x(8, 16, seed=40 + d) * 10.0 ** -min(d, 0),)
    lm = check_int(model, x, max_steps=1)
    assert lm.cpu_nodes == []
    judged = judge_int(lm, x)
    assert judged["max_step"] <= 1, judged


def test_int16_round_decimals_lowers_whole():
    """With int16 activations round is an exact 65536-entry lookup (int16's TABLE would
    interpolate across its jumps): the decomposition lowers whole, equal to float64 fake-quant."""
    from lowering.quantizer import QuantConfig

    model = Fn(lambda x: torch.round(x * 3.0, decimals=1) + 1.0).eval()
    x = (_x(4, 8, seed=45),)
    lm = lowering.lower(model, x, profile="INT", quantization=QuantConfig.int16(), calibration=[x])
    assert lm.cpu_nodes == [] and lm.op_counts["GATHER"] == 1, lm.op_counts
    judged = judge_whole(lm, model, x)
    assert judged["ok"], judged


POOLS = {
    "cube": (Fn(lambda x: F.max_pool3d(x, 2)), (_x(1, 3, 4, 6, 6, seed=1),)),
    "pad_stride_ceil": (Fn(lambda x: F.max_pool3d(x, (3, 2, 3), (2, 2, 1), (1, 1, 0), ceil_mode=True)),
                        (_x(2, 2, 7, 5, 6, seed=2),)),
    # 5 = 2 + 2 + 1: ceil mode adds a window holding only the last plane / row / column
    "ceil_partial_last_window": (Fn(lambda x: F.max_pool3d(x, 2, 2, 0, ceil_mode=True)), (_x(1, 2, 5, 5, 5, seed=3),)),
    "ceil_no_extra_window": (Fn(lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True)), (_x(1, 2, 6, 7, 5, seed=4),)),
    "dilation": (Fn(lambda x: F.max_pool3d(x, 2, 1, 1, dilation=2)), (_x(1, 2, 6, 7, 5, seed=5),)),
    "batchless_module": (nn.MaxPool3d((2, 3, 3), 1), (_x(3, 4, 5, 5, seed=6),)),
    "depth_only": (nn.MaxPool3d((3, 1, 1), (2, 1, 1)), (_x(1, 3, 5, 4, 4, seed=7),)),
    "plane_only": (nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)), (_x(2, 2, 3, 7, 6, seed=8),)),
    "negative_values_padding": (Fn(lambda x: F.max_pool3d(x - 10.0, 3, 1, 1)), (_x(1, 1, 4, 4, 4, seed=9),)),
    "with_indices_values_only": (Fn(lambda x: F.max_pool3d(x, 2, return_indices=True)[0]), (_x(1, 2, 4, 4, 4, seed=10),)),
    "after_conv3d": (nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2, ceil_mode=True)),
                     (_x(1, 2, 5, 6, 7, seed=11),)),
}


#: a Conv3d before the pool sums in another order than PyTorch's kernel (found 4.8e-7 apart)
WITH_CONV, CONV_TOL = {"after_conv3d"}, 1e-5


@pytest.mark.parametrize("name", list(POOLS))
def test_fp_max_pool3d_lowers_whole_and_is_exact(name):
    model, inputs = POOLS[name]
    tol = CONV_TOL if name in WITH_CONV else 0.0
    lm = check_fp(model, inputs, atol=tol, rtol=tol)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    assert 1 <= lm.op_counts.get("MAX_POOL2D", 0) <= 2, lm.op_counts


@pytest.mark.parametrize("name", list(POOLS))
def test_int_max_pool3d_lowers_whole_and_is_exact(name):
    model, inputs = POOLS[name]
    lm = check_int(model, inputs, max_steps=0)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes


def test_max_pool3d_indices_keep_the_op_on_the_cpu():
    """The indices have no decomposition: reading them keeps the pool whole on the CPU, and the
    partial lowering still computes PyTorch's values."""
    model = Fn(lambda x: F.max_pool3d(x, 2, return_indices=True)[1].float() + 1.0).eval()
    x = _x(1, 2, 4, 4, 4, seed=12)
    lm = lowering.lower(model, (x,), profile="FP")
    assert {c.target for c in lm.cpu_nodes} == {"aten.max_pool3d_with_indices.default", "getitem"}
    assert torch.equal(lm.run(x)[0], model(x))
