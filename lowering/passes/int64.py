"""int64 handling: TOSA 1.0 base profiles have no 64-bit integers, so int64 values
(indices, argmax results, integer constants) are carried as int32."""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import get_constant, val
from .base import GraphPass, PassContext

INT32_MAX = 2**31 - 1


def fits_int32(t: torch.Tensor) -> bool:
    """Whether every value of integer tensor ``t`` fits in int32 (carried as int32, none wraps).

    Example:
        >>> fits_int32(torch.tensor([5, -2**31])), fits_int32(torch.tensor([2**40]))
        (True, False)
    """
    return t.numel() == 0 or (int(t.max()) <= INT32_MAX and int(t.min()) >= -INT32_MAX - 1)


class ConvertInt64ConstOpsToInt32(GraphPass):
    """int64 constants (get_attr buffers, full/arange/zeros results) become int32.

    Example:
        >>> gm = torch.fx.symbolic_trace(torch.nn.Identity()); gm.register_buffer("c", torch.arange(3))
        >>> with gm.graph.inserting_before(next(iter(gm.graph.nodes))): _ = gm.graph.get_attr("c")
        >>> ConvertInt64ConstOpsToInt32().run(gm, PassContext()); gm.c.dtype
        torch.int32
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        for n in gm.graph.nodes:
            if n.op == "get_attr":
                t = get_constant(gm, n)
                if t is not None and t.dtype == torch.int64:
                    if not fits_int32(t):
                        continue
                    *path, leaf = str(n.target).split(".")
                    owner = gm
                    for p in path:
                        owner = getattr(owner, p)
                    setattr(owner, leaf, t.to(torch.int32)) if not isinstance(
                        getattr(owner, leaf), torch.nn.Parameter) else None
                    n.meta["tv_val"] = t.to(torch.int32)
                    n.meta["tosa_dtype"] = "INT32"
            elif n.op == "call_function":
                v = val(n)
                if v is not None and v.dtype == torch.int64 and all(
                    get_constant(gm, a) is not None for a in n.all_input_nodes
                ):
                    n.meta["tosa_dtype"] = "INT32"


class ConvertInt64OutputOpsToInt32(GraphPass):
    """Ops producing int64 (argmax, cumsum of ints, comparisons' index math...) are
    emitted with int32 results; the runtime casts graph outputs back to int64.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.argmax(x, 1)
        >>> gm = torch.export.export(M(), (torch.ones(2, 3),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(2, 3),)); ConvertInt64OutputOpsToInt32()(gm, PassContext())
        >>> [n.meta.get("tosa_dtype") for n in gm.graph.nodes if n.op == "call_function"]
        ['INT32']
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        for n in gm.graph.nodes:
            if n.op == "call_function":
                v = val(n)
                if v is not None and v.dtype == torch.int64:
                    n.meta["tosa_dtype"] = "INT32"
                    n.meta["torch_dtype"] = torch.int64


class InsertInt32CastsAfterInt64Placeholders(GraphPass):
    """int64 graph inputs (e.g. embedding indices) are declared int32 in TOSA; the
    cast happens at the boundary (:meth:`LoweredModel.run` converts the numpy input).

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, i):
        ...         return i + 1
        >>> gm = torch.export.export(M(), (torch.ones(2, dtype=torch.long),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(2, dtype=torch.long),))
        >>> InsertInt32CastsAfterInt64Placeholders()(gm, PassContext())
        >>> [n.meta.get("tosa_dtype") for n in gm.graph.nodes if n.op == "placeholder"]
        ['INT32']
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        casts = ctx.notes.setdefault("input_casts", {})
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                v = val(n)
                if v is not None and v.dtype == torch.int64:
                    n.meta["tosa_dtype"] = "INT32"
                    casts[n.name] = "int32"
