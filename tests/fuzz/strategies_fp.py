"""Floating-point operator builders of the differential fuzzer (FP32, FP16, BF16; TOSA 1.0).

Same calling convention as :mod:`.strategies_int`; results are judged under each operator's
compliance mode (:func:`tosa_verify.compare.compare`).
"""

from __future__ import annotations

import numpy as np
import tosa_serializer as ts

from . import builder as bld
from .builder import Builder, Draw, T

# --------------------------------------------------------------------------- FP builders

_FP = ["FP32", "FP16", "BF16"]


def f_binary(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM"])
    dtype = x.dtype if x is not None else d.choice(_FP)
    if x is None:
        x = b.input(bld.small_shape(d), dtype)
    y = b.input(bld.broadcast_partner(d, x.shape), dtype)
    if op == "MUL":
        return b.op(op, [x, y, b.const(np.array([0], np.int8), "INT8")], x.shape, dtype)
    if op in ("MAXIMUM", "MINIMUM"):
        return b.op(op, [x, y], x.shape, dtype, bld.camel_op(op) + "Attribute", ts.NanPropagationMode.PROPAGATE)
    return b.op(op, [x, y], x.shape, dtype)


def f_unary(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["EXP", "TANH", "SIGMOID", "RECIPROCAL", "RSQRT", "ABS", "FLOOR", "CEIL", "NEGATE",
                   "LOG", "SIN", "COS", "ERF"])
    positive = op in ("RSQRT", "LOG", "RECIPROCAL")
    if x is None:
        x = b.input(bld.small_shape(d), d.choice(_FP), value=None, lo=0.25 if positive else None)
    if op == "NEGATE":
        z = np.array([0.0])
        return b.op(op, [x, b.const(z, x.dtype), b.const(z, x.dtype)], x.shape, x.dtype)
    return b.op(op, [x], x.shape, x.dtype)


def f_conv_matmul(d: Draw, b: Builder, x: T | None) -> T:
    dtype = d.choice(_FP)
    acc = "FP32" if dtype != "FP16" or d.bool() else "FP16"
    if d.bool():
        a = b.input((d.int(1, 2), d.int(1, 4), d.int(1, 8)), dtype)
        n, h, c = a.shape
        y = b.input((n, c, d.int(1, 4)), dtype)
        z = b.const(np.array([0.0]), dtype)
        z2 = b.const(np.array([0.0]), dtype)
        out = "FP16" if dtype == "FP16" and d.bool() else "FP32"
        return b.op("MATMUL", [a, y, z, z2], (n, h, y.shape[2]), out)
    kh, kw = d.int(1, 3), d.int(1, 3)
    ih, pt, pbm, sy, oh = bld.conv_geometry(d, kh, 1)
    iw, pl, pr, sx, ow = bld.conv_geometry(d, kw, 1)
    n, c, oc = d.int(1, 2), d.int(1, 4), d.int(1, 4)
    xin = b.input((n, ih, iw, c), dtype)
    w = b.const(b.values((oc, kh, kw, c), dtype), dtype)
    bias = b.const(b.values((oc,), dtype), dtype)
    z = b.const(np.array([0.0]), dtype)
    z2 = b.const(np.array([0.0]), dtype)
    return b.op("CONV2D", [xin, w, bias, z, z2], (n, oh, ow, oc), dtype, "Conv2dAttribute",
                [pt, pbm, pl, pr], [sy, sx], [1, 1], False, ts.DType.__members__[acc])


def f_misc(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["CAST", "CLAMP", "REDUCE_SUM", "REDUCE_MAX", "AVG_POOL2D", "MAX_POOL2D", "RESCALE_IN"])
    dtype = d.choice(_FP)
    if op == "CAST":
        src = d.choice(["INT8", "INT16", "INT32", "FP32", "FP16", "BF16"])
        x = b.input(bld.small_shape(d), src, value=None, hi=40.0 if src in _FP else None)
        targets = {"INT8": _FP, "INT16": _FP, "INT32": _FP, "FP32": ["FP16", "BF16", "INT8", "INT16", "INT32"],
                   "FP16": ["FP32", "INT8", "INT16", "INT32"], "BF16": ["FP32", "INT8", "INT16", "INT32"]}
        return b.op("CAST", [x], x.shape, d.choice(targets[src]))
    if op == "CLAMP":
        x = b.input(bld.small_shape(d), dtype)
        lo, hi = sorted((float(b.rng.standard_normal()), float(b.rng.standard_normal())))
        return b.op("CLAMP", [x], x.shape, dtype, "ClampAttribute", bld.clamp_bytes(lo, dtype),
                    bld.clamp_bytes(hi, dtype), ts.NanPropagationMode.PROPAGATE)
    if op in ("REDUCE_SUM", "REDUCE_MAX"):
        x = b.input(bld.small_shape(d), dtype)
        axis = d.int(0, len(x.shape) - 1)
        shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape))
        if op == "REDUCE_SUM":
            return b.op(op, [x], shape, dtype, "ReduceSumAttribute", axis)
        return b.op(op, [x], shape, dtype, "ReduceMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)
    if op == "RESCALE_IN":  # quantize: FP32 -> CAST INT8 path of many models
        x = b.input(bld.small_shape(d), "FP32", hi=100.0)
        return b.op("CAST", [x], x.shape, "INT8")
    (kh, kw), ((ih, pt, pbm, sy, oh), (iw, pl, pr, sx, ow)) = bld.pool_geometry(d, None)
    x = b.input((d.int(1, 2), ih, iw, d.int(1, 3)), dtype)
    n, c = x.shape[0], x.shape[3]
    if op == "AVG_POOL2D":
        z = b.const(np.array([0.0]), dtype)
        z2 = b.const(np.array([0.0]), dtype)
        return b.op(op, [x, z, z2], (n, oh, ow, c), dtype, "AvgPool2dAttribute", [kh, kw], [sy, sx],
                    [pt, pbm, pl, pr], ts.DType.FP32)
    return b.op(op, [x], (n, oh, ow, c), dtype, "MaxPool2dAttribute", [kh, kw], [sy, sx],
                [pt, pbm, pl, pr], ts.NanPropagationMode.PROPAGATE)


FP_BUILDERS = {"FP_BINARY": f_binary, "FP_UNARY": f_unary, "FP_CONV/MATMUL": f_conv_matmul, "FP_MISC": f_misc}
