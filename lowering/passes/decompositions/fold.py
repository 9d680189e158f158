"""``F.fold`` (``aten.col2im``): the inverse of unfold, which sums the overlapping patches.

PyTorch's own decomposition is an accumulating ``index_put``; here each kernel offset's
``[N, C, Lh, Lw]`` block of patch values is spread by the stride (zeros between), padded to
its place in the padded output and added: adds and pads, which lower in both profiles."""

from __future__ import annotations

import torch

from ...graph_utils import val
from ._common import decomposition

aten = torch.ops.aten


def _spread(gm, b, block, dim: int, stride: int, shape: list[int]):
    """``block`` with ``stride - 1`` zeros after every element along ``dim`` (the last ones
    trimmed); ``shape`` is the block's shape, updated in place."""
    if stride == 1:
        return block
    zeros = b.const(gm, torch.zeros(shape, dtype=val(block).dtype), "fold_zeros")
    stacked = b(aten.stack.default, [block] + [zeros] * (stride - 1), dim + 1)
    merged = shape[:dim] + [shape[dim] * stride] + shape[dim + 1:]
    out = b(aten.reshape.default, stacked, merged)
    length = (shape[dim] - 1) * stride + 1
    shape[dim] = length
    return b(aten.slice.Tensor, out, dim, 0, length)


@decomposition(aten.col2im.default)
def col2im(gm, n, b):
    """``col2im(x, output_size, kernel_size, dilation, padding, stride)`` of a ``[N, C*kh*kw, L]``
    (or unbatched ``[C*kh*kw, L]``) input: the patch values of kernel offset ``(i, j)`` land at
    rows ``i*dh + a*sh`` and columns ``j*dw + b*sw`` of the padded output; overlaps add up."""
    x = n.args[0]
    v = val(x)
    if v is None or not v.is_floating_point():
        return None
    (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (list(a) for a in n.args[1:6])
    lh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    lw = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    batched = v.dim() == 3
    nb = v.shape[0] if batched else 1
    c = v.shape[-2] // (kh * kw)
    patches = b(aten.reshape.default, x, [nb, c, kh, kw, lh, lw])
    total = None
    for i in range(kh):
        for j in range(kw):
            block = b(aten.select.int, b(aten.select.int, patches, 2, i), 2, j)
            shape = [nb, c, lh, lw]
            block = _spread(gm, b, _spread(gm, b, block, 2, sh, shape), 3, sw, shape)
            top, left = i * dh, j * dw
            placed = b(aten.constant_pad_nd.default, block,
                       [left, w + 2 * pw - left - shape[3], top, h + 2 * ph - top - shape[2]], 0.0)
            total = placed if total is None else b(aten.add.Tensor, total, placed)
    out = b(aten.slice.Tensor, b(aten.slice.Tensor, total, 2, ph, ph + h), 3, pw, pw + w)
    return out if batched else b(aten.reshape.default, out, [c, h, w])
