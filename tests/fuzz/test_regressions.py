"""Minimal regressions for disagreements differential fuzzing found between the interpreter and
the reference model (or the TOSA 1.0 specification).

Each test pins a fixed disagreement so it cannot come back.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tosa_verify
from tosa_verify import reference
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer


def _graph(ops, tensors, inputs, outputs) -> bytes:
    return to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, inputs, outputs)])]))


def _transpose_conv_zero_height() -> bytes:
    """fuzz single:1039 - TRANSPOSE_CONV2D whose out_pad shrinks the output height to 0.

    OH = (IH - 1) * stride_y + out_pad_top + out_pad_bottom + KH = 0 + (-1) + (-1) + 2 = 0; every
    per-operator ERROR_IF holds (out_pad > -KH), but the output tensor has a zero dimension.
    """
    tensors = {
        "x": Tensor("x", (1, 1, 1, 2), "INT8"),
        "w": Tensor("w", (2, 2, 1, 2), "INT8", data=np.ones((2, 2, 1, 2), np.int8)),
        "b": Tensor("b", (2,), "INT32", data=np.zeros(2, np.int32)),
        "xz": Tensor("xz", (1,), "INT8", data=np.zeros(1, np.int8)),
        "wz": Tensor("wz", (1,), "INT8", data=np.zeros(1, np.int8)),
        "y": Tensor("y", (1, 0, 1, 2), "INT32"),
    }
    ops = [Operator("CONST", {}, [], [n]) for n in ("w", "b", "xz", "wz")]
    ops.append(Operator("TRANSPOSE_CONV2D", {"out_pad": [-1, -1, 0, 0], "stride": [1, 1], "local_bound": False,
                                             "acc_type": "INT32"}, ["x", "w", "b", "xz", "wz"], ["y"]))
    return _graph(ops, tensors, ["x"], ["y"])


def test_reference_rejects_a_tensor_with_a_zero_dimension():
    with pytest.raises(tosa_verify.TosaValidationError, match="dimension 0"):
        reference.run(_transpose_conv_zero_height(), [np.ones((1, 1, 1, 2), np.int8)])


def test_interpreter_rejects_a_tensor_with_a_zero_dimension():
    with pytest.raises(tosa_verify.TosaValidationError):
        tosa_verify.run(_transpose_conv_zero_height(), [np.ones((1, 1, 1, 2), np.int8)])


def _int4_conv(weights: np.ndarray) -> bytes:
    tensors = {
        "x": Tensor("x", (1, 1, 1, 3), "INT8"),
        "w": Tensor("w", (1, 1, 1, 3), "INT4", data=weights.reshape(1, 1, 1, 3)),
        "b": Tensor("b", (1,), "INT32", data=np.zeros(1, np.int32)),
        "xz": Tensor("xz", (1,), "INT8", data=np.zeros(1, np.int8)),
        "wz": Tensor("wz", (1,), "INT4", data=np.zeros(1, np.int8)),
        "y": Tensor("y", (1, 1, 1, 1), "INT32"),
    }
    ops = [Operator("CONST", {}, [], [n]) for n in ("w", "b", "xz", "wz")]
    ops.append(Operator("CONV2D", {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1],
                                   "local_bound": False, "acc_type": "INT32"}, ["x", "w", "b", "xz", "wz"], ["y"]))
    return _graph(ops, tensors, ["x"], ["y"])


def test_int4_weights_in_range_agree():
    data = _int4_conv(np.array([-7, 7, 3], np.int8))
    x = np.array([[[[1, 2, 3]]]], np.int8)
    assert reference.run(data, [x])[0].item() == tosa_verify.run(data, [x])[0].item() == -7 + 14 + 9


def test_int4_constant_minus_eight_is_rejected():
    data = _int4_conv(np.array([-8, 7, 3], np.int8))
    with pytest.raises(tosa_verify.TosaError):
        tosa_verify.run(data, [np.array([[[[1, 2, 3]]]], np.int8)])


def _mod_shape_tile(a: int, c: int, multiple: int):
    """TILE of a [1] int8 input by MOD_SHAPE([a], [c]) (declared output [multiple])."""
    from .builder import Builder
    from .strategies_11 import _shape_op

    b = Builder(np.random.default_rng(0), minor=1)
    x = b.input((1,), "INT8")
    s = _shape_op(b, "MOD_SHAPE", [b.shape_const([a]), b.shape_const([c])], 1)
    return b.finish([b.op("TILE", [x, s], (multiple,), "INT8")])


@pytest.mark.parametrize(("a", "c", "cpp_mod", "condition"), [(3, -2, 1, "input2[index] >= 1"),
                                                             (-1, 1, 0, "input1[index] >= 0")])
def test_mod_shape_requires_are_the_spec_s_not_the_reference_s(a, c, cpp_mod, condition):
    """fuzz v11:206774 / v11:206067 (generator at 48842f8) - MOD_SHAPE.tosac has
    ``REQUIRE(input1[index] >= 0); REQUIRE(input2[index] >= 1);``. The reference model only rejects
    a zero denominator and computes C++ ``%`` (``3 % -2 == 1``, ``-1 % 1 == 0``); the interpreter
    follows the spec (unpredictable), which the differential counts as "reference-lenient"."""
    from .differential import run_case

    case = _mod_shape_tile(a, c, max(cpp_mod, 1))
    with pytest.raises(tosa_verify.TosaRequireError, match=re.escape(condition)):
        tosa_verify.run(case.data, case.inputs)
    if cpp_mod:  # the reference runs on with the C++ remainder
        assert reference.run(case.data, case.inputs)[0].shape == (cpp_mod,)
    else:  # a TILE multiple of 0 is the reference's next error
        with pytest.raises(tosa_verify.TosaValidationError):
            reference.run(case.data, case.inputs)
    assert run_case(case).kind == "reference-lenient"


def test_mod_shape_in_range_agrees():
    from .differential import run_case

    case = _mod_shape_tile(7, 3, 1)
    assert run_case(case).kind == "agree"
    np.testing.assert_array_equal(tosa_verify.run(case.data, case.inputs)[0], case.inputs["in1"])


@pytest.mark.parametrize("in_t", ["INT32", "INT64", "INT8", "FP32"])
def test_argmax_i64_result_of_every_input_type(in_t):
    """fuzz v11:301620 - the 1.1 draft's ARGMAX rows give every in_t (i32_t included, which 1.0
    lacks) an i64_t result; both executors must agree on the index."""
    import tosa_serializer as ts

    from .builder import Builder
    from .differential import run_case

    b = Builder(np.random.default_rng(0), minor=1)
    value = np.array([[1, 5, 2], [7, 0, 2]])
    x = b.input((2, 3), in_t, value=value)
    case = b.finish([b.op("ARGMAX", [x], (3,), "INT64", "ArgMaxAttribute", 0, ts.NanPropagationMode.PROPAGATE)])
    assert run_case(case).kind == "agree"
    np.testing.assert_array_equal(tosa_verify.run(case.data, case.inputs)[0], np.argmax(value, axis=0))
