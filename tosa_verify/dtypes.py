"""TOSA dtypes and their numpy representation.

Inside the interpreter every TOSA value is a numpy array of a fixed *working* dtype:

=========  ==========================  =====================================
TOSA       working numpy dtype         notes
=========  ==========================  =====================================
BOOL       bool
INT4       int8                        values in [-7, 7] (spec int4_t; -8 is invalid)
INT8       int8
INT16      int16                       also carries uint16 when an op says unsigned
INT32      int32
INT48      int64                       values in [-2**47, 2**47 - 1]
INT64      int64
SHAPE      int64                       shape-operator values
FP16       float16
BF16       ml_dtypes.bfloat16
FP32       float32
FP8E4M3    ml_dtypes.float8_e4m3fn
FP8E5M2    ml_dtypes.float8_e5m2
=========  ==========================  =====================================

At the API boundary we accept and return what ``tosa_reference_model.run`` uses, so the two
executors are interchangeable: BF16 as ``|V2`` and FP8 as ``|V1`` raw views (``uint8`` is also
accepted for FP8 inputs, as the conformance generator writes FP8E5M2 that way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .errors import TosaFormatError, TosaInputError, TosaUnsupportedError, TosaValidationError


@dataclass(frozen=True)
class DTypeInfo:
    """Facts about one TOSA dtype."""

    name: str
    code: int  # value in tosa.DType
    working: np.dtype  # numpy dtype the interpreter computes in
    bits: int  # storage bits of one element in a flatbuffer constant
    is_int: bool = False
    is_float: bool = False

    @property
    def min(self) -> int:
        """Smallest signed value (integer dtypes only)."""
        return -(1 << (self.bits - 1))

    @property
    def max(self) -> int:
        """Largest signed value (integer dtypes only)."""
        return (1 << (self.bits - 1)) - 1


def _info(name, code, working, bits, *, is_int=False, is_float=False) -> DTypeInfo:
    return DTypeInfo(name, code, np.dtype(working), bits, is_int, is_float)


# Codes follow tosa.DType in tosa-tools (the flatbuffer schema).
DTYPES: dict[str, DTypeInfo] = {
    i.name: i
    for i in (
        _info("BOOL", 1, np.bool_, 8),
        _info("INT4", 2, np.int8, 4, is_int=True),
        _info("INT8", 3, np.int8, 8, is_int=True),
        _info("INT16", 4, np.int16, 16, is_int=True),
        _info("INT32", 5, np.int32, 32, is_int=True),
        _info("INT48", 6, np.int64, 48, is_int=True),
        _info("FP32", 7, np.float32, 32, is_float=True),
        _info("FP16", 8, np.float16, 16, is_float=True),
        _info("BF16", 9, ml_dtypes.bfloat16, 16, is_float=True),
        _info("SHAPE", 10, np.int64, 64, is_int=True),
        _info("FP8E4M3", 11, ml_dtypes.float8_e4m3fn, 8, is_float=True),
        _info("FP8E5M2", 12, ml_dtypes.float8_e5m2, 8, is_float=True),
        _info("INT64", 17, np.int64, 64, is_int=True),
    )
}
DTYPE_BY_CODE: dict[int, DTypeInfo] = {i.code: i for i in DTYPES.values()}

#: Dtypes whose reference-model numpy form is a raw byte view.
_RAW_VIEW = {"BF16": np.dtype("V2"), "FP8E4M3": np.dtype("V1"), "FP8E5M2": np.dtype("V1")}


def dtype_info(name_or_code: str | int) -> DTypeInfo:
    """Look up a TOSA dtype by name (``"INT8"``) or flatbuffer code (``3``).

    >>> dtype_info("INT8").working
    dtype('int8')
    """
    table = DTYPES if isinstance(name_or_code, str) else DTYPE_BY_CODE
    try:
        return table[name_or_code]
    except KeyError:
        raise TosaUnsupportedError(f"unsupported TOSA dtype {name_or_code!r}") from None


def decode_constant(raw: bytes | np.ndarray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Decode a flatbuffer tensor's ``data`` bytes into its working numpy array.

    INT4 is packed two values a byte (low nibble first); INT48 is six little-endian bytes.
    Other dtypes come back as a read-only view of ``raw`` when it is a uint8 array (no copy: a
    loaded graph's constants stay in the file's bytes) and as a copy otherwise.

    >>> decode_constant(bytes([0x21, 0x0F]), "INT4", (3,)).tolist()
    [1, 2, -1]
    """
    info = dtype_info(dtype)
    buf = raw if isinstance(raw, np.ndarray) else np.frombuffer(bytes(raw), dtype=np.uint8)
    count = math.prod(shape)
    if info.name == "INT4":
        need = (count + 1) // 2
        _check_len(buf, need, dtype, shape)
        packed = buf[:need]
        nibbles = np.empty(need * 2, dtype=np.uint8)
        nibbles[0::2] = packed & 0x0F
        nibbles[1::2] = packed >> 4
        values = nibbles[:count].astype(np.int8)
        values[values > 7] -= 16
        if values.size and values.min() < -7:
            # int4_t is [-7, 7]; the reference model silently zeroes such a constant, so reject it.
            raise TosaValidationError(f"INT4 constant of shape {list(shape)} holds -8, outside int4_t [-7, 7]")
        return values.reshape(shape)
    if info.name == "INT48":
        need = count * 6
        _check_len(buf, need, dtype, shape)
        b = buf[:need].reshape(count, 6).astype(np.int64)
        value = np.zeros(count, dtype=np.int64)
        for k in range(6):
            value |= b[:, k] << (8 * k)
        value = np.where(value >= (1 << 47), value - (1 << 48), value)
        return value.reshape(shape)
    if info.name == "BOOL":
        _check_len(buf, count, dtype, shape)
        return buf[:count].astype(bool).reshape(shape)
    itemsize = info.working.itemsize
    _check_len(buf, count * itemsize, dtype, shape)
    values = buf[: count * itemsize].view(info.working.newbyteorder("<")).astype(info.working, copy=False)
    return values.reshape(shape)


def _check_len(buf: np.ndarray, need: int, dtype: str, shape: tuple[int, ...]) -> None:
    if buf.size < need:
        raise TosaFormatError(
            f"constant data of a {dtype} tensor of shape {list(shape)} has {buf.size} bytes, needs {need}"
        )


def to_working(value: np.ndarray, dtype: str, *, what: str = "input") -> np.ndarray:
    """Convert a caller's array (reference-model form or natural form) to the working dtype.

    Integer and float arrays must already have the tensor's natural numpy dtype; raw views
    (``|V2`` for BF16, ``|V1``/``uint8`` for FP8) are reinterpreted, not converted.

    >>> to_working(np.array([1, 2], np.int8), "INT8").dtype
    dtype('int8')
    """
    info = dtype_info(dtype)
    arr = np.asarray(value)
    if info.name in _RAW_VIEW and arr.dtype != info.working:
        if arr.dtype.itemsize == info.working.itemsize and arr.dtype.kind in "Vu":
            # np.require, not ascontiguousarray: the latter turns rank-0 arrays into shape (1,).
            return np.require(arr, requirements="C").view(info.working)
        raise TosaInputError(
            f"{what}: expected {info.name} data as {info.working} or raw {_RAW_VIEW[info.name]}, got {arr.dtype}"
        )
    accepted = {info.working}
    if info.name == "INT48":
        accepted |= {np.dtype(np.int64)}
    if info.name == "INT16":
        accepted |= {np.dtype(np.uint16)}  # unsigned RESCALE inputs
    if info.name == "INT8":
        accepted |= {np.dtype(np.uint8)}
    if arr.dtype not in accepted:
        raise TosaInputError(f"{what}: expected dtype {info.working} for TOSA {info.name}, got {arr.dtype}")
    if arr.dtype != info.working:
        arr = arr.view(info.working)
    if info.name == "INT4" and arr.size and (arr.min() < -7 or arr.max() > 7):
        raise TosaInputError(f"{what}: INT4 values must lie in [-7, 7]")
    return arr


def to_reference_form(value: np.ndarray, dtype: str) -> np.ndarray:
    """Convert a working array to the numpy form ``tosa_reference_model.run`` uses.

    >>> to_reference_form(np.zeros(2, ml_dtypes.bfloat16), "BF16").dtype
    dtype('V2')
    """
    raw = _RAW_VIEW.get(dtype_info(dtype).name)
    if raw is None:
        return value
    return np.require(value, requirements="C").view(raw)  # keeps rank 0 (see to_working)


def natural_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a working array of this TOSA dtype (alias of ``dtype_info(..).working``)."""
    return dtype_info(dtype).working
