"""The passes' op registry: which aten overloads a pass rewrites into others, and how.

The counterpart of :data:`lowering.ops.REGISTRY` (aten op -> TOSA emitter) for the passes that
run before emission. A rewrite is ``fn(gm, node, b) -> replacement`` where ``b`` is a
:class:`~lowering.graph_utils.Builder` inserting before ``node`` (``b.profile`` names the
profile); it returns the node (or value) replacing ``node``, :data:`HANDLED` when it rewired
the users itself, or ``None`` when it does not apply (the op then needs an emitter, or stays
on the CPU). :mod:`lowering.support` joins both registries into the supported-op table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx as fx

from ..graph_utils import Builder, untyped_dtype
from ..ops.registry import REGISTRY

aten = torch.ops.aten

#: Both TOSA profiles (a rewrite applies in both unless registered otherwise).
ALL_PROFILES = frozenset({"INT", "FP"})
#: Returned by a rewrite that replaced the node's uses itself (ops returning tuples).
HANDLED = "handled"


@dataclass(frozen=True)
class Rewrite:
    """How one pass rewrites one aten overload, and in which profiles."""

    pass_name: str
    fn: Callable
    profiles: frozenset


#: pass name -> {aten overload -> Rewrite}
REWRITES: dict[str, dict] = {}


def rewrite(pass_name: str, *targets, profiles=ALL_PROFILES) -> Callable:
    """Register ``fn`` as the rewrite of ``targets`` by the pass named ``pass_name``.

    Example:
        >>> @rewrite("Example", aten.special_entr.default)
        ... def _entr(gm, node, b):
        ...     return None
        >>> REWRITES["Example"][aten.special_entr.default].fn is _entr
        True
        >>> del REWRITES["Example"]
    """
    profiles = frozenset(profiles)

    def deco(fn):
        table = REWRITES.setdefault(pass_name, {})
        for t in targets:
            if t in table:  # a second rewrite would silently win by import order
                raise ValueError(f"{pass_name} already rewrites {t} with "
                                 f"{table[t].fn.__module__}.{table[t].fn.__name__}")
            table[t] = Rewrite(pass_name, fn, profiles)
        return fn

    return deco


def rewrites_for(pass_name: str, profile: str | None = None) -> dict:
    """``{aten overload: fn}`` of one pass, restricted to ``profile`` when given.

    Example:
        >>> from lowering.passes import decompose  # registers the decompositions
        >>> aten.softmax.int in rewrites_for("DecomposeForTosa", "INT")
        True
    """
    return {t: r.fn for t, r in REWRITES.get(pass_name, {}).items()
            if profile is None or profile in r.profiles}


def apply_rewrites(gm: fx.GraphModule, table: dict, profile: str | None) -> bool:
    """Apply ``table`` to every matching node of ``gm`` once, in graph order.

    Returns whether the graph changed. New nodes copy the provenance of the node they replace.
    Nodes of a dtype TOSA lacks (float64...) are left as they are: they stay on the CPU; but
    for one that nothing reads (a metadata assert on a float64 constant), which may go.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.neg(x)
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> apply_rewrites(gm, {aten.neg.default: lambda gm, n, b: b(aten.mul.Tensor, n.args[0], -1)},
        ...                None)
        True
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten.mul.Tensor']
    """
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in table or (n.users and untyped_dtype(n) is not None):
            continue
        out = table[n.target](gm, n, Builder(gm.graph, n, profile))
        if out is None:
            continue
        if out is not HANDLED:
            if isinstance(out, fx.Node):
                # the replacement computes n's value: later rewrites may read its dtype
                for key in ("val", "tv_val"):
                    if key in n.meta and key not in out.meta:
                        out.meta[key] = n.meta[key]
            n.replace_all_uses_with(out)
        else:  # the getitems now unused: an op dead code elimination keeps (impure) goes too
            for u in [u for u in n.users if not u.users]:
                gm.graph.erase_node(u)
        if not n.users:
            gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return changed


def copy_variant_base(op):
    """The op an edge-style ``X_copy`` overload lowers as: ``X``, when ``X`` lowers.

    ``permute_copy``, ``view_copy``, ``alias_copy``... are the non-aliasing variants of view
    ops (``torch.export`` and ExecuTorch's edge dialect emit them); without aliasing they
    compute exactly what ``X`` computes.

    Example:
        >>> import lowering
        >>> copy_variant_base(aten.permute_copy.default)
        <OpOverload(op='aten.permute', overload='default')>
        >>> copy_variant_base(aten.relu.default) is None
        True
    """
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    name = op._schema.name.split("::")[-1]
    if not name.endswith("_copy"):
        return None
    packet = getattr(aten, name[: -len("_copy")], None)
    if packet is None or op._overloadname not in packet.overloads():
        return None
    base = getattr(packet, op._overloadname)
    handled = base in REGISTRY or any(base in table for table in REWRITES.values())
    return base if handled else None
