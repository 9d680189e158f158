"""max_pool2d / avg_pool2d / adaptive_avg_pool2d (and spatial mean) -> MAX_POOL2D / AVG_POOL2D."""

from __future__ import annotations

import torch

from ..emitter import INT_OF
from ..errors import LoweringError
from ..passes.layout import NHWC
from .common import requantize
from .conv import _crop, _pair, exact_pads
from .registry import register

aten = torch.ops.aten


def _zps(em, node, x_node):
    if em.is_int:
        qi = em.qin(node, x_node)
        dt = INT_OF[qi.dtype]
        return em.const("izp", [qi.zp], dt, [1]), em.const("ozp", [qi.zp], dt, [1]), "INT32"
    z = em.const("zp", [0.0], "FP32", [1])
    return z, z, "FP32"


def avg_pool(em, node, x_node, x, in_shape, kernel, stride, pads):
    izp, ozp, acc = _zps(em, node, x_node)
    out_shape = em.shape(node, NHWC) if len(em.shape(node)) == 4 else None
    qo, qi = em.qout(node), em.qin(node, x_node)
    same_q = (not em.is_int) or (qo.s == qi.s and qo.zp == qi.zp)
    out = em.out(node, NHWC) if (out_shape and same_q) else em.new(
        "pool", [in_shape[0], (in_shape[1] + pads[0] + pads[1] - kernel[0]) // stride[0] + 1,
                 (in_shape[2] + pads[2] + pads[3] - kernel[1]) // stride[1] + 1, in_shape[3]],
        em.writer.dtypes[x])
    em.writer.op("AVG_POOL2D", [x, izp, ozp], out, kernel=kernel, stride=stride, pad=pads,
                 acc_type=acc)
    if not same_q:
        target = em.out(node, NHWC) if out_shape else None
        out = requantize(em, out, qi, qo, "rq", out_name=target)
    return out


def _window_args(node, count: int):
    """The call's ``count`` positional args (missing ones None), and its kernel, stride and
    padding as [h, w] (stride defaults to the kernel, padding to 0)."""
    a = list(node.args) + [None] * (count - len(node.args))
    kernel = _pair(a[1])
    stride = _pair(a[2]) if a[2] else kernel
    padding = _pair(a[3] if a[3] is not None else 0)
    return a, kernel, stride, padding


def _fit_windows(em, node, x, in_shape, kernel, stride, pads, ceil_mode: bool, what: str):
    """Pads that make the windows tile the input exactly (TOSA's output-size rule), cropping
    the rows/columns PyTorch's floor mode leaves out; returns (x, its shape, [t, b, l, r])."""
    t, b, rh = exact_pads(in_shape[1], kernel[0], stride[0], 1, pads[0], pads[1])
    l_, r, rw = exact_pads(in_shape[2], kernel[1], stride[1], 1, pads[2], pads[3])
    if ceil_mode and (rh or rw):
        raise LoweringError(f"ceil_mode {what} with uneven windows not supported", node=node.name)
    if rh or rw:
        x = _crop(em, x, in_shape, rh, rw)
        in_shape = em.writer.shapes[x]
    return x, in_shape, [t, b, l_, r]


@register(aten.max_pool2d.default)
def max_pool2d(em, node):
    a, kernel, stride, padding = _window_args(node, 6)
    x_node = a[0]
    dilation = _pair(a[4] if a[4] is not None else 1)
    if dilation != [1, 1]:
        raise LoweringError("dilated max_pool2d not supported", node=node.name)
    in_shape = em.shape(x_node, NHWC)
    x, _, pads = _fit_windows(em, node, em.tensor(x_node, NHWC), in_shape, kernel, stride,
                              [padding[0], padding[0], padding[1], padding[1]], bool(a[5]), "max_pool2d")
    out = em.out(node, NHWC)
    em.writer.op("MAX_POOL2D", [x], out, kernel=kernel, stride=stride, pad=pads, nan_mode="PROPAGATE")
    em.bind(node, out, NHWC)


@register(aten.avg_pool2d.default)
def avg_pool2d(em, node):
    a, kernel, stride, padding = _window_args(node, 7)
    x_node = a[0]
    ceil_mode = bool(a[4])
    count_include_pad = True if a[5] is None else bool(a[5])
    if a[6] is not None:
        raise LoweringError("avg_pool2d divisor_override not supported", node=node.name)
    in_shape = em.shape(x_node, NHWC)
    x = em.tensor(x_node, NHWC)
    pads = [padding[0], padding[0], padding[1], padding[1]]
    if any(pads) and count_include_pad:
        padded = [in_shape[0], in_shape[1] + 2 * padding[0], in_shape[2] + 2 * padding[1], in_shape[3]]
        pv = em.qin(node, x_node).zp if em.is_int else 0.0
        pc = em.const("padval", [pv], em.writer.dtypes[x], [1])
        xp = em.new("padded", padded, em.writer.dtypes[x])
        em.writer.op("PAD", [x, em.const_shape("pads", [0, 0, padding[0], padding[0], padding[1],
                                                        padding[1], 0, 0]), pc], xp)
        x, in_shape, pads = xp, padded, [0, 0, 0, 0]
    x, in_shape, pads = _fit_windows(em, node, x, in_shape, kernel, stride, pads, ceil_mode, "avg_pool2d")
    out = avg_pool(em, node, x_node, x, in_shape, kernel, stride, pads)
    em.bind(node, out, NHWC)


@register(aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(em, node):
    x_node = node.args[0]
    oh, ow = _pair(node.args[1])
    in_shape = em.shape(x_node, NHWC)
    H, W = in_shape[1], in_shape[2]
    oh, ow = oh or H, ow or W
    if H % oh or W % ow:
        raise LoweringError(f"adaptive_avg_pool2d {H}x{W}->{oh}x{ow} needs uneven windows",
                            node=node.name)
    k = [H // oh, W // ow]
    x = em.tensor(x_node, NHWC)
    out = avg_pool(em, node, x_node, x, in_shape, k, k, [0, 0, 0, 0])
    em.bind(node, out, NHWC)
