"""Composite aten ops that ``torch.export`` keeps whole (einsum, swapaxes, movedim...): each is
replaced by PyTorch's own CompositeImplicitAutograd decomposition of it, traced on the node's
shapes (permute, view, bmm, mul, sum...), so its meaning is PyTorch's, not ours."""

from __future__ import annotations

import torch
import torch.fx as fx
from torch._decomp import decomposition_table
from torch.fx.experimental.proxy_tensor import make_fx

from ...graph_utils import val
from ._common import decomposition

aten = torch.ops.aten

#: ops with no emitter of their own whose PyTorch decomposition lowers
COMPOSITE_OPS = (aten.einsum.default, aten.swapaxes.default, aten.swapdims.default,
                 aten.movedim.int, aten.movedim.intlist, aten.moveaxis.int, aten.to.device)
#: ops with a kernel of their own (so no implicit decomposition) whose registered PyTorch
#: decomposition (``torch._decomp``) is made of ops we lower: F.threshold, F.unfold (im2col),
#: F.affine_grid (F.fold's col2im decomposes to an accumulating index_put, which we do not lower)
TABLE_DECOMPOSED_OPS = (aten.threshold.default, aten.im2col.default, aten.affine_grid_generator.default)


_RESHAPES = {aten.view.default: aten.reshape.default,
             aten._unsafe_view.default: aten.reshape.default}


@decomposition(*COMPOSITE_OPS, *TABLE_DECOMPOSED_OPS)
def composite(gm, n, b):
    """Trace PyTorch's decomposition of ``n`` (its implicit one, or the one registered in
    ``torch._decomp``) on zeros shaped like the inputs and splice the traced graph in place of
    ``n`` (its constants become constants of ``gm``)."""
    inputs = n.all_input_nodes
    implicit = torch._C._dispatch_has_kernel_for_dispatch_key(n.target.name(),
                                                              "CompositeImplicitAutograd")
    decompose = n.target.decompose if implicit else _registered_decomposition(n.target)
    if decompose is None or any(val(x) is None for x in inputs):
        return None
    examples = [torch.zeros(tuple(val(x).shape), dtype=val(x).dtype) for x in inputs]

    def fn(*tensors):
        env = dict(zip(inputs, tensors, strict=True))
        args = fx.node.map_arg(n.args, env.__getitem__)
        kwargs = fx.node.map_arg(n.kwargs, env.__getitem__)
        return decompose(*args, **kwargs)

    traced = make_fx(fn)(*examples)
    return _splice(gm, b, traced, inputs)


def _registered_decomposition(target):
    """``torch._decomp``'s decomposition of ``target``, for the ops of :data:`TABLE_DECOMPOSED_OPS`."""
    return decomposition_table.get(target) if target in TABLE_DECOMPOSED_OPS else None


def _splice(gm, b, traced: fx.GraphModule, inputs: list) -> fx.Node | None:
    env: dict = {}
    placeholders = iter(inputs)
    for t in traced.graph.nodes:
        if t.op == "placeholder":
            env[t] = next(placeholders)
        elif t.op == "get_attr":
            env[t] = b.const(gm, getattr(traced, t.target), "composite")
        elif t.op == "call_function":
            # traced on contiguous zeros, a view may meet a permuted tensor here: reshape
            target = _RESHAPES.get(t.target, t.target)
            env[t] = b(target, *fx.node.map_arg(t.args, env.__getitem__),
                       **fx.node.map_arg(t.kwargs, env.__getitem__))
        elif t.op == "output":
            out = t.args[0]
            return env[out] if isinstance(out, fx.Node) else None
    return None
