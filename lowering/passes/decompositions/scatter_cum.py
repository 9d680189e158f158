"""Accumulating scatters and the cumulative product, in terms of comparisons, where and
reductions: ``Tensor.scatter_add`` / ``torch.scatter_add``, ``index_add``,
``scatter_reduce(reduce="sum" / "prod" / "amax" / "amin" / "mean", include_self)`` and
``torch.cumprod``.

TOSA SCATTER writes each row once, so duplicate indices could not accumulate through it.
Here every destination position ``p`` along ``dim`` looks at all ``K`` source entries at once:
the one-hot mask ``index[..., k] == p`` ([..., K, P]) selects the sources that land on it
(``where(mask, src, identity)``, the reduction's identity elsewhere: 0, 1, -inf / +inf), and one
REDUCE over K combines them; duplicates accumulate by construction. The mask grows as K * P, so
beyond :data:`lowering.passes.limits.QUADRATIC_ELEMENTS` the op stays on the CPU whole.

Every piece lowers in the profile a rewrite is registered for, or the rewrite returns None and
the op stays whole on the CPU (a CPU piece would leave a partition boundary with no PyTorch
node, see :mod:`.composite`).

Claims:
- Integer tensors (int32 / int64 carried as int32): exact (integer compare, select, sum,
  max / min; int32 sums wrap where int64 would not, so sums must stay within int32). amax /
  amin of integers in FP only (INT's max reduction requantizes: they stay on the CPU there).
- FP, float tensors: PyTorch adds duplicates one by one onto ``self`` in index order; REDUCE_SUM
  adds the K candidates (zeros where the mask is False, which add exactly) in its own order, then
  ``self``. A position hit once is PyTorch's bit for bit; one hit d times differs by the
  rounding of d additions (a few ulps of the sum). amax / amin are exact. ``prod`` multiplies in
  REDUCE_PRODUCT's order (ones elsewhere: exact), FP only (TOSA has no integer REDUCE_PRODUCT).
  "mean" (float only) multiplies the sum by ``1 / count`` looked up in a constant table where
  PyTorch divides: within an ulp more.
- INT (int8): sum, amax, amin, mean with float tensors. The mask's where shares ``src``'s quantization
  (its filler too: 0, or for amax / amin ``src``'s own min / max instead of an infinity, which
  the shared observer would see); the sum has its own observer and the combination with
  ``self`` (add, maximum, or where for ``include_self=False``) requantizes once, each as the
  fake-quant model does: within one output step of it (mean: one more requantized product with
  the looked-up reciprocal).
- cumprod: FP only, float tensors: ``prod(where(j <= i, x[..., j], 1))`` over a [..., L, L]
  triangle, one REDUCE_PRODUCT (measured against PyTorch's sequential products in the tests).
  INT is not claimed: TOSA 1.0 has no integer product reduction, and a chain of int8 MULs, each
  requantized, has no scale that holds both the early and the late partial products; it stays
  on the CPU.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ...graph_utils import get_constant, inverse, val
from ..limits import within_quadratic_bound
from ._common import PASS, arg, decomposition, number_const  # noqa: F401 - PASS for the doctests

aten = torch.ops.aten

_FLOAT_REDUCTIONS = {"sum", "prod", "amax", "amin", "mean"}
_INTEGER_DTYPES = (torch.int32, torch.int64)


def _last(b, t: fx.Node, d: int, rank: int) -> fx.Node:
    """``t`` with dim ``d`` moved last (a permute; none when it is last already)."""
    if d == rank - 1:
        return t
    return b(aten.permute.default, t, [i for i in range(rank) if i != d] + [d])


def _back(b, t: fx.Node, d: int, rank: int) -> fx.Node:
    """The inverse of :func:`_last`."""
    if d == rank - 1:
        return t
    return b(aten.permute.default, t, list(inverse(tuple(i for i in range(rank) if i != d) + (d,))))


def _identity(reduce: str, dtype: torch.dtype) -> float | int:
    """The value that leaves ``reduce`` unchanged (the mask's filler in FP)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    info = torch.iinfo(torch.int32)  # int64 tensors are carried as int32 in TOSA
    return info.min if reduce == "amax" else info.max


_REDUCE_OP = {"sum": aten.sum.dim_IntList, "mean": aten.sum.dim_IntList, "prod": None,
              "amax": aten.amax.default, "amin": aten.amin.default}
_COMBINE = {"sum": aten.add.Tensor, "prod": aten.mul.Tensor, "amax": aten.maximum.default,
            "amin": aten.minimum.default}


def _reduce_k(b, t: fx.Node, reduce: str) -> fx.Node:
    """``t`` [..., K, P] reduced over K (dim -2)."""
    if reduce == "prod":
        return b(aten.prod.dim_int, t, -2, False)
    return b(_REDUCE_OP[reduce], t, [-2], False)


def _scatter_reduced(gm, b, x, d: int, hot_index, src_last, reduce: str, include_self: bool,
                     count: int):
    """``x`` with, along dim ``d``, the sources ``src_last`` [..., K] (dim ``d``'s sources moved
    last) reduced onto the positions ``hot_index`` ([..., K] or [K], broadcasting against
    ``src_last``) names. ``count`` is the number of mask elements (for the size bound)."""
    vx = val(x)
    rank = vx.dim()
    positions = vx.shape[d]
    if not within_quadratic_bound(count, positions):
        return None
    idt = val(hot_index).dtype
    hot = b(aten.eq.Tensor, b(aten.unsqueeze.default, hot_index, -1),
            b.const(gm, torch.arange(positions, dtype=idt), "positions"))  # [..., K, P]
    src = b(aten.unsqueeze.default, src_last, -1)  # [..., K, 1]
    if b.profile == "INT" and vx.is_floating_point() and reduce in ("amax", "amin"):
        # a filler within src's range: an infinity would reach the observer src shares
        filler = b(aten.amin.default if reduce == "amax" else aten.amax.default, src_last,
                   list(range(val(src_last).dim())), True)
        filler = b(aten.unsqueeze.default, filler, -1)
    else:
        filler = number_const(gm, b, _identity(reduce, vx.dtype), vx.dtype, x, "identity")
    reduced = _back(b, _reduce_k(b, b(aten.where.self, hot, src, filler), reduce), d, rank)
    if reduce == "mean":
        return _mean(gm, b, x, reduced, hot, d, include_self, val(src_last).shape[-1])
    if include_self:
        return b(_COMBINE[reduce], x, reduced)
    return b(aten.where.self, _hit(b, hot, d, rank, vx.shape), reduced, x)


def _hit(b, hot, d: int, rank: int, shape) -> fx.Node:
    """Whether any source lands on each position of ``self`` (``shape``)."""
    hit = _back(b, b(aten.any.dim, hot, -2, False), d, rank)
    if val(hit) is not None and tuple(val(hit).shape) != tuple(shape):
        hit = b(aten.expand.default, hit, list(shape))
    return hit


def _mean(gm, b, x, summed, hot, d: int, include_self: bool, sources: int) -> fx.Node:
    """scatter_reduce "mean": ``(self + sum) / (count + 1)`` (``include_self``), else
    ``sum / count`` where a source lands and ``self`` elsewhere, as PyTorch's kernel divides by
    the count (a count of 0 taken as 1). ``1 / count`` is looked up in the constant table
    ``[0, 1, 1/2, ... 1/(K + 1)]`` by the integer count (an embedding GATHER: exact in FP up to
    the multiplication's rounding where PyTorch divides, one quantized table in INT)."""
    rank = val(x).dim()
    counts = _back(b, b(aten.sum.dim_IntList, b(aten._to_copy.default, hot, dtype=torch.int32), [-2], False),
                   d, rank)
    total = summed
    if include_self:
        counts = b(aten.add.Tensor, counts, number_const(gm, b, 1, torch.int32, counts, "one"))
        total = b(aten.add.Tensor, x, summed)
    table = torch.tensor([0.0] + [1.0 / c for c in range(1, sources + 2)]).reshape(-1, 1)
    recip = b(aten.embedding.default, b.const(gm, table, "reciprocal"), counts)  # [..., 1]
    recip = b(aten.reshape.default, recip, list(val(counts).shape))
    mean = b(aten.mul.Tensor, total, recip)
    if include_self:
        return mean
    return b(aten.where.self, _hit(b, hot, d, rank, val(x).shape), mean, x)


def _supported(vx, vs, reduce: str, profile: str) -> bool:
    """Whether the dtypes and reduction have a lowering (see the module's claims)."""
    if vx is None or vs is None or vx.dtype != vs.dtype or vx.dim() == 0 or vx.numel() == 0:
        return False
    if vx.dtype == torch.float32:
        return reduce in _FLOAT_REDUCTIONS and not (reduce == "prod" and profile == "INT")
    # INT's REDUCE_MAX / MIN visitor requantizes its result: integer maxima are FP only
    return vx.dtype in _INTEGER_DTYPES and (reduce == "sum" or (reduce in ("amax", "amin") and profile == "FP"))


def _scatter(gm, n, b, reduce: str, include_self: bool):
    """scatter_add / scatter_reduce: ``out[..., index[i], ...] (op)= src[i]`` along ``dim``.
    ``src`` beyond ``index``'s extent is unused (sliced off); an ``index`` narrower than ``self``
    in another dim (a constant one) is padded with a position no mask matches."""
    x, d, index, src = n.args[:4]
    vx, vi, vs = val(x), val(index), val(src)
    if vi is None or vi.is_floating_point() or not _supported(vx, vs, reduce, b.profile) or \
            vi.dim() != vx.dim() or vs.dim() != vx.dim() or vi.numel() == 0:
        return None
    rank = vx.dim()
    d %= rank
    for e in range(rank):
        if vs.shape[e] > vi.shape[e]:
            src = b(aten.slice.Tensor, src, e, 0, vi.shape[e])
    narrower = [e for e in range(rank) if e != d and vi.shape[e] < vx.shape[e]]
    if narrower:
        known = get_constant(gm, index)
        if known is None:
            return None
        pads = []
        for e in reversed(range(rank)):  # constant_pad_nd's order: the last dim first
            pads += [0, vx.shape[e] - vi.shape[e] if e != d else 0]
        index = b.const(gm, torch.nn.functional.pad(known, pads, value=vx.shape[d]), "index")
        src = b(aten.constant_pad_nd.default, src, pads, 0.0 if vx.is_floating_point() else 0)
    count = vx.numel() // vx.shape[d] * vi.shape[d]
    return _scatter_reduced(gm, b, x, d, _last(b, index, d, rank), _last(b, src, d, rank),
                            reduce, include_self, count)


@decomposition(aten.scatter_add.default)
def scatter_add(gm, n, b):
    """``x.scatter_add(dim, index, src)``: :func:`_scatter` summing (duplicates accumulate).

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.scatter_add.default].fn.__name__
        'scatter_add'
    """
    return _scatter(gm, n, b, "sum", True)


@decomposition(aten.scatter_reduce.two)
def scatter_reduce(gm, n, b):
    """``x.scatter_reduce(dim, index, src, reduce, include_self)`` for ``reduce`` in sum, prod
    (FP, float), amax, amin, mean (float: :func:`_mean`); ``include_self=False`` takes the sources
    alone where any lands (``self`` elsewhere). An integer "mean" (a floor division) stays on
    the CPU.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.scatter_reduce.two].fn.__name__
        'scatter_reduce'
    """
    reduce = arg(n, 4, "reduce")
    if reduce not in _REDUCE_OP:
        return None
    return _scatter(gm, n, b, reduce, bool(arg(n, 5, "include_self", True)))


@decomposition(aten.index_add.default)
def index_add(gm, n, b):
    """``x.index_add(dim, index, source, alpha)``: ``x[..., index[k], ...] += alpha *
    source[..., k, ...]`` (1-D ``index``, duplicates accumulate): the one-hot mask is [K, P],
    broadcast over ``source``'s other dims; ``alpha`` multiplies ``source`` first, as
    PyTorch's kernel scales each source slice.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.index_add.default].fn.__name__
        'index_add'
    """
    x, d, index, source = n.args[:4]
    alpha = arg(n, 4, "alpha", 1)
    vx, vi, vs = val(x), val(index), val(source)
    if vi is None or vi.is_floating_point() or vi.dim() > 1 or not _supported(vx, vs, "sum", b.profile) or \
            vs.dim() != vx.dim() or vi.numel() == 0:
        return None
    rank = vx.dim()
    d %= rank
    if alpha != 1:
        if not vx.is_floating_point() and not float(alpha).is_integer():
            return None
        source = b(aten.mul.Tensor, source, number_const(gm, b, alpha, vx.dtype, source, "alpha"))
    index = b(aten.reshape.default, index, [vi.numel()])
    return _scatter_reduced(gm, b, x, d, index, _last(b, source, d, rank), "sum", True,
                            vx.numel() // vx.shape[d] * vi.numel())


# --------------------------------------------------------------------------- cumprod


@decomposition(aten.cumprod.default, profiles={"FP"})
def cumprod(gm, n, b):
    """``cumprod(x, dim)`` of a float32 tensor (FP): ``out[..., i] = prod_j where(j <= i,
    x[..., j], 1)``, one REDUCE_PRODUCT over the last dim of a [..., L, L] select of the lower
    triangle (the ones multiply exactly, so each row is ``x[0] * ... * x[i]``; zeros, infinities
    and NaN propagate as in PyTorch's running product).

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> sorted(REWRITES[PASS][aten.cumprod.default].profiles)
        ['FP']
    """
    x, d = n.args[0], n.args[1]
    v = val(x)
    dtype = n.kwargs.get("dtype")
    if v is None or v.dtype != torch.float32 or (dtype is not None and dtype != v.dtype) or \
            v.numel() == 0:
        return None
    if v.dim() == 0:
        return x
    rank = v.dim()
    d %= rank
    length = v.shape[d]
    if not within_quadratic_bound(v.numel(), length):
        return None
    lower = torch.ones(length, length, dtype=torch.bool).tril()  # [i, j]: j <= i
    rows = b(aten.unsqueeze.default, _last(b, x, d, rank), -2)  # [..., 1, L]
    picked = b(aten.where.self, b.const(gm, lower, "lower"), rows,
               number_const(gm, b, 1.0, torch.float32, x, "one"))
    return _back(b, b(aten.prod.dim_int, picked, -1, False), d, rank)
