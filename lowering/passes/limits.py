"""INT: float limits used as attention-mask fillers become a bounded value before annotation."""

from __future__ import annotations

import math
import re

import torch
import torch.fx as fx

from .base import GraphPass, PassContext

#: What ``-inf`` / ``finfo.min`` (and their positive twins) become: far enough that a masked
#: softmax entry is exp(-256) = 0 at any int8 step, near enough that one int8 scale can hold
#: both the filler and the scores it is added to (finfo.min gave a scale of 1e36: every score
#: of the sum quantized to zero).
BOUND = 256.0
_LIMIT = float(torch.finfo(torch.float32).max)
#: Ops whose float arguments are bounds, or a norm's order (``ord=inf``: the max of ``|x|``, a
#: mode, not a value; cdist's and pairwise_distance's ``p`` too; isclose's ``atol=inf``, a
#: tolerance), left alone.
_BOUNDS = re.compile(r"clamp|clip|hardtanh|nan_to_num|norm|cdist|pdist|pairwise_distance|isclose")


def _bounded(value):
    if isinstance(value, float) and (math.isinf(value) or abs(value) >= _LIMIT):
        return math.copysign(BOUND, value)
    return value


class BoundInfiniteScalars(GraphPass):
    """INT only: a scalar argument that is +-inf or float32's largest finite magnitude (how
    Hugging Face builds attention masks: ``where(mask, 0, finfo.min)``) becomes +-:data:`BOUND`;
    the bounds of a clamp stay as they are.

    Example:
        >>> import torch
        >>> from lowering.passes.base import PassContext
        >>> class M(torch.nn.Module):
        ...     def forward(self, x, m):
        ...         return torch.where(m, x, torch.finfo(torch.float32).min)
        >>> ex = (torch.randn(2, 3), torch.ones(2, 3, dtype=torch.bool))
        >>> gm = torch.export.export(M(), ex).module()
        >>> BoundInfiniteScalars()(gm, PassContext(profile="INT"))
        >>> [n.args[2] for n in gm.graph.nodes if n.target == torch.ops.aten.where.ScalarOther]
        [-256.0]
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        if ctx.profile != "INT":
            return
        for node in gm.graph.nodes:
            # in a bound (clamp(x, max=inf)) the infinity means "no bound", not a value
            if node.op == "call_function" and not _BOUNDS.search(str(node.target)):
                node.args = tuple(_bounded(a) for a in node.args)
                node.kwargs = {k: _bounded(v) for k, v in node.kwargs.items()}


# --------------------------------------------------------------------------- decomposition sizes

#: The most elements one intermediate of a decomposition that grows quadratically may hold: the
#: [..., K, M] comparison of bucketize / searchsorted (:mod:`.decompositions.compare_count`), the
#: [..., K, P] one-hot mask of scatter_add / index_add / scatter_reduce and cumprod's [..., L, L]
#: triangle (:mod:`.decompositions.scatter_cum`). 2**21 float32 elements are 8 MiB per tensor;
#: beyond it the op stays on the CPU whole (a GATHER / SCATTER form would be linear, but TOSA
#: SCATTER writes each row once, so duplicate indices could not accumulate).
QUADRATIC_ELEMENTS = 2**21


def within_quadratic_bound(*sizes: int) -> bool:
    """Whether an intermediate of ``prod(sizes)`` elements stays within
    :data:`QUADRATIC_ELEMENTS`.

    Example:
        >>> within_quadratic_bound(1024, 2048), within_quadratic_bound(2048, 1025)
        (True, False)
    """
    return math.prod(sizes) <= QUADRATIC_ELEMENTS
