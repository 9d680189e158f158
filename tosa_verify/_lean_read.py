"""A lean reader of a small block's tensor and operator tables: one pass, plain ``struct`` reads.

A lowered graph declares one tensor and one operator per constant, so loading a small graph was
mostly per-table Python work plus the fixed cost of the column-wise reader's numpy gathers
(:mod:`._bulk_read`, which wins from about a hundred tables on: see :data:`MAX_TABLES`). This
reader does the least work per table: a flatbuffer builder shares one vtable between tables with
the same fields present, so each distinct vtable is decoded once (its field offsets, and which
other fields it sets); a table is then a handful of ``unpack_from`` calls and one slice per
string. Shapes come back as tuples straight from ``struct``, constant data as (position, length)
in the buffer.

It covers the common case of a block of at most :data:`MAX_TABLES` tables and returns None for
anything else (a field it does not read set to other than its default, a position outside the
buffer, a corrupt count): the caller then reads the block with the column-wise or the per-table
reader, which reports any error with its usual message. So the result, or the error, is always
the per-table reader's.

>>> tensors = read_tensors(block, table_layout("TosaBasicBlock")["Tensors"], make)   # doctest: +SKIP
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from operator import add

from ._bulk_read import _OP_READ, _TENSOR_READ
from ._flatbuffer import Field, Table, table_layout

_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U16 = struct.Struct("<H").unpack_from


_UNPACKERS: dict[tuple[str, int], Callable] = {}


def _unpacker(fmt: str, count: int) -> Callable:
    """``unpack_from`` of ``count`` little-endian ``fmt`` numbers (a dict hit after the first)."""
    got = _UNPACKERS.get((fmt, count))
    if got is None:
        if len(_UNPACKERS) > 4096:
            _UNPACKERS.clear()
        got = _UNPACKERS[fmt, count] = struct.Struct(f"<{count}{fmt}").unpack_from
    return got


def _vtable_index(f: Field) -> int:
    """The position of ``f``'s offset among a vtable's field offsets (after its two sizes)."""
    return (f.slot - 4) >> 1


#: More tables than this are left to the column-wise reader.
MAX_TABLES = 100


class _Decline(Exception):
    """The common case does not apply: read the block table by table."""


def _string(buf: bytes, size: int, at: int) -> str:
    """The string referenced from position ``at`` of ``buf`` (``size`` bytes)."""
    start = at + _U32(buf, at)[0] + 4
    end = start + _U32(buf, start - 4)[0]
    if end > size:
        raise _Decline
    return buf[start:end].decode("utf8")


class _Reader:
    """Reads of one buffer, with the vtables decoded once each (see the module docstring)."""

    def __init__(self, buf: bytes, layout: dict[str, Field], read: tuple[str, ...]) -> None:
        self.buf, self.size = buf, len(buf)
        self.layout, self.read = layout, read
        self._slots = [_vtable_index(layout[name]) for name in read]
        self._others = [(_vtable_index(f), f) for n, f in layout.items() if n not in read]
        self._width = max(map(_vtable_index, layout.values())) + 1
        self._vtables: dict[int, tuple[tuple[int, ...], list[Field]]] = {}

    def offsets(self, pos: int) -> tuple[int, ...]:
        """The offsets of the fields ``read`` of the table at ``pos`` (0: absent); declines when
        the table sets another field of the layout to other than its default."""
        buf = self.buf
        vt = pos - _I32(buf, pos)[0]
        got = self._vtables.get(vt)
        if got is None:
            got = self._vtables[vt] = self._vtable(vt)
        offsets, scalars, lengths = got
        for off, size in scalars:  # another scalar field written: it must be zero
            if any(buf[pos + off:pos + off + size]):
                raise _Decline
        for off in lengths:  # another string or vector written: it must be empty
            at = pos + off
            if _U32(buf, at + _U32(buf, at)[0])[0]:
                raise _Decline
        return offsets

    def _vtable(self, vt: int) -> tuple[tuple[int, ...], list[tuple[int, int]], list[int]]:
        """(offsets of the fields read, [(offset, size)] of the other scalars present, offsets of
        the other strings and vectors present); declines when another field that cannot hold
        its default is present (a table, or a scalar whose default is not zero)."""
        if vt < 0:
            raise _Decline
        n = max((_U16(self.buf, vt)[0] - 4) >> 1, 0)
        offs = _unpacker("H", n)(self.buf, vt + 4) + (0,) * max(self._width - n, 0)
        scalars, lengths = [], []
        for i, f in self._others:
            if not offs[i]:
                continue
            if f.kind == "scalar" and not f.default:
                scalars.append((offs[i], struct.calcsize(f.fmt)))
            elif f.kind in ("string", "vector", "strings"):
                lengths.append(offs[i])
            else:
                raise _Decline
        return tuple(offs[i] for i in self._slots), scalars, lengths

    def tables(self, at: int) -> list[int]:
        """Positions of the tables of the vector of offsets at ``at`` (0: absent)."""
        if not at:
            return []
        start = at + _U32(self.buf, at)[0] + 4
        count = _U32(self.buf, start - 4)[0]
        if start + 4 * count > self.size or count > MAX_TABLES:  # (before allocating by a corrupt count)
            raise _Decline
        return list(map(add, _unpacker("I", count)(self.buf, start), range(start, start + 4 * count, 4)))

    def strings(self, at: int) -> list[str]:
        """The strings of the vector of strings referenced from ``at`` ([] when absent)."""
        if not at:
            return []
        buf, size = self.buf, self.size
        start = at + _U32(buf, at)[0] + 4
        stop = start + 4 * _U32(buf, start - 4)[0]
        if stop > size:
            raise _Decline
        return [_string(buf, size, k) for k in range(start, stop, 4)]

    def vector(self, at: int, fmt: str, width: int) -> tuple:
        """The numbers of the vector referenced from ``at`` (() when absent)."""
        if not at:
            return ()
        start = at + _U32(self.buf, at)[0] + 4
        count = _U32(self.buf, start - 4)[0]
        if start + width * count > self.size:
            raise _Decline
        return _unpacker(fmt, count)(self.buf, start)


def read_tensors(block: Table, f: Field, make: Callable) -> list | None:
    """What :func:`._bulk_read.read_tensors` returns (the same ``make`` calls, in order), for a
    block of at most :data:`MAX_TABLES` tensors; None when the common case does not apply."""
    try:
        buf = block.buf
        cols = _Reader(buf, table_layout("TosaTensor"), _TENSOR_READ)
        offsets, vector, size = cols.offsets, cols.vector, cols.size
        out = []
        for pos in cols.tables(block._at(f.slot)):
            o_name, o_shape, o_type, o_data = offsets(pos)
            if not o_name:
                raise _Decline
            name = _string(buf, size, pos + o_name)
            shape = vector(pos + o_shape, "i", 4) if o_shape else ()
            if shape and min(shape) < 0:
                raise _Decline
            code = _U32(buf, pos + o_type)[0] if o_type else 0
            start = length = 0
            if o_data:
                at = pos + o_data
                start = at + _U32(buf, at)[0] + 4
                length = _U32(buf, start - 4)[0]
                if start + length > cols.size:
                    raise _Decline
            out.append(make(name, shape, code, start, length))
        return out
    except Exception:  # noqa: BLE001  (the per-table reader reports it, with its message)
        return None


def read_operators(block: Table, f: Field, make: Callable) -> list | None:
    """What :func:`._bulk_read.read_operators` returns (the same ``make`` calls, in order), for a
    block of at most :data:`MAX_TABLES` operators; None when the common case does not apply."""
    try:
        buf = block.buf
        cols = _Reader(buf, table_layout("TosaOperator"), _OP_READ)
        text = _Reader(buf, table_layout("OpLocation"), ("Text",))
        offsets, strings, text_offsets, size = cols.offsets, cols.strings, text.offsets, cols.size
        out = []
        for pos in cols.tables(block._at(f.slot)):
            o_op, o_kind, o_attr, o_in, o_out, o_loc = offsets(pos)
            code = _U32(buf, pos + o_op)[0] if o_op else 0
            kind = buf[pos + o_kind] if o_kind else 0
            attr = pos + o_attr + _U32(buf, pos + o_attr)[0] if o_attr else 0
            location = ""
            if o_loc:
                loc = pos + o_loc + _U32(buf, pos + o_loc)[0]
                [o_text] = text_offsets(loc)
                if o_text:
                    location = _string(buf, size, loc + o_text)
            out.append(make(code, kind, attr, strings(pos + o_in) if o_in else [],
                            strings(pos + o_out) if o_out else [], location))
        return out
    except Exception:  # noqa: BLE001  (the per-table reader reports it, with its message)
        return None
