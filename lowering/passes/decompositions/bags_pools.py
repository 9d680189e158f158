"""Bag reductions and pools without a TOSA operator of their own, rewritten into ops that
lower: ``embedding_bag`` (sum / mean / max; offsets constant or an input; ``padding_idx``,
``per_sample_weights``, ``include_last_offset``) as an embedding GATHER and a reduction,
adaptive_max_pool2d with uneven windows as index_select (GATHER) + one max_pool2d,
adaptive_max_pool3d (even or uneven windows) as index_selects + one max_pool3d,
max_pool2d's indices (``return_indices=True``) from its window offsets, and
avg_pool3d (``nn.LocalResponseNorm``'s sum over a channel window) as avg_pool2d over
reshaped tensors.

Every piece of each rewrite lowers in both profiles: a piece left on the CPU would leave a
partition boundary with no PyTorch node (see :mod:`.composite`)."""

from __future__ import annotations

import operator

import torch

from ...graph_utils import get_constant, val
from ...ops.pool import adaptive_windows
from ._common import arg, decomposition, int_list, tuple_outputs

aten = torch.ops.aten

_SUM, _MEAN, _MAX = 0, 1, 2


# --------------------------------------------------------------------------- embedding_bag


def _padding_index(n, rows: int) -> int | None:
    """The row ``n`` excludes from its bags: ``embedding_bag.padding_idx`` wraps a negative
    one (None: no padding row); ``_embedding_bag`` takes a negative one as no padding row."""
    pad = arg(n, 8, "padding_idx", None if n.target == aten.embedding_bag.padding_idx else -1)
    if pad is None:
        return None
    if n.target == aten.embedding_bag.padding_idx:
        return pad % rows
    return pad if 0 <= pad < rows else None


def _bag_bounds(offsets: list[int], count: int, last: bool) -> list[tuple[int, int]]:
    """``[start, end)`` of each bag: bag ``j`` runs from ``offsets[j]`` to ``offsets[j + 1]``
    (the last one to the end of the indices unless ``include_last_offset``).

    Example:
        >>> _bag_bounds([0, 2, 2], 5, False), _bag_bounds([0, 2, 2, 5], 5, True)
        ([(0, 2), (2, 2), (2, 5)], [(0, 2), (2, 2), (2, 5)])
    """
    ends = offsets[1:] if last else offsets[1:] + [count]
    starts = offsets[:-1] if last else offsets
    bounds = []
    for s, e in zip(starts, ends, strict=True):
        s = min(max(s, 0), count)
        bounds.append((s, min(max(e, s), count)))
    return bounds


def _table(gm, b, weight, mode: int, pad: int | None, extra_row: bool):
    """The embedding table the bags gather from: ``weight`` with the padding row (and, when
    ``extra_row``, one more row, read by the positions that pad a short bag) holding a value
    that leaves the bag's reduction unchanged: zeros for sum / mean, each column's minimum
    for max. A constant table is built here; a table that is an input, by where / cat."""
    if pad is None and not extra_row:
        return weight
    w = get_constant(gm, weight)
    if w is not None:
        filler = w.min(0, keepdim=True).values if mode == _MAX else torch.zeros_like(w[:1])
        table = w.detach().clone()
        if pad is not None:
            table[pad] = filler[0]
        if extra_row:
            table = torch.cat([table, filler])
        return b.const(gm, table, "bag_table")
    rows, width = val(weight).shape
    filler = b(aten.amin.default, weight, [0], True) if mode == _MAX else \
        b.const(gm, torch.zeros(1, width), "bag_filler")
    table = weight
    if pad is not None:
        keep = torch.ones(rows, 1, dtype=torch.bool)
        keep[pad] = False
        table = b(aten.where.self, b.const(gm, keep, "bag_keep"), table, filler)
    if extra_row:
        table = b(aten.cat.default, [table, filler], 0)
    return table


def _reciprocal_lookup(gm, b, counts, largest: int):
    """``1 / counts`` ([B, 1] float; 0 where a count is 0) for integer ``counts`` [B]: an
    embedding of the constant table ``[0, 1, 1/2, ... 1/largest]`` (exact in FP, one
    quantized table in INT, no reciprocal approximation)."""
    table = torch.tensor([0.0] + [1.0 / c for c in range(1, largest + 1)]).reshape(-1, 1)
    return b(aten.embedding.default, b.const(gm, table, "bag_reciprocal"), counts)


def _count(b, valid, dim: int):
    """The number of True entries of ``valid`` along ``dim`` (an integer tensor)."""
    return b(aten.sum.dim_IntList, b(aten._to_copy.default, valid, dtype=torch.int32), [dim])


@decomposition(aten.embedding_bag.default, aten.embedding_bag.padding_idx,
               aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def embedding_bag(gm, n, b):
    """``embedding_bag``'s output (the other results stay on the CPU when read). Constant
    offsets (a 2-D input's, or a buffer's): the indices laid out as [bags, longest bag] (a
    reshape when the bags tile them evenly, else one index_select with the short bags padded
    by a table row that leaves the reduction unchanged), one embedding GATHER, then sum (bmm
    with ``per_sample_weights``), mean (mean, or a bmm with the constant 1/size weights; with
    ``padding_idx`` the counted entries' reciprocal looked up) or amax (empty bags zeroed).
    Offsets given as an input: the [bags, indices] membership mask from comparisons, then a
    mm (sum / mean) or a masked amax."""
    weight, indices, offsets = n.args[:3]
    vw, vi, vo = val(weight), val(indices), val(offsets)
    if vw is None or vi is None or vo is None or vw.dim() != 2 or vi.dim() != 1 or \
            vo.dim() != 1 or vw.dtype != torch.float32 or vi.is_floating_point() or \
            vo.is_floating_point() or vi.numel() == 0:
        return None
    mode = arg(n, 4, "mode", _SUM)
    psw = arg(n, 6, "per_sample_weights")
    last = bool(arg(n, 7, "include_last_offset", False))
    if mode not in (_SUM, _MEAN, _MAX) or (psw is not None and mode != _SUM) or \
            (last and vo.numel() < 1):
        return None
    pad = _padding_index(n, vw.shape[0])
    known = get_constant(gm, offsets)
    if known is not None:
        out = _static_bags(gm, b, weight, indices, known.tolist(), last, mode, pad, psw)
    else:
        out = _dynamic_bags(gm, b, weight, indices, offsets, last, mode, pad, psw)
    return None if out is None else tuple_outputs(n, [out, None, None, None])


def _static_bags(gm, b, weight, indices, offsets, last, mode, pad, psw):
    """:func:`embedding_bag` with constant offsets."""
    count = val(indices).numel()
    bounds = _bag_bounds(offsets, count, last)
    bags = len(bounds)
    sizes = [e - s for s, e in bounds]
    longest = max(sizes, default=0)
    if bags == 0 or longest == 0:
        return None
    width = val(weight).shape[1]
    even = bags * longest == count and all(s == j * longest and e == s + longest
                                           for j, (s, e) in enumerate(bounds))
    # a padded position reads the padding row when there is one, else one row more
    extra_row = not even and pad is None
    table = _table(gm, b, weight, mode, pad, extra_row)
    if even:
        positions = None
        grid = b(aten.reshape.default, indices, [bags, longest])
    else:
        filler = count  # the position of the appended filler index
        positions = [s + i if i < e - s else filler for s, e in bounds for i in range(longest)]
        fill = val(weight).shape[0] if pad is None else pad
        padded = b(aten.cat.default,
                   [indices, b.const(gm, torch.tensor([fill], dtype=val(indices).dtype), "bag_fill")], 0)
        grid = b(aten.reshape.default,
                 b(aten.index_select.default, padded, 0,
                   b.const(gm, torch.tensor(positions, dtype=torch.int64), "bag_positions")),
                 [bags, longest])
    rows = b(aten.embedding.default, table, grid)  # [bags, longest, D]
    if mode == _MAX:
        out = b(aten.amax.default, rows, [1])
        if pad is not None:
            valid = b(aten.ne.Tensor, grid, b.const(gm, torch.tensor(pad, dtype=val(indices).dtype),
                                                    "bag_pad"))
            return _zero_where(gm, b, b(aten.unsqueeze.default, b(aten.any.dim, valid, 1), 1),
                               out)
        if min(sizes) == 0:
            nonempty = torch.tensor([s > 0 for s in sizes]).reshape(bags, 1)
            return _zero_where(gm, b, b.const(gm, nonempty, "bag_nonempty"), out)
        return out
    if psw is not None:
        if positions is None:
            w = b(aten.reshape.default, psw, [bags, 1, longest])
        else:  # a padded position reads a zero row: any weight will do
            picks = [p if p < count else 0 for p in positions]
            w = b(aten.reshape.default,
                  b(aten.index_select.default, psw, 0,
                    b.const(gm, torch.tensor(picks, dtype=torch.int64), "bag_weight_positions")),
                  [bags, 1, longest])
        return b(aten.reshape.default, b(aten.bmm.default, w, rows), [bags, width])
    if mode == _SUM:
        return b(aten.sum.dim_IntList, rows, [1])
    if pad is not None:  # mean over the entries that are not the padding row
        valid = b(aten.ne.Tensor, grid, b.const(gm, torch.tensor(pad, dtype=val(indices).dtype),
                                                "bag_pad"))
        return b(aten.mul.Tensor, b(aten.sum.dim_IntList, rows, [1]),
                 _reciprocal_lookup(gm, b, _count(b, valid, 1), longest))
    if min(sizes) == longest:
        return b(aten.mean.dim, rows, [1])
    w = torch.tensor([[1.0 / s if i < s else 0.0 for i in range(longest)] for s in sizes])
    w = b.const(gm, w.reshape(bags, 1, longest), "bag_mean_weights")
    return b(aten.reshape.default, b(aten.bmm.default, w, rows), [bags, width])


def _zero_where(gm, b, keep, x):
    """``x`` where ``keep`` (broadcast), else 0."""
    return b(aten.where.self, keep, x, b.const(gm, torch.zeros(1), "bag_zero"))


def _dynamic_bags(gm, b, weight, indices, offsets, last, mode, pad, psw):
    """:func:`embedding_bag` with offsets given at run time: bag ``j`` holds position ``i``
    when ``start[j] <= i < end[j]``."""
    count = val(indices).numel()
    entries = val(offsets).numel()
    bags = entries - 1 if last else entries
    if bags < 1:
        return None
    idt = val(offsets).dtype
    starts = b(aten.slice.Tensor, offsets, 0, 0, bags) if bags < entries else offsets
    if last:
        ends = b(aten.slice.Tensor, offsets, 0, 1, bags + 1)
    else:
        end = b.const(gm, torch.tensor([count], dtype=idt), "bag_end")
        ends = end if bags == 1 else b(aten.cat.default,
                                       [b(aten.slice.Tensor, offsets, 0, 1, bags), end], 0)
    position = b.const(gm, torch.arange(count, dtype=idt).reshape(1, count), "bag_index")
    member = b(aten.logical_and.default,
               b(aten.ge.Tensor, position, b(aten.unsqueeze.default, starts, 1)),
               b(aten.lt.Tensor, position, b(aten.unsqueeze.default, ends, 1)))  # [bags, count]
    if pad is not None:
        kept = b(aten.ne.Tensor, indices, b.const(gm, torch.tensor(pad, dtype=val(indices).dtype),
                                                  "bag_pad"))
        member = b(aten.logical_and.default, member, b(aten.unsqueeze.default, kept, 0))
    rows = b(aten.embedding.default, weight, indices)  # [count, D]
    if mode == _MAX:
        w = get_constant(gm, weight)
        floor = b.const(gm, w.min(0, keepdim=True).values.reshape(1, 1, -1), "bag_floor") \
            if w is not None else b(aten.unsqueeze.default, b(aten.amin.default, rows, [0], True), 0)
        masked = b(aten.where.self, b(aten.unsqueeze.default, member, 2),
                   b(aten.unsqueeze.default, rows, 0), floor)  # [bags, count, D]
        out = b(aten.amax.default, masked, [1])
        return _zero_where(gm, b, b(aten.unsqueeze.default, b(aten.any.dim, member, 1), 1), out)
    if psw is not None:
        mask = b(aten.where.self, member, b(aten.unsqueeze.default, psw, 0),
                 b.const(gm, torch.zeros(1), "bag_zero"))
    else:
        mask = b(aten._to_copy.default, member, dtype=torch.float32)
    out = b(aten.mm.default, mask, rows)
    if mode == _MEAN:
        out = b(aten.mul.Tensor, out, _reciprocal_lookup(gm, b, _count(b, member, 1), count))
    return out


# --------------------------------------------------------------------------- pools


def _adaptive_picks(size: int, out: int) -> tuple[list[int], int]:
    """The input rows an adaptive max pool's windows read, each window padded to the longest
    (``k``) by repeating its last row (a repeated row leaves the max unchanged), and ``k``.

    Example:
        >>> _adaptive_picks(5, 3)
        ([0, 1, 1, 1, 2, 3, 3, 4, 4], 3)
    """
    windows = adaptive_windows(size, out)
    k = max(e - s for s, e in windows)
    return [min(s + j, e - 1) for s, e in windows for j in range(k)], k


def uneven_adaptive_max_pool2d(gm, n, b):
    """adaptive_max_pool2d's values for any output size, of a 3-D or 4-D input: along each
    axis whose windows are uneven (the output size does not divide the input's; they
    overlap and differ in size), one index_select (GATHER) lays the windows side by side,
    each padded to the longest by repeating one of its rows; one max_pool2d with kernel =
    stride = the window sizes then takes every window's max. The indices stay on the CPU."""
    v = val(n.args[0])
    if v is None or v.dim() not in (3, 4):
        return None
    x = n.args[0]
    batchless = v.dim() == 3
    if batchless:
        x = b(aten.unsqueeze.default, x, 0)
    h, w = v.shape[-2:]
    kernel = []
    for axis, (size, out) in enumerate(zip((h, w), int_list(n.args[1], 2), strict=True)):
        out = out or size  # None keeps the input's size
        if size % out == 0:
            kernel.append(size // out)
            continue
        picks, k = _adaptive_picks(size, out)
        x = b(aten.index_select.default, x, 2 + axis,
              b.const(gm, torch.tensor(picks, dtype=torch.int64), "adaptive_rows"))
        kernel.append(k)
    y = b(aten.max_pool2d.default, x, kernel, kernel)
    if batchless:
        y = b(aten.squeeze.dims, y, [0])
    return tuple_outputs(n, [y, None])


@decomposition(aten.adaptive_max_pool3d.default)
def adaptive_max_pool3d(gm, n, b):
    """adaptive_max_pool3d's values of [N, C, D, H, W] (or [C, D, H, W]), any output size: when
    an output size divides its input size the windows along that axis are uniform (kernel =
    stride = in / out); along each other axis one index_select (GATHER) lays the uneven
    windows side by side, each padded to the longest by repeating one of its rows (as
    :func:`uneven_adaptive_max_pool2d`); one max_pool3d (:func:`max_pool3d`: two max_pool2d)
    with kernel = stride = the window sizes then takes every window's max. Exact in INT as in
    FP (gathers and maxima move values unchanged). The indices stay on the CPU.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> from ._common import PASS
        >>> REWRITES[PASS][aten.adaptive_max_pool3d.default].fn.__name__
        'adaptive_max_pool3d'
    """
    x, v = n.args[0], _float_pool_input(n, (4, 5))
    if v is None:
        return None
    sizes = list(v.shape[-3:])
    outs = (int_list(n.args[1], 3) + [None] * 3)[:3]
    kernel = []
    for axis, (size, out) in enumerate(zip(sizes, outs, strict=True)):
        out = out or size  # None keeps the input's size
        if size % out == 0:
            kernel.append(size // out)
            continue
        picks, k = _adaptive_picks(size, out)
        x = b(aten.index_select.default, x, v.dim() - 3 + axis,
              b.const(gm, torch.tensor(picks, dtype=torch.int64), "adaptive_rows"))
        kernel.append(k)
    return tuple_outputs(n, [b(aten.max_pool3d.default, x, kernel, kernel), None])


def _pooled_size(size: int, k: int, s: int, p: int, ceil: bool) -> int:
    """PyTorch's pooled length of an axis (a ceil-mode window must start inside the input
    or its left padding).

    Example:
        >>> _pooled_size(6, 3, 2, 1, False), _pooled_size(6, 3, 2, 1, True)
        (3, 4)
    """
    span = size + 2 * p - k
    out = (-(-span // s) if ceil else span // s) + 1
    return out - 1 if ceil and (out - 1) * s >= size + p else out


@decomposition(aten.avg_pool3d.default)
def avg_pool3d(gm, n, b):
    """avg_pool3d of [N, C, D, H, W] (or [C, D, H, W]) as up to two avg_pool2d: over D with a
    [kD, 1] window on [N, C, D, H*W], then over H, W on [N, C*D', H, W]. The window box's
    divisor (with or without padding, ceil mode) is the product of the per-axis ones, so the
    mean of means is the 3-D mean. ``nn.LocalResponseNorm`` pools a [size, 1, 1] window
    (the first pool alone). ``divisor_override`` only with a window along D or H, W alone."""
    x = n.args[0]
    v = val(x)
    if v is None or v.dim() not in (4, 5) or not v.is_floating_point():
        return None
    kernel = int_list(n.args[1], 3)
    stride = int_list(arg(n, 2, "stride", []) or kernel, 3)
    padding = int_list(arg(n, 3, "padding", 0), 3)
    ceil = bool(arg(n, 4, "ceil_mode", False))
    include = bool(arg(n, 5, "count_include_pad", True))
    divisor = arg(n, 6, "divisor_override")
    over_d = (kernel[0], stride[0], padding[0]) != (1, 1, 0)
    over_hw = (kernel[1:], stride[1:], padding[1:]) != ([1, 1], [1, 1], [0, 0])
    if divisor is not None and over_d and over_hw:
        return None
    batchless = v.dim() == 4
    if batchless:
        x = b(aten.unsqueeze.default, x, 0)
    nb, c, d, h, w = (1, *v.shape) if batchless else v.shape
    extra = [divisor] if divisor is not None else []
    if over_d:
        y = b(aten.avg_pool2d.default, b(aten.reshape.default, x, [nb, c, d, h * w]),
              [kernel[0], 1], [stride[0], 1], [padding[0], 0], ceil, include, *extra)
        d = _pooled_size(d, kernel[0], stride[0], padding[0], ceil)
        x = b(aten.reshape.default, y, [nb, c, d, h, w])
    if over_hw or not over_d:
        y = b(aten.avg_pool2d.default, b(aten.reshape.default, x, [nb, c * d, h, w]),
              kernel[1:], stride[1:], padding[1:], ceil, include, *extra)
        h, w = (_pooled_size(size, *kps, ceil) for size, kps in
                zip((h, w), zip(kernel[1:], stride[1:], padding[1:], strict=True), strict=True))
        x = b(aten.reshape.default, y, [nb, c, d, h, w])
    return b(aten.squeeze.dims, x, [0]) if batchless else x


# --------------------------------------------------------------------------- max_pool2d indices


def _float_pool_input(n, ranks: tuple[int, ...]):
    """The value of pool ``n``'s input when it is a non-empty float tensor of one of ``ranks``
    (with and without the batch dim), else None."""
    v = val(n.args[0])
    ok = v is not None and v.dim() in ranks and v.is_floating_point() and v.numel() > 0
    return v if ok else None


@decomposition(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(gm, n, b):
    """``F.max_pool2d(..., return_indices=True)``: the values are max_pool2d; the indices (a
    flat ``h * W + w`` into each input plane, what ``max_unpool2d`` reads) come from the
    window offsets. For each offset ``(i, j)`` of the ``kH x kW`` window, the strided slice of
    the (zero-)padded input holding that element of every window is compared with the pooled
    max, masked by a constant saying whether the element lies inside the input (not in the
    padding), and the index of the first offset that matches wins, in PyTorch's scan order
    (rows, then columns): a ``where`` chain over constant index tables. Exact in FP and INT
    (the pool and the slices share the input's quantization, so equal values are equal
    integers); a window whose max is NaN is not claimed (PyTorch takes its last NaN).

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> from ._common import PASS
        >>> REWRITES[PASS][aten.max_pool2d_with_indices.default].fn.__name__
        'max_pool2d_with_indices'
    """
    x, v = n.args[0], _float_pool_input(n, (3, 4))
    if v is None:
        return None
    values = b(aten.max_pool2d.default, *n.args)
    if not any(u.users and u.args[1] == 1 for u in n.users if u.target is operator.getitem):
        return tuple_outputs(n, [values, None])  # the indices are unused
    kernel = int_list(n.args[1], 2)
    stride = int_list(arg(n, 2, "stride", []) or kernel, 2)
    padding = int_list(arg(n, 3, "padding", 0), 2)
    dilation = int_list(arg(n, 4, "dilation", 1), 2)
    ceil = bool(arg(n, 5, "ceil_mode", False))
    h, w = v.shape[-2:]
    oh, ow = (_dilated_pooled_size(size, k, st, p, dl, ceil) for size, k, st, p, dl in
              zip((h, w), kernel, stride, padding, dilation, strict=True))
    # padded so that every window of every offset reads inside it (ceil mode's last windows
    # may run past the right padding)
    extra = [max(0, (o - 1) * st + dl * (k - 1) + 1 - (size + 2 * p))
             for o, st, dl, k, size, p in zip((oh, ow), stride, dilation, kernel, (h, w), padding, strict=True)]
    padded = b(aten.constant_pad_nd.default, x,
               [padding[1], padding[1] + extra[1], padding[0], padding[0] + extra[0]], 0.0)
    rows, cols = torch.arange(oh) * stride[0] - padding[0], torch.arange(ow) * stride[1] - padding[1]
    indices = None
    for i in reversed(range(kernel[0])):
        for j in reversed(range(kernel[1])):
            r, c = rows + i * dilation[0], cols + j * dilation[1]
            window = b(aten.slice.Tensor, b(aten.slice.Tensor, padded, -2, int(r[0]) + padding[0],
                                            int(r[-1]) + padding[0] + 1, stride[0]),
                       -1, int(c[0]) + padding[1], int(c[-1]) + padding[1] + 1, stride[1])
            inside = ((r >= 0) & (r < h))[:, None] & ((c >= 0) & (c < w))[None, :]
            if not inside.any():
                continue
            hit = b(aten.eq.Tensor, window, values)
            if not inside.all():
                hit = b(aten.logical_and.default, hit, b.const(gm, inside, "pool_inside"))
            flat = b.const(gm, r[:, None] * w + c[None, :], "pool_index")
            indices = flat if indices is None else b(aten.where.self, hit, flat, indices)
    if indices is None:
        return None
    if indices.op == "get_attr":  # one offset inside the input: no where broadcast the table
        indices = b(aten.expand.default, indices, list(v.shape[:-2]) + [oh, ow])
    return tuple_outputs(n, [values, indices])


@decomposition(aten.max_pool1d_with_indices.default)
def max_pool1d_with_indices(gm, n, b):
    """max_pool1d with its indices as :func:`max_pool2d_with_indices` over an [.., 1, L]
    plane (a [1, k] window): a flat index into a one-row plane is the position along L."""
    v = val(n.args[0])
    if v is None or v.dim() not in (2, 3):
        return None
    kernel = int_list(n.args[1], 1)[0]
    stride = (int_list(arg(n, 2, "stride", []), 1) or [kernel])[0]  # (an empty stride: the kernel)
    padding, dilation = (int_list(arg(n, i, name, default), 1)[0]
                         for i, name, default in ((3, "padding", 0), (4, "dilation", 1)))
    pooled = b(aten.max_pool2d_with_indices.default, b(aten.unsqueeze.default, n.args[0], -2),
               [1, kernel], [1, stride], [0, padding], [1, dilation], bool(arg(n, 5, "ceil_mode", False)))
    values, indices = (b(aten.squeeze.dim, b(operator.getitem, pooled, i), -2) for i in (0, 1))
    return tuple_outputs(n, [values, indices])


# --------------------------------------------------------------------------- max_pool3d


@decomposition(aten.max_pool3d.default, aten.max_pool3d_with_indices.default)
def max_pool3d(gm, n, b):
    """max_pool3d of [N, C, D, H, W] (or [C, D, H, W]) as up to two max_pool2d: over D with a
    [kD, 1] window on [N, C, D, H*W], then over H, W on [N, C*D', H, W]. The max over a box is
    the max over D of the maxima over H, W, padding is -inf (never the max of a window that
    holds an input element) and each axis's window starts (ceil mode included) depend on that
    axis alone, so the two pools take PyTorch's windows exactly; dilation passes through per
    axis. Exact in INT as in FP: max commutes with the monotone quantization, and the pools
    and reshapes share the input's. The ``_with_indices`` form only when the indices are
    unused (they stay on the CPU otherwise).

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> from ._common import PASS
        >>> REWRITES[PASS][aten.max_pool3d.default].fn.__name__
        'max_pool3d'
    """
    x, v = n.args[0], _float_pool_input(n, (4, 5))
    if v is None:
        return None
    kernel = int_list(n.args[1], 3)
    stride = int_list(arg(n, 2, "stride", []) or kernel, 3)
    padding = int_list(arg(n, 3, "padding", 0), 3)
    dilation = int_list(arg(n, 4, "dilation", 1), 3)
    ceil = bool(arg(n, 5, "ceil_mode", False))
    batchless = v.dim() == 4
    if batchless:
        x = b(aten.unsqueeze.default, x, 0)
    nb, c, d, h, w = (1, *v.shape) if batchless else v.shape
    over_d = (kernel[0], stride[0], padding[0]) != (1, 1, 0)
    over_hw = (kernel[1:], stride[1:], padding[1:]) != ([1, 1], [1, 1], [0, 0])
    if over_d:
        y = b(aten.max_pool2d.default, b(aten.reshape.default, x, [nb, c, d, h * w]),
              [kernel[0], 1], [stride[0], 1], [padding[0], 0], [dilation[0], 1], ceil)
        d = _dilated_pooled_size(d, kernel[0], stride[0], padding[0], dilation[0], ceil)
        x = b(aten.reshape.default, y, [nb, c, d, h, w])
    if over_hw or not over_d:
        y = b(aten.max_pool2d.default, b(aten.reshape.default, x, [nb, c * d, h, w]),
              kernel[1:], stride[1:], padding[1:], dilation[1:], ceil)
        h, w = (_dilated_pooled_size(size, k, s, p, dl, ceil) for size, k, s, p, dl in
                zip((h, w), kernel[1:], stride[1:], padding[1:], dilation[1:], strict=True))
        x = b(aten.reshape.default, y, [nb, c, d, h, w])
    out = b(aten.squeeze.dims, x, [0]) if batchless else x
    if n.target == aten.max_pool3d_with_indices.default:
        return tuple_outputs(n, [out, None])
    return out


def _dilated_pooled_size(size: int, k: int, s: int, p: int, dl: int, ceil: bool) -> int:
    """:func:`_pooled_size` of a window dilated by ``dl`` (its extent ``dl * (k - 1) + 1``).

    Example:
        >>> _dilated_pooled_size(7, 3, 2, 1, 2, True), _dilated_pooled_size(7, 2, 2, 0, 1, True)
        (3, 4)
    """
    return _pooled_size(size, dl * (k - 1) + 1, s, p, ceil)
