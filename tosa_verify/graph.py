"""The in-memory TOSA graph: regions, blocks, tensors and operators as plain Python values.

Reading follows the flatbuffers module ``tosa`` generated from the TOSA schema and shipped in
tosa-tools: :mod:`tosa_verify._flatbuffer` takes each table's field layout from those generated
accessors and reads the fields with ``struct`` directly (the flatbuffers runtime's per-field
calls dominated loading small graphs). Constant data stays in the file's bytes: a tensor's
``data`` is a read-only numpy view of them (INT4, INT48 and BOOL are decoded into new arrays).
"""

from __future__ import annotations

import functools
import math
import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import numpy as np

from . import _lean_read
from ._edits import Watched, WatchedDict, WatchedList, constructor
from ._flatbuffer import _I32, _U16, _U32, Field, Table, table_layout, unpacker
from .dtypes import (
    BS_BLOCK,
    BS_SCALE,
    BS_VALUE_TYPES,
    DTYPE_BY_CODE,
    block_scaled_name,
    block_shape_error,
    decode_block_scaled,
    decode_constant,
)
from .errors import (
    TosaError,
    TosaFormatError,
    TosaSizeError,
    TosaUnsupportedError,
    TosaValidationError,
)

#: Largest tensor (in elements) we agree to hold; checked before any allocation.
MAX_TENSOR_ELEMENTS = 1 << 31

_ENUM_FIELDS = {
    "rounding_mode": {0: "UNKNOWN", 1: "SINGLE_ROUND", 2: "INEXACT_ROUND", 3: "DOUBLE_ROUND"},
    "mode": {0: "UNKNOWN", 1: "NEAREST", 2: "BILINEAR"},
    "nan_mode": {0: "UNKNOWN", 1: "PROPAGATE", 2: "IGNORE"},
}


@dataclass
class Tensor:
    """A declared tensor of a basic block.

    ``data`` holds the constant value (working numpy dtype) when the tensor has serialized data.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None = None
    variable: bool = False
    variable_name: str = ""
    unranked: bool = False

    @property
    def size(self) -> int:
        """Number of elements (1 for rank 0)."""
        return math.prod(map(int, self.shape))


@dataclass
class Operator:
    """One operator: TOSA op name, attributes as plain values, input and output tensor names."""

    op: str
    attrs: dict[str, object]
    inputs: list[str]
    outputs: list[str]
    location: str = ""


@dataclass
class Block(Watched):
    """A basic block: its operators in order, tensors by name, and its interface."""

    name: str
    operators: list[Operator]
    tensors: dict[str, Tensor]
    inputs: list[str]
    outputs: list[str]
    shapes: dict[str, Tensor] = field(default_factory=dict)

    def __getstate__(self) -> dict:
        # A copy (copy.deepcopy, pickle) leaves the cached execution plan behind: the copy is
        # usually made to be edited, and a plan refers to the original's tensors.
        state = dict(self.__dict__)
        state.pop("_plan", None)
        return state


@dataclass
class Region(Watched):
    """A region: a named list of blocks (the first is the region's entry block)."""

    name: str
    blocks: list[Block]


@dataclass
class Graph(Watched):
    """A whole TOSA graph. ``main`` is the first block of the first region.

    >>> g = load("model.tosa")            # doctest: +SKIP
    >>> [op.op for op in g.main.operators][:3]  # doctest: +SKIP
    ['CONST_SHAPE', 'RESHAPE', 'CONV2D']
    """

    version: tuple[int, int, int, bool]
    regions: list[Region]
    raw: bytes = b""

    def __getstate__(self) -> dict:
        # a copy is made to be edited: it leaves the memory bound and run checks behind
        state = dict(self.__dict__)
        for key in ("_memory", "_verified", "_sealed"):
            state.pop(key, None)
        return state

    @property
    def main(self) -> Block:
        """The entry block (first block of the first region)."""
        return self.regions[0].blocks[0]

    def block(self, name: str) -> Block:
        """Find a block by name in any region (control-flow ops refer to blocks by name)."""
        for region in self.regions:
            for block in region.blocks:
                if block.name == name:
                    return block
        for region in self.regions:
            if region.name == name and region.blocks:
                return region.blocks[0]
        raise TosaFormatError(f"no basic block or region named {name!r} in the graph")

    @property
    def version_string(self) -> str:
        major, minor, patch, draft = self.version
        return f"{major}.{minor}.{patch}" + ("d" if draft else "")


#: The loader's constructors of the watched classes: a loaded graph's objects are built without
#: changing the edit tick (see :mod:`tosa_verify._edits`), its containers watched for edits.
_block, _region, _graph = constructor(Block), constructor(Region), constructor(Graph)


def _new_block(name: str, operators: list, tensors: dict, inputs: list, outputs: list,
               shapes: dict | Iterable[tuple[str, Tensor]]) -> Block:
    """A loaded block, its containers watched (``shapes``: by name, or (name, shape) pairs)."""
    return _block(name, WatchedList(operators), WatchedDict(tensors), WatchedList(inputs), WatchedList(outputs),
                  WatchedDict(shapes))


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


@functools.cache
def _attribute_reader(kind: int) -> tuple[str, list[tuple[str, str, Field]]]:
    """(class name, [(accessor, attrs key, field)]) of attribute union member ``kind``, built once."""
    import tosa.Attribute as attribute_enum

    names = {v: k for k, v in vars(attribute_enum.Attribute).items() if not k.startswith("_")}
    class_name = names.get(kind)
    if class_name is None:
        return "", []
    fields = [(meth, _snake(meth), f) for meth, f in table_layout(class_name).items()
              if meth[:1].isupper() and not meth.startswith("GetRootAs")]
    return class_name, sorted(fields)


@functools.cache
def _attribute_layout(kind: int) -> tuple[Field, ...]:
    """The fields of :func:`_attribute_reader`'s list, for :meth:`Table.fields`."""
    return tuple(f for _, _, f in _attribute_reader(kind)[1])


def _read_attributes(table: Table, kind: int, op_name: str) -> dict[str, object]:
    if kind == 0:
        return {}
    class_name, fields = _attribute_reader(kind)
    if not class_name:
        raise TosaUnsupportedError(f"{op_name}: unknown attribute type {kind}")
    result: dict[str, object] = {}
    if table is None:
        raise TosaFormatError(f"{op_name}: attribute of type {class_name} is missing")
    # every field in one call (attribute fields are scalars, strings and numeric vectors only)
    for (meth, key, f), value in zip(fields, table.fields(_attribute_layout(kind)), strict=True):
        if f.kind == "vector":
            if meth in ("MinVal", "MaxVal"):
                result[key] = b"" if value is None else value.tobytes()
            else:
                result[key] = [] if value is None else value.tolist()
            continue
        result[key] = (value or "") if f.kind == "string" else _attribute_scalar(key, value)
    return result


#: Compiled attribute readers by (attribute type, vtable bytes): see :func:`_attribute_compiled`.
_ATTRIBUTE_VTABLES: dict[tuple[int, bytes], tuple] = {}


def _lean_attributes(buf: bytes, at: int, kind: int, seen: dict[int, tuple]) -> dict[str, object]:
    """What :func:`_read_attributes` returns for the attribute table of type ``kind`` at ``at``,
    with one compiled reader per attribute vtable (its layout bytes are the cache key: a
    schema-level key, no value of the graph is kept; ``seen`` holds the ones of this buffer by
    position); raises on anything unusual, which makes the lean reader decline."""
    if not at:
        raise KeyError(kind)  # (a missing attribute: the per-table reader reports it)
    vt = at - _I32(buf, at)[0]
    compiled = seen.get(vt << 8 | kind)
    if compiled is None:
        compiled = seen[vt << 8 | kind] = _attribute_vtable(buf, vt, kind)
    template, scalars, keys, enums, others = compiled
    result = dict(template)
    if keys:
        result.update(zip(keys, scalars(buf, at), strict=True))
        for name, names in enums:
            value = result[name]
            result[name] = names.get(value, value)
    for name, f, off, as_bytes in others:
        result[name] = _attribute_vector(buf, at + off, f, as_bytes)
    return result


def _attribute_vtable(buf: bytes, vt: int, kind: int) -> tuple:
    """The compiled reader of the attribute vtable at ``vt`` (:func:`_attribute_compiled`)."""
    if vt < 0:
        raise IndexError(vt)
    end = vt + 4 + 2 * (max(_U16(buf, vt)[0] - 4, 0) >> 1)
    if end > len(buf):
        raise IndexError(end)
    key = (kind, buf[vt:end])
    compiled = _ATTRIBUTE_VTABLES.get(key)
    if compiled is None:
        if len(_ATTRIBUTE_VTABLES) >= 4096:
            _ATTRIBUTE_VTABLES.clear()
        compiled = _ATTRIBUTE_VTABLES[key] = _attribute_compiled(kind, key[1])
    return compiled


def _attribute_compiled(kind: int, vtable: bytes) -> tuple:
    """(attrs of absent fields' defaults, one ``unpack_from`` of the scalars present, their keys,
    [(key, names by value)] of the enums present, [(key, field, offset, as bytes)] of strings and
    vectors present)."""
    class_name, fields = _attribute_reader(kind)
    if not class_name:
        raise KeyError(kind)
    offsets = [int.from_bytes(vtable[k:k + 2], "little") for k in range(4, len(vtable) - 1, 2)]
    template: dict[str, object] = {}
    present, others, enums = [], [], []
    for meth, key, f in fields:
        i = (f.slot - 4) >> 1
        off = offsets[i] if i < len(offsets) else 0
        if f.kind == "vector":
            template[key] = b"" if meth in ("MinVal", "MaxVal") else []
        elif f.kind == "string":
            template[key] = ""
        else:
            template[key] = _attribute_scalar(key, f.default)
        if off and f.kind == "scalar":
            present.append((off, key, f.fmt))
            names = _scalar_names(key)
            if names is not None:
                enums.append((key, names))
        elif off:
            others.append((key, f, off, meth in ("MinVal", "MaxVal")))
    present.sort()
    fmt, end = "<", 0
    for off, _, code in present:
        if off < end:
            raise ValueError("overlapping attribute fields")
        fmt += f"{off - end}x{code}"
        end = off + struct.calcsize(code)
    return template, struct.Struct(fmt).unpack_from, tuple(key for _, key, _ in present), tuple(enums), tuple(others)


#: acc_type codes by name, as :func:`_attribute_scalar` gives them.
_ACC_TYPES = {code: info.name for code, info in DTYPE_BY_CODE.items()}


def _scalar_names(key: str) -> dict[int, str] | None:
    """The names by value of the enum attribute ``key``; None for a plain number."""
    return _ENUM_FIELDS.get(key) or (_ACC_TYPES if key == "acc_type" else None)


def _attribute_scalar(key: str, value: object) -> object:
    """An attribute scalar as :func:`_read_attributes` gives it (enums by name, unknown values as
    they are)."""
    names = _scalar_names(key)
    return value if names is None else names.get(value, value)


def _attribute_vector(buf: bytes, at: int, f: Field, as_bytes: bool) -> object:
    """The string or vector referenced from ``at``, as :func:`_read_attributes` gives it (MinVal
    and MaxVal ``as_bytes``)."""
    start = at + _U32(buf, at)[0] + 4
    count = _U32(buf, start - 4)[0]
    if f.kind == "string":
        if start + count > len(buf):
            raise IndexError(count)
        return buf[start:start + count].decode("utf8")
    size = struct.calcsize(f.fmt)
    if start + size * count > len(buf):
        raise IndexError(count)
    if as_bytes:
        return buf[start:start + size * count]
    return list(unpacker(f.fmt, count)(buf, start))


def _checked_shape(name: str, shape: tuple[int, ...]) -> None:
    if shape and min(shape) < 0:
        # TOSA 1.0 has no dynamic dimensions, so a negative one makes the graph invalid (the
        # generator's list-shape ERROR_IF cases produce such tensors).
        raise TosaValidationError(
            f"tensor {name!r}: negative dimension in shape {list(shape)}", tensors=(name,)
        )
    count = math.prod(shape)
    if count > MAX_TENSOR_ELEMENTS:
        raise TosaSizeError(
            f"tensor {name!r}: declared shape {list(shape)} has {count} elements (limit {MAX_TENSOR_ELEMENTS})"
        )


_TENSOR_FIELDS = ("Name", "Type", "Shape", "Data", "Variable", "VariableName", "IsUnranked", "ScaleType",
                  "BlockShape", "ScaleData")


def _read_tensor(t: Table, layout: tuple[Field, ...]) -> Tensor:
    name, code, dims, raw, variable, variable_name, unranked, scale_code, block, scale_raw = t.fields(layout)
    name = name or ""
    info = DTYPE_BY_CODE.get(code)
    if info is None:
        raise TosaUnsupportedError(f"tensor {name!r}: unsupported dtype code {code}")
    shape = tuple(dims.tolist()) if dims is not None else ()
    _checked_shape(name, shape)
    has_data, has_scales = raw is not None and raw.size > 0, scale_raw is not None and scale_raw.size > 0
    dtype = info.name
    if scale_code or block or has_scales:
        dtype = _block_scaled_type(name, info.name, scale_code, block, shape, has_data, has_scales)
    try:
        # A zero-copy view of the file's bytes for the usual dtypes (see decode_constant).
        data = None if not has_data else (
            decode_block_scaled(raw, scale_raw, dtype, shape) if dtype != info.name else decode_constant(raw, dtype, shape))
    except TosaFormatError as exc:
        raise TosaFormatError(f"tensor {name!r}: {exc}") from None
    return Tensor(name, shape, dtype, data, bool(variable), variable_name or "", bool(unranked))


def _block_scaled_type(name: str, value: str, scale_code: int, block: int, shape: tuple[int, ...],
                       has_data: bool, has_scales: bool) -> str:
    """The block-scaled dtype of a tensor whose ScaleType, BlockShape or ScaleData is set, after
    the checks that make it one of the spec's bs32_fp8ue8m0_set_t types with a sound layout."""
    scale = DTYPE_BY_CODE[scale_code].name if scale_code in DTYPE_BY_CODE else f"code {scale_code}"
    if not block or not scale_code:
        problem = "scale data without a ScaleType and BlockShape" if block == scale_code == 0 else (
            f"ScaleType {scale} without a BlockShape" if not block else f"BlockShape {block} without a ScaleType")
    elif block != BS_BLOCK:
        problem = f"BlockShape {block} is not a block_shape_t value (BLOCK_SHAPE_{BS_BLOCK})"
    elif scale != BS_SCALE:
        problem = f"scale type {scale} is not {BS_SCALE}"
    elif value not in BS_VALUE_TYPES:
        problem = f"value type {value} cannot be block scaled (allowed: {', '.join(BS_VALUE_TYPES)})"
    elif has_data != has_scales:
        problem = "constant values without scale data" if has_data else "scale data without constant values"
    else:
        problem = block_shape_error(shape, block)
    if problem:
        raise TosaValidationError(f"block-scaled tensor {name!r} of shape {list(shape)}: {problem}", tensors=(name,))
    return block_scaled_name(value, scale, block)


@functools.cache
def _plain_constants() -> dict[int, tuple[str, np.dtype, int]]:
    """dtype code -> (name, working dtype, itemsize) of the types whose constant data is the
    working array's little-endian bytes (numpy integers and floats; the rest is decoded)."""
    return {code: (info.name, info.working, info.working.itemsize) for code, info in DTYPE_BY_CODE.items()
            if info.working.kind in "iuf" and info.bits == 8 * info.working.itemsize and info.name != "BOOL"}


def _make_tensors(buf: bytes, rows: Iterable[tuple]) -> dict[str, Tensor]:
    """The tensors by name of the lean reader's rows (name, shape, type code, data start, data
    length) of ``buf``; a KeyError or size error makes it decline, and the per-table reader
    reports it."""
    plain, prod, limit, tensor, ndarray, new = _plain_constants(), math.prod, MAX_TENSOR_ELEMENTS, Tensor, np.ndarray, object.__new__
    out = {}
    for name, shape, code, start, length in rows:
        got = plain.get(code)
        if got is None:
            out[name] = _decoded_tensor(buf, name, shape, code, start, length)
            continue
        dtype, working, itemsize = got
        count = prod(shape)
        if count > limit or length and length < count * itemsize:
            raise _TooLarge  # (the per-table reader names the tensor and the sizes)
        t = out[name] = new(tensor)  # (the dataclass's fields set here, not by a call of its __init__)
        t.name, t.shape, t.dtype = name, shape, dtype
        # a read-only view of the file's bytes, as decode_constant makes (one call, not two)
        t.data = ndarray(shape, working, buf, start) if length else None
        t.variable, t.variable_name, t.unranked = False, "", False
    return out


def _decoded_tensor(buf: bytes, name: str, shape: tuple[int, ...], code: int, start: int, length: int) -> Tensor:
    """A tensor of a type whose constant is decoded (INT4, INT48, BOOL, ...; a KeyError for an
    unknown type code)."""
    if math.prod(shape) > MAX_TENSOR_ELEMENTS:
        raise _TooLarge
    dtype = DTYPE_BY_CODE[code].name
    data = decode_constant(np.frombuffer(buf, np.uint8, length, start), dtype, shape) if length else None
    return Tensor(name, shape, dtype, data)


class _TooLarge(Exception):
    """A size the lean reader leaves to the per-table reader to report."""


def _make_operators(buf: bytes, rows: Iterable[tuple]) -> list[Operator]:
    """The operators of the lean reader's rows (op code, attribute type, attribute table position
    or 0, inputs, outputs, location) of ``buf``; an unknown op code or attribute type is a
    KeyError, which makes it decline (the reader checked the attribute table's bounds, all that
    a type without fields, CONST's, needs)."""
    names, fieldless, operator, attribute_vtables, new = _op_names(), _FIELDLESS, Operator, {}, object.__new__
    out = []
    for code, kind, at, inputs, outputs, location in rows:
        if not fieldless[kind]:
            attrs = _lean_attributes(buf, at, kind, attribute_vtables)
        elif kind and not at:
            raise KeyError(kind)  # (a missing attribute: the per-table reader reports it)
        else:
            attrs = {}
        op = new(operator)  # (the dataclass's fields set here in order, not by a call of its __init__)
        op.op, op.attrs, op.inputs, op.outputs, op.location = names[code], attrs, inputs, outputs, location
        out.append(op)
    return out


def _make_shape(buf: bytes, name: str, rank: int, start: int, length: int) -> Tensor:
    """A TosaShape table's tensor (its data a read-only view of ``buf``)."""
    if not length:
        return Tensor(name, (rank,), "SHAPE")
    if length < 8 * rank:
        raise _TooLarge  # (the per-table reader names the sizes)
    # a read-only view of the file's bytes, as decode_constant makes (one call, not four)
    return Tensor(name, (rank,), "SHAPE", np.ndarray((rank,), np.int64, buf, start))


def _make_block(name: str, operators: list, tensors: dict, inputs: list, outputs: list, shapes: list) -> Block:
    # (zip(map(...)): a comprehension costs a function call in Python 3.11)
    block = _new_block(name, operators, tensors, inputs, outputs, zip(map(_NAME, shapes), shapes, strict=True))
    if len(block.shapes) != len(shapes):
        raise _TooLarge  # (two shapes of one name: the per-table reader reports it)
    return block


_NAME = attrgetter("name")




class _Fieldless(dict):
    """Attribute type -> whether it has no fields (0, no attribute, has none), filled on first
    use; an unknown type raises KeyError."""

    def __missing__(self, kind: int) -> bool:
        class_name, fields = _attribute_reader(kind)
        if not class_name:
            raise KeyError(kind)
        self[kind] = not fields
        return not fields


_FIELDLESS = _Fieldless({0: True})


class _OpNames(dict):
    """Op code -> name (:func:`_op_names`), filled on first use; an unknown code raises KeyError."""

    def __missing__(self, code: int) -> str:
        if not self:
            self.update(_op_names())
            if code in self:
                return self[code]
        raise KeyError(code)


#: The constructors of :func:`._lean_read.read_graph`.
_MAKERS = _lean_read.Makers(_make_tensors, _make_shape, _make_operators, _make_block, Tensor, _plain_constants(),
                            MAX_TENSOR_ELEMENTS, _decoded_tensor, Operator, _OpNames(), _FIELDLESS, _lean_attributes)


def _read_tensors(block: Table, fb: dict[str, Field]) -> list[Tensor]:
    ft = table_layout("TosaTensor")
    tensor_layout = tuple(ft[k] for k in _TENSOR_FIELDS)
    return [_read_tensor(t, tensor_layout) for t in block.tables(fb["Tensors"])]


def _read_operators(block: Table, fb: dict[str, Field], op_names: dict[int, str]) -> list[Operator]:
    fo, text = table_layout("TosaOperator"), table_layout("OpLocation")["Text"]
    op_layout = tuple(fo[k] for k in ("Op", "Attribute", "AttributeType", "Inputs", "Outputs", "Location"))
    operators = []
    for j, op in enumerate(block.tables(fb["Operators"])):
        code, attribute, kind, inputs, outputs, location = op.fields(op_layout)
        op_name = op_names.get(code)
        if op_name is None:
            raise TosaUnsupportedError(f"operator {j}: unknown op code {code}")
        operators.append(Operator(
            op_name, _read_attributes(attribute, kind, op_name), inputs or [], outputs or [],
            location.string(text) if location is not None else "",
        ))
    return operators


def _read_block(block: Table, op_names: dict[int, str]) -> Block:
    fb, fs = table_layout("TosaBasicBlock"), table_layout("TosaShape")
    block_name = block.string(fb["Name"])
    declared = _read_tensors(block, fb)
    tensors = {tensor.name: tensor for tensor in declared}
    _check_unique(block_name, "tensor", tensors, declared)
    shapes: dict[str, Tensor] = {}
    declared = []
    for s in block.tables(fb["Shapes"]):
        name = s.string(fs["Name"])
        rank = int(s.scalar(fs["Rank"]))
        raw = s.vector(fs["Data"])
        try:
            data = decode_constant(raw, "SHAPE", (rank,)) if raw is not None and raw.size else None
        except TosaFormatError as exc:
            raise TosaFormatError(f"shape {name!r}: {exc}") from None
        declared.append(shapes.setdefault(name, Tensor(name=name, shape=(rank,), dtype="SHAPE", data=data)))
    _check_unique(block_name, "shape", shapes, declared)
    operators = _read_operators(block, fb, op_names)
    return _new_block(
        name=block_name,
        operators=operators,
        tensors=tensors,
        inputs=block.strings(fb["Inputs"]),
        outputs=block.strings(fb["Outputs"]),
        shapes=shapes,
    )


def _check_unique(block: str, what: str, by_name: dict[str, Tensor], declared: list[Tensor]) -> None:
    """Refuse a block declaring two tensors (or shapes) of one name (the dict kept one of them)."""
    if len(by_name) != len(declared):
        seen: set[str] = set()
        name = next(t.name for t in declared if t.name in seen or seen.add(t.name))
        raise TosaValidationError(f"block {block!r}: {what} {name!r} is declared more than once", tensors=(name,))


def parse(data: bytes) -> Graph:
    """Parse TOSA flatbuffer bytes into a :class:`Graph`.

    >>> parse(b"not a graph")
    Traceback (most recent call last):
    ...
    tosa_verify.errors.TosaFormatError: not a TOSA flatbuffer: file identifier is not 'TOSA' (11 bytes)
    """
    if len(data) < 8 or bytes(data[4:8]) != b"TOSA":
        raise TosaFormatError(
            f"not a TOSA flatbuffer: file identifier is not 'TOSA' ({len(data)} bytes)"
        )
    data = bytes(data)
    lean = _lean_read.read_graph(data, _MAKERS)
    if lean is not None:
        version, regions = lean[0], []
        for name, blocks in lean[1]:
            regions.append(_region(name, WatchedList(blocks)))
    else:
        version, regions = _read_graph(data, _op_names())
    if version[0] != 1 or version[1] not in (0, 1):
        # 1.1 is the draft the installed tosa-tools writes (its extra operators live in ops/).
        raise TosaFormatError(
            f"TOSA version {version[0]}.{version[1]}.{version[2]} is not supported (need 1.0.x or 1.1.x)"
        )
    if not regions or not regions[0].blocks:
        raise TosaFormatError("TOSA graph has no region or no basic block")
    return _graph(version, WatchedList(regions), data)


def _read_graph(data: bytes, op_names: dict[int, str]) -> tuple[tuple[int, int, int, bool], list[Region]]:
    """(version, regions) of ``data`` read table by table, reporting any corruption."""
    try:
        root = Table(data, _U32(data, 0)[0])
        fg, fv, fr = (table_layout(n) for n in ("TosaGraph", "Version", "TosaRegion"))
        ver = root.table(fg["Version"])
        if ver is None:
            raise TosaFormatError("TOSA flatbuffer has no version table")
        version = (int(ver.scalar(fv["_Major"])), int(ver.scalar(fv["_Minor"])),
                   int(ver.scalar(fv["_Patch"])), bool(ver.scalar(fv["_Draft"])))
        regions = []
        for region in root.tables(fg["Regions"]):
            blocks = [_read_block(b, op_names) for b in region.tables(fr["Blocks"])]
            regions.append(_region(name=region.string(fr["Name"]), blocks=WatchedList(blocks)))
    except TosaError:
        raise
    except Exception as exc:  # flatbuffers raises struct.error/IndexError/UnicodeError on corruption
        raise TosaFormatError(
            f"corrupt or truncated TOSA flatbuffer ({len(data)} bytes): {type(exc).__name__}: {exc}"
        ) from None
    return version, regions


@functools.cache
def _op_names() -> dict[int, str]:
    import tosa.Op as op_enum

    return {v: k for k, v in vars(op_enum.Op).items() if not k.startswith("_")}


def load(source: str | os.PathLike | bytes | bytearray | memoryview | Graph) -> Graph:
    """Load a TOSA graph from a path, bytes, or pass a :class:`Graph` through.

    >>> g = load("tests/data/add.tosa")   # doctest: +SKIP
    >>> g.version_string                  # doctest: +SKIP
    '1.0.0'
    """
    if isinstance(source, Graph):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse(bytes(source))
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TosaFormatError(f"cannot read TOSA file {str(path)!r}: {exc.strerror}") from None
    return parse(data)
