"""Structural rules of a graph the interpreter checks once, at load or plan build, as the spec's
graph model and the reference model require: single assignment (a tensor written by one
operator, never a block input), one declaration per tensor name, constant data at least the
size its shape needs (longer is read from its start, as the reference model does), constants
produced by CONST or CONST_SHAPE only; and ``run`` refusing a bare ndarray for its input list. The expected facts come
from the graphs as built here.
"""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
from tosa_verify.errors import TosaFormatError, TosaInputError, TosaValidationError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor, load
from tosa_verify.plan import build_plan
from tosa_verify.writer import to_flatbuffer

X = np.arange(6, dtype=np.int32).reshape(2, 3)


def _graph(ops: list[Operator], tensors: list[Tensor], inputs: list[str], outputs: list[str],
           extra_blocks: list[Block] = ()) -> Graph:
    block = Block("main", ops, {t.name: t for t in tensors}, inputs, outputs)
    return Graph((1, 0, 0, False), [Region("main", [block, *extra_blocks])])


def _t(name: str, data: np.ndarray | None = None, shape=(2, 3), dtype="INT32") -> Tensor:
    return Tensor(name, shape, dtype, data)


# --------------------------------------------------------------------------- single assignment


def test_a_tensor_written_by_two_operators_is_refused_at_the_second() -> None:
    graph = _graph([Operator("ADD", {}, ["x", "x"], ["y"]), Operator("IDENTITY", {}, ["x"], ["y"])],
                   [_t("x"), _t("y")], ["x"], ["y"])
    seen: list[int] = []
    for source in (graph, to_flatbuffer(graph)):  # (as a Graph and through the loader)
        with pytest.raises(TosaValidationError) as err:
            tosa_verify.run(source, [X])
        assert str(err.value) == "operator 1 IDENTITY: tensor 'y' is written by operators 0 ADD and 1 IDENTITY"
        assert (err.value.op_index, err.value.op, err.value.tensors) == (1, "IDENTITY", ("y",))
    interpreter = tosa_verify.Interpreter(graph, hook=lambda i, *_: seen.append(i))
    with pytest.raises(TosaValidationError, match="written by operators 0 ADD and 1 IDENTITY"):
        interpreter.run_block(graph.main, [X])
    assert seen == [0]  # the first writer ran: the error is raised where the run reaches it


def test_an_operator_writing_a_block_input_is_refused() -> None:
    graph = _graph([Operator("IDENTITY", {}, ["y"], ["x"]), Operator("ADD", {}, ["x", "x"], ["z"])],
                   [_t("x"), _t("y"), _t("z")], ["x", "y"], ["z"])
    with pytest.raises(TosaValidationError, match=r"^operator 0 IDENTITY: tensor 'x' is an input of block 'main'") as err:
        tosa_verify.run(graph, [X, X])
    assert err.value.tensors == ("x",)


def test_a_const_written_twice_is_refused_not_folded() -> None:
    c = _t("c", X)
    graph = _graph([Operator("CONST", {}, [], ["c"]), Operator("CONST", {}, [], ["c"]),
                    Operator("ADD", {}, ["x", "c"], ["y"])], [_t("x"), c, _t("y")], ["x"], ["y"])
    with pytest.raises(TosaValidationError, match="tensor 'c' is written by operators 0 CONST and 1 CONST"):
        tosa_verify.run(graph, [X])


def test_a_const_writing_a_block_input_is_refused() -> None:
    graph = _graph([Operator("CONST", {}, [], ["x"]), Operator("ADD", {}, ["x", "x"], ["y"])],
                   [_t("x", X), _t("y")], ["x"], ["y"])
    with pytest.raises(TosaValidationError, match="operator 0 CONST: tensor 'x' is an input of block 'main'"):
        tosa_verify.run(graph, [X])


def test_single_assignment_holds_in_each_sub_block_on_its_own() -> None:
    """A COND_IF branch has its own tensors: reusing a main-block name there is fine, writing one
    of its tensors twice is not."""
    branch_ok = Block("then", [Operator("ADD", {}, ["a", "a"], ["y"])],
                      {n: Tensor(n, (2, 3), "INT32") for n in ("a", "y")}, ["a"], ["y"])
    branch_bad = Block("else", [Operator("ADD", {}, ["a", "a"], ["y"]), Operator("IDENTITY", {}, ["a"], ["y"])],
                       {n: Tensor(n, (2, 3), "INT32") for n in ("a", "y")}, ["a"], ["y"])
    cond = Operator("COND_IF", {"then_graph": "then", "else_graph": "else"}, ["p", "x"], ["y"])
    graph = _graph([cond], [_t("x"), _t("y"), Tensor("p", (), "BOOL")], ["p", "x"], ["y"],
                   [branch_ok, branch_bad])
    np.testing.assert_array_equal(tosa_verify.run(graph, [np.array(True), X])[0], 2 * X)
    with pytest.raises(TosaValidationError, match="tensor 'y' is written by operators 0 ADD and 1 IDENTITY"):
        tosa_verify.run(graph, [np.array(False), X])


def test_a_well_formed_plan_has_no_write_clash_error() -> None:
    graph = _graph([Operator("ADD", {}, ["x", "x"], ["a"]), Operator("ADD", {}, ["a", "x"], ["y"])],
                   [_t("x"), _t("a"), _t("y")], ["x"], ["y"])
    assert all(s.error_before is None for s in build_plan(graph.main).steps)


# --------------------------------------------------------------------------- duplicate declarations


def _duplicated(extra: int) -> bytes:
    """A graph declaring tensor 'xa' twice (INT32 [2, 3], then INT8 [3, 2]) and ``extra`` unused
    tensors (enough of them make the lean reader read the tensor tables column-wise): the
    serializer keeps one tensor per name, so the second is written as 'xb' and renamed in the bytes."""
    tensors = [_t("xa"), _t("ya"), Tensor("xb", (3, 2), "INT8")]
    tensors += [Tensor(f"u{i:03d}", (1,), "INT8") for i in range(extra)]
    raw = to_flatbuffer(_graph([Operator("IDENTITY", {}, ["xa"], ["ya"])], tensors, ["xa"], ["ya"]))
    assert raw.count(b"xb") == 1
    return raw.replace(b"xb", b"xa")


@pytest.mark.parametrize("extra", [0, 3, 60])
def test_a_tensor_name_declared_twice_is_refused_at_load(extra: int) -> None:
    with pytest.raises(TosaValidationError, match=r"^block 'main': tensor 'xa' is declared more than once$"):
        load(_duplicated(extra))


# --------------------------------------------------------------------------- constant data size


def _const_graph(data: np.ndarray, shape=(2, 3), dtype="INT32") -> bytes:
    """CONST c (declared ``shape``, its data the bytes of ``data``) -> IDENTITY -> y."""
    graph = _graph([Operator("CONST", {}, [], ["c"]), Operator("IDENTITY", {}, ["c"], ["y"])],
                   [Tensor("c", shape, dtype, data), Tensor("y", shape, dtype)], [], ["y"])
    return to_flatbuffer(graph)


def test_constant_data_too_short_is_refused() -> None:
    with pytest.raises(TosaFormatError, match=r"tensor 'c': .* INT32 tensor of shape \[2, 3\] has 20 bytes, needs 24"):
        load(_const_graph(np.arange(5, dtype=np.int32)))


@pytest.mark.parametrize("extra", [0, 60])
def test_constant_data_longer_than_its_shape_is_read_from_its_start(extra: int) -> None:
    """Kept as the reference model does (it reads the values the shape needs): serialization_lib
    pads data to 8 bytes, and ExecuTorch's Arm backend writes a per-channel weight zero point
    into a tensor declared [1] (tests/data/peer_graphs: 64 bytes for an INT8 [1])."""
    tensors = [Tensor("c", (1,), "INT8", np.arange(64, dtype=np.int8) + 5), Tensor("y", (1,), "INT8")]
    tensors += [Tensor(f"u{i:03d}", (1,), "INT8") for i in range(extra)]  # (read column-wise)
    graph = _graph([Operator("CONST", {}, [], ["c"]), Operator("IDENTITY", {}, ["c"], ["y"])], tensors, [], ["y"])
    assert tosa_verify.run(to_flatbuffer(graph), [])[0].tolist() == [5]


# --------------------------------------------------------------------------- constants need a CONST


def test_data_read_without_a_const_operator_is_refused() -> None:
    graph = _graph([Operator("ADD", {}, ["x", "c"], ["y"])], [_t("x"), _t("c", X), _t("y")], ["x"], ["y"])
    for source in (graph, to_flatbuffer(graph)):
        with pytest.raises(TosaValidationError) as err:
            tosa_verify.run(source, [X])
        assert str(err.value) == ("operator 0 ADD: input tensor 'c' holds constant data that no CONST or "
                                  "CONST_SHAPE operator produces")
        assert err.value.tensors == ("c",)


def test_data_read_before_its_const_is_used_before_it_is_produced() -> None:
    graph = _graph([Operator("ADD", {}, ["x", "c"], ["y"]), Operator("CONST", {}, [], ["c"])],
                   [_t("x"), _t("c", X), _t("y")], ["x"], ["y"])
    with pytest.raises(TosaValidationError, match="input tensor 'c' is used before it is produced"):
        tosa_verify.run(graph, [X])


def test_an_output_with_data_but_no_producer_is_never_produced() -> None:
    graph = _graph([], [_t("c", X)], [], ["c"])
    with pytest.raises(TosaValidationError, match=r"output tensor\(s\) \['c'\] are never produced"):
        tosa_verify.run(graph, [])


def test_a_const_operator_makes_its_data_available() -> None:
    graph = _graph([Operator("CONST", {}, [], ["c"]), Operator("ADD", {}, ["x", "c"], ["y"])],
                   [_t("x"), _t("c", X), _t("y")], ["x"], ["y"])
    np.testing.assert_array_equal(tosa_verify.run(graph, [X])[0], 2 * X)


# --------------------------------------------------------------------------- run()'s inputs


@pytest.mark.parametrize("value", [np.array([[1, 2, 3]], np.int8), np.array([1, 2, 3], np.int8)])
def test_a_bare_ndarray_is_refused_as_the_input_list(value: np.ndarray) -> None:
    graph = _graph([Operator("IDENTITY", {}, ["x"], ["y"])], [Tensor(n, (3,), "INT8") for n in "xy"], ["x"], ["y"])
    for source in (graph, to_flatbuffer(graph)):
        with pytest.raises(TosaInputError, match=r"^inputs: a list/tuple/dict of arrays, not an ndarray"):
            tosa_verify.run(source, value)
    np.testing.assert_array_equal(tosa_verify.run(graph, [value.reshape(3)])[0], [1, 2, 3])
