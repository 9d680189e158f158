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


def _read_by_ops(n: fx.Node) -> bool:
    """Whether an op reads ``n`` (the graph's output and export's guard call do not compute)."""
    return any(u.op not in ("output", "call_module") for u in n.users)


def graph_activation_dtype(gm: fx.GraphModule) -> torch.dtype:
    """The activation dtype of a quantized graph (int8 when it has no quantized activation);
    weights are int8 even under int16 activations, so per-channel ones do not count."""
    activations = [n.meta["qout"] for n in gm.graph.nodes if n.op in ("placeholder", "call_function")
                   and isinstance(n.meta.get("qout"), QParams) and n.meta["qout"].axis is None]
    return activations[0].dtype if activations else torch.int8


def range_qparams(v: torch.Tensor, dtype: torch.dtype) -> QParams:
    """Per-tensor activation QParams covering the values of ``v`` and 0: int8 asymmetric,
    int16 symmetric (as the quantizer makes them).

    Example:
        >>> qp = range_qparams(torch.tensor([-1.0, 3.0]), torch.int8)
        >>> round(qp.s * 255, 6), qp.zp
        (4.0, -64)
    """
    lo = min(float(v.min()), 0.0) if v.numel() else 0.0
    hi = max(float(v.max()), 0.0) if v.numel() else 0.0
    if dtype == torch.int16:  # symmetric, as the int16 activations are
        qmin, qmax = -32767, 32767
        scale, zp = (max(-lo, hi) / qmax) or 1.0, 0
    else:
        qmin, qmax = -128, 127
        scale = ((hi - lo) / (qmax - qmin)) or 1.0
        zp = int(np.clip(round(qmin - lo / scale), qmin, qmax))
    return QParams(np.array([scale]), np.array([zp]), dtype, qmin, qmax)


class QuantizeUnusedInputs(GraphPass):
    """Give a float graph input that no op reads the activation quantization of the graph.

    PT2E observes a tensor only where an annotated op reads it, so an unused input keeps its
    float dtype and would make an INT graph impossible. It stays a graph input (the model's
    signature is kept) with the graph's activation dtype and a range from its example value.
    An input the graph returns as it is (``torch.zeros(3) + x`` once ``x + 0`` is folded) is
    one too: the output is that quantized input (the emitter copies it with IDENTITY).

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x, unused: x)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(2), torch.tensor([-1.0, 3.0])))
        >>> QuantizeUnusedInputs()(gm, PassContext(profile="INT"))
        >>> qp = [n for n in gm.graph.nodes if n.name == "unused"][0].meta["qout"]
        >>> str(qp.dtype), round(qp.s * 255, 6), qp.zp
        ('torch.int8', 4.0, -64)
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        dtype = graph_activation_dtype(gm)
        for n in gm.graph.nodes:
            v = n.meta.get("tv_val", val(n))
            if n.op != "placeholder" or _read_by_ops(n) or "qout" in n.meta or \
                    not isinstance(v, torch.Tensor) or not v.is_floating_point():
                continue
            n.meta["qout"] = range_qparams(v, dtype)
