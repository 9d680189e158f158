"""Classification losses a model may compute in its forward (labels as inputs), in terms of
log_softmax, comparisons, where, products and sums: ``F.cross_entropy`` (class-index targets
with ``weight``, ``ignore_index``, ``reduction`` and ``label_smoothing``; probability targets),
``F.nll_loss`` (``nll_loss_nd`` as exported; ``nll_loss_forward`` / ``nll_loss2d_forward`` and
their total weight too) and ``F.binary_cross_entropy_with_logits`` (``weight``, ``pos_weight``).

Class-index targets (int64 inputs, carried as int32) pick their class by a one-hot mask
``target == arange(C)`` along the class dim, no GATHER: every element's loss is
``-sum_c logp[c] * q[c]`` with the per-class coefficient ``q = where(hot, hi, lo)``,
``hi = w_c (1 - s + s / C)`` and ``lo = w_c s / C`` (``w`` the class weights, 1 without;
``s`` the label smoothing), zero where the target is ``ignore_index``. That is PyTorch's
``(1 - s) * nll + s / C * smooth`` written per element; ``mean`` divides the sum by the total
weight of the targets that count (``sum(where(hot, w, 0))``), as ``nll_loss`` and the smoothed
term both do. Every piece lowers in both profiles, or the rewrite returns None and the op stays
whole on the CPU (a CPU piece would leave a partition boundary with no PyTorch node, see
:mod:`.composite`).

Claims:
- FP (float32): the unsmoothed, unweighted or weighted loss of one element is PyTorch's bit for
  bit up to the log_softmax (the mask multiplies by exactly 1 or 0, the weight once, as
  PyTorch's ``-w * logp``); log_softmax and the sums run in another order than PyTorch's kernels
  and ``mean`` multiplies by a reciprocal where PyTorch divides: a few float32 ulps of the
  result (measured in the tests). A mean over a batch whose targets are all ``ignore_index``
  is ``0 * (1 / 0)``: NaN, as PyTorch's ``0 / 0``.
- INT (int8): each piece is quantized as the fake-quant model quantizes it (the log_softmax
  decomposition's tables, the mask's products, the sums, the mean's reciprocal), so the output
  is within one output step of the fake-quant model (0 steps against it evaluated in float64,
  in the tests). It is not near PyTorch's float loss at int8 resolution in general
  (log_softmax of quantized logits, then requantized sums): claimed against fake-quant only.
  A mean whose targets are all ignored is 0, as the fake-quant model's (int8 has no NaN;
  PyTorch's is NaN): not claimed against PyTorch.
- binary_cross_entropy_with_logits: PyTorch's stable form ``(1 - y) x - lw * logsigmoid(x)``
  with ``logsigmoid(x) = min(x, 0) - log1p(exp(-|x|))`` (its CPU kernel's) and
  ``lw = 1 + (pos_weight - 1) y`` (1 without ``pos_weight``), times ``weight``; FP within ulps
  of PyTorch (the same operations; the mean's sum in another order), INT against fake-quant.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ...graph_utils import get_constant, val
from ._common import PASS, arg, decomposition, number_const, tuple_outputs  # noqa: F401 - PASS for the doctests

aten = torch.ops.aten

#: ``reduction`` as aten passes it (``torch.nn._reduction``)
NONE, MEAN, SUM = 0, 1, 2
_TARGET_DTYPES = (torch.int64, torch.int32)


def _class_dim(rank: int) -> int:
    """The class dim of a loss input: 0 for a single [C] sample, else 1 ([N, C, d1, ...])."""
    return 0 if rank == 1 else 1


def _along(values: torch.Tensor, dim: int, rank: int) -> torch.Tensor:
    """A [C] tensor shaped to broadcast along ``dim`` of a rank-``rank`` tensor."""
    shape = [1] * rank
    shape[dim] = values.numel()
    return values.reshape(shape)


def _class_weights(gm, b, weight, classes: int, dim: int, rank: int, scale: float) -> fx.Node:
    """``scale * weight`` ([C], ones when None) shaped along the class dim: a constant when the
    weight is one (the usual buffer), else a product in the graph."""
    if weight is None:
        return b.const(gm, _along(torch.full((classes,), scale), dim, rank), "class_weight")
    known = get_constant(gm, weight)
    if known is not None:
        return b.const(gm, _along(known.float() * scale, dim, rank), "class_weight")
    shaped = b(aten.reshape.default, weight, list(_along(torch.empty(classes), dim, rank).shape))
    return b(aten.mul.Tensor, shaped, number_const(gm, b, scale, torch.float32, shaped, "scale"))


def _reduce(gm, b, loss: fx.Node, reduction: int, denominator: fx.Node | None) -> fx.Node:
    """``loss`` reduced: as it is (none), summed, or summed and divided by ``denominator``
    (a node: the targets' total weight) or averaged (``denominator`` None: a fixed count)."""
    if reduction == NONE:
        return loss
    if reduction == SUM:
        return b(aten.sum.default, loss)
    if denominator is None:
        return b(aten.mean.default, loss)
    return b(aten.div.Tensor, b(aten.sum.default, loss), denominator)


def _index_loss_fits(vl, vt, weight) -> bool:
    """Whether log-probabilities of value ``vl`` and targets of value ``vt`` (and ``weight``)
    are those of a class-index loss: float32 [N, C, ...] / [C], integer targets [N, ...] / [],
    a weight of C elements. Checked before any node is built (a None after it would leave
    them dangling)."""
    if vl is None or vt is None or vl.dtype != torch.float32 or vt.dtype not in _TARGET_DTYPES or \
            vl.numel() == 0 or vl.dim() == 0:
        return False
    dim = _class_dim(vl.dim())
    if tuple(vt.shape) != tuple(vl.shape[:dim]) + tuple(vl.shape[dim + 1:]):
        return False
    return weight is None or (isinstance(weight, fx.Node) and val(weight) is not None and
                              val(weight).dtype == torch.float32 and val(weight).numel() == vl.shape[dim])


def _index_loss(gm, b, logp: fx.Node, target: fx.Node, weight, reduction: int, ignore_index: int,
                smoothing: float, want_total: bool = False):
    """(loss, total weight) of log-probabilities ``logp`` [N, C, ...] / [C] and class indices
    ``target`` [N, ...] / [] (:func:`_index_loss_fits`): see the module docstring. The total
    weight (the sum of the counted targets' weights) is None unless the mean or ``want_total``
    needs it."""
    vl, vt = val(logp), val(target)
    rank = vl.dim()
    dim = _class_dim(rank)
    classes = vl.shape[dim]
    t = b(aten.unsqueeze.default, target, dim)  # [N, 1, ...]
    hot = b(aten.eq.Tensor, t, b.const(gm, _along(torch.arange(classes, dtype=vt.dtype), dim, rank), "classes"))
    counted = b(aten.ne.Tensor, t, number_const(gm, b, ignore_index, vt.dtype, None, "ignore_index"))
    if 0 <= ignore_index < classes:  # else no class equals it: the mask needs no correction
        hot = b(aten.logical_and.default, hot, counted)
    zero = number_const(gm, b, 0.0, torch.float32, None, "zero")
    high = _class_weights(gm, b, weight, classes, dim, rank, 1.0 - smoothing + smoothing / classes)
    if smoothing > 0:
        low = _class_weights(gm, b, weight, classes, dim, rank, smoothing / classes)
        coefficient = b(aten.where.self, counted, b(aten.where.self, hot, high, low), zero)
    else:
        coefficient = b(aten.where.self, hot, high, zero)
    loss = b(aten.neg.default, b(aten.sum.dim_IntList, b(aten.mul.Tensor, logp, coefficient), [dim], False))
    total = None
    if reduction == MEAN or want_total:
        # the targets' weights (the smoothed coefficient is not one: the plain weights again)
        weights = high if smoothing == 0 else _class_weights(gm, b, weight, classes, dim, rank, 1.0)
        total = b(aten.sum.default, b(aten.where.self, hot, weights, zero))
    return _reduce(gm, b, loss, reduction, total), total


def _probability_loss(gm, b, logp: fx.Node, target: fx.Node, weight, reduction: int, smoothing: float):
    """Cross-entropy of log-probabilities ``logp`` and class probabilities ``target`` (the
    same shape): ``-sum_c logp * q * w_c`` with ``q = target (1 - s) + s / C``; ``mean``
    divides by the number of samples (``numel / C``), as PyTorch's. The caller checked the
    shapes and dtypes (float32 ``target`` of ``logp``'s shape)."""
    vl = val(logp)
    rank = vl.dim()
    dim = _class_dim(rank)
    classes = vl.shape[dim]
    q = target
    if smoothing > 0:
        q = b(aten.add.Tensor, b(aten.mul.Tensor, target, number_const(gm, b, 1.0 - smoothing, torch.float32, None,
                                                                        "keep")),
              number_const(gm, b, smoothing / classes, torch.float32, None, "spread"))
    product = b(aten.mul.Tensor, logp, q)
    if weight is not None:
        product = b(aten.mul.Tensor, product, _class_weights(gm, b, weight, classes, dim, rank, 1.0))
    loss = b(aten.neg.default, b(aten.sum.dim_IntList, product, [dim], False))
    return _reduce(gm, b, loss, reduction, None)


@decomposition(aten.cross_entropy_loss.default)
def cross_entropy(gm, n, b):
    """``F.cross_entropy(x, target, weight, ignore_index, reduction, label_smoothing)``:
    ``log_softmax`` over the class dim, then :func:`_index_loss` (integer targets) or
    :func:`_probability_loss` (float targets of ``x``'s shape).

    Example:
        >>> import lowering, torch.nn.functional as F
        >>> class M(torch.nn.Module):
        ...     def forward(self, x, t):
        ...         return F.cross_entropy(x, t, ignore_index=1)
        >>> x, t = torch.randn(3, 4), torch.tensor([0, 1, 3])
        >>> lm = lowering.lower(M(), (x, t), profile="FP")
        >>> lm.cpu_nodes, bool(torch.isclose(lm.run(x, t)[0], M()(x, t), atol=1e-6))
        ([], True)
    """
    x, target = n.args[0], n.args[1]
    weight = arg(n, 2, "weight")
    reduction = arg(n, 3, "reduction", MEAN)
    ignore_index = arg(n, 4, "ignore_index", -100)
    smoothing = float(arg(n, 5, "label_smoothing", 0.0))
    vx, vt = val(x), val(target)
    if vx is None or vt is None or vx.dtype != torch.float32 or vx.dim() == 0 or vx.numel() == 0 or \
            reduction not in (NONE, MEAN, SUM) or not 0.0 <= smoothing <= 1.0:
        return None
    if vt.is_floating_point():
        if vt.dtype != torch.float32 or tuple(vt.shape) != tuple(vx.shape) or \
                (weight is not None and (not isinstance(weight, fx.Node) or val(weight) is None or
                                         val(weight).numel() != vx.shape[_class_dim(vx.dim())])):
            return None
        logp = b(aten._log_softmax.default, x, _class_dim(vx.dim()), False)
        return _probability_loss(gm, b, logp, target, weight, reduction, smoothing)
    if not _index_loss_fits(vx, vt, weight):  # log_softmax's value is x's shape and dtype
        return None
    logp = b(aten._log_softmax.default, x, _class_dim(vx.dim()), False)
    return _index_loss(gm, b, logp, target, weight, reduction, ignore_index, smoothing)[0]


@decomposition(aten.nll_loss_nd.default, aten.nll_loss.default)
def nll_loss(gm, n, b):
    """``F.nll_loss(logp, target, weight, ignore_index, reduction)`` of any rank
    (``nll_loss_nd``: [C], [N, C], [N, C, d1, ...]): :func:`_index_loss` unsmoothed.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.nll_loss_nd.default].fn.__name__
        'nll_loss'
    """
    logp, target, weight = n.args[0], n.args[1], arg(n, 2, "weight")
    reduction = arg(n, 3, "reduction", MEAN)
    if reduction not in (NONE, MEAN, SUM) or not _index_loss_fits(val(logp), val(target), weight):
        return None
    return _index_loss(gm, b, logp, target, weight, reduction, arg(n, 4, "ignore_index", -100), 0.0)[0]


@decomposition(aten.nll_loss_forward.default, aten.nll_loss2d_forward.default)
def nll_loss_forward(gm, n, b):
    """``nll_loss_forward`` / ``nll_loss2d_forward`` (the pair ``(output, total_weight)`` of
    the loss kernels, positional arguments): :func:`_index_loss`; the total weight is the sum
    of the counted targets' weights (reductions sum and mean; with none it stays on the CPU
    when read).

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.nll_loss2d_forward.default].fn.__name__
        'nll_loss_forward'
    """
    logp, target, weight, reduction, ignore_index = n.args[:5]
    if reduction not in (NONE, MEAN, SUM) or not _index_loss_fits(val(logp), val(target), weight):
        return None
    if reduction == NONE and any(u.args[1] == 1 and u.users for u in n.users):
        return None  # the total weight of an unreduced loss: left to PyTorch's kernel
    loss, total = _index_loss(gm, b, logp, target, weight, reduction, ignore_index, 0.0,
                              want_total=reduction != NONE)
    return tuple_outputs(n, [loss, total])


@decomposition(aten.binary_cross_entropy_with_logits.default)
def binary_cross_entropy_with_logits(gm, n, b):
    """``F.binary_cross_entropy_with_logits(x, y, weight, pos_weight, reduction)``:
    ``(1 - y) x - lw * (min(x, 0) - log1p(exp(-|x|)))``, ``lw = 1 + (pos_weight - 1) y``,
    times ``weight``, then reduced (see the module docstring).

    Example:
        >>> import lowering, torch.nn.functional as F
        >>> class M(torch.nn.Module):
        ...     def forward(self, x, y):
        ...         return F.binary_cross_entropy_with_logits(x, y, reduction="none")
        >>> x, y = torch.tensor([[-30.0, 0.0, 2.5]]), torch.tensor([[0.0, 0.5, 1.0]])
        >>> lm = lowering.lower(M(), (x, y), profile="FP")
        >>> lm.cpu_nodes, torch.allclose(lm.run(x, y)[0], M()(x, y), atol=1e-6)
        ([], True)
    """
    x, y = n.args[0], n.args[1]
    weight, pos_weight = arg(n, 2, "weight"), arg(n, 3, "pos_weight")
    reduction = arg(n, 4, "reduction", MEAN)
    vx, vy = val(x), val(y)
    if vx is None or vy is None or vx.dtype != torch.float32 or vy.dtype != torch.float32 or \
            reduction not in (NONE, MEAN, SUM) or \
            any(w is not None and (not isinstance(w, fx.Node) or val(w) is None or
                                   val(w).dtype != torch.float32) for w in (weight, pos_weight)):
        return None
    if torch.broadcast_shapes(vx.shape, vy.shape, *(val(w).shape for w in (weight, pos_weight)
                                                    if w is not None)) != vx.shape:
        return None  # a loss broadcast beyond the input's shape: left to PyTorch
    scalar = vx.dim() == 0
    if scalar:
        # computed as [1]: the FP emitter's log1p of a 0-d tensor adds a [1] constant and
        # gives a [1] result where the graph declares []
        x, y = b(aten.reshape.default, x, [1]), b(aten.reshape.default, y, [1])
    one = number_const(gm, b, 1.0, torch.float32, x, "one")
    zero = number_const(gm, b, 0.0, torch.float32, x, "zero")
    # logsigmoid as PyTorch's CPU kernel computes it: min(x, 0) - log1p(exp(-|x|))
    softplus_tail = b(aten.log1p.default, b(aten.exp.default, b(aten.neg.default, b(aten.abs.default, x))))
    log_sigmoid = b(aten.sub.Tensor, b(aten.minimum.default, x, zero), softplus_tail)
    if pos_weight is not None:
        log_weight = b(aten.add.Tensor, b(aten.mul.Tensor, b(aten.sub.Tensor, pos_weight, one), y), one)
        log_sigmoid = b(aten.mul.Tensor, log_weight, log_sigmoid)
    loss = b(aten.sub.Tensor, b(aten.mul.Tensor, b(aten.sub.Tensor, one, y), x), log_sigmoid)
    if weight is not None:
        loss = b(aten.mul.Tensor, loss, weight)
    if scalar and reduction == NONE:
        loss = b(aten.reshape.default, loss, [])
    return _reduce(gm, b, loss, reduction, None)
