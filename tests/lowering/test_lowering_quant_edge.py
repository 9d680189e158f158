"""Quantization edge cases of real models, judged against the float model (each was exact
against its own fake-quant model, which was wrong too): a module applied twice, a weight
channel of zeros with a bias, and a global mean of ReLU outputs."""

from __future__ import annotations

import pytest
import torch
from lowering_checks import judge_int
from torch import nn

import lowering


def _sqnr_db(want: torch.Tensor, got: torch.Tensor) -> float:
    return float(10 * torch.log10(want.pow(2).mean() / (got - want).pow(2).mean()))


class ConvTwice(nn.Module):
    """One conv on two inputs of different ranges (an FPN's output conv on every level)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, a, b):
        return self.conv(a), self.conv(b * 10)


@pytest.mark.parametrize("int16", [False, True], ids=["int8", "int16"])
def test_a_conv_applied_twice_quantizes_its_bias_per_call(int16):
    torch.manual_seed(0)
    model, x = ConvTwice().eval(), (torch.randn(1, 4, 8, 8), torch.randn(1, 4, 8, 8))
    config = lowering.QuantConfig.int16() if int16 else None
    lm = lowering.lower(model, x, calibration=[x], quantization=config)
    assert lm.cpu_nodes == [] and judge_int(lm, x)["max_step"] <= 1
    with torch.no_grad():
        expected = model(*x)
    # the second call's bias was quantized at the first call's input scale: 15 dB
    for got, want in zip(lm.run(*x), expected, strict=True):
        assert _sqnr_db(want, got) > 35


@pytest.mark.parametrize("config", [None, lowering.QuantConfig(per_channel=False), lowering.QuantConfig.int16()],
                         ids=["per_channel", "per_tensor", "int16"])
def test_a_zero_weight_channel_keeps_its_bias(config):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3).eval()
    with torch.no_grad():
        conv.weight[1].zero_()
        conv.bias[1] = 0.5
    x = torch.randn(1, 3, 8, 8)
    lm = lowering.lower(conv, (x,), calibration=[(torch.randn(1, 3, 8, 8),) for _ in range(4)], quantization=config)
    (got,) = lm.run(x)
    # the channel is its bias: 0.5 within an output step (it was clamped to -0.06)
    assert float((got[0, 1] - 0.5).abs().max()) <= float(lm.output_qparams[0].s)
    with torch.no_grad():
        assert _sqnr_db(conv(x), got) > 35


class GlobalMeanHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.fc = nn.Linear(4, 3, bias=False)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def test_a_global_mean_gets_its_own_scale():
    """The mean of ReLU outputs spans a fraction of their range: at the ReLU's scale it kept a
    handful of levels (25.6 dB against float); its own scale, exact sums and one RESCALE."""
    torch.manual_seed(0)
    model, x = GlobalMeanHead().eval(), torch.randn(2, 3, 16, 16)
    lm = lowering.lower(model, (x,), calibration=[(torch.randn(2, 3, 16, 16),) for _ in range(4)])
    assert lm.cpu_nodes == [] and judge_int(lm, (x,))["max_step"] == 0
    with torch.no_grad():
        assert _sqnr_db(model(x), lm.run(x)[0]) > 38
