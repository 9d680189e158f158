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

Each numpy call has a fixed cost of one to a few microseconds, so this pays from about 40 tables
up (:data:`MIN_TABLES`, :data:`MIN_OPERATORS`); the lean reader (:mod:`._lean_read`) reads smaller blocks table by table
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

import functools
from collections.abc import Iterator
from itertools import chain

import numpy as np

from ._flatbuffer import _I32S

#: Blocks with fewer tensor (operator) tables than this are read table by table: the column
#: reader's fixed cost (some 30 or 45 numpy calls) would not pay off (measured on the lowered
#: graphs of benchmarks/bench_interpreter.py --small).
MIN_TABLES = 40
MIN_OPERATORS = 40

# (the numpy forms that cost least on small arrays: int64 operands only (each gather converted
# at once), as mixing in uint32 or a Python int costs more than the operation; count_nonzero, not any() or max(), whose ufunc
# reductions cost three times as much; contiguous rows, a (fields, tables) layout)
_1, _2, _3, _4, _255 = np.array(1), np.array(2), np.array(3), np.array(4), np.array(255)
_nonzero = np.count_nonzero

#: Bytes per element of a tensor's name, shape and data vectors.
_TENSOR_WIDTHS = np.array((1, 4, 1))[:, None]


@functools.lru_cache(maxsize=64)
def _words(offsets: tuple[int, ...]) -> np.ndarray:
    """The word offsets of the fields at byte ``offsets`` (4-aligned) of a table, as a column."""
    return (np.array(offsets) >> 2)[:, None]


class Words:
    """The buffer's 32-bit words the gathers index (views of it), each gather made int64."""

    def __init__(self, buf: bytes) -> None:
        self.size, self.end = len(buf), np.array(len(buf))
        self.i32 = np.frombuffer(buf, "<i4", len(buf) >> 2)
        self.u32 = self.i32.view("<u4")

    def unsigned(self, at: np.ndarray) -> np.ndarray:
        """The unsigned words at word indices ``at``, as int64."""
        return self.u32[at].astype(np.int64)

    def signed(self, at: np.ndarray) -> np.ndarray:
        """The signed words at word indices ``at``, as int64."""
        return self.i32[at].astype(np.int64)


class _NotColumns(Exception):
    """The column-wise case does not apply: read the block table by table."""


def _tables(b, start: int) -> np.ndarray:
    """Word index of each table of the vector of offsets at byte ``start`` (int64)."""
    count = b.u32[start >> 2]
    if start & 3 or start + 4 + 4 * count > b.size:  # (before allocating by a corrupt count)
        raise _NotColumns
    at = np.arange((start >> 2) + 1, (start >> 2) + 1 + count)
    rel = b.words.unsigned(at)
    if _nonzero(rel & _3):
        raise _NotColumns
    return at + (rel >> _2)


def _uniform(b, table: str, tables: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(offsets of the fields read, offsets of the other strings and vectors present) shared by
    the vtables of all ``table`` tables at word indices ``tables``, each read field present;
    ``b`` is the lean reader's buffer, whose vtable cache decodes them (and declines on another
    field set)."""
    seen = b.seen[table]
    vtables = set(((tables << _2) - b.words.signed(tables)).tolist())
    decoded = {(seen.get(vt) or b.vtable(table, vt))[:3] for vt in vtables}
    if len(decoded) != 1:
        raise _NotColumns
    [(offsets, scalars, lengths)] = decoded
    if scalars or not all(offsets):
        raise _NotColumns
    return offsets, lengths


def _fields(w: Words, tables: np.ndarray, offsets: tuple[int, ...], refs: int) -> tuple[np.ndarray, ...]:
    """(the words at the 4-aligned fields at byte ``offsets`` of each table, and of the first
    ``refs`` of them, offset fields, the word index each refers to and the word there: a
    string's or vector's length, a table's vtable offset), each (fields, tables)."""
    at = _words(offsets) + tables
    values = w.unsigned(at)
    if _nonzero(values[:refs] & _3):
        raise _NotColumns
    target = at[:refs] + (values[:refs] >> _2)
    return values, target, w.unsigned(target)


def tensor_rows(b, start: int) -> Iterator[tuple] | None:
    """(name, shape, dtype code, data start, data length) of each tensor table of the vector of
    offsets at ``start`` of the lean reader's buffer ``b``; None when the case does not apply."""
    try:
        w, buf = b.words, b.buf
        tables = _tables(b, start)
        (o_name, o_shape, o_type, o_data), lengths = _uniform(b, "TosaTensor", tables)
        # (the other strings and vectors present, a lowered graph's empty VariableName and
        # ScaleData, must be empty)
        values, target, count = _fields(w, tables, (o_name, o_shape, o_data, *lengths, o_type), 3 + len(lengths))
        begin = (target[:3] << _2) + _4
        if _nonzero(count[3:]) or _nonzero(begin + count[:3] * _TENSOR_WIDTHS > w.end):
            raise _NotColumns
        (name_at, shape_at, data_at), (name_len, rank, data_len) = begin.tolist(), count[:3].tolist()
        names = [buf[a:a + n].decode() for a, n in zip(name_at, name_len, strict=True)]
        shapes = [_I32S[n](buf, a) for a, n in zip(shape_at, rank, strict=True)]
        if min(chain.from_iterable(shapes), default=0) < 0:
            raise _NotColumns
        return zip(names, shapes, values[-1].tolist(), data_at, data_len, strict=True)
    except Exception:  # noqa: BLE001  (the table-by-table reader reads it, or declines)
        return None


def operator_rows(b, start: int) -> Iterator[tuple] | None:
    """(op code, attribute type, attribute table position, inputs, outputs, location) of each
    operator table of the vector of offsets at ``start``, the attribute and location tables'
    vtables checked to lie in the buffer; None when the case does not apply."""
    try:
        w, buf = b.words, b.buf
        tables = _tables(b, start)
        (o_op, o_kind, o_attr, o_in, o_out, o_loc), lengths = _uniform(b, "TosaOperator", tables)
        # attribute table, location table, inputs and outputs vectors, the other strings and
        # vectors (empty); then the op code's word and the attribute type's
        refs = 4 + len(lengths)
        values, target, first = _fields(w, tables, (o_attr, o_loc, o_in, o_out, *lengths, o_op, o_kind & ~3), refs)
        if _nonzero(first[4:]):
            raise _NotColumns
        vtables = (target[:2] << _2) - w.signed(target[:2])
        for vt in set(vtables[0].tolist()):  # (what the per-table reader's Table() checks)
            b.vtable_bounds(vt)
        locations = _locations(b, target[1], set(vtables[1].tolist()))
        inputs, outputs = _string_lists(buf, w, target[2:4].ravel(), first[2:4].ravel(), len(tables))
        kinds = (values[-1] >> np.array(8 * (o_kind & 3))) & _255
        return zip(values[-2].tolist(), kinds.tolist(), (target[0] << _2).tolist(), inputs, outputs, locations,
                   strict=True)
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
    _, target, count = _fields(b.words, tables, (o_text,), 1)
    if not _nonzero(count):  # (a lowered graph's locations are empty)
        return [""] * len(tables)
    return _decode(b.buf, b.words, target.ravel(), count.ravel())


def _decode(buf: bytes, w: Words, at: np.ndarray, count: np.ndarray) -> list[str]:
    """The strings whose length prefixes are at word indices ``at``, of lengths ``count``."""
    begin = (at << _2) + _4
    if _nonzero(begin + count > w.end):
        raise _NotColumns
    return [buf[a:a + n].decode() for a, n in zip(begin.tolist(), count.tolist(), strict=True)]


def _string_lists(buf: bytes, w: Words, vectors: np.ndarray, count: np.ndarray, split: int) -> tuple[list, list]:
    """The strings of each vector of strings at word indices ``vectors`` of lengths ``count``,
    the first ``split`` vectors' and the others'."""
    if _nonzero(((vectors + count) << _2) + _4 > w.end):  # (before allocating by a corrupt count)
        raise _NotColumns
    ends = np.add.accumulate(count, dtype=np.int64)
    total = int(ends[-1]) if ends.size else 0
    if total > w.size >> 2:  # (vectors of a corrupt file can overlap: no more elements than words)
        raise _NotColumns
    # word of element k (counted over all vectors) of vector j: vectors[j] + 1 + k - (first k of j)
    elements = np.repeat(vectors - ends + count + _1, count) + np.arange(total)
    rel = w.unsigned(elements)
    if _nonzero(rel & _3):
        raise _NotColumns
    strings = elements + (rel >> _2)
    strings = _decode(buf, w, strings, w.unsigned(strings))
    lists = [strings[e - c:e] for e, c in zip(ends.tolist(), count.tolist(), strict=True)]
    return lists[:split], lists[split:]
