"""Make an exported graph functional: in-place ops become their out-of-place forms.

``torch.export`` keeps what the model wrote: ``relu_``, ``add_``, ``hardswish_``, ``copy_``,
``dropout_`` (torchvision's ``inplace=True``), a BN's batch counter ``add_`` after QAT, an
``out=`` argument (``torch.add(x, 1, out=buffer)``, whose functional overload replaces it). An
in-place op's value lives on in the tensor it mutated, so every later reader of that tensor
must read the new value. This pass replaces ``op_(x, ...)`` by ``op(x, ...)`` and points every
reader of ``x`` after it (and every reader of the op itself) at the new node. A mutated *view*
of another tensor writes back into its base: through ``slice``/``select`` by the matching
``*_scatter``, through reshape-like views (view, reshape, flatten, unsqueeze, squeeze,
permute, transpose, alias) by the inverse reshape or permutation, up the chain of views.
A mutation that cannot be expressed so (a view of ``expand``, ``as_strided``...) is left as it
is: the node then stays on the CPU with its name in the reason.

Export's ``_guards_fn`` call (``ExportedProgram.module()`` with ``check_guards=True``) and other
unused ``call_module`` leftovers are dropped here too.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import copy_meta, val
from .base import GraphPass, PassContext

aten = torch.ops.aten

#: reshape-like views: the base is the view's value reshaped (or permuted) back
_RESHAPE_VIEWS = {aten.view.default, aten.reshape.default, aten._unsafe_view.default,
                  aten.flatten.using_ints, aten.unflatten.int, aten.unsqueeze.default,
                  aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims}
_PERMUTE_VIEWS = {aten.permute.default, aten.transpose.int, aten.t.default}
_IDENTITY_VIEWS = {aten.alias.default, aten.detach.default, aten.detach_.default}


def functional_variant(op) -> object | None:
    """The functional overload of an in-place aten op (``relu_`` -> ``relu``) or of an
    ``out=`` variant with one ``out`` tensor (``add.out`` -> ``add.Tensor``: the overload
    with the same other arguments), or None.

    Example:
        >>> functional_variant(torch.ops.aten.add_.Tensor), functional_variant(torch.ops.aten.mul.out)
        (<OpOverload(op='aten.add', overload='Tensor')>, <OpOverload(op='aten.mul', overload='Tensor')>)
        >>> functional_variant(torch.ops.aten.add.Tensor) is None
        True
    """
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    schema = op._schema
    name = schema.name.split("::")[-1]
    outs = [a.name for a in schema.arguments if a.is_out]
    if outs:
        return _out_free_overload(getattr(aten, name, None), schema) if outs == ["out"] else None
    if not schema.arguments or schema.arguments[0].alias_info is None or \
            not schema.arguments[0].alias_info.is_write:
        return None
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(aten, name[:-1], None)
    if packet is None:
        return None
    overload = op._overloadname
    if overload in packet.overloads():
        return getattr(packet, overload)
    return None


def _out_free_overload(packet, schema) -> object | None:
    """The overload of ``packet`` with ``schema``'s arguments but its ``out``, writing none."""
    wanted = [(a.name, str(a.type)) for a in schema.arguments if not a.is_out]
    for name in packet.overloads() if packet is not None else ():
        candidate = getattr(packet, name)
        arguments = candidate._schema.arguments
        if not any(a.is_out or (a.alias_info is not None and a.alias_info.is_write) for a in arguments) and \
                [(a.name, str(a.type)) for a in arguments] == wanted:
            return candidate
    return None


def _later(graph: fx.Graph, anchor: fx.Node) -> set[fx.Node]:
    """Nodes after ``anchor`` in graph order."""
    out, seen = set(), False
    for n in graph.nodes:
        if seen:
            out.add(n)
        if n is anchor:
            seen = True
    return out


def _redirect_later_uses(graph: fx.Graph, old: fx.Node, new: fx.Node, after: fx.Node) -> None:
    later = _later(graph, after)
    for user in list(old.users):
        if user in later and user is not new:
            user.replace_input_with(old, new)


def _write_back(gm: fx.GraphModule, view: fx.Node, value: fx.Node, anchor: fx.Node):
    """The new value of ``view``'s base once ``view`` holds ``value`` (inserted after
    ``anchor``), with the base node; None when the view kind cannot be written back."""
    base = view.args[0] if view.args and isinstance(view.args[0], fx.Node) else None
    if base is None:
        return None
    t = view.target
    g = gm.graph

    def call(target, *args, **kwargs):
        with g.inserting_after(anchor):
            n = g.call_function(target, args, kwargs)
        copy_meta(n, view)
        if val(base) is not None:
            n.meta["val"] = base.meta.get("val")
            if "tv_val" in base.meta:
                n.meta["tv_val"] = base.meta["tv_val"]
        return n

    bv = val(base)
    if t in _IDENTITY_VIEWS:
        return base, value
    if bv is None:
        return None
    if t in _RESHAPE_VIEWS:
        return base, call(aten.view.default, value, list(bv.shape))
    if t == aten.permute.default:
        perm = list(view.args[1])
        inv = [0] * len(perm)
        for i, p in enumerate(perm):
            inv[p % len(perm)] = i
        return base, call(aten.permute.default, value, inv)
    if t in (aten.transpose.int, aten.t.default):
        d0, d1 = (view.args[1], view.args[2]) if t == aten.transpose.int else (0, 1)
        return base, call(aten.transpose.int, value, d0, d1)
    if t == aten.slice.Tensor:
        return base, call(aten.slice_scatter.default, base, value, *view.args[1:])
    if t == aten.select.int:
        return base, call(aten.select_scatter.default, base, value, *view.args[1:])
    return None


def _is_view(node) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and (
        node.target in _RESHAPE_VIEWS or node.target in _PERMUTE_VIEWS or
        node.target in _IDENTITY_VIEWS or node.target in (aten.slice.Tensor, aten.select.int))


def functionalize(gm: fx.GraphModule) -> int:
    """Replace every in-place op of ``gm`` that can be by its out-of-place form (see the
    module docstring); returns how many were replaced.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         y = x * 2
        ...         torch.relu_(y)
        ...         return y + 1
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> functionalize(gm)
        1
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten.mul.Tensor', 'aten.relu.default', 'aten.add.Tensor']
    """
    g = gm.graph
    count = 0
    for n in list(g.nodes):
        if n.op != "call_function":
            continue
        functional = functional_variant(n.target)
        # ``torch.add(x, 1, out=buffer)`` writes into ``buffer``, ``x.add_(1)`` into ``x``
        mutated = n.kwargs.get("out", n.args[0] if n.args else None)
        if functional is None or not isinstance(mutated, fx.Node):
            continue
        kwargs = {k: v for k, v in n.kwargs.items() if k != "out"}
        with g.inserting_before(n):
            new = g.call_function(functional, n.args, kwargs)
        copy_meta(new, n)
        new.meta.update({k: v for k, v in n.meta.items() if k in ("val", "tv_val")})
        n.replace_all_uses_with(new)
        _redirect_later_uses(g, mutated, new, new)
        # a mutated view writes into its base, and that base's base, ...
        view, value, anchor = mutated, new, new
        while _is_view(view):
            step = _write_back(gm, view, value, anchor)
            if step is None:
                break
            base, value = step
            if value is not base:
                anchor = value
                _redirect_later_uses(g, base, value, anchor)
            view = base
        g.erase_node(n)
        count += 1
    for n in list(g.nodes):
        if n.op == "call_module" and not n.users and str(n.target).startswith("_guards"):
            g.erase_node(n)
    if count:
        g.eliminate_dead_code()
        g.lint()
        gm.recompile()
    return count


class FunctionalizeInPlace(GraphPass):
    """In-place ops -> out-of-place ops with their readers rewired (:func:`functionalize`).

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         x = x + 1
        ...         x.add_(2)
        ...         return torch.nn.functional.hardswish(x, inplace=True)
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> FunctionalizeInPlace()(gm, PassContext())
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten.add.Tensor', 'aten.add.Tensor', 'aten.hardswish.default']
    """

    restructures = True

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        functionalize(gm)
