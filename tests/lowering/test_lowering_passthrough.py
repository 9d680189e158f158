"""INT graphs that fold to (almost) nothing: an input returned as it is once ``x + 0`` or
``x ** 1`` is folded, constants of another dtype added to a float input, ``mean(dim=None)``.

ExecuTorch's Arm flow delegates these (``test_zeros.py``, ``test_pow.py::...[exp_one]``,
``test_mean_dim.py::...[rand_none_keepdim]``); they are checked here against the PyTorch
model (within one output quantization step) and the fake-quant graph.
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import check_int


class ZerosAdd(torch.nn.Module):
    """``torch.zeros(n, dtype=d) + x`` (ExecuTorch's ``test_zeros.py::ZerosAdd``)."""

    def __init__(self, n: int, dtype: torch.dtype):
        super().__init__()
        self.n, self.dtype = n, dtype

    def forward(self, x):
        return torch.zeros(self.n, dtype=self.dtype) + x


class FullAdd(torch.nn.Module):
    """A non-zero integer constant plus a float input: promoted, not folded away."""

    def __init__(self, value: int, dtype: torch.dtype):
        super().__init__()
        self.value, self.dtype = value, dtype

    def forward(self, x):
        return torch.full((10,), self.value, dtype=self.dtype) + x


class PowOne(torch.nn.Module):
    def forward(self, x):
        return x ** 1.0


class MulOneSubZero(torch.nn.Module):
    def forward(self, x):
        return x * 1.0 - 0


class ReturnsInputToo(torch.nn.Module):
    """The input is an output and also read by an op."""

    def forward(self, x):
        return x, x * 2


class MeanAll(torch.nn.Module):
    def __init__(self, keepdim: bool):
        super().__init__()
        self.keepdim = keepdim

    def forward(self, x):
        return x.mean(dim=None, keepdim=self.keepdim)


def _gen(*shape, relu=False):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
    return x.relu() if relu else x


CASES = {
    "zeros_fp32_broadcast": (ZerosAdd(3, torch.float32), (_gen(10, 3, 3),)),
    "zeros_int32": (ZerosAdd(10, torch.int32), (_gen(10),)),
    "zeros_int64": (ZerosAdd(10, torch.int64), (_gen(10),)),
    "zeros_outer_broadcast": (ZerosAdd(10, torch.float32), (_gen(10, 1),)),
    "full_int32": (FullAdd(3, torch.int32), (_gen(10),)),
    "full_int64": (FullAdd(-2, torch.int64), (_gen(10),)),
    "pow_one": (PowOne(), (_gen(1, 4, 6, 2, relu=True),)),
    "mul_one_sub_zero": (MulOneSubZero(), (_gen(2, 3),)),
    "returns_input_too": (ReturnsInputToo(), (_gen(4, 5),)),
    "mean_all_keepdim": (MeanAll(True), (torch.rand(1, 5, 7, 3, generator=torch.Generator().manual_seed(4)),)),
    "mean_all": (MeanAll(False), (torch.rand(1, 5, 7, 3, generator=torch.Generator().manual_seed(5)),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_int_lowering_matches_pytorch(name):
    """Fully lowered in INT, within a step of the fake-quant graph and of PyTorch's float output."""
    model, inputs = CASES[name]
    # calibrated on the inputs themselves (as ExecuTorch's pipeline does)
    lm = check_int(model, inputs, calibration=[inputs])
    assert lm.tosa is not None and not lm.cpu_nodes, [(c.node, c.reason) for c in lm.cpu_nodes]
    with torch.no_grad():
        expected = model(*inputs)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    got = lm.run(*inputs)
    assert len(got) == len(expected)
    for e, g, qp in zip(expected, got, lm.output_qparams, strict=True):
        assert tuple(g.shape) == tuple(e.shape)
        step = float(qp.s) if qp is not None else 0.0
        err = float((g.double() - e.double()).abs().max())
        # half a step rounding the input, half a step rounding the result (a folded graph
        # has only the first), plus float32 noise of the dequantization
        assert err <= step * 1.0001 + 1e-6, f"{name}: {err} > one step {step}"
