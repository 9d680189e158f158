"""Unsupported nodes never crash a lowering: they are reported and stay on the CPU.

Current scope: the graph is cut into maximal runs of supported nodes (in topological
order); each run is reported as a :class:`Partition` (TOSA emission per partition is
not implemented yet, so ``Partition.tosa`` is ``None``) and ``LoweredModel.tosa`` is
``None``.
"""

from __future__ import annotations

import torch.fx as fx

from .lowered import CpuNode, LoweredModel, Partition


def partition_and_lower(gm: fx.GraphModule, profile: str, cpu: list[CpuNode], float_model,
                        quantized_model, log) -> LoweredModel:
    """Group supported call_function nodes into partitions around the CPU nodes.

    Example:
        >>> import torch, lowering
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.special.entr(torch.relu(x))
        >>> lm = lowering.lower(M(), (torch.rand(3),), profile="FP")
        >>> [c.target for c in lm.cpu_nodes], lm.tosa is None
        (['aten.special_entr.default'], True)
    """
    cpu_names = {c.node for c in cpu}
    parts: list[Partition] = []
    current: list[str] = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.name in cpu_names:
            if current:
                parts.append(Partition(f"tosa_{len(parts)}", None, current))
                current = []
        else:
            current.append(n.name)
    if current:
        parts.append(Partition(f"tosa_{len(parts)}", None, current))
    return LoweredModel(profile=profile, tosa=None, partitions=parts, cpu_nodes=cpu,
                        provenance={}, quant_params={}, float_model=float_model,
                        quantized_model=quantized_model, pass_log=log, graph_module=gm)
