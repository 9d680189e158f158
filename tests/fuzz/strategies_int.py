"""INT-profile operator builders of the differential fuzzer (TOSA 1.0).

Each builder takes ``(draw, builder, x)`` and appends one operator, returning its output tensor;
``x`` is the tensor to consume (a chain in :func:`fuzz.strategies.build_multi`) or None (make a
fresh input). Graphs are built to be valid (shapes, zero points, shifts and ranges follow the
spec's ERROR_IF and REQUIRE rules) most of the time; a small share deliberately hits REQUIRE
limits, where both executors must report "unpredictable".
"""

from __future__ import annotations

import numpy as np
import tosa_serializer as ts

from .builder import (
    INT_BITS,
    Builder,
    Draw,
    T,
    broadcast_partner,
    camel_op,
    clamp_bytes,
    conv_geometry,
    int_range,
    nhwc_shape,
    pool_geometry,
    small_shape,
)

# --------------------------------------------------------------------------- INT operator builders
# Each takes (draw, builder, x) and returns the output tensor; x may be None (make an input).


def reshape_to(b: Builder, x: T, shape: tuple[int, ...]) -> T:
    return b.op("RESHAPE", [x, b.shape_const(shape)], shape, x.dtype)


def _as_rank(d: Draw, b: Builder, x: T, rank: int, dtypes: tuple[str, ...]) -> T:
    """Adapt ``x`` for an op that needs ``rank`` and one of ``dtypes`` (RESCALE, RESHAPE)."""
    if x.dtype not in dtypes:
        x = b_rescale(d, b, x, out_dtype=d.choice([t for t in dtypes if t in ("INT8", "INT16", "INT32")]))
    if len(x.shape) == rank:
        return x
    size = int(np.prod(x.shape))
    last = x.shape[-1] if size % x.shape[-1] == 0 else 1
    rest = size // last
    divisors = [k for k in range(1, rest + 1) if rest % k == 0]
    h = d.choice(divisors)
    if rank == 4:
        return reshape_to(b, x, (1, h, rest // h, last))
    if rank == 3:
        return reshape_to(b, x, (1, rest, last))
    return reshape_to(b, x, (size,))


def b_add_sub(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["ADD", "SUB"])
    if x is None or x.dtype != "INT32":
        x = b.input(small_shape(d), "INT32", lo=-(1 << 20), hi=1 << 20) if x is None else _to_int32(d, b, x)
    y = b.input(broadcast_partner(d, x.shape), "INT32", lo=-(1 << 20), hi=1 << 20)
    a, c = (x, y) if d.bool() else (y, x)
    return b.op(op, [a, c], x.shape, "INT32")


def _to_int32(d: Draw, b: Builder, x: T) -> T:
    if x.dtype == "INT32":
        return x
    if x.dtype in ("INT8", "INT16", "BOOL"):
        return b.op("CAST", [x], x.shape, "INT32")
    return b_rescale(d, b, x, out_dtype="INT32")


def b_mul(d: Draw, b: Builder, x: T | None) -> T:
    dtype = d.choice(["INT8", "INT16", "INT32"]) if x is None else x.dtype
    if dtype not in ("INT8", "INT16", "INT32"):
        x, dtype = _to_int32(d, b, x), "INT32"
    if x is None:
        x = b.input(small_shape(d), dtype, lo=-(1 << 15) if dtype == "INT32" else None,
                    hi=(1 << 15) if dtype == "INT32" else None)
    y = b.input(broadcast_partner(d, x.shape), dtype, lo=-(1 << 14) if dtype == "INT32" else None,
                hi=(1 << 14) if dtype == "INT32" else None)
    shift = d.int(0, 31) if dtype == "INT32" and d.chance(70) else 0
    s = b.const(np.array([shift], np.int8), "INT8")
    return b.op("MUL", [x, y, s], x.shape, "INT32")


def b_rescale(d: Draw, b: Builder, x: T | None, out_dtype: str | None = None) -> T:
    in_dtype = x.dtype if x is not None else d.choice(["INT8", "INT16", "INT32", "INT48"])
    if in_dtype not in ("INT8", "INT16", "INT32", "INT48"):
        x = _to_int32(d, b, x)
        in_dtype = "INT32"
    out_dtype = out_dtype or d.choice(["INT8", "INT16", "INT32"])
    in_unsigned = in_dtype in ("INT8", "INT16") and out_dtype != "INT32" and d.chance(20)
    out_unsigned = out_dtype in ("INT8", "INT16") and in_dtype in ("INT8", "INT16") and not in_unsigned and d.chance(20)
    scale32 = in_dtype != "INT48" and d.chance(75)
    rounding = d.choice(["SINGLE_ROUND", "DOUBLE_ROUND"]) if scale32 else "SINGLE_ROUND"
    if x is None:
        shape = small_shape(d)
        if in_dtype == "INT32":
            x = b.input(shape, in_dtype, lo=-(1 << 24), hi=1 << 24)
        elif in_dtype == "INT48":
            x = b.input(shape, in_dtype, lo=-(1 << 30), hi=1 << 30)
        else:
            x = b.input(shape, in_dtype)
    per_channel = len(x.shape) >= 1 and d.chance(40)
    nc = x.shape[-1] if per_channel else 1

    def zp(dtype: str, unsigned: bool) -> int:
        if dtype == "INT8":
            if not d.chance(70):
                return 0
            return d.int(0, 255) if unsigned else d.int(-128, 127)
        if dtype == "INT16" and unsigned:
            return d.choice([0, 32768])
        return 0

    in_zp, out_zp = zp(in_dtype, in_unsigned), zp(out_dtype, out_unsigned)
    # magnitude of (value - input_zp): keep 2**(shift-1) above it unless probing the REQUIRE
    span = {"INT8": 1 << 9, "INT16": 1 << 17, "INT32": 1 << 25, "INT48": 1 << 31}[in_dtype]
    min_shift = max(2, span.bit_length() + 1) if not d.chance(5) else 2
    mults, shifts = [], []
    for _ in range(nc):
        if scale32:
            mults.append(d.int(0, (1 << 31) - 1) if d.chance(30) else d.int(1 << 30, (1 << 31) - 1))
        else:
            mults.append(d.int(0, (1 << 15) - 1) if d.chance(30) else d.int(1 << 14, (1 << 15) - 1))
        shifts.append(d.int(min(min_shift, 62), 62 if scale32 else 62))
    mult_t = b.const(np.array(mults), "INT32" if scale32 else "INT16")
    shift_t = b.const(np.array(shifts), "INT8")
    in_zp_val = in_zp - 256 if in_unsigned and in_dtype == "INT8" and in_zp > 127 else in_zp
    in_zp_val = in_zp_val - 65536 if in_dtype == "INT16" and in_zp_val > 32767 else in_zp_val
    out_zp_val = out_zp - 256 if out_unsigned and out_dtype == "INT8" and out_zp > 127 else out_zp
    out_zp_val = out_zp_val - 65536 if out_dtype == "INT16" and out_zp_val > 32767 else out_zp_val
    izp = b.const(np.array([in_zp_val]), in_dtype)
    ozp = b.const(np.array([out_zp_val]), out_dtype)
    return b.op(
        "RESCALE", [x, mult_t, shift_t, izp, ozp], x.shape, out_dtype, "RescaleAttribute",
        scale32, ts.RoundingMode.__members__[rounding], per_channel, in_unsigned, out_unsigned,
    )




def b_conv(d: Draw, b: Builder, x: T | None, depthwise: bool | None = None) -> T:
    depthwise = d.bool() if depthwise is None else depthwise
    if x is not None and (len(x.shape) != 4 or x.dtype not in ("INT8", "INT16")):
        x = _as_rank(d, b, x, 4, ("INT8", "INT16"))
    in_dtype = x.dtype if x is not None else d.choice(["INT8", "INT8", "INT16"])
    w_dtype = "INT4" if in_dtype == "INT8" and d.chance(15) else "INT8"
    acc = "INT48" if in_dtype == "INT16" else "INT32"
    kh, kw = d.int(1, 3), d.int(1, 3)
    dy, dx = (d.int(1, 2), d.int(1, 2)) if d.chance(30) else (1, 1)
    ih, pt, pbm, sy, oh = conv_geometry(d, kh, dy, x.shape[1] if x is not None else None)
    iw, pl, pr, sx, ow = conv_geometry(d, kw, dx, x.shape[2] if x is not None else None)
    if x is not None and (ih != x.shape[1] or iw != x.shape[2]):
        # geometry could not be fitted to x: pad-free stride-1 conv with a 1x1 kernel
        kh = kw = 1
        dy = dx = 1
        ih, iw, pt, pbm, pl, pr, sy, sx = x.shape[1], x.shape[2], 0, 0, 0, 0, 1, 1
        oh, ow = ih, iw
    n, c = (x.shape[0], x.shape[3]) if x is not None else (d.int(1, 2), d.int(1, 4))
    if x is None:
        x = b.input((n, ih, iw, c), in_dtype)
    wlo, whi = (-7, 7) if w_dtype == "INT4" else (-128, 127)  # tosa_serializer rejects INT4 -8
    input_zp = d.int(-128, 127) if in_dtype == "INT8" and d.chance(60) else 0
    weight_zp = d.int(-128, 127) if w_dtype == "INT8" and d.chance(40) else 0
    if depthwise:
        m = d.int(1, 2)
        w = b.const(b.values((kh, kw, c, m), w_dtype, wlo, whi), w_dtype)
        oc = c * m
        op = "DEPTHWISE_CONV2D"
    else:
        oc = d.int(1, 4)
        w = b.const(b.values((oc, kh, kw, c), w_dtype, wlo, whi), w_dtype)
        op = "CONV2D"
    bc = 1 if d.chance(20) else oc
    bias = b.const(b.values((bc,), acc, -(1 << 20), 1 << 20), acc)
    izp = b.const(np.array([input_zp]), in_dtype)
    wzp = b.const(np.array([weight_zp]), w_dtype)
    method = "DepthwiseConv2dAttribute" if depthwise else "Conv2dAttribute"
    return b.op(op, [x, w, bias, izp, wzp], (n, oh, ow, oc), acc, method,
                [pt, pbm, pl, pr], [sy, sx], [dy, dx], False, ts.DType.__members__[acc])


def b_transpose_conv(d: Draw, b: Builder, x: T | None) -> T:
    if x is not None and (len(x.shape) != 4 or x.dtype not in ("INT8", "INT16")):
        x = None
    in_dtype = x.dtype if x is not None else d.choice(["INT8", "INT16"])
    acc = "INT48" if in_dtype == "INT16" else "INT32"
    if x is None:
        x = b.input(nhwc_shape(d, 4), in_dtype)
    n, ih, iw, c = x.shape
    kh, kw = d.int(1, 3), d.int(1, 3)
    sy, sx = d.int(1, 2), d.int(1, 2)
    out_pad = [d.int(-(kh - 1), 0) if kh > 1 and d.chance(30) else 0 for _ in range(2)] + \
              [d.int(-(kw - 1), 0) if kw > 1 and d.chance(30) else 0 for _ in range(2)]
    oh = (ih - 1) * sy + out_pad[0] + out_pad[1] + kh
    ow = (iw - 1) * sx + out_pad[2] + out_pad[3] + kw
    if oh < 1 or ow < 1:  # the reference model refuses tensors with a zero dimension
        out_pad = [0, 0, 0, 0]
        oh, ow = (ih - 1) * sy + kh, (iw - 1) * sx + kw
    oc = d.int(1, 3)
    w = b.const(b.values((oc, kh, kw, c), "INT8"), "INT8")
    bias = b.const(b.values((oc,), acc, -1000, 1000), acc)
    izp = b.const(np.array([d.int(-128, 127) if in_dtype == "INT8" and d.bool() else 0]), in_dtype)
    wzp = b.const(np.array([d.int(-128, 127) if d.chance(30) else 0]), "INT8")
    return b.op("TRANSPOSE_CONV2D", [x, w, bias, izp, wzp], (n, oh, ow, oc), acc,
                "TransposeConv2dAttribute", out_pad, [sy, sx], False, ts.DType.__members__[acc])


def b_matmul(d: Draw, b: Builder, x: T | None) -> T:
    if x is not None and (len(x.shape) != 3 or x.dtype not in ("INT8", "INT16")):
        x = _as_rank(d, b, x, 3, ("INT8", "INT16"))
    dtype = x.dtype if x is not None else d.choice(["INT8", "INT16"])
    acc = "INT48" if dtype == "INT16" else "INT32"
    if x is None:
        x = b.input((d.int(1, 2), d.int(1, 5), d.int(1, 6)), dtype)
    n, h, c = x.shape
    w = d.int(1, 5)
    y = b.input((n, c, w), dtype)
    azp = b.const(np.array([d.int(-128, 127) if dtype == "INT8" and d.chance(60) else 0]), dtype)
    bzp = b.const(np.array([d.int(-128, 127) if dtype == "INT8" and d.chance(60) else 0]), dtype)
    return b.op("MATMUL", [x, y, azp, bzp], (n, h, w), acc)


def b_table(d: Draw, b: Builder, x: T | None) -> T:
    if x is None or x.dtype not in ("INT8", "INT16"):
        x = b.input(small_shape(d), d.choice(["INT8", "INT16"])) if x is None else _narrow(d, b, x)
    if x.dtype == "INT8":
        table = b.const(b.values((256,), "INT8"), "INT8")
        return b.op("TABLE", [x, table], x.shape, "INT8")
    if d.chance(80):  # a smooth table (like a quantized activation): slopes fit int16
        steps = b.rng.integers(-600, 600, 513)
        values = np.clip(np.cumsum(steps) + b.rng.integers(-2000, 2000), -32768, 32767)
    else:  # arbitrary table: a large slope makes the lookup unpredictable (REQUIRE)
        values = b.values((513,), "INT16")
    table = b.const(np.asarray(values, np.int16), "INT16")
    return b.op("TABLE", [x, table], x.shape, "INT32")


def _narrow(d: Draw, b: Builder, x: T) -> T:
    return b_rescale(d, b, x, out_dtype=d.choice(["INT8", "INT16"]))


def b_clamp(d: Draw, b: Builder, x: T | None) -> T:
    if x is None:
        x = b.input(small_shape(d), d.choice(["INT8", "INT16"]))
    if x.dtype not in ("INT8", "INT16"):
        x = _narrow(d, b, x)
    lo, hi = int_range(x.dtype)
    a, c = sorted((d.int(lo, hi), d.int(lo, hi)))
    return b.op("CLAMP", [x], x.shape, x.dtype, "ClampAttribute",
                clamp_bytes(a, x.dtype), clamp_bytes(c, x.dtype), ts.NanPropagationMode.PROPAGATE)




def b_pool(d: Draw, b: Builder, x: T | None, avg: bool | None = None) -> T:
    avg = d.bool() if avg is None else avg
    allowed = ("INT8", "INT16")
    if x is not None and (len(x.shape) != 4 or x.dtype not in allowed):
        x = _as_rank(d, b, x, 4, allowed)
    (kh, kw), ((ih, pt, pbm, sy, oh), (iw, pl, pr, sx, ow)) = pool_geometry(d, x)
    if x is None:
        x = b.input((d.int(1, 2), ih, iw, d.int(1, 3)), d.choice(allowed))
    n, c = x.shape[0], x.shape[3]
    if avg:
        izp = b.const(np.array([d.int(-128, 127) if x.dtype == "INT8" and d.chance(50) else 0]), x.dtype)
        ozp = b.const(np.array([d.int(-128, 127) if x.dtype == "INT8" and d.chance(50) else 0]), x.dtype)
        return b.op("AVG_POOL2D", [x, izp, ozp], (n, oh, ow, c), x.dtype, "AvgPool2dAttribute",
                    [kh, kw], [sy, sx], [pt, pbm, pl, pr], ts.DType.INT32)
    return b.op("MAX_POOL2D", [x], (n, oh, ow, c), x.dtype, "MaxPool2dAttribute",
                [kh, kw], [sy, sx], [pt, pbm, pl, pr], ts.NanPropagationMode.PROPAGATE)


def b_cast(d: Draw, b: Builder, x: T | None) -> T:
    targets = {"BOOL": ["INT8", "INT16", "INT32"], "INT8": ["BOOL", "INT16", "INT32"],
               "INT16": ["BOOL", "INT8", "INT32"], "INT32": ["BOOL", "INT8", "INT16"]}
    if x is None:
        x = b.input(small_shape(d), d.choice(list(targets)))
    if x.dtype not in targets:
        x = _to_int32(d, b, x)
    return b.op("CAST", [x], x.shape, d.choice(targets[x.dtype]))


def b_reshape(d: Draw, b: Builder, x: T | None) -> T:
    if x is None:
        x = b.input(small_shape(d), d.choice(["INT8", "INT16", "INT32", "BOOL"]))
    size = int(np.prod(x.shape))
    dims = []
    rest = size
    for _ in range(d.int(0, 3)):
        divisors = [k for k in range(1, rest + 1) if rest % k == 0]
        k = d.choice(divisors)
        dims.append(k)
        rest //= k
    dims.append(rest)
    shape = tuple(dims)
    s = b.shape_const(shape)
    return b.op("RESHAPE", [x, s], shape, x.dtype)


def b_transpose(d: Draw, b: Builder, x: T | None) -> T:
    if x is None:
        x = b.input(small_shape(d), d.choice(["INT8", "INT16", "INT32"]))
    perms = list(range(len(x.shape)))
    for i in range(len(perms) - 1, 0, -1):
        j = d.int(0, i)
        perms[i], perms[j] = perms[j], perms[i]
    return b.op("TRANSPOSE", [x], tuple(x.shape[p] for p in perms), x.dtype, "TransposeAttribute", perms)


def b_concat(d: Draw, b: Builder, x: T | None) -> T:
    if x is None:
        x = b.input(small_shape(d), d.choice(["INT8", "INT16", "INT32"]))
    axis = d.int(0, len(x.shape) - 1)
    parts = [x]
    for _ in range(d.int(1, 2)):
        shape = list(x.shape)
        shape[axis] = d.int(1, 3)
        parts.append(b.input(tuple(shape), x.dtype))
    if d.bool():
        parts.reverse()
    out = list(x.shape)
    out[axis] = sum(p.shape[axis] for p in parts)
    return b.op("CONCAT", parts, tuple(out), x.dtype, "ConcatAttribute", axis)


def b_pad(d: Draw, b: Builder, x: T | None) -> T:
    if x is None:
        x = b.input(small_shape(d), d.choice(["INT8", "INT16", "INT32"]))
    pads = [d.int(0, 2) for _ in range(2 * len(x.shape))]
    s = b.shape_const(pads)
    lo, hi = int_range(x.dtype) if x.dtype in INT_BITS else (0, 1)
    value = b.const(np.array([d.int(lo, hi)]), x.dtype)
    shape = tuple(dim + pads[2 * i] + pads[2 * i + 1] for i, dim in enumerate(x.shape))
    return b.op("PAD", [x, s, value], shape, x.dtype)


def b_reduce(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "ARGMAX"])
    if x is None:
        dtype = "INT32" if op == "REDUCE_SUM" else d.choice(["INT8", "INT16", "INT32"] if op != "ARGMAX" else ["INT8", "INT16"])
        x = b.input(small_shape(d), dtype, lo=-(1 << 20) if dtype == "INT32" else None, hi=(1 << 20) if dtype == "INT32" else None)
    if op == "REDUCE_SUM" and x.dtype != "INT32":
        x = _to_int32(d, b, x)
    if op == "ARGMAX" and x.dtype not in ("INT8", "INT16"):
        x = _narrow(d, b, x)
    if op in ("REDUCE_MAX", "REDUCE_MIN") and x.dtype not in ("INT8", "INT16", "INT32"):
        x = _to_int32(d, b, x)
    axis = d.int(0, len(x.shape) - 1)
    if op == "ARGMAX":
        shape = tuple(s for i, s in enumerate(x.shape) if i != axis)
        return b.op("ARGMAX", [x], shape, "INT32", "ArgMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)
    shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape))
    if op == "REDUCE_SUM":
        return b.op(op, [x], shape, x.dtype, "ReduceSumAttribute", axis)
    method = "ReduceMaxAttribute" if op == "REDUCE_MAX" else "ReduceMinAttribute"
    return b.op(op, [x], shape, x.dtype, method, axis, ts.NanPropagationMode.PROPAGATE)


def b_slice_tile_reverse(d: Draw, b: Builder, x: T | None) -> T:
    if x is None:
        x = b.input(small_shape(d), d.choice(["INT8", "INT16", "INT32", "BOOL"]))
    op = d.choice(["SLICE", "TILE", "REVERSE"])
    if op == "SLICE":
        start = [d.int(0, s - 1) for s in x.shape]
        size = [d.int(1, s - st_) for s, st_ in zip(x.shape, start, strict=True)]
        return b.op("SLICE", [x, b.shape_const(start), b.shape_const(size)], tuple(size), x.dtype)
    if op == "TILE":
        mult = [d.int(1, 2) for _ in x.shape]
        return b.op("TILE", [x, b.shape_const(mult)], tuple(s * m for s, m in zip(x.shape, mult, strict=True)), x.dtype)
    return b.op("REVERSE", [x], x.shape, x.dtype, "ReverseAttribute", d.int(0, len(x.shape) - 1))


def b_elementwise(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["MAXIMUM", "MINIMUM", "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT",
                   "LOGICAL_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR",
                   "INTDIV", "EQUAL", "GREATER", "GREATER_EQUAL"])
    int32_only = op in ("MAXIMUM", "MINIMUM", "INTDIV", "EQUAL", "GREATER", "GREATER_EQUAL")
    if x is None:
        x = b.input(small_shape(d), "INT32" if int32_only else d.choice(["INT8", "INT16", "INT32"]))
    if x.dtype not in ("INT8", "INT16", "INT32") or (int32_only and x.dtype != "INT32"):
        x = _to_int32(d, b, x)
    shape = broadcast_partner(d, x.shape)
    bits = INT_BITS[x.dtype]
    if op.endswith("SHIFT"):
        y = b.input(shape, x.dtype, lo=0, hi=bits - 1)
    elif op == "INTDIV":
        divisor = b.values(shape, "INT32", -1000, 1000)
        if not d.chance(5):
            divisor[divisor == 0] = 1
        y = b.input(shape, "INT32", value=divisor)
    else:
        y = b.input(shape, x.dtype)
    out_dtype = "BOOL" if op in ("EQUAL", "GREATER", "GREATER_EQUAL") else x.dtype
    if op in ("MAXIMUM", "MINIMUM"):
        return b.op(op, [x, y], x.shape, out_dtype, camel_op(op) + "Attribute", ts.NanPropagationMode.PROPAGATE)
    if op == "ARITHMETIC_RIGHT_SHIFT":
        return b.op(op, [x, y], x.shape, out_dtype, "ArithmeticRightShiftAttribute", d.bool())
    return b.op(op, [x, y], x.shape, out_dtype)


def b_unary(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["ABS", "NEGATE", "CLZ", "BITWISE_NOT"])
    if x is None:
        dtype = "INT32" if op in ("ABS", "CLZ") else d.choice(["INT8", "INT16", "INT32"])
        x = b.input(small_shape(d), dtype)
    if x.dtype not in ("INT8", "INT16", "INT32") or (op in ("ABS", "CLZ") and x.dtype != "INT32"):
        x = _to_int32(d, b, x)
    if op == "NEGATE":
        izp = b.const(np.array([d.int(-128, 127) if x.dtype == "INT8" and d.bool() else 0]), x.dtype)
        ozp = b.const(np.array([d.int(-128, 127) if x.dtype == "INT8" and d.bool() else 0]), x.dtype)
        return b.op(op, [x, izp, ozp], x.shape, x.dtype)
    return b.op(op, [x], x.shape, x.dtype)


def b_select(d: Draw, b: Builder, x: T | None) -> T:
    if x is None:
        x = b.input(small_shape(d), d.choice(["INT8", "INT16", "INT32", "BOOL"]))
    cond = b.input(broadcast_partner(d, x.shape), "BOOL")
    y = b.input(broadcast_partner(d, x.shape), x.dtype)
    return b.op("SELECT", [cond, x, y] if d.bool() else [cond, y, x], x.shape, x.dtype)


def b_gather_scatter(d: Draw, b: Builder, x: T | None) -> T:
    if x is not None and (len(x.shape) != 3 or x.dtype not in ("INT8", "INT16", "INT32")):
        x = _as_rank(d, b, x, 3, ("INT8", "INT16", "INT32"))
    if x is None:
        x = b.input((d.int(1, 2), d.int(1, 5), d.int(1, 4)), d.choice(["INT8", "INT16", "INT32"]))
    n, k, c = x.shape
    if d.bool():
        w = d.int(1, 5)
        idx = b.input((n, w), "INT32", value=b.rng.integers(0, k, (n, w)).astype(np.int32))
        return b.op("GATHER", [x, idx], (n, w, c), x.dtype)
    w = d.int(1, k)
    idx = np.stack([b.rng.permutation(k)[:w] for _ in range(n)]).astype(np.int32)
    idx_t = b.input((n, w), "INT32", value=idx)
    src = b.input((n, w, c), x.dtype)
    return b.op("SCATTER", [x, idx_t, src], x.shape, x.dtype)


def b_resize(d: Draw, b: Builder, x: T | None) -> T:
    if x is not None and (len(x.shape) != 4 or x.dtype not in ("INT8", "INT16")):
        x = None
    if x is None:
        x = b.input(nhwc_shape(d, 4, 3), d.choice(["INT8", "INT16"]))
    n, ih, iw, c = x.shape
    mode = d.choice(["NEAREST", "BILINEAR"])
    sizes = []
    for in_size in (ih, iw):
        num, den = d.int(1, 4), d.int(1, 2)
        offset = d.int(-den + 1, num - 1) if d.chance(30) else 0
        span = (in_size - 1) * num - offset
        border = 0
        out = span // den + 1
        border = (out - 1) * den - span  # so that (span + border) divides by den exactly
        if out < 1 or abs(border) >= 16 * num:
            num, den, offset, border, out = 1, 1, 0, 0, in_size
        sizes.append((num, den, offset, border, out))
    (ny, dy, oy, by, oh), (nx, dx, ox, bx, ow) = sizes
    if mode == "BILINEAR":
        out_dtype = "INT32" if x.dtype == "INT8" else "INT48"
    else:
        out_dtype = x.dtype
    scale = b.shape_const([ny, dy, nx, dx])
    offset = b.shape_const([oy, ox])
    border = b.shape_const([by, bx])
    return b.op("RESIZE", [x, scale, offset, border], (n, oh, ow, c), out_dtype, "ResizeAttribute",
                ts.ResizeMode.__members__[mode])


INT_BUILDERS = {
    "ADD/SUB": b_add_sub,
    "MUL": b_mul,
    "RESCALE": b_rescale,
    "CONV2D": lambda d, b, x: b_conv(d, b, x, depthwise=False),
    "DEPTHWISE_CONV2D": lambda d, b, x: b_conv(d, b, x, depthwise=True),
    "TRANSPOSE_CONV2D": b_transpose_conv,
    "MATMUL": b_matmul,
    "TABLE": b_table,
    "CLAMP": b_clamp,
    "MAX_POOL2D": lambda d, b, x: b_pool(d, b, x, avg=False),
    "AVG_POOL2D": lambda d, b, x: b_pool(d, b, x, avg=True),
    "CAST": b_cast,
    "RESHAPE": b_reshape,
    "TRANSPOSE": b_transpose,
    "CONCAT": b_concat,
    "PAD": b_pad,
    "REDUCE": b_reduce,
    "SLICE/TILE/REVERSE": b_slice_tile_reverse,
    "ELEMENTWISE": b_elementwise,
    "UNARY": b_unary,
    "SELECT": b_select,
    "GATHER/SCATTER": b_gather_scatter,
    "RESIZE": b_resize,
}
