"""Sorting without a TOSA sort: ``torch.sort`` (``sort.default``, ``sort.stable``), ``topk``,
``argsort`` (``argsort.default``, ``argsort.stable``), ``msort``, ``kthvalue`` and ``median``
(``median.dim``, ``median.default``) rewritten into comparisons, integer sums and one GATHER.

The rank of element ``i`` along the sorted dim (length N) is the number of elements that come
before it: ``rank_i = sum_j before(j, i)``, with ``before(j, i) = x_j > x_i or (x_j == x_i and
j < i)`` for a descending sort (``<`` ascending). That is a stable sort: equal values keep their
order, as ``torch.sort(stable=True)`` orders them, and ``topk``'s values come out in that order
whatever ``sorted`` says (``sorted=False`` allows any order). The ranks are a permutation of
``0 .. N-1``, so the index at sorted position ``r`` is ``sum_i i * (rank_i == r)``: one term is
non-zero. Both sums run in int32 (int64 in the graph, carried as int32 by
:mod:`lowering.passes.int64`) and are exact for N < 2**31; no float ever holds an index. The
values are ``gather(x, dim, indices)``: a TOSA GATHER moves the input's own bits (in INT its
int8 levels, and the quantizer gives gather's output the input's quantization, so the sorted
values are the input's levels in sorted order, 0 steps off).

INT compares the int8 levels (both sides of each comparison are the same tensor, one scale),
which orders the values as the fake-quant model's dequantized values are ordered; equal levels
tie and the stable order decides.

FP puts NaN after every number (largest), NaNs in index order among themselves, as PyTorch's
sort does: ``before`` gains ``isnan(x_j) and (j < i or not isnan(x_i))`` (descending; ascending
mirrored). ``median`` propagates a NaN as PyTorch's does (its value NaN, its index the first
NaN's); ``kthvalue`` does not (the k-th of the NaN-last order, as PyTorch's). INT has no NaN.

Ties that PyTorch breaks otherwise: the unstable ``sort.default`` / ``argsort.default`` on CPU
(found stable up to 16 elements a row, not from 17), ``topk`` and ``kthvalue`` (a selection)
may return another index of an equal value; ours is always the stable order's. ``median.dim``
on CPU returns the stable lower median's index (NaN rows included: claimed and tested). The
values are the same either way.

Cost: the [..., N, N] comparison (five or so element-wise ops, three more in FP for NaN) and an
[..., N, K] one-hot for K outputs. Beyond :data:`lowering.passes.limits.QUADRATIC_ELEMENTS`
elements in that comparison the op stays on the CPU whole.
"""

from __future__ import annotations

import operator

import torch

from ...graph_utils import val
from ..limits import within_quadratic_bound
from ._common import arg, decomposition, tuple_outputs

aten = torch.ops.aten

#: dtypes the rewrite sorts: float32 (FP, or quantized in INT) and integers (indices, counts;
#: int64 is carried as int32). int8 / int16 tensors compare as int32 (TOSA's GREATER and EQUAL
#: take int32 only); float16 is left to the CPU (not tested here).
_SORTABLE = {torch.float32, torch.int8, torch.int16, torch.int32, torch.int64}
_WIDENED = {torch.int8, torch.int16}


def _sortable(x, dim) -> int | None:
    """The sorted dim of ``x`` (``dim`` wrapped), or None when the rewrite does not apply: no
    known value, a 0-d or empty tensor, a dtype it does not sort, or a comparison tensor beyond
    the quadratic bound.

    Example:
        >>> import torch.fx as fx
        >>> g = fx.Graph(); x = g.placeholder("x"); x.meta["tv_val"] = torch.ones(3, 5)
        >>> _sortable(x, -1), _sortable(x, 0)
        (1, 0)
        >>> x.meta["tv_val"] = torch.ones(2, 2048); _sortable(x, -1) is None
        True
    """
    v = val(x)
    if v is None or v.dim() == 0 or v.numel() == 0 or v.dtype not in _SORTABLE or \
            not isinstance(dim, int):
        return None
    d = dim % v.dim()
    n = v.shape[d]
    # the [..., N, N] comparison is the largest intermediate
    if not within_quadratic_bound(v.numel() // n, n, n):
        return None
    return d


def _trailing(v, d: int) -> list[int]:
    """Ones for the dims after ``d``: a constant laid along dim ``d`` (and ``d + 1``) broadcasts
    over them."""
    return [1] * (v.dim() - 1 - d)


def _ranks(gm, b, x, d: int, descending: bool):
    """Each element's position in the stable sort of ``x`` along ``d`` (int64, ``x``'s shape):
    ``sum_j before(j, i)``, the comparison laid out [..., N (i), N (j), ...]."""
    v = val(x)
    n = v.shape[d]
    rest = _trailing(v, d)
    if v.dtype in _WIDENED:
        x = b(aten._to_copy.default, x, dtype=torch.int32)  # the same order, a type TOSA compares
    xi = b(aten.unsqueeze.default, x, d + 1)  # [..., N, 1, ...]: element i along d
    xj = b(aten.unsqueeze.default, x, d)      # [..., 1, N, ...]: element j along d + 1
    j_first = torch.ones(n, n, dtype=torch.bool).tril(-1).reshape([n, n] + rest)  # j < i
    j_first = b.const(gm, j_first, "sort_j_first")
    # j < i: j comes first when it is not after x_i (>= / <=); j > i: only when strictly before
    weak, strict = (aten.ge.Tensor, aten.gt.Tensor) if descending else (aten.le.Tensor, aten.lt.Tensor)
    before = b(aten.where.self, j_first, b(weak, xj, xi), b(strict, xj, xi))
    if v.is_floating_point() and b.profile != "INT":
        before = _nan_last(b, before, xi, xj, j_first, descending)
    counts = b(aten._to_copy.default, before, dtype=torch.int64)
    return b(aten.sum.dim_IntList, counts, [d + 1])


def _nan_last(b, before, xi, xj, j_first, descending: bool):
    """``before`` with NaN as the largest value: every comparison with a NaN is false, so
    descending adds ``isnan(x_j) and (j < i or not isnan(x_i))`` (a NaN comes before every
    number and after the NaNs left of it); ascending the mirror ``isnan(x_i) and (j < i or not
    isnan(x_j))`` (a number comes before every NaN)."""
    nan_i, nan_j = (b(aten.ne.Tensor, t, t) for t in (xi, xj))
    first, other = (nan_j, nan_i) if descending else (nan_i, nan_j)
    ahead = b(aten.logical_and.default, first,
              b(aten.logical_or.default, j_first, b(aten.logical_not.default, other)))
    return b(aten.logical_or.default, before, ahead)


def _position_index(gm, b, x, d: int, position):
    """The index of one ascending stable-sort position (an int, or a node with one per row)
    of ``x`` along ``d``, 1 along ``d``."""
    ranks = _ranks(gm, b, x, d, False)
    return _index_of(gm, b, ranks, d, [position] if isinstance(position, int) else position)


def _index_of(gm, b, ranks, d: int, targets):
    """The index ``sum_i i * (rank_i == target)`` of each target position: ``targets`` a list
    of positions (the result has their count along ``d``) or a node holding one position per
    row ([..., 1, ...] along ``d``: the result has 1 there)."""
    v = val(ranks)
    n = v.shape[d]
    rest = _trailing(v, d)
    if isinstance(targets, list):
        wanted = b.const(gm, torch.tensor(targets, dtype=torch.int64).reshape([len(targets)] + rest),
                         "sort_positions")
    else:
        wanted = b(aten.unsqueeze.default, targets, d)  # [..., 1, 1, ...]
    hit = b(aten.eq.Tensor, b(aten.unsqueeze.default, ranks, d + 1), wanted)  # [..., N, K, ...]
    iota = b.const(gm, torch.arange(n, dtype=torch.int64).reshape([n, 1] + rest), "sort_iota")
    zero = b.const(gm, torch.zeros([1] * (v.dim() + 1), dtype=torch.int64), "sort_zero")
    return b(aten.sum.dim_IntList, b(aten.where.self, hit, iota, zero), [d])


def _sort_indices(gm, b, x, d: int, descending: bool, k: int | None = None):
    """The indices of the first ``k`` (all by default) positions of the stable sort of ``x``
    along ``d`` (int64, ``x``'s shape with ``k`` along ``d``)."""
    n = val(x).shape[d]
    return _index_of(gm, b, _ranks(gm, b, x, d, descending), d, list(range(n if k is None else k)))


def _values(b, x, d: int, indices):
    """``x`` at ``indices`` along ``d``: one GATHER, exact (and in INT the input's levels)."""
    return b(aten.gather.default, x, d, indices)


def _read_by_getitems(n) -> bool:
    """Whether every reader of ``n``'s tuple result is a getitem (checked before building
    anything: :func:`tuple_outputs` declines otherwise, which would leave the new nodes)."""
    return all(u.target is operator.getitem for u in n.users)


def _used(n, i: int) -> bool:
    """Whether element ``i`` of ``n``'s tuple result is read."""
    return any(u.args[1] == i and u.users for u in n.users)


def _tuple_result(n, b, x, d, indices):
    """Replace ``n``'s (values, indices) getitems; the GATHER only when the values are read."""
    values = _values(b, x, d, indices) if _used(n, 0) else None
    return tuple_outputs(n, [values, indices])


@decomposition(aten.sort.default, aten.sort.stable)
def sort(gm, n, b):
    """``sort(x, dim=-1, descending=False)`` / ``sort(x, *, stable, dim, descending)``:
    the stable sort's values and indices (``stable=False`` allows any order of equal values;
    this one is stable).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.sort(x, 0, descending=True)
        >>> x = torch.tensor([[2.0, 5.0], [7.0, 5.0], [2.0, 1.0]])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, [t.tolist() for t in lm.run(x)]
        ([], [[[7.0, 5.0], [2.0, 5.0], [2.0, 1.0]], [[1, 0], [0, 1], [2, 2]]])
    """
    x = n.args[0]
    dim, descending = _dim_descending(n, aten.sort.stable)
    d = _sortable(x, dim)
    if d is None or not _read_by_getitems(n):
        return None
    return _tuple_result(n, b, x, d, _sort_indices(gm, b, x, d, bool(descending)))


def _dim_descending(n, stable) -> tuple:
    """(dim, descending) of a sort / argsort node: positional after the input, or keywords
    only in the ``stable`` overload (``sort(x, *, stable, dim, descending)``)."""
    if n.target == stable:
        return n.kwargs.get("dim", -1), n.kwargs.get("descending", False)
    return arg(n, 1, "dim", -1), arg(n, 2, "descending", False)


@decomposition(aten.argsort.default, aten.argsort.stable)
def argsort(gm, n, b):
    """``argsort(x, dim=-1, descending=False)`` / ``argsort(x, *, stable, dim, descending)``:
    the stable sort's indices, no GATHER.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x.argsort(-1, True)
        >>> x = torch.tensor([[0.5, -1.0, 0.5, 2.0]])
        >>> lm = lowering.lower(M(), (x,), profile="INT", calibration=[(x,)])
        >>> lm.cpu_nodes, "GATHER" in lm.op_counts, lm.run(x)[0].tolist()
        ([], False, [[3, 0, 2, 1]])
    """
    x = n.args[0]
    dim, descending = _dim_descending(n, aten.argsort.stable)
    d = _sortable(x, dim)
    if d is None:
        return None
    return _sort_indices(gm, b, x, d, bool(descending))


@decomposition(aten.msort.default)
def msort(gm, n, b):
    """``msort(x)``: the values of the ascending sort along dim 0.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.msort(x)
        >>> x = torch.tensor([[0.25, 1.0], [-0.5, 0.75], [0.0, -1.0]])
        >>> lm = lowering.lower(M(), (x,), profile="INT", calibration=[(x,)])
        >>> lm.cpu_nodes, torch.equal(lm.run(x)[0], lm.quantized_model(x).sort(0).values)
        ([], True)
    """
    x = n.args[0]
    d = _sortable(x, 0)
    if d is None:
        return None
    return _values(b, x, d, _sort_indices(gm, b, x, d, False))


@decomposition(aten.topk.default)
def topk(gm, n, b):
    """``topk(x, k, dim=-1, largest=True, sorted=True)``: the first ``k`` positions of the
    stable sort (descending when ``largest``), always in sorted order (``sorted=False`` lets
    PyTorch return any order); only a [..., N, k] one-hot for the k positions.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.topk(x, 2, largest=False)
        >>> x = torch.tensor([[3.0, float("nan"), -1.0, 3.0], [1.0, 1.0, 0.0, 4.0]])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, [t.tolist() for t in lm.run(x)]
        ([], [[[-1.0, 3.0], [0.0, 1.0]], [[2, 0], [2, 0]]])
    """
    x, k = n.args[0], arg(n, 1, "k")
    dim, largest = arg(n, 2, "dim", -1), arg(n, 3, "largest", True)
    d = _sortable(x, dim)
    if d is None or not isinstance(k, int) or not 0 < k <= val(x).shape[d] or \
            not _read_by_getitems(n):
        return None  # k = 0 (an empty result) or a k known only at run time: the CPU's
    return _tuple_result(n, b, x, d, _sort_indices(gm, b, x, d, bool(largest), k))


def _selected(gm, b, n, x, d: int, position, keepdim: bool):
    """``(values, indices)`` of one position (an int, or a node with one per row) of the
    ascending stable sort along ``d``, ``d`` kept or dropped as ``keepdim`` says."""
    indices = _position_index(gm, b, x, d, position)
    values = _values(b, x, d, indices) if _used(n, 0) else None
    if not keepdim:
        indices = b(aten.squeeze.dims, indices, [d])
        values = None if values is None else b(aten.squeeze.dims, values, [d])
    return tuple_outputs(n, [values, indices])


@decomposition(aten.kthvalue.default)
def kthvalue(gm, n, b):
    """``kthvalue(x, k, dim=-1, keepdim=False)``: position ``k - 1`` of the ascending stable
    sort (NaN last, as PyTorch orders it). Among equal values PyTorch's selection may return
    another index than this first one of the stable order; the value is the same.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.kthvalue(x, 2, 0, keepdim=True)
        >>> x = torch.tensor([[4.0, 1.0], [2.0, 1.0], [3.0, 0.0]])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, [t.tolist() for t in lm.run(x)]
        ([], [[[3.0, 1.0]], [[2, 0]]])
    """
    x, k = n.args[0], arg(n, 1, "k")
    dim, keepdim = arg(n, 2, "dim", -1), bool(arg(n, 3, "keepdim", False))
    d = _sortable(x, dim)
    if d is None or not isinstance(k, int) or not 0 < k <= val(x).shape[d] or \
            not _read_by_getitems(n):
        return None
    return _selected(gm, b, n, x, d, k - 1, keepdim)


@decomposition(aten.median.dim)
def median_dim(gm, n, b):
    """``median(x, dim, keepdim=False)``: the lower median, position ``(N - 1) // 2`` of the
    ascending stable sort. In FP a row holding a NaN gives NaN, at the first NaN's index, as
    PyTorch's does: that NaN's position in the NaN-last order is ``N - count(NaN)``.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x.median(-1)
        >>> x = torch.tensor([[4.0, 1.0, 2.0, 3.0], [1.0, float("nan"), 0.0, float("nan")]])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, [t.tolist() for t in lm.run(x)]
        ([], [[2.0, nan], [2, 1]])
    """
    x, dim, keepdim = n.args[0], arg(n, 1, "dim", 0), bool(arg(n, 2, "keepdim", False))
    d = _sortable(x, dim)
    if d is None or not _read_by_getitems(n):
        return None
    return _selected(gm, b, n, x, d, _median_position(gm, b, x, d), keepdim)


def _median_position(gm, b, x, d: int):
    """The sorted position the median reads: ``(N - 1) // 2``, or in FP (floats) a node
    ``where(nans > 0, N - nans, (N - 1) // 2)`` per row ([..., 1, ...] along ``d``)."""
    v = val(x)
    n = v.shape[d]
    middle = (n - 1) // 2
    if not v.is_floating_point() or b.profile == "INT":
        return middle
    shape = [1] * v.dim()
    nans = b(aten.sum.dim_IntList, b(aten._to_copy.default, b(aten.ne.Tensor, x, x),
                                     dtype=torch.int64), [d], True)
    total, mid, zero = (b.const(gm, torch.full(shape, c, dtype=torch.int64), name)
                        for c, name in ((n, "median_n"), (middle, "median_middle"), (0, "median_zero")))
    return b(aten.where.self, b(aten.gt.Tensor, nans, zero), b(aten.sub.Tensor, total, nans), mid)


@decomposition(aten.median.default)
def median_all(gm, n, b):
    """``median(x)`` of a whole tensor: the lower median of ``x`` flattened (see
    :func:`median_dim`), a 0-d value.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.median(x)
        >>> x = torch.tensor([[4.0, 1.0], [2.0, 3.0]])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, lm.run(x)[0].item()
        ([], 2.0)
    """
    x = n.args[0]
    v = val(x)
    if v is None or v.numel() == 0 or _sortable(x, 0) is None or \
            not within_quadratic_bound(v.numel(), v.numel()):
        return None
    flat = b(aten.reshape.default, x, [v.numel()])
    indices = _position_index(gm, b, flat, 0, _median_position(gm, b, flat, 0))
    return b(aten.reshape.default, _values(b, flat, 0, indices), [])

