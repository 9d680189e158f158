"""COND_IF, WHILE_LOOP, variables, CONST_SHAPE and CUSTOM on hand-made graphs.

Each graph is written with ``tosa_serializer`` (tosa-tools) and run by both executors; positive
cases compare our outputs with ``tosa_reference_model.run`` exactly (same dtype, shape and bits).
No expected value is written here: references come from the reference model, and rejection cases
assert the class of error the spec prescribes (ERROR_IF -> TosaValidationError, REQUIRE ->
TosaRequireError, unknown CUSTOM -> TosaUnsupportedError).

Variables: tosa_reference_model (tosa-tools 2026.8.0) does not implement the VARIABLE,
VARIABLE_READ and VARIABLE_WRITE op codes; it runs the form the official serializer
(``tosa-opt --tosa-serialize``) emits: a tensor flagged ``variable`` holding the initial value,
read and written with IDENTITY. We check that form directly, and check the spec op form on our
side against the reference model running the equivalent lowered graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.ops import control_flow

INT32, INT8, FP32, BOOL = ts.DType.INT32, ts.DType.INT8, ts.DType.FP32, ts.DType.BOOL


# --------------------------------------------------------------------------- graph building


class GraphBuilder:
    """A TOSA 1.0 graph under construction: the main block plus named sub-graph blocks."""

    def __init__(self) -> None:
        self.ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
        self.main = self.ser.regions[0].basicBlocks[0]

    def block(self, name: str):
        """Start a region holding one basic block called ``name`` (a sub-graph) and return it."""
        self.ser.startRegion(name)
        self.ser.addBasicBlock(name)
        return self.ser.regions[-1].basicBlocks[-1]

    def to_bytes(self) -> bytes:
        return self.ser.serialize()


def tensor(block, name: str, shape: Sequence[int], dtype, data=None, *, role: str = "", variable: str = "") -> None:
    """Declare a tensor in ``block``; ``role`` "in"/"out" also makes it a block input/output.

    ``variable`` non-empty flags the tensor as a variable tensor with that variable_name.
    """
    block.addTensor(name, list(shape), dtype, data, "", False, bool(variable), variable)
    if role == "in":
        block.addInput(name)
    elif role == "out":
        block.addOutput(name)


def op(block, code, inputs: Sequence[str], outputs: Sequence[str], attribute: str, *args) -> None:
    """Append operator ``code`` with the serializer attribute method ``attribute(*args)``."""
    attr = ts.TosaSerializerAttribute()
    getattr(attr, attribute)(*args)
    block.addOperator(code, list(inputs), list(outputs), attr)


# --------------------------------------------------------------------------- running and comparing


def needs(*ops: str) -> None:
    """Fail loudly (never skip) when an op the graph uses is not registered."""
    missing = [o for o in ops if o not in tosa_verify.SUPPORTED_OPS]
    assert not missing, f"interpreter lacks {missing}"


def reference(data: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Outputs of tosa_reference_model on a graph it must accept."""
    outputs, status = reference_model.run(data, list(inputs))
    assert status == reference_model.GraphStatus.TOSA_VALID, status
    return outputs


def assert_bit_exact(ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray]) -> None:
    """Same number of outputs, each with the same dtype, shape and bytes."""
    assert len(ours) == len(theirs)
    for mine, ref in zip(ours, theirs, strict=True):
        assert mine.dtype == ref.dtype and mine.shape == ref.shape
        assert np.ascontiguousarray(mine).tobytes() == np.ascontiguousarray(ref).tobytes(), (mine, ref)


def assert_matches_reference(data: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run both executors on ``data`` and compare bit for bit; return our outputs."""
    ours = tosa_verify.run(data, list(inputs))
    assert_bit_exact(ours, reference(data, inputs))
    return ours


# --------------------------------------------------------------------------- COND_IF


def cond_if_graph(shape=(2, 3), cond_shape=(), cond_dtype=BOOL, then_shape=None) -> bytes:
    """out = COND_IF(cond, a, b) with then = ADD(a, b), else = SUB(a, b)."""
    g = GraphBuilder()
    tensor(g.main, "cond", cond_shape, cond_dtype, role="in")
    tensor(g.main, "a", shape, INT32, role="in")
    tensor(g.main, "b", shape, INT32, role="in")
    tensor(g.main, "out", shape, INT32, role="out")
    op(g.main, ts.Op.COND_IF, ["cond", "a", "b"], ["out"], "CondIfAttribute", "THEN", "ELSE")
    for name, code, attribute in (("THEN", ts.Op.ADD, "AddAttribute"), ("ELSE", ts.Op.SUB, "SubAttribute")):
        block = g.block(name)
        block_shape = then_shape if (then_shape is not None and name == "THEN") else shape
        # Sub-graph tensors reuse the main block's names on purpose: each block is its own scope.
        tensor(block, "a", block_shape, INT32, role="in")
        tensor(block, "b", shape, INT32, role="in")
        tensor(block, "out", shape, INT32, role="out")
        op(block, code, ["a", "b"], ["out"], attribute)
    return g.to_bytes()


@pytest.mark.parametrize("condition", [True, False])
@pytest.mark.parametrize("cond_shape", [(), (1,), (1, 1)])
def test_cond_if_takes_the_branch_the_condition_selects(condition: bool, cond_shape) -> None:
    needs("ADD", "SUB")
    rng = np.random.default_rng(7)
    a = rng.integers(-1000, 1000, (2, 3), dtype=np.int32)
    b = rng.integers(-1000, 1000, (2, 3), dtype=np.int32)
    cond = np.full(cond_shape, condition, dtype=bool)
    ours = assert_matches_reference(cond_if_graph(cond_shape=cond_shape), [cond, a, b])
    other = tosa_verify.run(cond_if_graph(cond_shape=cond_shape), [~cond, a, b])
    assert not np.array_equal(ours[0], other[0]), "both conditions ran the same branch"


def test_cond_if_condition_must_be_bool() -> None:
    data = cond_if_graph(cond_dtype=INT8)
    with pytest.raises(tosa_verify.TosaValidationError, match="bool_t") as info:
        tosa_verify.run(data, [np.array(1, np.int8), np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32)])
    assert info.value.op == "COND_IF"


def test_cond_if_condition_must_have_one_element() -> None:
    data = cond_if_graph(cond_shape=(2,))
    with pytest.raises(tosa_verify.TosaValidationError, match="tensor_size"):
        tosa_verify.run(data, [np.ones(2, bool), np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32)])


def test_cond_if_input_list_must_match_both_sub_graphs() -> None:
    # The else branch is the one taken, yet the then_graph mismatch is still an ERROR_IF.
    data = cond_if_graph(then_shape=(3, 2))
    with pytest.raises(tosa_verify.TosaValidationError, match="tosa_input_shape") as info:
        tosa_verify.run(data, [np.array(False), np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32)])
    assert "THEN" in str(info.value)


def test_cond_if_names_a_missing_sub_graph() -> None:
    g = GraphBuilder()
    tensor(g.main, "cond", (), BOOL, role="in")
    tensor(g.main, "out", (1,), INT32, role="out")
    op(g.main, ts.Op.COND_IF, ["cond"], ["out"], "CondIfAttribute", "NOWHERE", "NOWHERE")
    with pytest.raises(tosa_verify.TosaValidationError, match="NOWHERE"):
        tosa_verify.run(g.to_bytes(), [np.array(True)])


def nested_cond_if_graph(depth: int) -> bytes:
    """``depth`` COND_IFs nested inside each other, the innermost returning IDENTITY(x)."""
    g = GraphBuilder()
    block = g.main
    for level in range(depth + 1):
        tensor(block, "c", (), BOOL, role="in")
        tensor(block, "x", (3,), INT8, role="in")
        tensor(block, "y", (3,), INT8, role="out")
        if level == depth:
            op(block, ts.Op.IDENTITY, ["x"], ["y"], "IdentityAttribute")
            break
        inner = f"LEVEL{level + 1}"
        op(block, ts.Op.COND_IF, ["c", "c", "x"], ["y"], "CondIfAttribute", inner, inner)
        block = g.block(inner)
    return g.to_bytes()


def test_nested_cond_if() -> None:
    assert_matches_reference(nested_cond_if_graph(8), [np.array(True), np.array([1, -2, 3], np.int8)])


def test_runaway_nesting_is_rejected_cleanly() -> None:
    with pytest.raises(tosa_verify.TosaValidationError) as info:
        tosa_verify.run(nested_cond_if_graph(100), [np.array(True), np.zeros(3, np.int8)])
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- WHILE_LOOP


def counting_loop_graph(*, nested_if: bool = False, always_true: bool = False) -> bytes:
    """(i, limit, acc) -> WHILE i < limit: i += 1; acc += step (or -= step when i > 2 and nested).

    ``always_true`` makes the condition graph ignore i (for the iteration cap test).
    """
    g = GraphBuilder()
    carried = [("i", (), INT32), ("limit", (), INT32), ("acc", (4,), INT32)]
    for name, shape, dtype in carried:
        tensor(g.main, name, shape, dtype, role="in")
    outs = ["i_out", "limit_out", "acc_out"]
    for (_, shape, dtype), name in zip(carried, outs, strict=True):
        tensor(g.main, name, shape, dtype, role="out")
    op(g.main, ts.Op.WHILE_LOOP, [n for n, _, _ in carried], outs, "WhileLoopAttribute", "COND", "BODY")

    cond = g.block("COND")
    for name, shape, dtype in carried:
        tensor(cond, name, shape, dtype, role="in")
    tensor(cond, "go", (), BOOL, role="out")
    if always_true:
        tensor(cond, "yes", (), BOOL, np.array(True))
        op(cond, ts.Op.CONST, [], ["yes"], "ConstAttribute")
        op(cond, ts.Op.IDENTITY, ["yes"], ["go"], "IdentityAttribute")
    else:
        op(cond, ts.Op.GREATER, ["limit", "i"], ["go"], "GreaterAttribute")

    body = g.block("BODY")
    for name, shape, dtype in carried:
        tensor(body, name, shape, dtype, role="in")
    tensor(body, "one", (), INT32, np.array(1, np.int32))
    tensor(body, "step", (4,), INT32, np.array([3, -5, 7, 1 << 20], np.int32))
    tensor(body, "i_next", (), INT32, role="out")
    body.addOutput("limit")
    tensor(body, "acc_next", (4,), INT32, role="out")
    op(body, ts.Op.CONST, [], ["one"], "ConstAttribute")
    op(body, ts.Op.CONST, [], ["step"], "ConstAttribute")
    op(body, ts.Op.ADD, ["i", "one"], ["i_next"], "AddAttribute")
    if nested_if:
        tensor(body, "two", (), INT32, np.array(2, np.int32))
        tensor(body, "late", (), BOOL)
        op(body, ts.Op.CONST, [], ["two"], "ConstAttribute")
        op(body, ts.Op.GREATER, ["i", "two"], ["late"], "GreaterAttribute")
        op(body, ts.Op.COND_IF, ["late", "acc", "step"], ["acc_next"], "CondIfAttribute", "LATE", "EARLY")
        for name, code, attribute in (("LATE", ts.Op.SUB, "SubAttribute"), ("EARLY", ts.Op.ADD, "AddAttribute")):
            branch = g.block(name)
            tensor(branch, "acc", (4,), INT32, role="in")
            tensor(branch, "step", (4,), INT32, role="in")
            tensor(branch, "r", (4,), INT32, role="out")
            op(branch, code, ["acc", "step"], ["r"], attribute)
    else:
        op(body, ts.Op.ADD, ["acc", "step"], ["acc_next"], "AddAttribute")
    return g.to_bytes()


def loop_inputs(start: int, limit: int) -> list[np.ndarray]:
    return [np.array(start, np.int32), np.array(limit, np.int32), np.array([1, 2, 3, 4], np.int32)]


@pytest.mark.parametrize(("start", "limit"), [(0, 0), (5, 2), (0, 1), (0, 5), (-3, 4)])
def test_while_loop_counting(start: int, limit: int) -> None:
    needs("ADD", "GREATER")
    ours = assert_matches_reference(counting_loop_graph(), loop_inputs(start, limit))
    assert int(ours[0]) == max(start, limit)  # the loop really ran (i reaches the limit)


@pytest.mark.parametrize("limit", [0, 2, 6])
def test_while_loop_with_cond_if_in_its_body(limit: int) -> None:
    needs("ADD", "SUB", "GREATER")
    assert_matches_reference(counting_loop_graph(nested_if=True), loop_inputs(0, limit))


def test_error_inside_a_body_points_at_the_while_loop() -> None:
    # acc + step overflows int32 in the first iteration: a REQUIRE of ADD inside BODY.
    needs("ADD", "GREATER")
    inputs = loop_inputs(0, 3)
    inputs[2] = np.array([0, 0, 0, 2**31 - 1], np.int32)
    with pytest.raises(tosa_verify.TosaRequireError) as info:
        tosa_verify.run(counting_loop_graph(), inputs)
    error = info.value
    assert (error.op_index, error.op) == (0, "WHILE_LOOP")  # the main-block operator
    assert "'BODY'" in str(error) and "ADD" in str(error) and "\n" not in str(error)


def test_while_loop_iteration_cap(monkeypatch) -> None:
    needs("ADD")
    monkeypatch.setattr(control_flow, "MAX_LOOP_ITERATIONS", 25)
    with pytest.raises(tosa_verify.TosaUnsupportedError, match="WHILE_LOOP still running after 25 iterations"):
        tosa_verify.run(counting_loop_graph(always_true=True), loop_inputs(0, 0))


def test_while_loop_condition_must_be_bool() -> None:
    g = GraphBuilder()
    tensor(g.main, "x", (2,), INT32, role="in")
    tensor(g.main, "y", (2,), INT32, role="out")
    op(g.main, ts.Op.WHILE_LOOP, ["x"], ["y"], "WhileLoopAttribute", "C", "B")
    cond = g.block("C")
    tensor(cond, "x", (2,), INT32, role="in")
    tensor(cond, "c", (1,), INT32, role="out")  # not bool_t
    body = g.block("B")
    tensor(body, "x", (2,), INT32, role="in")
    body.addOutput("x")
    with pytest.raises(tosa_verify.TosaValidationError, match="bool_t"):
        tosa_verify.run(g.to_bytes(), [np.zeros(2, np.int32)])


def test_capture_reports_main_block_tensors_only() -> None:
    needs("ADD", "GREATER")
    result = tosa_verify.run(counting_loop_graph(), loop_inputs(0, 3), capture=True)
    assert set(result.tensors) == {"i", "limit", "acc", "i_out", "limit_out", "acc_out"}
    np.testing.assert_array_equal(result.tensors["acc_out"], result.outputs[2])


# --------------------------------------------------------------------------- variables


def variable_graph(*, spec_ops: bool, initial: np.ndarray | None, first: str = "read", layout: str = "outputs") -> bytes:
    """A variable ``state`` of shape (3,) FP32, read (r) and updated with x; outputs r and ``out``.

    ``first="read"``: r = read; s = r + x; write s; out = read (the new value).
    ``first="write"``: write x; r = read; s = r + x; out = s.
    ``spec_ops`` uses VARIABLE / VARIABLE_READ / VARIABLE_WRITE, else the serializer's lowering to
    IDENTITY on the variable tensor (the form tosa_reference_model runs). ``layout`` "outputs"
    makes the variable tensor the output of VARIABLE / VARIABLE_WRITE, "inputs" an input
    (VARIABLE_WRITE then takes [var, value]), "inputs_swapped" likewise with [value, var].
    """
    g = GraphBuilder()
    m = g.main
    tensor(m, "x", (3,), FP32, role="in")
    tensor(m, "var", (3,), FP32, initial, variable="state")
    tensor(m, "r", (3,), FP32, role="out")
    tensor(m, "s", (3,), FP32)
    tensor(m, "out", (3,), FP32, role="out")

    def read(dst: str) -> None:
        if spec_ops:
            op(m, ts.Op.VARIABLE_READ, ["var"], [dst], "VariableReadAttribute")
        else:
            op(m, ts.Op.IDENTITY, ["var"], [dst], "IdentityAttribute")

    def write(src: str) -> None:
        if spec_ops and layout == "outputs":
            op(m, ts.Op.VARIABLE_WRITE, [src], ["var"], "VariableWriteAttribute")
        elif spec_ops:
            operands = ["var", src] if layout == "inputs" else [src, "var"]
            op(m, ts.Op.VARIABLE_WRITE, operands, [], "VariableWriteAttribute")
        else:
            op(m, ts.Op.IDENTITY, [src], ["var"], "IdentityAttribute")

    if spec_ops and layout == "outputs":
        op(m, ts.Op.VARIABLE, [], ["var"], "VariableAttribute")
    elif spec_ops:
        op(m, ts.Op.VARIABLE, ["var"], [], "VariableAttribute")
    if first == "read":
        read("r")
        op(m, ts.Op.ADD, ["r", "x"], ["s"], "AddAttribute")
        write("s")
        read("out")
    else:
        write("x")
        read("r")
        op(m, ts.Op.ADD, ["r", "x"], ["s"], "AddAttribute")
        op(m, ts.Op.IDENTITY, ["s"], ["out"], "IdentityAttribute")
    return g.to_bytes()


INITIAL = np.array([1.5, -2.25, 1e30], np.float32)
X = np.array([0.5, 4.0, -3e30], np.float32)


@pytest.mark.parametrize("first", ["read", "write"])
@pytest.mark.parametrize("initial", [INITIAL, None], ids=["initial_value", "no_initial_value"])
def test_variable_tensor_as_the_serializer_writes_it(first: str, initial) -> None:
    needs("ADD")
    assert_matches_reference(variable_graph(spec_ops=False, initial=initial, first=first), [X])


@pytest.mark.parametrize(
    ("first", "initial"),
    [("read", INITIAL), ("write", INITIAL), ("write", None)],
    ids=["read_initial_value", "write_then_read", "write_uninitialised_then_read"],
)
@pytest.mark.parametrize("layout", ["outputs", "inputs", "inputs_swapped"])
def test_variable_ops_match_the_reference_on_the_lowered_graph(first: str, initial, layout: str) -> None:
    needs("ADD")
    ours = tosa_verify.run(variable_graph(spec_ops=True, initial=initial, first=first, layout=layout), [X])
    theirs = reference(variable_graph(spec_ops=False, initial=initial, first=first), [X])
    assert_bit_exact(ours, theirs)


def test_variable_read_before_any_write_is_a_require_failure() -> None:
    # No initial value and no VARIABLE_WRITE yet: the spec REQUIREs is_written.
    with pytest.raises(tosa_verify.TosaRequireError, match="state") as info:
        tosa_verify.run(variable_graph(spec_ops=True, initial=None, first="read"), [X])
    assert info.value.op == "VARIABLE_READ"


def test_variable_write_without_declaration_is_a_require_failure() -> None:
    g = GraphBuilder()
    tensor(g.main, "x", (2,), INT8, role="in")
    tensor(g.main, "var", (2,), INT8, variable="undeclared")
    tensor(g.main, "y", (2,), INT8, role="out")
    op(g.main, ts.Op.VARIABLE_WRITE, ["x"], ["var"], "VariableWriteAttribute")
    op(g.main, ts.Op.IDENTITY, ["x"], ["y"], "IdentityAttribute")
    with pytest.raises(tosa_verify.TosaRequireError, match="undeclared"):
        tosa_verify.run(g.to_bytes(), [np.zeros(2, np.int8)])


def test_variable_declared_twice_is_a_require_failure() -> None:
    g = GraphBuilder()
    tensor(g.main, "var", (2,), INT8, np.array([1, 2], np.int8), variable="twice")
    tensor(g.main, "y", (2,), INT8, role="out")
    op(g.main, ts.Op.VARIABLE, [], ["var"], "VariableAttribute")
    op(g.main, ts.Op.VARIABLE, [], ["var"], "VariableAttribute")
    op(g.main, ts.Op.VARIABLE_READ, ["var"], ["y"], "VariableReadAttribute")
    with pytest.raises(tosa_verify.TosaRequireError, match="twice"):
        tosa_verify.run(g.to_bytes(), [])


def test_variable_of_an_unsupported_type_is_an_error_if() -> None:
    g = GraphBuilder()
    tensor(g.main, "var", (2,), INT32, np.array([1, 2], np.int32), variable="wide")
    tensor(g.main, "y", (2,), INT32, role="out")
    op(g.main, ts.Op.VARIABLE, [], ["var"], "VariableAttribute")
    op(g.main, ts.Op.VARIABLE_READ, ["var"], ["y"], "VariableReadAttribute")
    with pytest.raises(tosa_verify.TosaValidationError, match="INT32"):
        tosa_verify.run(g.to_bytes(), [])


# --------------------------------------------------------------------------- CONST_SHAPE


@pytest.mark.parametrize("how", ["shape_list", "add_const"])
@pytest.mark.parametrize("new_shape", [(3, 2), (6,), (1, 2, 1, 3)])
def test_const_shape_feeds_reshape(how: str, new_shape) -> None:
    needs("RESHAPE")
    g = GraphBuilder()
    tensor(g.main, "x", (2, 3), INT8, role="in")
    if how == "shape_list":  # TosaShape declared in the block, CONST_SHAPE written by hand
        g.main.addShape("s", len(new_shape), np.array(new_shape, np.int64))
        op(g.main, ts.Op.CONST_SHAPE, [], ["s"], "ConstShapeAttribute")
    else:  # the way ExecuTorch's Arm backend emits it
        g.ser.addConst([len(new_shape)], dtype=ts.DType.SHAPE, vals=list(new_shape), name="s")
    tensor(g.main, "y", new_shape, INT8, role="out")
    op(g.main, ts.Op.RESHAPE, ["x", "s"], ["y"], "ReshapeAttribute")
    x = np.arange(-3, 3, dtype=np.int8).reshape(2, 3)
    assert_matches_reference(g.to_bytes(), [x])


def test_const_shape_value_is_int64() -> None:
    g = GraphBuilder()
    g.main.addShape("s", 3, np.array([4, 1, 2], np.int64))
    op(g.main, ts.Op.CONST_SHAPE, [], ["s"], "ConstShapeAttribute")
    g.main.addOutput("s")
    (value,) = tosa_verify.run(g.to_bytes(), [])
    assert value.dtype == np.int64
    assert value.tolist() == [4, 1, 2]  # the values written into the graph above


# --------------------------------------------------------------------------- CUSTOM


def test_custom_operator_is_reported_as_unsupported() -> None:
    g = GraphBuilder()
    tensor(g.main, "x", (2,), INT8, role="in")
    tensor(g.main, "y", (2,), INT8, role="out")
    op(g.main, ts.Op.CUSTOM, ["x"], ["y"], "CustomAttribute", "my_gelu", "com.example", [1, 2, 3])
    with pytest.raises(tosa_verify.TosaUnsupportedError) as info:
        tosa_verify.run(g.to_bytes(), [np.zeros(2, np.int8)])
    message = str(info.value)
    assert "my_gelu" in message and "com.example" in message and "\n" not in message


@pytest.mark.parametrize("spec_ops", [True, False], ids=["variable_ops", "identity_form"])
def test_variables_carry_state_across_runs(spec_ops: bool) -> None:
    """run(variables=state): each run starts where the last ended, as the reference model does
    when the carried state is written into the graph as the initial value."""
    needs("ADD")
    state: dict[str, np.ndarray] = {}
    expected = INITIAL.copy()
    for _ in range(3):
        r, out = tosa_verify.run(variable_graph(spec_ops=spec_ops, initial=INITIAL), [X], variables=state)
        # independent: the reference model on a graph that starts from the carried value
        theirs = reference(variable_graph(spec_ops=False, initial=expected), [X])
        assert_bit_exact([r, out], theirs)
        expected = (expected + X).astype(np.float32)
        np.testing.assert_array_equal(state["state"], expected)
    # without the dict every run starts from the initial value again
    assert_bit_exact(tosa_verify.run(variable_graph(spec_ops=spec_ops, initial=INITIAL), [X]),
                     reference(variable_graph(spec_ops=False, initial=INITIAL), [X]))


def test_cli_run_carries_variables_in_a_state_file(tmp_path) -> None:
    from tosa_verify.cli import main

    needs("ADD")
    graph = tmp_path / "acc.tosa"
    graph.write_bytes(variable_graph(spec_ops=False, initial=INITIAL))
    np.save(tmp_path / "x.npy", X)
    state = tmp_path / "state.npz"
    for step in (1, 2):
        assert main(["run", str(graph), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path),
                     "--variables", str(state)]) == 0
        with np.load(state) as saved:
            np.testing.assert_array_equal(saved["state"], (INITIAL + X + (X if step == 2 else 0)).astype(np.float32))
