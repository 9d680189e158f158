"""Remove ops that are identities at inference time."""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import val
from .base import GraphPass, PassContext

aten = torch.ops.aten

_IDENTITY = {
    aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default,
    aten.detach_.default, aten.lift_fresh_copy.default, aten.dropout.default,
    aten.feature_dropout.default, aten.alpha_dropout.default,
}
_DROP = {aten._assert_tensor_metadata.default, aten._assert_scalar.default,
         aten.sym_constrain_range_for_size.default}
_CASTS = {aten.to.dtype, aten._to_copy.default, aten.to.dtype_layout, aten.type_as.default}


class RemoveNoOps(GraphPass):
    """Drop clone/contiguous/dropout/alias, same-dtype casts and metadata asserts.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.dropout(x.clone(), 0.5, False) + 1
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> RemoveNoOps()(gm, PassContext())
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten.add.Tensor']
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        for n in list(gm.graph.nodes):
            if n.op != "call_function":
                continue
            if n.target in _DROP and not n.users:
                gm.graph.erase_node(n)
            elif n.target in _IDENTITY:
                n.replace_all_uses_with(n.args[0])
                gm.graph.erase_node(n)
            elif n.target in _CASTS:
                vin, vout = val(n.args[0]), val(n)
                if vin is not None and vout is not None and vin.dtype == vout.dtype:
                    n.replace_all_uses_with(n.args[0])
                    gm.graph.erase_node(n)
