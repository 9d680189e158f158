"""Data movement: view/reshape/flatten/squeeze/unsqueeze, permute/transpose, cat/stack,
slice/select, pad, expand/repeat, index_select/embedding (GATHER), flip, upsample."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import LoweringError
from ..graph_utils import NHWC, inverse, permute_shape
from .common import requantize
from .registry import register

aten = torch.ops.aten


def _maybe_requant(em, node, x_node, name):
    if em.is_int:
        qi, qo = em.qin(node, x_node), em.qout(node)
        if qi is not None and qo is not None:
            return requantize(em, name, qi, qo, "rq")
    return name


@register(aten.view.default, aten.reshape.default, aten._unsafe_view.default,
          aten.flatten.using_ints, aten.unflatten.int, aten.squeeze.dim, aten.squeeze.dims,
          aten.squeeze.default, aten.unsqueeze.default, aten.view_copy.default)
def reshape(em, node):
    x_node = node.args[0]
    x = _maybe_requant(em, node, x_node, em.tensor(x_node))
    out = em.out(node)
    em.writer.op("RESHAPE", [x, em.const_shape("shape", em.shape(node))], out)
    em.bind(node, out)


@register(aten.permute.default, aten.transpose.int, aten.t.default, aten.numpy_T.default)
def permute(em, node):
    x_node = node.args[0]
    rank = len(em.shape(x_node))
    if node.target == aten.permute.default:
        p = [d % rank for d in node.args[1]]
    elif node.target == aten.transpose.int:
        a, b = node.args[1] % rank, node.args[2] % rank
        p = list(range(rank))
        p[a], p[b] = p[b], p[a]
    else:
        p = list(reversed(range(rank)))
    # compose with whatever physical layout the input already has
    avail = em.has_layouts(x_node)
    src_layout = None
    for k in avail:
        if k is None or (isinstance(k, tuple) and k and k[0] != "rank"):
            src_layout = k
            break
    x = em.tensor(x_node, src_layout)
    inv = inverse(src_layout or tuple(range(rank)))
    perm = [inv[d] for d in p]
    x = _maybe_requant(em, node, x_node, x)
    out = em.out(node)
    if perm == list(range(rank)):
        em.writer.op("IDENTITY", [x], out)
    else:
        em.writer.op("TRANSPOSE", [x], out, perms=perm)
    em.bind(node, out)


@register(aten.cat.default)
def cat(em, node):
    # (a tensor with no elements adds nothing, and TOSA has no zero-sized tensor to hold it)
    tensors = [t for t in node.args[0] if 0 not in em.shape(t)]
    dim = node.args[1] if len(node.args) > 1 else 0
    rank = len(em.shape(node))
    dim %= rank
    layout = em.layout(node)
    names = []
    for i, t in enumerate(tensors):
        n = em.tensor(t, layout)
        if em.is_int and em.qout(node) is not None:  # plain integer tensors concatenate as is
            n = requantize(em, n, em.qin(node, t), em.qout(node), f"rq{i}")
        names.append(n)
    axis = inverse(layout)[dim] if layout else dim
    out = em.out(node, layout)
    em.writer.op("CONCAT", names, out, axis=axis)
    em.bind(node, out, layout)


@register(aten.stack.default)
def stack(em, node):
    tensors = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else 0
    rank = len(em.shape(node))
    dim %= rank
    names = []
    for i, t in enumerate(tensors):
        n = em.tensor(t)
        if em.is_int and em.qout(node) is not None:
            n = requantize(em, n, em.qin(node, t), em.qout(node), f"rq{i}")
        s = list(em.shape(t))
        s.insert(dim, 1)
        r = em.new(f"u{i}", s, em.writer.dtypes[n])
        em.writer.op("RESHAPE", [n, em.const_shape(f"u{i}_shape", s)], r)
        names.append(r)
    out = em.out(node)
    em.writer.op("CONCAT", names, out, axis=dim)
    em.bind(node, out)


def _slice(em, x, shape, dim, start, end, suffix, out=None):
    size = list(shape)
    size[dim] = end - start
    begin = [0] * len(shape)
    begin[dim] = start
    out = out or em.new(suffix, size, em.writer.dtypes[x])
    em.writer.op("SLICE", [x, em.const_shape(suffix + "_start", begin),
                           em.const_shape(suffix + "_size", size)], out)
    return out


@register(aten.slice.Tensor, aten.narrow.default)
def slice_(em, node):
    x_node = node.args[0]
    shape = em.shape(x_node)
    rank = len(shape)
    dim = (node.args[1] if len(node.args) > 1 else 0) % rank
    if node.target == aten.narrow.default:
        start, length = node.args[2], node.args[3]
        start %= shape[dim]
        end, step = start + length, 1
    else:
        start = node.args[2] if len(node.args) > 2 and node.args[2] is not None else 0
        end = node.args[3] if len(node.args) > 3 and node.args[3] is not None else shape[dim]
        step = node.args[4] if len(node.args) > 4 else 1
        start = max(0, start + shape[dim]) if start < 0 else min(start, shape[dim])
        end = max(0, end + shape[dim]) if end < 0 else min(end, shape[dim])
    layout = em.layout(node)
    x = _maybe_requant(em, node, x_node, em.tensor(x_node, layout))
    pshape = permute_shape(shape, layout)
    pdim = inverse(layout)[dim] if layout else dim
    if step == 1:
        o = _slice(em, x, pshape, pdim, start, end, "slice", out=em.out(node, layout))
        em.bind(node, o, layout)
        return
    # strided slice: slice, reshape to [.., n, step, ..], take index 0
    n = len(range(start, end, step))
    span = _slice(em, x, pshape, pdim, start, start + n * step if start + n * step <= pshape[pdim]
                  else end, "span")
    sshape = list(em.writer.shapes[span])
    if sshape[pdim] != n * step:
        pad = n * step - sshape[pdim]
        padded = list(sshape)
        padded[pdim] += pad
        pads = [0] * (2 * len(sshape))
        pads[2 * pdim + 1] = pad
        pc = em.const("padval", [0], em.writer.dtypes[span], [1])
        sp = em.new("spanpad", padded, em.writer.dtypes[span])
        em.writer.op("PAD", [span, em.const_shape("pads", pads), pc], sp)
        span, sshape = sp, padded
    r = sshape[:pdim] + [n, step] + sshape[pdim + 1:]
    rs = em.new("split", r, em.writer.dtypes[span])
    em.writer.op("RESHAPE", [span, em.const_shape("split_shape", r)], rs)
    first = _slice(em, rs, r, pdim + 1, 0, 1, "first")
    out = em.out(node, layout)
    em.writer.op("RESHAPE", [first, em.const_shape("out_shape", permute_shape(em.shape(node), layout))], out)
    em.bind(node, out, layout)


@register(aten.select.int)
def select(em, node):
    x_node, dim, idx = node.args[:3]
    shape = em.shape(x_node)
    dim %= len(shape)
    idx %= shape[dim]
    x = _maybe_requant(em, node, x_node, em.tensor(x_node))
    s = _slice(em, x, shape, dim, idx, idx + 1, "slice")
    out = em.out(node)
    em.writer.op("RESHAPE", [s, em.const_shape("shape", em.shape(node))], out)
    em.bind(node, out)


@register(aten.constant_pad_nd.default, aten.pad.default)
def pad(em, node):
    x_node, pads = node.args[0], list(node.args[1])
    mode = node.args[2] if node.target == aten.pad.default and len(node.args) > 2 else "constant"
    if mode != "constant":
        raise LoweringError(f"pad mode {mode!r} not supported", node=node.name)
    value = node.args[2] if node.target == aten.constant_pad_nd.default and len(node.args) > 2 else 0.0
    if node.target == aten.pad.default:
        value = node.args[3] if len(node.args) > 3 and node.args[3] is not None else 0.0
    if any(p < 0 for p in pads):
        raise LoweringError("negative padding not supported", node=node.name)
    shape = em.shape(x_node)
    rank = len(shape)
    per_dim = [[0, 0] for _ in range(rank)]
    for i in range(len(pads) // 2):
        per_dim[rank - 1 - i] = [pads[2 * i], pads[2 * i + 1]]
    layout = em.layout(node)
    if layout:
        per_dim = [per_dim[p] for p in layout]
    x = _maybe_requant(em, node, x_node, em.tensor(x_node, layout))
    if em.is_int:
        qo = em.qout(node)
        from .common import quantize_value

        pv = quantize_value(qo, value)
    else:
        pv = value if em.writer.dtypes[x] == "FP32" else int(value)
    pc = em.const("padval", [pv], em.writer.dtypes[x], [1])
    out = em.out(node, layout)
    em.writer.op("PAD", [x, em.const_shape("pads", [v for p in per_dim for v in p]), pc], out)
    em.bind(node, out, layout)


def _tile(em, node, x, in_shape, mult):
    out = em.out(node)
    em.writer.op("TILE", [x, em.const_shape("multiples", mult)], out)
    em.bind(node, out)


@register(aten.expand.default, aten.expand_copy.default)
def expand(em, node):
    x_node = node.args[0]
    target = em.shape(node)
    x = _maybe_requant(em, node, x_node, em.tensor(x_node))
    x = em.broadcast_to_rank(x, len(target), "rank")
    src = em.writer.shapes[x]
    mult = [t if s == 1 else 1 for s, t in zip(src, target, strict=True)]
    _tile(em, node, x, src, mult)


@register(aten.repeat.default)
def repeat(em, node):
    x_node, reps = node.args[0], list(node.args[1])
    x = _maybe_requant(em, node, x_node, em.tensor(x_node))
    x = em.broadcast_to_rank(x, len(reps), "rank")
    _tile(em, node, x, em.writer.shapes[x], reps)


def _gather_rows(em, node, table: str, V: int, D: int, idx: str, n_idx: int, out_shape):
    """out[i, :] = table[idx[i], :] via GATHER on [1, V, D] x [1, n]."""
    t3 = em.new("values", [1, V, D], em.writer.dtypes[table])
    em.writer.op("RESHAPE", [table, em.const_shape("values_shape", [1, V, D])], t3)
    i2 = em.new("indices", [1, n_idx], "INT32")
    em.writer.op("RESHAPE", [idx, em.const_shape("indices_shape", [1, n_idx])], i2)
    g = em.new("gather", [1, n_idx, D], em.writer.dtypes[table])
    em.writer.op("GATHER", [t3, i2], g)
    return g


def _indices(em, node, idx_node):
    t = em.const_value(idx_node)
    if t is not None:
        arr = t.detach().cpu().numpy().astype(np.int32).reshape(-1)
        return em.const("idx", arr, "INT32", [arr.size]), arr.size
    name = em.tensor(idx_node)
    if em.writer.dtypes[name] != "INT32":
        raise LoweringError("indices must be int32/int64", node=node.name)
    return name, int(np.prod(em.shape(idx_node)))


@register(aten.embedding.default)
def embedding(em, node):
    w_node, idx_node = node.args[0], node.args[1]
    V, D = em.shape(w_node)
    w = em.tensor(w_node)
    idx, n = _indices(em, node, idx_node)
    g = _gather_rows(em, node, w, V, D, idx, n, em.shape(node))
    g = _maybe_requant(em, node, w_node, g)
    out = em.out(node)
    em.writer.op("RESHAPE", [g, em.const_shape("out_shape", em.shape(node))], out)
    em.bind(node, out)


@register(aten.index_select.default)
def index_select(em, node):
    x_node, dim, idx_node = node.args[:3]
    shape = em.shape(x_node)
    rank = len(shape)
    dim %= rank
    x = _maybe_requant(em, node, x_node, em.tensor(x_node))
    perm = [dim] + [i for i in range(rank) if i != dim]
    moved_shape = [shape[i] for i in perm]
    if perm != list(range(rank)):
        xm = em.new("moved", moved_shape, em.writer.dtypes[x])
        em.writer.op("TRANSPOSE", [x], xm, perms=perm)
    else:
        xm = x
    V = shape[dim]
    D = int(np.prod(moved_shape[1:])) if rank > 1 else 1
    idx, n = _indices(em, node, idx_node)
    g = _gather_rows(em, node, xm, V, D, idx, n, None)
    gs = [n] + moved_shape[1:]
    gr = em.new("gathered", gs, em.writer.dtypes[g])
    em.writer.op("RESHAPE", [g, em.const_shape("gathered_shape", gs)], gr)
    out = em.out(node)
    if perm != list(range(rank)):
        em.writer.op("TRANSPOSE", [gr], out, perms=list(inverse(perm)))
    else:
        em.writer.op("IDENTITY", [gr], out)
    em.bind(node, out)


@register(aten.flip.default)
def flip(em, node):
    x_node, dims = node.args[0], node.args[1]
    rank = len(em.shape(x_node))
    x = _maybe_requant(em, node, x_node, em.tensor(x_node))
    dims = sorted({d % rank for d in dims})
    shape = list(em.shape(node))
    dt = em.writer.dtypes[x]
    for i, d in enumerate(dims):
        nxt = em.out(node) if i == len(dims) - 1 else em.new(f"rev{d}", shape, dt)
        if rank == 4 and d in (1, 2):
            em.writer.op("REVERSE", [x], nxt, axis=d)
        else:
            # Ethos-U55/U65 reverse only the H or W axis of NHWC: view the tensor as
            # [1, before, n, after] and reverse W (the same permutation of elements).
            hw = [1, int(np.prod(shape[:d])), shape[d], int(np.prod(shape[d + 1:]))]
            x4 = em.new(f"rev{d}_in", hw, dt)
            em.writer.op("RESHAPE", [x, em.const_shape(f"rev{d}_in_shape", hw)], x4)
            r4 = em.new(f"rev{d}_nhwc", hw, dt)
            em.writer.op("REVERSE", [x4], r4, axis=2)
            em.writer.op("RESHAPE", [r4, em.const_shape(f"rev{d}_out_shape", shape or [1])], nxt)
        x = nxt
    em.bind(node, x)


def _lowest_terms(scale: tuple[int, int], offset: int) -> tuple[tuple[int, int], int]:
    """RESIZE's ``scale_n / scale_d`` and ``offset`` (in 1/scale_n steps) divided by their
    common factor: the same sampling positions with the smallest integer weights.

    Example:
        >>> _lowest_terms((24, 12), -6)
        ((4, 2), -1)
    """
    g = math.gcd(scale[0], scale[1], offset)
    return (scale[0] // g, scale[1] // g), offset // g


@register(aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default,
          aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default)
def upsample(em, node):
    x_node = node.args[0]
    bilinear = "bilinear" in str(node.target)
    align = bool(node.args[2]) if bilinear and len(node.args) > 2 else False
    N, C, IH, IW = em.shape(x_node)
    _, _, OH, OW = em.shape(node)
    x = em.tensor(x_node, NHWC)
    if align:
        sy = (2 * (OH - 1), 2 * (IH - 1)) if OH > 1 else (1, 1)
        sx = (2 * (OW - 1), 2 * (IW - 1)) if OW > 1 else (1, 1)
        off_y = off_x = 0
    elif not bilinear and OH % IH == 0 and OW % IW == 0:
        # Integer upscale u: half-pixel centres, scale 2u/2, offset 1-u (border u-1).
        # TOSA's round-half-up then gives floor((2y+1)/(2u)) = floor(y/u), PyTorch's
        # nearest; this is the one form Vela 5.2 maps onto Ethos-U55/U65 upscaling
        # (an equivalent scale 2*OH/2*IH is refused there).
        uy, ux = OH // IH, OW // IW
        sy, sx = (2 * uy, 2), (2 * ux, 2)
        off_y, off_x = 1 - uy, 1 - ux
    else:
        sy, sx = (2 * OH, 2 * IH), (2 * OW, 2 * IW)
        if bilinear:
            off_y, off_x = IH - OH, IW - OW
        else:  # TOSA rounds to nearest; shift by half a step so it floors like PyTorch
            off_y, off_x = -OH, -OW
    if bilinear:  # lowest terms: the weights' denominator k below is then 4 at a 2x upscale of
        # any size (a 6 -> 12 upscale gave 24/12: k = 576, no exact RESCALE, ties rounded off)
        sy, off_y = _lowest_terms(sy, off_y)
        sx, off_x = _lowest_terms(sx, off_x)
    border_y = (OH - 1) * sy[1] - (IH - 1) * sy[0] + off_y
    border_x = (OW - 1) * sx[1] - (IW - 1) * sx[0] + off_x
    scale = em.const_shape("scale", [sy[0], sy[1], sx[0], sx[1]])
    offset = em.const_shape("offset", [off_y, off_x])
    border = em.const_shape("border", [border_y, border_x])
    mode = "BILINEAR" if bilinear else "NEAREST"
    dt = em.writer.dtypes[x]
    if em.is_int and bilinear:
        acc_dt = "INT48" if dt == "INT16" else "INT32"
        acc = em.new("resize", [N, OH, OW, C], acc_dt)
        em.writer.op("RESIZE", [x, scale, offset, border], acc, mode=mode)
        from .common import int48_to_int32, rescale, rescale_ties_even

        qi, qo = em.qin(node, x_node), em.qout(node)
        k = sy[0] * sx[0]
        if qi.zp:
            off = em.const("zp_off", [-qi.zp * k], acc_dt, [1, 1, 1, 1])
            acc2 = em.new("resize_nozp", [N, OH, OW, C], acc_dt)
            em.writer.op("ADD", [acc, off], acc2)
            acc = acc2
        out = em.out(node, NHWC)
        if acc_dt == "INT48" and k < 1 << 16:  # |int16 x weights| < 2**31: INT32 holds it
            acc, acc_dt = int48_to_int32(em, acc, 0, "acc32"), "INT32"
        if acc_dt == "INT32":  # dyadic weights meet exact .5 ties: round them to even as torch
            rescale_ties_even(em, acc, dt, qi.s / (qo.s * k), qo.zp, "rs", out_name=out)
        else:
            rescale(em, acc, dt, qi.s / (qo.s * k), 0, qo.zp, "rs", out_name=out)
    else:
        out = em.out(node, NHWC)
        em.writer.op("RESIZE", [x, scale, offset, border], out, mode=mode)
    em.bind(node, out, NHWC)
