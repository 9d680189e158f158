"""The column-wise flatbuffer reader (``tosa_verify._bulk_read``) reads what the table-by-table
lean reader and the per-table reader read, and a corrupt count makes it decline (the per-table
reader then reports the error) instead of allocating by it. Equivalence on every shipped and
lowered graph, and on corrupted bytes, is in test_lean_read.py."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import tosa_verify
from tosa_verify import _bulk_read, _lean_read, graph
from tosa_verify._flatbuffer import Table, table_layout
from tosa_verify.errors import TosaFormatError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer


def _chain(n: int = 16) -> bytes:
    """x + c0 + c1 + ... : n constant tensors and CONST operators, n ADDs."""
    tensors = {"x": Tensor("x", (2, 3), "INT32")}
    ops, prev = [], "x"
    for i in range(n):
        tensors[f"c{i}"] = Tensor(f"c{i}", (1, 3), "INT32", np.arange(3, dtype=np.int32) * i)
        tensors[f"s{i}"] = Tensor(f"s{i}", (2, 3), "INT32")
        ops += [Operator("CONST", {}, [], [f"c{i}"]), Operator("ADD", {}, [prev, f"c{i}"], [f"s{i}"])]
        prev = f"s{i}"
    block = Block("main", ops, tensors, ["x"], [prev])
    return to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [block])]))


def _main_block(data: bytes) -> Table:
    root = Table(data, struct.unpack_from("<I", data, 0)[0])
    region = root.tables(table_layout("TosaGraph")["Regions"])[0]
    return region.tables(table_layout("TosaRegion")["Blocks"])[0]


def _vector(data: bytes, field: str) -> int:
    """Position of the main block's vector of ``field`` tables."""
    block = _main_block(data)
    at = block._at(table_layout("TosaBasicBlock")[field].slot)
    return at + struct.unpack_from("<I", data, at)[0]


def _columns(data: bytes, field: str) -> list | None:
    b = _lean_read._Buffer(data)
    b.words = _bulk_read.Words(data)
    rows = (_bulk_read.tensor_rows if field == "Tensors" else _bulk_read.operator_rows)(b, _vector(data, field))
    return None if rows is None else list(rows)


@pytest.mark.parametrize("field", ["Tensors", "Operators"])
def test_the_column_reader_reads_the_rows_the_table_reader_reads(field) -> None:
    data = _chain()
    ours = _columns(data, field)
    assert ours is not None and len(ours) == (33 if field == "Tensors" else 32)
    b = _lean_read._Buffer(data)
    read = _lean_read._tensors if field == "Tensors" else _lean_read._operators
    start = _vector(data, field)
    at = [start + 4 + 4 * k for k in range(struct.unpack_from("<I", data, start)[0])]
    assert ours == read(b, [a + struct.unpack_from("<I", data, a)[0] for a in at])


def test_column_wise_table_by_table_and_per_table_loads_agree(monkeypatch) -> None:
    data = _chain()
    monkeypatch.setattr(_bulk_read, "MIN_TABLES", 0)
    monkeypatch.setattr(_bulk_read, "MIN_OPERATORS", 0)
    ours = tosa_verify.load(data)
    monkeypatch.setattr(_bulk_read, "MIN_TABLES", 10**6)
    monkeypatch.setattr(_bulk_read, "MIN_OPERATORS", 10**6)
    lean = tosa_verify.load(data)
    monkeypatch.setattr(_lean_read, "read_graph", lambda *a: None)
    theirs = tosa_verify.load(data)
    for other in (lean, theirs):
        assert ours.main.operators == other.main.operators
        assert list(ours.main.tensors) == list(other.main.tensors)
        for name, t in ours.main.tensors.items():
            u = other.main.tensors[name]
            assert (t.shape, t.dtype, t.variable, t.variable_name) == (u.shape, u.dtype, u.variable, u.variable_name)
            assert (t.data is None and u.data is None) or np.array_equal(t.data, u.data)
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(tosa_verify.run(data, [x])[0], x + np.arange(3) * sum(range(16)))


@pytest.mark.parametrize("field", ["Tensors", "Operators"])
def test_a_corrupt_vector_count_is_refused_without_allocating_by_it(field) -> None:
    data = bytearray(_chain())
    struct.pack_into("<I", data, _vector(bytes(data), field), 1 << 24)  # 16M tables in a few kilobytes
    assert _columns(bytes(data), field) is None
    assert _lean_read.read_graph(bytes(data), graph._MAKERS) is None
    with pytest.raises(TosaFormatError, match="corrupt or truncated"):
        tosa_verify.load(bytes(data))


def test_overlapping_string_vectors_of_a_corrupt_file_are_not_gathered() -> None:
    """Vectors of a crafted file can all point at one long vector (each within the buffer): the
    column reader declines before gathering more elements than the buffer has words."""
    buf = bytes(4096)
    w = _bulk_read.Words(buf)
    vectors, count = np.zeros(100, np.int64), np.full(100, 1000, np.int64)  # (1000 words each, of 1024)
    with pytest.raises(_bulk_read._NotColumns):
        _bulk_read._string_lists(buf, w, vectors, count, 50)
    inputs, outputs = _bulk_read._string_lists(buf, w, vectors[:2], np.array([3, 0]), 1)
    assert (inputs, outputs) == ([["", "", ""]], [[]])  # (zero offsets: empty strings at words 1..3)
