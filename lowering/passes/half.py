"""Float16 in the FP profile: which ops TOSA computes in FP16, and float32 compute for the rest.

TOSA's FP profile has FP16 tensors, and casts, data movement and the basic element-wise ops
(:data:`FP16_OPS`) compute in the tensor's own type exactly as PyTorch's half ops round them, so
those stay FP16. Every other op on float16 tensors (a convolution, a matmul, a softmax, an
exponential...) is computed by PyTorch's CPU kernels in float32 and rounded to float16 once at
the end (its "opmath" type); :class:`PromoteHalfCompute` lowers it the same way: its float16
inputs are cast to float32, the op runs in float32, its float16 results are cast back, so the
lowered graph keeps the model's float16 interface and rounds where PyTorch rounds.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ..graph_utils import Builder, copy_meta, tensor_values, untyped_dtype
from .base import GraphPass, PassContext

_aten = torch.ops.aten

#: ops whose visitors are exact for FP16 tensors (TOSA FP profile): casts, data movement and
#: the element-wise ops TOSA computes in the tensor's own type (tests/lowering/test_lowering_fp16.py)
FP16_OPS = {
    _aten._to_copy.default, _aten.to.dtype, _aten.view.default, _aten.reshape.default,
    _aten.permute.default, _aten.transpose.int, _aten.clone.default, _aten.unsqueeze.default,
    _aten.squeeze.dim, _aten.squeeze.dims, _aten.flatten.using_ints, _aten.cat.default,
    _aten.slice.Tensor, _aten.select.int, _aten.expand.default,
    _aten.add.Tensor, _aten.sub.Tensor, _aten.mul.Tensor, _aten.maximum.default,
    _aten.minimum.default, _aten.abs.default, _aten.neg.default, _aten.relu.default,
    _aten.clamp.default, _aten.where.self, _aten.gt.Tensor, _aten.ge.Tensor, _aten.lt.Tensor,
    _aten.le.Tensor, _aten.eq.Tensor, _aten.ne.Tensor,
}


def _is_half(node) -> bool:
    return isinstance(node, fx.Node) and any(t.dtype == torch.float16 for t in tensor_values(node))


def _to_float(args, cast):
    """``args`` with every float16 tensor node replaced by ``cast(node)`` and a ``torch.float16``
    argument (a factory's or reduction's dtype) by ``torch.float32``."""
    if isinstance(args, (list, tuple)):
        return type(args)(_to_float(a, cast) for a in args)
    if isinstance(args, dict):
        return {k: _to_float(v, cast) for k, v in args.items()}
    if args is torch.float16:
        return torch.float32
    return cast(args) if _is_half(args) else args


def _promoted(node: fx.Node) -> bool:
    """Whether ``node`` is an ATen op outside :data:`FP16_OPS` that reads or makes a float16
    tensor (and no tensor TOSA has no type for, which keeps it on the CPU anyway)."""
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) \
        and node.target not in FP16_OPS and untyped_dtype(node) is None \
        and (_is_half(node) or any(map(_is_half, node.all_input_nodes)))


class PromoteHalfCompute(GraphPass):
    """FP: an op outside :data:`FP16_OPS` on float16 tensors computes in float32 between casts
    (see the module docstring).

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.sigmoid(x)
        >>> x = torch.ones(2, dtype=torch.float16)
        >>> gm = torch.export.export(M(), (x,)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (x,))
        >>> PromoteHalfCompute()(gm, PassContext(example_inputs=(x,)))
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten._to_copy.default', 'aten.sigmoid.default', 'aten._to_copy.default']
    """

    restructures = True

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        if ctx.profile != "FP":
            return
        graph = gm.graph
        for node in [n for n in graph.nodes if _promoted(n)]:
            _widen_inputs(graph, node)
            if isinstance(node.meta.get("tv_val", node.meta.get("val")), (list, tuple)):
                for user in list(node.users):
                    if user.target is operator.getitem and _is_half(user):
                        _narrow_after(graph, user)
            elif _is_half(node):
                _narrow_after(graph, node)
            _widen_values(node)


def _widen_inputs(graph: fx.Graph, node: fx.Node) -> None:
    """Give ``node`` float32 casts of its float16 inputs (one per input node) and float32 for
    a float16 dtype argument."""
    build = Builder(graph, node)
    casts: dict[fx.Node, fx.Node] = {}

    def widen(x: fx.Node) -> fx.Node:
        if x not in casts:
            casts[x] = build(_aten._to_copy.default, x, dtype=torch.float32)
        return casts[x]

    node.args, node.kwargs = _to_float(node.args, widen), _to_float(node.kwargs, widen)


def _widen_values(node: fx.Node) -> None:
    """``node``'s value metadata as float32 where it was float16: what the rest of this pass
    reads (the pipeline's value propagation recomputes it exactly before the next pass)."""
    for key in ("tv_val", "val"):
        value = node.meta.get(key)
        if isinstance(value, torch.Tensor):
            node.meta[key] = value.float() if value.dtype == torch.float16 else value
        elif isinstance(value, (list, tuple)):
            node.meta[key] = type(value)(v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.float16
                                         else v for v in value)


def _narrow_after(graph: fx.Graph, node: fx.Node) -> None:
    """Cast ``node``'s result (float32 from now on) back to float16 for all its users."""
    users = list(node.users)
    with graph.inserting_after(node):
        cast = graph.call_function(_aten._to_copy.default, (node,), {"dtype": torch.float16})
    copy_meta(cast, node)
    cast.meta.update({k: node.meta[k] for k in ("tv_val", "val") if k in node.meta})  # (float16)
    for user in users:
        user.replace_input_with(node, cast)
    if node.target is operator.getitem:
        _widen_values(node)
