"""Gaps found by running every case of ExecuTorch's Arm op tests through our lowering
(``benchmarks/bench_et_suite.py --all``): cases ExecuTorch passes that we did not, each
reduced to a small model checked against PyTorch (FP) or the fake-quant model (INT)."""

from __future__ import annotations

import torch
from lowering_checks import check_fp, check_int


class ZeroDimScalarOps(torch.nn.Module):
    """0-d results combined with python numbers (``x.sum() * 2`` is 0-d in PyTorch)."""

    def forward(self, x):
        return x.sum() * 2.0, x.var(keepdim=False, correction=0.5), x.mean() + 1


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
