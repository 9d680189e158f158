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

from .strategies import Builder, Draw, FuzzCase, HypothesisDraw, T, _pool_geometry, small_shape

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


def v_shape_ops(d: Draw, b: Builder) -> T:
    """A shape-operator expression whose value becomes TILE multiples of an int8 input."""
    x = b.input(small_shape(d, d.int(1, 3), 3), "INT8")
    r = len(x.shape)
    # mostly valid multiples (>= 1); a 0 now and then makes TILE (or a REQUIRE) reject the graph
    a = [d.int(0 if d.chance(10) else 1, 4) for _ in range(r)]
    op = d.choice([*_SHAPE_BINARY, *_SHAPE_UNARY, "CONCAT_SHAPE", "SLICE_SHAPE", "DIM", "ASSERT_EQUAL_SHAPE"])
    if op in _SHAPE_BINARY:
        if op == "SUB_SHAPE":  # mostly a result >= 1
            c = [d.int(0, max(0, p - 1)) if d.chance(90) else d.int(0, 4) for p in a]
        else:
            c = [d.int(0 if d.chance(10) else 1, 4) for _ in range(r)]
        vals = [_SHAPE_BINARY[op](p, q) for p, q in zip(a, c, strict=True)]
        s = _shape_op(b, op, [b.shape_const(a), b.shape_const(c)], r)
    elif op in _SHAPE_UNARY:
        vals = [_SHAPE_UNARY[op](p) for p in a]
        s = _shape_op(b, op, [b.shape_const(a)], r)
    elif op == "CONCAT_SHAPE":
        k = d.int(1, r)
        vals = a[:k] + a[k:]
        parts = [b.shape_const(a[:k])] + ([b.shape_const(a[k:])] if k < r else [])
        s = _shape_op(b, op, parts, r)
    elif op == "SLICE_SHAPE":
        extra = [d.int(1, 4) for _ in range(d.int(0, 2))]
        start = d.int(0, len(extra))
        full = extra[:start] + a + extra[start:]
        start_t = b.const(np.array([start]), "INT32")
        size_t = b.const(np.array([r]), "INT32")
        vals = full[start:start + r]
        s = _shape_op(b, op, [b.shape_const(full), start_t.name, size_t.name], r)
    elif op == "DIM":
        # TILE by each dimension of x itself: [d0, d1, ...] from DIMs joined by CONCAT_SHAPE
        dims = [_shape_op(b, "DIM", [x.name], 1, axis) for axis in range(r)]
        vals = list(x.shape)
        s = _shape_op(b, "CONCAT_SHAPE", dims, r) if r > 1 else dims[0]
    else:  # ASSERT_EQUAL_SHAPE of x's shape (via DIM) with a constant, then TILE by ones
        dims = [_shape_op(b, "DIM", [x.name], 1, axis) for axis in range(r)]
        got = _shape_op(b, "CONCAT_SHAPE", dims, r) if r > 1 else dims[0]
        other = list(x.shape) if d.chance(80) else [v + 1 for v in x.shape]
        broadcast = d.bool()
        b._op("ASSERT_EQUAL_SHAPE", [got, b.shape_const(other)], [], "AssertEqualShapeAttribute", broadcast)
        vals = [1] * r
        s = b.shape_const(vals)
    out_shape = tuple(x.shape[i] * max(1, v if v is not None else 1) for i, v in enumerate(vals))
    return b.op("TILE", [x, s], out_shape, "INT8")


def v_matmul_t(d: Draw, b: Builder) -> T:
    n, h, c, w = d.int(1, 2), d.int(1, 4), d.int(1, 8), d.int(1, 4)
    dd = 1 if d.chance(30) else n
    if d.bool():
        dt = d.choice(["INT8", "INT16"])
        a, bb = b.input((n, h, c), dt), b.input((dd, w, c), dt)
        zp = [d.int(-128, 127) if dt == "INT8" and d.chance(50) else 0 for _ in range(2)]
        ins = [a, bb, b.const(np.array([zp[0]]), dt), b.const(np.array([zp[1]]), dt)]
        return b.op("MATMUL_T", ins, (n, h, w), "INT32" if dt == "INT8" else "INT48", "MatMulTAttribute")
    at, bt = d.choice(["FP32", "FP16", "BF16"]), d.choice(["FP32", "FP16", "BF16"])
    if "FP32" in (at, bt):
        out = "FP32"
    else:
        out = d.choice(["FP16", "FP32"] if (at, bt) == ("FP16", "FP16") else ["BF16", "FP32"])
    a, bb = b.input((n, h, c), at), b.input((dd, w, c), bt)
    ins = [a, bb, b.const(np.array([0.0]), at), b.const(np.array([0.0]), bt)]
    return b.op("MATMUL_T", ins, (n, h, w), out, "MatMulTAttribute")


def v_row_gather(d: Draw, b: Builder) -> T:
    dt = d.choice(["INT8", "INT16", "INT32", "FP32", "FP16"])
    n, k, c, w = d.int(1, 2), d.int(1, 6), d.int(1, 4), d.int(1, 4)
    rows = d.int(1, k)
    values = b.input((n, k, c), dt)
    hi = k - rows if d.chance(95) else k  # now and then an index past the end: REQUIRE
    idx_dt = d.choice(["INT32", "INT64"])
    idx = b.input((n, w), idx_dt, value=b.rng.integers(0, hi, (n, w), endpoint=True))
    count = b.const(np.array([rows]), "INT32")
    return b.op("ROW_GATHER", [values, idx, count], (n, w * rows, c), dt, "RowGatherAttribute")


def v_pool_adaptive(d: Draw, b: Builder) -> T:
    dt = d.choice(["INT8", "INT16", "FP32", "FP16"])
    (kh, kw), ((ih, pt, pbm, sy, oh), (iw, pl, pr, sx, ow)) = _pool_geometry(d, None)
    x = b.input((d.int(1, 2), ih, iw, d.int(1, 3)), dt)
    n, c = x.shape[0], x.shape[3]
    window = [b.shape_const([kh, kw]), b.shape_const([sy, sx]), b.shape_const([pt, pbm, pl, pr])]
    if d.bool():
        return b.op("MAX_POOL2D_ADAPTIVE", [x, *window], (n, oh, ow, c), dt, "MaxPool2dAdaptiveAttribute",
                    ts.NanPropagationMode.PROPAGATE)
    zero = 0.0 if dt.startswith("FP") else 0
    izp = b.const(np.array([d.int(-128, 127) if dt == "INT8" and d.chance(50) else zero]), dt)
    ozp = b.const(np.array([d.int(-128, 127) if dt == "INT8" and d.chance(50) else zero]), dt)
    acc = ts.DType.INT32 if dt in ("INT8", "INT16") else ts.DType.FP32
    return b.op("AVG_POOL2D_ADAPTIVE", [x, izp, ozp, *window], (n, oh, ow, c), dt, "AvgPool2dAdaptiveAttribute", acc)


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


def v_mx(d: Draw, b: Builder) -> T:
    """One MX block-scaled operator between CAST_TO_BLOCK_SCALED and an fp32/bf16 result."""
    mx = d.choice(MX_TYPES)
    op = d.choice(["CAST", "MATMUL_T_BLOCK_SCALED", "CONV2D_BLOCK_SCALED", "RESHAPE_BLOCK_SCALED",
                   "ROW_GATHER_BLOCK_SCALED"])
    c = 32 * d.int(1, 2)
    if op == "CAST":
        data, scale = _to_mx(d, b, (*small_shape(d, d.int(0, 2), 3), c), mx)
        return _from_mx(d, b, data, scale)
    if op == "MATMUL_T_BLOCK_SCALED":
        n, h, w = d.int(1, 2), d.int(1, 3), d.int(1, 3)
        dd = 1 if d.chance(30) else n
        a, sa = _to_mx(d, b, (n, h, c), mx)
        bb, sb = _to_mx(d, b, (dd, w, c), mx)
        return b.op(op, [a, sa, bb, sb], (n, h, w), "FP32", "MatMulTBlockScaledAttribute", BS32)
    if op == "CONV2D_BLOCK_SCALED":
        from .strategies import _conv_geometry

        kh, kw = d.int(1, 3), d.int(1, 3)
        ih, pt, pbm, sy, oh = _conv_geometry(d, kh, 1)
        iw, pl, pr, sx, ow = _conv_geometry(d, kw, 1)
        n, oc = d.int(1, 2), d.int(1, 3)
        x, sx_ = _to_mx(d, b, (n, ih, iw, c), mx)
        w, sw = _to_mx(d, b, (oc, kh, kw, c), mx)
        bias = b.const(b.values((oc if d.bool() else 1,), "FP32"), "FP32")
        geo = [b.shape_const([pt, pbm, pl, pr]), b.shape_const([sy, sx]), b.shape_const([1, 1])]
        return b.op(op, [x, sx_, w, sw, bias, *geo], (n, oh, ow, oc), "FP32", "Conv2dBlockScaledAttribute", BS32)
    if op == "RESHAPE_BLOCK_SCALED":
        lead = d.int(1, 4)
        data, scale = _to_mx(d, b, (lead, 2, c), mx)
        new = (2 * lead, c) if d.bool() else (lead, 2 * c)
        nd, ns = b.tensor(new, mx), b.tensor((new[0], new[1] // 32), "FP8UE8M0")
        b._op(op, [data.name, scale.name, b.shape_const(new)], [nd.name, ns.name], "ReshapeBlockScaledAttribute", BS32)
        return _from_mx(d, b, nd, ns)
    n, k, w = d.int(1, 2), d.int(1, 5), d.int(1, 3)
    rows = d.int(1, k)
    data, scale = _to_mx(d, b, (n, k, c), mx)
    idx = b.input((n, w), "INT32", value=b.rng.integers(0, k - rows, (n, w), endpoint=True))
    count = b.const(np.array([rows]), "INT32")
    od, os_ = b.tensor((n, w * rows, c), mx), b.tensor((n, w * rows, c // 32), "FP8UE8M0")
    b._op(op, [data.name, scale.name, idx.name, count.name], [od.name, os_.name], "RowGatherBlockScaledAttribute", BS32)
    return _from_mx(d, b, od, os_)


V11_BUILDERS = {
    "SHAPE": v_shape_ops,
    "MATMUL_T": v_matmul_t,
    "ROW_GATHER": v_row_gather,
    "POOL2D_ADAPTIVE": v_pool_adaptive,
    "MX": v_mx,
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
