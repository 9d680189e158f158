"""The fused loops of the lean reader (``tosa_verify._fused_read``): the layouts they take and
leave, the fields their unpackers read, that they read the lowered graphs themselves, that a
table of another layout leaves its block to the general loops, and that the vtable cache never
takes a vtable cut short by the end of the buffer. That they give the per-table reader's graph,
or its error, on every shipped graph and on corrupted bytes is in test_lean_read.py."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from test_bulk_read import _chain, _vector
from test_lean_read import GRAPHS, _lean

from tosa_verify import _bulk_read, _fused_read, _lean_read, graph
from tosa_verify.writer import to_flatbuffer


def test_the_common_layouts_are_taken_and_the_others_left_to_the_general_loops() -> None:
    assert _fused_read.tensor_layout((4, 8, 12, 16), (), (20, 24)) is not None
    assert _fused_read.tensor_layout((4, 8, 12, 0), (), (20, 24)) is None  # (no Data)
    assert _fused_read.tensor_layout((4, 8, 12, 16), ((28, 1),), (20, 24)) is None  # (another scalar)
    assert _fused_read.tensor_layout((4, 8, 12, 16), (), (20,)) is None  # (one empty vector)
    assert _fused_read.tensor_layout((8, 4, 12, 16), (), (20, 24)) is None  # (out of order)
    assert _fused_read.tensor_layout((4, 6, 12, 16), (), (20, 24)) is None  # (overlapping)
    assert _fused_read.operator_layout((8, 7, 12, 16, 20, 24), (), ()) is not None
    assert _fused_read.operator_layout((4, 8, 12, 16, 20, 24), (), ()) is None  # (Op before AttributeType)
    assert _fused_read.operator_layout((8, 7, 12, 16, 20, 0), (), ()) is None  # (no Location)
    assert _fused_read.operator_layout((8, 7, 12, 16, 20, 24), (), (28,)) is None  # (another vector)


def test_an_unpacker_reads_each_field_at_its_offset() -> None:
    buf = bytes(range(7, 47))
    unpack = _fused_read._unpacker((3, 4, 8, 16), "BIIi")
    for pos in (0, 4, 12):
        assert unpack(buf, pos) == (buf[pos + 3], *struct.unpack_from("<II", buf, pos + 4),
                                    struct.unpack_from("<i", buf, pos + 16)[0])
    assert _fused_read._unpacker((4, 6), "II") is None  # (overlapping)
    with pytest.raises(struct.error):  # (a table running past the end: the lean reader declines)
        unpack(buf, len(buf) - 16)


def test_the_fused_loops_read_the_lowered_graphs_themselves(monkeypatch) -> None:
    """They do not just decline: every block of the lowered graphs is read by them."""
    monkeypatch.setattr(_bulk_read, "MIN_TABLES", 10**6)
    monkeypatch.setattr(_bulk_read, "MIN_OPERATORS", 10**6)
    results = []
    for reader in ("tensors", "operators"):
        real = getattr(_fused_read, reader)
        monkeypatch.setattr(_fused_read, reader, lambda *a, real=real: results.append(real(*a)) or results[-1])
    lowered = [data for name, data in GRAPHS if not name.endswith("test.tosa")]
    for data in lowered + [_chain()]:
        assert _lean(data) is not None
    assert len(results) >= 2 * (len(lowered) + 1)  # (each a dict or list of objects: none raised NotFused)


def _tensor_values(tensors: dict) -> list[tuple]:
    return [(k, t.name, t.shape, t.dtype, None if t.data is None else (t.data.dtype, t.data.tobytes()))
            for k, t in tensors.items()]


def test_a_table_of_another_layout_leaves_the_block_to_the_general_loop(monkeypatch) -> None:
    monkeypatch.setattr(_bulk_read, "MIN_TABLES", 10**6)
    data = _chain()
    b = _lean_read._Buffer(data)
    start = _vector(data, "Tensors")
    positions = b.tables_at(start)
    fused = _fused_read.tensors(b, positions, graph._MAKERS)
    assert len(fused) == 33
    # the last table's vtable, as if of another layout (this buffer's decoded vtables only)
    vt = positions[-1] - b.i32[positions[-1] >> 2]
    b.seen["TosaTensor"][vt] = b.seen["TosaTensor"][vt][:5] + (None,)
    with pytest.raises(_fused_read.NotFused):
        _fused_read.tensors(b, positions, graph._MAKERS)
    general = _lean_read._objects(b, start, graph._MAKERS, _lean_read._TENSORS)
    assert _tensor_values(general) == _tensor_values(fused)
    theirs = graph._read_graph(data, graph._op_names())[1][0].blocks[0].tensors
    assert _tensor_values(general) == _tensor_values(theirs)


def test_a_vtable_cut_short_by_the_end_of_the_buffer_is_never_decoded() -> None:
    name, data = GRAPHS[0]
    b = _lean_read._Buffer(data)
    root = b.u32[0]
    vt = root - b.i32[root >> 2]
    size = data[vt] | data[vt + 1] << 8
    assert b.vtable("TosaGraph", vt)[0] == (4, 8)  # (Version and Regions, as the writers place them)
    with pytest.raises(_lean_read._Decline):  # (its first word says more bytes than are left)
        _lean_read._Buffer(data[:vt + size - 2]).vtable("TosaGraph", vt)
    for key in (bytes([5, 0, 8, 0, 4]), bytes([2, 0]), bytes([8, 0, 8, 0, 4, 0])):  # (odd, short, cut)
        with pytest.raises(_lean_read._Decline):
            _lean_read._new_vtable("TosaGraph", key)


def test_the_loaders_objects_are_the_dataclasses_own(monkeypatch) -> None:
    """The loops set a Tensor's and an Operator's fields themselves (no __init__ call): every
    field, in the dataclass's order, equal to the constructor's object, on every path."""
    data = _chain()
    for min_tables in (10**6, 0):  # (fused loops; column-wise rows and the graph's makers)
        monkeypatch.setattr(_bulk_read, "MIN_TABLES", min_tables)
        monkeypatch.setattr(_bulk_read, "MIN_OPERATORS", min_tables)
        block = graph.parse(data).main
        for objects, cls in ((list(block.tensors.values()), graph.Tensor), (block.operators, graph.Operator)):
            names = [f.name for f in dataclasses.fields(cls)]
            for obj in objects:
                assert type(obj) is cls and list(vars(obj)) == names
                assert repr(cls(**vars(obj))) == repr(obj)
        assert block.operators[0] == graph.Operator("CONST", {}, [], ["c0"])
        c1 = block.tensors["c1"]
        assert (c1.shape, c1.dtype, c1.data.tolist(), c1.variable, c1.variable_name, c1.unranked) == (
            (1, 3), "INT32", [[0, 1, 2]], False, "", False)


def _not_fused(*args) -> None:
    raise _fused_read.NotFused


@pytest.mark.parametrize("fused", [True, False])
def test_a_tensor_setting_a_field_the_reader_does_not_read_is_left_to_the_table_reader(monkeypatch, fused) -> None:
    """A VariableName the lean reader does not read makes it decline (the fused loop checks the
    vectors it skips are empty), so the graph's tensor keeps it."""
    if not fused:
        monkeypatch.setattr(_fused_read, "tensors", _not_fused)
    tensors = {"x": graph.Tensor("x", (1, 3), "INT32"), "y": graph.Tensor("y", (1, 3), "INT32", variable_name="named")}
    block = graph.Block("main", [graph.Operator("ABS", {}, ["x"], ["y"])], tensors, ["x"], ["y"])
    data = to_flatbuffer(graph.Graph((1, 0, 0, False), [graph.Region("main", [block])]))
    assert _lean(data) is None
    assert graph.parse(data).main.tensors["y"].variable_name == "named"
