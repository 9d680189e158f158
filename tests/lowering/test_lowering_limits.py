"""INT attention masks built from float limits (``where(mask, 0, finfo.min)``, as Hugging Face
models build them): the mask's quantization must not swamp the scores it is added to.

Reference: PyTorch's float model (the masked softmax) and the fake-quant model in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lowering_checks import float64_step_diff

import lowering


class MaskedAttention(torch.nn.Module):
    """Softmax of q k^T plus an additive mask that is 0 where ``keep > 0`` and ``fill`` elsewhere."""

    def __init__(self, fill: float):
        super().__init__()
        self.fill = fill

    def forward(self, q, k, keep):
        bias = torch.where(keep > 0, 0.0, self.fill)
        return torch.softmax(q @ k.transpose(-1, -2) + bias, dim=-1)


@pytest.mark.parametrize("fill", [torch.finfo(torch.float32).min, float("-inf")])
def test_int_masked_softmax_matches_float_and_float64_fake_quant(fill):
    torch.manual_seed(0)
    model = MaskedAttention(fill).eval()
    keep = torch.tril(torch.ones(1, 6, 6)) - 0.5  # causal: the upper triangle is masked
    example = (torch.randn(1, 6, 8), torch.randn(1, 6, 8), keep)
    calibration = [(torch.randn(1, 6, 8), torch.randn(1, 6, 8), keep) for _ in range(3)] + [example]
    lm = lowering.lower(model, example, profile="INT", calibration=calibration)
    assert lm.tosa is not None and lm.cpu_nodes == []
    assert float64_step_diff(lm, example).max() == 0
    qp = lm.output_qparams[0]
    raw = lm.run_raw(lm.quantize_inputs(*example))[0].astype(np.int64)
    with torch.no_grad():
        expected = model(*example).numpy()
    got = (raw - qp.zp) * qp.s
    masked = np.broadcast_to(keep.numpy() < 0, got.shape)
    assert np.all(got[masked] == 0) and np.all(expected[masked] == 0)
    # the sum of scores and mask spans [-256 - |scores|, |scores|]: an int8 step of ~1.05 logits,
    # which moves a softmax entry by up to ~0.15 here (finfo.min unbounded gave one step of 1e36:
    # every row uniform over masked and kept entries alike)
    assert np.abs(got - expected).max() < 0.25


def test_an_infinite_clamp_bound_is_not_a_mask_value():
    """clamp(x, max=inf) means no upper bound: INT keeps values beyond the mask bound of 256."""
    model = torch.nn.Hardtanh(0.0, float("inf")).eval()
    example = (torch.linspace(-100.0, 1000.0, 64).reshape(1, 64),)
    lm = lowering.lower(model, example, profile="INT", calibration=[example])
    got = lm.run(*example)[0]
    qp = lm.output_qparams[0]
    assert float(got.max()) > 990.0
    # half an input step (1100/255) plus half an output step
    assert torch.allclose(got, model(*example), atol=2 * qp.s)
