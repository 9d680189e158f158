"""Tiny TOSA 1.0 graphs built with tosa_serializer, for probing what Vela accepts.

Each builder returns the serialized flatbuffer (bytes) of a one-operator graph.
``PROBES`` names a set of graphs together with the verdict Vela 5.2.0 gives for
Ethos-U55 (Ethos-U65 shares it) and Ethos-U85 (``True`` = compiles); the tests check that
``check_support`` predicts the same verdict without compiling, and that Vela still gives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tosa_serializer as ts

I4, I8, I16, I32, I48 = ts.DType.INT4, ts.DType.INT8, ts.DType.INT16, ts.DType.INT32, ts.DType.INT48
BOOL, FP32 = ts.DType.BOOL, ts.DType.FP32
_NP = {I8: np.int8, I16: np.int16, I32: np.int32, I48: np.int64, BOOL: np.bool_, FP32: np.float32}


class _Graph:
    def __init__(self) -> None:
        self.g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
        self._n = 0

    def input(self, shape: Sequence[int], dtype) -> str:
        name = f"in{self._n}"
        self._n += 1
        self.g.addInputTensor(ts.TosaSerializerTensor(name, list(shape), dtype, data=None))
        return name

    def const(self, shape: Sequence[int], dtype, values) -> str:
        arr = np.asarray(values, dtype=_NP.get(dtype, np.int32)).reshape(shape)
        return self.g.addConst(list(shape), dtype, arr).name

    def shape(self, values: Sequence[int]) -> str:
        return self.g.addConst([len(values)], ts.DType.SHAPE, list(values)).name

    def zp(self, dtype) -> str:
        return self.const((1,), dtype, [0])

    def _add(self, op, inputs: Sequence[str], out_shape: Sequence[int], out_dtype, attr_name: str, *args):
        attr = ts.TosaSerializerAttribute()
        getattr(attr, attr_name)(*args)
        out = self.g.addIntermediate(list(out_shape), out_dtype)
        self.g.addOperator(op, list(inputs), [out.name], attr)
        return out

    def hidden(self, op, inputs: Sequence[str], out_shape: Sequence[int], out_dtype, attr_name: str,
               *args) -> str:
        """Add an operator whose result stays inside the graph; returns the result's name."""
        return self._add(op, inputs, out_shape, out_dtype, attr_name, *args).name

    def op(self, op, inputs: Sequence[str], out_shape: Sequence[int], out_dtype, attr_name: str, *args) -> bytes:
        """Add the graph's last operator, make its result the output, and serialize."""
        self.g.addOutputTensor(self._add(op, inputs, out_shape, out_dtype, attr_name, *args))
        return self.g.serialize()

    def rescale(self, x: str, x_dtype, shape: Sequence[int], out_dtype, multiplier: int, shift: int) -> tuple:
        """The ``hidden``/``op`` arguments of RESCALE ``x * multiplier >> shift`` (int16 multiplier,
        zero points 0)."""
        scale = [x, self.const((1,), I16, [multiplier]), self.const((1,), I8, [shift])]
        return (ts.Op.RESCALE, [*scale, self.zp(x_dtype), self.zp(out_dtype)], shape, out_dtype,
                "RescaleAttribute", False, ts.RoundingMode.SINGLE_ROUND, False, False, False)


def unary(op, attr_name: str, dtype, out_dtype=None, shape=(1, 4, 4, 8), *args) -> bytes:
    """One elementwise unary operator."""
    g = _Graph()
    x = g.input(shape, dtype)
    return g.op(op, [x], shape, out_dtype or dtype, attr_name, *args)


def binary(op, attr_name: str, dtype, out_dtype=None, shape=(1, 4, 4, 8), *args) -> bytes:
    """One elementwise binary operator on two graph inputs."""
    g = _Graph()
    a, b = g.input(shape, dtype), g.input(shape, dtype)
    return g.op(op, [a, b], shape, out_dtype or dtype, attr_name, *args)


def bitwise_and(dtype=I32) -> bytes:
    """BITWISE_AND: on Ethos-U85, not on Ethos-U55/U65."""
    return binary(ts.Op.BITWISE_AND, "BitwiseAndAttribute", dtype)


def add(dtype=I32) -> bytes:
    """ADD of two inputs."""
    return binary(ts.Op.ADD, "AddAttribute", dtype)


def shift(op_name: str, dtype, *args) -> bytes:
    """ARITHMETIC_RIGHT_SHIFT or LOGICAL_LEFT_SHIFT."""
    attr = {"ARITHMETIC_RIGHT_SHIFT": "ArithmeticRightShiftAttribute",
            "LOGICAL_LEFT_SHIFT": "LogicalLeftShiftAttribute"}[op_name]
    return binary(getattr(ts.Op, op_name), attr, dtype, None, (1, 4, 4, 8), *args)


def cast(src, dst) -> bytes:
    """CAST src -> dst."""
    return unary(ts.Op.CAST, "CastAttribute", src, dst)


def conv2d(ifm=I8, weights=I8, acc=I32, kernel=(3, 3), stride=(1, 1), dynamic_weights=False) -> bytes:
    """CONV2D, 8x8x4 -> n x n x 8."""
    g = _Graph()
    x = g.input((1, 8, 8, 4), ifm)
    kh, kw = kernel
    wshape = (8, kh, kw, 4)
    w = g.input(wshape, weights) if dynamic_weights else g.const(wshape, weights, np.ones(wshape))
    bias_dtype = I48 if acc == I48 else I32
    b = g.const((8,), bias_dtype, np.zeros(8))
    oh = (8 - kh) // stride[0] + 1
    ow = (8 - kw) // stride[1] + 1
    return g.op(ts.Op.CONV2D, [x, w, b, g.zp(ifm), g.zp(weights)], (1, oh, ow, 8), acc,
                "Conv2dAttribute", [0, 0, 0, 0], list(stride), [1, 1], False, acc)


def depthwise_conv2d(dtype=I8) -> bytes:
    """DEPTHWISE_CONV2D 3x3, multiplier 1."""
    g = _Graph()
    x = g.input((1, 8, 8, 4), dtype)
    w = g.const((3, 3, 4, 1), I8, np.ones((3, 3, 4, 1)))
    b = g.const((4,), I32, np.zeros(4))
    return g.op(ts.Op.DEPTHWISE_CONV2D, [x, w, b, g.zp(dtype), g.zp(I8)], (1, 6, 6, 4), I32,
                "DepthwiseConv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], False, I32)


def transpose_conv2d(dynamic_weights=False, *, ifm=I8, in_hw=(4, 4), kernel=(2, 2), stride=(2, 2),
                     out_pad=(0, 0, 0, 0), rescales: Sequence[tuple[int, int]] = ()) -> bytes:
    """TRANSPOSE_CONV2D of a 4-channel input to 8 channels (stride and out_pad as TOSA orders
    them: y first; weights constant unless asked). An int16 input accumulates in int48;
    ``rescales``, (multiplier, shift) pairs, chain RESCALEs after it: to int32, the last one
    back to the input type."""
    g = _Graph()
    (ih, iw), (kh, kw) = in_hw, kernel
    x = g.input((1, ih, iw, 4), ifm)
    wshape = (8, kh, kw, 4)
    w = g.input(wshape, I8) if dynamic_weights else g.const(wshape, I8, np.ones(wshape))
    acc = I48 if ifm == I16 else I32
    b = g.const((8,), acc, np.zeros(8))
    pad_top, pad_bottom, pad_left, pad_right = out_pad
    out = (1, (ih - 1) * stride[0] + pad_top + pad_bottom + kh, (iw - 1) * stride[1] + pad_left + pad_right + kw, 8)
    args = (ts.Op.TRANSPOSE_CONV2D, [x, w, b, g.zp(ifm), g.zp(I8)], out, acc, "TransposeConv2dAttribute",
            list(out_pad), list(stride), False, acc)
    if not rescales:
        return g.op(*args)
    result, result_dtype = g.hidden(*args), acc
    *between, last = rescales
    for multiplier, shift in between:
        result, result_dtype = g.hidden(*g.rescale(result, result_dtype, out, I32, multiplier, shift)), I32
    return g.op(*g.rescale(result, result_dtype, out, ifm, *last))


def half_pixel(up_y: int, up_x: int | None = None) -> dict:
    """RESIZE operands of an integer upscale with half-pixel centres: scale 2u/2, offset 1-u,
    border u-1 (the form our lowering emits for NEAREST)."""
    up_x = up_y if up_x is None else up_x
    return {"scale": (2 * up_y, 2, 2 * up_x, 2), "offset": (1 - up_y, 1 - up_x),
            "border": (up_y - 1, up_x - 1)}


def align_corners(up_y: int, up_x: int | None = None) -> dict:
    """RESIZE operands of an integer upscale with aligned corners: scale u/1, no offset or border."""
    up_x = up_y if up_x is None else up_x
    return {"scale": (up_y, 1, up_x, 1), "offset": (0, 0), "border": (0, 0)}


def resize(mode="NEAREST", scale=(4, 2, 4, 2), offset=(-1, -1), border=(1, 1), in_hw=(4, 4), dtype=I8,
           batch=1, rescale_shift: int | None = None) -> bytes:
    """RESIZE of an 8-channel input, output size from the TOSA formula (a half-pixel 2x upscale
    by default). BILINEAR accumulates in int32 (int48 for int16); ``rescale_shift`` ends the graph
    with a RESCALE of multiplier 1 and that shift back to the input type."""
    (ih, iw), (sy_n, sy_d, sx_n, sx_d) = in_hw, scale
    rows, cols = (ih - 1) * sy_n - offset[0] + border[0], (iw - 1) * sx_n - offset[1] + border[1]
    assert rows % sy_d == 0 and cols % sx_d == 0, "the output size must be an integer"
    g = _Graph()
    x = g.input((batch, ih, iw, 8), dtype)
    out = (batch, rows // sy_d + 1, cols // sx_d + 1, 8)
    out_dtype = (I48 if dtype == I16 else I32) if mode == "BILINEAR" else dtype
    args = (ts.Op.RESIZE, [x, g.shape(scale), g.shape(offset), g.shape(border)], out, out_dtype,
            "ResizeAttribute", getattr(ts.ResizeMode, mode))
    if rescale_shift is None:
        return g.op(*args)
    return g.op(*g.rescale(g.hidden(*args), out_dtype, out, dtype, 1, rescale_shift))


def pool(kind: str, kernel=(2, 2), stride=(2, 2), dtype=I8, shape=(1, 8, 8, 8)) -> bytes:
    """AVG_POOL2D or MAX_POOL2D without padding."""
    g = _Graph()
    x = g.input(shape, dtype)
    oh = (shape[1] - kernel[0]) // stride[0] + 1
    ow = (shape[2] - kernel[1]) // stride[1] + 1
    out = (shape[0], oh, ow, shape[3])
    if kind == "avg":
        return g.op(ts.Op.AVG_POOL2D, [x, g.zp(dtype), g.zp(dtype)], out, dtype,
                    "AvgPool2dAttribute", list(kernel), list(stride), [0, 0, 0, 0], I32)
    return g.op(ts.Op.MAX_POOL2D, [x], out, dtype, "MaxPool2dAttribute", list(kernel),
                list(stride), [0, 0, 0, 0], ts.NanPropagationMode.PROPAGATE)


def matmul(dtype=I8) -> bytes:
    """MATMUL [1,4,8] x [1,8,4]."""
    g = _Graph()
    a, b = g.input((1, 4, 8), dtype), g.input((1, 8, 4), dtype)
    acc = I48 if dtype == I16 else I32
    return g.op(ts.Op.MATMUL, [a, b, g.zp(dtype), g.zp(dtype)], (1, 4, 4), acc, "MatMulAttribute")


def table(dtype=I8) -> bytes:
    """TABLE with a constant table."""
    g = _Graph()
    x = g.input((1, 4, 4, 8), dtype)
    if dtype == I8:
        t = g.const((256,), I8, np.arange(-128, 128))
        out = I8
    else:
        t = g.const((513,), I16, np.zeros(513))
        out = I32
    return g.op(ts.Op.TABLE, [x, t], (1, 4, 4, 8), out, "TableAttribute")


def reduce(op_name: str, dtype=I8, axis=3) -> bytes:
    """REDUCE_MAX / REDUCE_MIN / REDUCE_SUM over one axis."""
    shape = (1, 4, 4, 8)
    out = list(shape)
    out[axis] = 1
    g = _Graph()
    x = g.input(shape, dtype)
    if op_name == "REDUCE_SUM":
        return g.op(ts.Op.REDUCE_SUM, [x], out, dtype, "ReduceSumAttribute", axis)
    attr = {"REDUCE_MAX": "ReduceMaxAttribute", "REDUCE_MIN": "ReduceMinAttribute"}[op_name]
    return g.op(getattr(ts.Op, op_name), [x], out, dtype, attr, axis, ts.NanPropagationMode.PROPAGATE)


def reverse(dtype=I8, axis=2) -> bytes:
    """REVERSE along one axis."""
    return unary(ts.Op.REVERSE, "ReverseAttribute", dtype, None, (1, 4, 4, 8), axis)


def argmax(axis=3, channels=8) -> bytes:
    """ARGMAX int8 -> int32."""
    shape = (1, 4, 4, channels)
    out = [d for i, d in enumerate(shape) if i != axis]
    g = _Graph()
    x = g.input(shape, I8)
    return g.op(ts.Op.ARGMAX, [x], out, I32, "ArgMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)


def transpose(dtype=I8, perms=(0, 2, 1, 3), shape=(1, 4, 6, 8)) -> bytes:
    """TRANSPOSE with the given permutation."""
    g = _Graph()
    x = g.input(shape, dtype)
    return g.op(ts.Op.TRANSPOSE, [x], [shape[p] for p in perms], dtype, "TransposeAttribute",
                list(perms))


def conv3d(dynamic_weights=False) -> bytes:
    """CONV3D 1x3x3 on a 2x8x8x4 volume."""
    g = _Graph()
    x = g.input((1, 2, 8, 8, 4), I8)
    wshape = (8, 1, 3, 3, 4)
    w = g.input(wshape, I8) if dynamic_weights else g.const(wshape, I8, np.ones(wshape))
    b = g.const((8,), I32, np.zeros(8))
    return g.op(ts.Op.CONV3D, [x, w, b, g.zp(I8), g.zp(I8)], (1, 2, 6, 6, 8), I32,
                "Conv3dAttribute", [0] * 6, [1, 1, 1], [1, 1, 1], False, I32)


def conv2d_int16_then_rescale(out_dtype=I16) -> bytes:
    """CONV2D with int16 activations (int48 accumulator) followed by a RESCALE."""
    g = _Graph()
    x = g.input((1, 8, 8, 4), I16)
    w = g.const((8, 3, 3, 4), I8, np.ones((8, 3, 3, 4)))
    b = g.const((8,), I48, np.zeros(8))
    acc = g.hidden(ts.Op.CONV2D, [x, w, b, g.zp(I16), g.zp(I8)], (1, 6, 6, 8), I48, "Conv2dAttribute",
                   [0, 0, 0, 0], [1, 1], [1, 1], False, I48)
    return g.op(*g.rescale(acc, I48, (1, 6, 6, 8), out_dtype, 1 << 14, 20))


def concat(dtype=I8) -> bytes:
    """CONCAT of two inputs along C."""
    g = _Graph()
    a, b = g.input((1, 4, 4, 8), dtype), g.input((1, 4, 4, 8), dtype)
    return g.op(ts.Op.CONCAT, [a, b], (1, 4, 4, 16), dtype, "ConcatAttribute", 3)


def reshape(dtype=I8) -> bytes:
    """RESHAPE [1,4,4,8] -> [1,16,8]."""
    g = _Graph()
    x = g.input((1, 4, 4, 8), dtype)
    return g.op(ts.Op.RESHAPE, [x, g.shape([1, 16, 8])], (1, 16, 8), dtype, "ReshapeAttribute")


def slice_(dtype=I8) -> bytes:
    """SLICE the first half of C."""
    g = _Graph()
    x = g.input((1, 4, 4, 8), dtype)
    return g.op(ts.Op.SLICE, [x, g.shape([0, 0, 0, 0]), g.shape([1, 4, 4, 4])], (1, 4, 4, 4), dtype,
                "SliceAttribute")


def tile(dtype=I8) -> bytes:
    """TILE twice along W."""
    g = _Graph()
    x = g.input((1, 4, 4, 8), dtype)
    return g.op(ts.Op.TILE, [x, g.shape([1, 1, 2, 1])], (1, 4, 8, 8), dtype, "TileAttribute")


def pad(dtype=I8) -> bytes:
    """PAD one row/column on every side."""
    g = _Graph()
    x = g.input((1, 4, 4, 8), dtype)
    pad_value = g.const((1,), dtype, [0])
    return g.op(ts.Op.PAD, [x, g.shape([0, 0, 1, 1, 1, 1, 0, 0]), pad_value], (1, 6, 6, 8), dtype,
                "PadAttribute")


def gather() -> bytes:
    """GATHER int8 values with int32 indices."""
    g = _Graph()
    values, idx = g.input((1, 8, 4), I8), g.input((1, 3), I32)
    return g.op(ts.Op.GATHER, [values, idx], (1, 3, 4), I8, "GatherAttribute")


def select() -> bytes:
    """SELECT int8 on a bool condition."""
    g = _Graph()
    c, a, b = g.input((1, 4, 4, 8), BOOL), g.input((1, 4, 4, 8), I8), g.input((1, 4, 4, 8), I8)
    return g.op(ts.Op.SELECT, [c, a, b], (1, 4, 4, 8), I8, "SelectAttribute")


def float_add() -> bytes:
    """ADD in FP32 (outside Vela's PRO-INT baseline)."""
    return binary(ts.Op.ADD, "AddAttribute", FP32)


_ATTR_NAMES = {"INTDIV": "IntDivAttribute"}


def _attr_name(op_name: str) -> str:
    return _ATTR_NAMES.get(op_name) or "".join(w.capitalize() for w in op_name.split("_")) + "Attribute"


def _u(op_name: str, dtype, out_dtype=None, *args):
    attr = _attr_name(op_name)
    return lambda: unary(getattr(ts.Op, op_name), attr, dtype, out_dtype, (1, 4, 4, 8), *args)


def _b(op_name: str, dtype, out_dtype=None, *args):
    attr = _attr_name(op_name)
    return lambda: binary(getattr(ts.Op, op_name), attr, dtype, out_dtype, (1, 4, 4, 8), *args)


_NAN = ts.NanPropagationMode.PROPAGATE

#: name -> (builder, Vela 5.2.0 compiles it for Ethos-U55, compiles it for Ethos-U85).
#: Verdicts were recorded by compiling each graph with Vela 5.2.0; the tests re-check them.
PROBES: dict[str, tuple[Callable[[], bytes], bool, bool]] = {
    "add_i32": (_b("ADD", I32), True, True),
    "add_i8_invalid_tosa": (_b("ADD", I8), False, False),
    "sub_i8_invalid_tosa": (_b("SUB", I8), False, False),
    "minimum_i8_invalid_tosa": (_b("MINIMUM", I8, None, _NAN), False, False),
    "abs_i32": (_u("ABS", I32), True, True),
    "clz_i32": (_u("CLZ", I32), True, True),
    "float_add": (float_add, False, False),
    "sigmoid_fp32": (_u("SIGMOID", FP32), False, False),
    "bitwise_and_i32": (bitwise_and, False, True),
    "bitwise_not_i32": (_u("BITWISE_NOT", I32), False, True),
    "intdiv_i32": (_b("INTDIV", I32), False, True),
    "equal_i32": (_b("EQUAL", I32, BOOL), False, True),
    "logical_and": (_b("LOGICAL_AND", BOOL), False, True),
    "logical_right_shift_i32": (_b("LOGICAL_RIGHT_SHIFT", I32), False, True),
    "arithmetic_right_shift_i8": (lambda: shift("ARITHMETIC_RIGHT_SHIFT", I8, True), False, True),
    "arithmetic_right_shift_i32": (lambda: shift("ARITHMETIC_RIGHT_SHIFT", I32, True), True, True),
    "arithmetic_right_shift_i32_no_round": (
        lambda: shift("ARITHMETIC_RIGHT_SHIFT", I32, False), True, True),
    "logical_left_shift_i16": (lambda: shift("LOGICAL_LEFT_SHIFT", I16), False, True),
    "logical_left_shift_i32": (lambda: shift("LOGICAL_LEFT_SHIFT", I32), True, True),
    "cast_i8_bool": (lambda: cast(I8, BOOL), False, True),
    "cast_bool_i8": (lambda: cast(BOOL, I8), False, True),
    "cast_i32_i8": (lambda: cast(I32, I8), True, True),
    "cast_i8_i32": (lambda: cast(I8, I32), True, True),
    "conv2d_i8": (conv2d, True, True),
    "conv2d_i4_weights": (lambda: conv2d(weights=I4), True, True),
    "conv2d_i16_alone": (lambda: conv2d(I16, I8, I48), False, True),
    "conv2d_i16_rescale_i8": (lambda: conv2d_int16_then_rescale(I8), True, True),
    "conv2d_i16_rescale_i16": (conv2d_int16_then_rescale, True, True),
    "conv2d_stride4": (lambda: conv2d(kernel=(4, 4), stride=(4, 4)), True, True),
    "conv2d_dynamic_weights": (lambda: conv2d(dynamic_weights=True), False, True),
    "conv3d": (conv3d, True, True),
    "conv3d_dynamic_weights": (lambda: conv3d(True), False, True),
    "depthwise_conv2d_i8": (depthwise_conv2d, True, True),
    "transpose_conv2d": (transpose_conv2d, True, True),
    "transpose_conv2d_dynamic_weights": (lambda: transpose_conv2d(True), False, False),
    # TRANSPOSE_CONV2D strides on Ethos-U55/U65: 1x1, 2x2; 1x2 (2x1) for a one-row (column) input
    # and kernel; a stride along an axis written as a single element does not count
    "transpose_conv2d_stride1_k3": (lambda: transpose_conv2d(kernel=(3, 3), stride=(1, 1)), True, True),
    "transpose_conv2d_stride3": (lambda: transpose_conv2d(kernel=(3, 3), stride=(3, 3)), False, True),
    "transpose_conv2d_stride1x2_one_row": (
        lambda: transpose_conv2d(in_hw=(1, 4), kernel=(1, 2), stride=(1, 2)), True, True),
    "transpose_conv2d_stride1x2_four_rows": (
        lambda: transpose_conv2d(in_hw=(4, 4), kernel=(1, 2), stride=(1, 2)), False, True),
    "transpose_conv2d_stride1x2_kernel_two_rows": (
        lambda: transpose_conv2d(in_hw=(1, 4), kernel=(2, 2), stride=(1, 2)), False, True),
    "transpose_conv2d_stride2x1_one_column": (
        lambda: transpose_conv2d(in_hw=(4, 1), kernel=(2, 1), stride=(2, 1)), True, True),
    "transpose_conv2d_stride2x1_four_columns": (
        lambda: transpose_conv2d(in_hw=(4, 4), kernel=(2, 1), stride=(2, 1)), False, True),
    "transpose_conv2d_stride3_single_written_column": (
        lambda: transpose_conv2d(in_hw=(3, 1), kernel=(2, 1), stride=(2, 3), out_pad=(0, 0, 1, 0)),
        True, True),
    "transpose_conv2d_stride3_two_written_columns": (
        lambda: transpose_conv2d(in_hw=(3, 1), kernel=(2, 2), stride=(2, 3), out_pad=(0, 0, 1, 0)),
        False, True),
    "transpose_conv2d_kernel_65x1": (
        lambda: transpose_conv2d(in_hw=(2, 2), kernel=(65, 1), stride=(1, 1)), True, True),
    # int16 TRANSPOSE_CONV2D on Ethos-U55/U65: only RESCALEs of scale exactly 1 are folded in
    # (a chain of RESCALEs is merged first, so each must be 1)
    "transpose_conv2d_i16_unit_rescale": (
        lambda: transpose_conv2d(ifm=I16, rescales=[(4, 2)]), True, True),
    "transpose_conv2d_i16_unit_rescale_stride1": (
        lambda: transpose_conv2d(ifm=I16, kernel=(3, 3), stride=(1, 1), rescales=[(1 << 14, 14)]), True, True),
    "transpose_conv2d_i16_half_rescale": (
        lambda: transpose_conv2d(ifm=I16, rescales=[(2, 2)]), False, True),
    "transpose_conv2d_i16_rescale": (
        lambda: transpose_conv2d(ifm=I16, rescales=[(1 << 14, 20)]), False, True),
    "transpose_conv2d_i16_unit_rescales_chained": (
        lambda: transpose_conv2d(ifm=I16, rescales=[(4, 2), (8, 3)]), True, True),
    "transpose_conv2d_i16_unit_then_rescale": (
        lambda: transpose_conv2d(ifm=I16, rescales=[(4, 2), (1 << 14, 20)]), False, True),
    "transpose_conv2d_i16_alone": (lambda: transpose_conv2d(ifm=I16), False, True),
    "transpose_conv2d_i8_rescale": (lambda: transpose_conv2d(rescales=[(1 << 14, 20)]), True, True),
    # RESIZE on Ethos-U55/U65: identity, 1x1 input, or NEAREST x2/x4/x8 in half-pixel or
    # align-corners form on batch 1; Ethos-U85 compiles every valid form
    "resize_nearest_half_pixel_x2": (resize, True, True),
    "resize_nearest_half_pixel_x4": (lambda: resize(**half_pixel(4)), True, True),
    "resize_nearest_half_pixel_x8": (lambda: resize(**half_pixel(8)), True, True),
    "resize_nearest_half_pixel_x3": (lambda: resize(**half_pixel(3)), False, True),
    "resize_nearest_half_pixel_x16": (lambda: resize(**half_pixel(16)), False, True),
    "resize_nearest_half_pixel_x2_x4": (lambda: resize(**half_pixel(2, 4)), True, True),
    "resize_nearest_half_pixel_x2_i16": (lambda: resize(dtype=I16), True, True),
    "resize_nearest_half_pixel_x2_batch2": (lambda: resize(batch=2), False, True),
    "resize_nearest_plain_x2": (lambda: resize(scale=(2, 1, 2, 1), offset=(0, 0), border=(1, 1)), False, True),
    "resize_nearest_offset_x2": (lambda: resize(offset=(1, 1), border=(-1, -1)), False, True),
    "resize_nearest_align_corners_x2": (lambda: resize(**align_corners(2)), True, True),
    "resize_nearest_align_corners_x8": (lambda: resize(**align_corners(8)), True, True),
    "resize_nearest_align_corners_x3": (lambda: resize(**align_corners(3)), False, True),
    "resize_nearest_align_corners_6_3": (
        lambda: resize(scale=(6, 3, 6, 3), offset=(0, 0), border=(0, 0)), False, True),
    "resize_nearest_align_corners_x2_batch2": (lambda: resize(**align_corners(2), batch=2), False, True),
    "resize_nearest_rows_only": (lambda: resize(**half_pixel(2, 1)), False, True),
    "resize_nearest_rows_only_one_column": (lambda: resize(**half_pixel(2, 1), in_hw=(4, 1)), True, True),
    "resize_nearest_identity_3_3": (
        lambda: resize(scale=(3, 3, 3, 3), offset=(0, 0), border=(0, 0)), True, True),
    "resize_nearest_identity_batch2": (
        lambda: resize(scale=(1, 1, 1, 1), offset=(0, 0), border=(0, 0), batch=2), True, True),
    "resize_nearest_downscale": (
        lambda: resize(scale=(1, 2, 1, 2), offset=(0, 0), border=(0, 0), in_hw=(7, 7)), False, True),
    "resize_nearest_1x1_input_x3": (
        lambda: resize(scale=(3, 1, 3, 1), offset=(0, 0), border=(2, 2), in_hw=(1, 1)), True, True),
    "resize_bilinear_x2": (
        lambda: resize("BILINEAR", (2, 1, 2, 1), (0, 0), (1, 1), rescale_shift=2), False, True),
    "resize_bilinear_half_pixel_x2": (lambda: resize("BILINEAR", rescale_shift=4), False, True),
    "resize_bilinear_half_pixel_x2_i16": (
        lambda: resize("BILINEAR", dtype=I16, rescale_shift=4), False, True),
    "resize_bilinear_1x1_input": (
        lambda: resize("BILINEAR", (2, 1, 2, 1), (0, 0), (1, 1), in_hw=(1, 1), rescale_shift=2), False, True),
    "resize_bilinear_identity": (
        lambda: resize("BILINEAR", (1, 1, 1, 1), (0, 0), (0, 0)), True, True),
    "avg_pool_2x2": (lambda: pool("avg"), True, True),
    "avg_pool_stride4": (lambda: pool("avg", (4, 4), (4, 4)), True, True),
    "avg_pool_batch2": (lambda: pool("avg", shape=(2, 8, 8, 8)), True, True),
    "max_pool_2x2": (lambda: pool("max"), True, True),
    "max_pool_stride4": (lambda: pool("max", (4, 4), (4, 4)), True, True),
    "matmul_i8": (matmul, True, True),
    "matmul_i16": (lambda: matmul(I16), False, True),
    "table_i8": (table, True, True),
    "table_i16": (lambda: table(I16), True, True),
    "reduce_max_i8": (lambda: reduce("REDUCE_MAX"), True, True),
    "reduce_max_i32": (lambda: reduce("REDUCE_MAX", I32), False, True),
    "reduce_min_i32": (lambda: reduce("REDUCE_MIN", I32), False, True),
    "reduce_sum_i32_c": (lambda: reduce("REDUCE_SUM", I32), True, True),
    "reduce_sum_i32_h": (lambda: reduce("REDUCE_SUM", I32, 1), True, True),
    "reverse_i8_w": (reverse, True, True),
    "reverse_i8_c": (lambda: reverse(I8, 3), False, True),
    "reverse_i32_w": (lambda: reverse(I32), True, True),
    "argmax_c": (argmax, True, True),
    "argmax_w": (lambda: argmax(2), False, True),
    "argmax_200_channels": (lambda: argmax(3, 200), False, True),
    "transpose_i8": (transpose, True, True),
    "transpose_i32": (lambda: transpose(I32), True, True),
    "transpose_bool": (lambda: transpose(BOOL), False, True),
    "concat_i8": (concat, True, True),
    "concat_bool": (lambda: concat(BOOL), False, True),
    "reshape_i32": (lambda: reshape(I32), True, True),
    "reshape_bool": (lambda: reshape(BOOL), False, True),
    "slice_bool": (lambda: slice_(BOOL), False, True),
    "tile_bool": (lambda: tile(BOOL), False, True),
    "pad_i8": (pad, True, True),
    "pad_bool": (lambda: pad(BOOL), False, True),
    "gather": (gather, False, True),
    "select": (select, False, True),
}
