"""Resampling ops in terms of ops with a TOSA visitor: ``F.adaptive_max_pool1d`` as the 2-D
adaptive max pool of a [1, L] image (which :mod:`.spatial` lowers, uneven windows included),
and ``F.interpolate(mode="bicubic")`` as two constant interpolation matrices; the 3-D
``mode="trilinear"`` as two bilinear RESIZEs (D, then H and W) and 3-D ``mode="nearest"`` /
``"nearest-exact"`` as one constant-index gather per axis.

As everywhere in the decompositions, an op is rewritten whole or not at all: a case not
covered here (the pool's indices used, an unsupported rank) leaves it on the CPU in one piece.
"""

from __future__ import annotations

import operator

import numpy as np
import torch

from ...graph_utils import val
from ._common import arg, decomposition, int_list, is_float, tuple_outputs

aten = torch.ops.aten


# ----------------------------------------------------------------------------- adaptive_max_pool1d
@decomposition(aten.adaptive_max_pool1d.default)
def adaptive_max_pool1d(gm, n, b):
    """``adaptive_max_pool1d(x, [L_out])`` of [N, C, L] or [C, L]: ``adaptive_max_pool2d`` of
    ``x`` with an H of one, to [1, L_out] (the same windows along L; lowered even or uneven
    by :func:`.spatial.adaptive_max_pool2d`), the H dropped again. Only the values: when the
    indices are used the op stays on the CPU whole.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.adaptive_max_pool1d(x, 3)
        >>> lowering.lower(M(), (torch.randn(1, 2, 7),), profile="FP").cpu_nodes
        []
    """
    x = n.args[0]
    v = val(x)
    if v is None or v.dim() not in (2, 3) or not is_float(x) or v.shape[-1] == 0:
        return None
    if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in n.users):
        return None  # the indices are read: no lowering gives them
    out = int_list(n.args[1], 1)[0]
    x4 = b(aten.unsqueeze.default, x, -2)
    if v.dim() == 2:
        x4 = b(aten.unsqueeze.default, x4, 0)
    pooled = b(operator.getitem, b(aten.adaptive_max_pool2d.default, x4, [1, out]), 0)
    y = b(aten.squeeze.dims, pooled, [0, 2] if v.dim() == 2 else [2])
    return tuple_outputs(n, [y, None])


# ----------------------------------------------------------------------------- linear


@decomposition(aten.upsample_linear1d.vec, aten.upsample_linear1d.default)
def upsample_linear1d(gm, n, b):
    """``interpolate(x, mode="linear")`` of [N, C, L]: the bilinear upsampling of ``x`` with an
    H of one kept at one (its one source row, weight 1: the same interpolation along L, with
    the same output size, scale and align_corners), the H dropped again.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.interpolate(x, scale_factor=2, mode="linear")
        >>> lowering.lower(M(), (torch.randn(1, 2, 5),), profile="FP").cpu_nodes
        []
    """
    x = n.args[0]
    v = val(x)
    if v is None or v.dim() != 3 or not is_float(x):
        return None
    size = arg(n, 1, "output_size")
    align = bool(arg(n, 2, "align_corners", False))
    if n.target == aten.upsample_linear1d.vec:
        scales = arg(n, 3, "scale_factors")
    else:
        scale = arg(n, 3, "scales")
        scales = None if scale is None else [scale]
    x4 = b(aten.unsqueeze.default, x, 2)
    y = b(aten.upsample_bilinear2d.vec, x4, None if size is None else [1, *int_list(size, 1)], align,
          None if scales is None else [1.0, float(scales[0])])
    return b(aten.squeeze.dims, y, [2])


# ----------------------------------------------------------------------------- bicubic
#: PyTorch's cubic convolution constant (Keys' a; ATen's get_cubic_upsample_coefficients)
_CUBIC_A = -0.75


def _cubic_coefficients(t: np.ndarray) -> list[np.ndarray]:
    """The four weights of the samples at ``floor(s) - 1 .. floor(s) + 2`` for fractions
    ``t = s - floor(s)``, in float32 as ATen computes them for a float32 input."""
    a = np.float32(_CUBIC_A)
    one = np.float32(1)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + one

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + one), near(t), near(one - t), far((one - t) + one)]


def bicubic_matrix(size: int, out: int, align_corners: bool, scale: float | None) -> np.ndarray:
    """The [out, size] matrix ``M`` with ``y = M @ x`` PyTorch's bicubic resampling of one axis.

    ATen's upsample_bicubic2d: the ratio is ``(size - 1) / (out - 1)`` with align_corners
    (0 for one output), else ``1 / scale`` when a scale factor was given, else
    ``size / out``; output ``i`` reads at ``s = ratio * i`` (align_corners) or
    ``ratio * (i + 0.5) - 0.5`` (not clamped at 0 for cubic), weights the four samples at
    ``floor(s) - 1 .. floor(s) + 2`` by :func:`_cubic_coefficients` of ``s - floor(s)``, and
    clamps their indices to ``[0, size - 1]`` (a border sample then takes several weights:
    they are summed into one entry here). All in float32, as ATen computes it.

    Example:
        >>> m = bicubic_matrix(4, 8, False, None)
        >>> m.shape, bool(np.allclose(m.sum(1), 1))
        ((8, 4), True)
        >>> bicubic_matrix(3, 3, True, None).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    f32 = np.float32
    if align_corners:
        ratio = f32(size - 1) / f32(out - 1) if out > 1 else f32(0)
    else:
        ratio = f32(1) / f32(scale) if scale is not None and scale > 0 else f32(size) / f32(out)
    i = np.arange(out, dtype=f32)
    s = ratio * i if align_corners else ratio * (i + f32(0.5)) - f32(0.5)
    base = np.floor(s)
    weights = _cubic_coefficients((s - base).astype(f32))
    m = np.zeros((out, size), np.float64)
    for k, w in enumerate(weights):
        cols = np.clip(base.astype(np.int64) - 1 + k, 0, size - 1)
        np.add.at(m, (np.arange(out), cols), w.astype(np.float64))
    return m.astype(np.float32)


def _bicubic_args(n):
    """``(output size or None, align_corners, (scale_h, scale_w))`` of either overload."""
    if n.target == aten.upsample_bicubic2d.vec:
        size, align = arg(n, 1, "output_size"), bool(arg(n, 2, "align_corners"))
        scales = arg(n, 3, "scale_factors")
        return size, align, (tuple(scales) if scales is not None else (None, None))
    return arg(n, 1, "output_size"), bool(arg(n, 2, "align_corners")), \
        (arg(n, 3, "scales_h"), arg(n, 4, "scales_w"))


@decomposition(aten.upsample_bicubic2d.vec, aten.upsample_bicubic2d.default)
def upsample_bicubic2d(gm, n, b):
    """``F.interpolate(x, mode="bicubic")`` of [N, C, H, W] (size or scale_factor, either
    align_corners, up or down): bicubic resampling is linear in ``x`` and separable, so it is
    ``A @ x @ B^T`` per channel with the constant matrices of :func:`bicubic_matrix` (the
    H and W axes; PyTorch's coefficients and border clamping folded in): two MATMULs
    broadcast over N and C (an axis whose matrix is the identity is skipped).

    INT: the same two products, quantized as any matmul by a constant is (the matrices as
    int8 operands, the intermediate ``A @ x`` requantized): TOSA matches that fake-quant graph
    within one output step, and is within 1.25 output steps (mean 0.35) of the float
    bicubic of the dequantized int8 input (measured in tests/lowering/test_lowering_resample.py).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.interpolate(x, scale_factor=2, mode="bicubic")
        >>> lowering.lower(M(), (torch.randn(1, 2, 4, 4),), profile="FP").cpu_nodes
        []
    """
    x = n.args[0]
    v, out = val(x), val(n)
    if v is None or out is None or v.dim() != 4 or out.dim() != 4 or v.dtype != torch.float32 or \
            v.numel() == 0 or out.numel() == 0:
        return None
    _, align, scales = _bicubic_args(n)
    (h, w), (oh, ow) = v.shape[-2:], out.shape[-2:]
    mh = bicubic_matrix(h, oh, align, scales[0])
    mw = bicubic_matrix(w, ow, align, scales[1])
    y = x
    if not (oh == h and np.array_equal(mh, np.eye(h, dtype=np.float32))):
        y = b(aten.matmul.default, b.const(gm, torch.from_numpy(mh), "bicubic_h"), y)
    if not (ow == w and np.array_equal(mw, np.eye(w, dtype=np.float32))):
        y = b(aten.matmul.default, y, b.const(gm, torch.from_numpy(np.ascontiguousarray(mw.T)), "bicubic_w"))
    return y if y is not x else b(aten.clone.default, x)


# ----------------------------------------------------------------------------- 3-D (5-D inputs)
#: TOSA RESIZE takes no input or output axis of 16384 or more (ERROR_IF in the 1.0 spec)
_RESIZE_LIMIT = 16384


def _scales_3d(n, vec, first: int) -> list:
    """``[scale_d, scale_h, scale_w]`` (None where not given) of either overload: ``vec`` takes
    them as one list at argument ``first``, the default overload one by one from there."""
    if vec:
        scales = arg(n, first, "scale_factors")
        return list(scales) if scales is not None else [None] * 3
    return [arg(n, first + i, name) for i, name in enumerate(("scales_d", "scales_h", "scales_w"))]


def _identity_axis(size: int, out: int, scale, align: bool) -> bool:
    """Whether linear resampling of an axis is the identity: the same size, and no scale
    factor other than 1 moving PyTorch's sample positions (align_corners ignores the scale)."""
    return size == out and (align or scale is None or scale == 1.0)


@decomposition(aten.upsample_trilinear3d.vec, aten.upsample_trilinear3d.default)
def upsample_trilinear3d(gm, n, b):
    """``F.interpolate(x, mode="trilinear")`` of [N, C, D, H, W] (size or scale_factor, either
    align_corners): trilinear resampling is separable, so it is the bilinear resampling of
    [N, C, D, H * W] along D alone (the H * W axis kept, at scale 1: its one source column,
    weight 1), viewed as [N, C * D_out, H, W] and resampled bilinearly along H and W, viewed
    back: two RESIZEs (an axis pair that is the identity is skipped), with PyTorch's output
    sizes, scales and align_corners (:func:`.spatial.bilinear_by_scale` handles scale factors
    whose ratio is not in/out).

    FP: the same weights applied axis by axis where PyTorch's kernel combines the eight taps in
    one expression: within a few float32 ulps. INT: each RESIZE's integer weights are exact,
    the D pass requantized before the H, W pass as the fake-quant model of this graph does.
    Axes of 16384 or more (H * W included) exceed RESIZE's limit: the op stays on the CPU.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.interpolate(x, scale_factor=2, mode="trilinear")
        >>> lowering.lower(M(), (torch.randn(1, 2, 2, 3, 3),), profile="FP").cpu_nodes
        []
    """
    x = n.args[0]
    v, vo = val(x), val(n)
    if v is None or vo is None or v.dim() != 5 or v.dtype != torch.float32 or v.numel() == 0 or \
            vo.numel() == 0:
        return None
    align = bool(arg(n, 2, "align_corners", False))
    sd, sh, sw = _scales_3d(n, n.target == aten.upsample_trilinear3d.vec, 3)
    (batch, channels, d, h, w), (od, oh, ow) = v.shape, vo.shape[2:]
    if max(d, od, h * w, oh, ow) >= _RESIZE_LIMIT:
        return None
    by_scale = all(s is not None for s in (sd, sh, sw))
    if not by_scale and any(s is not None for s in (sd, sh, sw)):
        return None  # some scales only (the default overload): no bilinear2d.vec call says that
    y = x
    if not _identity_axis(d, od, sd, align):
        flat = b(aten.reshape.default, y, [batch, channels, d, h * w])
        # .vec takes a size or scales, not both: the scales give PyTorch's size back
        y = b(aten.upsample_bilinear2d.vec, flat, None if by_scale else [od, h * w], align,
              [float(sd), 1.0] if by_scale else None)
    if not (_identity_axis(h, oh, sh, align) and _identity_axis(w, ow, sw, align)):
        planes = b(aten.reshape.default, y, [batch, channels * od, h, w])
        y = b(aten.upsample_bilinear2d.vec, planes, None if by_scale else [oh, ow], align,
              [float(sh), float(sw)] if by_scale else None)
    if y is x:
        return b(aten.clone.default, x)
    return b(aten.reshape.default, y, list(vo.shape))


def nearest_source_index(size: int, out: int, scale, exact: bool) -> np.ndarray:
    """The source index of each output position of a nearest (``exact``: nearest-exact)
    resampling of one axis, as ATen's 3-D kernels compute it: the ratio is
    ``float32(1 / scale)`` when a positive scale factor was given, else ``size / out`` in
    float32; nearest takes ``floor(o * ratio)``, nearest-exact ``floor((o + 0.5) * ratio)``,
    both clamped to ``size - 1`` (no identity shortcut: a scale of 1.05 that keeps 5 rows
    reads rows 0, 0, 1, 2, 3, as PyTorch's upsample_nearest3d does).

    Example:
        >>> nearest_source_index(3, 5, None, False).tolist(), nearest_source_index(3, 5, None, True).tolist()
        ([0, 0, 1, 1, 2], [0, 0, 1, 2, 2])
    """
    o = np.arange(out)
    f32 = np.float32
    ratio = f32(1.0 / scale) if scale is not None and scale > 0 else f32(size) / f32(out)
    src = np.floor((o.astype(f32) + f32(0.5)) * ratio) if exact else np.floor(o.astype(f32) * ratio)
    return np.minimum(src.astype(np.int64), size - 1)


@decomposition(aten.upsample_nearest3d.vec, aten.upsample_nearest3d.default,
               aten._upsample_nearest_exact3d.vec, aten._upsample_nearest_exact3d.default)
def upsample_nearest3d(gm, n, b):
    """``F.interpolate(x, mode="nearest" / "nearest-exact")`` of [N, C, D, H, W]: each output
    row along D, H and W is a copy of the source row :func:`nearest_source_index` names, so the
    op is one constant-index ``index_select`` (a GATHER) per axis that is not the identity.
    Exact in both profiles (INT: the gathers share the input's quantization).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest")
        >>> lowering.lower(M(), (torch.randn(1, 2, 2, 3, 3),), profile="FP").cpu_nodes
        []
    """
    x = n.args[0]
    v, vo = val(x), val(n)
    if v is None or vo is None or v.dim() != 5 or v.numel() == 0 or vo.numel() == 0:
        return None
    exact = n.target in (aten._upsample_nearest_exact3d.vec, aten._upsample_nearest_exact3d.default)
    vec = n.target in (aten.upsample_nearest3d.vec, aten._upsample_nearest_exact3d.vec)
    scales = _scales_3d(n, vec, 2)
    y = x
    for axis in range(3):
        size, out = v.shape[2 + axis], vo.shape[2 + axis]
        source = nearest_source_index(size, out, scales[axis], exact)
        if out == size and np.array_equal(source, np.arange(size)):
            continue
        y = b(aten.index_select.default, y, 2 + axis, b.const(gm, torch.from_numpy(source), "nearest_index"))
    return y if y is not x else b(aten.clone.default, x)
