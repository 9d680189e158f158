"""Column-wise reading of a block's tensor and operator tables: a few numpy gathers over the
buffer's 32-bit words for all tables at once, instead of a Python loop over the fields of each.

A lowered graph declares one tensor and one CONST operator per constant, so a block holds tens to
hundreds of tables that share one or two vtables. Here every table's position, its vtable, and
every field's position and value come out of whole-column gathers; only the Python objects
(names, shape tuples, input/output lists) are made one by one. flatbuffers aligns every table,
offset, length prefix and 4-byte scalar to 4 bytes, so a gather is one fancy index into the
buffer's ``u32``/``i32`` word views at ``position >> 2``; positions are only ever sums of
unsigned words and offsets, so numpy's bounds check on the index (IndexError) keeps every read
inside the buffer, and an unaligned position (which would read the wrong word) makes the reader
decline after the gathers, before anything is made from them.

Each numpy call has a fixed cost of about a microsecond, so this pays from about a dozen tables
up (:data:`MIN_TABLES`); the lean reader (:mod:`._lean_read`) reads smaller blocks table by table
and calls these for larger ones. Both readers return None when their case does not apply (tables
whose vtables do not all place the read fields alike, a field they do not read set, a position
outside the buffer or unaligned, a count running past the end): the lean reader then reads the
block table by table, which declines in turn to the per-table reader on anything unusual, and
that one reports any error. So the result, or the error, is always the per-table reader's.

>>> rows = tensor_rows(b, start)   # doctest: +SKIP
>>> next(rows)                     # doctest: +SKIP
('x', (1, 8), 3, 0, 0)
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import numpy as np

from ._flatbuffer import _I32S

#: Blocks with fewer tensor (operator) tables than this are read table by table: the column
#: reader's fixed cost (some 30 or 50 numpy calls) would not pay off (measured on the lowered
#: graphs of benchmarks/bench_interpreter.py --small).
MIN_TABLES = 32
MIN_OPERATORS = 64

# (numpy operands: an array operand costs half of what a Python int's conversion costs)
_2, _4 = np.array(2), np.array(4)

#: Bytes per element of a tensor's name, shape and data vectors.
_TENSOR_WIDTHS = np.array((1, 4, 1))


class Words:
    """The numpy views of one buffer the gathers index: bytes, unsigned and signed 32-bit words."""

    def __init__(self, buf: bytes) -> None:
        self.size = len(buf)
        self.u8 = np.frombuffer(buf, np.uint8)
        self.u32 = np.frombuffer(buf, "<u4", len(buf) >> 2)
        self.i32 = self.u32.view("<i4")


class _NotColumns(Exception):
    """The column-wise case does not apply: read the block table by table."""


def _tables(w: Words, start: int) -> np.ndarray:
    """Word index of each table of the vector of offsets at byte ``start`` (int64)."""
    count = int(w.u32[start >> 2])
    if start & 3 or start + 4 + 4 * count > w.size:  # (before allocating by a corrupt count)
        raise _NotColumns
    at = np.arange((start >> 2) + 1, (start >> 2) + 1 + count)
    rel = w.u32[at]
    if (rel & 3).any():
        raise _NotColumns
    return at + (rel >> _2)


def _uniform(b, table: str, tables: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(offsets of the fields read, offsets of the other strings and vectors present) shared by
    the vtables of all ``table`` tables at word indices ``tables``, each read field present;
    ``b`` is the lean reader's buffer, whose vtable cache decodes them (and declines on another
    field set)."""
    seen = b.seen[table]
    vtables = set(((tables << _2) - b.words.i32[tables]).tolist())
    decoded = {(seen.get(vt) or b.vtable(table, vt))[:3] for vt in vtables}
    if len(decoded) != 1:
        raise _NotColumns
    [(offsets, scalars, lengths)] = decoded
    if scalars or not all(offsets):
        raise _NotColumns
    return offsets, lengths


def _targets(w: Words, tables: np.ndarray, offsets: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(word index of what the offset fields at byte ``offsets`` of each table refer to, the
    word there: a string's or vector's length, a table's vtable offset), each (tables, fields)."""
    at = tables[:, None] + np.array(offsets) // 4
    rel = w.u32[at]
    if (rel & 3).any():
        raise _NotColumns
    target = at + (rel >> _2)
    return target, w.u32[target]


def tensor_rows(b, start: int) -> Iterator[tuple] | None:
    """(name, shape, dtype code, data start, data length) of each tensor table of the vector of
    offsets at ``start`` of the lean reader's buffer ``b``; None when the case does not apply."""
    try:
        w, buf = b.words, b.buf
        tables = _tables(w, start)
        (o_name, o_shape, o_type, o_data), lengths = _uniform(b, "TosaTensor", tables)
        # (the other strings and vectors present, a lowered graph's empty VariableName and ScaleData)
        target, count = _targets(w, tables, (o_name, o_shape, o_data, *lengths))
        if count[:, 3:].any() or int(((target[:, :3] << _2) + count[:, :3] * _TENSOR_WIDTHS).max()) + 4 > w.size:
            raise _NotColumns
        (name_at, shape_at, data_at), (name_len, rank, data_len) = (
            ((target[:, :3] << _2) + _4).T.tolist(), count[:, :3].T.tolist())
        names = [buf[a:a + n].decode() for a, n in zip(name_at, name_len, strict=True)]
        shapes = [_I32S[n](buf, a) for a, n in zip(shape_at, rank, strict=True)]
        if min(chain.from_iterable(shapes), default=0) < 0:
            raise _NotColumns
        codes = w.u32[tables + o_type // 4].tolist()
        return zip(names, shapes, codes, data_at, data_len, strict=True)
    except Exception:  # noqa: BLE001  (the table-by-table reader reads it, or declines)
        return None


def operator_rows(b, start: int) -> Iterator[tuple] | None:
    """(op code, attribute type, attribute table position, inputs, outputs, location) of each
    operator table of the vector of offsets at ``start``, the attribute and location tables'
    vtables checked to lie in the buffer; None when the case does not apply."""
    try:
        w, buf = b.words, b.buf
        tables = _tables(w, start)
        (o_op, o_kind, o_attr, o_in, o_out, o_loc), lengths = _uniform(b, "TosaOperator", tables)
        # attribute table, inputs and outputs vectors, location table; the other strings and vectors
        target, first = _targets(w, tables, (o_attr, o_in, o_out, o_loc, *lengths))
        if first[:, 4:].any():
            raise _NotColumns
        vtables = (target[:, [0, 3]] << _2) - first[:, [0, 3]].view("<i4")
        for vt in set(vtables[:, 0].tolist()):  # (what the per-table reader's Table() checks)
            b.vtable_bounds(vt)
        locations = _locations(b, target[:, 3], set(vtables[:, 1].tolist()))
        lists = _string_lists(buf, w, target[:, 1:3], first[:, 1:3])
        codes, kinds = w.u32[tables + o_op // 4].tolist(), w.u8[(tables << _2) + o_kind].tolist()
        return zip(codes, kinds, (target[:, 0] << _2).tolist(), lists[0::2], lists[1::2], locations, strict=True)
    except Exception:  # noqa: BLE001  (the table-by-table reader reads it, or declines)
        return None


def _locations(b, tables: np.ndarray, vtables: set[int]) -> list[str]:
    """The Text of each OpLocation table at word indices ``tables`` ("" when absent or empty)."""
    decoded = {b.vtable("OpLocation", vt)[:3] for vt in vtables}
    if len(decoded) != 1:
        raise _NotColumns
    [((o_text,), scalars, lengths)] = decoded
    if scalars or lengths:
        raise _NotColumns
    if not o_text:
        return [""] * len(tables)
    target, count = _targets(b.words, tables, (o_text,))
    if not count.any():  # (a lowered graph's locations are empty)
        return [""] * len(tables)
    return _decode(b.buf, b.words, target.ravel(), count.ravel())


def _decode(buf: bytes, w: Words, at: np.ndarray, count: np.ndarray) -> list[str]:
    """The strings whose length prefixes are at word indices ``at``, of lengths ``count``."""
    start = (at << _2) + _4
    if at.size and int((start + count).max()) > w.size:
        raise _NotColumns
    return [buf[a:a + n].decode() for a, n in zip(start.tolist(), count.tolist(), strict=True)]


def _string_lists(buf: bytes, w: Words, vectors: np.ndarray, count: np.ndarray) -> list[list[str]]:
    """The strings of each vector of strings at word indices ``vectors`` of lengths ``count``
    (any shape), in row-major order."""
    vectors, count = vectors.ravel(), count.ravel().astype(np.int64)
    if vectors.size and int(((vectors + count) << _2).max()) + 4 > w.size:  # (before allocating by it)
        raise _NotColumns
    ends = np.cumsum(count)
    # word of element k (counted over all vectors) of vector j: vectors[j] + 1 + k - (first k of j)
    elements = np.repeat(vectors + 1 - ends + count, count) + np.arange(int(ends[-1]) if ends.size else 0)
    rel = w.u32[elements]
    if (rel & 3).any():
        raise _NotColumns
    strings = elements + (rel >> _2)
    strings = _decode(buf, w, strings, w.u32[strings])
    return [strings[e - c:e] for e, c in zip(ends.tolist(), count.tolist(), strict=True)]
