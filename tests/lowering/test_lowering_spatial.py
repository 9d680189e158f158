"""Spatial ops: conv3d, 1-D / dilated / ceil-mode / batchless pools, uneven adaptive average
pooling, divisor_override, pixel (un)shuffle, reflect / replicate / circular padding, nearest
and bilinear upsampling by fractional scale factors, conv_transpose1d, dilated transposed
convolutions; FP against PyTorch, INT against
fake-quant; grid_sample (FP)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int, float64_step_diff

import lowering


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _conv3d(*args, **kw):
    torch.manual_seed(3)
    return nn.Conv3d(*args, **kw)


# name -> (module, input)
CASES = {
    "conv3d_stride_pad": (_conv3d(2, 4, 3, stride=2, padding=1), _x(1, 2, 7, 8, 9)),
    "conv3d_uneven_stride": (_conv3d(3, 2, (2, 3, 3), stride=(1, 3, 2)), _x(2, 3, 5, 10, 9)),
    "conv3d_groups_dilation": (_conv3d(4, 6, 3, groups=2, dilation=(1, 2, 1), bias=False),
                               _x(1, 4, 5, 9, 6)),
    "conv3d_same": (_conv3d(2, 3, 3, padding="same"), _x(1, 2, 4, 5, 6)),
    "conv2d_unread_rows": (nn.Conv2d(3, 4, 5, stride=3, padding=1), _x(1, 3, 14, 15)),
    "max_pool1d": (Fn(lambda x: F.max_pool1d(x, 3, 2, padding=1)), _x(2, 3, 10)),
    "max_pool1d_batchless_dilated": (Fn(lambda x: F.max_pool1d(x, 3, 2, dilation=2)),
                                     _x(4, 13)),
    "avg_pool1d_ceil": (Fn(lambda x: F.avg_pool1d(x, 3, 2, padding=1, ceil_mode=True)),
                        _x(1, 2, 10)),
    "adaptive_avg_pool1d": (Fn(lambda x: F.adaptive_avg_pool1d(x, 4)), _x(1, 3, 11)),
    "max_pool2d_dilated": (Fn(lambda x: F.max_pool2d(x, 3, (2, 1), 1, dilation=(2, 3))),
                           _x(1, 3, 13, 14)),
    "max_pool2d_dilated_stride": (Fn(lambda x: F.max_pool2d(x, 2, 3, dilation=2)),
                                  _x(2, 2, 11, 9)),
    "max_pool2d_ceil": (Fn(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True)),
                        _x(1, 3, 12, 13)),
    "max_pool2d_unread_rows": (Fn(lambda x: F.max_pool2d(x, 3, 3, 1)), _x(1, 2, 14, 14)),
    "max_pool2d_batchless": (Fn(lambda x: F.max_pool2d(x, 3, 2, 1)), _x(3, 9, 11)),
    "avg_pool2d_ceil": (Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)),
                        _x(1, 3, 12, 13)),
    "avg_pool2d_ceil_exclude_pad": (
        Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
        _x(1, 3, 10, 11)),
    "avg_pool2d_divisor": (Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5)),
                           _x(1, 3, 12, 13)),
    "adaptive_avg_pool2d_uneven": (Fn(lambda x: F.adaptive_avg_pool2d(x, (3, 5))),
                                   _x(1, 2, 7, 11)),
    "adaptive_avg_pool2d_upscale": (Fn(lambda x: F.adaptive_avg_pool2d(x, (5, 4))),
                                    _x(1, 2, 3, 3)),
    "pixel_shuffle": (nn.PixelShuffle(2), _x(2, 8, 3, 5)),
    "pixel_shuffle_batchless": (nn.PixelShuffle(3), _x(9, 2, 3)),
    "pixel_unshuffle": (nn.PixelUnshuffle(2), _x(1, 3, 4, 6)),
    "channel_shuffle": (nn.ChannelShuffle(3), _x(2, 6, 3, 4)),
    "channel_shuffle_functional_1d": (Fn(lambda x: F.channel_shuffle(x, 2) * 2), _x(1, 8, 5)),
    "channel_shuffle_5d": (nn.ChannelShuffle(4), _x(1, 8, 2, 3, 2)),
    "pad_reflect": (Fn(lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect")), _x(1, 2, 5, 6)),
    "pad_replicate": (Fn(lambda x: F.pad(x, (3, 0, 1, 2), mode="replicate")), _x(1, 2, 5, 6)),
    "pad_circular": (Fn(lambda x: F.pad(x, (1, 2, -1, 2), mode="circular")), _x(1, 2, 5, 6)),
    "pad_reflect_1d": (nn.ReflectionPad1d((2, 1)), _x(2, 3, 6)),
    "pad_replicate_3d": (nn.ReplicationPad3d((1, 0, 0, 2, 1, 1)), _x(1, 2, 3, 4, 5)),
    "pad_circular_then_conv": (nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"),
                               _x(1, 2, 6, 7)),
    "upsample_nearest_fractional": (
        Fn(lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest")), _x(1, 2, 5, 6)),
    "upsample_nearest_exact": (
        Fn(lambda x: F.interpolate(x, scale_factor=(1.5, 2.0), mode="nearest-exact")),
        _x(1, 2, 5, 6)),
    "upsample_nearest_size": (Fn(lambda x: F.interpolate(x, size=(7, 9), mode="nearest")),
                              _x(1, 2, 5, 6)),
    "upsample_bilinear_fractional": (
        Fn(lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear")), _x(1, 2, 5, 6)),
    "upsample_bilinear_down": (
        Fn(lambda x: F.interpolate(x, scale_factor=(0.6, 2.3), mode="bilinear")),
        _x(1, 2, 5, 6)),
    "upsample_bilinear_align_from_one": (
        Fn(lambda x: F.interpolate(x, size=(4, 9), mode="bilinear", align_corners=True)),
        _x(1, 2, 1, 6)),
    "upsample_bilinear_size": (
        Fn(lambda x: F.interpolate(x, size=(7, 9), mode="bilinear")), _x(1, 2, 5, 6)),
    "conv_transpose1d": (nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1), _x(2, 4, 8)),
    "conv_transpose1d_groups_output_padding": (
        nn.ConvTranspose1d(4, 6, 3, stride=3, padding=1, output_padding=1, groups=2), _x(1, 4, 7)),
    "conv_transpose1d_batchless": (nn.ConvTranspose1d(3, 2, 3, bias=False), _x(3, 6)),
    "conv_transpose1d_dilated": (nn.ConvTranspose1d(3, 2, 3, stride=2, dilation=2), _x(1, 3, 6)),
    "conv_transpose2d_dilated_grouped": (
        nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 3), groups=2), _x(1, 4, 5, 5)),
    "conv_transpose1d_batch_norm": (nn.Sequential(nn.ConvTranspose1d(4, 5, 2, stride=2), nn.BatchNorm1d(5).eval(),
                                                  nn.ReLU()), _x(1, 4, 6)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fp(name):
    """FP: the TOSA graph computes what PyTorch computes (within 1e-3), all on TOSA."""
    model, x = CASES[name]
    lm = check_fp(model, (x,))
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("name", list(CASES))
def test_int(name):
    """INT: within one quantization step of the fake-quant model, all on TOSA."""
    model, x = CASES[name]
    lm = check_int(model, (x,))
    assert lm.cpu_nodes == []


def test_dilated_max_pool_is_one_max_pool_per_phase():
    """A dilated max pool is one dense MAX_POOL2D over the phases plus the stride subsample,
    not a chain of elementwise maxima."""
    lm = check_fp(Fn(lambda x: F.max_pool2d(x, 3, 2, dilation=2)), (_x(1, 2, 12, 12),))
    assert lm.op_counts.get("MAX_POOL2D") == 2


@pytest.mark.parametrize("batch_norm", [False, True])
@pytest.mark.parametrize("groups", [1, 2])
def test_grouped_transposed_conv_with_folded_batch_norm(groups, batch_norm):
    """A grouped ConvTranspose2d becomes one TRANSPOSE_CONV2D (block-diagonal weight); a BN
    after it folds into it per output channel, in INT and FP."""
    torch.manual_seed(0)
    layers = [nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=groups)]
    if batch_norm:
        bn = nn.BatchNorm2d(6)
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        layers.append(bn)
    m = nn.Sequential(*layers).eval()
    ex = (_x(1, 4, 5, 5),)
    for lm in (check_fp(m, ex), check_int(m, ex)):
        assert lm.cpu_nodes == [] and lm.op_counts.get("TRANSPOSE_CONV2D") == 1


class _GridSample(torch.nn.Module):
    def __init__(self, mode, padding, align):
        super().__init__()
        self.args = {"mode": mode, "padding_mode": padding, "align_corners": align}

    def forward(self, x, grid):
        return torch.nn.functional.grid_sample(x, grid, **self.args)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_fp(mode, padding, align):
    """grid_sample decomposed into GATHERs, against PyTorch; the grid reaches outside the
    image (padding) and lands on exact pixel centres and half-way points (rounding ties)."""
    torch.manual_seed(0)
    grid = torch.cat([torch.randn(1, 5, 4, 2) * 0.9,
                      torch.linspace(-1.25, 1.25, 2 * 4 * 2).reshape(1, 2, 4, 2)], dim=1)
    lm = check_fp(_GridSample(mode, padding, align), (torch.randn(2, 3, 6, 5), grid.repeat(2, 1, 1, 1)))
    assert "GATHER" in lm.op_counts


def test_grid_sample_int_stays_on_cpu_with_a_reason():
    lm = lowering.lower(_GridSample("bilinear", "zeros", False),
                        (torch.randn(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1), profile="INT")
    assert any("grid_sampler" in c.target for c in lm.cpu_nodes)


class _LayerNorm2d(nn.LayerNorm):
    """torchvision ConvNeXt's LayerNorm2d: a channel LayerNorm between two permutes."""

    def forward(self, x):
        x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias,
                         self.eps)
        return x.permute(0, 3, 1, 2)


# Means whose input and output share a quantization: a window of 2 or 4 divides a sum of
# integers by 2 or 4, so .5 ties are frequent (about 1 output in 4); issue 10 met them in
# convnext_tiny's head (global pool of 2x2 -> LayerNorm2d), 3 steps off after the LayerNorm.
TIE_CASES = {
    "adaptive_pool_then_layer_norm": (
        lambda: nn.Sequential(nn.AdaptiveAvgPool2d(1), _LayerNorm2d(48)), (1, 48, 2, 2)),
    "adaptive_avg_pool2d_2x2": (lambda: nn.AdaptiveAvgPool2d(1), (1, 64, 2, 2)),
    "avg_pool2d_sliding": (lambda: nn.AvgPool2d(2, 1), (1, 16, 5, 4)),
    "mean_spatial_no_keepdim": (lambda: Fn(lambda x: x.mean((2, 3))), (1, 64, 2, 2)),
    "avg_pool2d_divisor_4": (lambda: Fn(lambda x: F.avg_pool2d(x, 2, divisor_override=4)),
                             (1, 16, 4, 4)),
    # uneven adaptive windows of 1, 2 and 4 pixels: vgg's head at a 64x64 input (2x2 -> 7x7)
    "adaptive_avg_pool2d_2x2_to_7x7": (lambda: nn.AdaptiveAvgPool2d(7), (1, 64, 2, 2)),
    "vgg_head_2x2_to_7x7": (lambda: nn.Sequential(
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(7), nn.Flatten(),
        nn.Linear(16 * 49, 10)), (1, 8, 2, 2)),
}


@pytest.mark.parametrize("name", list(TIE_CASES))
def test_int_mean_ties_round_to_even_like_fake_quant(name):
    """INT means with .5 ties are bit-exact against the float64 fake-quant model, whose
    quantize rounds ties to even (AVG_POOL2D and RESCALE round them up)."""
    make, shape = TIE_CASES[name]
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=gen)
    cal = [(torch.randn(*shape, generator=gen),) for _ in range(4)] + [(x,)]
    lm = lowering.lower(make().eval(), (x,), profile="INT", calibration=cal)
    assert lm.cpu_nodes == []
    diff = float64_step_diff(lm, (x,))
    assert diff.max() == 0, f"{(diff > 0).sum()} of {diff.size} outputs differ"


class _SharedQMean(nn.Module):
    """A ``convert_pt2e``-style graph: a mean over 2 channels (REDUCE_SUM + RESCALE by 0.5)
    whose input and output share a float32 scale, so its .5 ties are exact in float64."""

    S, ZP = float(torch.tensor(0.05).item()), 3

    def _qdq(self, x):
        qd = torch.ops.quantized_decomposed
        q = qd.quantize_per_tensor(x, self.S, self.ZP, -128, 127, torch.int8)
        return qd.dequantize_per_tensor(q, self.S, self.ZP, -128, 127, torch.int8)

    def forward(self, x):
        return self._qdq(self._qdq(x).mean(1, keepdim=True))


def test_int_reduce_sum_mean_ties_round_to_even_like_fake_quant():
    x = _x(1, 2, 16, 8, seed=1)
    gm = torch.export.export(_SharedQMean(), (x,)).module(check_guards=False)
    lm = lowering.lower(gm, (x,), profile="INT")
    assert lm.cpu_nodes == [] and "REDUCE_SUM" in lm.op_counts
    diff = float64_step_diff(lm, (x,))
    assert diff.max() == 0, f"{(diff > 0).sum()} of {diff.size} outputs differ"


def test_int_mean_ties_stay_on_the_ethos_u55():
    """The ties-to-even correction uses only ops Vela runs on Ethos-U55 (no BITWISE_AND)."""
    import re

    from ethosu.compiler import compile_tosa

    make, shape = TIE_CASES["avg_pool2d_sliding"]
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=gen)
    lm = lowering.lower(make().eval(), (x,), profile="INT",
                        calibration=[(torch.randn(*shape, generator=gen),) for _ in range(4)] + [(x,)])
    assert "DEPTHWISE_CONV2D" in lm.op_counts and "AVG_POOL2D" not in lm.op_counts
    log = compile_tosa(lm.tosa, "ethos-u55-128", layers=False, isolate=True).vela_log
    cpu = re.search(r"^CPU operators = (\d+)", log, re.MULTILINE)
    assert cpu and int(cpu.group(1)) == 0, cpu and cpu.group(0)
