"""Batched products and condensed distances in terms of ops with a TOSA visitor:
``torch.addbmm`` as one ``addmm`` and ``F.pdist`` as a ``pairwise_distance`` of gathered rows.

(``torch.baddbmm`` lowers through :func:`.matmul.baddbmm`, ``torch.cdist`` through
:func:`.distance.cdist`.)

Every piece lowers in both profiles, or the rewrite returns None and the op stays whole on the
CPU (a CPU piece would leave a partition boundary with no PyTorch node, see :mod:`.composite`).

Claims:
- addbmm: ``sum_b batch1[b] @ batch2[b]`` is the single product of ``batch1`` laid out as
  [n, B * m] and ``batch2`` as [B * m, p]; FP rounds as one dot product of length B * m where
  PyTorch adds B products of length m one by one (the same terms, another order: a few ulps of
  the result). INT: one MATMUL whose int32 accumulator holds the whole batch sum exactly,
  requantized once (bmm then a sum would requantize every product first); ``alpha`` / ``beta``
  and the add as :func:`.matmul._addmm` quantizes them.
- pdist: the rows ``x[i]`` and ``x[j]`` of every pair ``i < j`` (PyTorch's condensed order)
  are gathered by two constant-index selects and their difference's p-norm taken as
  ``pairwise_distance(eps=0)`` (:func:`.distance.pairwise_distance`): ``sqrt(sum(d * d))``
  (p = 2), ``sum(|d|)`` (1), ``max(|d|)`` (inf), ``sum(|d| ** p) ** (1 / p)``; FP within a few
  ulps of PyTorch's kernel, which sums the same terms. INT: the gathers share ``x``'s
  quantization, the difference and the norm requantize as the fake-quant model does. p = 0 (a
  count) has no lowering: it stays on the CPU, as does p = inf in INT (it reaches this pass as
  :data:`lowering.passes.limits.BOUND`: ``BoundInfiniteScalars`` bounds pdist's order). The pairs grow as N * N: beyond
  :data:`lowering.passes.limits.QUADRATIC_ELEMENTS` gathered elements the op stays on the CPU.
"""

from __future__ import annotations

import math

import torch

from ...graph_utils import val
from ..limits import BOUND, within_quadratic_bound
from ._common import PASS, arg, decomposition, is_float  # noqa: F401 - PASS for the doctests

aten = torch.ops.aten


# ----------------------------------------------------------------------------- addbmm
@decomposition(aten.addbmm.default)
def addbmm(gm, n, b):
    """``addbmm(input, batch1 [B, n, m], batch2 [B, m, p], beta, alpha)`` =
    ``beta * input + alpha * sum_b batch1[b] @ batch2[b]``: the batch sum is one matrix product
    ``[batch1[0] | ... | batch1[B-1]] @ [batch2[0]; ...; batch2[B-1]]`` (``batch1`` permuted
    to [n, B, m] and viewed as [n, B * m], ``batch2`` viewed as [B * m, p]), so the op is an
    ``addmm`` (beta = 0 ignores ``input``, as PyTorch does).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, i, x, y):
        ...         return torch.addbmm(i, x, y)
        >>> xs = (torch.randn(2, 3), torch.randn(4, 2, 5), torch.randn(4, 5, 3))
        >>> lowering.lower(M(), xs, profile="FP").cpu_nodes
        []
    """
    bias, b1, b2 = n.args[:3]
    v1, v2, vb = val(b1), val(b2), val(bias)
    if v1 is None or v2 is None or vb is None or v1.dim() != 3 or v2.dim() != 3 or \
            not (is_float(b1) and is_float(b2)) or v1.numel() == 0 or v2.numel() == 0:
        return None
    batches, rows, inner = v1.shape
    cols = v2.shape[2]
    left = b(aten.reshape.default, b(aten.permute.default, b1, [1, 0, 2]), [rows, batches * inner])
    right = b(aten.reshape.default, b2, [batches * inner, cols])
    return b(aten.addmm.default, bias, left, right, beta=arg(n, 3, "beta", 1), alpha=arg(n, 4, "alpha", 1))


# ----------------------------------------------------------------------------- pdist
def condensed_pairs(rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The row indices ``(i, j)`` of every pair ``i < j`` of ``rows`` rows, in ``F.pdist``'s
    order (``i`` ascending, then ``j``).

    Example:
        >>> [t.tolist() for t in condensed_pairs(3)]
        [[0, 0, 1], [1, 2, 2]]
    """
    i, j = torch.triu_indices(rows, rows, 1)
    return i, j


@decomposition(aten.pdist.default, aten._pdist_forward.default)
def pdist(gm, n, b):
    """``F.pdist(x [N, M], p)``: the p-norm of ``x[i] - x[j]`` for every pair ``i < j``, in
    :func:`condensed_pairs` order, [N * (N - 1) / 2]: two constant-index ``index_select`` of
    the rows, then ``pairwise_distance(x_i, x_j, p, eps=0)``, which :mod:`.distance` decomposes
    (positive p or inf; p = 0 stays on the CPU).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.pdist(x)
        >>> lowering.lower(M(), (torch.randn(5, 3),), profile="FP").cpu_nodes
        []
    """
    x = n.args[0]
    p = arg(n, 1, "p", 2.0)
    v = val(x)
    if v is None or v.dim() != 2 or v.dtype != torch.float32 or not isinstance(p, (int, float)) or \
            math.isnan(p) or not (p > 0 or math.isinf(p)):
        return None
    if b.profile == "INT" and float(p) >= BOUND:
        # an INT p = inf arrives as BOUND (limits.BoundInfiniteScalars does not spare pdist's
        # order), and no int8 TABLE holds |d| ** 256: CPU
        return None
    rows, width = v.shape
    if rows < 2 or width == 0 or not within_quadratic_bound(rows * (rows - 1) // 2, width):
        return None  # no pairs (an empty result), or an intermediate too large
    i, j = condensed_pairs(rows)
    first = b(aten.index_select.default, x, 0, b.const(gm, i, "pair_i"))
    second = b(aten.index_select.default, x, 0, b.const(gm, j, "pair_j"))
    return b(aten.pairwise_distance.default, first, second, float(p), 0.0, False)
