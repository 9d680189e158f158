"""Declaration errors of a plan's steps (tosa_verify.plan._make_step / _bad_step): each is raised
when a run reaches its operator, after the operators before it ran, naming the operator and the
tensor at fault; an unknown op wins over an undeclared tensor, which wins over an input used
before it is produced. The expected facts come from the graphs as built here.
"""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
from tosa_verify.errors import TosaUnsupportedError, TosaValidationError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor


def _graph(second: Operator, extra: list[Operator] = ()) -> Graph:
    """x -> ADD(x, x) -> a, then ``second`` (and ``extra``); output ``a``."""
    tensors = {n: Tensor(n, (2, 3), "INT32") for n in ("x", "a", "b", "later")}
    ops = [Operator("ADD", {}, ["x", "x"], ["a"]), second, *extra]
    return Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, ["x"], ["a"])])])


def _run_seen(graph: Graph) -> list[int]:
    """Run ``graph`` on an all-ones input; the operator indices the capture hook saw."""
    seen: list[int] = []
    interpreter = tosa_verify.Interpreter(graph, hook=lambda i, *_: seen.append(i))
    interpreter.run_block(graph.main, [np.ones((2, 3), np.int32)])
    return seen


def test_an_unknown_op_is_reported_before_its_undeclared_output() -> None:
    graph = _graph(Operator("NOT_AN_OP", {}, ["a"], ["ghost"]))
    seen: list[int] = []
    interpreter = tosa_verify.Interpreter(graph, hook=lambda i, *_: seen.append(i))
    with pytest.raises(TosaUnsupportedError, match=r"operator 1 NOT_AN_OP"):
        interpreter.run_block(graph.main, [np.ones((2, 3), np.int32)])
    assert seen == [0]  # the ADD before it ran


@pytest.mark.parametrize("inputs, culprit, what", [
    (["a", "ghost"], "ghost", "is not declared"),
    (["a", "later"], "later", "is used before it is produced"),
])
def test_a_declaration_error_names_its_operator_and_tensor(inputs, culprit, what) -> None:
    graph = _graph(Operator("ADD", {}, inputs, ["b"]), [Operator("ADD", {}, ["x", "x"], ["later"])])
    for _ in range(2):  # the plan keeps the error: every run reports it, at the same operator
        with pytest.raises(TosaValidationError, match=what) as err:
            tosa_verify.run(graph, [np.ones((2, 3), np.int32)])
        assert (err.value.op_index, err.value.op, err.value.tensors) == (1, "ADD", (culprit,))


def test_a_well_declared_graph_runs_every_operator() -> None:
    graph = _graph(Operator("ADD", {}, ["a", "x"], ["b"]))
    assert _run_seen(graph) == [0, 1]
    np.testing.assert_array_equal(tosa_verify.run(graph, [np.ones((2, 3), np.int32)])[0], np.full((2, 3), 2))
