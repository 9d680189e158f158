"""A fast reader of TOSA flatbuffer tables, with the field layout taken from the generated ``tosa`` module.

The flatbuffers Python runtime costs several function calls (and a number-type check) per field
read, which dominated loading a small graph. This module reads the same tables with one
``struct.unpack_from`` per field and numpy views for vectors. It writes down no schema of its
own: which vtable slot and type each field has is read once per table class from the
accessors ``flatc`` generated in tosa-tools (``tosa/<Table>.py``), so it follows the schema
tosa-tools ships.

>>> t = table_layout("RescaleAttribute")
>>> t["Scale32"]
Field(slot=4, kind='scalar', fmt='?', default=False)
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import struct
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

#: flatbuffers number-type flag name -> struct format (little-endian is applied by the readers).
_FLAG_FORMATS = {
    "Bool": "?", "Int8": "b", "Uint8": "B", "Int16": "h", "Uint16": "H", "Int32": "i",
    "Uint32": "I", "Int64": "q", "Uint64": "Q", "Float32": "f", "Float64": "d",
}
_STRUCTS = {fmt: struct.Struct("<" + fmt) for fmt in _FLAG_FORMATS.values()}
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U16 = struct.Struct("<H").unpack_from

_METHOD = re.compile(r"    def (\w+)\(self(, j)?\):\n(.*?)(?=\n    # |\n    @|\ndef |\Z)", re.S)
_SLOT = re.compile(r"self\._tab\.Offset\((\d+)\)")
_FLAGS = re.compile(r"number_types\.(\w+)Flags, [ao]")


class Field(NamedTuple):
    """One field of a table: its vtable slot, what it holds, and (scalars) struct format and default."""

    slot: int
    kind: str  # "scalar", "string", "vector" (numbers), "strings", "table", "tables", "union"
    fmt: str = ""
    default: object = None


@functools.cache
def table_layout(name: str) -> dict[str, Field]:
    """Field layout of the generated table class ``tosa.<name>``, by accessor name."""
    source = inspect.getsource(importlib.import_module(f"tosa.{name}"))
    fields: dict[str, Field] = {}
    for method, indexed, body in _METHOD.findall(source):
        slot = _SLOT.search(body)
        if slot is None or method.endswith(("Length", "IsNone")):
            continue
        slot_n = int(slot.group(1))
        flags = _FLAGS.search(body)
        if method.endswith("AsNumpy"):
            fields[method[: -len("AsNumpy")]] = Field(slot_n, "vector", _FLAG_FORMATS[flags.group(1)])
        elif indexed:
            if method in fields:  # the AsNumpy accessor came first
                continue
            if "Indirect" in body:
                fields[method] = Field(slot_n, "tables")
            elif "String(" in body:
                fields[method] = Field(slot_n, "strings")
            elif flags is not None:
                fields[method] = Field(slot_n, "vector", _FLAG_FORMATS[flags.group(1)])
        elif "Union(" in body:
            fields[method] = Field(slot_n, "union")
        elif "Indirect" in body:
            fields[method] = Field(slot_n, "table")
        elif "String(" in body:
            fields[method] = Field(slot_n, "string")
        elif flags is not None:
            default = ast.literal_eval(body.strip().splitlines()[-1].strip()[len("return "):])
            fields[method] = Field(slot_n, "scalar", _FLAG_FORMATS[flags.group(1)], default)
    return fields


class _Unpackers(dict):
    """``unpack_from`` of ``count`` little-endian ``fmt`` numbers by count, made once each."""

    def __init__(self, fmt: str) -> None:
        super().__init__()
        self.fmt = fmt

    def __missing__(self, count: int) -> Callable:
        if len(self) > 4096:
            self.clear()
        got = self[count] = struct.Struct(f"<{count}{self.fmt}").unpack_from
        return got


_U32S, _I32S = _Unpackers("I"), _Unpackers("i")
_BY_FORMAT: dict[str, _Unpackers] = {"I": _U32S, "i": _I32S}


def unpacker(fmt: str, count: int) -> Callable:
    """``unpack_from`` of ``count`` little-endian ``fmt`` numbers, made once per format and count.

    >>> unpacker("h", 2)(b"\\x01\\x00\\xff\\xff")
    (1, -1)
    """
    by_count = _BY_FORMAT.get(fmt)
    if by_count is None:
        by_count = _BY_FORMAT[fmt] = _Unpackers(fmt)
    return by_count[count]


class Table:
    """One table of a flatbuffer: ``buf`` (bytes) and the table's position.

    Every read checks its bounds (a truncated or corrupt file raises, never reads garbage silently
    past the end): ``struct`` and ``np.frombuffer`` already refuse reads past the end, strings are
    checked here, and negative positions are refused.
    """

    __slots__ = ("buf", "pos", "offsets")

    def __init__(self, buf: bytes, pos: int) -> None:
        if pos < 0 or pos + 4 > len(buf):
            raise IndexError(f"table at {pos} outside the {len(buf)}-byte buffer")
        self.buf, self.pos = buf, pos
        vt = pos - _I32(buf, pos)[0]
        if vt < 0:
            raise IndexError(f"vtable at {vt} outside the buffer")
        # the whole vtable in one read: the field offsets by slot ((slot - 4) // 2)
        self.offsets = unpacker("H", max(_U16(buf, vt)[0] - 4, 0) // 2)(buf, vt + 4)

    def _at(self, slot: int) -> int:
        """Absolute position of the field in ``slot``, 0 when absent."""
        i = (slot - 4) >> 1
        if i >= len(self.offsets):
            return 0
        off = self.offsets[i]
        return self.pos + off if off else 0

    def scalar(self, f: Field):
        at = self._at(f.slot)
        return _STRUCTS[f.fmt].unpack_from(self.buf, at)[0] if at else f.default

    def _indirect(self, at: int) -> int:
        return at + _U32(self.buf, at)[0]

    def _string_at(self, at: int) -> str:
        start = at + 4
        end = start + _U32(self.buf, at)[0]
        if end > len(self.buf):
            raise IndexError(f"string of bytes {start}..{end} runs past the end of the buffer")
        return self.buf[start:end].decode("utf8")

    def string(self, f: Field) -> str:
        at = self._at(f.slot)
        return self._string_at(self._indirect(at)) if at else ""

    def vector(self, f: Field) -> np.ndarray | None:
        """A numeric vector as a read-only numpy view of the buffer (no copy); None when absent."""
        at = self._at(f.slot)
        if not at:
            return None
        start = self._indirect(at)
        count = _U32(self.buf, start)[0]
        return np.frombuffer(self.buf, dtype=_VECTOR_DTYPES[f.fmt], count=count, offset=start + 4)

    def _offsets(self, f: Field) -> list[int]:
        at = self._at(f.slot)
        if not at:
            return []
        start = self._indirect(at) + 4
        count = _U32(self.buf, start - 4)[0]
        if start + 4 * count > len(self.buf):
            raise IndexError(f"vector of {count} offsets at {start} runs past the end of the buffer")
        return [start + 4 * k + v for k, v in enumerate(_U32S[count](self.buf, start))]

    def strings(self, f: Field) -> list[str]:
        return [self._string_at(p) for p in self._offsets(f)]

    def tables(self, f: Field) -> list[Table]:
        return [Table(self.buf, p) for p in self._offsets(f)]

    def table(self, f: Field) -> Table | None:
        at = self._at(f.slot)
        return Table(self.buf, self._indirect(at)) if at else None

    union = table

    def fields(self, layout: tuple[Field, ...]) -> list:
        """Several fields at once, as ``scalar``, ``string``, ``vector``, ``strings`` and ``table``
        would read them (None for an absent one but a scalar): one call per table instead of two
        per field, which was most of the time of loading a small graph."""
        buf, pos, offsets = self.buf, self.pos, self.offsets
        count = len(offsets)
        values: list = []
        for f in layout:
            i = (f.slot - 4) >> 1
            off = offsets[i] if i < count else 0
            kind = f.kind
            if not off:
                values.append(f.default if kind == "scalar" else None)
            elif kind == "scalar":
                values.append(_STRUCTS[f.fmt].unpack_from(buf, pos + off)[0])
            else:
                at = pos + off
                start = at + _U32(buf, at)[0]
                if kind == "string":
                    values.append(self._string_at(start))
                elif kind == "strings":
                    values.append(self.strings(f))
                elif kind in ("table", "union"):
                    values.append(Table(buf, start))
                else:
                    values.append(np.frombuffer(buf, dtype=_VECTOR_DTYPES[f.fmt], count=_U32(buf, start)[0],
                                                offset=start + 4))
        return values


_VECTOR_DTYPES = {fmt: np.dtype(fmt).newbyteorder("<") for fmt in _FLAG_FORMATS.values()}
