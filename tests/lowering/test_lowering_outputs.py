"""Graph outputs that are not computed tensors (lowering.passes.outputs): a python number the
model returns (``x.shape[0]``, a flag) and a constant tensor (anchor boxes). Both made the
whole lowering fail; now the number is a 0-d constant tensor of its value and type, and in INT
a float constant is stored quantized, within half a step of its float values."""

from __future__ import annotations

import pytest
import torch

import lowering


class NumberOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x), x.shape[0], 0.25, True


class ConstantOutput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("anchors", torch.linspace(-2.0, 3.0, 12).reshape(6, 2))

    def forward(self, x):
        return self.linear(x).relu(), self.anchors, torch.ones(3)


X = torch.randn(5, 4, generator=torch.Generator().manual_seed(4))


def _lowered(model_cls, profile):
    torch.manual_seed(0)
    model = model_cls().eval()
    with torch.no_grad():
        ref = model(X)
    return lowering.lower(model, (X,), profile=profile), ref


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_number_outputs_are_constant_tensors_of_their_value_and_type(profile):
    lm, ref = _lowered(NumberOutputs, profile)
    assert lm.cpu_nodes == []
    out = lm.run(X)
    assert len(out) == 4
    for got, want, dtype in zip(out[1:], ref[1:], (torch.int64, torch.float32, torch.bool), strict=True):
        assert got.dim() == 0 and got.dtype == dtype and got.item() == want, (got, want)
    tolerance = 1e-6 if profile == "FP" else 0.05
    torch.testing.assert_close(out[0], ref[0], atol=tolerance, rtol=0)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_constant_tensor_outputs(profile):
    lm, ref = _lowered(ConstantOutput, profile)
    assert lm.cpu_nodes == []
    out = lm.run(X)
    for i, (got, want) in enumerate(zip(out[1:], ref[1:], strict=True), start=1):
        assert got.shape == want.shape
        if profile == "FP":
            assert torch.equal(got, want)
        else:  # quantized over its own range: within half a step
            step = float(lm.output_qparams[i].s)
            assert float((got - want).abs().max()) <= step / 2 + 1e-7, (got, want, step)
