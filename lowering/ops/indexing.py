"""Indexing with tensors of indices: gather, advanced indexing (index.Tensor) and index_put,
each one TOSA GATHER or SCATTER on a [1, K, C] view of the input.

The indices (int32 tensors, or constants folded at compile time) are combined into one flat
row index over the indexed dims; the other dims become the C channels GATHER/SCATTER move.
In the INT profile the values stay int8/int16 and share the input's quantization."""

from __future__ import annotations

import numpy as np
import torch
import torch.fx as fx

from ..errors import LoweringError
from ..graph_utils import inverse, val
from .common import cast_to, compare, fp_binary, requantize, select
from .registry import register

aten = torch.ops.aten


def _requant(em, node, src_node, name):
    """``name`` (holding ``src_node``) requantized to ``node``'s output qparams (INT)."""
    if em.is_int:
        qi, qo = em.qin(node, src_node), em.qout(node)
        if qi is not None and qo is not None:
            return requantize(em, name, qi, qo, f"rq_{src_node.name}")
    return name


def _reshape(em, x, shape, suffix):
    """RESHAPE ``x`` to ``shape`` (no-op when it already has it)."""
    if list(em.writer.shapes[x]) == list(shape):
        return x
    out = em.new(suffix, shape, em.writer.dtypes[x])
    em.writer.op("RESHAPE", [x, em.const_shape(suffix + "_shape", shape)], out)
    return out


def _transpose(em, x, perm, suffix):
    """TRANSPOSE ``x`` by ``perm`` (no-op for the identity)."""
    perm = list(perm)
    if perm == list(range(len(perm))):
        return x
    shape = [em.writer.shapes[x][p] for p in perm]
    out = em.new(suffix, shape, em.writer.dtypes[x])
    em.writer.op("TRANSPOSE", [x], out, perms=perm)
    return out


def _movable(em, x, suffix):
    """``x`` in a dtype GATHER/SCATTER move (BOOL travels as INT8), and its own dtype."""
    dt = em.writer.dtypes[x]
    return (cast_to(em, x, "INT8", suffix), dt) if dt == "BOOL" else (x, dt)


def _restore(em, x, dtype, suffix, out=None):
    """``x`` cast back to ``dtype`` (into ``out`` when given)."""
    if em.writer.dtypes[x] == dtype:
        if out is None:
            return x
        em.writer.op("IDENTITY", [x], out)
        return out
    out = out or em.new(suffix, em.writer.shapes[x], dtype)
    em.writer.op("CAST", [x], out)
    return out


def _int32_index(em, node, idx_node, size, suffix):
    """An int32 index tensor with negative entries wrapped (``i + size`` where ``i < 0``)."""
    name = em.tensor(idx_node)
    if em.writer.dtypes[name] != "INT32":
        raise LoweringError(f"index tensor of dtype {em.writer.dtypes[name]} (int32 expected)",
                            node=node.name)
    rank = len(em.writer.shapes[name])
    zero = em.const(suffix + "_zero", [0], "INT32", [1] * max(rank, 1))
    neg = compare(em, "GREATER", zero, name, suffix + "_neg")
    wrapped = fp_binary(em, "ADD", name, em.const(suffix + "_size", [size], "INT32",
                                                   [1] * max(rank, 1)), suffix + "_wrap")
    return select(em, neg, wrapped, name, suffix + "_nonneg")


def _flat_index(em, node, idx_nodes, sizes, bshape):
    """The row index ``sum_k idx_k * stride_k`` over the indexed dims (sizes ``sizes``),
    broadcast to ``bshape`` and reshaped to GATHER/SCATTER's [1, W] (an int32 tensor)."""
    strides = [int(np.prod(sizes[k + 1:])) for k in range(len(sizes))]
    w = int(np.prod(bshape))
    consts = [em.const_value(i) for i in idx_nodes]
    if all(c is not None for c in consts):
        flat = np.zeros(bshape, dtype=np.int64)
        for c, size, stride in zip(consts, sizes, strides, strict=True):
            flat = flat + (c.detach().cpu().numpy().astype(np.int64) % size) * stride
        return em.const("indices", np.broadcast_to(flat, bshape).reshape(1, w).astype(np.int32),
                        "INT32", [1, w])
    acc = None
    for k, (i_node, size, stride) in enumerate(zip(idx_nodes, sizes, strides, strict=True)):
        t = _int32_index(em, node, i_node, size, f"idx{k}")
        t = em.broadcast_to_rank(t, max(len(bshape), 1), f"idx{k}_rank")
        if stride != 1:
            s = em.const(f"idx{k}_stride", [stride], "INT32", [1] * len(em.writer.shapes[t]))
            t = fp_binary(em, "MUL", t, s, f"idx{k}_scaled")
        acc = t if acc is None else fp_binary(em, "ADD", acc, t, f"idx{k}_sum")
    if list(em.writer.shapes[acc]) != list(bshape or [1]):
        mult = [b // a for a, b in zip(em.writer.shapes[acc], bshape or [1], strict=True)]
        tiled = em.new("indices_tiled", list(bshape or [1]), "INT32")
        em.writer.op("TILE", [acc, em.const_shape("indices_multiples", mult)], tiled)
        acc = tiled
    return _reshape(em, acc, [1, w], "indices")


class _Plan:
    """How ``x[indices]`` (PyTorch advanced indexing, ``None`` = a full slice) maps onto
    GATHER: ``x`` permuted to (indexed dims, other dims) is a [1, K, C] table; the result,
    [B..., other dims...] with B the broadcast index shape, is permuted back when the
    indexed dims are adjacent and follow some other dims (PyTorch keeps B in their place)."""

    def __init__(self, em, node, x_node, indices):
        shape = em.shape(x_node)
        rank = len(shape)
        indices = list(indices) + [None] * (rank - len(indices))
        if len(indices) > rank:
            raise LoweringError("more indices than dims", node=node.name)
        self.dims = [d for d, i in enumerate(indices) if i is not None]
        if not self.dims:
            raise LoweringError("no index tensor", node=node.name)
        self.idx_nodes = [indices[d] for d in self.dims]
        for i in self.idx_nodes:
            v = val(i) if isinstance(i, fx.Node) else None
            if v is None or v.dtype == torch.bool:
                raise LoweringError("only integer index tensors are supported", node=node.name)
        self.others = [d for d in range(rank) if d not in self.dims]
        self.shape = shape
        self.sizes = [shape[d] for d in self.dims]
        self.bshape = list(torch.broadcast_shapes(*[tuple(val(i).shape) for i in self.idx_nodes]))
        self.k = int(np.prod(self.sizes))
        self.c = int(np.prod([shape[d] for d in self.others]))
        self.w = int(np.prod(self.bshape))
        adjacent = self.dims == list(range(self.dims[0], self.dims[-1] + 1))
        self.n_pre = len([d for d in self.others if d < self.dims[0]]) if adjacent else 0
        nb, other_shape = len(self.bshape), [shape[d] for d in self.others]
        #: the gathered rows viewed as [B..., other dims...]
        self.rows_shape = self.bshape + other_shape
        #: rows order -> PyTorch result order (B moved behind the leading other dims)
        self.result_perm = list(range(nb, nb + self.n_pre)) + list(range(nb)) + \
            list(range(nb + self.n_pre, nb + len(self.others)))

    def table(self, em, x, suffix="table"):
        """``x`` as the [1, K, C] GATHER/SCATTER table."""
        t = _transpose(em, x, self.dims + self.others, suffix + "_perm")
        return _reshape(em, t, [1, self.k, self.c], suffix)

    def untable(self, em, t, out):
        """The [1, K, C] table ``t`` back into ``x``'s shape, written to ``out``."""
        permuted = [self.shape[d] for d in self.dims + self.others]
        t = _reshape(em, t, permuted, "untable")
        inv = list(inverse(self.dims + self.others))
        if inv == list(range(len(inv))):
            em.writer.op("RESHAPE", [t, em.const_shape("out_shape", self.shape or [1])], out)
        else:
            em.writer.op("TRANSPOSE", [t], out, perms=inv)
        return out

    def indices(self, em, node):
        return _flat_index(em, node, self.idx_nodes, self.sizes, self.bshape)


@register(aten.index.Tensor)
def index_tensor(em, node):
    """``x[i0, i1, ...]`` with integer index tensors (``None`` dims taken whole): one GATHER
    of the flat row index over the indexed dims."""
    x_node, indices = node.args[0], node.args[1]
    plan = _Plan(em, node, x_node, indices)
    x, dt = _movable(em, _requant(em, node, x_node, em.tensor(x_node)), "movable")
    g = em.new("gather", [1, plan.w, plan.c], em.writer.dtypes[x])
    em.writer.op("GATHER", [plan.table(em, x), plan.indices(em, node)], g)
    rows = _reshape(em, g, plan.rows_shape or [1], "rows")
    rows = _transpose(em, rows, plan.result_perm, "result")
    out = em.out(node)
    _restore(em, _reshape(em, rows, em.shape(node) or [1], "shaped"), dt, "cast", out=out)
    em.bind(node, out)


@register(aten.gather.default)
def gather(em, node):
    """``torch.gather(x, dim, index)``: ``out[p] = x[p with p[dim] = index[p]]``, one GATHER
    from the flattened ``x`` at ``index * stride(dim) + (offset of p's other coordinates)``."""
    x_node, dim, idx_node = node.args[:3]
    shape = em.shape(x_node)
    ishape = em.shape(idx_node)
    rank = len(shape)
    dim %= max(rank, 1)
    strides = [int(np.prod(shape[d + 1:])) for d in range(rank)]
    grid = np.indices(ishape, dtype=np.int64) if ishape else np.zeros((0,), np.int64)
    offset = sum((grid[d] * strides[d] for d in range(rank) if d != dim),
                 np.zeros(ishape, dtype=np.int64))
    w, n = int(np.prod(ishape)), int(np.prod(shape))
    c = em.const_value(idx_node)
    if c is not None:
        flat = (c.detach().cpu().numpy().astype(np.int64) % shape[dim]) * strides[dim] + offset
        idx = em.const("indices", flat.reshape(1, w).astype(np.int32), "INT32", [1, w])
    else:
        t = _int32_index(em, node, idx_node, shape[dim], "idx")
        if strides[dim] != 1:
            s = em.const("idx_stride", [strides[dim]], "INT32", [1] * max(len(ishape), 1))
            t = fp_binary(em, "MUL", t, s, "idx_scaled")
        if offset.any():
            off = em.const("idx_offset", offset.astype(np.int32), "INT32", list(ishape) or [1])
            t = fp_binary(em, "ADD", t, off, "idx_flat")
        idx = _reshape(em, t, [1, w], "indices")
    x, dt = _movable(em, _requant(em, node, x_node, em.tensor(x_node)), "movable")
    table = _reshape(em, x, [1, n, 1], "table")
    g = em.new("gather", [1, w, 1], em.writer.dtypes[x])
    em.writer.op("GATHER", [table, idx], g)
    out = em.out(node)
    _restore(em, _reshape(em, g, ishape or [1], "rows"), dt, "cast", out=out)
    em.bind(node, out)


def _broadcast(em, x, shape, suffix):
    """``x`` broadcast to ``shape`` (prepend ones, then TILE the size-1 dims)."""
    x = em.broadcast_to_rank(x, max(len(shape), 1), suffix + "_rank")
    src = em.writer.shapes[x]
    shape = list(shape) or [1]
    if list(src) == shape:
        return x
    if any(s not in (1, t) for s, t in zip(src, shape, strict=True)):
        raise LoweringError(f"values of shape {src} do not broadcast to {shape}")
    out = em.new(suffix, shape, em.writer.dtypes[x])
    mult = [t if s == 1 else 1 for s, t in zip(src, shape, strict=True)]
    em.writer.op("TILE", [x, em.const_shape(suffix + "_multiples", mult)], out)
    return out


def _masked_put(em, node, x, mask_node, mask_dim, values_node):
    """``x[mask] = v`` for a bool ``mask`` over dims ``mask_dim...`` and a one-element ``v``:
    SELECT(mask, v, x)."""
    shape = em.shape(node)
    if int(np.prod(em.shape(values_node))) != 1:
        raise LoweringError("a bool-mask index_put needs a one-element value", node=node.name)
    mshape = em.shape(mask_node)
    full = [1] * mask_dim + list(mshape) + [1] * (len(shape) - mask_dim - len(mshape))
    mask = _reshape(em, em.tensor(mask_node), full, "mask")
    v = _requant(em, node, values_node, em.tensor(values_node))
    v = _reshape(em, v, [1] * len(shape), "value")
    out = em.out(node)
    em.writer.op("SELECT", [mask, v, x], out)
    em.bind(node, out)


@register(aten.index_put.default)
def index_put(em, node):
    """``x[indices] = values`` (``accumulate=False``; accumulation is decomposed into a
    gather and an add first): one SCATTER of the broadcast values into the [1, K, C] table
    of ``x``; indices must not repeat. A single bool mask with one value is a SELECT."""
    x_node, indices, values_node = node.args[:3]
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    if accumulate:
        raise LoweringError("index_put with accumulate=True is not supported", node=node.name)
    _put(em, node, x_node, indices, values_node)


@register(aten.index_copy.default)
def index_copy(em, node):
    """``x.index_copy(dim, index, src)``: ``x[(None,) * dim + (index,)] = src``, one SCATTER."""
    x_node, dim, index, src = node.args[:4]
    _put(em, node, x_node, [None] * (dim % max(len(em.shape(x_node)), 1)) + [index], src)


def _put(em, node, x_node, indices, values_node):
    """Emit ``x[indices] = values`` for ``node`` (see :func:`index_put`)."""
    x = _requant(em, node, x_node, em.tensor(x_node))
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(given) == 1 and val(given[0][1]) is not None and val(given[0][1]).dtype == torch.bool:
        _masked_put(em, node, x, given[0][1], given[0][0], values_node)
        return
    plan = _Plan(em, node, x_node, indices)
    x, dt = _movable(em, x, "movable")
    result_shape = [plan.rows_shape[p] for p in plan.result_perm]
    v = _requant(em, node, values_node, em.tensor(values_node))
    v, _ = _movable(em, v, "values_movable")
    v = _broadcast(em, v, result_shape, "values")
    v = _reshape(em, v, result_shape or [1], "values_shaped")
    v = _transpose(em, v, inverse(plan.result_perm), "values_rows")
    v = _reshape(em, v, [1, plan.w, plan.c], "values_table")
    s = em.new("scatter", [1, plan.k, plan.c], em.writer.dtypes[x])
    em.writer.op("SCATTER", [plan.table(em, x), plan.indices(em, node), v], s)
    out = em.out(node)
    if dt != em.writer.dtypes[s]:
        back = plan.untable(em, s, em.new("untabled", em.shape(node), em.writer.dtypes[s]))
        _restore(em, back, dt, "cast", out=out)
    else:
        plan.untable(em, s, out)
    em.bind(node, out)
