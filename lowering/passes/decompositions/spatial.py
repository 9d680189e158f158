"""Spatial ops without a TOSA operator of their own, rewritten into ones that have one:
1-D and batchless pools as 2-D pools, adaptive_avg_pool3d as avg_pool3d or 2-D pools,
pixel_shuffle / pixel_unshuffle and channel_shuffle as
view + permute + reshape, reflect / replicate / circular padding as slices (+ flips / expands) and a cat,
nearest upsampling whose PyTorch index map a RESIZE cannot reproduce as index_select
(GATHER), bilinear upsampling by scale factors as a RESIZE of a padded input, and grid_sample
as index arithmetic and GATHERs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from ...graph_utils import get_constant, val
from ._common import arg, decomposition, int_list, tuple_outputs
from .bags_pools import uneven_adaptive_max_pool2d

aten = torch.ops.aten


def _rank(x) -> int | None:
    v = val(x)
    return v.dim() if v is not None else None


def _around_4d(b, x, batchless: bool, add_h: bool):
    """``x`` as NCHW: a leading batch of one when ``batchless``, an H of one when ``add_h``."""
    if batchless:
        x = b(aten.unsqueeze.default, x, 0)
    if add_h:
        x = b(aten.unsqueeze.default, x, 2)
    return x


def _back_from_4d(b, y, batchless: bool, add_h: bool):
    """Undo :func:`_around_4d` on the pooled ``y``."""
    dims = ([0] if batchless else []) + ([2] if add_h else [])
    return b(aten.squeeze.dims, y, dims) if dims else y


@decomposition(aten.max_pool1d.default)
def max_pool1d(gm, n, b):
    """max_pool1d over L = max_pool2d over a [1, L] window."""
    window = _pool1d_window(n)
    if window is None:
        return None
    x, rank, k, s, p = window
    d = int_list(arg(n, 4, "dilation", 1), 1)[0]
    ceil = bool(arg(n, 5, "ceil_mode", False))
    x4 = _around_4d(b, x, rank == 2, True)
    y = b(aten.max_pool2d.default, x4, [1, k], [1, s], [0, p], [1, d], ceil)
    return _back_from_4d(b, y, rank == 2, True)


def _pool1d_window(n):
    """``(x, rank, kernel, stride, padding)`` of a 1-D pool of a 2-D or 3-D ``x``, or None."""
    x = n.args[0]
    rank = _rank(x)
    if rank not in (2, 3):
        return None
    k = int_list(arg(n, 1, "kernel_size"), 1)[0]
    s = int_list(arg(n, 2, "stride", None) or k, 1)[0]
    p = int_list(arg(n, 3, "padding", 0), 1)[0]
    return x, rank, k, s, p


@decomposition(aten.avg_pool1d.default)
def avg_pool1d(gm, n, b):
    """avg_pool1d over L = avg_pool2d over a [1, L] window."""
    window = _pool1d_window(n)
    if window is None:
        return None
    x, rank, k, s, p = window
    ceil = bool(arg(n, 4, "ceil_mode", False))
    include = bool(arg(n, 5, "count_include_pad", True))
    x4 = _around_4d(b, x, rank == 2, True)
    y = b(aten.avg_pool2d.default, x4, [1, k], [1, s], [0, p], ceil, include)
    return _back_from_4d(b, y, rank == 2, True)


@decomposition(aten.adaptive_avg_pool1d.default)
def adaptive_avg_pool1d(gm, n, b):
    """adaptive_avg_pool1d = adaptive_avg_pool2d to [1, L_out]."""
    x = n.args[0]
    rank = _rank(x)
    if rank not in (2, 3):
        return None
    out = int_list(n.args[1], 1)[0]
    y = b(aten.adaptive_avg_pool2d.default, _around_4d(b, x, rank == 2, True), [1, out])
    return _back_from_4d(b, y, rank == 2, True)


@decomposition(aten.adaptive_avg_pool3d.default, aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool3d(gm, n, b):
    """adaptive_avg_pool3d of [N, C, D, H, W] (or [C, D, H, W]) to [D_out, h, w]:

    - D_out = 1 (a video net's global pool): the mean over D, then the 2-D pool of [N, C, H, W];
    - every output size divides its input size (the windows are uniform): avg_pool3d with
      kernel = stride = in / out (:func:`.bags_pools.avg_pool3d`: two avg_pool2d);
    - otherwise (uneven windows along some axis) the box mean is the mean over D of the means
      over H, W, each axis's windows depending on that axis alone: adaptive_avg_pool2d of
      [N, C * D, H, W] to [h, w] (uneven windows: its emitter's per-window pools), then, when
      D_out is not D, the D axis moved last, [N, C * h * w, 1, D] pooled by adaptive_avg_pool2d
      to [1, D_out] (one pool per output depth) and moved back.

    In INT each pool shares its input's quantization; the two-step forms round once per
    step, as the fake-quant model of the rewritten graph does.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> from ._common import PASS
        >>> REWRITES[PASS][aten.adaptive_avg_pool3d.default].fn.__name__
        'adaptive_avg_pool3d'
    """
    v = val(n.args[0])
    if v is None or v.dim() not in (4, 5) or not v.is_floating_point() or v.numel() == 0:
        return None
    x = n.args[0]
    batchless = v.dim() == 4
    if batchless:
        x = b(aten.unsqueeze.default, x, 0)
    nb, c, d, h, w = (1, *v.shape) if batchless else v.shape
    outs = (int_list(n.args[1], 3) + [None] * 3)[:3]
    d_out, h_out, w_out = (o or size for o, size in zip(outs, (d, h, w), strict=True))  # None keeps the size
    if d_out == 1:
        x = b(aten.reshape.default, b(aten.mean.dim, x, [2], True), [nb, c, h, w])
        y = b(aten.adaptive_avg_pool2d.default, x, [h_out, w_out])
    elif d_out != d and not (d % d_out or h % h_out or w % w_out):
        k = [d // d_out, h // h_out, w // w_out]
        y = b(aten.avg_pool3d.default, x, k, k)
    else:
        y = b(aten.reshape.default, x, [nb, c * d, h, w])
        if (h_out, w_out) != (h, w):
            y = b(aten.adaptive_avg_pool2d.default, y, [h_out, w_out])
        if d_out != d:
            hw = h_out * w_out
            y = b(aten.permute.default, b(aten.reshape.default, y, [nb, c, d, hw]), [0, 1, 3, 2])
            y = b(aten.adaptive_avg_pool2d.default, b(aten.reshape.default, y, [nb, c * hw, 1, d]),
                  [1, d_out])
            y = b(aten.permute.default, b(aten.reshape.default, y, [nb, c, hw, d_out]), [0, 1, 3, 2])
    y = b(aten.reshape.default, y, [nb, c, d_out, h_out, w_out])
    return b(aten.squeeze.dims, y, [0]) if batchless else y


@decomposition(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(gm, n, b):
    """adaptive_max_pool2d's values when the output size divides the input's (its windows
    are then even: max_pool2d with kernel = stride = in / out); uneven windows and 3-D
    inputs: :func:`.bags_pools.uneven_adaptive_max_pool2d`; the indices stay on the CPU."""
    v = val(n.args[0])
    if v is None or v.dim() != 4:
        return uneven_adaptive_max_pool2d(gm, n, b)
    h, w = v.shape[-2:]
    oh, ow = [o or size for o, size in zip(int_list(n.args[1], 2), (h, w), strict=True)]
    if h % oh or w % ow:
        return uneven_adaptive_max_pool2d(gm, n, b)
    k = [h // oh, w // ow]
    return tuple_outputs(n, [b(aten.max_pool2d.default, n.args[0], k, k), None])


@decomposition(aten.max_pool2d.default, aten.avg_pool2d.default,
               aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)
def batchless_pool2d(gm, n, b):
    """A 2-D pool of a [C, H, W] tensor is the pool of [1, C, H, W]."""
    if _rank(n.args[0]) != 3:
        return None
    y = b(n.target, _around_4d(b, n.args[0], True, False), *n.args[1:], **n.kwargs)
    return _back_from_4d(b, y, True, False)


def _shuffle(b, x, shape, view_in, perm, out_shape):
    """view ``x`` as ``view_in``, permute by ``perm``, view as ``out_shape``."""
    y = b(aten.reshape.default, x, view_in)
    y = b(aten.permute.default, y, perm)
    return b(aten.reshape.default, y, out_shape)


@decomposition(aten.pixel_shuffle.default)
def pixel_shuffle(gm, n, b):
    """[*, C*r*r, H, W] -> [B, C, r, r, H, W] -> [B, C, H, r, W, r] -> [*, C, H*r, W*r]."""
    dims = _shuffle_dims(n)
    if dims is None:
        return None
    r, batch, bsz, c, h, w = dims
    c //= r * r
    return _shuffle(b, n.args[0], None, [bsz, c, r, r, h, w], [0, 1, 4, 2, 5, 3],
                    [*batch, c, h * r, w * r])


def _shuffle_dims(n):
    """``(r, batch dims, batch size, C, H, W)`` of a pixel (un)shuffle's input, or None."""
    v = val(n.args[0])
    if v is None or v.dim() < 3:
        return None
    *batch, c, h, w = v.shape
    return n.args[1], batch, int(np.prod(batch)) if batch else 1, c, h, w


@decomposition(aten.pixel_unshuffle.default)
def pixel_unshuffle(gm, n, b):
    """[*, C, H*r, W*r] -> [B, C, H, r, W, r] -> [B, C, r, r, H, W] -> [*, C*r*r, H, W]."""
    dims = _shuffle_dims(n)
    if dims is None:
        return None
    r, batch, bsz, c, h, w = dims
    h, w = h // r, w // r
    return _shuffle(b, n.args[0], None, [bsz, c, h, r, w, r], [0, 1, 3, 5, 2, 4],
                    [*batch, c * r * r, h, w])


@decomposition(aten.channel_shuffle.default, aten.native_channel_shuffle.default)
def channel_shuffle(gm, n, b):
    """[N, g*k, *rest] -> [N, g, k, *rest] -> [N, k, g, *rest] -> [N, g*k, *rest] (ShuffleNet's
    channel shuffle: channel ``i * k + j`` moves to ``j * g + i``)."""
    v = val(n.args[0])
    groups = int(n.args[1])
    if v is None or v.dim() < 3 or groups <= 0 or v.shape[1] % groups:
        return None
    batch, channels, *rest = v.shape
    perm = [0, 2, 1, *range(3, v.dim() + 1)]
    return _shuffle(b, n.args[0], None, [batch, groups, channels // groups, *rest], perm, list(v.shape))


_PAD_MODE = {
    aten.reflection_pad1d.default: "reflect", aten.reflection_pad2d.default: "reflect",
    aten.reflection_pad3d.default: "reflect", aten.replication_pad1d.default: "replicate",
    aten.replication_pad2d.default: "replicate", aten.replication_pad3d.default: "replicate",
    aten._pad_circular.default: "circular",
}


def _pad_dim(b, x, shape: list, dim: int, lo: int, hi: int, mode: str):
    """Pad (or, negative, crop) ``x`` along ``dim`` by ``lo`` / ``hi`` in ``mode``; updates
    ``shape``."""
    size = shape[dim]
    if lo < 0 or hi < 0:
        x = b(aten.slice.Tensor, x, dim, max(-lo, 0), size - max(-hi, 0))
        size -= max(-lo, 0) + max(-hi, 0)
        lo, hi = max(lo, 0), max(hi, 0)
    parts = [x]
    if mode == "reflect":
        if lo:
            parts.insert(0, b(aten.flip.default, b(aten.slice.Tensor, x, dim, 1, lo + 1), [dim]))
        if hi:
            parts.append(b(aten.flip.default,
                           b(aten.slice.Tensor, x, dim, size - 1 - hi, size - 1), [dim]))
    elif mode == "replicate":
        for n_, at, first in ((lo, 0, True), (hi, size - 1, False)):
            if n_:
                edge = b(aten.slice.Tensor, x, dim, at, at + 1)
                ext = list(shape)
                ext[dim] = n_
                edge = b(aten.expand.default, edge, ext) if n_ > 1 else edge
                parts.insert(0, edge) if first else parts.append(edge)
    else:  # circular
        if lo:
            parts.insert(0, b(aten.slice.Tensor, x, dim, size - lo, size))
        if hi:
            parts.append(b(aten.slice.Tensor, x, dim, 0, hi))
    shape[dim] = size + lo + hi
    return b(aten.cat.default, parts, dim) if len(parts) > 1 else x


@decomposition(aten.pad.default, *_PAD_MODE)
def non_constant_pad(gm, n, b):
    """Reflect / replicate / circular padding, one dim at a time (the corners then come out
    as PyTorch's): slices of the edge rows, reversed (reflect), repeated (replicate) or taken
    from the other end (circular), concatenated around the tensor."""
    mode = _PAD_MODE.get(n.target) or arg(n, 2, "mode", "constant")
    v = val(n.args[0])
    if mode not in ("reflect", "replicate", "circular") or v is None:
        return None
    pads = list(n.args[1])
    shape = list(v.shape)
    x = n.args[0]
    for i in range(len(pads) // 2):
        dim = len(shape) - 1 - i
        x = _pad_dim(b, x, shape, dim, pads[2 * i], pads[2 * i + 1], mode)
    return x


def _nearest_map(in_size: int, out_size: int, scale, exact: bool) -> np.ndarray:
    """PyTorch's source index of each output row of a nearest(-exact) upsampling."""
    s = np.float32(1.0 / scale) if scale else np.float32(in_size / out_size)
    o = np.arange(out_size, dtype=np.float32)
    src = np.floor((o + np.float32(0.5)) * s) if exact else np.floor(o * s)
    if not exact and out_size == in_size:
        src = o
    return np.minimum(src.astype(np.int64), in_size - 1)


def _resize_map(in_size: int, out_size: int) -> np.ndarray:
    """The index map the RESIZE lowering of nearest upsampling computes: floor(o * in/out)."""
    return np.arange(out_size) * in_size // out_size


@decomposition(aten.upsample_nearest2d.vec, aten._upsample_nearest_exact2d.vec)
def nearest_by_index(gm, n, b):
    """Nearest upsampling whose rows/columns PyTorch takes from other source indices than
    floor(o * in/out) (scale factors given that are not in/out, or nearest-exact) becomes an
    index_select per axis with PyTorch's own index map."""
    v, vo = val(n.args[0]), val(n)
    if v is None or vo is None or v.dim() != 4:
        return None
    exact = n.target == aten._upsample_nearest_exact2d.vec
    scales = arg(n, 2, "scale_factors") or [None, None]
    y = n.args[0]
    maps = [_nearest_map(v.shape[2 + i], vo.shape[2 + i], scales[i], exact) for i in range(2)]
    if not exact and all(np.array_equal(m, _resize_map(v.shape[2 + i], vo.shape[2 + i]))
                         for i, m in enumerate(maps)):
        return None
    for i, m in enumerate(maps):
        if np.array_equal(m, np.arange(v.shape[2 + i])):
            continue
        idx = b.const(gm, torch.from_numpy(m.astype(np.int64)), "nearest_index")
        y = b(aten.index_select.default, y, 2 + i, idx)
    return y


def _ratio_sizes(in_size: int, out_size: int, scale) -> tuple[int, int] | None:
    """Sizes (in', out') >= (in_size, out_size) with in'/out' PyTorch's coordinate scale
    float32(1 / scale), or None when in/out already is (or no small fraction is)."""
    r = float(np.float32(1.0 / scale))
    if abs(in_size / out_size - r) <= 1e-6 * r:
        return None
    f = Fraction(r).limit_denominator(512)
    if abs(f.numerator / f.denominator - r) > 1e-6 * r:
        return None
    k = -(-in_size // f.numerator)
    k = max(k, -(-out_size // f.denominator))
    return k * f.numerator, k * f.denominator


def _align_corners_from_one(b, n, v, vo):
    """align_corners upsampling of an axis of size one (a scale of x/0 for a RESIZE): the
    axis expanded to its output size first (every output row is that one row anyway)."""
    grow = [i for i in range(2) if v.shape[2 + i] == 1 and vo.shape[2 + i] > 1]
    if not grow:
        return None
    shape = list(v.shape)
    for i in grow:
        shape[2 + i] = vo.shape[2 + i]
    x = b(aten.expand.default, n.args[0], shape)
    return b(aten.upsample_bilinear2d.vec, x, list(vo.shape[2:]), True, None)


@decomposition(aten.upsample_bilinear2d.vec)
def bilinear_by_scale(gm, n, b):
    """Bilinear upsampling by scale factors s (align_corners=False) samples row
    (o + 0.5) / s - 0.5, not (o + 0.5) * in/out - 0.5: the input, replicate-padded at the end
    (PyTorch clamps at the last row anyway) to an in' with in'/out' = 1/s, resized to out',
    and the first ``out`` rows kept."""
    v, vo = val(n.args[0]), val(n)
    scales = arg(n, 3, "scale_factors")
    if v is None or vo is None or v.dim() != 4:
        return None
    if arg(n, 2, "align_corners"):
        return _align_corners_from_one(b, n, v, vo)
    if not scales:
        return None
    sizes = [_ratio_sizes(v.shape[2 + i], vo.shape[2 + i], scales[i]) for i in range(2)]
    if sizes == [None, None]:
        return None
    shape = list(v.shape)
    x = n.args[0]
    big = []
    for i, sz in enumerate(sizes):
        if sz is None:
            big.append(vo.shape[2 + i])
            continue
        x = _pad_dim(b, x, shape, 2 + i, 0, sz[0] - v.shape[2 + i], "replicate")
        big.append(sz[1])
    y = b(aten.upsample_bilinear2d.vec, x, big, False, None)
    for i in range(2):
        if big[i] != vo.shape[2 + i]:
            y = b(aten.slice.Tensor, y, 2 + i, 0, vo.shape[2 + i])
    return y


def _grid_coordinate(b, g, size: int, align_corners: bool, border: bool):
    """A grid coordinate in [-1, 1] as a pixel coordinate (PyTorch's ``grid_sampler_unnormalize``),
    clamped to the image for ``padding_mode="border"``."""
    if align_corners:  # -1 -> 0, 1 -> size - 1
        c = b(aten.mul.Scalar, b(aten.add.Scalar, g, 1.0), (size - 1) / 2)
    else:  # -1 -> -0.5, 1 -> size - 0.5
        c = b(aten.sub.Scalar, b(aten.mul.Scalar, b(aten.add.Scalar, g, 1.0), size / 2), 0.5)
    return b(aten.clamp.default, c, 0.0, float(size - 1)) if border else c


def _grid_tap(b, flat, xs, ys, w, h: int, width: int, shape):
    """Values of ``flat`` [N, C, H*W] at integer-valued float coordinates ``xs``/``ys``
    [N, Ho, Wo] (GATHER), zero where the coordinate is outside the image, as [N, C, Ho, Wo];
    and ``w`` zeroed there too (the zeros padding of PyTorch's grid_sample)."""
    n, c, ho, wo = shape
    inside = b(aten.logical_and.default,
               b(aten.logical_and.default, b(aten.ge.Scalar, xs, 0.0),
                 b(aten.le.Scalar, xs, float(width - 1))),
               b(aten.logical_and.default, b(aten.ge.Scalar, ys, 0.0),
                 b(aten.le.Scalar, ys, float(h - 1))))
    xi = b(aten.clamp.default, xs, 0.0, float(width - 1))
    yi = b(aten.clamp.default, ys, 0.0, float(h - 1))
    index = b(aten._to_copy.default, b(aten.add.Tensor, b(aten.mul.Scalar, yi, float(width)), xi),
              dtype=torch.int32)
    index = b(aten.expand.default, b(aten.reshape.default, index, [n, 1, ho * wo]),
              [n, c, ho * wo])
    taps = b(aten.reshape.default, b(aten.gather.default, flat, 2, index), [n, c, ho, wo])
    weight = b(aten.where.self, inside, w, b(aten.mul.Scalar, w, 0.0))
    return b(aten.mul.Tensor, taps, b(aten.unsqueeze.default, weight, 1))


@decomposition(aten.grid_sampler_2d.default, aten.grid_sampler.default, profiles={"FP"})
def grid_sampler_2d(gm, n, b):
    """grid_sample (4-D, bilinear or nearest, zeros or border padding) as index arithmetic and
    GATHERs: each output pixel reads its 1 (nearest) or 4 (bilinear) input taps from the input
    flattened to [N, C, H*W], weighted by PyTorch's bilinear weights; a tap outside the image
    reads zero (``padding_mode="zeros"``) or the coordinate is clamped first ("border").
    FP only: the coordinates are indices, which int8 cannot hold. Reflection padding and
    bicubic interpolation stay on the CPU."""
    x, grid = n.args[0], n.args[1]
    mode, padding, align = (arg(n, 2, "interpolation_mode", 0), arg(n, 3, "padding_mode", 0),
                            bool(arg(n, 4, "align_corners", False)))
    vx, vg = val(x), val(grid)
    if vx is None or vg is None or vx.dim() != 4 or mode not in (0, 1) or padding not in (0, 1) \
            or vx.dtype != torch.float32 or vg.dtype != torch.float32:
        return None
    bn, c, h, width = vx.shape
    ho, wo = vg.shape[1], vg.shape[2]
    shape = (bn, c, ho, wo)
    flat = b(aten.reshape.default, x, [bn, c, h * width])
    ix = _grid_coordinate(b, b(aten.select.int, grid, 3, 0), width, align, padding == 1)
    iy = _grid_coordinate(b, b(aten.select.int, grid, 3, 1), h, align, padding == 1)
    one = b(aten.add.Scalar, b(aten.mul.Scalar, ix, 0.0), 1.0)
    if mode == 1:  # nearest: round half to even, as PyTorch's nearbyint
        return _grid_tap(b, flat, b(aten.round.default, ix), b(aten.round.default, iy), one,
                         h, width, shape)
    x0, y0 = b(aten.floor.default, ix), b(aten.floor.default, iy)
    x1, y1 = b(aten.add.Scalar, x0, 1.0), b(aten.add.Scalar, y0, 1.0)
    wx1, wy1 = b(aten.sub.Tensor, ix, x0), b(aten.sub.Tensor, iy, y0)
    wx0, wy0 = b(aten.sub.Tensor, one, wx1), b(aten.sub.Tensor, one, wy1)
    out = None
    for xs, ys, wx, wy in ((x0, y0, wx0, wy0), (x1, y0, wx1, wy0), (x0, y1, wx0, wy1),
                           (x1, y1, wx1, wy1)):
        tap = _grid_tap(b, flat, xs, ys, b(aten.mul.Tensor, wx, wy), h, width, shape)
        out = tap if out is None else b(aten.add.Tensor, out, tap)
    return out


@decomposition(aten.conv_transpose1d.default)
def conv_transpose1d(gm, n, b):
    """conv_transpose1d over L = conv_transpose2d over an H of one: the input and the weight
    ``[Cin, Cout/groups, k]`` gain that H (a constant weight is reshaped here, once), stride,
    padding, output padding and dilation act along W only."""
    x, w = n.args[0], n.args[1]
    bias = arg(n, 2, "bias")
    rank = _rank(x)
    weight = get_constant(gm, w)
    if rank not in (2, 3) or _rank(w) != 3:
        return None
    stride, padding, output_padding, dilation = (
        int_list(arg(n, i, name, default), 1)[0]
        for i, name, default in ((3, "stride", 1), (4, "padding", 0), (5, "output_padding", 0), (7, "dilation", 1)))
    groups = arg(n, 6, "groups", 1)
    w4 = b.const(gm, weight.unsqueeze(2), "weight_2d") if weight is not None else b(aten.unsqueeze.default, w, 2)
    x4 = _around_4d(b, x, rank == 2, True)
    y = b(aten.conv_transpose2d.input, x4, w4, bias, [1, stride], [0, padding], [0, output_padding], groups,
          [1, dilation])
    return _back_from_4d(b, y, rank == 2, True)
