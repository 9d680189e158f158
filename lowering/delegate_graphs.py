"""Graph helpers shared by the ExecuTorch partitioner and backends (:mod:`lowering.partitioner`).

Edge-dialect targets mapped to the aten ops our registry knows, an exported program as a plain
GraphModule our pipeline lowers, and the names and boundary checks the partitioner's CPU
reasons are made of.
"""

from __future__ import annotations

import re

import torch
import torch.fx as fx
from torch.export import ExportedProgram

from .errors import LoweringError
from .ops import REGISTRY
from .passes.decompose import DECOMPOSITIONS

aten = torch.ops.aten

#: Dtypes a delegate input/output may have: the value means the same on both sides.
_BOUNDARY_DTYPES = {
    "INT": {torch.int8, torch.int16, torch.int32, torch.bool},
    "FP": {torch.float32, torch.int8, torch.int16, torch.int32, torch.bool},
}
_NOOP_BASES = {aten.alias.default, aten.detach.default}
#: Lowered alike; as reshape, the graph still runs eagerly once the pipeline drops a clone
#: that made a view's input contiguous.
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.view_copy.default}


# --------------------------------------------------------------------------- graphs
def aten_target(target):
    """The aten op our registry knows for an edge-dialect or ATen node target.

    Edge ops unwrap to their aten op; ``X_copy`` (edge's functional view ops) becomes
    ``X`` when we lower ``X``; view ops become ``reshape``; ExecuTorch's dim-order copies
    become ``_to_copy``/``clone``.

    Example:
        >>> aten_target(torch.ops.aten.permute_copy.default)
        <OpOverload(op='aten.permute', overload='default')>
        >>> aten_target(torch.ops.aten.relu.default)
        <OpOverload(op='aten.relu', overload='default')>
    """
    op = _overload(target)
    if op in _RESHAPES:
        return aten.reshape.default
    if not isinstance(op, torch._ops.OpOverload) or op in REGISTRY:
        return op
    name = op._schema.name.split("::")[-1]
    if op.namespace == "dim_order_ops":
        return {"_to_dim_order_copy": aten._to_copy.default,
                "_clone_dim_order": aten.clone.default}.get(name, op)
    if op.namespace == "aten" and name.endswith("_copy"):
        packet = getattr(torch.ops.aten, name[: -len("_copy")], None)
        if packet is not None and op._overloadname in packet.overloads():
            base = getattr(packet, op._overloadname)
            if base in REGISTRY or base in _NOOP_BASES or base in DECOMPOSITIONS:
                return base
    return op


def _overload(target):
    """The OpOverload behind an ATen or edge-dialect target (other targets unchanged)."""
    return target if isinstance(target, torch._ops.OpOverload) else getattr(target, "_op", target)


def _is_dim_order_op(target) -> bool:
    op = _overload(target)
    return isinstance(op, torch._ops.OpOverload) and op.namespace == "dim_order_ops"


def to_aten_module(ep: ExportedProgram, stand_in=None) -> fx.GraphModule:
    """A plain GraphModule of ``ep`` our pipeline can lower: aten targets, lifted constants
    (parameters, buffers, tensor constants) as ``get_attr``, node names and metadata kept.

    A constant holding no data (a FakeTensor, as in the program ExecuTorch hands a
    partitioner) is replaced by ``stand_in(name, fake)``; without ``stand_in`` that is an
    error, so a payload is never built from made-up weights.

    Example:
        >>> ep = torch.export.export(torch.nn.Linear(2, 2), (torch.ones(1, 2),))
        >>> [n.op for n in to_aten_module(ep).graph.nodes]
        ['get_attr', 'get_attr', 'placeholder', 'call_function', 'output']
    """
    from torch._subclasses.fake_tensor import FakeTensor

    sig = ep.graph_signature
    lifted = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
              **sig.inputs_to_lifted_tensor_constants}
    root = torch.nn.Module()
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in lifted:
            key = lifted[node.name]
            value = ep.state_dict[key] if key in ep.state_dict else ep.constants[key]
            if isinstance(value, FakeTensor):
                if stand_in is None:
                    raise LoweringError(f"constant {key!r} holds no data (a FakeTensor)",
                                        node=node.name)
                value = stand_in(key, value)
            attr = re.sub(r"\W", "_", node.name)
            root.register_buffer(attr, value.detach(), persistent=False)
            new = graph.create_node("get_attr", attr, name=node.name)
            new.meta = dict(node.meta)
        else:
            new = graph.node_copy(node, env.__getitem__)
            if node.op == "call_function":
                new.target = aten_target(node.target)
                if _is_dim_order_op(node.target):
                    new.kwargs = {k: v for k, v in new.kwargs.items() if k != "dim_order"}
        env[node] = new
    return fx.GraphModule(root, graph)


def _origins(node: fx.Node) -> tuple[set[str], set[str]]:
    """Names and op names of ``node`` and of the nodes it was made from (``from_node``)."""
    names, targets = {node.name}, set()
    if node.op == "call_function":
        targets |= {_op_name(node.target), _op_name(aten_target(node.target))}
    stack, seen = list(node.meta.get("from_node") or []), set()
    while stack:
        src = stack.pop()
        if id(src) in seen:
            continue
        seen.add(id(src))
        names.add(getattr(src, "name", ""))
        targets.add(str(getattr(src, "target", "")))
        stack.extend(getattr(src, "from_node", None) or [])
    return names, targets


def _op_name(target) -> str:
    """``aten.<op>.<overload>`` of an ATen or edge target (``str`` of anything else)."""
    op = _overload(target)
    if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten":
        return f"aten.{op._schema.name.split('::')[-1]}.{op._overloadname}"
    return str(op)


def _op_pattern(op) -> str:
    if isinstance(op, torch._ops.OpOverload):
        return _op_name(op)
    if isinstance(op, torch._ops.OpOverloadPacket):
        return str(op)
    text = str(op)
    return text if "." in text else f"aten.{text}"


def _named(node: fx.Node) -> str:
    """A node for a message: its name, and its op when it computes (names alone differ
    between the ATen program, where decisions are made, and the edge program)."""
    return f"{node.name} ({_op_name(node.target)})" if node.op == "call_function" else node.name


def _boundary_problem(node: fx.Node, profile: str) -> str | None:
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor):
        return "is not a single tensor"
    if v.dtype not in _BOUNDARY_DTYPES[profile]:
        return f"is {str(v.dtype).replace('torch.', '')}"
    if v.dim() > 1 and not v.is_contiguous():
        return "is not contiguous"
    return None
