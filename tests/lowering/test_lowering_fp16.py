"""FP16 tensors in the FP profile: casts to and from float16, data movement and basic
element-wise ops on them lower (TOSA FP16 tensors, CAST), checked against PyTorch on the
reference model; other float16 ops stay on the CPU with a reason."""

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


class HalfMath(torch.nn.Module):
    def forward(self, x, y):
        s = torch.maximum(x - y, torch.minimum(x, y)) + 2.5
        c = torch.cat([s.abs(), -x, torch.relu(y).clamp(max=3.0)], dim=1)
        return torch.where(x > y, c[:, :2], x * y), c


def test_float16_element_wise_bit_exact():
    """TOSA computes these in the tensor's own FP16 type, as PyTorch's half ops round them."""
    x, y = (torch.randn(2, 2, 5) * 30).half(), (torch.randn(2, 2, 5) * 30).half()
    lm = lowering.lower(HalfMath(), (x, y), profile="FP")
    assert lm.cpu_nodes == [] and lm.input_dtypes == ["FP16", "FP16"]
    for got, expected in zip(lm.run(x, y), HalfMath()(x, y), strict=True):
        assert got.dtype == torch.float16 and torch.equal(got, expected)


def test_float16_transcendental_stays_on_cpu_with_a_reason():
    class M(torch.nn.Module):
        def forward(self, x):
            return (x.to(torch.float16) + 1.0).sigmoid().to(torch.float32)

    lm = lowering.lower(M(), (torch.ones(4),), profile="FP")
    assert lm.tosa is None
    (cpu,) = lm.cpu_nodes
    assert cpu.target == "aten.sigmoid.default" and "float16" in cpu.reason
