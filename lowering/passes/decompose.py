"""Decompose composite aten ops into primitives that map 1:1 onto TOSA (or onto a TABLE).

Run before quantization in the INT profile so that every intermediate of, e.g., a
layer norm or a softmax gets its own observer; run as the first pass in FP.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from ..graph_utils import Builder, get_constant, val
from .base import GraphPass, PassContext

aten = torch.ops.aten


def _norm_dims(dims, rank):
    if isinstance(dims, int):
        dims = [dims]
    return [d % rank for d in dims]


def _const_like(gm, B, value: float, ref: fx.Node | None, hint="scalar"):
    dtype = torch.float32
    v = val(ref) if ref is not None else None
    if v is not None and v.dtype in (torch.int32, torch.int64, torch.bool):
        dtype = v.dtype if v.dtype != torch.bool else torch.float32
        if dtype != torch.float32 and not float(value).is_integer():
            dtype = torch.float32
    return B.const(gm, torch.tensor([value], dtype=dtype), hint)


def _layer_norm(gm, n, B):
    x, shape = n.args[0], n.args[1]
    w = n.args[2] if len(n.args) > 2 else None
    b = n.args[3] if len(n.args) > 3 else None
    eps = n.args[4] if len(n.args) > 4 else 1e-5
    rank = val(x).dim()
    dims = list(range(rank - len(shape), rank))
    mean = B(aten.mean.dim, x, dims, True)
    d = B(aten.sub.Tensor, x, mean)
    sq = B(aten.mul.Tensor, d, d)
    var = B(aten.mean.dim, sq, dims, True)
    ve = B(aten.add.Tensor, var, _const_like(gm, B, float(eps), None, "eps"))
    r = B(aten.rsqrt.default, ve)
    y = B(aten.mul.Tensor, d, r)
    if w is not None:
        y = B(aten.mul.Tensor, y, w)
    if b is not None:
        y = B(aten.add.Tensor, y, b)
    return y


def _softmax(gm, n, B, log=False):
    x, dim = n.args[0], n.args[1]
    m = B(aten.amax.default, x, [dim], True)
    s = B(aten.sub.Tensor, x, m)
    e = B(aten.exp.default, s)
    t = B(aten.sum.dim_IntList, e, [dim], True)
    if log:
        return B(aten.sub.Tensor, s, B(aten.log.default, t))
    return B(aten.mul.Tensor, e, B(aten.reciprocal.default, t))


def _group_norm(gm, n, B):
    x, groups = n.args[0], n.args[1]
    w = n.args[2] if len(n.args) > 2 else None
    b = n.args[3] if len(n.args) > 3 else None
    eps = n.args[4] if len(n.args) > 4 else 1e-5
    shape = list(val(x).shape)
    N, C = shape[0], shape[1]
    g = B(aten.view.default, x, [N, groups, -1])
    mean = B(aten.mean.dim, g, [2], True)
    d = B(aten.sub.Tensor, g, mean)
    var = B(aten.mean.dim, B(aten.mul.Tensor, d, d), [2], True)
    r = B(aten.rsqrt.default, B(aten.add.Tensor, var, _const_like(gm, B, float(eps), None, "eps")))
    y = B(aten.view.default, B(aten.mul.Tensor, d, r), shape)
    bshape = [C] + [1] * (len(shape) - 2)
    if w is not None:
        wt = get_constant(gm, w)
        wn = B.const(gm, wt.reshape(bshape), "gn_w") if wt is not None else B(aten.view.default, w, bshape)
        y = B(aten.mul.Tensor, y, wn)
    if b is not None:
        bt = get_constant(gm, b)
        bn = B.const(gm, bt.reshape(bshape), "gn_b") if bt is not None else B(aten.view.default, b, bshape)
        y = B(aten.add.Tensor, y, bn)
    return y


def _batch_norm(gm, n, B):
    # aten.batch_norm(x, w, b, mean, var, training, momentum, eps, cudnn)
    x, w, b, mean, var = n.args[:5]
    eps = n.args[7] if len(n.args) > 7 else 1e-5
    if n.target == aten._native_batch_norm_legit_no_training.default:
        eps = n.args[6]
    mean_t, var_t = get_constant(gm, mean), get_constant(gm, var)
    if mean_t is None or var_t is None:
        return None
    C = mean_t.numel()
    w_t = get_constant(gm, w) if w is not None else torch.ones(C)
    b_t = get_constant(gm, b) if b is not None else torch.zeros(C)
    if w_t is None or b_t is None:
        return None
    scale = w_t / torch.sqrt(var_t + eps)
    shift = b_t - mean_t * scale
    rank = val(x).dim()
    bshape = [C] + [1] * (rank - 2)
    y = B(aten.mul.Tensor, x, B.const(gm, scale.reshape(bshape), "bn_scale"))
    return B(aten.add.Tensor, y, B.const(gm, shift.reshape(bshape), "bn_shift"))


def _div(gm, n, B):
    x, y = n.args[0], n.args[1]
    mode = n.kwargs.get("rounding_mode")
    if mode is not None:
        return None
    vx = val(x)
    if vx is not None and vx.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    if not isinstance(y, fx.Node):
        return B(aten.mul.Tensor, x, _const_like(gm, B, 1.0 / float(y), x, "recip"))
    ct = get_constant(gm, y)
    if ct is not None:
        return B(aten.mul.Tensor, x, B.const(gm, (1.0 / ct.float()), "recip"))
    return B(aten.mul.Tensor, x, B(aten.reciprocal.default, y))


def _split(gm, n, B):
    x = n.args[0]
    v = val(x)
    dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0)
    dim %= v.dim()
    size = v.shape[dim]
    if n.target in (aten.split.Tensor,):
        step = n.args[1]
        sizes = [min(step, size - i) for i in range(0, size, step)]
    elif n.target == aten.chunk.default:
        chunks = n.args[1]
        step = math.ceil(size / chunks)
        sizes = [min(step, size - i) for i in range(0, size, step)]
    elif n.target == aten.unbind.int:
        dim = (n.args[1] if len(n.args) > 1 else 0) % v.dim()
        size = v.shape[dim]
        sizes = [1] * size
    else:
        sizes = list(n.args[1])
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    for user in list(n.users):
        if user.target is not operator.getitem:
            return None
    for user in list(n.users):
        i = user.args[1]
        Bu = Builder(gm.graph, user)
        s = Bu(aten.slice.Tensor, x, dim, starts[i], starts[i] + sizes[i])
        if n.target == aten.unbind.int:
            s = Bu(aten.squeeze.dims, s, [dim])
        user.replace_all_uses_with(s)
    return "handled"


def _linearize(gm, n, B):
    """addmm/mm/matmul with a constant 2-D right operand -> linear."""
    if n.target == aten.addmm.default:
        bias, x, w = n.args[0], n.args[1], n.args[2]
        beta, alpha = n.kwargs.get("beta", 1), n.kwargs.get("alpha", 1)
        if beta != 1 or alpha != 1:
            return None
    else:
        bias, (x, w) = None, n.args[:2]
    wt = get_constant(gm, w)
    if wt is None or wt.dim() != 2:
        if n.target == aten.addmm.default:
            return B(aten.add.Tensor, B(aten.mm.default, x, w), bias)
        return None
    if bias is not None and get_constant(gm, bias) is None:
        return B(aten.add.Tensor, B(aten.linear.default, x, B.const(gm, wt.t().contiguous(), "lin_w")), bias)
    return B(aten.linear.default, x, B.const(gm, wt.t().contiguous(), "lin_w"), bias)


def _pow(gm, n, B):
    x, e = n.args[0], n.args[1]
    if e == 2:
        return B(aten.mul.Tensor, x, x)
    if e == 1:
        return x
    if e == 0.5:
        return B(aten.sqrt.default, x)
    if e == -1:
        return B(aten.reciprocal.default, x)
    return None


def _silu_fp(gm, n, B):
    return B(aten.mul.Tensor, n.args[0], B(aten.sigmoid.default, n.args[0]))


DECOMPOSITIONS = {
    aten.layer_norm.default: _layer_norm,
    aten.softmax.int: _softmax,
    aten._softmax.default: _softmax,
    aten.log_softmax.int: lambda gm, n, B: _softmax(gm, n, B, log=True),
    aten._log_softmax.default: lambda gm, n, B: _softmax(gm, n, B, log=True),
    aten.group_norm.default: _group_norm,
    aten.batch_norm.default: _batch_norm,
    aten._native_batch_norm_legit_no_training.default: _batch_norm,
    aten.div.Tensor: _div,
    aten.div.Scalar: _div,
    aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split,
    aten.chunk.default: _split,
    aten.unbind.int: _split,
    aten.addmm.default: _linearize,
    aten.mm.default: _linearize,
    aten.matmul.default: _linearize,
    aten.pow.Tensor_Scalar: _pow,
}


class DecomposeForTosa(GraphPass):
    """Rewrite composite ops (layer_norm, softmax, group_norm, batch_norm, div, split,
    addmm, pow...) into primitive aten ops.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.softmax(x, -1)
        >>> gm = torch.export.export(M(), (torch.ones(2, 3),)).module(check_guards=False)
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(2, 3),))
        >>> DecomposeForTosa()(gm, PassContext())
        >>> sorted({n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"})
        ['amax.default', 'exp.default', 'mul.Tensor', 'reciprocal.default', 'sub.Tensor', 'sum.dim_IntList']
    """

    def __init__(self, extra: dict | None = None):
        self.table = dict(DECOMPOSITIONS)
        if extra:
            self.table.update(extra)

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        changed = True
        rounds = 0
        while changed and rounds < 4:
            changed = False
            rounds += 1
            for n in list(gm.graph.nodes):
                if n.op != "call_function" or n.target not in self.table:
                    continue
                B = Builder(gm.graph, n)
                out = self.table[n.target](gm, n, B)
                if out is None:
                    continue
                if out != "handled":
                    n.replace_all_uses_with(out)
                gm.graph.erase_node(n) if not n.users else None
                changed = True
            gm.graph.eliminate_dead_code()
            gm.recompile()
        ctx.notes["graph_changed"] = ctx.notes.get("graph_changed", False) or rounds > 1


_SCALAR_TENSOR_OPS = {
    aten.add.Tensor: aten.add.Tensor,
    aten.add.Scalar: aten.add.Tensor,
    aten.sub.Tensor: aten.sub.Tensor,
    aten.sub.Scalar: aten.sub.Tensor,
    aten.rsub.Scalar: "rsub",
    aten.mul.Tensor: aten.mul.Tensor,
    aten.mul.Scalar: aten.mul.Tensor,
    aten.maximum.default: aten.maximum.default,
    aten.minimum.default: aten.minimum.default,
    aten.eq.Scalar: aten.eq.Tensor,
    aten.ne.Scalar: aten.ne.Tensor,
    aten.gt.Scalar: aten.gt.Tensor,
    aten.ge.Scalar: aten.ge.Tensor,
    aten.lt.Scalar: aten.lt.Tensor,
    aten.le.Scalar: aten.le.Tensor,
}


class ScalarsToTensors(GraphPass):
    """Turn python-scalar operands of binary ops into constant tensors (so that they
    are observed and quantized like any other operand) and fold ``alpha``.

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x + 3.0
        >>> gm = torch.export.export(M(), (torch.ones(2),)).module(check_guards=False)
        >>> ScalarsToTensors()(gm, PassContext())
        >>> [n.op for n in gm.graph.nodes]
        ['placeholder', 'get_attr', 'call_function', 'output']
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        for n in list(gm.graph.nodes):
            if n.op != "call_function" or n.target not in _SCALAR_TENSOR_OPS:
                continue
            new_t = _SCALAR_TENSOR_OPS[n.target]
            args = list(n.args)
            if len(args) < 2:
                continue
            x, y = args[0], args[1]
            alpha = n.kwargs.get("alpha", 1)
            B = Builder(gm.graph, n)
            if new_t == "rsub":
                c = _const_like(gm, B, float(y) * alpha, x)
                out = B(aten.sub.Tensor, c, x)
                n.replace_all_uses_with(out)
                gm.graph.erase_node(n)
                continue
            changed = False
            if not isinstance(y, fx.Node) and isinstance(y, (int, float, bool)):
                y = _const_like(gm, B, float(y) * (alpha if n.target in (aten.add.Scalar, aten.sub.Scalar, aten.add.Tensor, aten.sub.Tensor) else 1), x)
                alpha = 1
                changed = True
            if not isinstance(x, fx.Node):
                continue
            if alpha != 1:
                ct = get_constant(gm, y)
                if ct is not None:
                    y = B.const(gm, ct * alpha, "alpha")
                else:
                    y = B(aten.mul.Tensor, y, _const_like(gm, B, float(alpha), y))
                changed = True
            if changed or new_t != n.target:
                out = B(new_t, x, y)
                n.replace_all_uses_with(out)
                gm.graph.erase_node(n)
