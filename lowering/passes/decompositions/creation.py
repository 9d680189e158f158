"""Tensor factories (full, arange, eye, linspace, zeros/ones and their ``_like``/``new_``
forms, fill): their values depend on python arguments and shapes only, so they become constants."""

from __future__ import annotations

import torch
import torch.fx as fx

from ...graph_utils import val
from ._common import decomposition

aten = torch.ops.aten


@decomposition(aten.full.default, aten.zeros.default, aten.ones.default,
               aten.scalar_tensor.default, aten.arange.default, aten.arange.start,
               aten.arange.start_step, aten.eye.default, aten.eye.m, aten.linspace.default)
def factory(gm, n, b):
    """Evaluate the factory on its (python) arguments once; the result is a constant."""
    if n.all_input_nodes:
        return None
    return b.const(gm, n.target(*n.args, **n.kwargs), n.name)


@decomposition(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default,
               aten.new_full.default, aten.new_zeros.default, aten.new_ones.default,
               aten.fill.Scalar, aten.fill.Tensor, aten.zero.default)
def factory_like(gm, n, b):
    """``*_like(x, ...)`` / ``x.new_*(...)`` read only the shape and dtype of ``x``: evaluated
    on an empty tensor of that shape and dtype, the result is a constant."""
    x, *rest = n.args
    v = val(x)
    if v is None or any(isinstance(a, fx.Node) for a in n.all_input_nodes if a is not x):
        return _fill_with_tensor(gm, n, b)
    return b.const(gm, n.target(torch.empty(tuple(v.shape), dtype=v.dtype), *rest, **n.kwargs),
                   n.name)


def _fill_with_tensor(gm, n, b):
    """``fill(x, value)`` with a computed 0-d/1-element ``value``: broadcast to the shape of
    ``x`` (cast to its dtype)."""
    if n.target != aten.fill.Tensor:
        return None
    x, value = n.args[0], n.args[1]
    vx, vv = val(x), val(value)
    if vx is None or vv is None or vv.numel() != 1:
        return None
    out = value
    if vv.dtype != vx.dtype:
        out = b(aten._to_copy.default, out, dtype=vx.dtype)
    if vv.dim() != vx.dim():
        out = b(aten.reshape.default, out, [1] * vx.dim())
    return b(aten.expand.default, out, list(vx.shape))
