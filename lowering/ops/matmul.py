"""matmul / bmm / mm between two activations -> MATMUL (+ RESCALE in INT)."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import LoweringError
from ..serialize import INT_OF
from .common import rescale
from .registry import register

aten = torch.ops.aten


def _to3d(em, name, shape, batch, suffix):
    """Reshape [..., R, C] to [prod(batch), R, C], tiling broadcast batch dims."""
    r, c = shape[-2], shape[-1]
    lead = list(shape[:-2])
    lead = [1] * (len(batch) - len(lead)) + lead
    if lead != list(batch):
        full = lead + [r, c]
        name = em.broadcast_to_rank(name, len(full), suffix + "_rk")
        mult = [b if ld == 1 else 1 for b, ld in zip(batch, lead, strict=True)] + [1, 1]
        tiled = em.new(suffix + "_tile", list(batch) + [r, c], em.writer.dtypes[name])
        em.writer.op("TILE", [name, em.const_shape(suffix + "_mult", mult)], tiled)
        name = tiled
    n = int(np.prod(batch)) if batch else 1
    out = em.new(suffix, [n, r, c], em.writer.dtypes[name])
    em.writer.op("RESHAPE", [name, em.const_shape(suffix + "_shape", [n, r, c])], out)
    return out


@register(aten.matmul.default, aten.bmm.default, aten.mm.default)
def matmul(em, node):
    a, b = node.args[0], node.args[1]
    sa, sb = em.shape(a), em.shape(b)
    if len(sa) < 2 or len(sb) < 2:
        raise LoweringError("matmul with 1-D operands not supported", node=node.name)
    batch = list(torch.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])))
    na = _to3d(em, em.tensor(a), sa, batch, "a3")
    nb = _to3d(em, em.tensor(b), sb, batch, "b3")
    n = int(np.prod(batch)) if batch else 1
    M, N = sa[-2], sb[-1]
    if em.is_int:
        qa, qb, qo = em.qin(node, a), em.qin(node, b), em.qout(node)
        dt = INT_OF[qa.dtype]
        acc_dt = "INT48" if dt == "INT16" else "INT32"
        za = em.const("azp", [qa.zp], dt, [1])
        zb = em.const("bzp", [qb.zp], INT_OF[qb.dtype], [1])
        acc = em.new("acc", [n, M, N], acc_dt)
        em.writer.op("MATMUL", [na, nb, za, zb], acc)
        res = rescale(em, acc, INT_OF[qo.dtype], qa.s * qb.s / qo.s, 0, qo.zp, "rs")
    else:
        z = em.const("zp", [0.0], "FP32", [1])
        res = em.new("mm", [n, M, N], "FP32")
        em.writer.op("MATMUL", [na, nb, z, z], res)
    out = em.out(node)
    em.writer.op("RESHAPE", [res, em.const_shape("out_shape", em.shape(node))], out)
    em.bind(node, out)
