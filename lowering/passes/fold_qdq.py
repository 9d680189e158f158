"""Fold quantize/dequantize pairs of a ``convert_pt2e`` graph into node annotations.

After this pass the graph computes in the integer domain: every node carries
``meta["qout"]`` (its output :class:`QParams`, when quantized) and ``meta["qin"]``
(input node name -> :class:`QParams` of the integer values it consumes).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.fx as fx

from ..errors import LoweringError
from ..graph_utils import DQ_OPS, Q_OPS, get_constant, val
from ..qparams import QParams
from .base import GraphPass, PassContext

aten = torch.ops.aten

FUSED_ACTIVATIONS = {
    aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
    aten.clamp.default, aten.relu6.default,
}


def _scalar(gm, a):
    if isinstance(a, fx.Node):
        t = get_constant(gm, a)
        if t is None:
            t = val(a)
        return t.detach().cpu().numpy() if t is not None else None
    return np.array([a])


def qparams_from(gm: fx.GraphModule, node: fx.Node) -> QParams:
    """Parse a quantize/dequantize node's arguments into :class:`QParams`."""
    per_channel = "per_channel" in str(node.target)
    if per_channel:
        _, s, zp, axis, qmin, qmax, dtype = node.args[:7]
    else:
        _, s, zp, qmin, qmax, dtype = node.args[:6]
        axis = None
    scale = np.asarray(_scalar(gm, s), dtype=np.float64).reshape(-1)
    zero = np.asarray(_scalar(gm, zp), dtype=np.int64).reshape(-1)
    return QParams(scale, zero, dtype, int(qmin), int(qmax), axis)


class FoldQDQ(GraphPass):
    """Remove Q/DQ nodes, recording quantization parameters on the compute nodes.

    Example:
        >>> gm = torch.fx.symbolic_trace(torch.nn.Identity())
        >>> FoldQDQ()(gm, PassContext(profile="INT"))  # nothing to fold
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        graph = gm.graph
        for n in list(graph.nodes):
            if n.op == "call_function" and n.target in DQ_OPS:
                qp = qparams_from(gm, n)
                src = n.args[0]
                real = src.args[0] if (isinstance(src, fx.Node) and src.target in Q_OPS) else src
                for u in list(n.users):
                    if u.op != "output":
                        u.meta.setdefault("qin", {})[real.name] = qp
                    u.replace_input_with(n, real)
                if real.op == "get_attr":
                    real.meta["qout"] = qp
        for n in list(graph.nodes):
            if n.op == "call_function" and n.target in Q_OPS:
                qp = qparams_from(gm, n)
                real = n.args[0]
                real.meta["qout"] = qp
                for u in list(n.users):
                    if u.op == "output":
                        u.replace_input_with(n, real)
        for n in reversed(list(graph.nodes)):
            if n.op == "call_function" and (n.target in DQ_OPS or n.target in Q_OPS):
                if n.users:
                    raise LoweringError(f"quantize node still used by {list(n.users)}", node=n.name)
                graph.erase_node(n)
        # fused activations: producer's output is the activation's (clamped) output
        for n in graph.nodes:
            if n.op != "call_function" or "qout" not in n.meta:
                continue
            if n.target in FUSED_ACTIVATIONS:
                src = n.args[0]
                if isinstance(src, fx.Node) and "qout" not in src.meta and len(src.users) == 1:
                    src.meta["qout"] = n.meta["qout"]
                    src.meta["fused_activation"] = n.name
                    n.meta.setdefault("qin", {})[src.name] = n.meta["qout"]
        ctx.quantized = True
