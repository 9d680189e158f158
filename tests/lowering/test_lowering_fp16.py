"""FP16 tensors in the FP profile: casts to and from float16, data movement and basic
element-wise ops on them lower (TOSA FP16 tensors, CAST), checked against PyTorch on the
reference model; every other float16 op computes in FP32 between casts, as PyTorch computes it."""

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


def test_float16_op_beyond_the_element_wise_ones_computes_in_float32_as_pytorch_does():
    """sigmoid of a float16 tensor: PyTorch's CPU kernel computes it in float32 and rounds once;
    the lowering casts to FP32 around the SIGMOID, so the FP16 result rounds the same way."""

    class M(torch.nn.Module):
        def forward(self, x):
            return (x.to(torch.float16) + 1.0).sigmoid().to(torch.float32)

    x = torch.linspace(-12, 12, 97)
    lm = lowering.lower(M(), (x,), profile="FP")
    assert lm.cpu_nodes == [] and lm.op_counts["SIGMOID"] == 1
    # the model's two casts, plus FP16 -> FP32 before the SIGMOID and FP32 -> FP16 after it
    assert lm.op_counts["CAST"] == 4
    (got,) = lm.run(x)
    expected = M()(x)
    # SIGMOID is inside the spec's compliance bound in float32, so the float16 rounding of it
    # can differ from PyTorch's by one float16 step at most
    assert (got - expected).abs().max() <= 2.0 ** -11


def _fp16_step_error(model: torch.nn.Module, example: tuple) -> tuple[lowering.LoweredModel, float]:
    """Lower the float16 ``model`` (FP profile) and return it with the largest difference of its
    outputs from PyTorch's float16 forward, in float16 steps at the output's largest magnitude."""
    model = model.half().eval()
    lm = lowering.lower(model, example, profile="FP")
    with torch.no_grad():
        expected = model(*example)
    expected = torch.utils._pytree.tree_leaves(expected)
    worst = 0.0
    for got, want in zip(lm.run(*example), expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        if not want.dtype.is_floating_point:
            assert torch.equal(got, want)
            continue
        step = torch.finfo(torch.float16).eps * float(2.0 ** torch.floor(torch.log2(want.float().abs().max())))
        worst = max(worst, float((got.float() - want.float()).abs().max()) / step)
    return lm, worst


class HalfCNN(torch.nn.Module):
    """conv-bn-relu6, depthwise/2, hardswish, pool, linear, softmax: a float16 classifier."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU6(),
            torch.nn.Conv2d(8, 8, 3, groups=8, stride=2), torch.nn.Hardswish(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))

    def forward(self, x):
        logits = self.body(x)
        return logits.softmax(-1), logits.argmax(-1)


def test_float16_cnn_lowers_whole_in_fp16_and_matches_pytorch():
    torch.manual_seed(0)
    lm, steps = _fp16_step_error(HalfCNN(), (torch.randn(2, 3, 16, 16).half(),))
    assert lm.cpu_nodes == [] and lm.input_dtypes == ["FP16"]
    assert lm.op_counts["DEPTHWISE_CONV2D"] == 1 and lm.op_counts["CONV2D"] >= 1
    assert steps <= 1.0


def test_float16_transformer_layer_and_lstm_lower_whole():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    lm, steps = _fp16_step_error(layer, (torch.randn(1, 5, 16).half(),))
    assert lm.cpu_nodes == [] and lm.input_dtypes == ["FP16"]
    assert steps <= 2.0  # PyTorch rounds some intermediate results to float16 where we do not
    lm, steps = _fp16_step_error(torch.nn.LSTM(8, 6, batch_first=True), (torch.randn(1, 4, 8).half(),))
    assert lm.cpu_nodes == [] and steps <= 2.0


def test_float16_reductions_sort_and_factories():
    class M(torch.nn.Module):
        def forward(self, x):
            values, indices = torch.topk(x, 3)
            return (x.mean(-1), x.var(-1), torch.cumsum(x, 1), values, indices,
                    x + torch.full((4, 8), 0.5, dtype=torch.float16) + torch.arange(8, dtype=torch.float16))

    torch.manual_seed(0)
    lm, steps = _fp16_step_error(M(), (torch.randn(4, 8).half(),))
    assert lm.cpu_nodes == [] and steps <= 1.0
