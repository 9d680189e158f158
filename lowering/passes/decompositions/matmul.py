"""addmm / mm / matmul with a constant right operand -> linear (a CONV2D in TOSA)."""

from __future__ import annotations

import torch

from ...graph_utils import get_constant
from ._common import decomposition

aten = torch.ops.aten


@decomposition(aten.addmm.default, aten.mm.default, aten.matmul.default)
def linearize(gm, n, b):
    """addmm/mm/matmul with a constant 2-D right operand -> linear; addmm of two activations
    -> mm + add."""
    if n.target == aten.addmm.default:
        bias, x, w = n.args[0], n.args[1], n.args[2]
        if n.kwargs.get("beta", 1) != 1 or n.kwargs.get("alpha", 1) != 1:
            return None
    else:
        bias, (x, w) = None, n.args[:2]
    wt = get_constant(gm, w)
    if wt is None or wt.dim() != 2:
        if n.target == aten.addmm.default:
            return b(aten.add.Tensor, b(aten.mm.default, x, w), bias)
        return None
    weight = b.const(gm, wt.t().contiguous(), "lin_w")
    if bias is not None and get_constant(gm, bias) is None:
        return b(aten.add.Tensor, b(aten.linear.default, x, weight), bias)
    return b(aten.linear.default, x, weight, bias)
