"""Random valid TOSA 1.0 graphs for differential fuzzing, built with ``tosa_serializer``.

Every builder takes a :class:`Draw` (the source of structural choices) and a :class:`Builder`
(a thin layer over ``tosa_serializer``) and appends one operator, returning the new tensor. Two
kinds of :class:`Draw` exist so the same builders serve both

* hypothesis (:func:`single_op_cases`, :func:`multi_op_cases`, :func:`fp_cases` strategies;
  structural choices shrink, tensor data comes from a drawn seed), and
* the long run in ``benchmarks/fuzz_long.py`` (:class:`RandomDraw`, reproducible per seed:
  ``case_from_seed(kind, seed)``).

Graphs are built to be valid (shapes, zero points, shifts and ranges follow the spec's ERROR_IF
and REQUIRE rules) most of the time; a small share deliberately hits REQUIRE limits, where both
executors must report "unpredictable".
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import tosa_serializer as ts
from hypothesis import strategies as st

# --------------------------------------------------------------------------- draws


class Draw:
    """Structural choices (integers, choices, booleans) and a seed for tensor data."""

    def int(self, lo: int, hi: int) -> int:  # inclusive
        raise NotImplementedError

    def choice(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def bool(self) -> bool:
        return self.int(0, 1) == 1

    def chance(self, percent: int) -> bool:
        """True with roughly ``percent`` % probability."""
        return self.int(0, 99) < percent


class HypothesisDraw(Draw):
    def __init__(self, draw) -> None:
        self._draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))


class RandomDraw(Draw):
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)


# --------------------------------------------------------------------------- builder

_RAW = {"BF16": ("V2", ml_dtypes.bfloat16), "FP8E4M3": ("V1", ml_dtypes.float8_e4m3fn),
        "FP8E5M2": ("V1", ml_dtypes.float8_e5m2)}
_NP = {"BOOL": np.bool_, "INT4": np.int8, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
       "INT48": np.int64, "FP32": np.float32, "FP16": np.float16, "BF16": ml_dtypes.bfloat16}
_BITS = {"INT4": 4, "INT8": 8, "INT16": 16, "INT32": 32, "INT48": 48}


def int_range(dtype: str) -> tuple[int, int]:
    bits = _BITS[dtype]
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


@dataclass
class T:
    """A tensor of the graph being built."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class FuzzCase:
    """A built graph, its input values (by name) and what it contains."""

    data: bytes
    inputs: dict[str, np.ndarray]
    ops: list[str]
    label: str = ""

    def __repr__(self) -> str:  # hypothesis prints this on failure
        shapes = {k: (str(v.dtype), list(v.shape)) for k, v in self.inputs.items()}
        return f"FuzzCase({self.label!r}, ops={self.ops}, inputs={shapes})"


@dataclass
class Builder:
    """Appends tensors and operators to the entry block of a fresh TOSA 1.0 graph."""

    rng: np.random.Generator
    ser: object = None
    ops: list[str] = field(default_factory=list)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    count: int = 0
    minor: int = 0  # TOSA 1.<minor>: 1 for the 1.1 draft operators (strategies_11)

    def __post_init__(self) -> None:
        self.ser = ts.TosaSerializer("", ts.ConstMode.EMBED, 1, self.minor, 0, self.minor > 0)
        self.block = self.ser.currRegion.currBasicBlock

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def tensor(self, shape, dtype: str, data=None, prefix: str = "t") -> T:
        name = self._name(prefix)
        self.block.addTensor(name, list(shape), ts.DType.__members__[dtype], data)
        return T(name, tuple(int(d) for d in shape), dtype)

    def input(self, shape, dtype: str, value: np.ndarray | None = None, **kw) -> T:
        t = self.tensor(shape, dtype, prefix="in")
        if value is None:
            value = self.values(shape, dtype, **kw)
        self.block.addInput(t.name)
        self.inputs[t.name] = to_reference(value, dtype)
        return t

    def const(self, value, dtype: str) -> T:
        arr = np.asarray(value)
        if dtype in _RAW:
            data = np.asarray(arr, dtype=_RAW[dtype][1])
        elif dtype == "INT4":
            data = [int(v) for v in arr.reshape(-1)]  # serializer refuses numpy INT4
        else:
            data = arr.astype(_NP[dtype])
        t = self.tensor(arr.shape, dtype, data=data, prefix="c")
        self._op("CONST", [], [t.name], "ConstAttribute")
        return t

    def shape_const(self, values) -> str:
        name = self._name("s")
        vals = [int(v) for v in values]
        self.block.addShape(name, len(vals), vals if vals else [0])
        self._op("CONST_SHAPE", [], [name], "ConstShapeAttribute")
        return name

    def _op(self, op: str, ins, outs, attr_method: str, *args) -> None:
        attr = ts.TosaSerializerAttribute()
        getattr(attr, attr_method)(*args)
        self.block.addOperator(ts.Op.__members__[op], list(ins), list(outs), attr)
        if op not in ("CONST", "CONST_SHAPE"):
            self.ops.append(op)

    def op(self, op: str, ins, shape, dtype: str, attr_method: str | None = None, *args) -> T:
        out = self.tensor(shape, dtype)
        method = attr_method or (_camel(op) + "Attribute")
        self._op(op, [i if isinstance(i, str) else i.name for i in ins], [out.name], method, *args)
        return out

    def values(self, shape, dtype: str, lo=None, hi=None, extremes: bool = True) -> np.ndarray:
        """Random values of ``dtype`` (working numpy form)."""
        shape = tuple(shape)
        if dtype == "BOOL":
            return self.rng.integers(0, 2, shape).astype(bool)
        if dtype in _BITS:
            dlo, dhi = int_range(dtype)
            lo = dlo if lo is None else max(lo, dlo)
            hi = dhi if hi is None else min(hi, dhi)
            v = self.rng.integers(lo, hi, shape, endpoint=True, dtype=np.int64)
            if extremes and v.size and self.rng.random() < 0.3:
                flat = v.reshape(-1)
                k = max(1, flat.size // 8)
                idx = self.rng.integers(0, flat.size, k)
                flat[idx] = self.rng.choice([lo, hi], k)
            return v.astype(_NP[dtype])
        scale = 1.0 if hi is None else float(hi)
        v = self.rng.standard_normal(shape) * scale
        if lo is not None:
            v = np.abs(v) + lo
        return np.asarray(v).astype(_NP[dtype] if dtype not in _RAW else _RAW[dtype][1])

    def finish(self, outputs: list[T], label: str = "") -> FuzzCase:
        for t in outputs:
            self.block.addOutput(t.name)
        return FuzzCase(bytes(self.ser.serialize()), dict(self.inputs), list(self.ops), label)


def to_reference(value: np.ndarray, dtype: str) -> np.ndarray:
    arr = np.asarray(value)
    if dtype in _RAW:
        return np.ascontiguousarray(arr.astype(_RAW[dtype][1])).view(_RAW[dtype][0])
    return arr.astype(_NP[dtype])


def _camel(op: str) -> str:
    special = {"MATMUL": "MatMul", "FFT2D": "FFT2d", "RFFT2D": "RFFT2d", "INTDIV": "IntDiv"}
    if op in special:
        return special[op]
    return "".join(part.capitalize() for part in op.split("_")).replace("2D", "2d").replace("3D", "3d")


def clamp_bytes(value, dtype: str) -> list[int]:
    """CLAMP's min_val/max_val attribute bytes for ``dtype``."""
    if dtype in _BITS:
        return list(int(value).to_bytes(_BITS[dtype] // 8, "little", signed=True))
    if dtype in _RAW:
        return list(np.asarray([value], dtype=_RAW[dtype][1]).tobytes())
    return list(np.asarray([value], dtype=_NP[dtype]).tobytes())


# --------------------------------------------------------------------------- shapes


def small_shape(d: Draw, rank: int | None = None, max_dim: int = 5) -> tuple[int, ...]:
    rank = d.int(1, 4) if rank is None else rank
    return tuple(d.int(1, max_dim) for _ in range(rank))


def broadcast_partner(d: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if d.chance(25) else s for s in shape)


def _nhwc(d: Draw, max_hw: int = 6, max_c: int = 4) -> tuple[int, int, int, int]:
    return (d.int(1, 2), d.int(1, max_hw), d.int(1, max_hw), d.int(1, max_c))


# --------------------------------------------------------------------------- INT operator builders
# Each takes (draw, builder, x) and returns the output tensor; x may be None (make an input).


def _reshape_to(b: Builder, x: T, shape: tuple[int, ...]) -> T:
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
        return _reshape_to(b, x, (1, h, rest // h, last))
    if rank == 3:
        return _reshape_to(b, x, (1, rest, last))
    return _reshape_to(b, x, (size,))


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


def _conv_geometry(d: Draw, k: int, dil: int, in_size: int | None = None) -> tuple[int, int, int, int, int]:
    """(input size, pad_before, pad_after, stride, output size) with exact division."""
    for _ in range(20):
        stride = d.int(1, 2)
        out = d.int(1, 4)
        pa, pb = d.int(0, k - 1 if k > 1 else 0), d.int(0, k - 1 if k > 1 else 0)
        size = (out - 1) * stride + (k - 1) * dil + 1 - pa - pb
        if size >= 1 and (in_size is None or size == in_size):
            return size, pa, pb, stride, out
    return (k - 1) * dil + 1, 0, 0, 1, 1


def b_conv(d: Draw, b: Builder, x: T | None, depthwise: bool | None = None) -> T:
    depthwise = d.bool() if depthwise is None else depthwise
    if x is not None and (len(x.shape) != 4 or x.dtype not in ("INT8", "INT16")):
        x = _as_rank(d, b, x, 4, ("INT8", "INT16"))
    in_dtype = x.dtype if x is not None else d.choice(["INT8", "INT8", "INT16"])
    w_dtype = "INT4" if in_dtype == "INT8" and d.chance(15) else "INT8"
    acc = "INT48" if in_dtype == "INT16" else "INT32"
    kh, kw = d.int(1, 3), d.int(1, 3)
    dy, dx = (d.int(1, 2), d.int(1, 2)) if d.chance(30) else (1, 1)
    ih, pt, pbm, sy, oh = _conv_geometry(d, kh, dy, x.shape[1] if x is not None else None)
    iw, pl, pr, sx, ow = _conv_geometry(d, kw, dx, x.shape[2] if x is not None else None)
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
        x = b.input(_nhwc(d, 4), in_dtype)
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


def _pool_geometry(d: Draw, x: T | None):
    kh, kw = d.int(1, 3), d.int(1, 3)
    fits = []
    for axis, k in ((1, kh), (2, kw)):
        for _ in range(20):
            s = d.int(1, 2)
            o = d.int(1, 3)
            pa, pb = d.int(0, k - 1), d.int(0, k - 1)
            size = (o - 1) * s + k - pa - pb
            if size >= 1 and (x is None or size == x.shape[axis]):
                fits.append((size, pa, pb, s, o))
                break
        else:
            if x is None:
                fits.append((k, 0, 0, 1, 1))
            else:
                size = x.shape[axis]
                k = 1
                fits.append((size, 0, 0, 1, size))
                if axis == 1:
                    kh = 1
                else:
                    kw = 1
    return (kh, kw), fits


def b_pool(d: Draw, b: Builder, x: T | None, avg: bool | None = None) -> T:
    avg = d.bool() if avg is None else avg
    allowed = ("INT8", "INT16")
    if x is not None and (len(x.shape) != 4 or x.dtype not in allowed):
        x = _as_rank(d, b, x, 4, allowed)
    (kh, kw), ((ih, pt, pbm, sy, oh), (iw, pl, pr, sx, ow)) = _pool_geometry(d, x)
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
    lo, hi = int_range(x.dtype) if x.dtype in _BITS else (0, 1)
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
    bits = _BITS[x.dtype]
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
        return b.op(op, [x, y], x.shape, out_dtype, _camel(op) + "Attribute", ts.NanPropagationMode.PROPAGATE)
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
        x = b.input(_nhwc(d, 4, 3), d.choice(["INT8", "INT16"]))
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

# --------------------------------------------------------------------------- FP builders

_FP = ["FP32", "FP16", "BF16"]


def f_binary(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM"])
    dtype = x.dtype if x is not None else d.choice(_FP)
    if x is None:
        x = b.input(small_shape(d), dtype)
    y = b.input(broadcast_partner(d, x.shape), dtype)
    if op == "MUL":
        return b.op(op, [x, y, b.const(np.array([0], np.int8), "INT8")], x.shape, dtype)
    if op in ("MAXIMUM", "MINIMUM"):
        return b.op(op, [x, y], x.shape, dtype, _camel(op) + "Attribute", ts.NanPropagationMode.PROPAGATE)
    return b.op(op, [x, y], x.shape, dtype)


def f_unary(d: Draw, b: Builder, x: T | None) -> T:
    op = d.choice(["EXP", "TANH", "SIGMOID", "RECIPROCAL", "RSQRT", "ABS", "FLOOR", "CEIL", "NEGATE",
                   "LOG", "SIN", "COS", "ERF"])
    positive = op in ("RSQRT", "LOG", "RECIPROCAL")
    if x is None:
        x = b.input(small_shape(d), d.choice(_FP), value=None, lo=0.25 if positive else None)
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
    ih, pt, pbm, sy, oh = _conv_geometry(d, kh, 1)
    iw, pl, pr, sx, ow = _conv_geometry(d, kw, 1)
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
        x = b.input(small_shape(d), src, value=None, hi=40.0 if src in _FP else None)
        targets = {"INT8": _FP, "INT16": _FP, "INT32": _FP, "FP32": ["FP16", "BF16", "INT8", "INT16", "INT32"],
                   "FP16": ["FP32", "INT8", "INT16", "INT32"], "BF16": ["FP32", "INT8", "INT16", "INT32"]}
        return b.op("CAST", [x], x.shape, d.choice(targets[src]))
    if op == "CLAMP":
        x = b.input(small_shape(d), dtype)
        lo, hi = sorted((float(b.rng.standard_normal()), float(b.rng.standard_normal())))
        return b.op("CLAMP", [x], x.shape, dtype, "ClampAttribute", clamp_bytes(lo, dtype),
                    clamp_bytes(hi, dtype), ts.NanPropagationMode.PROPAGATE)
    if op in ("REDUCE_SUM", "REDUCE_MAX"):
        x = b.input(small_shape(d), dtype)
        axis = d.int(0, len(x.shape) - 1)
        shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape))
        if op == "REDUCE_SUM":
            return b.op(op, [x], shape, dtype, "ReduceSumAttribute", axis)
        return b.op(op, [x], shape, dtype, "ReduceMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)
    if op == "RESCALE_IN":  # quantize: FP32 -> CAST INT8 path of many models
        x = b.input(small_shape(d), "FP32", hi=100.0)
        return b.op("CAST", [x], x.shape, "INT8")
    (kh, kw), ((ih, pt, pbm, sy, oh), (iw, pl, pr, sx, ow)) = _pool_geometry(d, None)
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

# --------------------------------------------------------------------------- cases

#: Ops that can follow in a chain (shape-flexible, take any int tensor).
_CHAIN = ["RESCALE", "CLAMP", "TABLE", "CAST", "RESHAPE", "TRANSPOSE", "PAD", "ADD/SUB", "MUL",
          "REDUCE", "SLICE/TILE/REVERSE", "ELEMENTWISE", "UNARY", "CONCAT", "SELECT",
          "CONV2D", "DEPTHWISE_CONV2D", "MAX_POOL2D", "AVG_POOL2D", "MATMUL", "GATHER/SCATTER"]


def build_single(d: Draw, seed: int, kind: str | None = None) -> FuzzCase:
    """One INT-profile operator on fresh inputs."""
    kind = kind or d.choice(sorted(INT_BUILDERS))
    b = Builder(np.random.default_rng(seed))
    out = INT_BUILDERS[kind](d, b, None)
    return b.finish([out], label=f"single:{kind}:seed{seed}")


def build_fp(d: Draw, seed: int, kind: str | None = None) -> FuzzCase:
    """One floating-point operator."""
    kind = kind or d.choice(sorted(FP_BUILDERS))
    b = Builder(np.random.default_rng(seed))
    out = FP_BUILDERS[kind](d, b, None)
    return b.finish([out], label=f"fp:{kind}:seed{seed}")


def build_multi(d: Draw, seed: int) -> FuzzCase:
    """A small quantized network: an int8 input, 2-5 chained ops, then a RESCALE back to int8.

    Some intermediate tensors are also graph outputs.
    """
    b = Builder(np.random.default_rng(seed))
    x = b.input(_nhwc(d, 5, 3) if d.chance(60) else small_shape(d), "INT8")
    outputs = []
    for _ in range(d.int(2, 5)):
        kind = d.choice(_CHAIN)
        x = INT_BUILDERS[kind](d, b, x)
        if x.dtype == "INT48":  # only RESCALE consumes INT48
            x = b_rescale(d, b, x)
        if not x.shape:  # ARGMAX of a vector: rank 0; the builders want rank >= 1
            x = _reshape_to(b, x, (1,))
        if int(np.prod(x.shape)) > 4096:  # keep graphs small: crop with a SLICE
            size = [min(s, 4) for s in x.shape]
            x = b.op("SLICE", [x, b.shape_const([0] * len(size)), b.shape_const(size)], tuple(size), x.dtype)
        if d.chance(20):
            outputs.append(x)
    if x.dtype in ("INT32", "INT48", "INT16") and d.chance(70):
        x = b_rescale(d, b, x, out_dtype="INT8")
    outputs.append(x)
    return b.finish(outputs, label=f"multi:seed{seed}")


@st.composite
def single_op_cases(draw, kinds: list[str] | None = None) -> FuzzCase:
    """Hypothesis strategy: one INT-profile operator graph."""
    d = HypothesisDraw(draw)
    kind = draw(st.sampled_from(sorted(kinds or INT_BUILDERS)))
    return build_single(d, draw(st.integers(0, 2**32 - 1)), kind)


@st.composite
def fp_cases(draw) -> FuzzCase:
    """Hypothesis strategy: one floating-point operator graph."""
    d = HypothesisDraw(draw)
    return build_fp(d, draw(st.integers(0, 2**32 - 1)))


@st.composite
def multi_op_cases(draw) -> FuzzCase:
    """Hypothesis strategy: a small multi-operator quantized graph."""
    d = HypothesisDraw(draw)
    return build_multi(d, draw(st.integers(0, 2**32 - 1)))


def case_from_seed(kind: str, seed: int) -> FuzzCase:
    """Reproducible case for the long run: ``kind`` is ``single``, ``multi``, ``fp`` or ``v11``."""
    d = RandomDraw(seed)
    if kind == "v11":
        from .strategies_11 import build_v11

        return build_v11(d, seed)
    if kind == "single":
        return build_single(d, seed)
    if kind == "fp":
        return build_fp(d, seed)
    return build_multi(d, seed)
