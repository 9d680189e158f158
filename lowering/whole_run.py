"""Run a partly lowered model whole: its TOSA partitions on the reference model, the rest in PyTorch.

A model with operators TOSA cannot express (``nonzero``, ``unique``, ``.item()``...) is lowered in
pieces (:func:`lowering.lower` keeps those nodes on the CPU and makes one TOSA graph per group of
supported nodes, see :class:`~lowering.lowered.Partition`). Deployed, the pieces run in turn: the
CPU computes its nodes, the NPU each partition. :func:`run_whole` runs them the same way, so the
whole output of such a model can be checked, not only each partition's:

* the PyTorch graph the partitions were cut from (the fake-quant model in INT, the float model in
  FP) is evaluated node by node, in an order where every partition's inputs are computed before
  it runs;
* a node that is a partition's output is not computed in PyTorch: its partition's TOSA graph runs
  on ``tosa_reference_model`` (inputs quantized with the partition's input parameters, as
  :meth:`~lowering.lowered.LoweredModel.quantize_inputs` does, outputs dequantized), and the
  nodes after it read that value;
* every other node runs in PyTorch (in INT, between its quantize/dequantize pairs, as deployed
  CPU fallback code would on dequantized values).

A partition boundary that has no node in that PyTorch graph (a tensor made inside a
decomposition) cannot be bound: :class:`WholeRunError` names it.

Example:
    >>> import torch, lowering
    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.nextafter(x + 1, x) * 2   # nextafter stays on the CPU
    >>> x = torch.randn(2, 3)
    >>> lm = lowering.lower(M(), (x,), profile="FP")
    >>> len(lm.partitions), bool(torch.allclose(lm.run(x)[0], M()(x), atol=1e-5))
    (2, True)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np
import torch
import torch.fx as fx


class PartlyLowered(Protocol):
    """What this module reads of a :class:`~lowering.lowered.LoweredModel` (named structurally:
    ``lowered`` imports this module, so this one does not import it back)."""

    quantized_model: fx.GraphModule | None
    float_model: fx.GraphModule | None
    graph_module: fx.GraphModule | None
    provenance: dict[str, dict]
    partitions: list[Any]

    def partition_models(self) -> list[Any]: ...


class WholeRunError(RuntimeError):
    """A partly lowered model that cannot be run whole (a partition boundary without a node)."""


def source_model(lm: PartlyLowered) -> fx.GraphModule:
    """The PyTorch graph a partly lowered model's pieces are bound to: the fake-quant model
    (INT, when there is one) or the float model.

    Example:
        >>> source_model(lowering.lower(m, (x,), profile="FP")) is not None   # doctest: +SKIP
        True
    """
    model = lm.quantized_model if lm.quantized_model is not None else lm.float_model
    if model is None:
        raise WholeRunError("the lowered model keeps no PyTorch graph to run its CPU nodes")
    return model


def source_node(lm: PartlyLowered, tensor: str, nodes: dict[str, fx.Node]) -> fx.Node:
    """The node of the PyTorch graph ``nodes`` (by name) whose value the TOSA tensor ``tensor``
    at a partition boundary holds.

    The lowering names a boundary tensor after its node of the lowered graph
    (``lm.graph_module``). That node is found in the PyTorch graph under its own name (same op),
    or, when a decomposition made it, under the name of the node it was decomposed from, but
    only if it is that decomposition's result (something outside the decomposition reads it):
    an intermediate value of a decomposition exists in no PyTorch graph.

    Example:
        >>> source_node(lm, "add_tensor", {"add": add_node}).name   # doctest: +SKIP
        'add'
    """
    lowered = {n.name: n for n in lm.graph_module.graph.nodes} if lm.graph_module is not None else {}
    own = lowered.get(tensor)
    origin = (lm.provenance.get(tensor) or {}).get("fx_node") or tensor
    if own is None and origin in lowered:
        own = lowered[origin]
    name = own.name if own is not None else origin
    found = nodes.get(name)
    if found is not None and (own is None or found.op != "call_function" or found.target == own.target):
        return found
    made_from = own.meta.get("orig_node") if own is not None else None
    if made_from in nodes and _decomposition_result(own, made_from):
        return nodes[made_from]
    raise WholeRunError(f"partition boundary tensor {tensor!r} has no node in the PyTorch model "
                        f"(it is made inside the decomposition of {made_from or name!r}); this model "
                        "can only be run partition by partition (LoweredModel.partition_models())")


def _decomposition_result(node: fx.Node, made_from: str) -> bool:
    """Whether ``node`` (made by decomposing ``made_from``) holds the decomposition's result:
    read by the output or by a node of another origin."""
    return any(user.op == "output" or user.meta.get("orig_node", user.name) != made_from for user in node.users)


def run_whole(lm: PartlyLowered, *inputs) -> list[torch.Tensor]:
    """The outputs of the partly lowered ``lm`` on ``inputs`` (the model's forward arguments),
    flattened as :meth:`LoweredModel.run` returns them: TOSA partitions on the reference model,
    the CPU nodes in PyTorch (see the module docstring).

    Example:
        >>> run_whole(lowering.lower(model, (x,)), x)[0].shape   # doctest: +SKIP
        torch.Size([2, 3])
    """
    model = source_model(lm)
    nodes = {n.name: n for n in model.graph.nodes}
    # (partition_models(): one model per partition with a TOSA graph, in partition order)
    with_tosa = [p for p in lm.partitions if p.tosa is not None]
    pieces = [_Piece(lm, p, m, nodes) for p, m in zip(with_tosa, lm.partition_models(), strict=True)]
    made_by = {node: piece for piece in pieces for node in piece.output_nodes}
    interpreter = fx.Interpreter(model)
    interpreter.args_iter = iter(forward_leaves(model, inputs))
    env = interpreter.env
    done: set[_Piece] = set()
    with torch.no_grad():
        for node in _evaluation_order(model.graph, made_by):
            piece = made_by.get(node)
            if piece is None:
                env[node] = interpreter.run_node(node)
                continue
            if piece not in done:
                for out_node, value in zip(piece.output_nodes, piece.run(env), strict=True):
                    env[out_node] = value
                done.add(piece)
    output = next(n for n in model.graph.nodes if n.op == "output")
    leaves, _ = torch.utils._pytree.tree_flatten(env[output])
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


class _Piece:
    """One TOSA partition bound to the PyTorch graph: its input and output nodes, and a run."""

    def __init__(self, lm: PartlyLowered, partition: Any, model: Any, nodes: dict[str, fx.Node]) -> None:
        self.name = partition.name
        self.model = model  # the partition's own LoweredModel (lowering.lowered._PartitionModel)
        self.input_nodes = [source_node(lm, t, nodes) for t in partition.inputs]
        self.output_nodes = [source_node(lm, t, nodes) for t in partition.outputs]
        self.output_torch_dtypes = [_torch_dtype(n) for n in self.output_nodes]

    def run(self, env: dict[fx.Node, object]) -> list[torch.Tensor]:
        """The partition's outputs, from its input nodes' values in ``env``."""
        values = [env[n] for n in self.input_nodes]
        raw = self.model.run_raw(self.model.quantize_boundary(*values))
        return self.model.outputs_to_torch(raw, self.output_torch_dtypes)


def forward_leaves(gm: fx.GraphModule, inputs) -> list:
    """The values the placeholders of ``gm`` (an exported model) take for its forward arguments
    ``inputs``: every leaf of them, python numbers too (``torch.export`` keeps a placeholder for
    each), when that many placeholders there are; else the tensors only (:func:`tensor_inputs`).
    numpy arrays become tensors.

    Example:
        >>> forward_leaves(gm, (torch.ones(2), 3))   # doctest: +SKIP
        [tensor([1., 1.]), 3]
    """
    leaves, _ = torch.utils._pytree.tree_flatten(list(inputs))
    placeholders = sum(n.op == "placeholder" for n in gm.graph.nodes)
    chosen = leaves if len(leaves) == placeholders else tensor_inputs(inputs)
    return [torch.as_tensor(x) if isinstance(x, np.ndarray) else x for x in chosen]


def tensor_inputs(inputs) -> list:
    """The tensors (and numpy arrays) among forward arguments, in ``torch.export``'s order.

    Example:
        >>> [tuple(t.shape) for t in tensor_inputs((torch.ones(2), 1, [torch.ones(3), 0.5]))]
        [(2,), (3,)]
    """
    leaves, _ = torch.utils._pytree.tree_flatten(list(inputs))
    return [x for x in leaves if isinstance(x, (torch.Tensor, np.ndarray))]


def _torch_dtype(node: fx.Node) -> torch.dtype | None:
    value = node.meta.get("val")
    return value.dtype if isinstance(value, torch.Tensor) else None


def _evaluation_order(graph: fx.Graph, made_by: dict[fx.Node, _Piece]) -> list[fx.Node]:
    """The graph's nodes in an order where each node follows what it reads, a partition output
    following every input of its partition (a partition runs whole), the placeholders first in
    graph order (they take the inputs by position)."""
    order = [n for n in graph.nodes if n.op == "placeholder"]
    seen = set(order)

    def reads(node: fx.Node) -> Iterable[fx.Node]:
        piece = made_by.get(node)
        return piece.input_nodes if piece is not None else node.all_input_nodes

    # (from the output only: a partition's inner nodes, computed by its TOSA graph, are not run)
    root = next(n for n in graph.nodes if n.op == "output")
    stack = [(root, iter(reads(root)))]
    seen.add(root)
    while stack:
        node, pending = stack[-1]
        nxt = next((n for n in pending if n not in seen), None)
        if nxt is None:
            stack.pop()
            order.append(node)
        else:
            seen.add(nxt)
            stack.append((nxt, iter(reads(nxt))))
    return order

