"""addmm / mm / matmul with a constant right operand -> linear (a CONV2D in TOSA); matmul of
1-D operands; addmm's beta and alpha; linear with a computed weight -> matmul."""

from __future__ import annotations

import torch

from ...graph_utils import get_constant, val
from ._common import arg, const_like, decomposition

aten = torch.ops.aten


def _scaled(gm, b, x, factor, hint):
    """``x * factor`` (``x`` itself for a factor of 1; a constant is scaled here, once)."""
    if factor == 1:
        return x
    ct = get_constant(gm, x)
    if ct is not None:
        return b.const(gm, ct * factor, hint)
    return b(aten.mul.Tensor, x, const_like(gm, b, float(factor), x, hint))


def _as_matrix(gm, b, x, dim):
    """A 1-D operand as a matrix: unsqueezed at ``dim`` (a constant is reshaped here)."""
    ct = get_constant(gm, x)
    if ct is not None:
        return b.const(gm, ct.unsqueeze(dim), "mat")
    return b(aten.unsqueeze.default, x, dim)


def _vector_matmul(gm, n, b):
    """matmul / mv / dot with a 1-D operand: the vector becomes a ``[1, K]`` row (left) or a
    ``[K, 1]`` column (right), and the added dim is squeezed from the product."""
    x, w = n.args[0], n.args[1]
    vx, vw = val(x), val(w)
    if vx is None or vw is None or (vx.dim() != 1 and vw.dim() != 1):
        return None
    out = b(aten.matmul.default, _as_matrix(gm, b, x, 0) if vx.dim() == 1 else x,
            _as_matrix(gm, b, w, -1) if vw.dim() == 1 else w)
    shape = list(torch.matmul(vx, vw).shape)
    if not shape:  # dot: the 0-d result of the [1, 1] product is its sum (one exact add)
        return b(aten.sum.dim_IntList, out, [0, 1], False)
    return b(aten.reshape.default, out, shape)


@decomposition(aten.mv.default, aten.dot.default)
def vector_product(gm, n, b):
    """mv (matrix x vector) and dot (vector x vector) as matmul."""
    return _vector_matmul(gm, n, b)


def _addmm(gm, n, b, product=aten.mm.default):
    """``beta * bias + alpha * product(x, w)`` (``product``: mm, or bmm for baddbmm): alpha
    scales a constant ``w`` (or the product), beta a constant bias (or the bias tensor);
    ``beta == 0`` drops the bias (PyTorch ignores it then)."""
    bias, x, w = n.args[0], n.args[1], n.args[2]
    beta, alpha = arg(n, 3, "beta", 1), arg(n, 4, "alpha", 1)
    if get_constant(gm, w) is not None:
        prod = b(product, x, _scaled(gm, b, w, alpha, "alpha_w"))
    else:
        prod = _scaled(gm, b, b(product, x, w), alpha, "alpha")
    if beta == 0:
        return prod
    return b(aten.add.Tensor, prod, _scaled(gm, b, bias, beta, "beta"))


@decomposition(aten.baddbmm.default)
def baddbmm(gm, n, b):
    """``beta * input + alpha * bmm(b1, b2)``, as :func:`_addmm` with bmm."""
    return _addmm(gm, n, b, aten.bmm.default)


@decomposition(aten.addmm.default, aten.mm.default, aten.matmul.default)
def linearize(gm, n, b):
    """addmm/mm/matmul with a constant 2-D right operand -> linear; addmm of two activations
    -> mm + add; matmul with a 1-D operand -> a matrix product (:func:`_vector_matmul`)."""
    if n.target == aten.addmm.default:
        bias, x, w = n.args[0], n.args[1], n.args[2]
        if arg(n, 3, "beta", 1) != 1 or arg(n, 4, "alpha", 1) != 1:
            return _addmm(gm, n, b)
    else:
        bias, (x, w) = None, n.args[:2]
        if n.target == aten.matmul.default:
            vector = _vector_matmul(gm, n, b)
            if vector is not None:
                return vector
    wt = get_constant(gm, w)
    if wt is None or wt.dim() != 2:
        if n.target == aten.addmm.default:
            return b(aten.add.Tensor, b(aten.mm.default, x, w), bias)
        return None
    weight = b.const(gm, wt.t().contiguous(), "lin_w")
    if bias is not None and get_constant(gm, bias) is None:
        return b(aten.add.Tensor, b(aten.linear.default, x, weight), bias)
    return b(aten.linear.default, x, weight, bias)


def _shared_bias(gm, n, bias) -> bool:
    """Whether the constant ``bias`` of linear ``n`` is one node read by other ops too (a
    module called more than once, e.g. every time step of an unrolled LSTM)."""
    return get_constant(gm, bias) is not None and any(u is not n for u in bias.users)


@decomposition(aten.linear.default)
def linear(gm, n, b):
    """linear whose weight is computed (not a parameter, e.g. a slice of attention's packed
    in-projection): ``x @ w^T (+ bias)`` as a MATMUL, since CONV2D takes constant weights.

    In INT a constant bias shared with other ops gets a node of its own: PT2E derives an int32
    bias's scale (input scale x weight scale) once per bias *node*, from its first user's
    input, so the unrolled steps of a recurrent cell whose inputs have other scales would
    read the bias at the wrong scale (the fake-quant model adds it scaled by the first
    step's input scale; TOSA adds the int32 value at this step's).
    """
    x, w = n.args[0], n.args[1]
    bias = arg(n, 2, "bias")
    if get_constant(gm, w) is not None or (val(w) is not None and val(w).dim() != 2):
        if bias is not None and get_constant(gm, bias) is None:
            # a computed bias (Swin v2 zeroes the k part of its qkv bias): CONV2D's bias is
            # a constant, so the bias is added after
            return b(aten.add.Tensor, b(aten.linear.default, x, w), bias)
        if bias is None or b.profile != "INT" or not _shared_bias(gm, n, bias):
            return None
        return b(aten.linear.default, x, w, b.const(gm, get_constant(gm, bias), "lin_b"))
    out = b(aten.matmul.default, x, b(aten.permute.default, w, [1, 0]))
    return out if bias is None else b(aten.add.Tensor, out, bias)


@decomposition(aten.outer.default, aten.ger.default)
def outer(gm, n, b):
    """``outer(a, b) = a[:, None] * b[None, :]`` (a broadcast MUL)."""
    x, y = n.args[0], n.args[1]
    if val(x) is None or val(y) is None or val(x).dim() != 1 or val(y).dim() != 1:
        return None
    return b(aten.mul.Tensor, b(aten.reshape.default, x, [-1, 1]), b(aten.reshape.default, y, [1, -1]))
