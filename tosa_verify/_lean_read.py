"""A lean reader of a whole TOSA flatbuffer: one pass, plain integer reads, vtables decoded once.

Loading a small lowered graph was mostly fixed Python work per table (a lowered graph declares
one tensor and one CONST operator per constant). This reader does the least such work:

* the buffer is read through two ``memoryview`` casts (``u32``, ``i32``) indexed by word, so a
  field read is one subscript instead of a ``struct`` call; flatbuffers aligns every 4-byte
  field, offset and length prefix to 4 bytes, and a position that is not aligned makes the
  reader decline (checked once per table, after its reads, which stay within the buffer);
* a builder shares one vtable between tables with the same fields present, and the decoded form
  of a vtable (where each field is, which other fields it sets) depends only on its bytes and
  the table's schema, so it is kept in a module-level cache keyed by those bytes (a schema-level
  key: a new graph written by the same builder hits it, and nothing of a graph's content is
  kept); within one load a dict from vtable position to decoded vtable skips even the key;
* a decoded tensor or operator vtable carries one precompiled ``unpack_from`` that reads all of
  the table's inline fields at once;
* strings are decoded with ``bytes.decode()``'s default, UTF-8 (naming the codec costs a lookup
  per string);
* the graph, its regions and blocks are read with one ``unpack_from`` each and no call per
  field (the skeleton: a fixed cost of every load), and their vtables straight from the cache;
* a block with many tensor or operator tables has them read column-wise by :mod:`._bulk_read`
  (numpy gathers over all tables at once), and the makers (``graph``) build a block's objects
  from its rows in one call; a smaller block's tables of the common layouts are read by the
  fused loops of :mod:`._fused_read`, which make each object as they read its table; a table
  of another layout leaves the block to the general table-by-table loops here (rows, then the
  makers).

It covers the common case and returns None for anything else (a field it does not read set to
other than its default, a position outside the buffer or not aligned, a corrupt count, an
unknown dtype or op code): the caller then reads the graph with the per-table reader, which
reports any error with its usual message. So the result, or the error, is always the per-table
reader's.

>>> read_graph(data, makers)   # doctest: +SKIP
((1, 0, 0, False), [('main', [block])])
"""

from __future__ import annotations

import struct
import sys
from collections import defaultdict
from collections.abc import Callable
from functools import reduce
from operator import add, itemgetter, or_
from typing import NamedTuple

from . import _bulk_read, _fused_read
from ._flatbuffer import _I32S, _U32S, Field, table_layout
from ._fused_read import _strings

#: (table, fields read in order): the tables this reader reads, and the fields it returns.
_SCHEMAS = {
    "TosaGraph": ("Version", "Regions"),
    "Version": ("_Major", "_Minor", "_Patch", "_Draft"),
    "TosaRegion": ("Name", "Blocks"),
    "TosaBasicBlock": ("Name", "Operators", "Tensors", "Inputs", "Outputs", "Shapes"),
    "TosaTensor": ("Name", "Shape", "Type", "Data"),
    "TosaOperator": ("Op", "AttributeType", "Attribute", "Inputs", "Outputs", "Location"),
    "OpLocation": ("Text",),
    "TosaShape": ("Name", "Rank", "Data"),
}

#: Fields the TOSA writers leave out that the other readers ignore (never read, so not checked).
_IGNORED = {"TosaGraph": ("SoftwareVersion", "Compatibility")}

#: Decoded vtables by table, then by vtable bytes: see the module docstring. Bounded, as a
#: corrupt file can make up any number of distinct vtables.
_VTABLES: dict[str, dict[bytes, tuple]] = {table: {} for table in _SCHEMAS}
_MAX_VTABLES = 4096


def _new_vtable(table: str, key: bytes) -> tuple:
    """Decode a vtable of ``table`` not seen before and keep it in :data:`_VTABLES`; declines
    unless ``key`` is a whole vtable of an even size (as its first word says; the per-table
    reader reads the others)."""
    if len(key) < 4 or len(key) & 1 or len(key) != key[0] | key[1] << 8:
        raise _Decline
    layouts = _VTABLES[table]
    if len(layouts) >= _MAX_VTABLES:
        layouts.clear()
    got = layouts[key] = _decode_vtable(table, key)
    return got


class _Decline(Exception):
    """The common case does not apply: the caller reads the graph with the other readers."""


class Makers(NamedTuple):
    """The graph's constructors: ``tensors(buf, rows)`` (by name) of the rows (name, shape, type code, data
    start, data length) of a block's tensor tables, ``shape(buf, name, rank, data start, data
    length)``, ``operators(buf, rows)`` of the rows (op code, attribute type, attribute table
    position or 0, inputs, outputs, location) of its operator tables and ``block(name, operators,
    tensors, inputs, outputs, shapes)``; any exception from them makes the reader decline. The
    fused loops (:mod:`._fused_read`) make the objects themselves, with ``tensor`` (the Tensor
    class), ``constants`` (dtype code -> (name, working dtype, itemsize) of the types whose
    data is a view of the bytes), ``limit`` (most elements of a tensor), ``decoded(buf, name,
    shape, code, data start, data length)`` (a tensor of another type), ``operator`` (the
    Operator class), ``op_names`` (op code -> name), ``fieldless`` (attribute type -> whether it
    has no fields) and ``attributes(buf, table position, attribute type, vtables seen)``."""

    tensors: Callable
    shape: Callable
    operators: Callable
    block: Callable
    tensor: type
    constants: dict
    limit: int
    decoded: Callable
    operator: type
    op_names: dict
    fieldless: dict
    attributes: Callable


def _decode_vtable(table: str, key: bytes) -> tuple:
    """(offset of each field read, or 0; [(offset, size)] of the other scalars present; offsets
    of the other strings and vectors present; the two callables of :func:`_inline_reader`; the
    fused loop's layout (see :mod:`._fused_read`) or None) of a
    vtable of ``table`` whose bytes are ``key``; declines when another field that cannot hold its default is present (a table, or a scalar
    whose default is not zero), or a 4-byte field is not aligned."""
    layout = table_layout(table)
    offsets = [int.from_bytes(key[k:k + 2], "little") for k in range(4, len(key) - 1, 2)]

    def offset(f: Field) -> int:
        i = (f.slot - 4) >> 1
        return offsets[i] if i < len(offsets) else 0

    read = _SCHEMAS[table]
    for name in read:
        f = layout[name]
        if offset(f) & 3 and not (f.kind == "scalar" and f.fmt in "?bB"):
            raise _Decline
    scalars, lengths = [], []
    for name, f in layout.items():
        off = offset(f)
        if not off or name in read or name in _IGNORED.get(table, ()):
            continue
        if f.kind == "scalar" and not f.default:
            scalars.append((off, _SIZES[f.fmt]))
        elif f.kind in ("string", "vector", "strings") and not off & 3:
            lengths.append(off)
        else:
            raise _Decline
    read_offsets, scalars, lengths = tuple(offset(layout[name]) for name in read), tuple(scalars), tuple(lengths)
    fused = _FUSED.get(table)
    return (read_offsets, scalars, lengths, *_inline_reader([layout[name] for name in read], read_offsets),
            fused and fused(read_offsets, scalars, lengths))


#: The layouts of the fused loops, by table.
_FUSED = {"TosaTensor": _fused_read.tensor_layout, "TosaOperator": _fused_read.operator_layout}


def _inline_reader(fields: list[Field], offsets: tuple[int, ...]) -> tuple[Callable, Callable | None]:
    """(one ``unpack_from`` of a table's inline values of ``fields`` at ``offsets``, in offset
    order; the ``itemgetter`` that puts them in field order from its result plus ``(0,)``, None
    when they are in field order and all present already): a
    scalar's value (0 when absent: the tables read this way have no other default) and an offset
    field's offset from its own position."""
    present = sorted((off, i) for i, off in enumerate(offsets) if off)
    fmt, end = "<", 0
    for off, i in present:
        code = fields[i].fmt if fields[i].kind == "scalar" else "I"
        if off < end:
            raise _Decline  # (overlapping fields)
        fmt, end = fmt + f"{off - end}x{code}", off + _SIZES[code]
    where = {i: k for k, (_, i) in enumerate(present)}
    order = tuple(where.get(i, len(present)) for i in range(len(fields)))
    # (None: the unpacked values are already in field order, all present)
    in_order = order == tuple(range(len(fields))) and len(present) == len(fields)
    return struct.Struct(fmt).unpack_from, None if in_order else itemgetter(*order)


#: What ``order`` (see :func:`_inline_reader`) picks for an absent field.
_ABSENT = (0,)

_SIZES = {"?": 1, "b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "f": 4, "q": 8, "Q": 8, "d": 8}


class _Buffer:
    """One buffer, its word view and the vtables seen in it by table (see the module docstring)."""

    def __init__(self, buf: bytes) -> None:
        if sys.byteorder != "little":
            raise _Decline  # (the word views are native-endian)
        self.buf, self.size = buf, len(buf)
        words = memoryview(buf)[: len(buf) & ~3]
        self.u32, self.i32 = words.cast("I"), words.cast("i")
        self.seen: dict[str, dict[int, tuple]] = defaultdict(dict)
        self.words: _bulk_read.Words | None = None  # (made when a block is read column-wise)

    def fields(self, table: str, pos: int) -> tuple[int, ...]:
        """The offsets of the fields of ``table`` this reader reads, of the table at ``pos`` (0:
        absent); declines when the table sets another field to other than its default."""
        if pos & 3:
            raise _Decline
        return self.entry(table, pos)[0]

    def entry(self, table: str, pos: int) -> tuple:
        """The decoded vtable (see :func:`_decode_vtable`) of the aligned table of ``table`` at
        ``pos``, after the checks of :meth:`fields`."""
        vt = pos - self.i32[pos >> 2]
        got = self.seen[table].get(vt) or self.vtable(table, vt)
        if got[1] or got[2]:
            self.check_defaults(pos, got[1], got[2])
        return got

    def row(self, table: str, pos: int) -> tuple[tuple[int, ...], tuple]:
        """(offsets of the fields of ``table`` this reader reads (0: absent), their inline values
        (0 when absent): a scalar's value, an offset field's offset from its own position) of
        the table at ``pos``, after the checks of :meth:`fields`."""
        vt = pos - self.i32[pos >> 2]
        if pos & 3 or vt < 0:
            raise _Decline
        buf = self.buf  # (a table read once per load: its vtable straight from the cache, see vtable())
        key = buf[vt:vt + (buf[vt] | buf[vt + 1] << 8)]
        offsets, scalars, lengths, inline, order, _ = _VTABLES[table].get(key) or _new_vtable(table, key)
        if scalars or lengths:
            self.check_defaults(pos, scalars, lengths)
        return offsets, (order(inline(buf, pos) + _ABSENT) if order else inline(buf, pos))

    def vtable_bounds(self, vt: int) -> int:
        """The end of the vtable at ``vt``; declines unless it lies in the buffer."""
        if vt < 0 or vt + 4 > self.size:
            raise _Decline
        end = vt + 4 + 2 * (max((self.buf[vt] | self.buf[vt + 1] << 8) - 4, 0) >> 1)
        if end > self.size:
            raise _Decline
        return end

    def vtable(self, table: str, vt: int) -> tuple:
        """The decoded vtable of ``table`` at ``vt``, from the module's cache after the first time."""
        if vt < 0:
            raise _Decline
        buf = self.buf
        # (the key is the bytes its first word says it has, an IndexError past the end; a key
        # cut short by the end of the buffer is never in the cache: see _new_vtable)
        key = buf[vt:vt + (buf[vt] | buf[vt + 1] << 8)]
        got = self.seen[table][vt] = _VTABLES[table].get(key) or _new_vtable(table, key)
        return got

    def check_defaults(self, pos: int, scalars: tuple, lengths: tuple) -> None:
        """Declines unless the other fields the table at ``pos`` sets hold their defaults."""
        buf, u32 = self.buf, self.u32
        for off, size in scalars:  # another scalar field written: it must be zero
            if pos + off + size > self.size or any(buf[pos + off:pos + off + size]):
                raise _Decline
        for off in lengths:  # another string or vector written: it must be empty
            at = pos + off
            start = at + u32[at >> 2]
            if start & 3 or u32[start >> 2]:
                raise _Decline

    def target(self, at: int) -> int:
        """The position an offset field at ``at`` refers to (0 when ``at`` is 0: absent)."""
        if not at:
            return 0
        start = at + self.u32[at >> 2]
        if start & 3:
            raise _Decline
        return start

    def tables(self, at: int) -> list[int]:
        """Positions of the tables (or strings) of the vector of offsets referenced from ``at``
        (0: absent), each checked to be aligned."""
        return self.tables_at(at + self.u32[at >> 2]) if at else []

    def tables_at(self, start: int) -> list[int]:
        """Positions of the tables (or strings) of the vector of offsets at ``start`` (0:
        absent), each checked to be aligned."""
        if not start:
            return []
        count = self.u32[start >> 2]
        if start & 3 or start + 4 + 4 * count > self.size:  # (before allocating by a corrupt count)
            raise _Decline
        if count < 2:  # (a graph's one region and one block, a block's empty shapes)
            if not count:
                return []
            start += 4 + self.u32[(start >> 2) + 1]
            if start & 3:
                raise _Decline
            return [start]
        # (C-level map and reduce: a comprehension costs a function call in Python 3.11)
        out = list(map(add, _U32S[count](self.buf, start + 4), range(start + 4, start + 4 + 4 * count, 4)))
        if reduce(or_, out, 0) & 3:
            raise _Decline
        return out

    def string(self, at: int) -> str:
        """The string referenced from ``at`` ("" when ``at`` is 0: absent)."""
        return self.string_at(self.target(at))

    def string_at(self, start: int) -> str:
        """The string at ``start`` ("" when ``start`` is 0: absent)."""
        if not start:
            return ""
        if start & 3:
            raise _Decline
        end = start + 4 + self.u32[start >> 2]
        if end > self.size:
            raise _Decline
        return self.buf[start + 4:end].decode()

    def strings(self, at: int) -> list[str]:
        """The strings of the vector of strings referenced from ``at`` ([] when absent)."""
        return _strings(self.buf, self.u32, self.size, self.target(at)) if at else []

    def bytes_at(self, at: int) -> tuple[int, int]:
        """(start, length) of the bytes of the vector referenced from ``at`` ((0, 0) when absent)."""
        start = self.target(at)
        if not start:
            return 0, 0
        length = self.u32[start >> 2]
        if start + 4 + length > self.size:
            raise _Decline
        return start + 4, length


def read_graph(buf: bytes, makers: Makers) -> tuple[tuple[int, int, int, bool], list] | None:
    """(version, [(region name, [block, ...]), ...]) of the TOSA flatbuffer ``buf``, the blocks
    made by ``makers``; None when the common case does not apply (see the module docstring)."""
    try:
        b = _Buffer(buf)
        root = b.u32[0]
        (o_version, o_regions), (version, regions_at) = b.row("TosaGraph", root)
        if not o_version:
            raise _Decline
        regions = []
        for region in b.tables_at(root + o_regions + regions_at if o_regions else 0):
            (o_name, o_blocks), (name, blocks) = b.row("TosaRegion", region)
            blocks = b.tables_at(region + o_blocks + blocks if o_blocks else 0)
            regions.append((b.string_at(region + o_name + name if o_name else 0),
                            [_block(b, block, makers) for block in blocks] if len(blocks) > 1 else
                            [_block(b, blocks[0], makers)] if blocks else []))
        return _version(b, root + o_version + version), regions
    except Exception:  # noqa: BLE001  (the per-table reader reports it, with its message)
        return None


def _version(b: _Buffer, at: int) -> tuple[int, int, int, bool]:
    offsets, (major, minor, patch, draft) = b.row("Version", at)
    if all(offsets):  # (as the writers write it: one unpack)
        return major, minor, patch, bool(draft)
    layout = table_layout("Version")
    values = []
    for name, off in zip(_SCHEMAS["Version"], offsets, strict=True):
        f = layout[name]
        if not off:
            values.append(f.default)
        elif f.fmt == "?":
            values.append(bool(b.buf[at + off]))
        else:
            values.append(b.i32[(at + off) >> 2])
    major, minor, patch, draft = values
    return major, minor, patch, draft


def _block(b: _Buffer, pos: int, makers: Makers):
    (o_name, o_ops, o_tensors, o_in, o_out, o_shapes), (name, operators, tensors, inputs, outputs, shapes) = b.row(
        "TosaBasicBlock", pos)
    start = pos + o_tensors + tensors if o_tensors else 0
    tensors = _objects(b, start, makers, _TENSORS)
    if start and len(tensors) != b.u32[start >> 2]:
        raise _Decline  # (two tensors of one name: the per-table reader reports it)
    shapes = b.tables_at(pos + o_shapes + shapes if o_shapes else 0)
    shapes = [_shape(b, at, makers.shape) for at in shapes] if shapes else []
    operators = _objects(b, pos + o_ops + operators if o_ops else 0, makers, _OPERATORS)
    buf, u32, size = b.buf, b.u32, b.size
    return makers.block(b.string_at(pos + o_name + name if o_name else 0), operators, tensors,
                        _strings(buf, u32, size, pos + o_in + inputs) if o_in else [],
                        _strings(buf, u32, size, pos + o_out + outputs) if o_out else [], shapes)


def _objects(b: _Buffer, start: int, makers: Makers, readers: tuple) -> list:
    """The objects of the tables of the vector of offsets at ``start`` (0: absent), ``readers``
    (see :data:`_TENSORS`) giving the ways to read them: column-wise (:mod:`._bulk_read`) when
    there are enough of them and that reader's case applies, else by the fused loop
    (:mod:`._fused_read`) when every table has its layout, else table by table."""
    columns, least, fused, tables, make = readers
    if start & 3:
        raise _Decline
    if start and b.u32[start >> 2] >= getattr(_bulk_read, least):
        if b.words is None:
            b.words = _bulk_read.Words(b.buf)
        rows = getattr(_bulk_read, columns)(b, start)
        if rows is not None:
            return getattr(makers, make)(b.buf, rows)
    positions = b.tables_at(start)
    try:
        return getattr(_fused_read, fused)(b, positions, makers)
    except _fused_read.NotFused:
        return getattr(makers, make)(b.buf, tables(b, positions))


def _tensors(b: _Buffer, positions: list[int]) -> list[tuple]:
    """(name, shape, type code, data start, data length) of each tensor table: the reads of
    :meth:`_Buffer.fields`, ``string`` and ``bytes_at`` inlined (most of a small graph's tables
    are tensors)."""
    buf, u32, i32, size, seen = b.buf, b.u32, b.i32, b.size, b.seen["TosaTensor"]
    out, aligned = [], 0
    for pos in positions:  # (aligned, as tables() checks)
        vt = pos - i32[pos >> 2]
        (o_name, o_shape, o_type, o_data), scalars, lengths, inline, order, _ = (
            seen.get(vt) or b.vtable("TosaTensor", vt))
        name, shape, code, data = order(inline(buf, pos) + _ABSENT) if order else inline(buf, pos)
        if scalars:
            b.check_defaults(pos, scalars, ())
        for at in lengths:  # (a lowered graph's tensors write an empty VariableName and ScaleData)
            at += pos + u32[(pos + at) >> 2]
            if u32[at >> 2]:
                raise _Decline
            aligned |= at
        start = pos + o_name + name + 4
        end = start + u32[(start >> 2) - 1]
        if end > size or not o_name:
            raise _Decline
        name = buf[start:end].decode()
        aligned |= start
        if o_shape:
            start = pos + o_shape + shape + 4
            count = u32[(start >> 2) - 1]
            if start + 4 * count > size:
                raise _Decline
            aligned |= start
            shape = _I32S[count](buf, start)
            if shape and min(shape) < 0:
                raise _Decline
        start = length = 0
        if o_data:
            start = pos + o_data + data + 4
            length = u32[(start >> 2) - 1]
            if start + length > size:
                raise _Decline
            aligned |= start
        out.append((name, shape or (), code, start, length))
    if aligned & 3:  # (every read above stayed inside the buffer)
        raise _Decline
    return out


def _shape(b: _Buffer, pos: int, make: Callable):
    o_name, o_rank, o_data = b.fields("TosaShape", pos)
    return make(b.buf, b.string(pos + o_name if o_name else 0), b.u32[(pos + o_rank) >> 2] if o_rank else 0,
                *b.bytes_at(pos + o_data if o_data else 0))


def _operators(b: _Buffer, positions: list[int]) -> list[tuple]:
    """(op code, attribute type, attribute table position or 0, inputs, outputs, location) of
    each operator table; the attribute table's bounds are checked here (the operator maker reads
    its fields, if its type has any)."""
    buf, u32, i32, size, seen = b.buf, b.u32, b.i32, b.size, b.seen["TosaOperator"]
    text_at: dict[int, int] = {}  # location vtable -> Text offset, when it sets nothing else
    checked: set[int] = set()  # attribute vtables
    out, aligned = [], 0
    for pos in positions:  # (aligned, as tables() checks)
        vt = pos - i32[pos >> 2]
        (o_op, o_kind, o_attr, o_in, o_out, o_loc), scalars, lengths, inline, order, _ = (
            seen.get(vt) or b.vtable("TosaOperator", vt))
        code, kind, attribute, inputs, outputs, loc = order(inline(buf, pos) + _ABSENT) if order else inline(buf, pos)
        if scalars or lengths:
            b.check_defaults(pos, scalars, lengths)
        location = ""
        if o_loc:
            loc += pos + o_loc
            vt = loc - i32[loc >> 2]
            o_text = text_at.get(vt)
            if o_text is None:
                (o_text,), scalars, lengths = b.vtable("OpLocation", vt)[:3]
                if scalars or lengths:
                    b.check_defaults(loc, scalars, lengths)
                else:
                    text_at[vt] = o_text
            if o_text:
                start = loc + o_text + u32[(loc + o_text) >> 2] + 4
                end = start + u32[(start >> 2) - 1]
                if end > size:
                    raise _Decline
                if end > start:  # (a lowered graph's locations are empty)
                    location = buf[start:end].decode()
                aligned |= start
            aligned |= loc
        if o_in:  # (a CONST's inputs: an empty vector, read here without a call)
            inputs += pos + o_in
            aligned |= inputs
            inputs = _strings(buf, u32, size, inputs) if u32[inputs >> 2] else []
        if o_attr:  # (its bounds checked as the per-table reader's Table() would, once per vtable)
            attribute += pos + o_attr
            aligned |= attribute
            vt = attribute - i32[attribute >> 2]
            if vt not in checked:
                b.vtable_bounds(vt)
                checked.add(vt)
        if o_out:  # (most operators have one output: read here without a call)
            outputs += pos + o_out
            aligned |= outputs
            if u32[outputs >> 2] == 1:
                start = outputs + 8 + u32[(outputs >> 2) + 1]
                end = start + u32[(start >> 2) - 1]
                if end > size:
                    raise _Decline
                aligned |= start
                outputs = [buf[start:end].decode()]
            else:
                outputs = _strings(buf, u32, size, outputs)
        out.append((code, kind, attribute, inputs or [], outputs or [], location))
    if aligned & 3:  # (every read above stayed inside the buffer)
        raise _Decline
    return out


#: (names of the column reader, of its least table count and of the fused loop, table-by-table reader, maker) of
#: the tensor and the operator tables (names looked up at each call: tests change them).
_TENSORS = ("tensor_rows", "MIN_TABLES", "tensors", _tensors, "tensors")
_OPERATORS = ("operator_rows", "MIN_OPERATORS", "operators", _operators, "operators")
