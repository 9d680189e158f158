"""The lean whole-graph reader (``tosa_verify._lean_read``), the column-wise reader
(``_bulk_read``) and the compiled attribute readers both use (``graph._lean_attributes``) give
what the per-table reader gives: the same Graph on every shipped conformance graph and the
checked-in lowered graphs, and on truncated or corrupted bytes either the same Graph or, after
declining, the per-table reader's error."""

from __future__ import annotations

import random
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tosa_verify import _bulk_read, _fused_read, _lean_read, graph
from tosa_verify.errors import TosaError

DATA = Path(__file__).resolve().parent / "data"


def _shipped_graphs() -> list[tuple[str, bytes]]:
    """Every .tosa of the shipped conformance cases (tests/conformance/shipped.py), read from
    the archive itself so that no case cache is needed."""
    out = []
    with tarfile.open(DATA / "conformance_cases.tar.xz") as tar:
        for member in tar:
            if member.name.endswith(".tosa"):
                out.append((member.name, tar.extractfile(member).read()))
    return out


def _graphs() -> list[tuple[str, bytes]]:
    lowered = [(p.name, p.read_bytes()) for p in sorted((DATA / "peer_graphs").glob("*.tosa"))]
    assert lowered, "tests/data/peer_graphs holds the lowered graphs"
    return lowered + _shipped_graphs()


GRAPHS = _graphs()


def _table_read(data: bytes, monkeypatch) -> object:
    """The graph as the per-table reader reads it, or its error as (type, message)."""
    with monkeypatch.context() as m:
        m.setattr(_lean_read, "read_graph", lambda *a: None)
        return _parse(data)


def _parse(data: bytes) -> object:
    try:
        return graph.parse(data)
    except TosaError as exc:
        return type(exc).__name__, str(exc)


def _lean(data: bytes) -> object:
    """The lean reader's own result (None: it declined)."""
    return _lean_read.read_graph(data, graph._MAKERS)


def _same(a: object, b: object) -> None:
    """Asserts two parse results are equal, constants compared by dtype, shape and bytes."""
    assert type(a) is type(b)
    if isinstance(a, tuple):
        assert a == b
        return
    assert a.version == b.version and [r.name for r in a.regions] == [r.name for r in b.regions]
    for ra, rb in zip(a.regions, b.regions, strict=True):
        for x, y in zip(ra.blocks, rb.blocks, strict=True):
            assert (x.name, x.inputs, x.outputs, x.operators) == (y.name, y.inputs, y.outputs, y.operators)
            for op_a, op_b in zip(x.operators, y.operators, strict=True):  # (1 == True == 1.0 for ==)
                assert [(k, type(v)) for k, v in op_a.attrs.items()] == [(k, type(v)) for k, v in op_b.attrs.items()]
            for ta, tb in ((x.tensors, y.tensors), (x.shapes, y.shapes)):
                assert list(ta) == list(tb)
                for t, u in zip(ta.values(), tb.values(), strict=True):
                    assert (t.name, t.shape, t.dtype, t.variable, t.variable_name, t.unranked) == (
                        u.name, u.shape, u.dtype, u.variable, u.variable_name, u.unranked)
                    assert (t.data is None) == (u.data is None)
                    if t.data is not None:
                        assert (t.data.dtype, t.data.shape, t.data.tobytes()) == (u.data.dtype, u.data.shape, u.data.tobytes())
                        assert t.data.flags.writeable == u.data.flags.writeable


def _no_fused_loops(monkeypatch) -> None:
    """Makes the fused loops decline every block: the general table-by-table loops read it."""
    def decline(*args):
        raise _fused_read.NotFused

    monkeypatch.setattr(_fused_read, "tensors", decline)
    monkeypatch.setattr(_fused_read, "operators", decline)


@pytest.mark.parametrize("min_tables", [10**6, 0, "general"])  # (fused loops; column-wise; general loops)
def test_the_lean_reader_reads_every_graph_as_the_table_reader_does(monkeypatch, min_tables) -> None:
    if min_tables == "general":
        _no_fused_loops(monkeypatch)
        min_tables = 10**6
    monkeypatch.setattr(_bulk_read, "MIN_TABLES", min_tables)
    monkeypatch.setattr(_bulk_read, "MIN_OPERATORS", min_tables)
    declined = []
    for name, data in GRAPHS:
        lean = _lean(data)
        if lean is None:
            declined.append(name)
        _same(_parse(data), _table_read(data, monkeypatch))
    # it covers the common case: only block-scaled tensors (a field it does not read) and
    # graphs the per-table reader refuses are left to the other readers
    assert len(declined) < len(GRAPHS) // 20, declined[:10]
    assert not [n for n in declined if "peer" in n or not n.endswith("test.tosa")]


def test_the_column_reader_reads_the_lowered_graphs_itself(monkeypatch) -> None:
    """It does not just decline: every block of the lowered graphs is read column-wise."""
    monkeypatch.setattr(_bulk_read, "MIN_TABLES", 0)
    monkeypatch.setattr(_bulk_read, "MIN_OPERATORS", 0)
    results = []
    for reader in ("tensor_rows", "operator_rows"):
        real = getattr(_bulk_read, reader)
        monkeypatch.setattr(_bulk_read, reader, lambda b, start, real=real: results.append(real(b, start)) or results[-1])
    lowered = [data for name, data in GRAPHS if not name.endswith("test.tosa")]
    for data in lowered:
        assert _lean(data) is not None
    assert len(results) >= 2 * len(lowered) and all(r is not None for r in results)


@pytest.mark.parametrize("reader", ["fused", "column-wise", "general"])
@pytest.mark.parametrize("seed", range(3))
def test_truncated_or_corrupted_bytes_give_the_table_readers_result_or_error(monkeypatch, reader, seed) -> None:
    if reader == "general":
        _no_fused_loops(monkeypatch)
    monkeypatch.setattr(_bulk_read, "MIN_TABLES", 0 if reader == "column-wise" else 10**6)
    monkeypatch.setattr(_bulk_read, "MIN_OPERATORS", 0 if reader == "column-wise" else 10**6)
    rng = random.Random(seed)
    for _, data in GRAPHS[seed::5]:
        for _ in range(2):
            broken = bytearray(data)
            if rng.random() < 0.3:
                broken = broken[: rng.randrange(8, len(broken))]
            else:
                for _ in range(rng.randint(1, 4)):
                    broken[rng.randrange(8, len(broken))] = rng.randrange(256)
            _same(_parse(bytes(broken)), _table_read(bytes(broken), monkeypatch))


def test_a_misaligned_table_is_left_to_the_table_reader(monkeypatch) -> None:
    """Every flatbuffers writer aligns 4-byte fields; the lean reader's word reads need it, so a
    file whose root table sits at an odd position is declined and still read (table by table)."""
    name, data = GRAPHS[0]
    root = int.from_bytes(data[:4], "little")
    # one byte inserted before the root table, every offset into or past it kept valid: the
    # root offset grows by one and nothing else moves relative to the root
    assert _lean(data) is not None
    shifted = data[:4] + data[4:8] + b"\0" + data[8:]
    shifted = (root + 1).to_bytes(4, "little") + shifted[4:]
    assert _lean(shifted) is None
    ours, theirs = _parse(shifted), _table_read(shifted, monkeypatch)
    _same(ours, theirs)
    _same(ours, _parse(data))


def test_decoded_vtables_are_kept_by_their_bytes_only() -> None:
    """The module-level caches are keyed by schema-level things (table or attribute type, a
    vtable's bytes): loading a graph keeps no value of it there."""
    for _, data in GRAPHS[:50]:
        graph.parse(data)
    def vtable_sized(key: bytes) -> bool:  # exactly a vtable's bytes: its size, object size, offsets
        return len(key) == 4 + 2 * (max(int.from_bytes(key[:2], "little") - 4, 0) >> 1)

    assert any(_lean_read._VTABLES.values()) and graph._ATTRIBUTE_VTABLES
    for table, layouts in _lean_read._VTABLES.items():
        assert table in _lean_read._SCHEMAS and all(map(vtable_sized, layouts))
    for kind, key in graph._ATTRIBUTE_VTABLES:
        assert isinstance(kind, int) and vtable_sized(key)


def test_constants_are_read_only_views_of_the_loaded_bytes() -> None:
    name, data = GRAPHS[0]  # a lowered graph: its weights are INT8 and INT32 constants
    g = graph.parse(data)
    assert sum(t.data is not None for t in g.main.tensors.values()) > 5
    for t in g.main.tensors.values():
        if t.data is not None and t.data.dtype.kind in "iuf" and t.data.size:
            assert np.shares_memory(t.data, np.frombuffer(g.raw, np.uint8)), (name, t.name)
            with pytest.raises(ValueError):
                t.data.flat[0] = 0
