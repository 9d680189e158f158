"""Bad input never escapes as a raw numpy / flatbuffers traceback.

Every malformed graph or mismatched input must raise a :class:`tosa_verify.TosaError` subclass
whose message is one line and names what is wrong (the tensor, the operator or the file).
"""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

import tosa_verify
from tosa_verify.ops.registry import REGISTRY


def new_graph():
    """A TOSA 1.0 serializer and its main block."""
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    return ser, ser.regions[0].basicBlocks[0]


def identity_op(block, src: str, dst: str) -> None:
    attr = ts.TosaSerializerAttribute()
    attr.IdentityAttribute()
    block.addOperator(ts.Op.IDENTITY, [src], [dst], attr)


def identity_graph(shape=(2, 3), dtype=ts.DType.INT32) -> bytes:
    """y = IDENTITY(x): the smallest valid graph with one input and one output."""
    ser, main = new_graph()
    main.addTensor("x", list(shape), dtype)
    main.addInput("x")
    main.addTensor("y", list(shape), dtype)
    main.addOutput("y")
    identity_op(main, "x", "y")
    return ser.serialize()


def two_input_graph() -> bytes:
    """(a, b) -> (IDENTITY(a), IDENTITY(b)), to check count and name matching."""
    ser, main = new_graph()
    for src, dst in (("a", "a_out"), ("b", "b_out")):
        main.addTensor(src, [4], ts.DType.INT8)
        main.addInput(src)
        main.addTensor(dst, [4], ts.DType.INT8)
        main.addOutput(dst)
        identity_op(main, src, dst)
    return ser.serialize()


def raises_one_line(error: type[tosa_verify.TosaError], source, inputs, *names: str) -> str:
    """Run and assert ``error`` (exactly that class or a subclass) with a one-line message naming ``names``."""
    with pytest.raises(error) as info:
        tosa_verify.run(source, inputs)
    message = str(info.value)
    assert isinstance(info.value, tosa_verify.TosaError)
    assert message and "\n" not in message, message
    for name in names:
        assert name in message, f"{name!r} not named in: {message}"
    return message


X = np.arange(6, dtype=np.int32).reshape(2, 3)


def test_the_valid_graph_runs() -> None:
    # Guard for the tests below: their graphs differ from this one only by the fault injected.
    (y,) = tosa_verify.run(identity_graph(), [X])
    np.testing.assert_array_equal(y, X)


# --------------------------------------------------------------------------- broken flatbuffers


@pytest.mark.parametrize("keep", [0, 4, 8, 16, 64, 0.5, -16, -8])
def test_truncated_flatbuffer(keep) -> None:
    data = identity_graph()
    n = int(len(data) * keep) if isinstance(keep, float) else keep if keep >= 0 else len(data) + keep
    raises_one_line(tosa_verify.TosaFormatError, data[:n], [X])


def test_every_truncation_fails_cleanly() -> None:
    data = identity_graph()
    for n in range(len(data)):
        try:
            (y,) = tosa_verify.run(data[:n], [X])
        except tosa_verify.TosaError as exc:
            assert "\n" not in str(exc)
            continue
        # Accepted only when nothing but the final string's NUL terminator / padding was cut.
        assert data[n:].strip(b"\0") == b"", f"truncation to {n} of {len(data)} bytes accepted"
        np.testing.assert_array_equal(y, X)


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, 512, dtype=np.uint8).tobytes()
    raises_one_line(tosa_verify.TosaFormatError, data, [X], "TOSA")


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_behind_a_valid_file_identifier(seed: int) -> None:
    # Passes the identifier check, so the flatbuffer reader itself meets the garbage.
    rng = np.random.default_rng(seed)
    data = bytearray(rng.integers(0, 256, 512, dtype=np.uint8).tobytes())
    data[4:8] = b"TOSA"
    with pytest.raises(tosa_verify.TosaError) as info:
        tosa_verify.run(bytes(data), [X])
    assert "\n" not in str(info.value)


def test_corrupted_bytes_of_a_valid_graph() -> None:
    rng = np.random.default_rng(1)
    original = identity_graph()
    for _ in range(500):
        data = bytearray(original)
        for _ in range(3):
            data[rng.integers(8, len(data))] = rng.integers(0, 256)
        try:
            tosa_verify.run(bytes(data), [X])
        except tosa_verify.TosaError as exc:
            assert "\n" not in str(exc)


def test_missing_file(tmp_path) -> None:
    raises_one_line(tosa_verify.TosaFormatError, tmp_path / "absent.tosa", [X], "absent.tosa")


def test_unsupported_tosa_version() -> None:
    # 1.0 and the 1.1 draft load; a later version is refused
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=2, targetPatch=0, targetDraft=True)
    main = ser.regions[0].basicBlocks[0]
    main.addTensor("x", [2], ts.DType.INT8)
    main.addInput("x")
    main.addOutput("x")
    raises_one_line(tosa_verify.TosaFormatError, ser.serialize(), [np.zeros(2, np.int8)], "1.2")


# --------------------------------------------------------------------------- malformed graphs


def test_operator_uses_an_undeclared_tensor() -> None:
    ser, main = new_graph()
    main.addTensor("x", [2], ts.DType.INT8)
    main.addInput("x")
    main.addTensor("y", [2], ts.DType.INT8)
    main.addOutput("y")
    identity_op(main, "ghost", "y")
    raises_one_line(tosa_verify.TosaValidationError, ser.serialize(), [np.zeros(2, np.int8)], "ghost", "IDENTITY")


def test_operator_writes_an_undeclared_tensor() -> None:
    ser, main = new_graph()
    main.addTensor("x", [2], ts.DType.INT8)
    main.addInput("x")
    main.addOutput("x")
    identity_op(main, "x", "phantom")
    raises_one_line(tosa_verify.TosaValidationError, ser.serialize(), [np.zeros(2, np.int8)], "phantom")


def test_tensor_used_before_it_is_produced() -> None:
    ser, main = new_graph()
    for name in ("x", "mid", "y"):
        main.addTensor(name, [2], ts.DType.INT8)
    main.addInput("x")
    main.addOutput("y")
    identity_op(main, "mid", "y")  # "mid" is only produced by the next operator
    identity_op(main, "x", "mid")
    raises_one_line(tosa_verify.TosaValidationError, ser.serialize(), [np.zeros(2, np.int8)], "mid")


def test_graph_output_never_produced() -> None:
    ser, main = new_graph()
    main.addTensor("x", [2], ts.DType.INT8)
    main.addInput("x")
    main.addTensor("y", [2], ts.DType.INT8)
    main.addOutput("y")
    raises_one_line(tosa_verify.TosaValidationError, ser.serialize(), [np.zeros(2, np.int8)], "y")


def test_declared_tensor_too_large_to_allocate() -> None:
    ser, main = new_graph()
    main.addTensor("x", [2], ts.DType.INT32)
    main.addInput("x")
    main.addTensor("huge", [2**20, 2**20], ts.DType.INT32)
    main.addOutput("x")
    raises_one_line(tosa_verify.TosaSizeError, ser.serialize(), [np.zeros(2, np.int32)], "huge")


def test_constant_with_too_little_data() -> None:
    ser, main = new_graph()
    # Declared (4, 4) but only 3 values serialized.
    main.addTensor("c", [4, 4], ts.DType.INT32, np.arange(3, dtype=np.int32))
    main.addOutput("c")
    attr = ts.TosaSerializerAttribute()
    attr.ConstAttribute()
    main.addOperator(ts.Op.CONST, [], ["c"], attr)
    raises_one_line(tosa_verify.TosaFormatError, ser.serialize(), [], "INT32")


def test_negative_dimension() -> None:
    ser, main = new_graph()
    main.addTensor("x", [2, -3], ts.DType.INT8)
    main.addInput("x")
    main.addOutput("x")
    raises_one_line(tosa_verify.TosaValidationError, ser.serialize(), [np.zeros((2, 3), np.int8)], "x", "-3")


def test_operator_out_of_memory_is_a_size_error(monkeypatch) -> None:
    # An operator whose working arrays do not fit must not leak MemoryError.
    def exhausted(call):
        raise MemoryError

    monkeypatch.setitem(REGISTRY, "IDENTITY", exhausted)
    raises_one_line(tosa_verify.TosaSizeError, identity_graph(), [X], "IDENTITY")


# --------------------------------------------------------------------------- mismatched inputs


@pytest.mark.parametrize("count", [0, 1, 3])
def test_wrong_input_count(count: int) -> None:
    inputs = [np.zeros(4, np.int8)] * count
    raises_one_line(tosa_verify.TosaInputError, two_input_graph(), inputs, "a", "b")


def test_wrong_input_names() -> None:
    inputs = {"a": np.zeros(4, np.int8), "c": np.zeros(4, np.int8)}
    raises_one_line(tosa_verify.TosaInputError, two_input_graph(), inputs, "'b'", "'c'")


@pytest.mark.parametrize("shape", [(3, 2), (6,), (2, 3, 1), ()])
def test_wrong_input_shape(shape) -> None:
    raises_one_line(tosa_verify.TosaInputError, identity_graph(), [np.zeros(shape, np.int32)], "'x'")


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.int8, np.uint32, bool, object])
def test_wrong_input_dtype(dtype) -> None:
    raises_one_line(tosa_verify.TosaInputError, identity_graph(), [np.zeros((2, 3), dtype)], "'x'", "INT32")


def test_int4_input_out_of_range() -> None:
    data = identity_graph(shape=(3,), dtype=ts.DType.INT4)
    raises_one_line(tosa_verify.TosaInputError, data, [np.array([1, 8, -8], np.int8)], "'x'", "INT4")


def test_inputs_not_a_list() -> None:
    raises_one_line(tosa_verify.TosaInputError, identity_graph(), None, "NoneType")
