"""Choose a physical dimension order per tensor: NCHW (PyTorch) -> NHWC (TOSA).

Spatial ops (conv, pooling, resize) produce NHWC; element-wise and some shape-aware
ops (cat, reductions with keepdim, pad, slice) keep the layout of their input; every
other op sees the logical (PyTorch) order.  The emitter inserts a TRANSPOSE only where
a consumer needs a different order than the producer made.  ``meta["layout"]`` holds
the permutation ``perm`` with ``physical.shape[i] == logical.shape[perm[i]]``.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import NHWC, get_constant, val
from ..ops.registry import table_ops
from .base import GraphPass, PassContext

aten = torch.ops.aten

SPATIAL = {
    aten.conv2d.default, aten.convolution.default, aten.max_pool2d.default,
    aten.max_pool2d_with_indices.default, aten.avg_pool2d.default,
    aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default,
    aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec,
    aten.upsample_nearest2d.default, aten.upsample_bilinear2d.default,
    aten.conv_transpose2d.input,
}

ELEMENTWISE = {
    aten.relu.default, aten.relu6.default, aten.hardtanh.default, aten.clamp.default,
    aten.sigmoid.default, aten.tanh.default, aten.gelu.default, aten.silu.default,
    aten.hardswish.default, aten.hardsigmoid.default, aten.exp.default, aten.log.default,
    aten.sqrt.default, aten.rsqrt.default, aten.reciprocal.default, aten.neg.default,
    aten.abs.default, aten.elu.default, aten.leaky_relu.default, aten.erf.default,
    aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.maximum.default,
    aten.minimum.default, aten.where.self, aten.eq.Tensor, aten.ne.Tensor, aten.gt.Tensor,
    aten.ge.Tensor, aten.lt.Tensor, aten.le.Tensor, aten.logical_and.default,
    aten.logical_or.default, aten.logical_not.default, aten.bitwise_and.Tensor,
    aten.bitwise_or.Tensor, aten.bitwise_not.default, aten.pow.Tensor_Scalar,
    aten.pow.Tensor_Tensor, aten.sin.default, aten.cos.default, aten.floor.default,
    aten.ceil.default, aten.softplus.default, aten.mish.default, aten.logical_xor.default,
    aten.bitwise_xor.Tensor, aten.clamp.Tensor,
}

KEEP_LAYOUT = {
    aten.cat.default, aten.mean.dim, aten.sum.dim_IntList, aten.amax.default, aten.amin.default,
    aten.constant_pad_nd.default, aten.slice.Tensor,
}


def _layout(n) -> tuple | None:
    return n.meta.get("layout") if isinstance(n, fx.Node) else None


class AssignNHWCLayout(GraphPass):
    """Annotate ``meta["layout"]`` for every node (``None`` = PyTorch order).

    Example:
        >>> m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.ReLU()).eval()
        >>> gm = torch.export.export(m, (torch.ones(1, 1, 2, 2),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(1, 1, 2, 2),)); AssignNHWCLayout()(gm, PassContext())
        >>> [n.meta["layout"] for n in gm.graph.nodes if n.op == "call_function"]
        [(0, 2, 3, 1), (0, 2, 3, 1)]
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        elementwise = ELEMENTWISE | table_ops()
        for n in gm.graph.nodes:
            n.meta["layout"] = None
            if n.op != "call_function":
                continue
            v = val(n)
            if v is None:
                continue
            if n.target in SPATIAL and v.dim() == 4:
                n.meta["layout"] = NHWC
                continue
            if n.target in (aten.mean.dim, aten.sum.dim_IntList, aten.amax.default,
                            aten.amin.default):
                keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
                if not keep:
                    continue
            if n.target in elementwise or n.target in KEEP_LAYOUT:
                ins = n.args[0] if n.target == aten.cat.default else n.all_input_nodes
                ins = [a for a in ins if isinstance(a, fx.Node)]
                dyn = [a for a in ins if get_constant(gm, a) is None and val(a) is not None
                       and val(a).dim() == v.dim()]
                if n.target == aten.cat.default:
                    dyn = ins
                lays = {_layout(a) for a in dyn}
                if len(lays) == 1 and dyn:
                    n.meta["layout"] = lays.pop()
                elif dyn and NHWC in lays and v.dim() == 4 and n.target in elementwise:
                    n.meta["layout"] = NHWC
