"""What user code brings to ``lower()``: in-place ops, python-number forward arguments, nested
inputs, integer inputs, transposed views, ``.module()`` leftovers, QAT graphs.

Every model here is checked against PyTorch (FP, within 1e-3) or against its fake-quant model
(INT, within one quantization step), and must lower whole (no CPU node).
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import check_fp, check_int, max_step_error
from torch import nn

import lowering
from lowering.errors import LoweringError
from lowering.passes.functionalize import functional_variant, functionalize

aten = torch.ops.aten


class InPlaceBlock(nn.Module):
    """torchvision style: inplace activations, ``+=`` residual, inplace dropout."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.act = nn.Hardswish(inplace=True)
        self.drop = nn.Dropout(0.2, inplace=True)

    def forward(self, x):
        y = self.conv(x)
        y = self.act(y)
        y += x
        torch.relu_(y)
        y.mul_(0.5)
        return self.drop(y)


class WritesIntoSlice(nn.Module):
    """An in-place op on a slice writes into the base tensor, read afterwards."""

    def forward(self, x):
        y = x * 2
        y[:, :2].add_(1.0)
        y.select(1, 3).mul_(-1.0)
        return y - 0.25


class Scalars(nn.Module):
    """Python numbers as forward arguments (ExecuTorch's tests pass ``dim``, ``alpha``...)."""

    def forward(self, x, dim: int, alpha: float, mode: str):
        return torch.div(x.sum(dim, keepdim=True) * alpha, 3.0, rounding_mode=mode)


class ChannelShuffle(nn.Module):
    """ShuffleNet's view of a transposed tensor (``.contiguous()`` in between)."""

    def forward(self, x):
        b, c, h, w = x.shape
        x = x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous()
        return x.view(b, c, h, w) + 1.0


class NestedInputs(nn.Module):
    def forward(self, xs, scale: float):
        return xs[0] * scale + xs[1]


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_functional_variant_names_the_out_of_place_op():
    assert functional_variant(aten.relu_.default) == aten.relu.default
    assert functional_variant(aten.add_.Tensor) == aten.add.Tensor
    assert functional_variant(aten.index_put_.default) == aten.index_put.default
    assert functional_variant(aten.relu.default) is None
    # an out= variant is functional once its out argument is dropped
    assert functional_variant(aten.add.out) == aten.add.Tensor
    assert functional_variant(aten.max.dim_max) is None  # (two out tensors: values, indices)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_in_place_ops_lower_whole(profile):
    ex = (_x(1, 4, 6, 6),)
    lm = check_fp(InPlaceBlock(), ex) if profile == "FP" else check_int(InPlaceBlock(), ex)
    assert lm.tosa is not None and lm.cpu_nodes == []
    targets = {str(n.target) for n in lm.graph_module.graph.nodes if n.op == "call_function"}
    assert not any(t.endswith("_.default") or t.endswith("_.Tensor") for t in targets), targets


def test_in_place_write_through_views_reaches_the_base():
    ex = (_x(2, 5),)
    gm = torch.export.export(WritesIntoSlice(), ex).module(check_guards=False)
    assert functionalize(gm) == 2
    torch.testing.assert_close(gm(*ex), WritesIntoSlice()(*ex))
    lm = check_fp(WritesIntoSlice(), ex)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_python_number_inputs_are_constants(profile):
    ex = (_x(2, 3, 4), 1, 0.5, "floor")
    lm = check_fp(Scalars(), ex) if profile == "FP" else check_int(Scalars(), ex)
    assert lm.tosa is not None and lm.cpu_nodes == []
    assert len(lm.input_names) == 1  # the numbers are not graph inputs
    assert len(lm.quantize_inputs(*ex)) == 1


def test_nested_inputs_flatten_like_export():
    ex = ([_x(2, 3), _x(2, 3, seed=1)], 2.0)
    lm = check_fp(NestedInputs(), ex)
    assert len(lm.input_names) == 2


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_channel_shuffle_view_of_transposed_tensor(profile):
    ex = (_x(1, 8, 3, 3),)
    lm = check_fp(ChannelShuffle(), ex) if profile == "FP" else check_int(ChannelShuffle(), ex)
    assert lm.cpu_nodes == []


def test_integer_inputs_keep_their_type():
    class Shift(nn.Module):
        def forward(self, x):
            return (x << 1) & 0x3F

    x = torch.randint(-100, 100, (2, 6), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    lm = lowering.lower(Shift(), (x,), profile="FP")
    assert lm.cpu_nodes == [] and lm.input_dtypes == ["INT8"]
    assert torch.equal(lm.run(x)[0].to(torch.int8), Shift()(x))


def test_guards_fn_of_module_with_guards_is_dropped():
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
    ex = (_x(2, 4),)
    gm = torch.export.export(m, ex).module()  # check_guards=True leaves a _guards_fn call
    lm = lowering.lower(gm, ex, profile="FP")
    assert lm.tosa is not None and lm.cpu_nodes == []
    torch.testing.assert_close(lm.run(*ex)[0], m(*ex), atol=1e-5, rtol=1e-5)


def test_qat_batch_norm_counter_does_not_stay_on_the_cpu():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

    from lowering.quantizer import QuantConfig, TosaQuantizer

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    ex = (_x(2, 3, 6, 6),)
    gm = torch.export.export(m.train(), ex).module()
    prepared = prepare_qat_pt2e(gm, TosaQuantizer(QuantConfig(qat=True), ex))
    for seed in range(3):
        prepared(_x(2, 3, 6, 6, seed=seed))
    converted = convert_pt2e(prepared)
    lm = lowering.lower(converted, ex, profile="INT")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    assert max_step_error(lm, ex) <= 1


def test_a_failed_whole_graph_is_never_silent(monkeypatch):
    """If the whole graph fails to emit but every part emits alone (no node to blame and
    keep on the CPU), lower() raises with the cause instead of returning ``tosa=None``."""
    from lowering import api

    real_emit, calls = api.Emitter.emit, []

    def refuse_first(self):
        calls.append(1)
        if len(calls) == 1:
            raise LoweringError("synthetic refusal", node="not_a_node")
        return real_emit(self)

    monkeypatch.setattr(api.Emitter, "emit", refuse_first)
    with pytest.raises(LoweringError, match="synthetic refusal"):
        lowering.lower(nn.ReLU(), (_x(3),), profile="FP")


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_int8_arithmetic_wraps_like_pytorch(profile):
    """int8 add/mul/max: TOSA computes them in INT32, the narrowing CAST wraps as torch does."""

    class Arith(nn.Module):
        def forward(self, x):
            return x + x * x, torch.maximum(x, x - 3)

    x = torch.randint(-128, 127, (2, 5), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    lm = lowering.lower(Arith(), (x,), profile=profile)
    assert lm.cpu_nodes == []
    for got, expected in zip(lm.run(x), Arith()(x), strict=True):
        assert torch.equal(got.to(torch.int8), expected)
