"""Reductions: mean, sum, amax, amin, prod, any, all, argmax, argmin, cumsum."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import LoweringError
from ..graph_utils import NHWC, inverse
from ..serialize import INT_OF
from .common import (
    cast_to,
    fp_binary,
    fp_scalar,
    fp_unary,
    requantize,
    rescale,
    rescale_ties_even,
    to_int32,
)
from .pool import avg_pool
from .registry import register

aten = torch.ops.aten


def _dims(node, rank, i=1):
    d = node.args[i] if len(node.args) > i else node.kwargs.get("dim")
    if d is None or (isinstance(d, (list, tuple)) and len(d) == 0):
        return list(range(rank))
    if isinstance(d, int):
        d = [d]
    return sorted({x % rank for x in d})


def _keepdim(node, i=2):
    return bool(node.args[i]) if len(node.args) > i else bool(node.kwargs.get("keepdim", False))


def _reduce_chain(em, op, x, phys_axes, suffix, **attrs):
    shape = list(em.writer.shapes[x])
    for ax in phys_axes:
        shape[ax] = 1
        nxt = em.new(f"{suffix}{ax}", list(shape), em.writer.dtypes[x])
        em.writer.op(op, [x], nxt, axis=ax, **attrs)
        x = nxt
    return x


def _finish(em, node, res, layout, keep):
    """Reshape a keepdim result to the node's shape and bind it."""
    if keep:
        em.bind(node, res, layout)
    else:
        out = em.out(node)
        em.writer.op("RESHAPE", [res, em.const_shape("out_shape", em.shape(node))], out)
        em.bind(node, out)


def _layout_for(em, node, x_node, keep):
    lay = em.layout(node) if keep else None
    if lay is None and not keep and em.has_layouts(x_node):
        lay = next(iter(em.has_layouts(x_node)))
        if isinstance(lay, tuple) and lay and lay[0] == "rank":
            lay = None
    return lay


def _operand_in_layout(em, node, x_node, dims, keep):
    """The reduction input in the layout the output keeps, and the reduced axes in that layout.

    Returns ``(tensor, layout, physical_axes)``; ``layout`` is None for PyTorch order.
    """
    lay = _layout_for(em, node, x_node, keep)
    x = em.tensor(x_node, lay)
    inv = inverse(lay or tuple(range(len(em.shape(x_node)))))
    return x, lay, [inv[d] for d in dims]


@register(aten.mean.dim, aten.mean.default)
def mean(em, node):
    x_node = node.args[0]
    rank = len(em.shape(x_node))
    dims = _dims(node, rank)
    keep = _keepdim(node)
    if rank == 4 and dims == [2, 3]:
        in_shape = em.shape(x_node, NHWC)
        x = em.tensor(x_node, NHWC)
        k = [in_shape[1], in_shape[2]]
        if keep:
            em.bind(node, avg_pool(em, node, x_node, x, in_shape, k, k, [0, 0, 0, 0]), NHWC)
        else:
            saved = em.out
            em.out = lambda n, layout=None, dtype=None: em.new("pool", [in_shape[0], 1, 1, in_shape[3]],
                                                               dtype or em.dtype(n))
            try:
                res = avg_pool(em, node, x_node, x, in_shape, k, k, [0, 0, 0, 0])
            finally:
                em.out = saved
            _finish(em, node, res, None, False)
        return
    x, lay, phys = _operand_in_layout(em, node, x_node, dims, keep)
    count = int(np.prod([em.shape(x_node)[d] for d in dims]))
    if em.is_int:
        qi, qo = em.qin(node, x_node), em.qout(node)
        xi = to_int32(em, x, qi, "i32")
        s = _reduce_chain(em, "REDUCE_SUM", xi, phys, "sum")
        res = rescale_ties_even(em, s, INT_OF[qo.dtype], qi.s / (count * qo.s), qo.zp, "rs")
    else:
        s = _reduce_chain(em, "REDUCE_SUM", x, phys, "sum")
        res = fp_binary(em, "MUL", s, fp_scalar(em, 1.0 / count, rank, "inv_n"), "scaled")
    _finish(em, node, res, lay, keep)


@register(aten.sum.dim_IntList, aten.sum.default)
def sum_(em, node):
    x_node = node.args[0]
    dims = _dims(node, len(em.shape(x_node)))
    keep = _keepdim(node)
    x, lay, phys = _operand_in_layout(em, node, x_node, dims, keep)
    if em.is_int and em.qout(node) is not None:
        qi, qo = em.qin(node, x_node), em.qout(node)
        xi = to_int32(em, x, qi, "i32")
        s = _reduce_chain(em, "REDUCE_SUM", xi, phys, "sum")
        res = rescale(em, s, INT_OF[qo.dtype], qi.s / qo.s, 0, qo.zp, "rs")
    else:
        if em.writer.dtypes[x] in ("BOOL", "INT8", "INT16") and em.dtype(node) == "INT32":
            # (PyTorch sums bool and small integers as int64, here int32: count in int32)
            x = cast_to(em, x, "INT32", "i32")
        if em.writer.dtypes[x] not in ("FP32", "INT32"):
            raise LoweringError("sum of this dtype not supported", node=node.name)
        res = _reduce_chain(em, "REDUCE_SUM", x, phys, "sum")
    _finish(em, node, res, lay, keep)


def _reduce(em, node, op: str, **attrs):
    """Reduce ``node.args[0]`` over ``node``'s dims with ``op`` (keepdim as the node says)."""
    x_node = node.args[0]
    dims = _dims(node, len(em.shape(x_node)))
    keep = _keepdim(node)
    x, lay, phys = _operand_in_layout(em, node, x_node, dims, keep)
    return _reduce_chain(em, op, x, phys, "red", **attrs), lay, keep


@register(aten.amax.default, aten.amin.default)
def amax(em, node):
    res, lay, keep = _reduce(em, node, "REDUCE_MAX" if node.target == aten.amax.default
                             else "REDUCE_MIN", nan_mode="PROPAGATE")
    if em.is_int:
        res = requantize(em, res, em.qin(node, node.args[0]), em.qout(node), "rq")
    _finish(em, node, res, lay, keep)


@register(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim,
          aten.all.dims)
def any_all(em, node):
    """REDUCE_ANY / REDUCE_ALL of a bool tensor (other dtypes compare with zero first:
    :mod:`lowering.passes.decompositions.reduce`)."""
    if em.dtype(node.args[0]) != "BOOL":
        raise LoweringError("any/all of a non-bool tensor", node=node.name)
    op = "REDUCE_ANY" if node.target in (aten.any.default, aten.any.dim, aten.any.dims) \
        else "REDUCE_ALL"
    _finish(em, node, *_reduce(em, node, op))


@register(aten.prod.dim_int, aten.prod.default, profiles={"FP"})
def prod(em, node):
    """REDUCE_PRODUCT, which TOSA 1.0 defines for floats only (FP profile)."""
    if em.dtype(node.args[0]) != "FP32":
        raise LoweringError("prod of non-float tensors is not supported", node=node.name)
    _finish(em, node, *_reduce(em, node, "REDUCE_PRODUCT"))


def _first_index_of_max(em, x: str, shape: list[int], dim: int) -> str:
    """ARGMAX of an INT32 tensor, which TOSA 1.0's ARGMAX does not take (int8/int16/float
    only): the first index where ``x`` equals its maximum along ``dim``, exactly (REDUCE_MAX,
    EQUAL, SELECT of the index or ``N``, REDUCE_MIN), as PyTorch's first-maximum argmax."""
    keep = list(shape)
    keep[dim] = 1
    top = em.new("top", keep, "INT32")
    em.writer.op("REDUCE_MAX", [x], top, axis=dim, nan_mode="PROPAGATE")
    hit = em.new("hit", list(shape), "BOOL")
    em.writer.op("EQUAL", [x, top], hit)
    along = [1] * len(shape)
    along[dim] = shape[dim]
    index = em.const("index", np.arange(shape[dim]), "INT32", along)
    count = em.const("count", [shape[dim]], "INT32", [1] * len(shape))
    picked = em.new("picked", list(shape), "INT32")
    em.writer.op("SELECT", [hit, index, count], picked)
    first = em.new("first", keep, "INT32")
    em.writer.op("REDUCE_MIN", [picked], first, axis=dim, nan_mode="PROPAGATE")
    return first


@register(aten.argmax.default, aten.argmin.default)
def argmax(em, node):
    """ARGMAX along ``dim`` (the flattened tensor without one), int32 indices.

    argmin is the argmax of an order-reversing map with the same ties: NEGATE for floats,
    BITWISE_NOT (``-x - 1``, no overflow) for integers, quantized ones included.
    """
    x_node = node.args[0]
    shape = em.shape(x_node)
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    x = em.tensor(x_node)
    if node.target == aten.argmin.default:
        reverse = "NEGATE" if em.writer.dtypes[x] == "FP32" else "BITWISE_NOT"
        if reverse == "NEGATE":
            x = fp_unary(em, "NEGATE", x, "reversed")
        else:
            reversed_ = em.new("reversed", shape, em.writer.dtypes[x])
            em.writer.op("BITWISE_NOT", [x], reversed_)
            x = reversed_
    if dim is None or len(shape) == 1:
        # a row [1, N]: ARGMAX of a rank-1 tensor would have a rank-0 result
        row = [1, int(np.prod(shape))]
        flat = em.new("flat", row, em.writer.dtypes[x])
        em.writer.op("RESHAPE", [x, em.const_shape("flat_shape", row)], flat)
        x, shape, dim = flat, row, 1
    dim %= len(shape)
    red = [s for i, s in enumerate(shape) if i != dim] or [1]
    if em.writer.dtypes[x] == "INT32":
        res = _first_index_of_max(em, x, shape, dim)
    else:
        res = em.new("argmax", red, "INT32")
        em.writer.op("ARGMAX", [x], res, axis=dim, nan_mode="PROPAGATE")
    out = em.out(node, None, "INT32")
    em.writer.op("RESHAPE", [res, em.const_shape("out_shape", em.shape(node))], out)
    em.bind(node, out)


@register(aten.cumsum.default)
def cumsum(em, node):
    x_node, dim = node.args[0], node.args[1]
    shape = em.shape(x_node)
    rank = len(shape)
    dim %= rank
    x = em.tensor(x_node)
    perm = [i for i in range(rank) if i != dim] + [dim]
    L = shape[dim]
    R = int(np.prod([shape[i] for i in perm[:-1]])) if rank > 1 else 1
    dt = em.writer.dtypes[x]
    if perm != list(range(rank)):
        xt = em.new("moved", [shape[i] for i in perm], dt)
        em.writer.op("TRANSPOSE", [x], xt, perms=perm)
    else:
        xt = x
    x3 = em.new("x3", [1, R, L], dt)
    em.writer.op("RESHAPE", [xt, em.const_shape("x3_shape", [1, R, L])], x3)
    tri = np.triu(np.ones((L, L))).reshape(1, L, L)
    if em.is_int:
        qi, qo = em.qin(node, x_node), em.qout(node)
        ones = em.const("tri", tri, dt, [1, L, L])
        acc = em.new("acc", [1, R, L], "INT48" if dt == "INT16" else "INT32")
        em.writer.op("MATMUL", [x3, ones, em.const("azp", [qi.zp], dt, [1]),
                                em.const("bzp", [0], dt, [1])], acc)
        res = rescale(em, acc, INT_OF[qo.dtype], qi.s / qo.s, 0, qo.zp, "rs")
    else:
        if dt != "FP32":
            raise LoweringError("cumsum of integer tensors not supported", node=node.name)
        z = em.const("zp", [0.0], "FP32", [1])
        res = em.new("mm", [1, R, L], dt)
        em.writer.op("MATMUL", [x3, em.const("tri", tri, dt, [1, L, L]), z, z], res)
    back = em.new("back", [shape[i] for i in perm], em.writer.dtypes[res])
    em.writer.op("RESHAPE", [res, em.const_shape("back_shape", [shape[i] for i in perm])], back)
    out = em.out(node)
    em.writer.op("TRANSPOSE", [back], out, perms=list(inverse(perm)))
    em.bind(node, out)
