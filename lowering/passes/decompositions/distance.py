"""Distances and bilinear forms: ``torch.cdist``, ``F.pairwise_distance`` and ``nn.Bilinear`` /
``F.bilinear`` in terms of ops with a TOSA visitor (sub, mul, sum, sqrt / pow / abs / amax
through :mod:`.norm`'s vector norm, cat, matmul, linear).

Every piece of each decomposition lowers in the profile it is built for: a piece left to the
CPU would leave a partition boundary with no PyTorch node (see :mod:`.composite`). Orders
whose pieces would not all lower (p = 0, a count of non-zero differences; a negative p) are
left whole, so the op stays on the CPU in one piece.
"""

from __future__ import annotations

import math

import torch
import torch.fx as fx

from ...graph_utils import get_constant, val
from ._common import arg, const_like, decomposition, is_float

aten = torch.ops.aten

#: torch.cdist's ``compute_mode`` as ``aten.cdist`` takes it: None is
#: "use_mm_for_euclid_dist_if_necessary", 1 "use_mm_for_euclid_dist", 2 "donot_use_mm_for_euclid_dist"
_MM_IF_NECESSARY, _MM_ALWAYS = 0, 1
#: more rows than this on either side and "if necessary" takes the matrix-product form
#: (ATen's cdist_impl)
_MM_ROWS = 25


def _unsqueezed(gm, b, x: fx.Node, dim: int) -> fx.Node:
    """``x.unsqueeze(dim)``; a constant is reshaped here, once."""
    ct = get_constant(gm, x)
    if ct is not None:
        return b.const(gm, ct.unsqueeze(dim), "dist")
    return b(aten.unsqueeze.default, x, dim)


def _norm_of_last_dim(b, x: fx.Node, p: float, keepdim: bool) -> fx.Node:
    """The ``p``-norm of ``x`` over its last dim, as ``linalg_vector_norm`` (``at::norm``,
    which cdist's kernel and pairwise_distance compute): decomposed in the next round by
    :func:`.norm.vector_norm` into ``sqrt(sum(x * x))`` (2), ``sum(|x|)`` (1), the max / min
    of ``|x|`` (+-inf), ``sum(|x| ** p) ** (1 / p)`` (a TABLE per pow in INT).

    INT takes p = 2 as ``sqrt(x . x)``: the dot product of each row with itself as one
    MATMUL, whose int32 accumulator holds the sum of squares exactly, instead of each square
    requantized to int8 before a REDUCE_SUM (half the RESCALEs, a smaller error)."""
    if p == 2 and b.profile == "INT":
        shape = list(val(x).shape[:-1]) + ([1] if keepdim else [])
        squares = b(aten.matmul.default, b(aten.unsqueeze.default, x, -2), b(aten.unsqueeze.default, x, -1))
        return b(aten.sqrt.default, b(aten.reshape.default, squares, shape))
    return b(aten.linalg_vector_norm.default, x, p, [-1], keepdim)


def _supported_order(p) -> bool:
    """Orders :func:`.norm.vector_norm` lowers whole: positive, or +-inf."""
    return isinstance(p, (int, float)) and not math.isnan(p) and (p > 0 or math.isinf(p))


def _uses_matmul(p: float, mode, rows1: int, rows2: int) -> bool:
    """Whether PyTorch computes this cdist as ``_euclidean_dist``'s matrix product (ATen's
    cdist_impl): p = 2 with compute_mode "use_mm_for_euclid_dist", or "if necessary" (the
    default) with more than 25 rows on either side."""
    mode = _MM_IF_NECESSARY if mode is None else mode
    return p == 2 and (mode == _MM_ALWAYS or (mode == _MM_IF_NECESSARY and max(rows1, rows2) > _MM_ROWS))


def _augmented(gm, b, x: fx.Node, left: bool) -> fx.Node:
    """``_euclidean_dist``'s augmented rows: ``[-2 x, |x|^2, 1]`` (``left``) or ``[x, 1, |x|^2]``,
    concatenated on the last dim; computed here when ``x`` is a constant (cluster centres)."""
    ct = get_constant(gm, x)
    if ct is not None:
        norm = ct.pow(2).sum(-1, True)
        ones = torch.ones_like(norm)
        return b.const(gm, torch.cat([ct.mul(-2), norm, ones] if left else [ct, ones, norm], -1), "euclid")
    norm = b(aten.sum.dim_IntList, b(aten.mul.Tensor, x, x), [-1], True)
    ones = b.const(gm, torch.ones(tuple(val(norm).shape), dtype=val(norm).dtype), "ones")
    if left:
        return b(aten.cat.default, [b(aten.mul.Tensor, x, const_like(gm, b, -2.0, x, "minus2")), norm, ones], -1)
    return b(aten.cat.default, [x, ones, norm], -1)


def _euclidean_by_matmul(gm, b, x1: fx.Node, x2: fx.Node) -> fx.Node:
    """ATen's ``_euclidean_dist``: ``sqrt(clamp_min([-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, 0))``,
    one MATMUL of the augmented rows (batch dims broadcast by the matmul visitor). PyTorch's
    own form, so it cancels where two points nearly coincide as PyTorch's does (not to the
    same bits: the sums run in another order)."""
    right = _augmented(gm, b, x2, left=False)
    ct = get_constant(gm, right)
    right = b.const(gm, ct.mT.contiguous(), "euclid_t") if ct is not None else \
        b(aten.transpose.int, right, -1, -2)
    product = b(aten.matmul.default, _augmented(gm, b, x1, left=True), right)
    return b(aten.sqrt.default, b(aten.clamp.default, product, 0.0, None))


@decomposition(aten.cdist.default, aten._cdist_forward.default)
def cdist(gm, n, b):
    """``cdist(x1, x2, p, compute_mode)``: the p-norm of every difference of a row of ``x1``
    [..., P, M] and a row of ``x2`` [..., R, M] (batch dims broadcast), [..., P, R].

    The direct form is ``x1[..., :, None, :] - x2[..., None, :, :]`` (one broadcast SUB),
    then the norm of its last dim (:func:`_norm_of_last_dim`). Where PyTorch takes the
    matrix-product form (p = 2 and more than 25 rows, or ``compute_mode`` says so), FP takes
    it too (:func:`_euclidean_by_matmul`), to round as PyTorch does; INT keeps the direct form:
    the product form subtracts squared norms quantized to int8 and loses every distance much
    smaller than the points' norms (unit-spread points centred 6 from the origin: off by up
    to 224 output steps, the direct form by 7)."""
    x1, x2 = n.args[0], n.args[1]
    p, mode = arg(n, 2, "p", 2.0), arg(n, 3, "compute_mode")
    if not (is_float(x1) and is_float(x2)) or not _supported_order(p):
        return None
    v1, v2 = val(x1), val(x2)
    if v1.dim() < 2 or v2.dim() < 2 or v1.numel() == 0 or v2.numel() == 0:
        return None
    p = float(p)
    if b.profile != "INT" and _uses_matmul(p, mode, v1.shape[-2], v2.shape[-2]):
        return _euclidean_by_matmul(gm, b, x1, x2)
    diff = b(aten.sub.Tensor, _unsqueezed(gm, b, x1, -2), _unsqueezed(gm, b, x2, -3))
    return _norm_of_last_dim(b, diff, p, False)


@decomposition(aten.pairwise_distance.default)
def pairwise_distance(gm, n, b):
    """``pairwise_distance(x1, x2, p, eps, keepdim)``: ``norm(x1 - x2 + eps, p, -1, keepdim)``,
    as ATen defines it (the inputs broadcast)."""
    x1, x2 = n.args[0], n.args[1]
    p, eps = arg(n, 2, "p", 2.0), float(arg(n, 3, "eps", 1e-6))
    keepdim = bool(arg(n, 4, "keepdim", False))
    if not (is_float(x1) and is_float(x2)) or not _supported_order(p) or val(n) is None:
        return None
    diff = b(aten.sub.Tensor, x1, x2)
    if val(diff) is None or val(diff).dim() == 0:
        return None
    if eps != 0:
        diff = b(aten.add.Tensor, diff, const_like(gm, b, eps, diff, "eps"))
    return _norm_of_last_dim(b, diff, float(p), keepdim)


def _bilinear(gm, b, x1: fx.Node, x2: fx.Node, w: fx.Node, bias) -> fx.Node | None:
    """``y[..., o] = sum_ij x1[..., i] w[o, i, j] x2[..., j] (+ bias[o])`` as a linear over the
    outer product: ``(x1[..., :, None] * x2[..., None, :])`` flattened to [N, in1 * in2], then
    ``linear`` with ``w`` viewed as [out, in1 * in2] (a CONV2D with the bias folded in for a
    parameter weight; :func:`.matmul.linear` makes a computed one a MATMUL), reshaped back to
    [..., out]. In INT that is two requantizations: the outer product and the linear's
    int32 accumulator."""
    if not (is_float(x1) and is_float(x2) and is_float(w)):
        return None
    v1, v2, vw = val(x1), val(x2), val(w)
    if vw.dim() != 3 or v1.dim() < 1 or v1.shape[:-1] != v2.shape[:-1] or \
            (v1.shape[-1], v2.shape[-1]) != tuple(vw.shape[1:]):
        return None
    out_features, in1, in2 = vw.shape
    lead = list(v1.shape[:-1])
    rows = math.prod(lead)
    outer = b(aten.mul.Tensor, _unsqueezed(gm, b, x1, -1), _unsqueezed(gm, b, x2, -2))
    flat = b(aten.reshape.default, outer, [rows, in1 * in2])
    wt = get_constant(gm, w)
    weight = b.const(gm, wt.reshape(out_features, in1 * in2), "bilinear_w") if wt is not None \
        else b(aten.reshape.default, w, [out_features, in1 * in2])
    y = b(aten.linear.default, flat, weight, bias)
    return y if lead == [rows] else b(aten.reshape.default, y, lead + [out_features])


@decomposition(aten.bilinear.default)
def bilinear(gm, n, b):
    """``bilinear(x1, x2, weight, bias)`` (nn.Bilinear): :func:`_bilinear`."""
    return _bilinear(gm, b, n.args[0], n.args[1], n.args[2], arg(n, 3, "bias"))


#: the arguments ATen's bilinear passes _trilinear (what a core-ATen decomposed graph holds)
_BILINEAR_TRILINEAR = ([1, 3], [0], [1, 2], [2, 3])


@decomposition(aten._trilinear.default)
def trilinear_of_bilinear(gm, n, b):
    """``_trilinear(x1, w, x2, [1, 3], [0], [1, 2], [2, 3])``, bilinear's own call on 2-D
    inputs (``run_decompositions`` turns bilinear into it): :func:`_bilinear` without a bias.
    Other index patterns stay on the CPU."""
    if tuple(list(a) for a in n.args[3:7]) != _BILINEAR_TRILINEAR or val(n.args[0]) is None or \
            val(n.args[0]).dim() != 2:
        return None
    return _bilinear(gm, b, n.args[0], n.args[2], n.args[1], None)
