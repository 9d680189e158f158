"""Decompose composite aten ops into primitives that map 1:1 onto TOSA (or onto a TABLE).

Run before quantization in the INT profile so that every intermediate of, e.g., a
layer norm or a softmax gets its own observer; run as the first pass in FP. The
decompositions live in :mod:`lowering.passes.decompositions`, one module per op family,
registered in :mod:`lowering.passes.rewrites`.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import get_constant, propagate_values, val
from . import decompositions  # noqa: F401 - registers the decompositions
from .base import GraphPass, PassContext
from .decompositions._common import PASS as DECOMPOSE_PASS
from .decompositions._common import arg, const_like, tensor_operand
from .rewrites import apply_rewrites, rewrite, rewrites_for

aten = torch.ops.aten

#: aten overload -> decomposition, in any profile (``DecomposeForTosa`` picks by profile).
DECOMPOSITIONS = rewrites_for(DECOMPOSE_PASS)


class DecomposeForTosa(GraphPass):
    """Rewrite composite ops (layer_norm, softmax, group_norm, batch_norm, div, split,
    addmm, pow, var, factories...) into primitive aten ops.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.softmax(x, -1)
        >>> gm = torch.export.export(M(), (torch.ones(2, 3),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(2, 3),))
        >>> DecomposeForTosa()(gm, PassContext())
        >>> sorted({n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"})
        ['amax.default', 'exp.default', 'mul.Tensor', 'reciprocal.default', 'sub.Tensor', 'sum.dim_IntList']
    """

    restructures = True

    def __init__(self, extra: dict | None = None):
        self.extra = dict(extra or {})

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        table = {**rewrites_for(DECOMPOSE_PASS, ctx.profile), **self.extra}
        rounds = 0
        # a decomposition may produce ops that decompose further (floor_divide of integers
        # -> div.Tensor_mode); four rounds cover the deepest chain
        while rounds < 4 and apply_rewrites(gm, table, ctx.profile):
            rounds += 1
            _refresh_values(gm, ctx)
        ctx.notes["graph_changed"] = ctx.notes.get("graph_changed", False) or rounds > 0


def _refresh_values(gm: fx.GraphModule, ctx: PassContext) -> None:
    """Value metadata for the nodes a round created: a decomposition that replaces a tuple's
    getitems (unbind -> slices) leaves their readers (an attention's q, k, v) without shapes,
    and those readers' decompositions need them in the next round."""
    if ctx.example_inputs and any(val(n) is None and "val" not in n.meta for n in gm.graph.nodes
                                  if n.op == "call_function"):
        propagate_values(gm, ctx.example_inputs)


SCALARS_PASS = "ScalarsToTensors"

#: op with a python-scalar operand -> the same op on two tensors
_TENSOR_FORM = {
    aten.add.Tensor: aten.add.Tensor,
    aten.add.Scalar: aten.add.Tensor,
    aten.sub.Tensor: aten.sub.Tensor,
    aten.sub.Scalar: aten.sub.Tensor,
    aten.mul.Tensor: aten.mul.Tensor,
    aten.mul.Scalar: aten.mul.Tensor,
    aten.maximum.default: aten.maximum.default,
    aten.minimum.default: aten.minimum.default,
    aten.eq.Scalar: aten.eq.Tensor,
    aten.ne.Scalar: aten.ne.Tensor,
    aten.gt.Scalar: aten.gt.Tensor,
    aten.ge.Scalar: aten.ge.Tensor,
    aten.lt.Scalar: aten.lt.Tensor,
    aten.le.Scalar: aten.le.Tensor,
    aten.bitwise_and.Scalar: aten.bitwise_and.Tensor,
    aten.bitwise_or.Scalar: aten.bitwise_or.Tensor,
    aten.bitwise_xor.Scalar: aten.bitwise_xor.Tensor,
    aten.__and__.Scalar: aten.bitwise_and.Tensor,
    aten.__or__.Scalar: aten.bitwise_or.Tensor,
    aten.__xor__.Scalar: aten.bitwise_xor.Tensor,
    aten.__and__.Tensor: aten.bitwise_and.Tensor,
    aten.__or__.Tensor: aten.bitwise_or.Tensor,
    aten.__xor__.Tensor: aten.bitwise_xor.Tensor,
    aten.__lshift__.Scalar: aten.bitwise_left_shift.Tensor,
    aten.__lshift__.Tensor: aten.bitwise_left_shift.Tensor,
    aten.bitwise_left_shift.Tensor_Scalar: aten.bitwise_left_shift.Tensor,
    aten.__rshift__.Scalar: aten.bitwise_right_shift.Tensor,
    aten.__rshift__.Tensor: aten.bitwise_right_shift.Tensor,
    aten.bitwise_right_shift.Tensor_Scalar: aten.bitwise_right_shift.Tensor,
}
_WITH_ALPHA = {aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar}


def _in_dtype(gm, b, operand: fx.Node, dtype: torch.dtype) -> fx.Node:
    """``operand`` converted to ``dtype``: constants here, other tensors by ``_to_copy``."""
    v = val(operand)
    if v is None or v.dtype == dtype:
        return operand
    ct = get_constant(gm, operand)
    if ct is not None:
        return b.const(gm, ct.to(dtype), "promoted")
    return b(aten._to_copy.default, operand, dtype=dtype)


@rewrite(SCALARS_PASS, *_TENSOR_FORM)
def scalar_operand_to_tensor(gm, n, b):
    """``op(x, 3)`` -> ``op(x, const)`` with ``alpha`` folded into the second operand; operands
    of different dtypes are converted to PyTorch's promoted dtype (TOSA's binary operators
    take one type: ``x_float * arange(8)`` multiplies floats)."""
    if len(n.args) < 2 or not isinstance(n.args[0], fx.Node):
        return None
    x, y = n.args[0], n.args[1]
    alpha = arg(n, 2, "alpha", 1)  # positional in the .Scalar overloads
    target = _TENSOR_FORM[n.target]
    if not isinstance(y, fx.Node):
        y = tensor_operand(gm, b, y * alpha if n.target in _WITH_ALPHA else y, x)
        alpha = 1
    if alpha != 1:
        ct = get_constant(gm, y)
        y = b.const(gm, ct * alpha, "alpha") if ct is not None else \
            b(aten.mul.Tensor, y, const_like(gm, b, float(alpha), y))
    vx, vy = val(x), val(y)
    if vx is not None and vy is not None and vx.dtype != vy.dtype:
        common = torch.promote_types(vx.dtype, vy.dtype)
        x, y = _in_dtype(gm, b, x, common), _in_dtype(gm, b, y, common)
    if target == n.target and (x, y) == tuple(n.args) and not n.kwargs:
        return None
    return b(target, x, y)


@rewrite(SCALARS_PASS, aten.rsub.Scalar)
def reversed_subtraction(gm, n, b):
    """``rsub(x, c, alpha) = c - alpha * x``."""
    x, c = n.args[0], n.args[1]
    alpha = arg(n, 2, "alpha", 1)
    if alpha != 1:
        x = b(aten.mul.Tensor, x, const_like(gm, b, alpha, x, "alpha"))
    return b(aten.sub.Tensor, const_like(gm, b, c, n.args[0]), x)


class ScalarsToTensors(GraphPass):
    """Turn python-scalar operands of binary ops into constant tensors (so that they
    are observed and quantized like any other operand), fold ``alpha`` and give both
    operands PyTorch's promoted dtype.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x + 3.0
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> ScalarsToTensors()(gm, PassContext())
        >>> [n.op for n in gm.graph.nodes]
        ['placeholder', 'get_attr', 'call_function', 'output']
    """

    restructures = True

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        apply_rewrites(gm, rewrites_for(SCALARS_PASS, ctx.profile), ctx.profile)
