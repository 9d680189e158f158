"""The fuzzer's building blocks: structural draws, a graph builder over ``tosa_serializer``,
dtype helpers and shape / window geometry shared by the INT, FP and TOSA 1.1 builders.

Every operator builder (:mod:`.strategies_int`, :mod:`.strategies_fp`, :mod:`.strategies_11`)
takes a :class:`Draw` (the source of structural choices) and a :class:`Builder` (a thin layer over
``tosa_serializer``). Two kinds of :class:`Draw` exist so the same builders serve both hypothesis
(:class:`HypothesisDraw`: structural choices shrink, tensor data comes from a drawn seed) and the
long run in ``benchmarks/fuzz_long.py`` (:class:`RandomDraw`, reproducible per seed).
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
INT_BITS = {"INT4": 4, "INT8": 8, "INT16": 16, "INT32": 32, "INT48": 48, "INT64": 64}


def int_range(dtype: str) -> tuple[int, int]:
    bits = INT_BITS[dtype]
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
        shapes = {k: (str(v.dtype), list(v.shape)) if not isinstance(v, tuple) else ("(values, scales)", list(v[0].shape))
                  for k, v in self.inputs.items()}
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

    def block_scaled_input(self, shape, value: str) -> T:
        """A graph input of block-scaled type bs32_fp8ue8m0_<value> (:func:`random_block_scaled`),
        given as the (values, scales) pair."""
        from tosa_verify.dtypes import block_scaled_name, to_reference_form

        name, dt = self._name("in"), block_scaled_name(value)
        self.block.addTensor(name, list(shape), ts.ScaledDType.__members__[dt], None, None)
        self.block.addInput(name)
        self.inputs[name] = to_reference_form(random_block_scaled(self.rng, shape, value), dt)
        return T(name, tuple(int(d) for d in shape), dt)

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
        method = attr_method or (camel_op(op) + "Attribute")
        self._op(op, [i if isinstance(i, str) else i.name for i in ins], [out.name], method, *args)
        return out

    def values(self, shape, dtype: str, lo=None, hi=None, extremes: bool = True) -> np.ndarray:
        """Random values of ``dtype`` (working numpy form)."""
        shape = tuple(shape)
        if dtype == "BOOL":
            return self.rng.integers(0, 2, shape).astype(bool)
        if dtype in INT_BITS:
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


def random_block_scaled(rng: np.random.Generator, shape, value: str) -> np.ndarray:
    """A working array of type bs32_fp8ue8m0_<value>: random finite element codes, a random
    power-of-two scale (2**-15 .. 2**15) per 32 innermost elements."""
    from tosa_verify.dtypes import block_scaled_name, dtype_info, join_block_scaled

    shape = tuple(shape)
    info = dtype_info(value)
    if value == "MXINT8":
        values = rng.integers(-128, 128, shape).astype(np.int8)
    else:
        values = rng.integers(0, 1 << info.bits, shape).astype(np.uint8).view(info.working)
        values = np.where(np.isfinite(values.astype(np.float32)), values, info.working.type(0))
    scales = rng.integers(112, 143, (*shape[:-1], shape[-1] // 32)).astype(np.uint8)
    return join_block_scaled(values, scales.view(ml_dtypes.float8_e8m0fnu), block_scaled_name(value))


def camel_op(op: str) -> str:
    special = {"MATMUL": "MatMul", "FFT2D": "FFT2d", "RFFT2D": "RFFT2d", "INTDIV": "IntDiv"}
    if op in special:
        return special[op]
    return "".join(part.capitalize() for part in op.split("_")).replace("2D", "2d").replace("3D", "3d")


def clamp_bytes(value, dtype: str) -> list[int]:
    """CLAMP's min_val/max_val attribute bytes for ``dtype``."""
    if dtype in INT_BITS:
        return list(int(value).to_bytes(INT_BITS[dtype] // 8, "little", signed=True))
    if dtype in _RAW:
        return list(np.asarray([value], dtype=_RAW[dtype][1]).tobytes())
    return list(np.asarray([value], dtype=_NP[dtype]).tobytes())


# --------------------------------------------------------------------------- shapes


def small_shape(d: Draw, rank: int | None = None, max_dim: int = 5) -> tuple[int, ...]:
    rank = d.int(1, 4) if rank is None else rank
    return tuple(d.int(1, max_dim) for _ in range(rank))


def broadcast_partner(d: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if d.chance(25) else s for s in shape)


def nhwc_shape(d: Draw, max_hw: int = 6, max_c: int = 4) -> tuple[int, int, int, int]:
    return (d.int(1, 2), d.int(1, max_hw), d.int(1, max_hw), d.int(1, max_c))


def conv_geometry(d: Draw, k: int, dil: int, in_size: int | None = None) -> tuple[int, int, int, int, int]:
    """(input size, pad_before, pad_after, stride, output size) with exact division."""
    for _ in range(20):
        stride = d.int(1, 2)
        out = d.int(1, 4)
        pa, pb = d.int(0, k - 1 if k > 1 else 0), d.int(0, k - 1 if k > 1 else 0)
        size = (out - 1) * stride + (k - 1) * dil + 1 - pa - pb
        if size >= 1 and (in_size is None or size == in_size):
            return size, pa, pb, stride, out
    return (k - 1) * dil + 1, 0, 0, 1, 1


def pool_geometry(d: Draw, x: T | None):
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
