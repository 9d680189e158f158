"""softmax / log_softmax (every aten form) and glu."""

from __future__ import annotations

import torch

from ...graph_utils import val
from ._common import decomposition

aten = torch.ops.aten


@decomposition(aten.softmax.int, aten._softmax.default, aten.log_softmax.int,
               aten._log_softmax.default)
def softmax(gm, n, b):
    """exp(x - max) / sum(exp(x - max)) along ``dim``; the log form subtracts log(sum).

    The max is subtracted so that exp never overflows; in INT it also gives exp a fixed
    input range (<= 0) to tabulate.
    """
    x, dim = n.args[0], n.args[1]
    shifted = b(aten.sub.Tensor, x, b(aten.amax.default, x, [dim], True))
    exp = b(aten.exp.default, shifted)
    total = b(aten.sum.dim_IntList, exp, [dim], True)
    if n.target in (aten.log_softmax.int, aten._log_softmax.default):
        return b(aten.sub.Tensor, shifted, b(aten.log.default, total))
    return b(aten.mul.Tensor, exp, b(aten.reciprocal.default, total))


@decomposition(aten.glu.default)
def glu(gm, n, b):
    """glu(x, dim): first half of ``x`` along ``dim`` times sigmoid of the second half."""
    x = n.args[0]
    dim = (n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", -1)) % val(x).dim()
    half = val(x).shape[dim] // 2
    first = b(aten.slice.Tensor, x, dim, 0, half)
    second = b(aten.slice.Tensor, x, dim, half, 2 * half)
    return b(aten.mul.Tensor, first, b(aten.sigmoid.default, second))
