"""A plan built for a TOSA 1.1 graph knows its version: prepares and folds accept the types the
1.1 draft adds (EXT-INT64), so those operators run prepared or folded, with the reference
model's results; the same operators in a 1.0 graph keep the 1.0 ERROR_IF."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model

import tosa_verify
from tosa_verify.errors import TosaValidationError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.ops.registry import REGISTRY
from tosa_verify.plan import plan_for
from tosa_verify.writer import to_flatbuffer

V11, V10 = (1, 1, 0, True), (1, 0, 0, False)


def _int64_graph(version: tuple) -> bytes:
    """y = x + transpose(c) + reduce_sum(x, axis 0), every tensor INT64; c a constant."""
    c = (np.arange(6, dtype=np.int64).reshape(2, 3) - 3) << 40
    tensors = {
        "x": Tensor("x", (3, 2), "INT64"),
        "c": Tensor("c", (2, 3), "INT64", data=c),
        "tc": Tensor("tc", (3, 2), "INT64"),
        "s": Tensor("s", (1, 2), "INT64"),
        "a": Tensor("a", (3, 2), "INT64"),
        "y": Tensor("y", (3, 2), "INT64"),
    }
    ops = [
        Operator("CONST", {}, [], ["c"]),
        Operator("TRANSPOSE", {"perms": [1, 0]}, ["c"], ["tc"]),
        Operator("ADD", {}, ["x", "tc"], ["a"]),
        Operator("REDUCE_SUM", {"axis": 0}, ["x"], ["s"]),
        Operator("ADD", {}, ["a", "s"], ["y"]),
    ]
    block = Block("main", ops, tensors, ["x"], ["y"])
    return to_flatbuffer(Graph(version, [Region("main", [block])]))


def _x() -> np.ndarray:
    return np.random.default_rng(0).integers(-(1 << 50), 1 << 50, size=(3, 2), dtype=np.int64)


def test_a_tosa11_plan_prepares_and_folds_int64_operators() -> None:
    data = _int64_graph(V11)
    expected, status = reference_model.run(data, [_x()])
    assert status == reference_model.GraphStatus.TOSA_VALID
    graph = tosa_verify.load(data)
    for _ in range(2):  # the first run builds the plan, the second reuses it
        np.testing.assert_array_equal(tosa_verify.run(graph, [_x()])[0], expected[0])
    steps = plan_for(graph.main).steps
    # TRANSPOSE of a constant is folded (the fold sees the 1.1 version) ...
    assert [s.operator.op for s in steps] == ["ADD", "REDUCE_SUM", "ADD"]
    # ... and the others run their prepared kernels, not the op functions
    assert all(s.fn is not REGISTRY[s.operator.op] for s in steps)


def test_a_tosa10_graph_keeps_the_int64_error_if() -> None:
    graph = tosa_verify.load(_int64_graph(V10))
    with pytest.raises(TosaValidationError, match="INT64"):
        tosa_verify.run(graph, [_x()])


def test_a_plan_follows_an_edited_graph_version() -> None:
    graph = tosa_verify.load(_int64_graph(V11))
    tosa_verify.run(graph, [_x()])
    graph.version = V10  # the 1.1 plan's prepared kernels must not be reused
    with pytest.raises(TosaValidationError, match="INT64"):
        tosa_verify.run(graph, [_x()])
