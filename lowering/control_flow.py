"""``torch.cond`` and ``torch.while_loop`` in an exported graph: their sub-graphs through
quantization and the pass pipeline.

``torch.export`` keeps control flow as higher-order ops whose branches / condition / body are
GraphModules of the parent (``get_attr`` nodes). Each sub-graph is lowered as a graph of its
own (its own passes, its own PT2E annotation and observers) and emitted as a TOSA region
(:mod:`lowering.ops.control_flow`); the parent's COND_IF / WHILE_LOOP names the regions.

- Constants the parent hands a sub-graph (a branch's conv weights, a loop's fixed threshold)
  become constants of the sub-graph (:func:`inline_constant_operands`): TOSA needs conv
  weights constant, and a region reads only its inputs.
- INT: every sub-graph is prepared and converted by the same quantizer as the parent
  (:func:`quantize`); calibration runs the parent, so a branch's observers see the samples
  that take it. At the region boundary the emitter rescales between the parent's
  quantization of a value and the sub-graph's own.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .graph_utils import get_constant, propagate_values, val

COND = torch.ops.higher_order.cond
WHILE_LOOP = torch.ops.higher_order.while_loop
CONTROL_FLOW = (COND, WHILE_LOOP)


def is_control_flow(node) -> bool:
    """Whether ``node`` is a ``torch.cond`` / ``torch.while_loop`` call.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x")
        >>> is_control_flow(g.call_function(torch.ops.aten.relu.default, (x,)))
        False
    """
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in CONTROL_FLOW


def operands(node: fx.Node) -> list:
    """The values a control-flow node hands its sub-graphs, in their placeholder order
    (``while_loop``: the carried values, then the additional inputs)."""
    if node.target is COND:
        return list(node.args[3])
    return list(node.args[2]) + list(node.args[3])


def subgraph_nodes(node: fx.Node) -> list[fx.Node]:
    """The ``get_attr`` nodes naming ``node``'s sub-graphs (cond: then, else; while_loop:
    condition, body)."""
    return list(node.args[1:3]) if node.target is COND else list(node.args[0:2])


def submodule(gm: fx.GraphModule, attr: fx.Node) -> fx.GraphModule:
    """The GraphModule a ``get_attr`` node names."""
    return gm.get_submodule(str(attr.target))


def has_control_flow(gm: fx.GraphModule) -> bool:
    """Whether ``gm`` calls ``torch.cond`` or ``torch.while_loop``.

    Example:
        >>> has_control_flow(fx.symbolic_trace(torch.nn.ReLU()))
        False
    """
    return any(is_control_flow(n) for n in gm.graph.nodes)


def inline_constant_operands(gm: fx.GraphModule) -> None:
    """Make the constants ``gm`` hands a sub-graph constants of the sub-graph (in place,
    recursively): a cond's operands, a while_loop's additional inputs (a carried value
    changes from one iteration to the next and stays an operand).

    Example:
        >>> class M(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__(); self.w = torch.nn.Parameter(torch.ones(2))
        ...     def forward(self, x):
        ...         return torch.cond(x.sum() > 0, lambda x, w: x + w, lambda x, w: x - w, (x, self.w))
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> inline_constant_operands(gm)
        >>> [len(operands(n)) for n in gm.graph.nodes if is_control_flow(n)]
        [1]
    """
    for node in [n for n in gm.graph.nodes if is_control_flow(n)]:
        ops = operands(node)
        first = 0 if node.target is COND else len(node.args[2])
        subs = [submodule(gm, a) for a in subgraph_nodes(node)]
        keep = []
        for k, o in enumerate(ops):
            value = get_constant(gm, o) if k >= first else None
            if value is None:
                keep.append(o)
                continue
            for sub in subs:
                _placeholder_to_constant(sub, len(keep), value)
        if len(keep) != len(ops):
            args = list(node.args)
            if node.target is COND:
                args[3] = tuple(keep)
            else:
                args[3] = tuple(keep[len(node.args[2]):])
            node.args = tuple(args)
        for sub in subs:
            inline_constant_operands(sub)
    gm.graph.eliminate_dead_code()
    gm.recompile()


def _placeholder_to_constant(sub: fx.GraphModule, index: int, value: torch.Tensor) -> None:
    """Replace the ``index``-th placeholder of ``sub`` by a constant holding ``value``."""
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    ph = placeholders[index]
    name = f"_tv_cf_{ph.name}"
    sub.register_buffer(name, value.detach().clone(), persistent=False)
    with sub.graph.inserting_after(placeholders[-1]):
        attr = sub.graph.get_attr(name)
    attr.meta = {k: v for k, v in ph.meta.items() if k in ("val", "tv_val")}
    ph.replace_all_uses_with(attr)
    sub.graph.erase_node(ph)
    sub.recompile()


def _example(node: fx.Node, sub: fx.GraphModule) -> tuple:
    """Example inputs of a sub-graph of ``node``: the values the parent hands it on the
    parent's example inputs (an integer constant of a quantized parent read back as floats
    when the sub-graph takes floats)."""
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    out = []
    for o, ph in zip(operands(node), placeholders, strict=False):
        v = o.meta.get("tv_val") if isinstance(o, fx.Node) else o
        want = val(ph)
        q = o.meta.get("qout") if isinstance(o, fx.Node) else None
        if isinstance(v, torch.Tensor) and want is not None and want.is_floating_point() and \
                not v.is_floating_point() and q is not None:
            v = (v.double() - q.zp).mul(q.s).float()
        out.append(v)
    return tuple(out)


def attach_examples(gm: fx.GraphModule) -> None:
    """Give every sub-graph (recursively) its example inputs (``_tv_example``) and value
    metadata, from ``gm``'s propagated values. :class:`lowering.quantizer.TosaQuantizer`
    reads them when PT2E prepares a sub-graph."""
    for node in [n for n in gm.graph.nodes if is_control_flow(n)]:
        for attr in subgraph_nodes(node):
            sub = submodule(gm, attr)
            example = _example(node, sub)
            sub._tv_example = example
            propagate_values(sub, example)
            attach_examples(sub)


def _own_subgraphs(gm: fx.GraphModule) -> list[str]:
    """Sub-graphs PT2E does not prepare/convert itself: cond branches and while_loop
    conditions (torchao's prepare_pt2e / convert_pt2e handle while_loop bodies)."""
    names = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is COND:
            names += [str(a.target) for a in node.args[1:3]]
        elif node.op == "call_function" and node.target is WHILE_LOOP:
            names.append(str(node.args[0].target))
    return names


def _bodies(gm: fx.GraphModule) -> list[str]:
    return [str(n.args[1].target) for n in gm.graph.nodes
            if n.op == "call_function" and n.target is WHILE_LOOP]


def quantize(gm: fx.GraphModule, quantizer, batches, qat: bool = False) -> fx.GraphModule:
    """PT2E prepare, calibrate on ``batches`` and convert ``gm`` and all its sub-graphs.

    Every sub-graph gets the same quantizer; calibration runs the parent, so the observers of
    a branch see the samples that take it (a branch no sample takes keeps its observers'
    defaults, as PT2E leaves any unobserved tensor).
    """
    from torchao.quantization.pt2e.quantize_pt2e import (
        convert_pt2e,
        prepare_pt2e,
        prepare_qat_pt2e,
    )

    prepare_fn = prepare_qat_pt2e if qat else prepare_pt2e

    def prepare_children(parent: fx.GraphModule) -> None:
        for name in _own_subgraphs(parent):
            prepared_sub = prepare_fn(parent.get_submodule(name), quantizer)
            prepare_children(prepared_sub)
            parent.set_submodule(name, prepared_sub)
        for name in _bodies(parent):
            prepare_children(parent.get_submodule(name))

    def convert(parent: fx.GraphModule) -> fx.GraphModule:
        converted = [(name, convert(parent.get_submodule(name))) for name in _own_subgraphs(parent)]
        out = convert_pt2e(parent)
        for name, sub in converted:
            out.set_submodule(name, sub)
        return out

    prepared = prepare_fn(gm, quantizer)
    prepare_children(prepared)
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    return convert(prepared)


def prepare_subgraphs(gm: fx.GraphModule, profile: str, log: list | None = None) -> None:
    """Run the pass pipeline of ``profile`` over every sub-graph of ``gm`` (recursively),
    each on the values ``gm`` hands it."""
    from .passes.base import PassContext
    from .pipeline import run_pipeline

    for node in [n for n in gm.graph.nodes if is_control_flow(n)]:
        for attr in subgraph_nodes(node):
            sub = submodule(gm, attr)
            example = _example(node, sub)
            propagate_values(sub, example)
            run_pipeline(sub, PassContext(profile=profile, example_inputs=example), log=log)
            prepare_subgraphs(sub, profile)


def unsupported_inside(node: fx.Node, gm: fx.GraphModule, find) -> str | None:
    """Why control-flow ``node`` cannot be lowered because of a node of one of its
    sub-graphs (``find(sub)`` lists a graph's CPU nodes), or None."""
    for attr in subgraph_nodes(node):
        cpu = find(submodule(gm, attr))
        if cpu:
            c = cpu[0]
            return f"sub-graph {attr.target}: node {c.node} ({c.target}): {c.reason}"
    return None
