"""Casts PyTorch and TOSA define differently, lowered to PyTorch's meaning.

* float -> integer: PyTorch truncates toward zero, TOSA's CAST rounds to nearest; the lowering
  truncates first (float32; an FP16 value widens exactly), so the CAST is exact.
* uint8 tensors (an image as it comes from a camera): TOSA 1.0 has no unsigned 8-bit type, so
  a uint8 tensor travels as its INT8 bits; a cast reads them as unsigned (RESCALE with
  input_unsigned, to INT16), data movement keeps them, and any other op on uint8 values stays
  on the CPU.

Every case is compared with PyTorch exactly (integer results) or within float32 rounding, and
in INT with the fake-quant model (0 steps).
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp, check_int

import lowering
from lowering.api import UINT8

# (halves, values just off integers, negative values: where truncation and rounding differ)
EDGES = torch.tensor([[-2.5, -0.26, -0.05, 0.0, 0.05, 0.26, 0.35, 1.25, -0.3999, 12.7, -12.7, 99.5]])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.int16, torch.bool])
def test_fp_float_to_integer_truncates_toward_zero(dtype):
    lm = check_fp(Fn(lambda x: (x * 10).to(dtype)), (EDGES,))
    assert not lm.cpu_nodes
    assert int(((EDGES * 10).round() != (EDGES * 10).trunc()).sum()) >= 4  # (the case tells them apart)


def test_fp_float16_to_integer_truncates_toward_zero():
    lm = check_fp(Fn(lambda x: (x * 10).half().to(torch.int32)), (EDGES,))
    assert not lm.cpu_nodes


def test_fp_truncated_index_feeds_a_gather():
    table = torch.arange(20.0) * 1.5

    def lookup(x):
        return table[(x.abs() * 3).long().clamp(max=19)]

    lm = check_fp(Fn(lookup), (EDGES,))
    assert not lm.cpu_nodes


_IMAGE = torch.randint(0, 256, (1, 3, 4, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
_IMAGE[0, 0, 0] = torch.tensor([0, 127, 128, 255], dtype=torch.uint8)  # (both halves of the range)

UINT8_CASES = {
    "normalize": lambda i: i.float() / 255.0 - 0.5,
    "move then cast": lambda i: i.permute(0, 2, 3, 1).reshape(1, 16, 3).float() * 2,
    "to int32": lambda i: i.to(torch.int32) * 3 - 100,
    "to int8 (wraps)": lambda i: i.to(torch.int8).to(torch.int32),
    "to bool": lambda i: i.bool(),
    "uint8 output": lambda i: i.flip(-1),
}


class ImageConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, image):
        return self.conv(image.float() / 255.0)


@pytest.mark.parametrize("name", list(UINT8_CASES))
def test_fp_uint8_inputs_read_as_unsigned(name):
    lm = check_fp(Fn(UINT8_CASES[name]), (_IMAGE,), atol=1e-6, rtol=1e-6)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes


@pytest.mark.parametrize("name", ["normalize", "move then cast"])
def test_int_uint8_inputs_read_as_unsigned(name):
    lm = check_int(Fn(UINT8_CASES[name]), (_IMAGE,), calibration=[(_IMAGE,)], max_steps=0)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_a_conv_on_a_uint8_image(profile):
    model = ImageConv().eval()
    if profile == "FP":
        lm = check_fp(model, (_IMAGE,), atol=1e-5, rtol=1e-5)
    else:
        lm = check_int(model, (_IMAGE,), calibration=[(_IMAGE,)], max_steps=0)
    assert not lm.cpu_nodes


@pytest.mark.parametrize("fn", [lambda i: (i + 1).float(), lambda i: (i > 128).float()], ids=["add", "compare"])
def test_uint8_arithmetic_stays_on_the_cpu_and_runs(fn):
    lm = lowering.lower(Fn(fn), (_IMAGE,), profile="FP")
    assert [c.reason for c in lm.cpu_nodes][:1] == [UINT8]
    torch.testing.assert_close(lm.run(_IMAGE)[0], fn(_IMAGE), atol=0, rtol=0)
