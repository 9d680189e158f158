"""Running extrema and the log of a running sum of exponentials, in terms of where,
reductions, comparisons and ARGMAX: ``torch.aminmax``, ``torch.cummax`` / ``torch.cummin``
(values and int64 indices) and ``torch.logcumsumexp``.

The cumulative ops look at a [..., L, L] lower triangle over the dim (moved last): row ``i``
holds ``x[..., j]`` for ``j <= i`` and, elsewhere, ``x[..., 0]``, which every prefix contains,
so the filler never changes a max or a min (no infinity, which an int8 observer would see).
One REDUCE_MAX / REDUCE_MIN of a row is the running extremum. Its index is PyTorch's: the
running max (min) moves on ``x[j] >= out`` (``<=``), so the index is the LAST ``j <= i`` where
``x[j]`` equals the running value (the last NaN once a NaN is met, FP): an ARGMAX over ``j`` of
``where(match, j, -1)`` (its value is ``j`` itself; ARGMAX, not a max reduction, because INT's
REDUCE_MAX of int32 would requantize). The triangle grows as ``numel * L``: beyond
:data:`lowering.passes.limits.QUADRATIC_ELEMENTS` the op stays on the CPU whole.

Claims:
- aminmax: one REDUCE_MIN and one REDUCE_MAX, exact (FP: float and integer tensors; INT: float
  tensors at their quantization, integer ones stay on the CPU: INT's max reduction requantizes).
- cummax / cummin, FP (float32, int32, int64): values and indices exact, NaN included.
  INT (float tensors): the values are levels of ``x``'s own quantization and the indices
  PyTorch's on the fake-quant input (ties made by quantization pick the last, as PyTorch would on
  those values); integer tensors stay on the CPU in INT.
- logcumsumexp, FP (float32): ``out[i] = m[i] + log(sum_{j <= i} exp(x[j] - m[i]))`` with
  ``m`` the running max (an infinite ``m`` taken as 0, as PyTorch's logsumexp does, so -inf
  prefixes give -inf and +inf gives +inf), where PyTorch adds one term at a time
  (``log_add_exp``): a few float32 ulps of the result (measured in the tests). INT: the
  difference is clamped at 0 (it is <= 0 wherever it counts), so exp's table covers (0, 1]; each
  piece is requantized as the fake-quant model's: within one output step of it (0 steps
  against it in float64, in the tests), not near PyTorch's float result at int8 resolution.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ...graph_utils import val
from ..limits import within_quadratic_bound
from ._common import PASS, arg, decomposition, number_const, tuple_outputs  # noqa: F401 - PASS for the doctests
from .scatter_cum import _back, _last

aten = torch.ops.aten

_INTEGER_DTYPES = (torch.int32, torch.int64)


def _lowerable(v, profile: str) -> bool:
    """Whether a running extremum of a tensor of value ``v`` lowers in ``profile``: float32,
    or (FP only) int32 / int64."""
    if v is None or v.numel() == 0:
        return False
    return v.dtype == torch.float32 or (profile == "FP" and v.dtype in _INTEGER_DTYPES)


# --------------------------------------------------------------------------- aminmax


@decomposition(aten.aminmax.default)
def aminmax(gm, n, b):
    """``torch.aminmax(x, dim=None, keepdim=False)``: ``(amin, amax)`` over ``dim`` (all dims
    when None), replacing the named tuple's getitems.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         low, high = torch.aminmax(x, dim=-1)
        ...         return high - low
        >>> x = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.5, 0.0]])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, lm.run(x)[0].tolist()
        ([], [5.0, 0.5])
    """
    x = n.args[0]
    v = val(x)
    dim = arg(n, 1, "dim")
    keepdim = bool(arg(n, 2, "keepdim", False))
    if not _lowerable(v, b.profile):
        return None
    if v.dim() == 0:
        return tuple_outputs(n, [x, x])
    dims = list(range(v.dim())) if dim is None else [dim % v.dim()]
    return tuple_outputs(n, [b(aten.amin.default, x, dims, keepdim), b(aten.amax.default, x, dims, keepdim)])


# --------------------------------------------------------------------------- cummax / cummin


def _triangle(gm, b, x: fx.Node, d: int, rank: int):
    """``(rows, picked, lower)`` of ``x`` along dim ``d`` (moved last, length L): ``rows``
    [..., 1, L], ``picked`` [..., L, L] with ``picked[..., i, j] = x[j]`` for ``j <= i``, else
    ``x[0]``, and the constant ``lower`` [L, L] mask (``j <= i``)."""
    length = val(x).shape[d]
    moved = _last(b, x, d, rank)
    rows = b(aten.unsqueeze.default, moved, -2)  # [..., 1, L]
    first = b(aten.unsqueeze.default, b(aten.slice.Tensor, moved, -1, 0, 1), -1)  # [..., 1, 1]
    lower = b.const(gm, torch.ones(length, length, dtype=torch.bool).tril(), "lower")
    return rows, b(aten.where.self, lower, rows, first), lower


def _fits(v, d: int) -> bool:
    """Whether the [..., L, L] triangle of a tensor of value ``v`` along ``d`` stays within
    the size bound."""
    return within_quadratic_bound(v.numel(), v.shape[d])


@decomposition(aten.cummax.default, aten.cummin.default)
def cummax(gm, n, b):
    """``torch.cummax(x, dim)`` / ``torch.cummin(x, dim)``: ``(values, indices)``, the running
    extremum of the triangle's rows and the last index where ``x`` equals it (see the module
    docstring).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.cummax(x, 0)
        >>> x = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> values, indices = lm.run(x)
        >>> lm.cpu_nodes, values.tolist(), indices.tolist()
        ([], [1.0, 3.0, 3.0, 3.0, 3.0], [0, 1, 2, 2, 4])
    """
    x, d = n.args[0], n.args[1]
    v = val(x)
    if not _lowerable(v, b.profile):
        return None
    if v.dim() == 0:
        return tuple_outputs(n, [x, b.const(gm, torch.zeros((), dtype=torch.int64), "index")])
    rank = v.dim()
    d %= rank
    if not _fits(v, d):
        return None
    length = v.shape[d]
    rows, picked, lower = _triangle(gm, b, x, d, rank)
    extremum = aten.amax.default if n.target == aten.cummax.default else aten.amin.default
    values = b(extremum, picked, [-1], False)  # [..., L]
    column = b(aten.unsqueeze.default, values, -1)  # [..., L, 1]
    match = b(aten.eq.Tensor, rows, column)
    if v.is_floating_point() and b.profile == "FP":  # a NaN matches the NaN it made the value
        both_nan = b(aten.logical_and.default, b(aten.ne.Tensor, rows, rows), b(aten.ne.Tensor, column, column))
        match = b(aten.logical_or.default, match, both_nan)
    match = b(aten.logical_and.default, match, lower)
    positions = b.const(gm, torch.arange(length, dtype=torch.int64), "positions")
    candidates = b(aten.where.self, match, positions, number_const(gm, b, -1, torch.int64, None, "none"))
    indices = b(aten.argmax.default, candidates, -1, False)  # the largest matching j
    return tuple_outputs(n, [_back(b, values, d, rank), _back(b, indices, d, rank)])


# --------------------------------------------------------------------------- logcumsumexp


@decomposition(aten.logcumsumexp.default)
def logcumsumexp(gm, n, b):
    """``torch.logcumsumexp(x, dim)`` of a float32 tensor: the running max ``m`` (a cummax
    value, :func:`_triangle`), then ``m + log(sum_{j <= i} exp(x[j] - m[i]))`` over the
    triangle (see the module docstring for the profiles' forms).

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.logcumsumexp(x, -1)
        >>> x = torch.tensor([[0.0, -float("inf"), 2.0, -50.0]])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, torch.allclose(lm.run(x)[0], M()(x), atol=1e-6)
        ([], True)
    """
    x, d = n.args[0], n.args[1]
    v = val(x)
    if v is None or v.dtype != torch.float32 or v.numel() == 0:
        return None
    if v.dim() == 0:
        return x
    rank = v.dim()
    d %= rank
    if not _fits(v, d):
        return None
    rows, picked, lower = _triangle(gm, b, x, d, rank)
    running_max = b(aten.amax.default, picked, [-1], True)  # [..., L, 1]
    zero = number_const(gm, b, 0.0, torch.float32, None, "zero")
    if b.profile == "FP":
        # an infinite max shifts by 0 (PyTorch's logsumexp): -inf - -inf would be NaN
        infinite = b(aten.eq.Tensor, b(aten.abs.default, running_max),
                     number_const(gm, b, float("inf"), torch.float32, None, "inf"))
        shift = b(aten.where.self, infinite, zero, running_max)
        difference = b(aten.sub.Tensor, rows, shift)
    else:
        # INT: <= 0 wherever the triangle counts it; clamped, exp's table covers (0, 1] only
        shift = running_max
        difference = b(aten.minimum.default, b(aten.sub.Tensor, rows, shift), zero)
    terms = b(aten.where.self, lower, b(aten.exp.default, difference), zero)
    total = b(aten.sum.dim_IntList, terms, [-1], True)
    out = b(aten.squeeze.dims, b(aten.add.Tensor, b(aten.log.default, total), shift), [-1])
    return _back(b, out, d, rank)
