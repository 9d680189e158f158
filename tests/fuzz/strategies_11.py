"""Random TOSA 1.1 draft graphs for differential fuzzing (the operators of issue 15).

Same scheme as :mod:`fuzz.strategies` (a :class:`~fuzz.strategies.Draw` for structure, a
:class:`~fuzz.strategies.Builder` writing a 1.1 flatbuffer): shape-operator chains feeding a
TILE/RESHAPE, DIM, MATMUL_T (integer and mixed-precision float), ROW_GATHER, the adaptive pools,
and the MX block-scaled family, fed from FP32/BF16 inputs through CAST_TO_BLOCK_SCALED so every
graph input is an ordinary dtype.
"""

from __future__ import annotations

import numpy as np
import tosa_serializer as ts
from hypothesis import strategies as st

from .builder import (
    Builder,
    Draw,
    FuzzCase,
    HypothesisDraw,
    T,
    conv_geometry,
    pool_geometry,
    small_shape,
)

BS32 = ts.BlockSize.BLOCK_SIZE_32
MX_TYPES = ("FP8E4M3", "FP8E5M2", "FP6E2M3", "FP6E3M2", "FP4E2M1", "MXINT8")

#: Shape operator -> its Python meaning (None: an invalid operand, REQUIRE on both sides).
_SHAPE_BINARY = {
    "ADD_SHAPE": lambda a, b: a + b,
    "SUB_SHAPE": lambda a, b: a - b,
    "MUL_SHAPE": lambda a, b: a * b,
    "DIV_CEIL_SHAPE": lambda a, b: -(-a // b) if a >= 0 and b >= 1 else None,
    "DIV_FLOOR_SHAPE": lambda a, b: a // b if a >= 0 and b >= 1 else None,
    "MOD_SHAPE": lambda a, b: a % b if a >= 0 and b >= 1 else None,
    "MAX_SHAPE": max,
    "MIN_SHAPE": min,
}
_SHAPE_UNARY = {
    "EXP2_SHAPE": lambda a: 1 << a if 0 <= a < 31 else None,
    "LOG2_CEIL_SHAPE": lambda a: (a - 1).bit_length() if a >= 1 else None,
    "LOG2_FLOOR_SHAPE": lambda a: a.bit_length() - 1 if a >= 1 else None,
}


def _camel(op: str) -> str:
    return "".join(w.capitalize() for w in op.lower().split("_")) + "Attribute"


def _shape_op(b: Builder, op: str, ins: list[str], length: int, *args) -> str:
    name = b._name("s")
    b.block.addShape(name, length, None)
    b._op(op, ins, [name], _camel(op), *args)
    return name


def _const_partner(d: Draw, op: str, a: list[int]) -> list[int]:
    """The second operand of binary shape ``op`` on ``a``: mostly valid, now and then not."""
    if op == "SUB_SHAPE":  # mostly a result >= 1
        return [d.int(0, max(0, p - 1)) if d.chance(90) else d.int(0, 4) for p in a]
    return [d.int(0 if d.chance(10) else 1, 4) for _ in a]


def _shape_step(d: Draw, b: Builder, s: str, vals: list[int]) -> tuple[str, list[int | None]]:
    """One shape operator applied to shape value ``s`` (known ``vals``): the new value and name.

    The length stays the same (CONCAT_SHAPE is undone by a SLICE_SHAPE), so steps chain.
    """
    r = len(vals)
    op = d.choice([*_SHAPE_BINARY, *_SHAPE_UNARY, "CONCAT_SHAPE"])
    if op in _SHAPE_BINARY:
        c = _const_partner(d, op, vals)
        ins = [s, b.shape_const(c)] if d.chance(80) or op in ("SUB_SHAPE",) else [b.shape_const(c), s]
        pairs = zip(vals, c, strict=True) if ins[0] == s else zip(c, vals, strict=True)
        return _shape_op(b, op, ins, r), [_SHAPE_BINARY[op](p, q) for p, q in pairs]
    if op in _SHAPE_UNARY:
        return _shape_op(b, op, [s], r), [_SHAPE_UNARY[op](p) for p in vals]
    # CONCAT_SHAPE of s between constant parts, then SLICE_SHAPE of s's place back out
    before = [d.int(1, 4) for _ in range(d.int(0, 2))]
    after = [d.int(1, 4) for _ in range(d.int(0 if before else 1, 2))]
    parts = [*([b.shape_const(before)] if before else []), s, *([b.shape_const(after)] if after else [])]
    joined = _shape_op(b, "CONCAT_SHAPE", parts, len(before) + r + len(after))
    return _slice_shape(b, joined, len(before), r), list(vals)


def _slice_shape(b: Builder, s: str, start: int, size: int) -> str:
    start_t = b.const(np.array([start]), "INT32")
    size_t = b.const(np.array([size]), "INT32")
    return _shape_op(b, "SLICE_SHAPE", [s, start_t.name, size_t.name], size)


def _dims_of(b: Builder, x: T) -> str:
    """x's shape as a shape value: DIM of each axis joined by CONCAT_SHAPE."""
    dims = [_shape_op(b, "DIM", [x.name], 1, axis) for axis in range(len(x.shape))]
    return _shape_op(b, "CONCAT_SHAPE", dims, len(dims)) if len(dims) > 1 else dims[0]


def v_shape_ops(d: Draw, b: Builder) -> T:
    """A chain of 1-3 shape operators whose value becomes the TILE multiples of an int8 input.

    The chain starts from a constant or from the input's own dimensions (DIM); an invalid
    operand now and then (a zero multiple, a negative to LOG2) makes both executors reject it.
    """
    x = b.input(small_shape(d, d.int(1, 3), 3), "INT8")
    r = len(x.shape)
    if d.chance(30):
        s, vals = _dims_of(b, x), list(x.shape)
    else:
        vals = [d.int(0 if d.chance(10) else 1, 4) for _ in range(r)]
        s = b.shape_const(vals)
    for _ in range(d.int(1, 3)):
        if any(v is None for v in vals):
            break  # an invalid step already: both executors must reject the graph
        s, vals = _shape_step(d, b, s, vals)
    if all(v is not None for v in vals) and int(np.prod([max(v, 1) for v in vals])) * int(np.prod(x.shape)) > 2048:
        cap = [3] * r  # keep the TILE small
        s, vals = _shape_op(b, "MIN_SHAPE", [s, b.shape_const(cap)], r), [min(v, 3) for v in vals]
    if d.chance(20):  # ASSERT_EQUAL_SHAPE of the multiples with a (mostly) equal constant
        other = [v if v is not None else 1 for v in vals]
        if d.chance(20):
            other[d.int(0, r - 1)] += 1
        elif d.chance(30):
            other = [1 if d.bool() else v for v in other]  # equal under broadcast only
        b._op("ASSERT_EQUAL_SHAPE", [s, b.shape_const(other)], [], "AssertEqualShapeAttribute", d.bool())
    out_shape = tuple(x.shape[i] * max(1, v if v is not None else 1) for i, v in enumerate(vals))
    return b.op("TILE", [x, s], out_shape, "INT8")


#: Input types of DIM the fuzzer feeds (those the builder can make as graph inputs).
DIM_TYPES = ("BOOL", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "FP8E4M3", "FP8E5M2")


def v_dynamic_reshape(d: Draw, b: Builder) -> T:
    """RESHAPE / SLICE of an input by a shape computed from its own DIMs (dynamic-shape style).

    RESHAPE merges two adjacent dimensions (MUL_SHAPE of their DIMs); SLICE starts at a constant
    and takes SUB_SHAPE(DIMs, start) elements (the rest of each axis).
    """
    dt = d.choice(DIM_TYPES)
    x = b.input(small_shape(d, d.int(2, 4), 4), dt)
    r = len(x.shape)
    dims = [_shape_op(b, "DIM", [x.name], 1, axis) for axis in range(r)]
    if d.bool():
        i = d.int(0, r - 2)
        merged = _shape_op(b, "MUL_SHAPE", [dims[i], dims[i + 1]], 1)
        parts = [*dims[:i], merged, *dims[i + 2:]]
        shape = (*x.shape[:i], x.shape[i] * x.shape[i + 1], *x.shape[i + 2:])
        new = _shape_op(b, "CONCAT_SHAPE", parts, len(parts)) if len(parts) > 1 else parts[0]
        return b.op("RESHAPE", [x, new], shape, dt)
    start = [d.int(0, s - 1) for s in x.shape]
    whole = _shape_op(b, "CONCAT_SHAPE", dims, r)
    start_s = b.shape_const(start)
    size = _shape_op(b, "SUB_SHAPE", [whole, start_s], r)
    return b.op("SLICE", [x, start_s, size], tuple(s - st_ for s, st_ in zip(x.shape, start, strict=True)), dt)


#: MATMUL_T's floating-point A_t / B_t (the spec's S2_IN; mixed pairs accumulate in fp32).
MATMUL_T_FP = ("FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2")
#: ROW_GATHER's in_out_t (Base INT, Base FP and the FP8/BF16 extension rows).
ROW_GATHER_TYPES = ("BOOL", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "BF16", "FP8E4M3", "FP8E5M2")


def v_matmul_t(d: Draw, b: Builder) -> T:
    n, h, c, w = d.int(1, 2), d.int(1, 4), d.int(1, 8), d.int(1, 4)
    dd = 1 if d.chance(30) else n
    if d.bool():
        dt = d.choice(["INT8", "INT16"])
        a, bb = b.input((n, h, c), dt), b.input((dd, w, c), dt)
        zp = [d.int(-128, 127) if dt == "INT8" and d.chance(50) else 0 for _ in range(2)]
        ins = [a, bb, b.const(np.array([zp[0]]), dt), b.const(np.array([zp[1]]), dt)]
        return b.op("MATMUL_T", ins, (n, h, w), "INT32" if dt == "INT8" else "INT48", "MatMulTAttribute")
    # now and then block-scaled operands (bs32_fp8ue8m0_<MX type>): C in whole blocks of 32
    scaled = [d.chance(25), d.chance(35)]
    if any(scaled):
        c = 32 * d.int(1, 2)
    at, bt = (d.choice(MX_TYPES) if s else d.choice(MATMUL_T_FP) for s in scaled)
    if "FP32" in (at, bt):
        out = "FP32"
    else:
        out = d.choice(["FP16", "FP32"] if (at, bt) == ("FP16", "FP16") else ["BF16", "FP32"])
    a = b.block_scaled_input((n, h, c), at) if scaled[0] else b.input((n, h, c), at)
    bb = b.block_scaled_input((dd, w, c), bt) if scaled[1] else b.input((dd, w, c), bt)
    # a block-scaled operand's zero point is fp32 (as tosa-tools generates and runs it)
    zps = [b.const(np.array([0.0]), "FP32" if s else t) for s, t in zip(scaled, (at, bt), strict=True)]
    return b.op("MATMUL_T", [a, bb, *zps], (n, h, w), out, "MatMulTAttribute")


def v_row_gather(d: Draw, b: Builder) -> T:
    dt = d.choice(ROW_GATHER_TYPES)
    n, k, c, w = d.int(1, 2), d.int(1, 6), d.int(1, 4), d.int(1, 4)
    rows = d.int(1, k)
    values = b.input((n, k, c), dt)
    hi = k - rows if d.chance(95) else k  # now and then an index past the end: REQUIRE
    idx_dt = d.choice(["INT32", "INT64"])
    idx = b.input((n, w), idx_dt, value=b.rng.integers(0, hi, (n, w), endpoint=True))
    count = b.const(np.array([rows]), "INT32")
    return b.op("ROW_GATHER", [values, idx, count], (n, w * rows, c), dt, "RowGatherAttribute")


def v_pool_adaptive(d: Draw, b: Builder) -> T:
    dt = d.choice(["INT8", "INT16", "FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2"])
    (kh, kw), ((ih, pt, pbm, sy, oh), (iw, pl, pr, sx, ow)) = pool_geometry(d, None)
    x = b.input((d.int(1, 2), ih, iw, d.int(1, 3)), dt)
    n, c = x.shape[0], x.shape[3]
    window = [b.shape_const([kh, kw]), b.shape_const([sy, sx]), b.shape_const([pt, pbm, pl, pr])]
    if d.bool():
        return b.op("MAX_POOL2D_ADAPTIVE", [x, *window], (n, oh, ow, c), dt, "MaxPool2dAdaptiveAttribute",
                    ts.NanPropagationMode.PROPAGATE)
    zero = 0.0 if dt.startswith("FP") else 0
    izp = b.const(np.array([d.int(-128, 127) if dt == "INT8" and d.chance(50) else zero]), dt)
    ozp = b.const(np.array([d.int(-128, 127) if dt == "INT8" and d.chance(50) else zero]), dt)
    acc = {"INT8": "INT32", "INT16": "INT32", "FP8E4M3": "FP16", "FP8E5M2": "FP16", "BF16": "FP32",
           "FP32": "FP32", "FP16": d.choice(["FP16", "FP32"])}[dt]
    return b.op("AVG_POOL2D_ADAPTIVE", [x, izp, ozp, *window], (n, oh, ow, c), dt, "AvgPool2dAdaptiveAttribute", ts.DType.__members__[acc])


def _to_mx(d: Draw, b: Builder, shape: tuple[int, ...], mx: str) -> tuple[T, T]:
    """An FP32/BF16 input cast to (MX data, E8M0 scales) by CAST_TO_BLOCK_SCALED."""
    src = b.input(shape, d.choice(["FP32", "BF16"]), hi=d.choice([0.01, 1.0, 300.0]))
    data = b.tensor(shape, mx)
    scale = b.tensor((*shape[:-1], shape[-1] // 32), "FP8UE8M0")
    b._op("CAST_TO_BLOCK_SCALED", [src.name], [data.name, scale.name], "CastToBlockScaledAttribute", BS32)
    return data, scale


def _from_mx(d: Draw, b: Builder, data: T, scale: T) -> T:
    out = d.choice(["FP32", "BF16"])
    return b.op("CAST_FROM_BLOCK_SCALED", [data, scale], data.shape, out, "CastFromBlockScaledAttribute", BS32)


def _mx_cast(d: Draw, b: Builder, mx: str, c: int) -> T:
    """CAST_TO then CAST_FROM_BLOCK_SCALED; now and then the result is RESHAPEd (an identity) by
    the DIMs of the MX data, or of the scales times [1, .., 32], exercising DIM on MX types."""
    data, scale = _to_mx(d, b, (*small_shape(d, d.int(0, 2), 3), c), mx)
    out = _from_mx(d, b, data, scale)
    if not d.chance(30):
        return out
    if d.bool():
        dims = _dims_of(b, data)
    else:
        factor = b.shape_const([1] * (len(scale.shape) - 1) + [32])
        dims = _shape_op(b, "MUL_SHAPE", [_dims_of(b, scale), factor], len(scale.shape))
    return b.op("RESHAPE", [out, dims], out.shape, out.dtype)


def _mx_matmul(d: Draw, b: Builder, mx: str, c: int) -> T:
    n, h, w = d.int(1, 2), d.int(1, 3), d.int(1, 3)
    dd = 1 if d.chance(30) else n
    a, sa = _to_mx(d, b, (n, h, c), mx)
    bb, sb = _to_mx(d, b, (dd, w, c), mx)
    return b.op("MATMUL_T_BLOCK_SCALED", [a, sa, bb, sb], (n, h, w), "FP32", "MatMulTBlockScaledAttribute", BS32)


def _mx_conv(d: Draw, b: Builder, mx: str, c: int) -> T:
    kh, kw = d.int(1, 3), d.int(1, 3)
    ih, pt, pbm, sy, oh = conv_geometry(d, kh, 1)
    iw, pl, pr, sx, ow = conv_geometry(d, kw, 1)
    n, oc = d.int(1, 2), d.int(1, 3)
    x, sx_ = _to_mx(d, b, (n, ih, iw, c), mx)
    w, sw = _to_mx(d, b, (oc, kh, kw, c), mx)
    bias = b.const(b.values((oc if d.bool() else 1,), "FP32"), "FP32")
    geo = [b.shape_const([pt, pbm, pl, pr]), b.shape_const([sy, sx]), b.shape_const([1, 1])]
    return b.op("CONV2D_BLOCK_SCALED", [x, sx_, w, sw, bias, *geo], (n, oh, ow, oc), "FP32",
                "Conv2dBlockScaledAttribute", BS32)


def _mx_reshape(d: Draw, b: Builder, mx: str, c: int) -> T:
    lead = d.int(1, 4)
    data, scale = _to_mx(d, b, (lead, 2, c), mx)
    new = (2 * lead, c) if d.bool() else (lead, 2 * c)
    nd, ns = b.tensor(new, mx), b.tensor((new[0], new[1] // 32), "FP8UE8M0")
    b._op("RESHAPE_BLOCK_SCALED", [data.name, scale.name, b.shape_const(new)], [nd.name, ns.name],
          "ReshapeBlockScaledAttribute", BS32)
    return _from_mx(d, b, nd, ns)


def _mx_row_gather(d: Draw, b: Builder, mx: str, c: int) -> T:
    n, k, w = d.int(1, 2), d.int(1, 5), d.int(1, 3)
    rows = d.int(1, k)
    data, scale = _to_mx(d, b, (n, k, c), mx)
    idx_dt = d.choice(["INT32", "INT64"])
    idx = b.input((n, w), idx_dt, value=b.rng.integers(0, k - rows, (n, w), endpoint=True))
    count = b.const(np.array([rows]), "INT32")
    od, os_ = b.tensor((n, w * rows, c), mx), b.tensor((n, w * rows, c // 32), "FP8UE8M0")
    b._op("ROW_GATHER_BLOCK_SCALED", [data.name, scale.name, idx.name, count.name], [od.name, os_.name],
          "RowGatherBlockScaledAttribute", BS32)
    return _from_mx(d, b, od, os_)


_MX_OPS = {"CAST": _mx_cast, "MATMUL_T_BLOCK_SCALED": _mx_matmul, "CONV2D_BLOCK_SCALED": _mx_conv,
           "RESHAPE_BLOCK_SCALED": _mx_reshape, "ROW_GATHER_BLOCK_SCALED": _mx_row_gather}


def v_mx(d: Draw, b: Builder) -> T:
    """One MX block-scaled operator between CAST_TO_BLOCK_SCALED and an fp32/bf16 result."""
    mx = d.choice(MX_TYPES)
    op = d.choice(list(_MX_OPS))
    return _MX_OPS[op](d, b, mx, 32 * d.int(1, 2))


#: in_out_t of RESHAPE_BLOCK_SCALED / ROW_GATHER_BLOCK_SCALED with block_size 1 (no scales).
PLAIN_TYPES = ("BOOL", "INT8", "INT16", "INT32", "INT64", "FP8E4M3", "FP8E5M2", "FP16", "BF16", "FP32")


def v_block_scaled_plain(d: Draw, b: Builder) -> T:
    """RESHAPE_BLOCK_SCALED or ROW_GATHER_BLOCK_SCALED of a single ordinary tensor (block_size 1)."""
    dt = d.choice(PLAIN_TYPES)
    bs1 = ts.BlockSize.BLOCK_SIZE_1
    if d.bool():
        x = b.input(small_shape(d, d.int(1, 3), 4), dt)
        size = int(np.prod(x.shape))
        new = (size,) if d.bool() else (1, size)
        out = b.tensor(new, dt)
        b._op("RESHAPE_BLOCK_SCALED", [x.name, b.shape_const(new)], [out.name], "ReshapeBlockScaledAttribute", bs1)
        return out
    n, k, c, w = d.int(1, 2), d.int(1, 5), d.int(1, 4), d.int(1, 3)
    rows = d.int(1, k)
    values = b.input((n, k, c), dt)
    idx_dt = "INT64" if dt == "INT64" else d.choice(["INT32", "INT64"])
    idx = b.input((n, w), idx_dt, value=b.rng.integers(0, k - rows, (n, w), endpoint=True))
    count = b.const(np.array([rows]), "INT32")
    out = b.tensor((n, w * rows, c), dt)
    b._op("ROW_GATHER_BLOCK_SCALED", [values.name, idx.name, count.name], [out.name],
          "RowGatherBlockScaledAttribute", bs1)
    return out


#: EXT-INT64 rows the 1.1 draft adds to 1.0 elementwise / reduction operators.
INT64_BINARY = ("ADD", "SUB", "MUL", "INTDIV", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "LOGICAL_LEFT_SHIFT",
                "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER",
                "GREATER_EQUAL")
INT64_UNARY = ("ABS", "BITWISE_NOT", "CLZ", "NEGATE", "REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "SELECT")


def _i64_values(d: Draw, b: Builder, shape) -> np.ndarray:
    """int64 values: small, near the limits (overflow probes: REQUIRE on both sides), or full range."""
    kind = d.int(0, 2)
    if kind == 0:
        return b.rng.integers(-1000, 1000, shape, endpoint=True)
    if kind == 1:
        lim = np.iinfo(np.int64)
        v = b.rng.integers(lim.max - 4, lim.max, shape, endpoint=True)
        return np.where(b.rng.random(shape) < 0.5, v, -v - 1)
    return b.values(shape, "INT64")


def _int64_other(d: Draw, b: Builder) -> T:
    """ARGMAX with an i64_t result, GATHER / SCATTER with i64_t indices, CAST to / from i64_t."""
    op = d.choice(["ARGMAX", "GATHER", "SCATTER", "CAST"])
    if op == "ARGMAX":
        dt = d.choice(["INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32"])
        x = b.input(small_shape(d, d.int(1, 3), 4), dt)
        axis = d.int(0, len(x.shape) - 1)
        shape = tuple(s for i, s in enumerate(x.shape) if i != axis)
        return b.op("ARGMAX", [x], shape, "INT64", "ArgMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)
    if op == "CAST":
        src = d.choice(["BOOL", "INT32", "INT64"])
        shape = small_shape(d, d.int(1, 3), 4)
        x = b.input(shape, src, value=_i64_values(d, b, shape) if src == "INT64" else None)
        return b.op("CAST", [x], x.shape, "INT64" if src != "INT64" else d.choice(["BOOL", "INT32"]))
    dt = d.choice(["INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "BOOL"])
    n, k, c = d.int(1, 2), d.int(1, 5), d.int(1, 4)
    values = b.input((n, k, c), dt)
    if op == "GATHER":
        w = d.int(1, 4)
        idx = b.input((n, w), "INT64", value=b.rng.integers(0, k - (0 if d.chance(97) else -1), (n, w)))
        return b.op("GATHER", [values, idx], (n, w, c), dt)
    w = d.int(1, k)
    idx = b.input((n, w), "INT64", value=np.stack([b.rng.permutation(k)[:w] for _ in range(n)]))
    return b.op("SCATTER", [values, idx, b.input((n, w, c), dt)], (n, k, c), dt)


def v_int64(d: Draw, b: Builder) -> T:
    """One EXT-INT64 elementwise, comparison, SELECT or reduction operator (1.1 graph)."""
    op = d.choice([*INT64_BINARY, *INT64_UNARY, "ARGMAX/GATHER/CAST"])
    if op == "ARGMAX/GATHER/CAST":
        return _int64_other(d, b)
    shape = small_shape(d, d.int(1, 3), 4)
    x = b.input(shape, "INT64", value=_i64_values(d, b, shape))
    if op in INT64_BINARY:
        shape = tuple(1 if d.chance(25) else s for s in x.shape)
        if op.endswith("SHIFT"):
            value = b.rng.integers(0, 63 if d.chance(95) else 64, shape, endpoint=True)
        elif op == "INTDIV":
            value = _i64_values(d, b, shape)
            value[value == 0] = 0 if d.chance(5) else 1
        else:
            value = _i64_values(d, b, shape)
        y = b.input(shape, "INT64", value=value)
        out = "BOOL" if op in ("EQUAL", "GREATER", "GREATER_EQUAL") else "INT64"
        ins = [x, y] if d.chance(80) else [y, x]
        if op == "MUL":
            return b.op(op, [*ins, b.const(np.array([0], np.int8), "INT8")], x.shape, out)
        if op in ("MAXIMUM", "MINIMUM"):
            return b.op(op, ins, x.shape, out, _camel(op), ts.NanPropagationMode.PROPAGATE)
        if op == "ARITHMETIC_RIGHT_SHIFT":
            return b.op(op, ins, x.shape, out, "ArithmeticRightShiftAttribute", d.bool())
        return b.op(op, ins, x.shape, out)
    if op == "NEGATE":
        zero = b.const(np.array([0]), "INT64")
        return b.op(op, [x, zero, b.const(np.array([0]), "INT64")], x.shape, "INT64")
    if op == "SELECT":
        cond = b.input(x.shape, "BOOL")
        return b.op(op, [cond, x, b.input(x.shape, "INT64", value=_i64_values(d, b, x.shape))], x.shape, "INT64")
    if op.startswith("REDUCE"):
        axis = d.int(0, len(x.shape) - 1)
        shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape))
        if op == "REDUCE_SUM":
            return b.op(op, [x], shape, "INT64", "ReduceSumAttribute", axis)
        return b.op(op, [x], shape, "INT64", _camel(op), axis, ts.NanPropagationMode.PROPAGATE)
    return b.op(op, [x], x.shape, "INT64")


V11_BUILDERS = {
    "SHAPE": v_shape_ops,
    "MATMUL_T": v_matmul_t,
    "ROW_GATHER": v_row_gather,
    "POOL2D_ADAPTIVE": v_pool_adaptive,
    "MX": v_mx,
    "BLOCK_SCALED_PLAIN": v_block_scaled_plain,
    "DYNAMIC_RESHAPE": v_dynamic_reshape,
    "INT64": v_int64,
}


def build_v11(d: Draw, seed: int, kind: str | None = None) -> FuzzCase:
    """One TOSA 1.1 draft construct (see :data:`V11_BUILDERS`) in a 1.1 graph."""
    kind = kind or d.choice(sorted(V11_BUILDERS))
    b = Builder(np.random.default_rng(seed), minor=1)
    out = V11_BUILDERS[kind](d, b)
    return b.finish([out], label=f"v11:{kind}:seed{seed}")


@st.composite
def v11_cases(draw, kinds: list[str] | None = None) -> FuzzCase:
    """Hypothesis strategy: one TOSA 1.1 draft operator graph."""
    d = HypothesisDraw(draw)
    kind = draw(st.sampled_from(sorted(kinds or V11_BUILDERS)))
    return build_v11(d, draw(st.integers(0, 2**32 - 1)), kind)
