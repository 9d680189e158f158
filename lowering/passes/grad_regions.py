"""Inline ``torch.no_grad()`` / ``torch.enable_grad()`` regions of an exported graph.

``torch.export`` keeps a ``with torch.no_grad():`` block inside a model's ``forward`` as one
``higher_order.wrap_with_set_grad_enabled(False, submodule, *operands)`` call, its ops in the
submodule. Gradient mode changes nothing an inference graph computes, so the region's ops
move into the graph in place of the call (before, the whole region stayed on the CPU as an
unknown operator). ``wrap_with_autocast`` is left alone: autocast changes dtypes.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

SET_GRAD_ENABLED = torch.ops.higher_order.wrap_with_set_grad_enabled


def inline_grad_regions(gm: fx.GraphModule) -> int:
    """Replace every ``wrap_with_set_grad_enabled`` call of ``gm`` (nested ones too) by its
    submodule's ops; returns how many regions were inlined.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         with torch.no_grad():
        ...             y = x * 2
        ...         return y + 1
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> inline_grad_regions(gm)
        1
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten.mul.Tensor', 'aten.add.Tensor']
    """
    count = 0
    left: set[fx.Node] = set()  # read other than through getitem: kept (it stays on the CPU)
    while True:
        region = next((n for n in gm.graph.nodes if n.op == "call_function"
                       and n.target is SET_GRAD_ENABLED and n not in left), None)
        if region is None:
            break
        if any(u.op != "call_function" or u.target is not operator.getitem for u in region.users):
            left.add(region)
            continue
        _inline(gm, region)
        count += 1
    if count:
        gm.graph.eliminate_dead_code()
        gm.delete_all_unused_submodules()
        gm.recompile()
    return count


def _inline(gm: fx.GraphModule, region: fx.Node) -> None:
    """Copy ``region``'s submodule ops before it, its placeholders bound to the operands; the
    ``getitem`` readers of its result read the copied outputs instead."""
    sub = getattr(gm, region.args[1].target)
    operands = region.args[2:]
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    env = dict(zip(placeholders, operands, strict=True))
    for n in sub.graph.nodes:
        if n.op == "get_attr":  # a constant of the region: the parent holds it under a new name
            name = _free_name(gm, f"{region.name}_{n.target}")
            value = getattr(sub, n.target)
            if isinstance(value, torch.Tensor):
                gm.register_buffer(name, value)
            else:
                setattr(gm, name, value)
            with gm.graph.inserting_before(region):
                env[n] = gm.graph.get_attr(name)
            env[n].meta.update(n.meta)
    with gm.graph.inserting_before(region):
        outputs = gm.graph.graph_copy(sub.graph, env)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for user in list(region.users):
        user.replace_all_uses_with(outputs[user.args[1]])
        gm.graph.erase_node(user)
    gm.graph.erase_node(region)


def _free_name(gm: fx.GraphModule, base: str) -> str:
    name, k = base.replace(".", "_"), 0
    while hasattr(gm, name):
        k += 1
        name = f"{base.replace('.', '_')}_{k}"
    return name
