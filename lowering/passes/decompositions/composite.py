"""Composite aten ops that ``torch.export`` keeps whole (einsum, swapaxes, movedim...): each is
replaced by PyTorch's own CompositeImplicitAutograd decomposition of it, traced on the node's
shapes (permute, view, bmm, mul, sum...), so its meaning is PyTorch's, not ours."""

from __future__ import annotations

import torch
import torch.fx as fx
from torch._decomp import decomposition_table
from torch.fx.experimental.proxy_tensor import make_fx

from ...graph_utils import get_constant, val
from ._common import decomposition, tuple_outputs

aten = torch.ops.aten

#: ops with no emitter of their own whose PyTorch decomposition lowers
COMPOSITE_OPS = (aten.einsum.default, aten.swapaxes.default, aten.swapdims.default,
                 aten.movedim.int, aten.movedim.intlist, aten.moveaxis.int, aten.to.device,
                 aten.cosine_similarity.default, aten.kron.default, aten.tensordot.default,
                 aten.take_along_dim.default, aten.diag.default, aten.linalg_norm.default,
                 # aliases and views spelled another way (torch.clip, x.mT, x.T, x.mH)
                 aten.clip.default, aten.clip.Tensor, aten.mT.default, aten.mH.default,
                 aten.adjoint.default, aten.numpy_T.default, aten.matrix_H.default,
                 aten.tensor_split.sections, aten.tensor_split.indices,
                 aten.tensor_split.tensor_indices_or_sections, aten.broadcast_tensors.default,
                 # losses a model may compute in its forward (labels as inputs; cross_entropy,
                 # nll_loss, binary_cross_entropy_with_logits and aminmax have decompositions of
                 # their own in .losses and .cumulative; conv_transpose3d stays on the CPU)
                 aten.l1_loss.default, aten.kl_div.default,
                 # products, norms, integrals and resampling spelled through other ops
                 aten.inner.default, aten.linalg_multi_dot.default, aten.chain_matmul.default,
                 aten.diagflat.default, aten.frobenius_norm.dim, aten.trapezoid.dx, aten.trapezoid.x,
                 aten.trapz.dx, aten.cumulative_trapezoid.x,
                 # dropouts in eval: the identity
                 aten.alpha_dropout.default, aten.feature_alpha_dropout.default,
                 aten.feature_dropout.default)
#: ops with a kernel of their own (so no implicit decomposition) whose registered PyTorch
#: decomposition (``torch._decomp``) is made of ops we lower: F.threshold, F.unfold (im2col),
#: F.affine_grid (F.fold's col2im: :mod:`.fold`), torch.linalg.cross, deg2rad, diagonal and
#: diagonal_copy (einsum's and diag's), trace, diag_embed, addmv, the mse, smooth-L1, Huber,
#: binary cross-entropy and soft-margin losses. (Not isclose, count_nonzero,
#: heaviside, cumprod, bilinear,
#: pairwise_distance: their pieces would not all lower, and a CPU piece inside one op's
#: decomposition leaves a partition boundary with no PyTorch node; nor copysign, signbit,
#: round(decimals): decomposed into prims. Bilinear, pairwise_distance and cdist lower through
#: :mod:`.distance` instead; isclose and count_nonzero through :mod:`.compare_count`, cumprod
#: through :mod:`.scatter_cum`, round(decimals) through :mod:`.arith`.)
TABLE_DECOMPOSED_OPS = (aten.threshold.default, aten.im2col.default, aten.affine_grid_generator.default,
                        aten.linalg_cross.default, aten.deg2rad.default, aten.diagonal.default,
                        aten.diagonal_copy.default, aten.trace.default, aten.diag_embed.default,
                        aten.addmv.default, aten.mse_loss.default, aten.smooth_l1_loss.default,
                        aten.huber_loss.default, aten.binary_cross_entropy.default,
                        aten.soft_margin_loss.default, aten.rot90.default, aten.renorm.default, aten.index_fill.int_Scalar, aten.index_fill.int_Tensor,
                        aten.vdot.default)


#: ops that only copy (the decomposition clones before an in-place op, made functional here)
_NO_OPS = (aten.clone.default, aten.alias.default)
_RESHAPES = {aten.view.default: aten.reshape.default,
             aten._unsafe_view.default: aten.reshape.default}


@decomposition(*COMPOSITE_OPS, *TABLE_DECOMPOSED_OPS)
def composite(gm, n, b):
    """Trace PyTorch's decomposition of ``n`` (its implicit one, or the one registered in
    ``torch._decomp``) and splice the traced graph in place of ``n``."""
    implicit = torch._C._dispatch_has_kernel_for_dispatch_key(n.target.name(),
                                                              "CompositeImplicitAutograd")
    decompose = n.target.decompose if implicit else _registered_decomposition(n.target)
    return splice_decomposition(gm, n, b, decompose) if decompose is not None else None


def splice_decomposition(gm, n, b, decompose):
    """Trace ``decompose`` (called with ``n``'s arguments) on the values of ``n``'s inputs and
    splice the traced graph in place of ``n``: its constants become constants of ``gm``, its
    nodes get value metadata, a tuple result replaces ``n``'s getitem users.

    Example:
        >>> from lowering.graph_utils import Builder
        >>> g = fx.Graph(); x = g.placeholder("x")
        >>> n = g.call_function(aten.swapaxes.default, (x, 0, 1)); _ = g.output(n)
        >>> gm = fx.GraphModule(torch.nn.Module(), g); x.meta["tv_val"] = torch.ones(2, 3)
        >>> out = splice_decomposition(gm, n, Builder(g, n), n.target.decompose)
        >>> out.target, tuple(out.meta["tv_val"].shape)
        (<OpOverload(op='aten.transpose', overload='int')>, (3, 2))
    """
    inputs = n.all_input_nodes
    if any(val(x) is None for x in inputs):
        return None
    # traced on the real values when known, so every spliced node gets value metadata
    examples = [_example(gm, x) for x in inputs]

    def fn(*tensors):
        env = dict(zip(inputs, tensors, strict=True))
        args = fx.node.map_arg(n.args, env.__getitem__)
        kwargs = fx.node.map_arg(n.kwargs, env.__getitem__)
        return decompose(*args, **kwargs)

    traced = make_fx(fn)(*examples)
    real = all(_known(gm, x) for x in inputs)
    out = _splice(gm, b, traced, inputs, _values(traced, examples) if real else {})
    if isinstance(out, (tuple, list)):
        return tuple_outputs(n, out)
    return out


def _known(gm, x: fx.Node) -> bool:
    return isinstance(x.meta.get("tv_val"), torch.Tensor) or get_constant(gm, x) is not None


def _example(gm, x: fx.Node) -> torch.Tensor:
    """The node's real value (``tv_val``, or the constant it reads), else zeros of its shape
    and dtype."""
    real = x.meta.get("tv_val")
    if not isinstance(real, torch.Tensor):
        real = get_constant(gm, x)
    if isinstance(real, torch.Tensor):
        return real.detach().clone()
    return torch.zeros(tuple(val(x).shape), dtype=val(x).dtype)


def _values(traced: fx.GraphModule, examples: list) -> dict:
    """Every node of ``traced`` -> its value on ``examples`` (the spliced nodes' ``tv_val``)."""
    values: dict = {}

    class _Record(fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            if isinstance(out, torch.Tensor):
                values[node] = out.detach().clone()  # an in-place op rewrites its input later
            return out

    with torch.no_grad():
        _Record(traced).run(*[e.clone() for e in examples])
    return values


def _functional(target):
    """``clamp_min_.Tensor`` -> ``clamp_min.Tensor``: the graph is functional here, and a
    decomposition's in-place op writes into a temporary it created (a clone)."""
    if not isinstance(target, torch._ops.OpOverload):
        return target
    name = target._schema.name.split("::")[-1]
    if not name.endswith("_") or name.startswith("_"):
        return target
    packet = getattr(aten, name[:-1], None)
    return getattr(packet, target._overloadname, target) if packet is not None else target


def _registered_decomposition(target):
    """``torch._decomp``'s decomposition of ``target``, for the ops of :data:`TABLE_DECOMPOSED_OPS`."""
    return decomposition_table.get(target) if target in TABLE_DECOMPOSED_OPS else None


def _splice(gm, b, traced: fx.GraphModule, inputs: list, values: dict):
    env: dict = {}
    placeholders = iter(inputs)
    for t in traced.graph.nodes:
        if t.op == "placeholder":
            env[t] = next(placeholders)
        elif t.op == "get_attr":
            env[t] = b.const(gm, getattr(traced, t.target), "composite")
        elif t.op == "call_function" and t.target in _NO_OPS:
            env[t] = env[t.args[0]]  # a copy in a functional graph: one observer fewer in INT
        elif t.op == "call_function":
            # traced on contiguous zeros, a view may meet a permuted tensor here: reshape
            target = _RESHAPES.get(t.target, _functional(t.target))
            env[t] = b(target, *fx.node.map_arg(t.args, env.__getitem__),
                       **fx.node.map_arg(t.kwargs, env.__getitem__))
            if t in values:
                env[t].meta["tv_val"] = values[t]
        elif t.op == "output":
            return fx.node.map_arg(t.args[0], env.__getitem__)
    return None
