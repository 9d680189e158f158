"""Non-accumulating scatters in terms of comparisons, where and reductions:
``Tensor.scatter(dim, index, src)`` / ``scatter(dim, index, value)`` (``aten.scatter.src`` /
``scatter.value``; the in-place ``scatter_`` arrives functionalized as these) and
``F.max_unpool1d`` / ``max_unpool2d`` / ``max_unpool3d`` (a scatter of the pooled values into
a zero plane).

As in :mod:`.scatter_cum`, every destination position ``p`` along ``dim`` looks at all ``K``
sources at once through the one-hot mask ``index[..., k] == p`` ([..., K, P]). A write is not
a sum, so each position keeps one source: the LAST ``k`` naming it, as PyTorch's CPU kernel
writes the sources in index order (measured in the tests, duplicates included). A source is
dropped when a later one names the same position: ``any_k' (index[k'] == index[k] and k' > k)``
over a [..., K, K] comparison (a constant index folds the whole mask into a constant). The
surviving mask has at most one True per position, so a reduction over K of
``where(mask, src, filler)`` is that one source (REDUCE_MAX with a -inf filler for floats in
FP, REDUCE_SUM with a zero filler for integers and in INT, REDUCE_ANY for bools). The masks grow
as K * P and K * K: beyond :data:`lowering.passes.limits.QUADRATIC_ELEMENTS` the op stays on the
CPU whole.

Every piece lowers in both profiles, or the rewrite returns None and the op stays whole on the
CPU (a CPU piece would leave a partition boundary with no PyTorch node, see :mod:`.composite`).

Claims:
- FP, float32: bit for bit PyTorch's (``max(v, -inf) == v`` for every written value, -0.0,
  infinities and NaN included; positions no source names keep ``self``).
- Integer tensors (int32 / int64 carried as int32) and bool: exact in both profiles (an integer
  sum of one value and zeros; bools combine by REDUCE_ANY).
- INT (int8), float tensors: the mask's where shares ``src``'s quantization (filler 0), the sum
  over K and the final where with ``self`` requantize as the fake-quant model does: within one
  output step of it. ``scatter.value`` is one where of ``self`` and the value.
- max_unpool: FP bit for bit (zeros where nothing is written); INT one where and one sum, no
  final where (unwritten positions sum to the zero point). PyTorch's unpool errors on an index
  outside the output; here such a source is dropped (no position matches it).
- Not covered (CPU, whole): ``scatter(..., reduce=)``, other dtypes, a 0-d or empty tensor.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ...graph_utils import get_constant, val
from ..limits import within_quadratic_bound
from ._common import PASS, decomposition, number_const  # noqa: F401 - PASS for the doctests
from .scatter_cum import _back, _last

aten = torch.ops.aten

_DTYPES = (torch.float32, torch.int32, torch.int64, torch.bool)


def last_write_mask(index_last: torch.Tensor, positions: int) -> torch.Tensor:
    """The [..., K, P] mask of which source ``k`` each position ``p`` keeps: ``index[..., k] ==
    p`` for the last ``k`` naming ``p`` (the constant-index form of :func:`_write_mask`).

    Example:
        >>> last_write_mask(torch.tensor([1, 0, 1]), 2).int().tolist()
        [[0, 0], [1, 0], [0, 1]]
    """
    hot = index_last.unsqueeze(-1) == torch.arange(positions)
    k = index_last.shape[-1]
    later = torch.ones(k, k, dtype=torch.bool).triu(1)  # [k, k']: k' > k
    overwritten = ((index_last.unsqueeze(-1) == index_last.unsqueeze(-2)) & later).any(-1)
    return hot & ~overwritten.unsqueeze(-1)


def _write_mask(gm, b, index_last: fx.Node, positions: int) -> fx.Node:
    """The graph form of :func:`last_write_mask`: ``eq`` against the positions, and for K > 1
    the [..., K, K] comparison of the index with itself, restricted to later sources by a
    constant triangle, REDUCE_ANY over the later ones, and the sources it finds overwritten
    masked out."""
    known = get_constant(gm, index_last)
    if known is not None:
        return b.const(gm, last_write_mask(known, positions), "write_mask")
    vi = val(index_last)
    column = b(aten.unsqueeze.default, index_last, -1)  # [..., K, 1]
    hot = b(aten.eq.Tensor, column, b.const(gm, torch.arange(positions, dtype=vi.dtype), "positions"))
    k = vi.shape[-1]
    if k == 1:
        return hot
    same = b(aten.eq.Tensor, column, b(aten.unsqueeze.default, index_last, -2))  # [..., K, K]
    later = b.const(gm, torch.ones(k, k, dtype=torch.bool).triu(1), "later")
    overwritten = b(aten.any.dim, b(aten.logical_and.default, same, later), -1, True)  # [..., K, 1]
    return b(aten.logical_and.default, hot, b(aten.logical_not.default, overwritten))


def _written(gm, b, mask: fx.Node, src_last: fx.Node, dtype: torch.dtype) -> fx.Node:
    """The one source ``mask`` [..., K, P] keeps at each position, [..., P]: for floats in FP the
    REDUCE_MAX over K of the source and -inf fillers (``max(v, -inf) == v`` for every float,
    -0.0 included, which a REDUCE_SUM starting from +0.0 would lose); for floats in INT the
    REDUCE_SUM with 0 fillers (the zero point: an infinity would reach the observer); integers
    sum with 0 fillers, bools by REDUCE_ANY. Where the mask keeps no source: the filler."""
    src = b(aten.unsqueeze.default, src_last, -1)  # [..., K, 1]
    if dtype == torch.bool:
        return b(aten.any.dim, b(aten.logical_and.default, mask, src), -2, False)
    by_max = dtype.is_floating_point and b.profile == "FP"
    filler = number_const(gm, b, float("-inf") if by_max else 0, dtype, src_last, "filler")
    picked = b(aten.where.self, mask, src, filler)
    if by_max:
        return b(aten.amax.default, picked, [-2], False)
    if dtype.is_floating_point:
        return b(aten.sum.dim_IntList, picked, [-2], False)
    # (an integer sum is int64 in PyTorch: kept in self's dtype, as TOSA's int32 sum is)
    return b(aten.sum.dim_IntList, picked, [-2], False, dtype=dtype)


def _within_bounds(vi, positions: int) -> bool:
    """Whether the [..., K, P] and [..., K, K] masks of an index ``vi`` stay within the bound."""
    return within_quadratic_bound(vi.numel(), positions) and within_quadratic_bound(vi.numel(), vi.shape[-1])


def _region_and_embed(b, x: fx.Node, shape, vx, d: int):
    """``x`` sliced to ``shape`` in every dim but ``d`` (where ``index`` is narrower than
    ``self``), and a function putting a result of that region back into ``x``
    (``slice_scatter``, innermost slice first)."""
    parents, region = [], x
    for e in range(vx.dim()):
        if e != d and shape[e] < vx.shape[e]:
            parents.append((region, e))
            region = b(aten.slice.Tensor, region, e, 0, shape[e])

    def embed(result):
        for parent, e in reversed(parents):
            result = b(aten.slice_scatter.default, parent, result, e, 0, shape[e], 1)
        return result

    return region, embed


def _supported(vx, vi) -> bool:
    """Whether ``self`` and ``index`` are of a form the rewrite lowers."""
    return vx is not None and vi is not None and vx.dtype in _DTYPES and not vi.is_floating_point() and \
        vi.dtype != torch.bool and vx.dim() > 0 and vi.dim() == vx.dim() and vx.numel() > 0 and vi.numel() > 0


@decomposition(aten.scatter.src, aten.scatter.value)
def scatter(gm, n, b):
    """``x.scatter(dim, index, src)``: ``out[..., index[i], ...] = src[i]`` along ``dim``, the
    last source winning at a duplicate index (:func:`_write_mask`), ``x`` where none lands;
    ``x.scatter(dim, index, value)``: ``where(any_k index[k] == p, value, x)``. ``src`` beyond
    ``index``'s extent is unused (sliced off); where ``index`` is narrower than ``x`` in another
    dim the result is computed on that region and put back with ``slice_scatter``.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x, s):
        ...         return x.scatter(1, torch.tensor([[2, 0, 2]]), s)
        >>> lowering.lower(M(), (torch.zeros(1, 4), torch.randn(1, 3)), profile="FP").cpu_nodes
        []
    """
    x, d, index, src = n.args[:4]
    if n.kwargs.get("reduce") is not None:
        return None
    vx, vi = val(x), val(index)
    if not _supported(vx, vi):
        return None
    rank = vx.dim()
    d %= rank
    region, embed = _region_and_embed(b, x, vi.shape, vx, d)
    positions = vx.shape[d]
    if not _within_bounds(vi, positions):
        return None
    index_last = _last(b, index, d, rank)
    if n.target == aten.scatter.value:
        value = src.item() if isinstance(src, torch.Tensor) else src
        if not isinstance(value, (bool, int, float)) or (vx.dtype == torch.bool) != isinstance(value, bool) or \
                (not vx.is_floating_point() and not float(value).is_integer()):
            return None
        hot = b(aten.eq.Tensor, b(aten.unsqueeze.default, index_last, -1),
                b.const(gm, torch.arange(positions, dtype=vi.dtype), "positions"))
        hit = _back(b, b(aten.any.dim, hot, -2, False), d, rank)
        return embed(b(aten.where.self, hit, number_const(gm, b, value, vx.dtype, region, "value"), region))
    vs = val(src)
    if vs is None or vs.dtype != vx.dtype or vs.dim() != rank:
        return None
    for e in range(rank):
        if vs.shape[e] > vi.shape[e]:
            src = b(aten.slice.Tensor, src, e, 0, vi.shape[e])
    mask = _write_mask(gm, b, index_last, positions)
    written = _back(b, _written(gm, b, mask, _last(b, src, d, rank), vx.dtype),
                    d, rank)
    hit = _back(b, b(aten.any.dim, mask, -2, False), d, rank)
    return embed(b(aten.where.self, hit, written, region))


@decomposition(aten.max_unpool2d.default, aten.max_unpool3d.default)
def max_unpool(gm, n, b):
    """``max_unpool2d(x [N, C, H, W], indices, output_size)`` (``max_unpool1d`` exports as it)
    and ``max_unpool3d(x, indices, output_size, stride, padding)``: ``indices`` are flat
    positions in each output plane, so the op is a scatter of ``x`` viewed as [N, C, L] along
    its last dim into a zero plane [N, C, prod(output_size)], viewed back: the sources each
    position keeps (:func:`_write_mask`) reduced over K (:func:`_written`). FP selects zeros
    where none lands (the max there is the -inf filler); INT sums with a filler of 0 and needs
    no select.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x, i):
        ...         return torch.nn.functional.max_unpool2d(x, i, 2)
        >>> y, i = torch.nn.functional.max_pool2d(torch.randn(1, 2, 4, 4), 2, return_indices=True)
        >>> lowering.lower(M(), (y, i), profile="FP").cpu_nodes
        []
    """
    x, index = n.args[0], n.args[1]
    vx, vi, vo = val(x), val(index), val(n)
    spatial = 2 if n.target == aten.max_unpool2d.default else 3
    if vx is None or vi is None or vo is None or vx.dtype != torch.float32 or vi.is_floating_point() or \
            vx.dim() not in (spatial + 1, spatial + 2) or tuple(vi.shape) != tuple(vx.shape) or \
            vx.numel() == 0 or vo.numel() == 0:
        return None
    planes = list(vx.shape[:-spatial])
    sources = vx.shape[-spatial:].numel()
    positions = vo.shape[-spatial:].numel()
    index_last = b(aten.reshape.default, index, planes + [sources])
    if not _within_bounds(val(index_last), positions):
        return None
    mask = _write_mask(gm, b, index_last, positions)
    flat = b(aten.reshape.default, x, planes + [sources])
    written = _written(gm, b, mask, flat, vx.dtype)
    if b.profile == "FP":
        zero = number_const(gm, b, 0.0, vx.dtype, written, "zero")
        written = b(aten.where.self, b(aten.any.dim, mask, -2, False), written, zero)
    return b(aten.reshape.default, written, list(vo.shape))

