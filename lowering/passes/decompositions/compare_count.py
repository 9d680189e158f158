"""Comparisons and counts without a TOSA operator of their own, in terms of comparisons, casts
and sums: ``torch.count_nonzero``, ``torch.isclose``, ``torch.isnan`` / ``isinf`` /
``isposinf`` / ``isneginf`` and ``torch.bucketize`` / ``torch.searchsorted``.

PyTorch's own table decomposes isclose and count_nonzero into prims, not all of which lower;
a CPU piece inside one op's decomposition would leave a partition boundary with no PyTorch
node (see :mod:`.composite`). So each rewrite here is all-or-nothing: every piece lowers in
the profile it is registered for, or it returns None and the op stays whole on the CPU.

Profiles: count_nonzero and bucketize / searchsorted lower in FP and INT. In INT their input
is compared at its own quantization (the comparison's other operand, the zero or the
boundaries, shares it: :data:`lowering.quantizer.COMPARE`), which is what the fake-quant model
compares too, so the integer results equal the fake-quant model's. isclose lowers in FP
exactly (PyTorch's formula and operation order) and in INT as ``|x - y| <= atol + |rtol * y|``
on the quantized values (which are finite: no infinity or NaN terms). In INT the difference
and the tolerance are each quantized before the comparison (the comparison shares one
quantization between them), exactly as in the fake-quant model of the rewritten graph, which
the TOSA result equals; against PyTorch's isclose of the dequantized inputs the boolean can
differ only where ``|x - y|`` lies within a few quantization steps of the tolerance (its
default, 1e-8 + 1e-5 relative, is far below an int8 step: only large tolerances mean much in
INT). Infinite or NaN tolerances stay on the CPU in INT.
"""

from __future__ import annotations

import math

import torch
import torch.fx as fx

from ...graph_utils import get_constant, val
from ..limits import within_quadratic_bound
from ._common import PASS, arg, decomposition, number_const  # noqa: F401 - PASS for the doctests

aten = torch.ops.aten


# --------------------------------------------------------------------------- count_nonzero


def _count_dims(n: fx.Node, rank: int) -> list[int] | None:
    """The dims count_nonzero reduces, sorted and non-negative; None: all of them."""
    dim = arg(n, 1, "dim")
    if dim is None:
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:  # count_nonzero(x, dim=[]) counts over every dim, as sum(x != 0, []) does
        return None
    return sorted({d % max(rank, 1) for d in dims})


@decomposition(aten.count_nonzero.default, aten.count_nonzero.dim_IntList)
def count_nonzero(gm, n, b):
    """``count_nonzero(x, dim)``: ``sum(x != 0, dim)`` as int64 (int32 in TOSA). ``-0.0`` is
    zero (IEEE ``!=``), NaN is not. Bool tensors are cast directly.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.count_nonzero.dim_IntList].fn.__name__
        'count_nonzero'
    """
    x = n.args[0]
    v = val(x)
    if v is None or v.dtype not in (torch.float32, torch.int32, torch.int64, torch.int8,
                                    torch.int16, torch.bool):
        return None
    if v.dtype == torch.bool:
        nonzero = x
    else:
        nonzero = b(aten.ne.Tensor, x, number_const(gm, b, 0, v.dtype, x, "zero"))
    ones = b(aten._to_copy.default, nonzero, dtype=torch.int64)
    dims = _count_dims(n, v.dim())
    if v.dim() == 0 and dims is None:
        return ones
    return b(aten.sum.dim_IntList, ones, list(range(v.dim())) if dims is None else dims, False)


# --------------------------------------------------------------------------- isclose


@decomposition(aten.isclose.default)
def isclose(gm, n, b):
    """``isclose(a, b, rtol, atol, equal_nan)`` of float32 tensors, PyTorch's formula in its own
    operation order (ATen's TensorCompare ``isclose``), so every float operation rounds as
    PyTorch's does and the boolean is exact:
    ``(a == b) | (equal_nan & isnan(a) & isnan(b)) |
    (isfinite(|a - b|) & (|a - b| <= atol + |rtol * b|))`` (the last term only when a tolerance
    is non-zero). ``isnan(t)`` is ``t != t``; ``isfinite(e)`` of the non-negative error is
    ``e < inf`` (False for NaN and inf). INT: :func:`_int_isclose`.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> sorted(REWRITES[PASS][aten.isclose.default].profiles)
        ['FP', 'INT']
    """
    x, y = n.args[0], n.args[1]
    rtol, atol = float(arg(n, 2, "rtol", 1e-5)), float(arg(n, 3, "atol", 1e-8))
    equal_nan = bool(arg(n, 4, "equal_nan", False))
    vx, vy = val(x), val(y)
    if not isinstance(y, fx.Node) or vx is None or vy is None or vx.dtype != torch.float32 or \
            vy.dtype != torch.float32 or math.isnan(rtol) or math.isnan(atol):
        return None
    if b.profile == "INT":
        return _int_isclose(gm, b, x, y, rtol, atol, x if vx.dim() >= vy.dim() else y)
    close = b(aten.eq.Tensor, x, y)
    if equal_nan:
        both_nan = b(aten.logical_and.default, b(aten.ne.Tensor, x, x), b(aten.ne.Tensor, y, y))
        close = b(aten.logical_or.default, close, both_nan)
    if rtol == 0 and atol == 0:
        return close
    ref = x if vx.dim() >= vy.dim() else y
    allowed = b(aten.add.Tensor, b(aten.abs.default,
                                   b(aten.mul.Tensor, y, number_const(gm, b, rtol, torch.float32, ref,
                                                                      "rtol"))),
                number_const(gm, b, atol, torch.float32, ref, "atol"))
    actual = b(aten.abs.default, b(aten.sub.Tensor, x, y))
    finite = b(aten.lt.Tensor, actual, number_const(gm, b, math.inf, torch.float32, ref, "inf"))
    within = b(aten.logical_and.default, finite, b(aten.le.Tensor, actual, allowed))
    return b(aten.logical_or.default, close, within)


def _int_isclose(gm, b, x, y, rtol: float, atol: float, ref):
    """isclose of the quantized (finite) ``x`` and ``y``: ``|x - y| <= atol + |rtol * y|``
    (``x == y`` alone when both tolerances are zero). Without NaN or infinities the other
    terms of PyTorch's formula add nothing: ``x == y`` gives ``|x - y| = 0``, which the
    non-negative tolerance always allows (``equal_nan`` has no NaN to match). Each
    intermediate is quantized on its own and the comparison shares one quantization between
    difference and tolerance, as in the fake-quant model. None (the op stays on the CPU) for an
    infinite tolerance, which no quantized tolerance can hold."""
    if math.isinf(rtol) or math.isinf(atol):
        return None
    if rtol == 0 and atol == 0:
        return b(aten.eq.Tensor, x, y)
    actual = b(aten.abs.default, b(aten.sub.Tensor, x, y))
    allowed = None
    if rtol != 0:
        allowed = b(aten.abs.default,
                    b(aten.mul.Tensor, y, number_const(gm, b, rtol, torch.float32, ref, "rtol")))
    if atol != 0:
        atol_node = number_const(gm, b, atol, torch.float32, ref, "atol")
        allowed = atol_node if allowed is None else b(aten.add.Tensor, allowed, atol_node)
    return b(aten.le.Tensor, actual, allowed)


# --------------------------------------------------------------------------- isnan / isinf


_NON_FINITE_TESTS = (aten.isnan.default, aten.isinf.default, aten.isposinf.default, aten.isneginf.default,
                     aten.isfinite.default)


@decomposition(*_NON_FINITE_TESTS)
def non_finite_test(gm, n, b):
    """``isnan(x)`` is ``x != x``; ``isinf`` / ``isposinf`` / ``isneginf`` compare ``|x|`` (or
    ``x``) with infinity, exactly, in FP; ``isfinite(x)`` is ``|x| < inf`` (False for NaN). In
    INT a quantized value is always finite (as the fake-quant model's is), and integer tensors
    hold no NaN or infinity: there each test is ``x != x``, False everywhere (``x ^ x`` for
    bool tensors, which TOSA does not compare), and isfinite its negation.

    Example:
        >>> import lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.where(torch.isnan(x) | torch.isinf(x), torch.zeros_like(x), x)
        >>> x = torch.tensor([1.0, float("nan"), -float("inf"), 2.0])
        >>> lm = lowering.lower(M(), (x,), profile="FP")
        >>> lm.cpu_nodes, lm.run(x)[0].tolist()
        ([], [1.0, 0.0, 0.0, 2.0])
    """
    x = n.args[0]
    v = val(x)
    if v is None or v.dtype not in (torch.float32, torch.int32, torch.int64, torch.bool):
        return None
    finite = n.target == aten.isfinite.default
    if v.dtype == torch.bool or b.profile == "INT" or not v.is_floating_point():
        never = b(aten.logical_xor.default, x, x) if v.dtype == torch.bool else b(aten.ne.Tensor, x, x)
        return b(aten.logical_not.default, never) if finite else never
    if n.target == aten.isnan.default:
        return b(aten.ne.Tensor, x, x)
    if finite:
        return b(aten.lt.Tensor, b(aten.abs.default, x), number_const(gm, b, math.inf, torch.float32, x, "inf"))
    if n.target == aten.isinf.default:
        return b(aten.eq.Tensor, b(aten.abs.default, x), number_const(gm, b, math.inf, torch.float32, x, "inf"))
    infinity = math.inf if n.target == aten.isposinf.default else -math.inf
    return b(aten.eq.Tensor, x, number_const(gm, b, infinity, torch.float32, x, "inf"))


# --------------------------------------------------------------------------- bucketize / searchsorted


def _unsqueezed(gm, b, x: fx.Node, dim: int) -> fx.Node:
    """``x.unsqueeze(dim)``; a constant is reshaped here, once."""
    ct = get_constant(gm, x)
    if ct is not None:
        return b.const(gm, ct.unsqueeze(dim), "boundaries")
    return b(aten.unsqueeze.default, x, dim)


def _insertion_points(gm, b, boundaries: fx.Node, x: fx.Node, right: bool, out_int32: bool):
    """Where ``x`` would be inserted into the last dim of sorted ``boundaries`` [..., M]:
    ``M - count(boundaries > x)`` (``right``) or ``M - count(boundaries >= x)``, each count a
    broadcast comparison [..., K, M] summed over M. PyTorch's binary search moves right
    whenever ``boundaries[mid] >= x`` (left) fails, so a NaN ``x`` goes to the end (M): the
    comparisons are false for NaN, and M minus a count of 0 is M, as PyTorch's.
    ``x`` is the comparison's first operand, so that in INT the boundaries share ``x``'s
    quantization, not the other way round."""
    vb, vx = val(boundaries), val(x)
    if vb is None or vx is None or vb.dtype != vx.dtype or vb.dim() < 1 or \
            vb.dtype not in (torch.float32, torch.int32, torch.int64):
        return None
    m = vb.shape[-1]
    if vb.dim() > 1 and (vx.dim() != vb.dim() or vx.shape[:-1] != vb.shape[:-1]):
        return None
    if m == 0 or vx.numel() == 0 or not within_quadratic_bound(vx.numel(), m):
        return None
    row = _unsqueezed(gm, b, boundaries, -2) if vb.dim() > 1 else boundaries
    below = b(aten.lt.Tensor if right else aten.le.Tensor, b(aten.unsqueeze.default, x, -1), row)
    dtype = torch.int32 if out_int32 else torch.int64
    count = b(aten.sum.dim_IntList, b(aten._to_copy.default, below, dtype=dtype), [-1], False)
    return b(aten.sub.Tensor, number_const(gm, b, m, dtype, count, "length"), count)


@decomposition(aten.bucketize.Tensor)
def bucketize(gm, n, b):
    """``bucketize(x, boundaries, out_int32, right)`` (1-D ``boundaries``, a constant or an
    input): :func:`_insertion_points`. Values exactly on a boundary go left of it
    (``right=False``: the boundary's index) or right (its index + 1), as PyTorch's.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.bucketize.Tensor].fn.__name__
        'bucketize'
    """
    x, boundaries = n.args[0], n.args[1]
    if val(boundaries) is None or val(boundaries).dim() != 1:
        return None
    return _insertion_points(gm, b, boundaries, x, bool(n.kwargs.get("right", False)),
                             bool(n.kwargs.get("out_int32", False)))


@decomposition(aten.searchsorted.Tensor)
def searchsorted(gm, n, b):
    """``searchsorted(sorted_sequence, x, out_int32, right, side, sorter)``: 1-D boundaries for
    any ``x``, or [..., M] boundaries with ``x`` [..., K] of the same leading dims
    (:func:`_insertion_points`); ``side="right"`` is ``right=True``; a ``sorter`` (the
    permutation that sorts an unsorted sequence) first gathers the sequence into order.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.searchsorted.Tensor].fn.__name__
        'searchsorted'
    """
    boundaries, x = n.args[0], n.args[1]
    sorter = n.kwargs.get("sorter")
    if sorter is not None:
        # the sequence in sorted order: gathered here when both are constants, else one GATHER
        # (in INT it shares the sequence's quantization: a permutation of its values)
        vb, vs = val(boundaries), val(sorter)
        if vb is None or vs is None or vs.is_floating_point() or tuple(vs.shape) != tuple(vb.shape):
            return None
        known, order = get_constant(gm, boundaries), get_constant(gm, sorter)
        boundaries = b.const(gm, known.gather(-1, order), "sorted") if known is not None and order is not None \
            else b(aten.gather.default, boundaries, -1, sorter)
    side = n.kwargs.get("side")
    right = side == "right" if side is not None else bool(n.kwargs.get("right", False))
    return _insertion_points(gm, b, boundaries, x, right, bool(n.kwargs.get("out_int32", False)))
