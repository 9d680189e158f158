"""Helpers shared by the decompositions: registration, argument access, constants, tuples."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
import torch.fx as fx

from ...graph_utils import val
from ..rewrites import ALL_PROFILES, HANDLED, rewrite

aten = torch.ops.aten

#: The pass the decompositions belong to (:class:`lowering.passes.decompose.DecomposeForTosa`).
PASS = "DecomposeForTosa"


def decomposition(*targets, profiles=ALL_PROFILES):
    """Register a rewrite of ``targets`` run by DecomposeForTosa.

    Example:
        >>> from lowering.passes.rewrites import REWRITES
        >>> REWRITES[PASS][aten.softmax.int].fn.__name__
        'softmax'
    """
    return rewrite(PASS, *targets, profiles=profiles)


def arg(n: fx.Node, i: int, name: str, default=None):
    """Argument ``i`` of ``n``, passed positionally or as keyword ``name``.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x")
        >>> arg(g.call_function(aten.var.correction, (x, [1]), {"correction": 0}), 2, "correction")
        0
    """
    if len(n.args) > i:
        return n.args[i]
    return n.kwargs.get(name, default)


def int_list(v, n: int) -> list:
    """An int or a sequence of ints (a kernel, stride or padding argument) as a list of ``n``
    ints, one value repeated.

    Example:
        >>> int_list(3, 2), int_list([2], 3), int_list((1, 2), 2)
        ([3, 3], [2, 2, 2], [1, 2])
    """
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def is_float(node) -> bool:
    """Whether ``node`` holds a floating-point tensor (False for python scalars).

    Example:
        >>> is_float(3.0)
        False
    """
    v = val(node)
    return v is not None and v.is_floating_point()


def const_like(gm, b, value, ref: fx.Node | None, hint="scalar") -> fx.Node:
    """A one-element constant holding ``value`` in the dtype it combines with ``ref`` in.

    Integer values next to integer tensors keep the tensor's integer type, ``True``/``False`` next to bool
    tensors stay bool, numbers next to float16 tensors are float16; everything else is float32.
    Next to a 0-d tensor the constant is 0-d too: a python number does not broadcast a 0-d
    result to shape ``(1,)`` in PyTorch (``x.sum() * 2`` is 0-d).

    Example:
        >>> gm = fx.GraphModule(torch.nn.Module(), fx.Graph())
        >>> out = gm.graph.output(None)
        >>> from lowering.graph_utils import Builder
        >>> c = const_like(gm, Builder(gm.graph, out), 2, None)
        >>> c.meta["tv_val"].dtype, c.meta["tv_val"].tolist()
        (torch.float32, [2.0])
    """
    dtype = torch.float32
    v = val(ref) if ref is not None else None
    if v is not None and v.dtype == torch.bool and isinstance(value, bool):
        dtype = torch.bool
    elif v is not None and not v.is_floating_point() and v.dtype != torch.bool and \
            float(value).is_integer():
        dtype = v.dtype  # an integer number next to int8/int16/int32 keeps that type, as in torch
    elif v is not None and v.dtype == torch.float16:
        dtype = v.dtype  # float16 arithmetic stays float16 (rounded as PyTorch rounds it)
    return number_const(gm, b, value, dtype, ref, hint)


def number_const(gm, b, value, dtype: torch.dtype, ref: fx.Node | None, hint="scalar") -> fx.Node:
    """A one-element constant ``value`` of ``dtype``: 0-d next to a 0-d ``ref`` (as a python
    number broadcasts in PyTorch), else shape ``(1,)``.

    Example:
        >>> gm = fx.GraphModule(torch.nn.Module(), fx.Graph())
        >>> from lowering.graph_utils import Builder
        >>> c = number_const(gm, Builder(gm.graph, gm.graph.output(None)), 3, torch.int8, None)
        >>> c.meta["tv_val"].shape, c.meta["tv_val"].dtype
        (torch.Size([1]), torch.int8)
    """
    v = val(ref) if ref is not None else None
    shape = () if v is not None and v.dim() == 0 else (1,)
    return b.const(gm, torch.full(shape, value, dtype=dtype), hint)


def tensor_operand(gm, b, operand, ref: fx.Node, hint="scalar") -> fx.Node:
    """``operand`` as a graph node: python scalars become a :func:`const_like` constant."""
    return operand if isinstance(operand, fx.Node) else const_like(gm, b, operand, ref, hint)


def tuple_outputs(n: fx.Node, outputs: Sequence[fx.Node | None]):
    """Replace ``getitem(n, i)`` by ``outputs[i]`` for an op returning a tuple.

    Returns :data:`HANDLED`, or ``None`` (nothing changed) when a used element has no
    replacement (``None`` in ``outputs``) or ``n`` is used other than through getitem.
    """
    users = list(n.users)
    if any(u.target is not operator.getitem for u in users):
        return None
    if any(u.users and outputs[u.args[1]] is None for u in users):
        return None
    for u in users:
        if u.users:
            u.replace_all_uses_with(outputs[u.args[1]])
    return HANDLED
