"""Defects found by probing models as users bring them (``benchmarks/probe_architectures.py
--quirks``, models in ``quirk_models.py``): each test failed before its fix.

INT results are judged against the same fake-quant graph evaluated in float64 (0 steps =
bit-exact), FP results against PyTorch.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from lowering_checks import float64_step_diff
from torch import nn

import lowering


def _int(model, example, calibration):
    return lowering.lower(model, example, profile="INT", calibration=calibration)


class _Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return F.interpolate(self.conv(x), scale_factor=2, mode="bilinear")


def test_int_bilinear_x2_of_a_size_not_a_power_of_two_is_exact():
    # 6 -> 12: RESIZE's scale 24/12 made the weights' denominator 576, whose RESCALE is not
    # exact, so the .5 ties of the dyadic weights rounded either way (27 of 576 one step off)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 3, 6, 6, generator=gen)
    lm = _int(_Up().eval(), (x,), [(torch.randn(1, 3, 6, 6, generator=gen),) for _ in range(4)])
    diff = float64_step_diff(lm, (x,))
    assert diff.max() == 0, f"{(diff > 0).sum()} of {diff.size} outputs off"
    assert np.unique(lm.run_raw(lm.quantize_inputs(x))[0]).size > 50
