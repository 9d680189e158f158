"""torch.isnan / isinf / isposinf / isneginf / isfinite and nan_to_num lowered whole
(lowering.passes.decompositions.compare_count, lowering.ops.unary.nan_to_num), and a NaN in the
calibration data named as such.

FP: the booleans equal PyTorch's exactly on inputs holding NaN, both infinities, -0.0 and
float32's largest values; integer and bool inputs (no NaN or infinity in them) too. INT: a
quantized value is always finite, as the fake-quant model's is: each test is constant there,
and the model is checked against its fake-quant model (0 steps).
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp, check_int

import lowering
from lowering.errors import LoweringError

INF, NAN = float("inf"), float("nan")
TESTS = {"isnan": torch.isnan, "isinf": torch.isinf, "isposinf": torch.isposinf,
         "isneginf": torch.isneginf, "isfinite": torch.isfinite}
SPECIAL = torch.tensor([[1.0, NAN, -INF, INF, -0.0, 0.0],
                        [3.4e38, -3.4e38, 1e-45, -2.5, NAN, INF]])


@pytest.mark.parametrize("name", list(TESTS))
def test_fp_is_exact_on_nan_infinities_and_extremes(name):
    lm = check_fp(Fn(TESTS[name]), (SPECIAL,), atol=0, rtol=0)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes
    assert 0 < int(TESTS[name](SPECIAL).sum()) < SPECIAL.numel()  # (both answers occur)


@pytest.mark.parametrize("name", list(TESTS))
@pytest.mark.parametrize("x", [torch.tensor([[3, -7, 0, 2**30]]), torch.tensor([[True, False, True]])],
                         ids=["int64", "bool"])
def test_fp_on_integer_and_bool_tensors(name, x):
    lm = check_fp(Fn(lambda t: TESTS[name](t)), (x,))
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes


def test_fp_mask_of_non_finite_values_feeding_where():
    def clean(x):
        return torch.where(torch.isnan(x) | torch.isinf(x), torch.zeros_like(x), x) * 2 + torch.isfinite(x)

    lm = check_fp(Fn(clean), (SPECIAL,), atol=0, rtol=0)
    assert not lm.cpu_nodes


@pytest.mark.parametrize("name", list(TESTS))
def test_int_lowers_whole_and_matches_fake_quant(name):
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(3))
    lm = check_int(Fn(lambda t: torch.where(TESTS[name](t * 2), t, t + 1)), (x,), max_steps=0)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes


def test_nan_to_num_of_an_integer_tensor_is_the_tensor():
    # (was an invalid graph: an INT32 tensor compared with a float constant)
    x = torch.tensor([[5, -3, 0, 2**31 - 1]], dtype=torch.int32)
    lm = check_fp(Fn(torch.nan_to_num), (x,))
    assert lm.op_counts.get("GREATER", 0) == 0 and not lm.cpu_nodes


def test_nan_to_num_fp_is_exact():
    lm = check_fp(Fn(lambda t: torch.nan_to_num(t, nan=1.5, posinf=7.0)), (SPECIAL,), atol=0, rtol=0)
    assert not lm.cpu_nodes


class Scaled(torch.nn.Module):
    def forward(self, features):
        return features * 2


def test_a_nan_in_the_calibration_data_is_named():
    x = torch.randn(2, 4)
    bad = x.clone()
    bad[1, 2] = NAN
    with pytest.raises(LoweringError, match="calibration batch 2, input 'features' holds NaN or infinity"):
        lowering.lower(Scaled(), (x,), profile="INT", calibration=[(x,), (bad,)])
