"""The column-wise flatbuffer reader (``tosa_verify._bulk_read``) reads what the per-table reader
reads, and a corrupt count makes it decline (the per-table reader then reports the error) instead
of allocating by it. The lean whole-graph reader has its own tests (test_lean_read.py)."""

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


def test_column_reader_reads_the_same_graph_as_the_table_reader(monkeypatch) -> None:
    data = _chain()
    block = _main_block(data)
    assert _bulk_read.read_tensors(block, table_layout("TosaBasicBlock")["Tensors"], graph._tensor_maker(data))
    assert _bulk_read.read_operators(block, table_layout("TosaBasicBlock")["Operators"], lambda *a: a)
    monkeypatch.setattr(_lean_read, "read_graph", lambda *a: None)  # only the column-wise reader reads
    ours = tosa_verify.load(data)
    monkeypatch.setattr(_bulk_read, "read_tensors", lambda *a: None)
    monkeypatch.setattr(_bulk_read, "read_operators", lambda *a: None)
    theirs = tosa_verify.load(data)
    assert ours.main.operators == theirs.main.operators
    assert list(ours.main.tensors) == list(theirs.main.tensors)
    for name, t in ours.main.tensors.items():
        u = theirs.main.tensors[name]
        assert (t.shape, t.dtype, t.variable, t.variable_name) == (u.shape, u.dtype, u.variable, u.variable_name)
        assert (t.data is None and u.data is None) or np.array_equal(t.data, u.data)
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(tosa_verify.run(data, [x])[0], x + np.arange(3) * sum(range(16)))


@pytest.mark.parametrize("field", ["Tensors", "Operators"])
def test_a_corrupt_vector_count_is_refused_without_allocating_by_it(field) -> None:
    data = bytearray(_chain())
    block = _main_block(bytes(data))
    at = block._at(table_layout("TosaBasicBlock")[field].slot)
    start = at + struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, start, 1 << 24)  # 16M tables in a few kilobytes
    columns = _bulk_read.read_tensors if field == "Tensors" else _bulk_read.read_operators
    assert columns(_main_block(bytes(data)), table_layout("TosaBasicBlock")[field], lambda *a: a) is None
    makers = graph._lean_makers(bytes(data), graph._op_names())
    assert _lean_read.read_graph(bytes(data), makers) is None
    with pytest.raises(TosaFormatError, match="corrupt or truncated"):
        tosa_verify.load(bytes(data))
