"""Ops transformer blocks bring that ``torch.export`` keeps composite or computes: einsum and
swapaxes/movedim (MaxViT), ``.to(device)`` (Swin2SR), a linear whose bias is computed and ``zero_`` (Swin v2's qkv bias);
and functional ops lowered through PyTorch's registered decomposition (threshold, unfold,
affine_grid).
FP against PyTorch, INT within one step of the fake-quant model; every case lowers whole."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import check_fp, check_int

gen = torch.Generator().manual_seed(11)


def randn(*shape):
    return torch.randn(*shape, generator=gen)


class Einsum(nn.Module):
    def __init__(self, equation: str):
        super().__init__()
        self.equation = equation

    def forward(self, *xs):
        return torch.einsum(self.equation, *xs)


class EinsumOfPermuted(nn.Module):
    """MaxViT's relative attention: einsum of permuted (non-contiguous) operands."""

    def forward(self, q, k):
        return torch.einsum("bhid,bhjd->bhij", q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3))


class Moves(nn.Module):
    def forward(self, x):
        return torch.movedim(x.swapaxes(1, 3), 0, 2).swapdims(0, 1) * 2.0


class ToDevice(nn.Module):
    """Swin2SR (transformers) moves a computed tensor ``.to(x.device)``."""

    def forward(self, x):
        return (x * 2.0).to(x.device) + 1.0


class ComputedBias(nn.Module):
    """Swin v2's attention: the qkv bias with its k third zeroed, passed to F.linear."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        bias = self.qkv.bias.clone()
        bias[8:16].zero_()
        return F.linear(x, self.qkv.weight, bias)


class Functional(nn.Module):
    """One functional op with fixed arguments (ExecuTorch's nn_functional model tests)."""

    def __init__(self, fn, **kwargs):
        super().__init__()
        self.fn, self.kwargs = fn, kwargs

    def forward(self, *xs):
        return self.fn(*xs, **self.kwargs)


class AffineGrid(nn.Module):
    def forward(self, theta):
        return F.affine_grid(theta, [1, 1, 4, 5], align_corners=False)


CASES = {
    "threshold": (Functional(F.threshold, threshold=0.2, value=-0.5), (randn(2, 3, 4),)),
    "unfold_im2col": (Functional(F.unfold, kernel_size=2, stride=1), (randn(1, 3, 5, 5),)),
    "affine_grid": (AffineGrid(), (randn(1, 2, 3),)),
    "einsum_attention": (Einsum("bhid,bhjd->bhij"), (randn(1, 2, 5, 4), randn(1, 2, 6, 4))),
    "einsum_permuted": (EinsumOfPermuted(), (randn(1, 5, 2, 4), randn(1, 6, 2, 4))),
    "einsum_transpose_sum": (Einsum("bij->bj"), (randn(2, 3, 4),)),
    "einsum_outer": (Einsum("i,j->ij"), (randn(4), randn(3))),
    "swapaxes_movedim": (Moves(), (randn(2, 3, 4, 5),)),
    "to_device": (ToDevice(), (randn(2, 3),)),
    "linear_computed_bias": (ComputedBias(), (randn(2, 3, 8),)),
}


@pytest.mark.parametrize("name", CASES)
def test_fp(name):
    model, inputs = CASES[name]
    lm = check_fp(model, inputs)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes[:3]


@pytest.mark.parametrize("name", CASES)
def test_int(name):
    model, inputs = CASES[name]
    lm = check_int(model, inputs)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes[:3]
