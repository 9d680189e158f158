"""Gaps found by running every case of ExecuTorch's Arm op tests through our lowering
(``benchmarks/bench_et_suite.py --all``): cases ExecuTorch passes that we did not, each
reduced to a small model checked against PyTorch (FP) or the fake-quant model (INT)."""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp, check_int, max_step_error

import lowering


class ZeroDimScalarOps(torch.nn.Module):
    """0-d results combined with python numbers (``x.sum() * 2`` is 0-d in PyTorch)."""

    def forward(self, x):
        return x.sum() * 2.0, x.var(keepdim=False, correction=0.5), x.mean() + 1


#: ops on 0-d tensors with numbers: each result 0-d, the constants read as 0-d by every op
ZERO_DIM = {
    "compare": lambda x: x.sum() > 0.5,
    "where_number": lambda x: torch.where(x.sum() > 0, x.sum(), 0.0),
    "rsub": lambda x: 1.0 - x.mean(),
    "floor_divide": lambda x: x.sum() // 0.3,
    "maximum_0d_buffer": lambda x: torch.maximum(x.mean(), torch.tensor(0.3)),
    "relu_scaled": lambda x: torch.relu(x.mean() - 0.5) * 3,
    "masked_fill": lambda x: x.mean().masked_fill(x.sum() > 0, 2.0),
}


@pytest.mark.parametrize("profile", ["FP", "INT"])
@pytest.mark.parametrize("name", list(ZERO_DIM))
def test_zero_dim_ops_with_numbers(name, profile):
    """A number or 0-d buffer next to a 0-d tensor: the Bessel-factor fix made such constants
    0-d, so every op reading one (ABS in floor division, SELECT, MAXIMUM) must take 0-d."""
    x = torch.rand(3, 4, generator=torch.Generator().manual_seed(1))
    lm = check_fp(Fn(ZERO_DIM[name]), (x,)) if profile == "FP" else \
        check_int(Fn(ZERO_DIM[name]), (x,), calibration=[(x,)])
    assert not lm.cpu_nodes and tuple(lm.run(x)[0].shape) == ()


def _inputs():
    return (torch.rand(1, 50, 10, 20, generator=torch.Generator().manual_seed(0)),)


def test_zero_dim_result_with_a_number_stays_zero_dim_fp():
    """test_var.py::test_var_dim_tosa_FP_no_dim[var_4d_no_keep_dim_0_5_correction]: the
    Bessel factor made the 0-d variance shape (1,)."""
    check_fp(ZeroDimScalarOps(), _inputs())  # asserts torch's shapes and values


def test_zero_dim_result_with_a_number_stays_zero_dim_int():
    model, inputs = ZeroDimScalarOps().eval(), _inputs()
    lm = check_int(model, inputs)  # within one step of fake-quant
    expected = model(*inputs)
    got = lm.run(*inputs)
    assert [tuple(g.shape) for g in got] == [tuple(e.shape) for e in expected] == [(), (), ()]


class DivMode(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x, y):
        return torch.div(x, y, rounding_mode=self.mode)


def _narrow_int_division_cases():
    gen = torch.Generator().manual_seed(0)
    x8 = (torch.randn(4, 8, generator=gen) * 100).to(torch.int8)
    x8[0, :2] = torch.tensor([-128, 127], dtype=torch.int8)  # -128 // -1 wraps to -128
    y8 = (torch.rand(4, 8, generator=gen) * 100 + 10).to(torch.int8)
    y8[0, :2] = torch.tensor([-1, -3], dtype=torch.int8)
    y16 = (torch.rand(4, 8, generator=gen) * 100 + 10).to(torch.int16)
    return {"int8_floor": ("floor", (x8, y8)), "int8_by_9_floor": ("floor", (x8, 9)),
            "int8_by_9.5_floor": ("floor", (x8, 9.5)), "int8_by_int16_trunc": ("trunc", (x8, y16))}


@pytest.mark.parametrize("profile", ["FP", "INT"])
@pytest.mark.parametrize("case", list(_narrow_int_division_cases()))
def test_narrow_int_rounded_division(case, profile):
    """test_div_tensor_mode.py int8_floor / int8_int_scalar / int8_float_scalar / int16_trunc:
    INTDIV takes INT32 only (int8/int16 stayed on the CPU), and an int8 tensor by 9.5 divides
    in float (it was an integer division by a float constant)."""
    mode, inputs = _narrow_int_division_cases()[case]
    model = DivMode(mode).eval()
    lm = lowering.lower(model, inputs, profile=profile, calibration=[inputs])
    assert not lm.cpu_nodes, lm.cpu_nodes
    expected, got = model(*inputs), lm.run(*inputs)[0]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if profile == "FP" or not expected.is_floating_point():
        assert torch.equal(got, expected), (got, expected)
    else:  # the int8 input is exact; the float quotient is quantized to int8 at the output
        assert max_step_error(lm, inputs) <= 1


class SelectInt(torch.nn.Module):
    def forward(self, x, dim: int, index: int):
        return x.select(dim, index)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_select_of_a_vector_is_zero_dim(profile):
    """test_select.py::test_select_int_tosa_*[select1d_0_dim_1_index]: the RESHAPE to the 0-d
    result was given the shape [1] (the reference model refused the graph)."""
    x = torch.randn(10, generator=torch.Generator().manual_seed(0)) + 10
    inputs = (x, 0, 1)
    lm = check_fp(SelectInt(), inputs, atol=0, rtol=0) if profile == "FP" else \
        check_int(SelectInt(), inputs, calibration=[inputs])
    assert tuple(lm.run(*inputs)[0].shape) == ()


class WhereMixed(torch.nn.Module):
    def forward(self, x, y):
        return torch.where(x > 0, x, y)


@pytest.mark.parametrize("profile", ["FP", "INT"])
@pytest.mark.parametrize("other", [torch.bool, torch.int8])
def test_where_with_branches_of_different_dtypes(other, profile):
    """test_where.py::test_where_self_tosa_FP[float32_tensor_cond_tuple_dtype_bool]: SELECT
    was given a float and a bool branch (the reference model refused the graph)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=gen)
    y = torch.tensor([True, False, True]) if other == torch.bool else \
        torch.randint(-128, 127, (4, 3), generator=gen, dtype=torch.int8)
    if profile == "FP":
        check_fp(WhereMixed(), (x, y), atol=0, rtol=0)
    else:
        lm = check_int(WhereMixed(), (x, y), calibration=[(x, y)])
        assert not lm.cpu_nodes and lm.run(x, y)[0].dtype == torch.float32
