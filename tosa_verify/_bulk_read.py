"""Column-wise reading of a block's tensor and operator tables: one numpy gather per field for
all tables at once, instead of a Python loop over the fields of each table.

A lowered graph declares one tensor and one operator per constant, so loading a small graph was
mostly the per-table Python work of :meth:`tosa_verify._flatbuffer.Table.fields`. Here every
table's vtable, every field's offset and every scalar field is read by a few fancy-indexing
gathers over the buffer's bytes; only the Python objects themselves (names, shape tuples,
:class:`~tosa_verify.graph.Tensor`/``Operator`` values) are made one by one.

Both readers cover the common case only and return None for anything else (a field they do not
read is set, a variable tensor, an unknown dtype or op code, a negative or oversized shape, a
position outside the buffer): the caller then reads the block with the per-table reader, which
reports any error with its usual message. So the result, or the error, is always the per-table
reader's.

>>> tensors = read_tensors(block, table_layout("TosaBasicBlock")["Tensors"])   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable

import numpy as np

from ._flatbuffer import Field, Table, table_layout

_R2, _R4 = np.arange(2), np.arange(4)
_EMPTY = np.zeros(0, np.int64)


class _Columns:
    """Gathers of little-endian integers at many positions of one buffer. A position past the
    end raises IndexError (numpy's fancy indexing checks it); the only differences of positions
    that can go negative, vtable positions, are checked where they are made."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.u8 = np.frombuffer(buf, np.uint8)

    def u16(self, pos: np.ndarray) -> np.ndarray:
        return self.u8[pos[:, None] + _R2].view("<u2")[:, 0]

    def u32(self, pos: np.ndarray) -> np.ndarray:
        return self.u8[pos[:, None] + _R4].view("<u4")[:, 0]

    def i32(self, pos: np.ndarray) -> np.ndarray:
        return self.u8[pos[:, None] + _R4].view("<i4")[:, 0]

    def tables(self, table: Table, f: Field) -> np.ndarray:
        """Positions of the tables of vector field ``f`` of ``table`` (int64)."""
        at = table._at(f.slot)
        if not at:
            return _EMPTY
        start = at + int(self.u32(np.array([at]))[0])
        count = int(self.u32(np.array([start]))[0])
        if start + 4 + 4 * count > len(self.buf):  # before allocating anything by a corrupt count
            raise _Decline
        elems = start + 4 + 4 * np.arange(count, dtype=np.int64)
        return elems + self.u32(elems)

    def fields(self, pos: np.ndarray, layout: dict[str, Field], read: tuple[str, ...]) -> list[np.ndarray]:
        """Absolute positions (0 when absent) of fields ``read`` of the tables at ``pos``; declines
        when a table sets any other field of ``layout`` to other than its default."""
        vt = pos - self.i32(pos)
        if vt.size and int(vt.min()) < 0:
            raise _Decline
        slots = _slots(layout)
        # every table's whole vtable (its size, then one offset per slot) in one gather; entries
        # past a table's vtable size are absent fields
        vtable = self.u8[(vt[:, None] + slots[1])[:, :, None] + _R2].view("<u2")[:, :, 0].astype(np.int64)
        # the whole vtable in the buffer, as the per-table reader reads it whole
        if vt.size and int((vt + 4 + 2 * (np.maximum(vtable[:, 0] - 4, 0) >> 1)).max()) > len(self.buf):
            raise _Decline
        offsets = np.where(slots[0] < vtable[:, :1], vtable[:, 1:], 0)
        at = np.where(offsets != 0, pos[:, None] + offsets, 0)
        names = list(layout)
        for column in np.flatnonzero(offsets.any(axis=0)).tolist():
            if names[column] not in read:
                self._unset(at[:, column], layout[names[column]])
        return [at[:, names.index(name)] for name in read]

    def _unset(self, at: np.ndarray, f: Field) -> None:
        """Declines unless the field written at ``at`` (0: absent) holds its default: a zero
        scalar, an empty string or vector."""
        at = at[at != 0]
        if f.kind == "scalar" and not f.default:
            if self.u8[at[:, None] + np.arange(struct.calcsize(f.fmt))].any():
                raise _Decline
        elif f.kind in ("string", "vector", "strings"):
            if self.u32(at + self.u32(at)).any():
                raise _Decline
        else:
            raise _Decline

    def check_tables(self, pos: np.ndarray) -> None:
        """Declines unless the tables at ``pos`` and their vtables lie in the buffer (the checks
        of the per-table reader's ``Table()``)."""
        vt = pos - self.i32(pos)
        if vt.size and int(vt.min()) < 0:
            raise _Decline
        end = vt + 4 + 2 * (np.maximum(self.u16(vt).astype(np.int64) - 4, 0) >> 1)
        if end.size and int(end.max()) > len(self.buf):
            raise _Decline

    def strings(self, at: np.ndarray) -> list[str]:
        """The strings referenced from positions ``at`` (declines if one is absent)."""
        if at.size and not at.all():
            raise _Decline
        start = at + self.u32(at) + 4
        end = start + self.u32(start - 4)
        buf = self.buf
        if end.size and int(end.max()) > len(buf):
            raise _Decline
        return [buf[a:b].decode() for a, b in zip(start.tolist(), end.tolist(), strict=True)]

    def vectors(self, at: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """(start of elements, count) of the vectors of ``width``-byte elements referenced from
        positions ``at`` (count 0 where absent); declines when one runs past the buffer's end
        (before anything is allocated by a corrupt count)."""
        present = at != 0
        start = at + self.u32(at) * present + 4
        count = (self.u32(start - 4) * present).astype(np.int64)
        if count.size and int((start + count * width).max()) > len(self.buf):
            raise _Decline
        return start, count

    @staticmethod
    def ragged(start: np.ndarray, count: np.ndarray, width: int) -> np.ndarray:
        """Positions of every element of the vectors (start, count), concatenated."""
        total = int(count.sum())
        if not total:
            return _EMPTY
        first = np.repeat(start, count)
        index = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        return first + width * index


@functools.cache
def _slots_cached(slots: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    return np.array(slots), np.array((0, *slots))


def _slots(layout: dict[str, Field]) -> tuple[np.ndarray, np.ndarray]:
    """(vtable byte offset of each field in ``layout`` order, the same after 0: the positions
    to gather, the vtable's size first)."""
    return _slots_cached(tuple(f.slot for f in layout.values()))


class _Decline(Exception):
    """The common case does not apply: read the block table by table."""


def _split(values: list, count: np.ndarray) -> list[list]:
    ends = np.cumsum(count).tolist()
    return [values[b - c:b] for b, c in zip(ends, count.tolist(), strict=True)]


#: Fewer tables than this are read table by table: the gathers' fixed cost would not pay off.
MIN_TABLES = 12

_TENSOR_READ = ("Name", "Shape", "Type", "Data")


def read_tensors(block: Table, f: Field, make: Callable) -> list | None:
    """The tensors of ``block`` (field ``f``), each ``make(name, shape, code, data position,
    data length)`` (length 0 without data); None when the common case does not apply (see the
    module docstring)."""
    try:
        cols = _Columns(block.buf)
        pos = cols.tables(block, f)
        if len(pos) < MIN_TABLES:
            return None
        name_at, shape_at, type_at, data_at = cols.fields(pos, table_layout("TosaTensor"), _TENSOR_READ)
        names = cols.strings(name_at)
        codes = (cols.u32(type_at) * (type_at != 0)).tolist()
        dims_start, rank = cols.vectors(shape_at, 4)
        dims = cols.i32(cols.ragged(dims_start, rank, 4))
        if dims.size and int(dims.min()) < 0:
            raise _Decline
        shapes = [tuple(d) for d in _split(dims.tolist(), rank)]
        data_start, data_len = cols.vectors(data_at, 1)
        return [make(name, shape, code, start, n)
                for name, shape, code, start, n in zip(names, shapes, codes, data_start.tolist(),
                                                       data_len.tolist(), strict=True)]
    except Exception:  # noqa: BLE001  (the per-table reader reports it, with its message)
        return None


_OP_READ = ("Op", "AttributeType", "Attribute", "Inputs", "Outputs", "Location")


def read_operators(block: Table, f: Field, make: Callable) -> list | None:
    """The operators of ``block`` (field ``f``), each ``make(code, kind, position of the attribute
    table or 0, inputs, outputs, location)``, the attribute tables' bounds checked; None when the
    common case does not apply."""
    try:
        cols = _Columns(block.buf)
        pos = cols.tables(block, f)
        if len(pos) < MIN_TABLES:
            return None
        op_at, kind_at, attr_at, in_at, out_at, loc_at = cols.fields(pos, table_layout("TosaOperator"), _OP_READ)
        codes = (cols.u32(op_at) * (op_at != 0)).tolist()
        kinds = (cols.u8[kind_at] * (kind_at != 0)).tolist()
        attrs = (attr_at + cols.u32(attr_at)) * (attr_at != 0)
        cols.check_tables(attrs[attrs != 0])
        attrs = attrs.tolist()
        lists = []
        for at in (in_at, out_at):
            start, count = cols.vectors(at, 4)
            lists.append(_split(cols.strings(cols.ragged(start, count, 4)), count))
        return [make(code, kind, at, ins, outs, loc)
                for code, kind, at, ins, outs, loc in zip(codes, kinds, attrs, *lists, _locations(cols, loc_at),
                                                          strict=True)]
    except Exception:  # noqa: BLE001  (the per-table reader reports it, with its message)
        return None


def _locations(cols: _Columns, loc_at: np.ndarray) -> list[str]:
    """Each operator's location text ("" without one)."""
    locations = [""] * len(loc_at)
    if loc_at.any():
        present = np.flatnonzero(loc_at)
        tables = loc_at[present] + cols.u32(loc_at[present])
        [text_at] = cols.fields(tables, table_layout("OpLocation"), ("Text",))
        texted = np.flatnonzero(text_at)
        for i, text in zip(present[texted].tolist(), cols.strings(text_at[texted]), strict=True):
            locations[i] = text
    return locations
