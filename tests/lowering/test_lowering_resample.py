"""F.adaptive_max_pool1d / nn.AdaptiveMaxPool1d and F.interpolate(mode="bicubic") lowered whole
(lowering.passes.decompositions.resample): the pool with even and uneven windows (and more
outputs than inputs), batched and batchless, in FP and INT; bicubic by size and by
scale_factor, up and down, align_corners both ways, borders, one-pixel inputs and outputs, in
FP and INT.

Every case asserts the model lowers whole and compares values: FP against PyTorch (the pool
exactly; bicubic within 1e-5, and no farther from float64 than twice PyTorch's own float32
result plus 1e-6: the matrices sum the same float32 terms in another order), INT against the
fake-quant model in output steps (and bicubic against the float interpolation of the
dequantized input).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int

import lowering
from lowering.passes.decompositions.resample import bicubic_matrix

gen = torch.Generator().manual_seed(41)


def randn(*shape, scale: float = 1.0):
    return torch.randn(shape, generator=gen) * scale


# ----------------------------------------------------------------------------- adaptive_max_pool1d
POOLS = {
    "even": ((2, 3, 12), 4),
    "uneven": ((2, 3, 7), 3),
    "uneven_batchless": ((3, 10), 4),
    "identity": ((1, 2, 5), 5),
    "global": ((1, 2, 5), 1),
    "uneven_near_identity": ((1, 1, 9), 7),
    "more_outputs_than_inputs": ((1, 2, 4), 6),
}


@pytest.mark.parametrize("name", sorted(POOLS))
@pytest.mark.parametrize("module", [False, True], ids=["functional", "module"])
def test_adaptive_max_pool1d_fp_and_int(name, module):
    shape, out = POOLS[name]
    model = nn.AdaptiveMaxPool1d(out) if module else Fn(lambda t: F.adaptive_max_pool1d(t, out))
    x = randn(*shape)
    lm = check_fp(model, (x,), atol=0, rtol=0)  # a max selects an input: exact
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    # INT: a max of int8 values is one of them, as the fake-quant max of dequantized ones is
    lm = check_int(model, (x,), max_steps=0)
    assert lm.cpu_nodes == [], lm.cpu_nodes


def test_adaptive_max_pool1d_indices_stay_whole_on_the_cpu():
    """return_indices=True: no lowering gives the indices, so the op stays on the CPU in one
    piece, and the model runs as PyTorch computes it."""
    model = nn.AdaptiveMaxPool1d(3, return_indices=True).eval()
    x = randn(1, 2, 7)
    lm = lowering.lower(model, (x,), profile="FP")
    assert "aten.adaptive_max_pool1d.default" in [c.target for c in lm.cpu_nodes]
    values, indices = model(x)
    out = lm.run(x)
    assert torch.equal(out[0], values) and torch.equal(out[1].to(indices.dtype), indices)


# ----------------------------------------------------------------------------- bicubic
BICUBIC = {
    "up2": ((1, 2, 5, 6), dict(scale_factor=2)),
    "up2_align": ((2, 3, 5, 6), dict(scale_factor=2, align_corners=True)),
    "down_size": ((1, 2, 8, 9), dict(size=(3, 4))),
    "down_size_align": ((1, 2, 8, 9), dict(size=(3, 4), align_corners=True)),
    "mixed_scales": ((1, 1, 7, 5), dict(scale_factor=(0.6, 1.7))),
    "mixed_scales_align": ((1, 1, 7, 5), dict(scale_factor=(0.6, 1.7), align_corners=True)),
    "mixed_scales_recomputed": ((1, 1, 7, 5), dict(scale_factor=(0.6, 1.7), recompute_scale_factor=True)),
    "to_one_pixel": ((1, 1, 4, 4), dict(size=(1, 1))),
    "to_one_pixel_align": ((1, 1, 4, 4), dict(size=(1, 1), align_corners=True)),
    "width_only": ((1, 2, 5, 6), dict(size=(5, 11))),
    "from_one_pixel": ((1, 1, 1, 1), dict(scale_factor=3)),
    "non_integer_up": ((1, 3, 6, 6), dict(scale_factor=2.5)),
    "large_up_align": ((1, 4, 9, 9), dict(size=(20, 20), align_corners=True)),
    "up_uneven": ((2, 3, 6, 7), dict(scale_factor=(1.5, 0.7))),
    "same_size": ((1, 2, 6, 6), dict(scale_factor=1.0)),
}


def bicubic(**kw):
    return Fn(lambda t: F.interpolate(t, mode="bicubic", **kw))


@pytest.mark.parametrize("name", sorted(BICUBIC))
def test_bicubic_fp(name):
    shape, kw = BICUBIC[name]
    model, x = bicubic(**kw).eval(), randn(*shape, scale=2.0)
    lm = check_fp(model, (x,), atol=1e-5, rtol=1e-5)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    with torch.no_grad():
        exact = model(x.double())
        torch_error = float((model(x).double() - exact).abs().max())
    ours = float((lm.run(x)[0].double() - exact).abs().max())
    assert ours <= 2 * torch_error + 1e-6, (ours, torch_error)


@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_fp_borders_follow_pytorchs_clamping(align_corners):
    """A ramp with a jump at each border: the taps that fall outside the input read its edge
    row / column (ATen clamps the indices), so the border outputs show the edge's value and
    its overshoot exactly as PyTorch's."""
    x = torch.arange(8.0).repeat(8, 1)[None, None]
    x[..., 0, :] += 10.0
    x[..., :, -1] -= 10.0
    model = bicubic(scale_factor=3, align_corners=align_corners).eval()
    lm = check_fp(model, (x,), atol=1e-5, rtol=1e-5)
    assert lm.cpu_nodes == []
    y = lm.run(x)[0]
    torch.testing.assert_close(y[..., :3, :], model(x)[..., :3, :], atol=1e-5, rtol=1e-5)


def test_bicubic_matrix_is_pytorchs_interpolation_of_unit_vectors():
    """Column j of the matrix is PyTorch's bicubic resampling of the j-th unit vector (the op is
    linear), for both align_corners and a given scale."""
    for size, out, align, scale in [(5, 11, False, None), (5, 11, True, None), (9, 4, False, None),
                                    (7, 11, False, 1.6), (6, 15, False, 2.5)]:
        eye = torch.eye(size)[:, None, :, None].expand(size, 1, size, 1).contiguous()
        kw = {"scale_factor": (scale, 1.0)} if scale else {"size": (out, 1)}
        cols = F.interpolate(eye, mode="bicubic", align_corners=align, **kw)[:, 0, :, 0].T
        # (1e-6: where a border clamps several taps onto one sample, the matrix holds their sum
        # rounded once, PyTorch adds the float32 products one by one)
        np.testing.assert_allclose(bicubic_matrix(size, out, align, scale), cols.numpy(), atol=1e-6, rtol=0)


#: INT against the float bicubic of the dequantized int8 input, in output steps: rounding the
#: output is half a step; the int8 matrices and the requantized intermediate add the rest
#: (found up to 1.29, mean up to 0.51)
INT_VS_DEQUANTIZED = (1.5, 0.6)


@pytest.mark.parametrize("name", sorted(set(BICUBIC) - {"same_size"}))
def test_bicubic_int(name):
    shape, kw = BICUBIC[name]
    model, x = bicubic(**kw).eval(), randn(*shape, scale=2.0)
    # (calibration of the same spread as x: check_int's own takes x's std, NaN for one pixel)
    calibration = [(randn(*shape, scale=2.0),) for _ in range(4)] + [(x,)]
    lm = check_int(model, (x,), calibration=calibration, max_steps=1)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    qp = lm.input_qparams[0]
    q = torch.from_numpy(np.asarray(lm.quantize_inputs(x)[0]).astype(np.float64))
    with torch.no_grad():
        ideal = model(((q - float(qp.zp)) * float(qp.s)).float()).double()
    steps = (lm.run(x)[0].double() - ideal).abs() / float(lm.output_qparams[0].s)
    largest, mean = INT_VS_DEQUANTIZED
    assert float(steps.max()) <= largest, float(steps.max())
    if steps.numel() >= 16:  # (a mean over one pixel is its max)
        assert float(steps.mean()) <= mean, float(steps.mean())


def test_bicubic_same_size_int_is_an_identity():
    model, x = bicubic(scale_factor=1.0).eval(), randn(1, 2, 6, 6)
    lm = check_int(model, (x,), max_steps=0)
    assert lm.cpu_nodes == [] and "MATMUL" not in lm.op_counts


# ----------------------------------------------------------------------------- linear (1-D)
LINEAR_1D = {
    "scale 2": dict(scale_factor=2), "scale 2, align_corners": dict(scale_factor=2, align_corners=True),
    "size 13": dict(size=13), "size 13, align_corners": dict(size=13, align_corners=True),
    "down to 4": dict(size=4), "scale 1.7": dict(scale_factor=1.7), "scale 0.6": dict(scale_factor=0.6),
    "scale 2.5 recomputed": dict(scale_factor=2.5, recompute_scale_factor=True),
}


@pytest.mark.parametrize("name", list(LINEAR_1D))
def test_linear_1d_fp_and_int(name):
    """interpolate(mode="linear") as the bilinear upsampling of an H of one: FP within float32
    rounding of PyTorch, INT within one step of fake-quant (the INT bilinear path's bound;
    found: 1 step at scale 2, 0 elsewhere)."""
    x = randn(1, 3, 7)
    model = Fn(lambda t: F.interpolate(t, mode="linear", **LINEAR_1D[name]))
    lm = check_fp(model, (x,), atol=2e-6, rtol=1e-6)
    assert not lm.cpu_nodes and lm.op_counts.get("RESIZE", 0) == 1
    assert not check_int(model, (x,), max_steps=1).cpu_nodes


# ----------------------------------------------------------------------------- 3-D (5-D inputs)
RESAMPLE_3D = {
    "scale 2": dict(scale_factor=2),
    "size up and down": dict(size=(5, 7, 3)),
    "mixed scales": dict(scale_factor=(1.5, 2.3, 0.7)),
    "mixed scales recomputed": dict(scale_factor=(1.5, 2.3, 0.7), recompute_scale_factor=True),
    "depth kept": dict(scale_factor=(1, 2, 2)),
    "depth only": dict(size=(7, 4, 5)),
    "to one voxel": dict(size=(1, 1, 1)),
    "same size": dict(scale_factor=1.0),
}


def resample_3d(mode, align_corners=None, **kw):
    return Fn(lambda t: F.interpolate(t, mode=mode, align_corners=align_corners, **kw))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("name", list(RESAMPLE_3D))
def test_trilinear_fp_and_int(name, align_corners):
    """interpolate(mode="trilinear") of [N, C, D, H, W] as a bilinear RESIZE along D, then one
    along H and W: FP within float32 rounding of PyTorch (the same weights, applied axis by
    axis; found up to 1.3e-6), INT within one step of fake-quant (found: 1)."""
    x = randn(2, 3, 3, 4, 5)
    model = resample_3d("trilinear", align_corners, **RESAMPLE_3D[name])
    lm = check_fp(model, (x,), atol=2e-6, rtol=1e-6)
    assert not lm.cpu_nodes, lm.cpu_nodes
    assert lm.op_counts.get("RESIZE", 0) <= 2
    assert not check_int(model, (x,), max_steps=1).cpu_nodes


def test_trilinear_from_one_voxel_align_corners():
    """align_corners from an axis of one (every output reads that one voxel)."""
    x = randn(1, 2, 1, 1, 3)
    model = resample_3d("trilinear", True, size=(3, 4, 5))
    assert not check_fp(model, (x,), atol=2e-6, rtol=1e-6).cpu_nodes
    assert not check_int(model, (x,), max_steps=1).cpu_nodes


def test_trilinear_beyond_resize_limit_stays_whole_on_the_cpu():
    """An H * W of 16384 or more exceeds TOSA RESIZE's axis limit for the D pass: the op stays on
    the CPU in one piece, and the model still runs as PyTorch computes it."""
    x = randn(1, 1, 2, 128, 128)
    model = resample_3d("trilinear", False, scale_factor=(2, 1, 1)).eval()
    lm = lowering.lower(model, (x,), profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.upsample_trilinear3d.vec"]
    torch.testing.assert_close(lm.run(x)[0], model(x), atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("name", list(RESAMPLE_3D))
def test_nearest_3d_fp_and_int_exact(name, mode):
    """3-D nearest / nearest-exact as one constant-index gather per axis: PyTorch's values
    exactly in FP, fake-quant's exactly in INT."""
    x = randn(2, 3, 3, 4, 5)
    model = resample_3d(mode, **RESAMPLE_3D[name])
    lm = check_fp(model, (x,), atol=0, rtol=0)
    assert not lm.cpu_nodes, lm.cpu_nodes
    assert not check_int(model, (x,), max_steps=0).cpu_nodes


def test_nearest_3d_source_index_is_pytorchs():
    """nearest_source_index against PyTorch's own 3-D nearest resampling of a ramp along each
    axis (odd sizes and scales; a scale of 1.05 that keeps the size is not the identity)."""
    from lowering.passes.decompositions.resample import nearest_source_index

    for size, out, scale in [(5, 10, 2.1), (7, 3, None), (3, 8, None), (4, 9, 2.3), (6, 4, 0.7),
                             (5, 5, 1.0), (5, 5, 1.05)]:
        for axis in range(3):
            shape = [1, 1, 1, 1, 1]
            shape[2 + axis] = size
            ramp = torch.arange(float(size)).reshape(shape)
            factors = [1.0, 1.0, 1.0]
            factors[axis] = scale
            sizes = [1, 1, 1]
            sizes[axis] = out
            kw = {"scale_factor": tuple(factors)} if scale else {"size": tuple(sizes)}
            for mode, exact in [("nearest", False), ("nearest-exact", True)]:
                torch_index = F.interpolate(ramp, mode=mode, **kw).reshape(-1).long().numpy()
                assert torch_index.size == out
                np.testing.assert_array_equal(nearest_source_index(size, out, scale, exact), torch_index)
