"""Shape operators (spec chapter "Shape Operators"): CONST_SHAPE and the 1.1 draft shape ops.

A TOSA 1.0 flatbuffer stores a shape value in the block's ``shapes`` list (``TosaShape``: name,
rank, data as little-endian int64); the CONST_SHAPE operator names it as its output, the same way
CONST names a data tensor. Shape values are ``int64`` arrays of shape ``(rank,)`` in the
interpreter (working dtype of SHAPE).
"""

from __future__ import annotations

import numpy as np

from .registry import OpCall, register


@register("CONST_SHAPE")
def const_shape(call: OpCall) -> list[np.ndarray]:
    """CONST_SHAPE: ``output = values``, the data stored on the output shape declaration."""
    call.check_arity(0, 1)
    decl = call.output_decls[0]
    if decl.dtype != "SHAPE":
        call.fail(f"CONST_SHAPE output {decl.name!r} is {decl.dtype}, not shape_t")
    data = decl.data
    if data is None and tuple(decl.shape) == (0,):
        # the empty shape (of a rank-0 tensor, e.g. RESHAPE to a scalar) serializes no data
        data = np.zeros(0, np.int64)
    if data is None:
        call.fail(f"CONST_SHAPE output {decl.name!r} has no values")
    values = np.asarray(data, dtype=np.int64)
    if values.shape != tuple(decl.shape):
        call.fail(f"CONST_SHAPE values have {values.size} elements, the shape declares rank {list(decl.shape)}")
    return [values]


# --- TOSA 1.1 draft shape operators (EXT-SHAPE) ------------------------------------------------
#
# Shape values are tensor_size_t lists. The spec only asks tensor_size_t to hold
# [-(1 << MAX_LOG2_SIZE), (1 << MAX_LOG2_SIZE) - 1]; the reference model computes in int64, so
# the apply_*_s REQUIREs are checked against int64 (results in Python ints, never wrapped).

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
#: MAX_LOG2_SIZE of level 8K (the level the reference model and generator use).
MAX_LOG2_SIZE = 31


def _shape_operand(call: OpCall, i: int, what: str) -> list[int]:
    """Values of shape operand ``i``; ERROR_IF it is not a shape_t."""
    if call.in_dtype(i) != "SHAPE":
        call.fail(f"{what} is {call.in_dtype(i)}, not shape_t")
    return [int(v) for v in np.asarray(call.inputs[i]).reshape(-1)]


def _shape_result(call: OpCall, values: list[int]) -> list[np.ndarray]:
    """``values`` as the op's shape_t output; ERROR_IF the output is not a shape_t."""
    if call.out_dtype() != "SHAPE":
        call.fail(f"output is {call.out_dtype()}, not shape_t")
    for v in values:
        call.require(_I64_MIN <= v <= _I64_MAX, f"result {v} fits tensor_size_t")
    return [np.asarray(values, dtype=np.int64).reshape(len(values))]


def _binary_shape(call: OpCall) -> tuple[list[int], list[int]]:
    call.check_arity(2, 1)
    a = _shape_operand(call, 0, "input1")
    b = _shape_operand(call, 1, "input2")
    call.error_if(len(a) != len(b), "length(input1) != length(input2)")
    return a, b


def _nonneg_divisible(call: OpCall, a: list[int], b: list[int]) -> None:
    """The REQUIREs shared by DIV_CEIL_SHAPE, DIV_FLOOR_SHAPE and MOD_SHAPE."""
    for x, y in zip(a, b, strict=True):
        call.require(x >= 0, "input1[index] >= 0")
        call.require(y >= 1, "input2[index] >= 1")


@register("ADD_SHAPE", extensions=("EXT-SHAPE",))
def add_shape(call: OpCall) -> list[np.ndarray]:
    """ADD_SHAPE: elementwise ``input1 + input2`` of two shapes.

    >>> # ADD_SHAPE([2, 3], [1, 1]) -> [3, 4]
    """
    a, b = _binary_shape(call)
    return _shape_result(call, [x + y for x, y in zip(a, b, strict=True)])


@register("SUB_SHAPE", extensions=("EXT-SHAPE",))
def sub_shape(call: OpCall) -> list[np.ndarray]:
    """SUB_SHAPE: elementwise ``input1 - input2`` (``[5, 4] - [1, 2] -> [4, 2]``)."""
    a, b = _binary_shape(call)
    return _shape_result(call, [x - y for x, y in zip(a, b, strict=True)])


@register("MUL_SHAPE", extensions=("EXT-SHAPE",))
def mul_shape(call: OpCall) -> list[np.ndarray]:
    """MUL_SHAPE: elementwise ``input1 * input2`` (``[2, 3] * [4, 1] -> [8, 3]``)."""
    a, b = _binary_shape(call)
    return _shape_result(call, [x * y for x, y in zip(a, b, strict=True)])


@register("DIV_CEIL_SHAPE", extensions=("EXT-SHAPE",))
def div_ceil_shape(call: OpCall) -> list[np.ndarray]:
    """DIV_CEIL_SHAPE: elementwise ceil(input1 / input2) of non-negative by positive values.

    ``[7, 8] / [2, 2] -> [4, 4]``.
    """
    a, b = _binary_shape(call)
    _nonneg_divisible(call, a, b)
    return _shape_result(call, [-(-x // y) for x, y in zip(a, b, strict=True)])


@register("DIV_FLOOR_SHAPE", extensions=("EXT-SHAPE",))
def div_floor_shape(call: OpCall) -> list[np.ndarray]:
    """DIV_FLOOR_SHAPE: elementwise floor(input1 / input2) (``[7, 8] / [2, 2] -> [3, 4]``)."""
    a, b = _binary_shape(call)
    _nonneg_divisible(call, a, b)
    return _shape_result(call, [x // y for x, y in zip(a, b, strict=True)])


@register("MOD_SHAPE", extensions=("EXT-SHAPE",))
def mod_shape(call: OpCall) -> list[np.ndarray]:
    """MOD_SHAPE: elementwise ``input1 % input2`` (``[7, 8] % [3, 3] -> [1, 2]``)."""
    a, b = _binary_shape(call)
    _nonneg_divisible(call, a, b)
    return _shape_result(call, [x % y for x, y in zip(a, b, strict=True)])


@register("MAX_SHAPE", extensions=("EXT-SHAPE",))
def max_shape(call: OpCall) -> list[np.ndarray]:
    """MAX_SHAPE: elementwise maximum of two shapes (``[1, 5], [2, 3] -> [2, 5]``)."""
    a, b = _binary_shape(call)
    return _shape_result(call, [max(x, y) for x, y in zip(a, b, strict=True)])


@register("MIN_SHAPE", extensions=("EXT-SHAPE",))
def min_shape(call: OpCall) -> list[np.ndarray]:
    """MIN_SHAPE: elementwise minimum of two shapes (``[1, 5], [2, 3] -> [1, 3]``)."""
    a, b = _binary_shape(call)
    return _shape_result(call, [min(x, y) for x, y in zip(a, b, strict=True)])


@register("EXP2_SHAPE", extensions=("EXT-SHAPE",))
def exp2_shape(call: OpCall) -> list[np.ndarray]:
    """EXP2_SHAPE: elementwise ``1 << input`` (``[0, 3] -> [1, 8]``)."""
    call.check_arity(1, 1)
    values = _shape_operand(call, 0, "input")
    for v in values:
        call.require(v >= 0, "input[index] >= 0")
        call.require(v < MAX_LOG2_SIZE, "input[index] < MAX_LOG2_SIZE")
    return _shape_result(call, [1 << v for v in values])


def _log2_shape(call: OpCall) -> list[int]:
    call.check_arity(1, 1)
    values = _shape_operand(call, 0, "input")
    for v in values:
        call.require(v >= 1, "input[index] >= 1")
    return values


@register("LOG2_CEIL_SHAPE", extensions=("EXT-SHAPE",))
def log2_ceil_shape(call: OpCall) -> list[np.ndarray]:
    """LOG2_CEIL_SHAPE: elementwise ceil(log2(input)) (``[1, 5, 8] -> [0, 3, 3]``)."""
    return _shape_result(call, [(v - 1).bit_length() for v in _log2_shape(call)])


@register("LOG2_FLOOR_SHAPE", extensions=("EXT-SHAPE",))
def log2_floor_shape(call: OpCall) -> list[np.ndarray]:
    """LOG2_FLOOR_SHAPE: elementwise floor(log2(input)) (``[1, 5, 8] -> [0, 2, 3]``)."""
    return _shape_result(call, [v.bit_length() - 1 for v in _log2_shape(call)])


@register("CONCAT_SHAPE", extensions=("EXT-SHAPE",))
def concat_shape(call: OpCall) -> list[np.ndarray]:
    """CONCAT_SHAPE: the input shapes joined end to end (``[1], [2, 3] -> [1, 2, 3]``)."""
    call.check_arity(tuple(range(1, 1 << 16)), 1)
    call.error_if(not call.inputs, "input == []")
    joined: list[int] = []
    for i in range(len(call.inputs)):
        part = _shape_operand(call, i, f"input[{i}]")
        if not part:
            call.fail(f"input[{i}] == []")
        joined += part
    call.error_if(
        len(call.out_shape()) == 1 and call.out_shape()[0] != len(joined),
        "length(output) != sum(length(input[k]) for all k)",
    )
    return _shape_result(call, joined)


@register("SLICE_SHAPE", operands=("input", "start", "size"), extensions=("EXT-SHAPE",))
def slice_shape(call: OpCall) -> list[np.ndarray]:
    """SLICE_SHAPE: ``input[start : start + size]`` (``[4, 5, 6], start 1, size 2 -> [5, 6]``)."""
    call.check_arity(3, 1)
    values = _shape_operand(call, 0, "input")
    for i, what in ((1, "start"), (2, "size")):
        if call.in_dtype(i) != "INT32":
            call.fail(f"{what} is {call.in_dtype(i)}, not i32_t")
        if call.inputs[i].size != 1:
            call.fail(f"{what} has {call.inputs[i].size} elements, not 1")
    start = int(call.inputs[1].reshape(-1)[0])
    size = int(call.inputs[2].reshape(-1)[0])
    call.error_if(size <= 0, "size_value <= 0")
    call.error_if(start < 0, "start_value < 0")
    call.error_if(start + size > len(values), "start_value + size_value > length(input)")
    return _shape_result(call, values[start : start + size])


@register("ASSERT_EQUAL_SHAPE", extensions=("EXT-SHAPE",))
def assert_equal_shape(call: OpCall) -> list[np.ndarray]:
    """ASSERT_EQUAL_SHAPE: ERROR_IF two shapes differ (a 1 may broadcast if ``allow_broadcast``).

    No outputs: ``ASSERT_EQUAL_SHAPE([1, 4], [3, 4], allow_broadcast=True)`` passes.
    """
    call.check_arity(2, 0)
    a = _shape_operand(call, 0, "input1")
    b = _shape_operand(call, 1, "input2")
    call.error_if(len(a) != len(b), "length(input1) != length(input2)")
    broadcast = bool(call.attrs.get("allow_broadcast", False))
    for x, y in zip(a, b, strict=True):
        if broadcast:
            # The draft's pseudocode tests input1 against input2; a 1 on either side broadcasts.
            call.error_if(x != 1 and y != 1 and x != y, "input2[index] != 1 && input2[index] != input1[index]")
        else:
            call.error_if(x != y, "input1[index] != input2[index]")
    return []


@register("DIM", extensions=("EXT-SHAPE",))
def dim(call: OpCall) -> list[np.ndarray]:
    """DIM: the size of dimension ``axis`` of the input tensor, as a one-element shape.

    ``DIM(tensor of shape [2, 3, 5], axis=1) -> [3]``.
    """
    call.check_arity(1, 1)
    shape = tuple(call.input_decls[0].shape)
    axis = int(call.attrs.get("axis", 0))
    call.error_if(axis >= len(shape), "axis >= rank(shape)")
    call.error_if(axis < 0, "axis < 0")
    call.error_if(call.in_dtype(0) == "SHAPE", "input1 is a shape_t, not a tensor")
    call.require(shape[axis] > 0, "shape[axis] > 0")
    return _shape_result(call, [shape[axis]])
