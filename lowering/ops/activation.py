"""Activations: relu/relu6/hardtanh/clamp -> CLAMP; smooth functions -> TABLE in INT
(256 int8 entries / 513 int16 entries) and native or composite FP ops."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..emitter import INT_OF
from ..errors import LoweringError
from .common import clamp, fp_binary, fp_scalar, fp_unary, quantize_value, requantize, rescale
from .registry import register

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed


def _bounds(node):
    t = node.target
    if t in (aten.relu.default, aten.relu_.default):
        return 0.0, None
    if t == aten.relu6.default:
        return 0.0, 6.0
    if t in (aten.hardtanh.default, aten.hardtanh_.default):
        lo = node.args[1] if len(node.args) > 1 else -1.0
        hi = node.args[2] if len(node.args) > 2 else 1.0
        return lo, hi
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    return lo, hi


@register(aten.relu.default, aten.relu_.default, aten.relu6.default, aten.hardtanh.default,
          aten.hardtanh_.default, aten.clamp.default)
def clamp_like(em, node):
    x_node = node.args[0]
    layout = em.layout(node)
    x = em.tensor(x_node, layout)
    lo, hi = _bounds(node)
    if em.is_int:
        qi, qo = em.qin(node, x_node), em.qout(node)
        x = requantize(em, x, qi, qo, "rq")
        qlo = qo.qmin if lo is None else max(qo.qmin, quantize_value(qo, lo))
        qhi = qo.qmax if hi is None else min(qo.qmax, quantize_value(qo, hi))
        if qlo <= qo.qmin and qhi >= qo.qmax:
            # bounds coincide with the integer range: RESCALE saturation already clamps
            em.bind(node, x, layout)
            return
        out = em.out(node, layout)
        clamp(em, x, qlo, qhi, out)
    else:
        if em.dtype(node) == "INT32":
            lo = -(2**31) if lo is None else int(lo)
            hi = 2**31 - 1 if hi is None else int(hi)
        out = em.out(node, layout)
        clamp(em, x, lo, hi, out)
    em.bind(node, out, layout)


# ----------------------------------------------------------------------------- TABLE
def _reference_fn(node):
    """The float function a TABLE must reproduce (the aten op with the node's args)."""
    t = node.target
    extra = list(node.args[1:])
    kwargs = dict(node.kwargs)

    def f(x):
        return t(x, *extra, **kwargs)

    return f


def int8_table(fn, qi, qo) -> np.ndarray:
    """256-entry table: quantize(fn(dequantize(q))) exactly as the fake-quant graph computes it.

    Example:
        >>> from lowering.qparams import QParams
        >>> q = QParams(np.array([0.1]), np.array([0]), torch.int8, -128, 127)
        >>> int(int8_table(torch.relu, q, q)[:130].max())
        1
    """
    q = torch.arange(-128, 128, dtype=torch.int8)
    x = qd.dequantize_per_tensor(q, qi.s, qi.zp, qi.qmin, qi.qmax, torch.int8)
    y = fn(x)
    out = qd.quantize_per_tensor(y, qo.s, qo.zp, qo.qmin, qo.qmax, torch.int8)
    return out.numpy().astype(np.int8)


def int16_table(fn, qi, qo) -> np.ndarray:
    """513-entry int16 table sampled every 128 input steps (TOSA interpolates between)."""
    idx = torch.arange(0, 513, dtype=torch.int64) * 128 - 32768
    idx = idx.clamp(-32768, 32767)
    x = (idx.to(torch.float32) - qi.zp) * qi.s
    y = fn(x.to(torch.float32))
    q = torch.round(y * (1.0 / qo.s)) + qo.zp
    return q.clamp(-32768, 32767).to(torch.int16).numpy()


def table(em, node, fn, x_node, layout, out=None):
    x = em.tensor(x_node, layout)
    qi, qo = em.qin(node, x_node), em.qout(node)
    if qi is None or qo is None:
        raise LoweringError("TABLE op needs quantized input and output", node=node.name)
    out = out or em.out(node, layout)
    if qi.dtype == torch.int8:
        tab = em.const("table", int8_table(fn, qi, qo), "INT8", [256])
        em.writer.op("TABLE", [x, tab], out)
    elif qi.dtype == torch.int16:
        tab = em.const("table", int16_table(fn, qi, qo), "INT16", [513])
        raw = em.new("table_i32", em.writer.shapes[x], "INT32")
        em.writer.op("TABLE", [x, tab], raw)
        rescale(em, raw, INT_OF[qo.dtype], 1.0 / 128.0, 0, qo.zp, "table_rs", out_name=out)
    else:
        raise LoweringError(f"TABLE for {qi.dtype} not supported", node=node.name)
    return out


TABLE_OPS = [
    aten.sigmoid.default, aten.tanh.default, aten.gelu.default, aten.silu.default,
    aten.hardswish.default, aten.hardsigmoid.default, aten.exp.default, aten.log.default,
    aten.sqrt.default, aten.rsqrt.default, aten.reciprocal.default, aten.elu.default,
    aten.leaky_relu.default, aten.erf.default, aten.softplus.default, aten.sin.default,
    aten.cos.default, aten.mish.default, aten.pow.Tensor_Scalar, aten.log1p.default,
    aten.expm1.default, aten.abs.default, aten.neg.default,
]


def _fp_composite(em, node, x, rank):
    """Float implementation of each TABLE op using TOSA FP primitives."""
    t = node.target
    c = lambda v, s: fp_scalar(em, v, rank, s)  # noqa: E731
    native = {aten.sigmoid.default: "SIGMOID", aten.tanh.default: "TANH",
              aten.exp.default: "EXP", aten.log.default: "LOG", aten.rsqrt.default: "RSQRT",
              aten.reciprocal.default: "RECIPROCAL", aten.erf.default: "ERF",
              aten.sin.default: "SIN", aten.cos.default: "COS", aten.abs.default: "ABS",
              aten.neg.default: "NEGATE"}
    if t in native:
        return fp_unary(em, native[t], x, "fp", out=em.out(node, em.layout(node)))
    out = em.out(node, em.layout(node))
    if t == aten.sqrt.default:
        r = fp_unary(em, "RSQRT", x, "rsqrt")
        return fp_unary(em, "RECIPROCAL", r, "fp", out=out)
    if t == aten.gelu.default:
        approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
        if approx == "tanh":
            x3 = fp_binary(em, "MUL", fp_binary(em, "MUL", x, x, "x2"), x, "x3")
            inner = fp_binary(em, "ADD", x, fp_binary(em, "MUL", x3, c(0.044715, "k1"), "kx3"), "in")
            th = fp_unary(em, "TANH", fp_binary(em, "MUL", inner, c(math.sqrt(2 / math.pi), "k2"), "sc"), "th")
        else:
            th = fp_unary(em, "ERF", fp_binary(em, "MUL", x, c(1 / math.sqrt(2), "k1"), "sc"), "erf")
        one = fp_binary(em, "ADD", th, c(1.0, "one"), "p1")
        hx = fp_binary(em, "MUL", x, c(0.5, "half"), "hx")
        return fp_binary(em, "MUL", hx, one, "fp", out=out)
    if t == aten.silu.default:
        return fp_binary(em, "MUL", x, fp_unary(em, "SIGMOID", x, "sig"), "fp", out=out)
    if t in (aten.hardswish.default, aten.hardsigmoid.default):
        p3 = fp_binary(em, "ADD", x, c(3.0, "three"), "p3")
        cl = em.new("cl", em.writer.shapes[p3], "FP32")
        clamp(em, p3, 0.0, 6.0, cl)
        hs = fp_binary(em, "MUL", cl, c(1.0 / 6.0, "sixth"), "hs")
        if t == aten.hardsigmoid.default:
            em.writer.op("IDENTITY", [hs], out)
            return out
        return fp_binary(em, "MUL", x, hs, "fp", out=out)
    if t == aten.leaky_relu.default:
        slope = node.args[1] if len(node.args) > 1 else 0.01
        xs = fp_binary(em, "MUL", x, c(slope, "slope"), "xs")
        return fp_binary(em, "MAXIMUM" if slope <= 1 else "MINIMUM", x, xs, "fp", out=out)
    if t == aten.elu.default:
        alpha = node.args[1] if len(node.args) > 1 else 1.0
        e = fp_binary(em, "SUB", fp_unary(em, "EXP", x, "exp"), c(1.0, "one"), "em1")
        neg = fp_binary(em, "MUL", e, c(alpha, "alpha"), "neg")
        cond = em.new("pos", em.writer.shapes[x], "BOOL")
        em.writer.op("GREATER", [x, c(0.0, "zero")], cond)
        em.writer.op("SELECT", [cond, x, neg], out)
        return out
    if t == aten.softplus.default:
        beta = node.args[1] if len(node.args) > 1 else 1.0
        thr = node.args[2] if len(node.args) > 2 else 20.0
        bx = fp_binary(em, "MUL", x, c(beta, "beta"), "bx")
        sp = fp_unary(em, "LOG", fp_binary(em, "ADD", fp_unary(em, "EXP", bx, "exp"), c(1.0, "one"), "p1"), "log")
        sp = fp_binary(em, "MUL", sp, c(1.0 / beta, "ibeta"), "sp")
        cond = em.new("big", em.writer.shapes[x], "BOOL")
        em.writer.op("GREATER", [bx, c(thr, "thr")], cond)
        em.writer.op("SELECT", [cond, x, sp], out)
        return out
    if t == aten.pow.Tensor_Scalar:
        e = float(node.args[1])
        em.writer.op("POW", [x, c(e, "exp")], out)
        return out
    if t == aten.log1p.default:
        return fp_unary(em, "LOG", fp_binary(em, "ADD", x, c(1.0, "one"), "p1"), "fp", out=out)
    if t == aten.expm1.default:
        return fp_binary(em, "SUB", fp_unary(em, "EXP", x, "exp"), c(1.0, "one"), "fp", out=out)
    if t == aten.mish.default:
        sp = fp_unary(em, "LOG", fp_binary(em, "ADD", fp_unary(em, "EXP", x, "exp"), c(1.0, "one"), "p1"), "sp")
        return fp_binary(em, "MUL", x, fp_unary(em, "TANH", sp, "th"), "fp", out=out)
    raise LoweringError("no FP lowering", node=node.name)


@register(*TABLE_OPS)
def table_op(em, node):
    x_node = node.args[0]
    layout = em.layout(node)
    if em.is_int:
        out = table(em, node, _reference_fn(node), x_node, layout)
    else:
        x = em.tensor(x_node, layout)
        if em.dtype(node) == "INT32" and node.target in (aten.abs.default, aten.neg.default):
            out = em.out(node, layout)
            if node.target == aten.abs.default:
                em.writer.op("ABS", [x], out)
            else:
                z = em.const("zp", [0], "INT32", [1])
                em.writer.op("NEGATE", [x, z, z], out)
        else:
            out = _fp_composite(em, node, x, len(em.shape(node)))
    em.bind(node, out, layout)
