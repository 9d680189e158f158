"""Reading a block's tensor and operator tables straight into Tensor and Operator objects.

The lean reader (:mod:`._lean_read`) reads tables into rows of plain values and the graph's
makers build objects from the rows: two loops, a tuple per table, and per table a look-up of
its vtable with the checks that any layout needs. A lowered graph's tables share a handful of
vtables, each of one common layout: a tensor writes its name, shape, type and data, and an
empty VariableName and ScaleData; an operator writes its op code, attribute type and table,
inputs, outputs and a location. For these layouts a decoded vtable carries a *fused* reader
(:func:`tensor_layout`, :func:`operator_layout`): one ``unpack_from`` of every offset the loop
needs, in a fixed order, and the field offsets; the loops here read each table with it and
make its object in the same iteration, looking a vtable up only when it changes from the
previous table's. A table of any other layout makes them raise :class:`NotFused`, and the
caller reads the block with the general loops.

The checks are the general loops': every position read lies in the buffer (a memoryview or
struct read past it raises, a slice's end is compared with the buffer's size), every 4-byte
position is aligned (or-ed together and checked once at the end), the other fields present
hold their defaults (the empty vectors are checked here), and anything unusual raises, which
makes the lean reader decline to the per-table reader, whose result or error is the one given.

>>> tensors(b, positions, makers)   # doctest: +SKIP
{'x': Tensor(name='x', shape=(1, 8), dtype='INT8', ...)}
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

import numpy as np

from ._flatbuffer import _I32S


def tensor_layout(offsets: tuple[int, ...], scalars: tuple, lengths: tuple) -> tuple | None:
    """(``unpack_from`` of the name, shape, type, data and two empty vectors' fields; the
    offsets of name, shape and data plus 4, of the two empty vectors) of a TosaTensor
    vtable whose read fields are at ``offsets`` (Name, Shape, Type, Data), with other scalars
    ``scalars`` and other vectors ``lengths`` present; None for another layout.

    >>> tensor_layout((4, 8, 12, 16), (), (20, 24))[1:]
    (8, 12, 20, 20, 24)
    """
    o_name, o_shape, _, o_data = offsets
    unpack = _unpacker((*offsets, *lengths), "IIIIII") if len(lengths) == 2 and not scalars and all(offsets) else None
    return None if unpack is None else (unpack, o_name + 4, o_shape + 4, o_data + 4, *lengths)


def operator_layout(offsets: tuple[int, ...], scalars: tuple, lengths: tuple) -> tuple | None:
    """(``unpack_from`` of the attribute type, op code, attribute, inputs, outputs and location
    fields; the offsets of the last four) of a TosaOperator vtable whose read fields are at
    ``offsets`` (Op, AttributeType, Attribute, Inputs, Outputs, Location), all present in that
    order but for the attribute type (a byte) first, as flatbuffers builders lay them out,
    nothing else present; None for another layout.

    >>> operator_layout((8, 7, 12, 16, 20, 24), (), ())[1:]
    (12, 16, 20, 24)
    """
    o_op, o_kind, *rest = offsets
    unpack = _unpacker((o_kind, o_op, *rest), "BIIIII") if not scalars and not lengths and all(offsets) else None
    return None if unpack is None else (unpack, *rest)


def _unpacker(offsets: tuple[int, ...], codes: str) -> Callable | None:
    """One ``unpack_from`` of the little-endian ``codes`` at ``offsets`` of a table; None unless
    the offsets increase and the fields do not overlap (the fused loops read them in order)."""
    fmt, end = "<", 0
    for off, code in zip(offsets, codes, strict=True):
        if off < end:
            return None
        fmt, end = fmt + f"{off - end}x{code}", off + struct.calcsize(code)
    return struct.Struct(fmt).unpack_from


def tensors(b, positions: list[int], mk) -> dict:
    """The Tensor objects by name of the tensor tables at ``positions`` (aligned) of the lean reader's
    buffer ``b``, made by the makers ``mk``; raises :class:`NotFused` when a table's layout is
    not the fused one."""
    buf, u32, i32, size, dims = b.buf, b.u32, b.i32, b.size, _I32S
    plain, tensor, limit, prod, ndarray, new = mk.constants, mk.tensor, mk.limit, math.prod, np.ndarray, object.__new__
    out, aligned, vt = {}, 0, -1
    for pos in positions:
        if pos - i32[pos >> 2] != vt:
            vt, (unpack, o_name, o_shape, o_data, o_empty, o_empty2) = _layout(b, "TosaTensor", pos)
        name, shape, code, data, empty, empty2 = unpack(buf, pos)
        # (pos and the field offsets are aligned: what a field refers to is when its offset is)
        aligned |= name | shape | data | empty | empty2
        name += pos + o_name  # (the first byte of each; its length is the word before)
        shape += pos + o_shape
        data += pos + o_data
        end = name + u32[(name >> 2) - 1]
        rank = u32[(shape >> 2) - 1]
        length = u32[(data >> 2) - 1]
        if end > size or shape + 4 * rank > size or data + length > size or u32[
                (pos + o_empty + empty) >> 2] or u32[(pos + o_empty2 + empty2) >> 2]:
            raise ValueError("a tensor table runs past the end, or sets VariableName or ScaleData")
        shape = dims[rank](buf, shape)
        if shape and min(shape) < 0:
            raise ValueError("negative dimension")  # (the per-table reader names the tensor)
        got = plain.get(code)
        name = buf[name:end].decode()
        if got is None:
            out[name] = mk.decoded(buf, name, shape, code, data, length)
            continue
        if prod(shape) > limit or length and length < prod(shape) * got[2]:
            raise ValueError("tensor too large or constant too short")  # (the per-table reader names it)
        # the dataclass's fields set here, not by a call of its __init__ (a third of the time)
        t = out[name] = new(tensor)
        t.name, t.shape, t.dtype = name, shape, got[0]
        # a read-only view of the file's bytes, as decode_constant makes
        t.data = ndarray(shape, got[1], buf, data) if length else None
        t.variable, t.variable_name, t.unranked = False, "", False
    if aligned & 3:  # (every read above stayed inside the buffer)
        raise ValueError("misaligned")
    return out


def operators(b, positions: list[int], mk) -> list:
    """The Operator objects of the operator tables at ``positions`` (aligned) of the lean
    reader's buffer ``b``, made by the makers ``mk``; raises :class:`NotFused` when a table's
    layout is not the fused one."""
    buf, u32, i32, size = b.buf, b.u32, b.i32, b.size
    names, fieldless, operator, attributes, strings = mk.op_names, mk.fieldless, mk.operator, mk.attributes, _strings
    new = object.__new__
    checked: set[int] = set()  # attribute vtables whose bounds were checked
    attribute_vtables: dict = {}
    out, aligned, vt, location_vt = [], 0, -1, -1
    for pos in positions:
        if pos - i32[pos >> 2] != vt:
            vt, (unpack, o_attr, o_in, o_out, o_loc) = _layout(b, "TosaOperator", pos)
        kind, code, attribute, inputs, outputs, loc = unpack(buf, pos)
        loc += pos + o_loc
        if loc - i32[loc >> 2] != location_vt:
            location_vt = loc - i32[loc >> 2]
            o_text = _location_text(b, location_vt)
        if o_text:
            start = loc + o_text
            start += u32[start >> 2] + 4
            end = start + u32[(start >> 2) - 1]
            aligned |= start
            # (a lowered graph's locations are empty; an empty one's end is its length word's)
            location = _text(buf, start, end, size) if end > start else ""
        else:
            location = ""
        inputs += pos + o_in
        outputs += pos + o_out
        attribute += pos + o_attr
        aligned |= loc | inputs | outputs | attribute
        attribute_vt = attribute - i32[attribute >> 2]
        if attribute_vt not in checked:  # (as the per-table reader's Table() checks it)
            b.vtable_bounds(attribute_vt)
            checked.add(attribute_vt)
        inputs = strings(buf, u32, size, inputs) if u32[inputs >> 2] else []
        if u32[outputs >> 2] == 1:  # (most operators have one output: read here without a call)
            start = outputs + 8 + u32[(outputs >> 2) + 1]
            end = start + u32[(start >> 2) - 1]
            if end > size:
                raise ValueError("an output name runs past the end")
            aligned |= start
            outputs = [buf[start:end].decode()]
        else:
            outputs = strings(buf, u32, size, outputs)
        op = new(operator)  # (the dataclass's fields set here, not by a call of its __init__)
        op.op, op.attrs = names[code], {} if fieldless[kind] else attributes(buf, attribute, kind, attribute_vtables)
        op.inputs, op.outputs, op.location = inputs, outputs, location
        out.append(op)
    if aligned & 3:  # (every read above stayed inside the buffer)
        raise ValueError("misaligned")
    return out


def _text(buf: bytes, start: int, end: int, size: int) -> str:
    """The string of bytes ``start:end`` of ``buf`` (of ``size`` bytes)."""
    if end > size:
        raise ValueError("a string runs past the end")
    return buf[start:end].decode()


class NotFused(Exception):
    """A table's layout is not the fused loop's: the general loop reads the block."""


def _layout(b, table: str, pos: int) -> tuple[int, tuple]:
    """(vtable position, fused layout) of the ``table`` table at ``pos``; raises
    :class:`NotFused` when its layout is not the fused loop's."""
    vt = pos - b.i32[pos >> 2]
    layout = (b.seen[table].get(vt) or b.vtable(table, vt))[5]
    if layout is None:
        raise NotFused
    return vt, layout


def _location_text(b, vt: int) -> int:
    """The offset of Text in the OpLocation tables of vtable ``vt`` (0: absent); raises
    :class:`NotFused` when they set another field (the general loop checks it)."""
    (o_text,), scalars, lengths = b.vtable("OpLocation", vt)[:3]
    if scalars or lengths:
        raise NotFused
    return o_text


def _strings(buf: bytes, u32: memoryview, size: int, start: int) -> list[str]:
    """The strings of the vector of strings at ``start`` (``u32``: the buffer's words)."""
    count = u32[start >> 2]
    if start & 3 or start + 4 + 4 * count > size:  # (before allocating by a corrupt count)
        raise ValueError("a vector of strings runs past the end")
    if count == 1:  # (most inputs and outputs lists)
        begin = start + 8 + u32[(start >> 2) + 1]
        end = begin + u32[(begin >> 2) - 1]
        if end > size or begin & 3:
            raise ValueError("a string runs past the end, or is misaligned")
        return [buf[begin:end].decode()]
    out, aligned = [], 0
    for at in range(start + 4, start + 4 + 4 * count, 4):
        begin = at + u32[at >> 2] + 4
        end = begin + u32[(begin >> 2) - 1]
        if end > size:
            raise ValueError("a string runs past the end")
        aligned |= begin
        out.append(buf[begin:end].decode())
    if aligned & 3:
        raise ValueError("misaligned")
    return out
