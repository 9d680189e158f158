"""Fold the parts of the graph that do not depend on the inputs into constants.

HuggingFace models build position ids, attention masks and packed-sequence checks from
``arange`` / ``full`` and the model's buffers at every call (``diff``, ``cumsum`` and ``where``
of int64 ids, ``finfo.min`` masks...); a weight may be computed from parameters (a transposed
or sliced projection). None of that reads an input, so its value is the one the example run
gave: a constant. Random ops are left alone. A tensor with no elements is a constant too (whatever it was computed
from), so a reduction of it folds (``x[:, :0].sum()`` is 0). Adding a folded all-zero constant (HuggingFace
ViT's "mask" of an unpadded sequence, ``where(True, 0, finfo.min)``) is then dropped: in INT
that operand is quantized with the range of ``finfo.min`` (a scale of ~1e36), which no
integer add can combine with the scores.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import add_constant, get_constant, val
from .base import GraphPass, PassContext

aten = torch.ops.aten


def _foldable(n: fx.Node, constant: set[fx.Node]) -> bool:
    """``n`` computes a tensor from constants only, deterministically."""
    if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in n.target.tags or n.target._schema.is_mutable:
        return False
    return val(n) is not None and all(a in constant for a in n.all_input_nodes)


def _empty(n: fx.Node) -> bool:
    """``n`` computes a tensor with no elements (``x[:, :0]``, ``x.narrow(1, 2, 0)``): its value
    is known whatever the inputs, and TOSA has no zero-sized tensor to compute it in."""
    if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload) or \
            n.target._schema.is_mutable:
        return False
    value = val(n)
    return value is not None and value.numel() == 0


def constant_nodes(gm: fx.GraphModule) -> set[fx.Node]:
    """The nodes of ``gm`` whose value does not depend on its inputs (get_attr, what
    :func:`_foldable` computes from them, and tensors with no elements).

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x + torch.arange(3).float().cumsum(0)
        >>> gm = torch.export.export(M(), (torch.ones(3),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(3),))
        >>> sorted(str(n.target).split(".")[1] for n in constant_nodes(gm))
        ['arange', 'cumsum', 'to']
    """
    constant: set[fx.Node] = set()
    for n in gm.graph.nodes:
        if n.op == "get_attr" or _foldable(n, constant) or _empty(n):
            constant.add(n)
    return constant


class FoldConstants(GraphPass):
    """Replace each input-independent computation whose value an input-dependent node (or the
    output) reads by a constant holding that value.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         ids = torch.arange(4)
        ...         return x * (ids.diff(prepend=ids[:1] - 1) == 1).cumsum(-1).float()
        >>> gm = torch.export.export(M(), (torch.ones(4),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(4),))
        >>> FoldConstants()(gm, PassContext())
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function" and n.users]
        ['aten.mul.Tensor']
    """

    restructures = True

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        constant = constant_nodes(gm)
        for n in list(gm.graph.nodes):
            if n.op != "call_function" or n not in constant or \
                    all(u in constant for u in n.users):
                continue
            if _empty(n) and any(u.op == "output" for u in n.users):
                continue  # (an empty output: TOSA cannot hold it, the CPU computes it)
            value = val(n)
            c = add_constant(gm, value.clone(), "folded", before=n)
            c.meta.update({k: n.meta[k] for k in ("val", "tv_val") if k in n.meta})
            n.replace_all_uses_with(c)
        for n in list(gm.graph.nodes):
            keep = _zero_addend_kept(gm, n)
            if keep is not None:
                n.replace_all_uses_with(keep)
        gm.graph.eliminate_dead_code()
        narrow_float64_constants(gm)


def narrow_float64_constants(gm: fx.GraphModule) -> None:
    """A float64 constant (a buffer made with numpy: ``torch.from_numpy(np.linspace(...))``)
    whose every reader computes a float32 result becomes float32: PyTorch's type promotion
    computes such an op (``x * c`` with a 0-d ``c``) in float32 with ``c`` cast, so the
    cast here changes no value. Constants of float64 arithmetic stay (on the CPU).

    Example:
        >>> class M(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.register_buffer("c", torch.tensor(0.5, dtype=torch.float64))
        ...     def forward(self, x):
        ...         return x * self.c
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(2),))
        >>> narrow_float64_constants(gm)
        >>> [get_constant(gm, n).dtype for n in gm.graph.nodes if n.op == "get_attr"]
        [torch.float32]
    """
    for n in list(gm.graph.nodes):
        value = get_constant(gm, n) if n.op == "get_attr" else None
        if value is None or value.dtype != torch.float64 or not n.users or not all(
                _reads_as_float32(u, value) for u in n.users):
            continue
        c = add_constant(gm, value.float(), "f32", before=n)
        c.meta["val"] = value.float()
        n.replace_all_uses_with(c)
        gm.graph.erase_node(n)


def _reads_as_float32(user: fx.Node, value: torch.Tensor) -> bool:
    """Whether ``user`` computes with the float64 constant ``value`` cast to float32: its
    result is float32, or ``value`` is 0-d (which never promotes a tensor; a comparison
    with it is done in float32 too)."""
    out = val(user)
    return out is not None and (out.dtype == torch.float32 or
                                (value.dim() == 0 and out.dtype != torch.float64))


def _zero_addend_kept(gm: fx.GraphModule, n: fx.Node) -> fx.Node | None:
    """The operand ``x`` of ``x + 0`` / ``0 + x`` / ``x - 0`` (an all-zero constant that
    neither broadcasts nor casts ``x``), else None."""
    if n.op != "call_function" or n.target not in (aten.add.Tensor, aten.sub.Tensor):
        return None
    out = val(n)
    pairs = [(0, 1), (1, 0)] if n.target == aten.add.Tensor else [(0, 1)]
    for keep, zero in pairs:
        x, z = n.args[keep], get_constant(gm, n.args[zero]) if len(n.args) > 1 else None
        vx = val(x)
        if z is not None and vx is not None and out is not None and not z.any() and \
                vx.shape == out.shape and vx.dtype == out.dtype:
            return x
    return None
