"""softmax / log_softmax (every aten form), glu, prelu and scaled dot-product attention."""

from __future__ import annotations

import math

import torch

from ...graph_utils import get_constant, val
from ._common import arg, const_like, decomposition

aten = torch.ops.aten


@decomposition(aten.softmax.int, aten._softmax.default, aten.log_softmax.int,
               aten._log_softmax.default)
def softmax(gm, n, b):
    """exp(x - max) / sum(exp(x - max)) along ``dim``; the log form subtracts log(sum).

    The max is subtracted so that exp never overflows; in INT it also gives exp a fixed
    input range (<= 0) to tabulate.
    """
    x, dim = n.args[0], n.args[1]
    masked = _masked_scores(gm, b, x, dim) if n.target in (aten.softmax.int, aten._softmax.default) else None
    if masked is not None:
        return _masked_softmax(gm, b, *masked)
    shifted = b(aten.sub.Tensor, x, b(aten.amax.default, x, [dim], True))
    exp = b(aten.exp.default, shifted)
    total = b(aten.sum.dim_IntList, exp, [dim], True)
    if n.target in (aten.log_softmax.int, aten._log_softmax.default):
        return b(aten.sub.Tensor, shifted, b(aten.log.default, total))
    return b(aten.mul.Tensor, exp, b(aten.reciprocal.default, total))


def _masked_scores(gm, b, x, dim):
    """INT: (scores, keep) when ``x`` is ``where(mask, NEG, scores)`` (``masked_fill(mask,
    -inf)``, its -inf bounded to -BOUND by :class:`~lowering.passes.limits.BoundInfiniteScalars`),
    ``where(keep, scores, NEG)``, or ``scores + mask`` with a mask :func:`_attention_mask` finds
    masked positions in, and the softmax runs over the last dim, else None.

    Quantized whole, such a tensor's scale would have to span the filler too (-256: about one
    step per unit of the scores, 0.11 off float in a causal mask); :func:`_masked_softmax`
    quantizes the scores alone and zeroes the masked exponentials instead (the same result
    but for a fully masked row, which is 0 here, NaN in PyTorch's -inf form).
    """
    v = val(x)
    if b.profile != "INT" or v is None or x.op != "call_function" or \
            dim % max(v.dim(), 1) != v.dim() - 1:
        return None
    if x.target == aten.add.Tensor and len(x.args) == 2 and \
            all(isinstance(a, torch.fx.Node) and val(a) is not None for a in x.args):
        # scores + mask (MHA's baddbmm(mask, q, k^T) when it returns the attention weights)
        for scores, mask in (x.args, x.args[::-1]):
            if val(scores).shape == v.shape and val(mask).is_floating_point():
                bias, keep = _attention_mask(gm, b, mask)
                if keep is not None:
                    return (scores if bias is None else b(aten.add.Tensor, scores, bias)), keep
        return None
    split = _negative_fill_split(gm, b, x)
    if split is None or val(split[0]).shape != v.shape:
        return None
    return split


def _negative_fill_split(gm, b, x):
    """(rest, keep) when ``x`` is ``where(masked, NEG, rest)`` or ``where(keep, rest, NEG)``
    with a constant filler at or below -BOUND (``masked_fill(mask, -inf)`` once
    :class:`~lowering.passes.limits.BoundInfiniteScalars` bounded its -inf) and a bool
    condition: ``keep`` says where ``x`` is ``rest``. Else None."""
    from ..limits import BOUND

    if x.op != "call_function" or x.target != aten.where.self:
        return None
    cond, then, other = x.args[:3]
    if val(cond) is None or val(cond).dtype != torch.bool:
        return None
    for fill, rest, masked_when in ((then, other, True), (other, then, False)):
        ft = get_constant(gm, fill)
        if ft is not None and ft.numel() and bool((ft <= -BOUND).all()) and val(rest) is not None:
            ct = get_constant(gm, cond)
            if ct is not None:
                keep = b.const(gm, ~ct if masked_when else ct, "softmax_keep")
            else:
                keep = b(aten.logical_not.default, cond) if masked_when else cond
            return rest, keep
    return None


@decomposition(aten.glu.default)
def glu(gm, n, b):
    """glu(x, dim): first half of ``x`` along ``dim`` times sigmoid of the second half."""
    x = n.args[0]
    dim = (n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", -1)) % val(x).dim()
    half = val(x).shape[dim] // 2
    first = b(aten.slice.Tensor, x, dim, 0, half)
    second = b(aten.slice.Tensor, x, dim, half, 2 * half)
    return b(aten.mul.Tensor, first, b(aten.sigmoid.default, second))


@decomposition(aten.prelu.default, aten._prelu_kernel.default)
def prelu(gm, n, b):
    """``where(x >= 0, x, weight * x)``, the weight ``[C]`` (or ``[1]``) broadcast along
    dim 1 (the channels) of ``x``."""
    x, weight = n.args[0], n.args[1]
    vx, vw = val(x), val(weight)
    if vx is None or vw is None:
        return None
    shape = [vw.numel()] + [1] * (vx.dim() - 2) if vx.dim() >= 2 and vw.numel() > 1 else None
    if shape is not None:
        wt = get_constant(gm, weight)
        weight = b.const(gm, wt.reshape(shape), "prelu_w") if wt is not None else \
            b(aten.reshape.default, weight, shape)
    positive = b(aten.ge.Tensor, x, const_like(gm, b, 0.0, x, "zero"))
    return b(aten.where.self, positive, x, b(aten.mul.Tensor, x, weight))


def _masked_softmax(gm, b, scores, keep):
    """softmax over the last dim of ``scores``; where the bool ``keep`` is False the
    exponential is zeroed (masked positions weigh nothing, without an infinite bias). A row
    with every position masked is 0, as PyTorch's attention gives (its sum is taken as 1).

    The max subtracted is the row's max over the kept positions (masked ones read as the row's
    min, a value of the scores' own range): a masked score above every kept one would otherwise
    push the kept exponentials down to a few quantization steps."""
    if keep is None:
        shifted = b(aten.sub.Tensor, scores, b(aten.amax.default, scores, [-1], True))
        exp = b(aten.exp.default, shifted)
        total = b(aten.sum.dim_IntList, exp, [-1], True)
        return b(aten.mul.Tensor, exp, b(aten.reciprocal.default, total))
    kept = b(aten.where.self, keep, scores, b(aten.amin.default, scores, [-1], True))
    exp = b(aten.exp.default, b(aten.sub.Tensor, kept, b(aten.amax.default, kept, [-1], True)))
    exp = b(aten.where.self, keep, exp, const_like(gm, b, 0.0, None, "zero"))
    total = b(aten.sum.dim_IntList, exp, [-1], True)
    kt = get_constant(gm, keep)
    if kt is None:
        empty = b(aten.logical_not.default, b(aten.any.dim, keep, -1, True))
    elif not kt.any(-1).all():
        empty = b.const(gm, ~kt.any(-1, keepdim=True), "empty_rows")
    else:
        empty = None
    if empty is not None:
        total = b(aten.where.self, empty, const_like(gm, b, 1.0, None, "one"), total)
    return b(aten.mul.Tensor, exp, b(aten.reciprocal.default, total))


def _attention_mask(gm, b, mask):
    """(additive bias, bool keep mask) of an ``attn_mask``: a bool mask keeps where True; a
    float mask's ``-inf`` entries become masked positions (an infinite bias has no quantized
    form and makes a fully masked row NaN), its finite entries the bias."""
    if mask is None or val(mask) is None:
        return mask, None
    if val(mask).dtype == torch.bool:
        return None, mask
    mt = get_constant(gm, mask)
    if mt is not None:
        finite = mt > -math.inf
        bias = torch.where(finite, mt, torch.zeros_like(mt))
        return (b.const(gm, bias, "attn_bias") if bias.any() else None,
                b.const(gm, finite, "attn_keep") if not finite.all() else None)
    if b.profile == "INT":
        return _int_float_mask(gm, b, mask)
    finite = b(aten.gt.Tensor, mask, const_like(gm, b, -math.inf, None, "neg_inf"))
    return b(aten.where.self, finite, mask, const_like(gm, b, 0.0, None, "zero")), finite


#: shape ops a float attention mask passes through on its way to the attention (MHA's
#: ``view(N, 1, 1, S).expand(-1, H, -1, -1).reshape(N * H, 1, S)``), replayed on its parts
_MASK_SHAPE_OPS = frozenset({
    aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.expand.default,
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.permute.default,
    aten.transpose.int, aten.clone.default})


def _int_float_mask(gm, b, mask):
    """INT: (additive bias, bool keep mask) of a computed float ``attn_mask``. A part made as
    ``where(masked, NEG, rest)`` (``zeros.masked_fill(key_padding_mask, -inf)``, the -inf
    bounded to -BOUND), possibly reshaped and added to another part, becomes keep positions
    (and ``rest`` the bias, unless it is zero) instead of a bias: quantized, a bias spanning
    -BOUND leaves about one int8 step per unit of the scores (an int8 MHA with a key padding
    mask was 0.24 off float, 0.013 without).
    Anything else is the additive bias, as given."""
    chain = []
    node = mask
    while node.op == "call_function" and node.target in _MASK_SHAPE_OPS:
        chain.append(node)
        node = node.args[0]
    parts = None
    split = _negative_fill_split(gm, b, node)
    if split is not None:
        # where the mask keeps, its value is ``rest``: the bias (HuggingFace's
        # ``inverted.masked_fill(inverted.bool(), finfo.min)`` keeps its zeros)
        rest, keep = split
        rt = get_constant(gm, rest)
        bias = None if rt is not None and not rt.any() else rest
        parts = tuple(None if p is None else p if tuple(val(p).shape) == tuple(val(node).shape)
                      else b(aten.expand.default, p, list(val(node).shape))
                      for p in (bias, keep))
    elif node.op == "call_function" and node.target == aten.add.Tensor and \
            all(isinstance(a, torch.fx.Node) for a in node.args[:2]) and len(node.args) == 2:
        (bias_a, keep_a), (bias_b, keep_b) = (_attention_mask(gm, b, a) for a in node.args[:2])
        if keep_a is not None or keep_b is not None:
            bias = bias_a if bias_b is None else bias_b if bias_a is None else \
                b(aten.add.Tensor, bias_a, bias_b)
            keep = keep_a if keep_b is None else keep_b if keep_a is None else \
                b(aten.logical_and.default, keep_a, keep_b)
            parts = (bias, keep)
    if parts is None:
        return mask, None
    return tuple(None if part is None else _replay(b, chain, part) for part in parts)


def _replay(b, chain, x):
    """The shape ops of ``chain`` (outermost first, as walked back from the mask) applied to ``x``."""
    for op in reversed(chain):
        x = b(op.target, x, *op.args[1:], **op.kwargs)
    return x


def _query_groups(b, q, kv):
    """``kv`` (``[..., Hkv, S, D]``) with each head repeated for the ``Hq / Hkv`` query heads of
    its group, as ``enable_gqa`` does (``repeat_interleave`` on dim -3), by unsqueeze, expand
    and reshape; ``kv`` itself when the head counts do not divide (then the shapes disagree)."""
    q_heads, kv_shape = val(q).shape[-3], list(val(kv).shape)
    if val(kv).dim() < 3 or kv_shape[-3] == q_heads or q_heads % kv_shape[-3]:
        return kv
    group = q_heads // kv_shape[-3]
    grouped = b(aten.unsqueeze.default, kv, -3)
    grouped = b(aten.expand.default, grouped, [*kv_shape[:-2], group, *kv_shape[-2:]])
    return b(aten.reshape.default, grouped, [*kv_shape[:-3], q_heads, *kv_shape[-2:]])


@decomposition(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(gm, n, b):
    """``softmax(q @ k^T * scale + mask) @ v``: a bool mask (and ``is_causal``'s lower
    triangle) zeroes the masked exponentials of the softmax (:func:`_attention_mask`), a
    float mask is added to the scores; grouped-query attention (``enable_gqa``) repeats each
    key and value head for its group of query heads. Dropout stays on the CPU."""
    q, k, v = n.args[:3]
    if arg(n, 4, "dropout_p", 0.0) or any(x is None for x in (val(q), val(k), val(v))):
        return None
    if n.kwargs.get("enable_gqa", False):
        k, v = _query_groups(b, q, k), _query_groups(b, q, v)
    if val(q).dim() != val(k).dim() or val(q).shape[:-2] != val(k).shape[:-2]:
        return None
    length, source, depth = val(q).shape[-2], val(k).shape[-2], val(q).shape[-1]
    scale = n.kwargs.get("scale")
    scale = 1.0 / math.sqrt(depth) if scale is None else scale
    scores = b(aten.matmul.default, q, b(aten.transpose.int, k, -2, -1))
    scores = b(aten.mul.Tensor, scores, const_like(gm, b, float(scale), None, "scale"))
    bias, keep = _attention_mask(gm, b, arg(n, 3, "attn_mask"))
    if bias is not None:
        scores = b(aten.add.Tensor, scores, bias)
    if arg(n, 5, "is_causal", False):
        causal = b.const(gm, torch.ones(length, source, dtype=torch.bool).tril(), "causal")
        keep = causal if keep is None else b(aten.logical_and.default, keep, causal)
    return b(aten.matmul.default, _masked_softmax(gm, b, scores, keep), v)


@decomposition(aten.rrelu.default)
def rrelu_eval(gm, n, b):
    """rrelu in eval mode is leaky_relu with the mean slope ``(lower + upper) / 2``; in
    training mode its slopes are random, and it stays on the CPU."""
    if arg(n, 3, "training", False):
        return None
    lower, upper = float(arg(n, 1, "lower", 1.0 / 8.0)), float(arg(n, 2, "upper", 1.0 / 3.0))
    return b(aten.leaky_relu.default, n.args[0], (lower + upper) / 2)
