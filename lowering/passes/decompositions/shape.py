"""Data movement: split / chunk / unbind into slices, a unit-step slice_scatter into slices + cat, copy,
tile as repeat, and roll (max_pool2d_with_indices: :mod:`.bags_pools`)."""

from __future__ import annotations

import math
import operator

import torch

from ...graph_utils import Builder, val
from ..rewrites import HANDLED
from ._common import arg, decomposition, tuple_outputs

aten = torch.ops.aten


def _split_sizes(n, size):
    if n.target in (aten.split.Tensor, aten.unsafe_split.Tensor):
        step = n.args[1]
    elif n.target == aten.chunk.default:
        step = math.ceil(size / n.args[1])
    elif n.target == aten.unbind.int:
        step = 1
    else:
        return list(n.args[1])
    return [min(step, size - i) for i in range(0, size, step)]


@decomposition(aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default,
               aten.unbind.int, aten.unsafe_split.Tensor, aten.unsafe_split_with_sizes.default)
def split(gm, n, b):
    """Each used piece becomes a slice (unbind: a slice with the dim squeezed away; the
    "unsafe" splits of the recurrent cells' decompositions differ only for autograd)."""
    x = n.args[0]
    rank = val(x).dim()
    dim_index = 1 if n.target == aten.unbind.int else 2
    dim = arg(n, dim_index, "dim", 0) % rank
    sizes = _split_sizes(n, val(x).shape[dim])
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    if any(u.target is not operator.getitem for u in n.users):
        return None
    for user in list(n.users):
        i = user.args[1]
        at_user = Builder(gm.graph, user, b.profile)
        piece = at_user(aten.slice.Tensor, x, dim, starts[i], starts[i] + sizes[i])
        if n.target == aten.unbind.int:
            piece = at_user(aten.squeeze.dims, piece, [dim])
        user.replace_all_uses_with(piece)
    return HANDLED


def unit_slice_scatter(gm, n, b):
    """``x`` with ``x[start:end]`` along ``dim`` replaced by ``src``: the kept parts of ``x``
    around ``src``, concatenated; ``None`` for a strided scatter (the caller,
    :func:`lowering.passes.decompositions.indexing.slice_scatter`, handles those)."""
    x, src = n.args[0], n.args[1]
    shape = val(x).shape
    dim = arg(n, 2, "dim", 0) % len(shape)
    size = shape[dim]
    start, end, step = arg(n, 3, "start"), arg(n, 4, "end"), arg(n, 5, "step", 1)
    start = 0 if start is None else (start + size if start < 0 else min(start, size))
    end = size if end is None else (end + size if end < 0 else min(end, size))
    if step != 1:
        return None
    parts = []
    if start > 0:
        parts.append(b(aten.slice.Tensor, x, dim, 0, start))
    parts.append(src)
    if end < size:
        parts.append(b(aten.slice.Tensor, x, dim, end, size))
    return b(aten.cat.default, parts, dim) if len(parts) > 1 else src


@decomposition(aten.copy.default)
def copy(gm, n, b):
    """``copy(x, src)``: ``src`` broadcast to the shape of ``x``, in the dtype of ``x``."""
    x, src = n.args[0], n.args[1]
    vx, vs = val(x), val(src)
    if vx is None or vs is None:
        return None
    out = src
    if vs.dtype != vx.dtype:
        out = b(aten._to_copy.default, out, dtype=vx.dtype)
    if tuple(vs.shape) != tuple(vx.shape):
        out = b(aten.expand.default, out, list(vx.shape))
    return out


@decomposition(aten.expand_as.default)
def expand_as(gm, n, b):
    """``x.expand_as(y)`` -> ``x.expand(y.shape)`` (shapes are static here)."""
    other = val(n.args[1])
    if other is None:
        return None
    return b(aten.expand.default, n.args[0], list(other.shape))


@decomposition(aten.tile.default)
def tile(gm, n, b):
    """``x.tile(reps)`` -> ``x.repeat(reps)`` with ``reps`` padded by leading ones to ``x``'s
    rank (PyTorch's own decomposition): fewer reps than dims repeat the trailing dims, more
    reps than dims add leading dims, which repeat does itself (one TILE, the input's
    quantization shared in INT).

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> from ._common import PASS
        >>> REWRITES[PASS][aten.tile.default].fn.__name__
        'tile'
    """
    v = val(n.args[0])
    if v is None:
        return None
    reps = [int(r) for r in n.args[1]]
    reps = [1] * (v.dim() - len(reps)) + reps
    if not reps:  # a 0-d tensor tiled by (): nothing to repeat
        return None
    return b(aten.repeat.default, n.args[0], reps)


@decomposition(aten.roll.default)
def roll(gm, n, b):
    """``torch.roll``: per rolled dim, its last ``shift`` elements then the others,
    concatenated; with no dims, the same on the flattened tensor (swin's shifted windows)."""
    x = n.args[0]
    shape = list(val(x).shape)
    shifts, dims = list(arg(n, 1, "shifts")), list(arg(n, 2, "dims", []) or [])
    out = x
    if not dims:  # torch rolls the flattened tensor, then restores the shape
        out, dims, sizes = b(aten.reshape.default, x, [-1]), [0], [math.prod(shape)]
    else:
        sizes = shape
    for shift, dim in zip(shifts, dims, strict=True):
        size = sizes[dim]
        s = shift % size if size else 0
        if s:
            out = b(aten.cat.default, [b(aten.slice.Tensor, out, dim, size - s, size),
                                       b(aten.slice.Tensor, out, dim, 0, size - s)], dim)
    return b(aten.reshape.default, out, shape) if sizes is not shape else out


@decomposition(aten.meshgrid.default, aten.meshgrid.indexing)
def meshgrid(gm, n, b):
    """meshgrid of 1-D (or 0-d) tensors: each viewed with its length on its own axis and
    expanded to the grid ("xy" indexing swaps the first two axes, as numpy); RAFT's and
    detection heads' coordinate grids, which then fold to constants."""
    tensors = list(n.args[0])
    vals = [val(t) for t in tensors]
    if any(v is None or v.dim() > 1 for v in vals):
        return None
    sizes = [v.numel() for v in vals]
    axes = list(range(len(tensors)))
    if arg(n, 1, "indexing", "ij") == "xy" and len(axes) > 1:
        axes[0], axes[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for t, v, axis in zip(tensors, vals, axes, strict=True):
        shape = [1] * len(sizes)
        shape[axis] = v.numel()
        grids.append(b(aten.expand.default, b(aten.reshape.default, t, shape), sizes))
    return tuple_outputs(n, grids)


@decomposition(aten.diff.default)
def diff(gm, n, b):
    """``diff(x, n, dim, prepend, append)``: prepend and append concatenated along ``dim``,
    then ``n`` times ``x[1:] - x[:-1]`` along it (bool tensors, a not-equal in PyTorch, and
    a difference of no elements stay on the CPU)."""
    x = n.args[0]
    v = val(x)
    order, dim = arg(n, 1, "n", 1), arg(n, 2, "dim", -1)
    prepend, append = arg(n, 3, "prepend"), arg(n, 4, "append")
    if v is None or v.dtype == torch.bool or v.dim() == 0:
        return None
    dim %= v.dim()
    size = v.shape[dim] + sum(val(t).shape[dim] for t in (prepend, append) if t is not None)
    if order < 1 or size - order < 1:
        return None
    if prepend is not None or append is not None:
        x = b(aten.cat.default, [t for t in (prepend, x, append) if t is not None], dim)
    for _ in range(order):
        x = b(aten.sub.Tensor, b(aten.slice.Tensor, x, dim, 1, size), b(aten.slice.Tensor, x, dim, 0, size - 1))
        size -= 1
    return x
