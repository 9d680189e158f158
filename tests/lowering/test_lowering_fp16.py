"""FP16 tensors in the FP profile: casts to and from float16 and data movement on them lower
(TOSA FP16 tensors, CAST), checked against PyTorch on the reference model; arithmetic on
float16 stays on the CPU with a reason."""

from __future__ import annotations

import torch

import lowering


class HalfTrip(torch.nn.Module):
    def forward(self, x):
        h = x.to(torch.float16).permute(0, 2, 1).reshape(2, -1)
        return h, h.to(torch.float32) * 2.0


def test_float16_casts_and_moves():
    x = torch.randn(2, 3, 4) * 100
    lm = lowering.lower(HalfTrip(), (x,), profile="FP")
    assert lm.cpu_nodes == [] and lm.op_counts.get("CAST") == 2
    assert lm.input_dtypes == ["FP32"]
    half, back = lm.run(x)
    expected_half, expected_back = HalfTrip()(x)
    assert half.dtype == torch.float16
    assert torch.equal(half, expected_half)  # CAST rounds to nearest even, as PyTorch does
    torch.testing.assert_close(back, expected_back, atol=0, rtol=0)


def test_float16_arithmetic_stays_on_cpu_with_a_reason():
    class M(torch.nn.Module):
        def forward(self, x):
            return (x.to(torch.float16) + 1.0).to(torch.float32)

    lm = lowering.lower(M(), (torch.ones(4),), profile="FP")
    assert lm.tosa is None
    (cpu,) = lm.cpu_nodes
    assert cpu.target == "aten.add.Tensor" and "float16" in cpu.reason
