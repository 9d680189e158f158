"""Per-op tests: emitted TOSA through tosa_reference_model vs PyTorch (FP) and vs the
PT2E fake-quant graph (INT, within one quantization step)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import check_fp, check_int

torch.manual_seed(0)


class Fn(nn.Module):
    def __init__(self, fn, *params):
        super().__init__()
        self.fn = fn
        self.params = nn.ParameterList([nn.Parameter(p, requires_grad=False) for p in params])

    def forward(self, *xs):
        return self.fn(*xs, *self.params)


def r(*shape):
    return torch.randn(*shape)


def conv(cin, cout, k, **kw):
    return nn.Conv2d(cin, cout, k, **kw)


# name -> (module, inputs)
CASES = {
    "conv2d": (conv(3, 8, 3, padding=1), (r(1, 3, 8, 8),)),
    "conv2d_stride": (conv(3, 8, 3, stride=2, padding=1), (r(1, 3, 9, 9),)),
    "conv2d_stride_even": (conv(4, 8, 3, stride=2, padding=1), (r(2, 4, 8, 8),)),
    "conv2d_dilation": (conv(3, 4, 3, dilation=2, padding=2), (r(1, 3, 10, 10),)),
    "conv2d_groups": (conv(4, 8, 3, groups=2, padding=1), (r(1, 4, 6, 6),)),
    "conv2d_depthwise": (conv(6, 6, 3, groups=6, padding=1), (r(1, 6, 7, 7),)),
    "conv2d_depthwise_mult": (conv(4, 8, 3, groups=4), (r(1, 4, 7, 7),)),
    "conv2d_nobias_rect": (conv(3, 5, (1, 3), bias=False, padding=(0, 1)), (r(1, 3, 5, 6),)),
    "conv1d": (nn.Conv1d(4, 6, 3, padding=1, stride=2), (r(2, 4, 11),)),
    "conv_transpose2d": (nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (r(1, 4, 5, 5),)),
    "linear": (nn.Linear(16, 8), (r(4, 16),)),
    "linear_3d": (nn.Linear(16, 8, bias=False), (r(2, 5, 16),)),
    "addmm": (Fn(lambda x, w, b: torch.addmm(b, x, w), r(6, 4), r(4)), (r(3, 6),)),
    "matmul": (Fn(torch.matmul), (r(2, 4, 6), r(2, 6, 5))),
    "matmul_bcast": (Fn(torch.matmul), (r(2, 3, 4, 6), r(6, 5))),
    "bmm": (Fn(torch.bmm), (r(3, 4, 6), r(3, 6, 2))),
    "add": (Fn(torch.add), (r(2, 3, 4), r(2, 3, 4))),
    "add_bcast": (Fn(torch.add), (r(2, 3, 4), r(1, 4))),
    "add_scalar": (Fn(lambda x: x + 1.5), (r(2, 8),)),
    "sub": (Fn(torch.sub), (r(2, 3, 4), r(2, 3, 4))),
    "sub_scalar": (Fn(lambda x: 2.0 - x), (r(2, 8),)),
    "mul": (Fn(torch.mul), (r(2, 3, 4), r(2, 3, 4))),
    "mul_scalar": (Fn(lambda x: x * 0.5), (r(2, 8),)),
    "div": (Fn(lambda x, y: x / (y.abs() + 1)), (r(2, 8), r(2, 8))),
    "div_scalar": (Fn(lambda x: x / 4.0), (r(2, 8),)),
    "relu": (nn.ReLU(), (r(2, 16),)),
    "relu6": (nn.ReLU6(), (r(2, 16) * 4,)),
    "hardtanh": (nn.Hardtanh(-0.5, 0.7), (r(2, 16),)),
    "clamp": (Fn(lambda x: torch.clamp(x, -0.3, 0.9)), (r(2, 16),)),
    "sigmoid": (nn.Sigmoid(), (r(2, 16),)),
    "tanh": (nn.Tanh(), (r(2, 16),)),
    "gelu": (nn.GELU(), (r(2, 16),)),
    "gelu_tanh": (nn.GELU(approximate="tanh"), (r(2, 16),)),
    "silu": (nn.SiLU(), (r(2, 16),)),
    "hardswish": (nn.Hardswish(), (r(2, 16) * 3,)),
    "hardsigmoid": (nn.Hardsigmoid(), (r(2, 16) * 3,)),
    "leaky_relu": (nn.LeakyReLU(0.1), (r(2, 16),)),
    "elu": (nn.ELU(), (r(2, 16),)),
    "exp": (Fn(torch.exp), (r(2, 16),)),
    "log": (Fn(lambda x: torch.log(x.abs() + 0.5)), (r(2, 16),)),
    "sqrt": (Fn(lambda x: torch.sqrt(x.abs() + 0.1)), (r(2, 16),)),
    "rsqrt": (Fn(lambda x: torch.rsqrt(x.abs() + 0.5)), (r(2, 16),)),
    "reciprocal": (Fn(lambda x: torch.reciprocal(x.abs() + 0.5)), (r(2, 16),)),
    "neg": (Fn(torch.neg), (r(2, 16),)),
    "abs": (Fn(torch.abs), (r(2, 16),)),
    "pow": (Fn(lambda x: torch.pow(x.abs() + 0.1, 1.5)), (r(2, 16),)),
    "pow2": (Fn(lambda x: x ** 2), (r(2, 16),)),
    "softmax": (nn.Softmax(-1), (r(2, 4, 10),)),
    "log_softmax": (nn.LogSoftmax(1), (r(2, 10),)),
    "layer_norm": (nn.LayerNorm(16), (r(2, 5, 16),)),
    "group_norm": (nn.GroupNorm(2, 4), (r(2, 4, 3, 3),)),
    "batch_norm": (nn.BatchNorm2d(4), (r(2, 4, 5, 5),)),
    "avg_pool2d": (nn.AvgPool2d(2), (r(1, 4, 8, 8),)),
    "avg_pool2d_pad": (nn.AvgPool2d(3, stride=2, padding=1), (r(1, 4, 8, 8),)),
    "max_pool2d": (nn.MaxPool2d(2), (r(1, 4, 8, 8),)),
    "max_pool2d_pad": (nn.MaxPool2d(3, stride=2, padding=1), (r(1, 4, 9, 9),)),
    "adaptive_avg_pool2d": (nn.AdaptiveAvgPool2d(1), (r(1, 4, 6, 6),)),
    "adaptive_avg_pool2d_2": (nn.AdaptiveAvgPool2d(2), (r(1, 4, 6, 6),)),
    "mean": (Fn(lambda x: x.mean(dim=-1)), (r(2, 3, 8),)),
    "mean_hw": (Fn(lambda x: x.mean(dim=(2, 3), keepdim=True)), (r(1, 3, 4, 4),)),
    "sum": (Fn(lambda x: x.sum(dim=1)), (r(2, 3, 8),)),
    "amax": (Fn(lambda x: x.amax(dim=-1)), (r(2, 3, 8),)),
    "amin": (Fn(lambda x: x.amin(dim=1, keepdim=True)), (r(2, 3, 8),)),
    "cat": (Fn(lambda x, y: torch.cat([x, y], 1)), (r(2, 3, 4), r(2, 2, 4))),
    "stack": (Fn(lambda x, y: torch.stack([x, y], 1)), (r(2, 3), r(2, 3))),
    "view": (Fn(lambda x: x.view(2, 12)), (r(2, 3, 4),)),
    "reshape": (Fn(lambda x: x.reshape(-1, 6)), (r(2, 3, 4),)),
    "flatten": (nn.Flatten(), (r(2, 3, 4),)),
    "permute": (Fn(lambda x: x.permute(2, 0, 1)), (r(2, 3, 4),)),
    "transpose": (Fn(lambda x: x.transpose(1, 2)), (r(2, 3, 4),)),
    "squeeze": (Fn(lambda x: x.squeeze(1)), (r(2, 1, 4),)),
    "unsqueeze": (Fn(lambda x: x.unsqueeze(0)), (r(2, 4),)),
    "pad": (Fn(lambda x: F.pad(x, (1, 2, 0, 1))), (r(1, 2, 3, 3),)),
    "split": (Fn(lambda x: torch.split(x, 2, dim=1)[1]), (r(2, 6),)),
    "chunk": (Fn(lambda x: torch.chunk(x, 3, dim=-1)[2] * 2), (r(2, 6),)),
    "slice": (Fn(lambda x: x[:, 1:3]), (r(2, 6),)),
    "slice_step": (Fn(lambda x: x[:, ::2]), (r(2, 7),)),
    "select": (Fn(lambda x: x[:, 1]), (r(2, 6, 3),)),
    "index_select": (Fn(lambda x: torch.index_select(x, 1, torch.tensor([2, 0, 2]))), (r(2, 4, 3),)),
    "expand": (Fn(lambda x: x.expand(3, 4)), (r(1, 4),)),
    "repeat": (Fn(lambda x: x.repeat(2, 3)), (r(2, 2),)),
    "minimum": (Fn(torch.minimum), (r(2, 5), r(2, 5))),
    "maximum": (Fn(torch.maximum), (r(2, 5), r(2, 5))),
    "where": (Fn(lambda x, y: torch.where(x > y, x, y)), (r(2, 5), r(2, 5))),
    "cumsum": (Fn(lambda x: torch.cumsum(x, 1)), (r(2, 5),)),
    "upsample_nearest": (nn.Upsample(scale_factor=2, mode="nearest"), (r(1, 2, 3, 3),)),
    "upsample_bilinear": (nn.Upsample(scale_factor=2, mode="bilinear"), (r(1, 2, 3, 3),)),
    "flip": (Fn(lambda x: torch.flip(x, [1])), (r(2, 5),)),
    "clone_contiguous": (Fn(lambda x: x.transpose(0, 1).contiguous().clone() + 0), (r(2, 5),)),
}

EMB = nn.Embedding(10, 4)
INT_ONLY_INPUT_CASES = {
    "embedding": (EMB, (torch.tensor([[1, 3, 9], [0, 0, 2]]),)),
    "argmax": (Fn(lambda x: torch.argmax(x, 1)), (r(3, 7),)),
    "compare_gt": (Fn(lambda x, y: (x > y).to(torch.float32) + x), (r(2, 5), r(2, 5))),
    "logical": (Fn(lambda x, y: torch.logical_and(x > 0, y > 0)), (r(2, 5), r(2, 5))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fp(name):
    model, inputs = CASES[name]
    check_fp(model, inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_int8(name):
    model, inputs = CASES[name]
    check_int(model, inputs)


@pytest.mark.parametrize("name", sorted(INT_ONLY_INPUT_CASES))
def test_fp_misc(name):
    model, inputs = INT_ONLY_INPUT_CASES[name]
    check_fp(model, inputs)
