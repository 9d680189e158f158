"""Batch norms folded into the convolution or linear layer before them, also when something
else reads that layer's output (it is copied for the batch norm's branch), judged against the
float model: PT2E's prepare used to fold such a batch norm into the shared convolution, so
the INT graph *and* its fake-quant model returned the normalised values on the other branch."""

from __future__ import annotations

import pytest
import torch
from lowering_checks import check_fp
from torch import nn

import lowering


def _randomised(bn: nn.modules.batchnorm._BatchNorm) -> nn.Module:
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    return bn


class ConvFeedsBatchNormAndMore(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = _randomised(nn.BatchNorm2d(6))

    def forward(self, x):
        y = self.conv(x)
        return y, self.bn(y) + y.relu()


class LinearFeedsBatchNormAndMore(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)
        self.bn = _randomised(nn.BatchNorm1d(5))

    def forward(self, x):
        y = self.fc(x)
        return self.bn(y), y


def _sqnr_db(got: torch.Tensor, want: torch.Tensor) -> float:
    return float(10 * torch.log10(want.pow(2).mean() / (got - want).pow(2).mean()))


CASES = {
    "conv": (ConvFeedsBatchNormAndMore, (1, 3, 8, 8)),
    "linear": (LinearFeedsBatchNormAndMore, (16, 6)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_shared_layer_before_batch_norm_int8_matches_float(case):
    factory, shape = CASES[case]
    torch.manual_seed(0)
    model = factory().eval()
    x = torch.randn(*shape)
    lm = lowering.lower(model, (x,), profile="INT")
    assert lm.cpu_nodes == []
    with torch.no_grad():
        expected = model(x)
        fake_quant = lm.quantized_model(x)
    for got, fq, want in zip(lm.run(x), fake_quant, expected, strict=True):
        # int8 keeps about 40 dB on these; the wrong fold gave -7 dB (conv) and -2 dB (linear)
        assert _sqnr_db(fq, want) > 30 and _sqnr_db(got, want) > 30


@pytest.mark.parametrize("case", sorted(CASES))
def test_shared_layer_before_batch_norm_fp(case):
    factory, shape = CASES[case]
    torch.manual_seed(0)
    lm = check_fp(factory(), (torch.randn(*shape),), atol=1e-5, rtol=1e-5)
    assert "MUL" not in lm.op_counts  # (folded: the copy's weights carry the normalisation)
