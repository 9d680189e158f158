"""Remove ops that are identities at inference time."""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import val
from .base import GraphPass, PassContext
from .rewrites import HANDLED, apply_rewrites, copy_variant_base, rewrite, rewrites_for

aten = torch.ops.aten
PASS = "RemoveNoOps"


@rewrite(PASS, aten.clone.default, aten.contiguous.default, aten.alias.default,
         aten.detach.default, aten.detach_.default, aten.lift_fresh_copy.default,
         aten.dropout.default, aten.feature_dropout.default, aten.alpha_dropout.default)
def identity(gm, n, b):
    """The op returns its input (memory format and dropout do not exist at inference)."""
    return n.args[0]


@rewrite(PASS, aten.to.dtype, aten._to_copy.default, aten.to.dtype_layout, aten.type_as.default)
def same_dtype_cast(gm, n, b):
    """A cast to the dtype the value already has is dropped; other casts become
    ``_to_copy``, which the elementwise visitor emits as CAST."""
    vin, vout = val(n.args[0]), val(n)
    if vin is None or vout is None:
        return None
    if vin.dtype == vout.dtype:
        return n.args[0]
    if n.target in (aten._to_copy.default, aten.to.dtype):
        return None
    return b(aten._to_copy.default, n.args[0], dtype=vout.dtype)


@rewrite(PASS, aten._assert_tensor_metadata.default, aten._assert_scalar.default,
         aten.sym_constrain_range_for_size.default)
def metadata_assert(gm, n, b):
    """Checks torch.export leaves for shapes and dtypes that are static here."""
    return HANDLED if not n.users else None


class RemoveNoOps(GraphPass):
    """Drop clone/contiguous/dropout/alias, same-dtype casts and metadata asserts; make
    ``X_copy`` view variants (``permute_copy``...) the op ``X`` they compute and ``view`` a
    ``reshape``.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.nn.functional.dropout(x.clone(), 0.5, False) + 1
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> RemoveNoOps()(gm, PassContext())
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten.add.Tensor']
    """

    restructures = True

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        for n in gm.graph.nodes:
            base = copy_variant_base(n.target) if n.op == "call_function" else None
            if base is not None:
                n.target = base
            if n.op == "call_function" and n.target == aten.view.default:
                # without ``contiguous`` (dropped below) a view may read a transposed tensor
                # (ShuffleNet's channel shuffle): reshape computes the same values on any strides
                n.target = aten.reshape.default
        apply_rewrites(gm, rewrites_for(PASS, ctx.profile), ctx.profile)
