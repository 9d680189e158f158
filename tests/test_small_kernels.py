"""Prepared small-tensor kernels (issue 17) against the official reference model, and the
identity snapshot that re-plans a caller's edited Graph.

INT32 ADD/SUB/MUL, INT32 REDUCE_SUM, INT16 TABLE and integer CLAMP take call-bound fast paths
in a plan; each is run on random inputs over the whole type range (bit-exact against
``tosa_reference_model``), and the int32 REQUIREs still fail where the reference model says the
result is unpredictable.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaRequireError
from tosa_verify.ops.registry import REGISTRY
from tosa_verify.plan import _graph_snapshot, _unchanged

_VALID = reference_model.GraphStatus.TOSA_VALID
_UNPREDICTABLE = reference_model.GraphStatus.TOSA_UNPREDICTABLE
_RNG = np.random.default_rng(17)


def _serializer() -> ts.TosaSerializer:
    return ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)


def _attr(kind: str, *args) -> ts.TosaSerializerAttribute:
    attr = ts.TosaSerializerAttribute()
    getattr(attr, kind)(*args)
    return attr


def _binary_graph(op: str, shift: int | None = None) -> bytes:
    """x, y (INT32 [3, 8]) -> ADD/SUB/MUL (MUL with a constant shift) -> output."""
    g = _serializer()
    for name in "xy":
        g.addInputTensor(ts.TosaSerializerTensor(name, [3, 8], ts.DType.INT32, data=None))
    names = ["x", "y"]
    if shift is not None:
        names.append(g.addConst([1], ts.DType.INT8, [shift], name="shift").name)
    out = g.addIntermediate([3, 8], ts.DType.INT32)
    g.addOperator(getattr(ts.Op, op), names, [out.name], _attr({"ADD": "AddAttribute", "SUB": "SubAttribute",
                                                                "MUL": "MulAttribute"}[op]))
    g.addOutputTensor(out)
    return bytes(g.serialize())


def _unary_graph(op: str, in_t, out_t, shape, out_shape, attr, const=None) -> bytes:
    g = _serializer()
    g.addInputTensor(ts.TosaSerializerTensor("x", list(shape), in_t, data=None))
    names = ["x"]
    if const is not None:
        names.append(g.addConst([len(const)], ts.DType.INT16, const, name="table").name)
    out = g.addIntermediate(list(out_shape), out_t)
    g.addOperator(getattr(ts.Op, op), names, [out.name], attr)
    g.addOutputTensor(out)
    return bytes(g.serialize())


def _same_as_reference(data: bytes, inputs: list[np.ndarray]) -> None:
    expected, status = reference_model.run(data, inputs)
    graph = tosa_verify.load(data)
    if status == _UNPREDICTABLE:  # a data REQUIRE failed: ours must say so, on every run
        for _ in range(2):
            with pytest.raises(TosaRequireError):
                tosa_verify.run(graph, inputs)
        return
    assert status == _VALID
    for _ in range(2):  # the first run builds the plan, the second runs the prepared kernels
        got = tosa_verify.run(graph, inputs)
        assert len(got) == len(expected)
        for a, b in zip(got, expected, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def _int32(bits: int, shape=(3, 8)) -> np.ndarray:
    return _RNG.integers(-(1 << bits), 1 << bits, shape).astype(np.int32)


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@pytest.mark.parametrize("bits", [20, 31])  # 31: overflows, the REQUIRE fails
def test_int32_add_sub_matches_the_reference(op: str, bits: int) -> None:
    _same_as_reference(_binary_graph(op), [_int32(bits), _int32(bits)])


@pytest.mark.parametrize("shift", [0, 1, 13, 40])
@pytest.mark.parametrize("bits", [12, 31])
def test_int32_mul_matches_the_reference(shift: int, bits: int) -> None:
    _same_as_reference(_binary_graph("MUL", shift), [_int32(bits), _int32(bits)])


@pytest.mark.parametrize("bits", [20, 31])
def test_int32_reduce_sum_matches_the_reference(bits: int) -> None:
    data = _unary_graph("REDUCE_SUM", ts.DType.INT32, ts.DType.INT32, (4, 9), (4, 1),
                        _attr("ReduceSumAttribute", 1))
    _same_as_reference(data, [_int32(bits, (4, 9))])


@pytest.mark.parametrize("step", [200, 40000])  # 40000: slopes outside int16, the general path
def test_int16_table_matches_the_reference(step: int) -> None:
    table = np.clip(np.cumsum(_RNG.integers(-step, step, 513)), -32768, 32767).astype(int).tolist()
    data = _unary_graph("TABLE", ts.DType.INT16, ts.DType.INT32, (1, 65536), (1, 65536),
                        _attr("TableAttribute"), table)
    _same_as_reference(data, [np.arange(-32768, 32768, dtype=np.int16).reshape(1, -1)])


@pytest.mark.parametrize("hit", [False, True])
def test_int16_table_with_one_unfit_slope_checks_only_the_entries_used(hit: bool) -> None:
    # entry 400 -> 401 jumps by 60000 (a slope outside int16): only inputs indexing entry 400
    # ((value + 32768) >> 7 == 400) break apply_lookup_s's REQUIRE
    table = np.where(np.arange(513) > 400, 30000, -30000).tolist()
    data = _unary_graph("TABLE", ts.DType.INT16, ts.DType.INT32, (1, 1024), (1, 1024),
                        _attr("TableAttribute"), table)
    values = np.arange(-32768, 32768, 32, dtype=np.int16)  # 2048 values, both ends included
    used = values if hit else values[((values.astype(int) + 32768) >> 7) != 400]
    _same_as_reference(data, [np.resize(used[::2], 1024).reshape(1, -1)])


@pytest.mark.parametrize(("lo", "hi"), [(-128, 127), (-5, 100), (0, 0)])
def test_int8_clamp_matches_the_reference(lo: int, hi: int) -> None:
    attr = _attr("ClampAttribute", [lo & 0xFF], [hi & 0xFF], ts.NanPropagationMode.PROPAGATE)
    data = _unary_graph("CLAMP", ts.DType.INT8, ts.DType.INT8, (1, 256), (1, 256), attr)
    _same_as_reference(data, [np.arange(-128, 128, dtype=np.int8).reshape(1, -1)])


def _edits(graph: tosa_verify.Graph) -> dict:
    block = graph.main
    const = next(t for t in block.tensors.values() if t.data is not None)
    return {
        "operator replaced": lambda: block.operators.__setitem__(0, copy.copy(block.operators[0])),
        "operator removed": lambda: block.operators.pop(),
        "attributes replaced": lambda: setattr(block.operators[0], "attrs", dict(block.operators[0].attrs)),
        "constant data replaced": lambda: setattr(const, "data", const.data.copy()),
        "shape replaced": lambda: setattr(const, "shape", list(const.shape)),
        "declaration replaced": lambda: block.tensors.__setitem__(const.name, copy.copy(const)),
        "inputs changed": lambda: setattr(block, "inputs", [*block.inputs, "extra"]),
    }


@pytest.mark.parametrize("edit", sorted(_edits(tosa_verify.load(_binary_graph("MUL", 1)))))
def test_every_kind_of_edit_breaks_the_snapshot(edit: str) -> None:
    graph = tosa_verify.load(_binary_graph("MUL", 1))
    snapshot = _graph_snapshot(graph)
    assert _unchanged(graph, snapshot)
    _edits(graph)[edit]()
    assert not _unchanged(graph, snapshot)


def test_a_replaced_op_function_breaks_the_snapshot(monkeypatch) -> None:
    graph = tosa_verify.load(_binary_graph("ADD"))
    snapshot = _graph_snapshot(graph)
    monkeypatch.setitem(REGISTRY, "ADD", lambda call: REGISTRY["SUB"](call))
    assert not _unchanged(graph, snapshot)
