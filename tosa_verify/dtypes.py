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
FP6E2M3    ml_dtypes.float6_e2m3fn     TOSA 1.1 draft, EXT-MX* element types
FP6E3M2    ml_dtypes.float6_e3m2fn
FP4E2M1    ml_dtypes.float4_e2m1fn
FP8UE8M0   ml_dtypes.float8_e8m0fnu    MX block scale (2**(e-127), 0xFF is NaN)
MXINT8     int8                        raw two's complement q; the value is q / 64
BS32_*     structured (value, scale)   block-scaled types, see below
=========  ==========================  =====================================

A *block-scaled* tensor (TOSA 1.1 draft, ``block_scale_t<BLOCK_SHAPE_32, fp8ue8m0_t, value_t>``,
named ``BS32_FP8UE8M0_<VALUE>`` after the spec's ``bs32_fp8ue8m0_<value>_t``) is one tensor of
values and one FP8UE8M0 scale per 32 consecutive elements of the innermost dimension. Its working
array has the tensor's own shape and a structured dtype ``[("value", <value working>), ("scale",
float8_e8m0fnu)]``: every element carries its block's scale, so data-movement ops (ROW_GATHER,
RESHAPE, ...) move values and scales together and the interpreter's shape and dtype checks hold.
At the API boundary such a tensor is the pair ``(values, scales)`` in the reference model's file
forms (``<name>.npy`` and ``<name>_scale.npy`` of its CLI), scales of shape
``shape[:-1] + (shape[-1] // 32,)``.

At the API boundary we accept and return what ``tosa_reference_model.run`` uses, so the two
executors are interchangeable: BF16 as ``|V2`` and FP8 as ``|V1`` raw views (``uint8`` is also
accepted for FP8 inputs, as the conformance generator writes FP8E5M2 that way). The TOSA 1.1 MX
types follow the reference model's numpy files too: FP8UE8M0 as ``|V1``, MXINT8 as ``uint8``
(the int8 bits), and FP4E2M1 / FP6E2M3 / FP6E3M2 *packed* in ``uint8`` exactly as in a
flatbuffer constant (two FP4 a byte, four FP6 in three bytes, so the last dimension shrinks to
1/2 or 3/4). Natural ml_dtypes arrays of these types are accepted as well.
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
    #: block-scaled types only: the value type, the scale type and the innermost block size
    value: str = ""
    scale: str = ""
    block: int = 0

    @property
    def is_block_scaled(self) -> bool:
        """True for a block-scaled composite type (``BS32_FP8UE8M0_FP4E2M1``, ...)."""
        return self.block > 0

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
        # TOSA 1.1 draft (EXT-MX*): storage bits as packed in a flatbuffer constant.
        _info("FP6E2M3", 13, ml_dtypes.float6_e2m3fn, 6, is_float=True),
        _info("FP6E3M2", 14, ml_dtypes.float6_e3m2fn, 6, is_float=True),
        _info("FP4E2M1", 15, ml_dtypes.float4_e2m1fn, 4, is_float=True),
        _info("FP8UE8M0", 16, ml_dtypes.float8_e8m0fnu, 8, is_float=True),
        _info("MXINT8", 18, np.int8, 8),
    )
}
DTYPE_BY_CODE: dict[int, DTypeInfo] = {i.code: i for i in DTYPES.values()}

#: Scale type and block shape of the spec's bs32_fp8ue8m0_set_t (tosa.BlockShape.BLOCK_SHAPE_32).
BS_SCALE, BS_BLOCK = "FP8UE8M0", 32
#: The value types of a block-scaled type (the spec's allowed value_t).
BS_VALUE_TYPES = ("FP8E4M3", "FP8E5M2", "FP6E3M2", "FP6E2M3", "FP4E2M1", "MXINT8")


def _block_scaled_info(value: str) -> DTypeInfo:
    v = DTYPES[value]
    working = np.dtype([("value", v.working), ("scale", DTYPES[BS_SCALE].working)])
    # code: the value type's, which is what a flatbuffer tensor's Type field holds
    return DTypeInfo(block_scaled_name(value), v.code, working, v.bits, value=value, scale=BS_SCALE,
                     block=BS_BLOCK)


def block_scaled_name(value: str, scale: str = BS_SCALE, block: int = BS_BLOCK) -> str:
    """Name of the block-scaled type of ``value`` elements (the spec's ``bs32_fp8ue8m0_<value>_t``).

    >>> block_scaled_name("FP4E2M1")
    'BS32_FP8UE8M0_FP4E2M1'
    """
    return f"BS{block}_{scale}_{value}"


#: The block-scaled types (spec: bs32_fp8ue8m0_set_t), by name; looked up by :func:`dtype_info`.
BLOCK_SCALED: dict[str, DTypeInfo] = {i.name: i for i in map(_block_scaled_info, BS_VALUE_TYPES)}

#: Dtypes whose reference-model numpy form is a raw byte view.
_RAW_VIEW = {"BF16": np.dtype("V2"), "FP8E4M3": np.dtype("V1"), "FP8E5M2": np.dtype("V1")}
_RAW_VIEW["FP8UE8M0"] = np.dtype("V1")
#: Sub-byte MX element types: elements per group and bytes per group when packed.
_PACKED = {"FP4E2M1": (2, 1), "FP6E2M3": (4, 3), "FP6E3M2": (4, 3)}


def unpack_subbyte(packed: np.ndarray, dtype: str, count: int) -> np.ndarray:
    """Unpack ``count`` FP4/FP6 element codes (one uint8 each) from their packed bytes.

    FP4: low nibble first. FP6: four 6-bit codes v0..v3 in three bytes, ``b0 = v0 | v1 << 6``,
    ``b1 = v1 >> 2 | v2 << 4``, ``b2 = v2 >> 4 | v3 << 2`` (tosa-tools' serializer layout).

    >>> unpack_subbyte(np.array([0x21], np.uint8), "FP4E2M1", 2).tolist()
    [1, 2]
    """
    b = np.asarray(packed, dtype=np.uint8).reshape(-1)
    per, nbytes = _PACKED[dtype]
    if b.size < -(-count * nbytes // per):
        raise TosaFormatError(f"packed {dtype} data has {b.size} bytes, {count} elements need {-(-count * nbytes // per)}")
    if dtype == "FP4E2M1":
        codes = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(-1)
    else:
        groups = np.zeros((-(-b.size // 3)) * 3, np.uint8)
        groups[: b.size] = b
        b0, b1, b2 = groups[0::3], groups[1::3], groups[2::3]
        codes = np.stack(
            [b0 & 0x3F, (b0 >> 6) | ((b1 & 0x0F) << 2), (b1 >> 4) | ((b2 & 0x03) << 4), b2 >> 2],
            axis=-1,
        ).reshape(-1)
    return codes[:count].astype(np.uint8)


def pack_subbyte(codes: np.ndarray, dtype: str) -> np.ndarray:
    """Pack FP4/FP6 element codes (uint8, one a byte) as :func:`unpack_subbyte` reads them.

    >>> pack_subbyte(np.array([1, 2], np.uint8), "FP4E2M1").tolist()
    [33]
    """
    per, nbytes = _PACKED[dtype]
    c = np.asarray(codes, dtype=np.uint8).reshape(-1)
    groups = np.zeros(-(-c.size // per) * per, np.uint8)
    groups[: c.size] = c
    if dtype == "FP4E2M1":
        out = (groups[0::2] & 0x0F) | (groups[1::2] << 4)
        return out[: -(-c.size // 2)]
    v0, v1, v2, v3 = (groups[k::4] & 0x3F for k in range(4))
    out = np.stack([v0 | (v1 << 6), (v1 >> 2) | (v2 << 4), (v2 >> 4) | (v3 << 2)], axis=-1)
    return out.reshape(-1).astype(np.uint8)[: (c.size * 3 + 3) // 4]


def reference_shape(shape: tuple[int, ...], dtype: str) -> tuple[int, ...]:
    """Shape of a tensor's array in the reference model's numpy form (packed FP4/FP6 shrink).

    >>> reference_shape((2, 64), "FP4E2M1"), reference_shape((2, 64), "INT8")
    ((2, 32), (2, 64))
    """
    name = dtype_info(dtype).name
    return _packed_shape(tuple(shape), name, unpack=False) if name in _PACKED else tuple(shape)


def _packed_shape(shape: tuple[int, ...], dtype: str, *, unpack: bool) -> tuple[int, ...]:
    """Shape of a packed FP4/FP6 array (last dimension scaled) or of its unpacked form."""
    per, nbytes = _PACKED[dtype]
    if not shape:
        return shape
    last = shape[-1] * per // nbytes if unpack else -(-shape[-1] * nbytes // per)
    return (*shape[:-1], last)


def dtype_info(name_or_code: str | int) -> DTypeInfo:
    """Look up a TOSA dtype by name (``"INT8"``) or flatbuffer code (``3``).

    >>> dtype_info("INT8").working
    dtype('int8')
    """
    table = DTYPES if isinstance(name_or_code, str) else DTYPE_BY_CODE
    try:
        return table[name_or_code]
    except KeyError:
        if name_or_code in BLOCK_SCALED:
            return BLOCK_SCALED[name_or_code]
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
        return _int48(buf[:need], count).reshape(shape)
    if info.name in _PACKED:
        per, nbytes = _PACKED[info.name]
        need = -(-count * nbytes // per)
        _check_len(buf, need, dtype, shape)
        return unpack_subbyte(buf[:need], info.name, count).view(info.working).reshape(shape)
    if info.name == "BOOL":
        _check_len(buf, count, dtype, shape)
        return buf[:count].astype(bool).reshape(shape)
    itemsize = info.working.itemsize
    _check_len(buf, count * itemsize, dtype, shape)
    values = buf[: count * itemsize].view(info.working.newbyteorder("<")).astype(info.working, copy=False)
    return values.reshape(shape)


def _int48(raw: np.ndarray, count: int) -> np.ndarray:
    """``count`` six-byte little-endian two's complement values (``raw``, uint8) as int64: a few
    as Python ints (a lowered INT16 graph's INT48 biases and zero points are mostly one value),
    more by widening each to eight bytes with its sign (a handful of numpy calls in all).

    >>> _int48(np.array([0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 5, 0, 0, 0, 0, 0x80], np.uint8), 2).tolist()
    [-2, -140737488355323]
    """
    if count <= 16:
        raw = raw.tobytes()
        return np.array([int.from_bytes(raw[k:k + 6], "little", signed=True) for k in range(0, 6 * count, 6)],
                        np.int64)
    six = raw.reshape(count, 6)
    wide = np.empty((count, 8), np.uint8)
    wide[:, :6] = six
    wide[:, 6:] = (six[:, 5:] >> 7) * np.uint8(255)  # the sign bit copied into the two top bytes
    return wide.view("<i8").reshape(count).astype(np.int64, copy=False)


def _check_len(buf: np.ndarray, need: int, dtype: str, shape: tuple[int, ...]) -> None:
    # (longer data is accepted, as by the reference model, which reads the first ``need`` bytes:
    # serialization_lib pads data to 8 bytes, and ExecuTorch's Arm backend writes a per-channel
    # weight zero point, one value per channel, into a tensor declared [1])
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

    A block-scaled type takes the pair ``(values, scales)`` (or its structured working array).
    """
    info = dtype_info(dtype)
    if info.block:
        return _block_scaled_working(value, info, what)
    arr = np.asarray(value)
    if info.name in _PACKED and arr.dtype == np.uint8 and arr.ndim:
        # the reference model's packed form; the last dimension holds the packed bytes
        shape = _packed_shape(arr.shape, info.name, unpack=True)
        count = int(np.prod(shape, dtype=np.int64))
        return unpack_subbyte(arr, info.name, count).view(info.working).reshape(shape)
    if info.name == "MXINT8" and arr.dtype == np.uint8:
        return arr.view(np.int8)
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


def plain_working(dtype: str) -> np.dtype | None:
    """The working dtype of TOSA ``dtype`` when :func:`to_working` takes an array of that dtype
    as it is and :func:`to_reference_form` returns it as it is; None for the other types (raw
    views, packed and block-scaled types, MXINT8, INT4 with its value check).

    >>> plain_working("INT8"), plain_working("BF16")
    (dtype('int8'), None)

    Memoized by dtype name (a schema-level fact; every run's input binding asks it); an unknown
    dtype raises each time.
    """
    try:
        return _PLAIN_WORKING[dtype]
    except KeyError:
        pass
    info = dtype_info(dtype)
    name = info.name
    plain = None if info.block or name in _PACKED or name in _RAW_VIEW or name in ("MXINT8", "INT4") \
        else info.working
    _PLAIN_WORKING[dtype] = plain
    return plain


_PLAIN_WORKING: dict[str, np.dtype | None] = {}


def to_reference_form(value: np.ndarray, dtype: str) -> np.ndarray:
    """Convert a working array to the numpy form ``tosa_reference_model.run`` uses.

    >>> to_reference_form(np.zeros(2, ml_dtypes.bfloat16), "BF16").dtype
    dtype('V2')

    A block-scaled type gives the pair ``(values, scales)``, each in its own reference form.
    """
    info = dtype_info(dtype)
    if info.block:
        values, scales = split_block_scaled(value, info.name)
        return to_reference_form(values, info.value), to_reference_form(scales, info.scale)
    name = info.name
    if name in _PACKED:
        shape = _packed_shape(value.shape, name, unpack=False)
        return pack_subbyte(np.asarray(value).view(np.uint8), name).reshape(shape)
    if name == "MXINT8":
        return np.asarray(value).view(np.uint8)
    raw = _RAW_VIEW.get(name)
    if raw is None:
        return value
    return np.require(value, requirements="C").view(raw)  # keeps rank 0 (see to_working)


def natural_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a working array of this TOSA dtype (alias of ``dtype_info(..).working``)."""
    return dtype_info(dtype).working


def float_values(value: np.ndarray, dtype: str) -> np.ndarray:
    """The real values of a working array of a float (or MXINT8) dtype, as float64.

    MXINT8 holds q in int8 and means q / 64 (OCP MX spec: two's complement with 6 fraction bits).

    >>> float_values(np.array([64, -32], np.int8), "MXINT8").tolist()
    [1.0, -0.5]

    A block-scaled array gives ``value * scale`` (the spec's ``tensor_read<in_t, out_t>``), exact
    in float64: a value has at most 8 significant bits and a scale is a power of two.
    """
    info = dtype_info(dtype)
    if info.block:
        value = np.asarray(value)
        return float_values(value["value"], info.value) * value["scale"].astype(np.float64)
    if info.name == "MXINT8":
        return np.asarray(value, dtype=np.float64) / 64.0
    return np.asarray(value).astype(np.float64)


# --------------------------------------------------------------------------------------------
# Block-scaled types (TOSA 1.1 draft): joining and splitting (values, scales)
# --------------------------------------------------------------------------------------------


def block_scales_shape(shape: tuple[int, ...], block: int = BS_BLOCK) -> tuple[int, ...]:
    """Shape of the scales of a block-scaled tensor of ``shape``: one per ``block`` innermost elements.

    >>> block_scales_shape((2, 64))
    (2, 2)
    """
    return (*shape[:-1], shape[-1] // block)


def block_shape_error(shape: tuple[int, ...], block: int = BS_BLOCK) -> str:
    """Why ``shape`` cannot hold a block-scaled tensor ("" when it can): the spec reads the scale
    of element ``[..., i]`` at ``[..., i / block]``, so the innermost dimension must be a
    multiple of the block size (rank 0 has none).

    >>> block_shape_error((4, 33))
    'innermost dimension 33 is not a multiple of the block size 32'
    """
    if not shape:
        return "a block-scaled tensor needs rank >= 1 (its innermost dimension holds the blocks)"
    if shape[-1] % block:
        return f"innermost dimension {shape[-1]} is not a multiple of the block size {block}"
    return ""


def join_block_scaled(values: np.ndarray, scales: np.ndarray, dtype: str) -> np.ndarray:
    """The working array of block-scaled type ``dtype`` from working ``values`` and ``scales``.

    Raises ValueError when the shapes do not fit together (callers name the tensor).

    >>> a = join_block_scaled(np.zeros((1, 32), ml_dtypes.float4_e2m1fn),
    ...                       np.ones((1, 1), ml_dtypes.float8_e8m0fnu), "BS32_FP8UE8M0_FP4E2M1")
    >>> a.shape, float(a["scale"][0, 31])
    ((1, 32), 1.0)
    """
    info = dtype_info(dtype)
    problem = block_shape_error(values.shape, info.block)
    want = block_scales_shape(values.shape, info.block) if not problem else None
    if problem or tuple(scales.shape) != want:
        raise ValueError(problem or f"scales of shape {list(scales.shape)} for values of shape "
                         f"{list(values.shape)} (want {list(want)})")
    out = np.empty(values.shape, info.working)
    out["value"] = values
    out["scale"] = np.repeat(scales, info.block, axis=-1)
    return out


def split_block_scaled(value: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, scales) working arrays of a block-scaled working array: the inverse of
    :func:`join_block_scaled` (each block's scale is read from its first element)."""
    info = dtype_info(dtype)
    arr = np.asarray(value)
    return np.ascontiguousarray(arr["value"]), np.ascontiguousarray(arr["scale"][..., :: info.block])


def _block_scaled_working(value, info: DTypeInfo, what: str) -> np.ndarray:
    """A caller's ``(values, scales)`` pair (reference-model or natural forms) as a working array."""
    if isinstance(value, np.ndarray) and value.dtype == info.working:
        return value
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TosaInputError(
            f"{what}: a {info.name} tensor takes the pair (values, scales), got {type(value).__name__}"
        )
    values = to_working(np.asarray(value[0]), info.value, what=f"{what} values")
    scales = to_working(np.asarray(value[1]), info.scale, what=f"{what} scales")
    try:
        return join_block_scaled(values, scales, info.name)
    except ValueError as exc:
        raise TosaInputError(f"{what}: {info.name} {exc}") from None


def decode_block_scaled(raw, scale_raw, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """A block-scaled constant from a flatbuffer tensor's ``data`` (values) and ``scale_data``."""
    info = dtype_info(dtype)
    values = decode_constant(raw, info.value, shape)
    scales = decode_constant(scale_raw, info.scale, block_scales_shape(shape, info.block))
    return join_block_scaled(values, scales, info.name)
