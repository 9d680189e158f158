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

#: Blocks with fewer tensor (or operator) tables than this are read table by table: the column
#: reader's fixed cost (some 50 numpy calls) would not pay off.
MIN_TABLES = 12

#: What the extents of the name, shape and data vectors of a tensor are in bytes per element.
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


def _positions(w: Words, start: int) -> np.ndarray:
    """Positions of the tables of the vector of offsets at ``start`` (int64, each aligned)."""
    count = int(w.u32[start >> 2])
    if start & 3 or start + 4 + 4 * count > w.size:  # (before allocating by a corrupt count)
        raise _NotColumns
    at = np.arange(start + 4, start + 4 + 4 * count, 4)
    rel = w.u32[at >> 2]
    if (rel & 3).any():
        raise _NotColumns
    return at + rel


def _uniform(b, table: str, pos: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(offsets of the fields read, offsets of the other strings and vectors present) shared by
    the vtables of all tables of ``table`` at ``pos``, each read field present; ``b`` is the lean
    reader's buffer, whose vtable cache decodes them (and declines on another field set)."""
    seen = b.seen[table]
    decoded = {(seen.get(vt) or b.vtable(table, vt))[:3] for vt in set((pos - b.words.i32[pos >> 2]).tolist())}
    if len(decoded) != 1:
        raise _NotColumns
    [(offsets, scalars, lengths)] = decoded
    if scalars or not all(offsets):
        raise _NotColumns
    return offsets, lengths


def _check_empty(w: Words, pos: np.ndarray, lengths: tuple[int, ...]) -> None:
    """Raises unless the strings or vectors at ``lengths`` of every table at ``pos`` are empty
    (a lowered graph's tensors write an empty VariableName and ScaleData)."""
    if lengths:
        at = pos[:, None] + lengths
        rel = w.u32[at >> 2]
        if (rel & 3).any() or w.u32[(at + rel) >> 2].any():
            raise _NotColumns


def _strings(buf: bytes, w: Words, at: np.ndarray) -> list[str]:
    """The strings referenced from the offset fields at ``at`` (flattened)."""
    rel = w.u32[at >> 2]
    begin = at + rel + 4
    count = w.u32[(begin >> 2) - 1]
    if begin.size and ((rel & 3).any() or int((begin + count).max()) > w.size):
        raise _NotColumns
    return [buf[a:a + n].decode() for a, n in zip(begin.tolist(), count.tolist(), strict=True)]


def tensor_rows(b, start: int) -> Iterator[tuple] | None:
    """(name, shape, dtype code, data start, data length) of each tensor table of the vector of
    offsets at ``start`` of the lean reader's buffer ``b``; None when the case does not apply."""
    try:
        w, buf = b.words, b.buf
        pos = _positions(w, start)
        (o_name, o_shape, o_type, o_data), lengths = _uniform(b, "TosaTensor", pos)
        _check_empty(w, pos, lengths)
        at = pos[:, None] + (o_name, o_shape, o_data)
        rel = w.u32[at >> 2]
        begin = at + rel + 4
        count = w.u32[(begin >> 2) - 1]
        if (rel & 3).any() or int((begin + count * _TENSOR_WIDTHS).max()) > w.size:
            raise _NotColumns
        (name_at, shape_at, data_at), (name_len, rank, data_len) = begin.T.tolist(), count.T.tolist()
        names = [buf[a:a + n].decode() for a, n in zip(name_at, name_len, strict=True)]
        shapes = [_I32S[n](buf, a) for a, n in zip(shape_at, rank, strict=True)]
        if min(chain.from_iterable(shapes), default=0) < 0:
            raise _NotColumns
        codes = w.u32[(pos + o_type) >> 2].tolist()
        return zip(names, shapes, codes, data_at, data_len, strict=True)
    except Exception:  # noqa: BLE001  (the table-by-table reader reads it, or declines)
        return None


def operator_rows(b, start: int) -> Iterator[tuple] | None:
    """(op code, attribute type, attribute table position, inputs, outputs, location) of each
    operator table of the vector of offsets at ``start``, the attribute and location tables'
    vtables checked to lie in the buffer; None when the case does not apply."""
    try:
        w, buf = b.words, b.buf
        pos = _positions(w, start)
        (o_op, o_kind, o_attr, o_in, o_out, o_loc), lengths = _uniform(b, "TosaOperator", pos)
        _check_empty(w, pos, lengths)
        at = pos[:, None] + (o_attr, o_in, o_out, o_loc)
        rel = w.u32[at >> 2]
        if (rel & 3).any():
            raise _NotColumns
        target = at + rel  # attribute table, inputs and outputs vectors, location table
        _check_vtables(b, target[:, 0])
        locations = _locations(b, target[:, 3])
        lists = _string_lists(buf, w, target[:, 1:3])
        codes, kinds = w.u32[(pos + o_op) >> 2].tolist(), w.u8[pos + o_kind].tolist()
        return zip(codes, kinds, target[:, 0].tolist(), lists[0::2], lists[1::2], locations, strict=True)
    except Exception:  # noqa: BLE001  (the table-by-table reader reads it, or declines)
        return None


def _check_vtables(b, tables: np.ndarray) -> None:
    """Raises unless the vtables of the tables at ``tables`` lie in the buffer (what the
    per-table reader's ``Table()`` checks of an attribute table)."""
    for vt in set((tables - b.words.i32[tables >> 2]).tolist()):
        b.vtable_bounds(vt)


def _locations(b, tables: np.ndarray) -> list[str]:
    """The Text of each OpLocation table at ``tables`` ("" when absent or empty)."""
    w = b.words
    decoded = {b.vtable("OpLocation", vt)[:3] for vt in set((tables - w.i32[tables >> 2]).tolist())}
    if len(decoded) != 1:
        raise _NotColumns
    [((o_text,), scalars, lengths)] = decoded
    if scalars or lengths:
        raise _NotColumns
    if not o_text:
        return [""] * len(tables)
    at = tables + o_text
    rel = w.u32[at >> 2]
    begin = at + rel + 4
    count = w.u32[(begin >> 2) - 1]
    if (rel & 3).any() or int((begin + count).max(initial=0)) > w.size:
        raise _NotColumns
    if not count.any():  # (a lowered graph's locations are empty)
        return [""] * len(tables)
    return [b.buf[a:a + n].decode() for a, n in zip(begin.tolist(), count.tolist(), strict=True)]


def _string_lists(buf: bytes, w: Words, vectors: np.ndarray) -> list[list[str]]:
    """The strings of each vector of strings at ``vectors`` (any shape), in row-major order."""
    vectors = vectors.ravel()
    count = w.u32[vectors >> 2].astype(np.int64)
    if vectors.size and int((vectors + 4 * count).max()) + 4 > w.size:  # (before allocating by it)
        raise _NotColumns
    ends = np.cumsum(count)
    # element k (counted over all vectors) of vector j sits at vectors[j] + 4 + 4 * (k - first k of j)
    elements = np.repeat(vectors + 4 - 4 * (ends - count), count) + 4 * np.arange(int(ends[-1]) if ends.size else 0)
    strings = _strings(buf, w, elements)
    return [strings[e - c:e] for e, c in zip(ends.tolist(), count.tolist(), strict=True)]

