"""Indexing ops rewritten into the ones with TOSA emitters (:mod:`lowering.ops.indexing`,
:mod:`lowering.ops.shape`): select_scatter / strided slice_scatter into index_put,
accumulating index_put into index + add + index_put, unfold / as_strided into
constant-index index_select, repeat_interleave into expand + reshape, one_hot into eq."""

from __future__ import annotations

import math

import torch

from ...graph_utils import val
from ._common import arg, decomposition
from .shape import unit_slice_scatter

aten = torch.ops.aten


def _index_const(gm, b, values, hint="index"):
    """A constant int64 index tensor (the int64 passes turn it into int32)."""
    return b.const(gm, torch.tensor(values, dtype=torch.int64).reshape(-1), hint)


@decomposition(aten.select_scatter.default)
def select_scatter(gm, n, b):
    """``x`` with ``x.select(dim, i)`` replaced by ``src``: a one-wide slice_scatter of
    ``src`` unsqueezed at ``dim``."""
    x, src, dim, index = n.args[:4]
    shape = val(x).shape
    dim %= len(shape)
    index %= shape[dim]
    return b(aten.slice_scatter.default, x, b(aten.unsqueeze.default, src, dim), dim, index,
             index + 1, 1)


@decomposition(aten.slice_scatter.default)
def slice_scatter(gm, n, b):
    """Float unit-step scatters: slices around ``src`` and a cat (:mod:`.shape`); strided
    ones and integer tensors (which cat does not requantize): index_put at the constant
    positions ``range(start, end, step)`` along ``dim``."""
    x, src = n.args[0], n.args[1]
    vx = val(x)
    if vx is None:
        return None
    step = arg(n, 5, "step", 1)
    if step == 1 and vx.is_floating_point():
        return unit_slice_scatter(gm, n, b)
    shape = vx.shape
    dim = arg(n, 2, "dim", 0) % len(shape)
    size = shape[dim]
    start, end = arg(n, 3, "start"), arg(n, 4, "end")
    start = 0 if start is None else (start + size if start < 0 else min(start, size))
    end = size if end is None else (end + size if end < 0 else min(end, size))
    positions = list(range(max(start, 0), max(end, 0), step))
    if not positions:
        return x
    idx = _index_const(gm, b, positions)
    return b(aten.index_put.default, x, [None] * dim + [idx], src, False)


@decomposition(aten.index_put.default)
def index_put_accumulate(gm, n, b):
    """``index_put(x, i, v, accumulate=True)`` is ``x[i] = x[i] + v`` (the indices must not
    repeat: TOSA SCATTER writes each row once)."""
    x, indices, values = n.args[:3]
    accumulate = arg(n, 3, "accumulate", False)
    if not accumulate or any(i is not None and val(i) is not None and val(i).dtype == torch.bool
                             for i in indices):
        return None
    summed = b(aten.add.Tensor, b(aten.index.Tensor, x, list(indices)), values)
    return b(aten.index_put.default, x, list(indices), summed, False)


def _unfold_positions(size, window, step):
    n = (size - window) // step + 1
    return n, [i * step + j for i in range(n) for j in range(window)]


@decomposition(aten.unfold.default, aten.unfold_copy.default)
def unfold(gm, n, b):
    """``x.unfold(dim, size, step)``: the windows' elements picked along ``dim`` by one
    constant index_select, split into [windows, size] and the window dim moved last."""
    x, dim, window, step = n.args[:4]
    shape = list(val(x).shape)
    if not shape:
        return b(aten.reshape.default, x, [1])
    dim %= len(shape)
    count, positions = _unfold_positions(shape[dim], window, step)
    picked = b(aten.index_select.default, x, dim, _index_const(gm, b, positions))
    split = b(aten.reshape.default, picked, shape[:dim] + [count, window] + shape[dim + 1:])
    perm = list(range(dim + 1)) + list(range(dim + 2, len(shape) + 1)) + [dim + 1]
    return b(aten.permute.default, split, perm) if perm != list(range(len(perm))) else split


def _contiguous_strides(size):
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= s
    return list(reversed(strides))


@decomposition(aten.as_strided.default, aten.as_strided_copy.default)
def as_strided(gm, n, b):
    """``as_strided`` of a contiguous tensor: a reshape when the strides are the contiguous
    ones of ``size`` from offset 0, else one constant-index index_select of the flattened
    input (element ``offset + sum(p * stride)`` for each output position ``p``)."""
    x, size, stride = n.args[0], list(n.args[1]), list(n.args[2])
    offset = arg(n, 3, "storage_offset", 0) or 0
    numel = val(x).numel()
    total = math.prod(size)
    if offset == 0 and total == numel and all(
            st == c for s, st, c in zip(size, stride, _contiguous_strides(size), strict=True)
            if s != 1):
        return b(aten.reshape.default, x, size)
    grid = torch.zeros(size, dtype=torch.int64) + offset
    for d, st in enumerate(stride):
        shape = [1] * len(size)
        shape[d] = size[d]
        grid = grid + torch.arange(size[d]).reshape(shape) * st
    if total and (int(grid.max()) >= numel or int(grid.min()) < 0):
        return None
    flat = b(aten.reshape.default, x, [numel])
    picked = b(aten.index_select.default, flat, 0, _index_const(gm, b, grid.reshape(-1).tolist()))
    return b(aten.reshape.default, picked, size)


@decomposition(aten.repeat_interleave.self_int)
def repeat_interleave(gm, n, b):
    """``x.repeat_interleave(r, dim)`` with an int ``r``: each element followed by its
    copies: unsqueeze after ``dim``, expand that dim to ``r``, merge it into ``dim``."""
    x, repeats = n.args[0], n.args[1]
    dim = arg(n, 2, "dim")
    shape = list(val(x).shape)
    if dim is None:
        x, shape, dim = b(aten.reshape.default, x, [math.prod(shape)]), [math.prod(shape)], 0
    dim %= len(shape)
    grown = b(aten.unsqueeze.default, x, dim + 1)
    grown = b(aten.expand.default, grown, shape[:dim + 1] + [repeats] + shape[dim + 1:])
    return b(aten.reshape.default, grown, shape[:dim] + [shape[dim] * repeats] + shape[dim + 1:])


@decomposition(aten.one_hot.default)
def one_hot(gm, n, b):
    """``one_hot(i, c)`` (a known ``c``): ``i[..., None] == arange(c)`` as int64."""
    i = n.args[0]
    classes = arg(n, 1, "num_classes", -1)
    if classes is None or classes < 0:
        return None
    hot = b(aten.eq.Tensor, b(aten.unsqueeze.default, i, -1),
            b.const(gm, torch.arange(classes, dtype=val(i).dtype), "classes"))
    return b(aten._to_copy.default, hot, dtype=torch.int64)
