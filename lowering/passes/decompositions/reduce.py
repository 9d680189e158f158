"""Reductions without a TOSA operator of their own: variance and standard deviation; any /
all of non-bool tensors (TOSA's REDUCE_ANY/REDUCE_ALL take bool); max / min along a dim
(values and indices)."""

from __future__ import annotations

import math

import torch

from ...graph_utils import val
from ._common import arg, const_like, decomposition, tuple_outputs

aten = torch.ops.aten


def _reduced_dims(dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    return sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)})


def _variance_args(n):
    """(dims, correction, keepdim) of var/std/var_mean/std_mean in any of their overloads."""
    if n.target in (aten.var.correction, aten.std.correction, aten.var_mean.correction, aten.std_mean.correction):
        correction = n.kwargs.get("correction")
        return arg(n, 1, "dim"), 1 if correction is None else correction, \
            bool(n.kwargs.get("keepdim", False))
    if n.target in (aten.var.default, aten.std.default, aten.var_mean.default, aten.std_mean.default):
        return None, int(bool(arg(n, 1, "unbiased", True))), False
    return arg(n, 1, "dim"), int(bool(arg(n, 2, "unbiased", True))), bool(arg(n, 3, "keepdim", False))


@decomposition(aten.var.correction, aten.var.dim, aten.var.default, aten.std.correction,
               aten.std.dim, aten.std.default)
def variance(gm, n, b):
    """``mean((x - mean(x))**2) * N / (N - correction)`` over the reduced dims; std is its
    square root. ``N <= correction`` (a division by zero in PyTorch) stays on the CPU."""
    x = n.args[0]
    v = val(x)
    dims_arg, correction, keepdim = _variance_args(n)
    dims = _reduced_dims(dims_arg, v.dim())
    count = math.prod(v.shape[d] for d in dims)
    if count <= correction:
        return None
    centered = b(aten.sub.Tensor, x, b(aten.mean.dim, x, dims, True))
    var = b(aten.mean.dim, b(aten.mul.Tensor, centered, centered), dims, keepdim)
    if correction:
        var = b(aten.mul.Tensor, var, const_like(gm, b, count / (count - correction), var,
                                                 "bessel"))
    if n.target in (aten.std.correction, aten.std.dim, aten.std.default):
        return b(aten.sqrt.default, var)
    return var


@decomposition(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim,
               aten.all.dims)
def any_all_of_values(gm, n, b):
    """any/all of a non-bool tensor reduce ``x != 0``; bool tensors go to the reduce visitor."""
    x = n.args[0]
    if val(x) is None or val(x).dtype == torch.bool:
        return None
    nonzero = b(aten.ne.Tensor, x, const_like(gm, b, 0, x, "zero"))
    return b(n.target, nonzero, *n.args[1:], **n.kwargs)


@decomposition(aten.max.dim, aten.min.dim)
def max_min_dim(gm, n, b):
    """``max(x, dim, keepdim)`` / ``min(...)``: the values are amax / amin, the indices
    argmax / argmin (both take the first of equal values)."""
    x, dim = n.args[0], n.args[1]
    keepdim = bool(arg(n, 2, "keepdim", False))
    is_max = n.target == aten.max.dim
    values = b(aten.amax.default if is_max else aten.amin.default, x, [dim], keepdim)
    indices = b(aten.argmax.default if is_max else aten.argmin.default, x, dim, keepdim)
    return tuple_outputs(n, [values, indices])


@decomposition(aten.max.default, aten.min.default)
def max_min_all(gm, n, b):
    """``max(x)`` / ``min(x)`` of a whole tensor: amax / amin over every dim."""
    x = n.args[0]
    if val(x) is None or val(x).dim() == 0:
        return None
    target = aten.amax.default if n.target == aten.max.default else aten.amin.default
    return b(target, x, list(range(val(x).dim())), False)


@decomposition(aten.logsumexp.default)
def logsumexp(gm, n, b):
    """``m + log(sum(exp(x - m)))`` with ``m = amax(x)`` over the dims (kept, then dropped
    unless ``keepdim``): PyTorch's own stable form, so exp never overflows. A row of -inf
    (m = -inf: nan here, -inf in PyTorch) is left to the caller's masks."""
    x = n.args[0]
    v = val(x)
    if v is None or not v.is_floating_point():
        return None
    dims = _reduced_dims(arg(n, 1, "dim"), v.dim())
    keepdim = bool(arg(n, 2, "keepdim", False))
    m = b(aten.amax.default, x, dims, True)
    total = b(aten.sum.dim_IntList, b(aten.exp.default, b(aten.sub.Tensor, x, m)), dims, True)
    out = b(aten.add.Tensor, b(aten.log.default, total), m)
    return out if keepdim else b(aten.squeeze.dims, out, dims)


@decomposition(aten.var_mean.correction, aten.var_mean.dim, aten.var_mean.default,
               aten.std_mean.correction, aten.std_mean.dim, aten.std_mean.default)
def var_mean(gm, n, b):
    """``(var, mean)`` / ``(std, mean)``: the variance (see :func:`variance`, decomposed in the
    next round) and a mean over the same dims."""
    x = n.args[0]
    v = val(x)
    if v is None or not v.is_floating_point():
        return None
    dims_arg, correction, keepdim = _variance_args(n)
    dims = _reduced_dims(dims_arg, v.dim())
    std = n.target in (aten.std_mean.correction, aten.std_mean.dim, aten.std_mean.default)
    spread = b(aten.std.correction if std else aten.var.correction, x, dims, correction=correction, keepdim=keepdim)
    return tuple_outputs(n, [spread, b(aten.mean.dim, x, dims, keepdim)])

