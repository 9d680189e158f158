"""Every ERROR_IF the TOSA 1.1 draft lists for DIM and the block-scaled operators, one graph each.

Each case is a small graph that breaks exactly one ERROR_IF line of the operator's pseudocode
(spec main branch, ``pseudocode/operators/<OP>.tosac``; the line is the case's id). The
interpreter must reject it with :class:`TosaValidationError` naming that condition, and the
reference model (tosa-tools) must reject it too (status ERROR): the spec text decides which
condition, the reference model confirms the graph is invalid.

Block-scaled operands come from ``CAST_TO_BLOCK_SCALED`` of fp32 inputs, so graph inputs stay
ordinary; an innermost dimension that is not a multiple of 32 is made by RESHAPE of MX data.

Not here: DIM's two block-scaled ERROR_IFs (``is_block_scale<in_t>()``) and
RESHAPE_BLOCK_SCALED's ``rank(new_value_shape) == 0``. The first need an ``in_t`` that is a
block-scaled tensor type, which the 1.1.0d flatbuffer (tosa-tools 2026.8.0) cannot express (DIM
takes one tensor; an FP4/FP6/FP8 data tensor alone is not block scaled); the second is
unreachable on its own (a rank-0 new shape has one element, so the tensor_size ERROR_IF fires
first).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tosa_verify import reference
from tosa_verify import run as run_interpreter
from tosa_verify.errors import TosaValidationError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer

MX = "FP8E4M3"
SCALE = "FP8UE8M0"


class _G:
    """A tiny TOSA 1.1 graph under construction (fp32 inputs, MX tensors from casts)."""

    def __init__(self) -> None:
        self.ops: list[Operator] = []
        self.tensors: dict[str, Tensor] = {}
        self.shapes: dict[str, Tensor] = {}
        self.feed: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(0)

    def _new(self, shape, dtype: str, data=None) -> str:
        name = f"t{len(self.tensors) + len(self.shapes)}"
        self.tensors[name] = Tensor(name, tuple(shape), dtype, data=data)
        return name

    def input(self, shape, dtype: str = "FP32", value=None) -> str:
        name = self._new(shape, dtype)
        self.feed[name] = self.rng.standard_normal(shape).astype(np.float32) if value is None else value
        return name

    def const(self, value, dtype: str) -> str:
        arr = np.asarray(value)
        name = self._new(arr.shape, dtype, data=arr)
        self.ops.append(Operator("CONST", {}, [], [name]))
        return name

    def shape(self, values) -> str:
        name = f"s{len(self.tensors) + len(self.shapes)}"
        self.shapes[name] = Tensor(name, (len(values),), "SHAPE", data=np.asarray(values, np.int64))
        self.ops.append(Operator("CONST_SHAPE", {}, [], [name]))
        return name

    def op(self, op: str, attrs: dict, ins: list[str], outs: list[tuple[tuple[int, ...], str]]) -> list[str]:
        names = [self._new(shape, dtype) for shape, dtype in outs]
        self.ops.append(Operator(op, attrs, list(ins), names))
        return names

    def mx(self, shape, block_size: int = 32) -> tuple[str, str]:
        """(MX data, scales) of an fp32 input of ``shape``, by CAST_TO_BLOCK_SCALED."""
        x = self.input(shape)
        scale_shape = (*shape[:-1], shape[-1] // 32)
        data, scale = self.op("CAST_TO_BLOCK_SCALED", {"block_size": block_size}, [x],
                              [(shape, MX), (scale_shape, SCALE)])
        return data, scale

    def mx48(self, shape) -> tuple[str, str]:
        """MX data whose innermost dimension (48) is no multiple of 32 (a RESHAPE of valid MX data),
        and scales of the shape such data would have with one block a row."""
        size = int(np.prod(shape))
        data, _ = self.mx((size // 32, 32))
        return self.reshape(data, shape), self.mx((*shape[:-1], 32))[1]

    def reshape(self, name: str, shape) -> str:
        dtype = self.tensors[name].dtype
        return self.op("RESHAPE", {}, [name, self.shape(shape)], [(tuple(shape), dtype)])[0]

    def flatbuffer(self, outputs: list[str]) -> bytes:
        block = Block("main", self.ops, self.tensors, list(self.feed), outputs, self.shapes)
        return to_flatbuffer(Graph((1, 1, 0, True), [Region("main", [block])]))


def _cast_to(bs: int = 32, shape=(2, 64)) -> tuple[_G, list[str]]:
    g = _G()
    x = g.input(shape)
    outs = g.op("CAST_TO_BLOCK_SCALED", {"block_size": bs}, [x],
                [(shape, MX), ((*shape[:-1], max(shape[-1] // bs, 1)) if shape else (), SCALE)])
    return g, outs


def _cast_from(bs: int = 32, data_shape=(2, 64), scale_src=(2, 64), reshape_data=None) -> tuple[_G, list[str]]:
    g = _G()
    data, _ = g.mx(data_shape)
    _, scale = g.mx(scale_src)
    if reshape_data is not None:
        data = g.reshape(data, reshape_data)
    shape = g.tensors[data].shape
    return g, g.op("CAST_FROM_BLOCK_SCALED", {"block_size": bs}, [data, scale], [(shape, "FP32")])


def _matmul(bs: int = 32, a=(1, 2, 64), b=(1, 3, 64)) -> tuple[_G, list[str]]:
    g = _G()
    ad, asc = g.mx(a) if a[-1] % 32 == 0 else g.mx48(a)
    bd, bsc = g.mx(b) if b[-1] % 32 == 0 else g.mx48(b)
    n, h, _ = a
    return g, g.op("MATMUL_T_BLOCK_SCALED", {"block_size": bs}, [ad, asc, bd, bsc], [((n, h, b[1]), "FP32")])


def _conv(bs: int = 32, pad=(1, 1, 1, 1), stride=(1, 1), dil=(1, 1), out=(1, 4, 4, 2), bias=2,
          ic=32) -> tuple[_G, list[str]]:
    g = _G()
    xd, xs = g.mx((1, 4, 4, ic)) if ic % 32 == 0 else g.mx48((1, 4, 4, ic))
    wd, ws = g.mx((2, 3, 3, ic)) if ic % 32 == 0 else g.mx48((2, 3, 3, ic))
    b = g.const(np.zeros(bias, np.float32), "FP32")
    ins = [xd, xs, wd, ws, b, g.shape(pad), g.shape(stride), g.shape(dil)]
    return g, g.op("CONV2D_BLOCK_SCALED", {"block_size": bs}, ins, [(out, "FP32")])


def _reshape(bs: int = 32, new=(4, 32), extra_input=False, outputs=2, plain=False, data=(2, 64), scale_src=None,
             reshape_data=None) -> tuple[_G, list[str]]:
    g = _G()
    if plain:
        ins = [g.input((2, 3))]
    else:
        d, s = g.mx(data)
        if scale_src is not None:
            _, s = g.mx(scale_src)
        if reshape_data is not None:
            d = g.reshape(d, reshape_data)
        ins = [d, s] + ([g.mx(data)[1]] if extra_input else [])
    outs = [(tuple(new), "FP32" if plain else MX), ((*new[:-1], max(new[-1] // 32, 1)), SCALE)][:outputs]
    return g, g.op("RESHAPE_BLOCK_SCALED", {"block_size": bs}, [*ins, g.shape(new)], outs)


def _row_gather(bs: int = 32, rows: int = 1, plain=False, extra_input=False, c48=False) -> tuple[_G, list[str]]:
    g = _G()
    if plain:
        values = [g.input((1, 4, 3))]
    elif c48:
        values = list(g.mx48((1, 4, 48)))
    else:
        values = list(g.mx((1, 4, 64))) + ([g.mx((1, 4, 64))[1]] if extra_input else [])
    idx = g.input((1, 2), "INT32", value=np.array([[0, 1]], np.int32))
    c = g.tensors[values[0]].shape[-1]
    outs = [((1, 2 * rows, c), g.tensors[values[0]].dtype)]
    if len(values) > 1:
        outs.append(((1, 2 * rows, max(c // 32, 1)), SCALE))
    count = g.const(np.array([rows], np.int32), "INT32")
    return g, g.op("ROW_GATHER_BLOCK_SCALED", {"block_size": bs}, [*values, idx, count], outs)


def _dim(axis: int) -> tuple[_G, list[str]]:
    g = _G()
    x = g.input((2, 3))
    name = f"s{len(g.tensors) + len(g.shapes)}"
    g.shapes[name] = Tensor(name, (1,), "SHAPE")
    g.ops.append(Operator("DIM", {"axis": axis}, [x], [name]))
    # a shape value is no graph output: TILE by it (multiples [d]) makes one
    y = g.op("TILE", {}, [g.input((1,)), name], [((3,), "FP32")])
    return g, y


#: (spec ERROR_IF line, graph builder, fragment of our message). The line is the case id.
CASES: list[tuple[str, str, Callable[[], tuple[_G, list[str]]], str]] = [
    ("DIM", "ERROR_IF(axis >= rank(shape))", lambda: _dim(2), "axis >= rank(shape)"),
    ("DIM", "ERROR_IF(axis < 0)", lambda: _dim(-1), "axis < 0"),
    ("CAST_TO_BLOCK_SCALED", "ERROR_IF(shape[rank(shape)-1] % block_size != 0)",
     lambda: _cast_to(shape=(2, 48)), "% block_size"),
    ("CAST_TO_BLOCK_SCALED", "ERROR_IF(rank(shape) == 0 || ...)", lambda: _cast_to(shape=()), "rank(shape) == 0"),
    ("CAST_TO_BLOCK_SCALED", "ERROR_IF(block_size == 1)", lambda: _cast_to(bs=1), "block_size == 1"),
    ("CAST_FROM_BLOCK_SCALED", "ERROR_IF(shape[rank(shape)-1] % block_size != 0)",
     lambda: _cast_from(data_shape=(2, 64), reshape_data=(8, 16)), "% block_size"),
    ("CAST_FROM_BLOCK_SCALED", "ERROR_IF(rank(shape) != rank(in_scale_shape))",
     lambda: _cast_from(scale_src=(1, 2, 64)), "rank(in_scale_shape)"),
    ("CAST_FROM_BLOCK_SCALED", "ERROR_IF(block_size == 1)", lambda: _cast_from(bs=1), "block_size == 1"),
    ("CAST_FROM_BLOCK_SCALED", "ERROR_IF(shape[axis_index] != in_scale_shape[axis_index])",
     lambda: _cast_from(scale_src=(3, 64)), "in_scale_shape[axis_index]"),
    ("CAST_FROM_BLOCK_SCALED", "ERROR_IF(shape[rank(shape) - 1] != in_scale_shape[rank(shape) - 1] * block_size)",
     lambda: _cast_from(scale_src=(2, 32)), "* block_size"),
    ("MATMUL_T_BLOCK_SCALED", "ERROR_IF(C % block_size != 0)",
     lambda: _matmul(a=(1, 2, 48), b=(1, 2, 48)), "C % block_size"),
    ("MATMUL_T_BLOCK_SCALED", "ERROR_IF(block_size == 1)", lambda: _matmul(bs=1), "block_size == 1"),
    ("MATMUL_T_BLOCK_SCALED", "ERROR_IF(D != N && D != 1)", lambda: _matmul(a=(2, 2, 64), b=(3, 3, 64)), "D != N"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(pad_top < 0 || ...)", lambda: _conv(pad=(-1, 1, 1, 1), out=(1, 3, 4, 2)), "pad"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(stride_y < 1 || stride_x < 1)", lambda: _conv(stride=(1, 0)), "stride"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(dilation_y < 1 || dilation_x < 1)", lambda: _conv(dil=(0, 1)), "dilation"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(OH != idiv_check(...) + 1)", lambda: _conv(out=(1, 5, 4, 2)), "OH"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(OW != idiv_check(...) + 1)", lambda: _conv(out=(1, 4, 3, 2)), "OW"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(BC != OC && BC != 1)", lambda: _conv(bias=3), "BC"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(IC % block_size != 0)", lambda: _conv(ic=48), "IC % block_size"),
    ("CONV2D_BLOCK_SCALED", "ERROR_IF(block_size == 1)", lambda: _conv(bs=1), "block_size == 1"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF(input_len != 1 && input_len != 2)", lambda: _reshape(extra_input=True),
     "input_len"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF(output_len != input_len)", lambda: _reshape(outputs=1), "output_len"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF((input_len == 1) && (block_size != 1))",
     lambda: _reshape(plain=True, new=(6,), outputs=1), "(input_len == 1) && (block_size != 1)"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF((input_len == 2) && (block_size == 1))", lambda: _reshape(bs=1),
     "(input_len == 2) && (block_size == 1)"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF(tensor_size(value_shape1) != tensor_size(new_value_shape))",
     lambda: _reshape(new=(4, 64)), "tensor_size"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF(rank(value_shape1) != rank(scale_shape1))",
     lambda: _reshape(scale_src=(128,)), "rank(scale_shape1)"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF((value_shape1_last % block_size) != 0)",
     lambda: _reshape(reshape_data=(8, 16), scale_src=(4, 32)), "value_shape1_last % block_size"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF((new_value_shape_last % block_size) != 0)", lambda: _reshape(new=(8, 16)),
     "new_value_shape_last % block_size"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF(scale_shape1[-1] != (value_shape1_last / block_size))",
     lambda: _reshape(scale_src=(4, 32)), "scale_shape1[-1]"),
    ("RESHAPE_BLOCK_SCALED", "ERROR_IF(tensor_size(scale_shape1) != tensor_size(new_scale_shape))",
     lambda: _reshape(scale_src=(3, 64)), "tensor_size(scale_shape1)"),
    ("ROW_GATHER_BLOCK_SCALED", "ERROR_IF(C % block_size != 0)", lambda: _row_gather(c48=True), "C % block_size"),
    ("ROW_GATHER_BLOCK_SCALED", "ERROR_IF(values_len != 1 && values_len != 2)",
     lambda: _row_gather(extra_input=True), "values_len"),
    ("ROW_GATHER_BLOCK_SCALED", "ERROR_IF((values_len == 1) && (block_size != 1))", lambda: _row_gather(plain=True),
     "(values_len == 1) && (block_size != 1)"),
    ("ROW_GATHER_BLOCK_SCALED", "ERROR_IF((values_len == 2) && (block_size == 1))", lambda: _row_gather(bs=1),
     "(values_len == 2) && (block_size == 1)"),
    ("ROW_GATHER_BLOCK_SCALED", "ERROR_IF(row_count < 1)", lambda: _row_gather(rows=0), "row_count < 1"),
]


@pytest.mark.parametrize(("op", "line", "build", "fragment"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_each_spec_error_if_is_an_error_in_both(op, line, build, fragment) -> None:
    g, outputs = build()
    data = g.flatbuffer(outputs)
    with pytest.raises(TosaValidationError) as ours:
        run_interpreter(data, g.feed)
    assert op in str(ours.value) and fragment in str(ours.value), f"{line}: interpreter said {ours.value}"
    with pytest.raises(TosaValidationError):
        reference.run(data, g.feed)


def test_the_valid_neighbours_run_alike() -> None:
    """The unmutated graphs are valid: both executors run them to the same result, so each
    ERROR_IF case above fails for its one broken condition, not for a broken base graph."""
    for build in (_cast_to, _cast_from, _matmul, _conv, _reshape, lambda: _row_gather(), lambda: _dim(1),
                  lambda: _reshape(plain=True, bs=1, new=(6,), outputs=1), lambda: _row_gather(plain=True, bs=1)):
        g, outputs = build()
        data = g.flatbuffer(outputs)
        ours = run_interpreter(data, g.feed)
        theirs = reference.run(data, g.feed)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def _one_op_11(op: str, ins: list[tuple[tuple[int, ...], str]], out: tuple[tuple[int, ...], str], *attr,
               minor: int = 1) -> tuple[bytes, dict]:
    """A one-operator graph (by the fuzzer's builder) with fresh inputs."""
    from fuzz.builder import Builder  # tests/ is on sys.path

    b = Builder(np.random.default_rng(1), minor=minor)
    small = [b.rng.integers(-(1 << 40), 1 << 40, shape) if dt == "INT64" else None for shape, dt in ins]
    tensors = [b.input(shape, dt, value=v) for (shape, dt), v in zip(ins, small, strict=True)]
    result = b.op(op, tensors, out[0], out[1], *attr)
    case = b.finish([result])
    return case.data, case.inputs


#: EXT-INT64 type rows that do not exist (the 1.1 draft's tables): an error on both sides.
INT64_INVALID = [
    ("ARGMAX i64_t in, i32_t out", "ARGMAX", [((2, 3), "INT64")], ((3,), "INT32"), "ArgMaxAttribute", 0, "PROPAGATE"),
    ("GATHER i64_t values, i32_t indices", "GATHER", [((1, 4, 2), "INT64"), ((1, 2), "INT32")], ((1, 2, 2), "INT64")),
    ("CAST i64_t to i8_t", "CAST", [((2, 3), "INT64")], ((2, 3), "INT8")),
    ("CAST i8_t to i64_t", "CAST", [((2, 3), "INT8")], ((2, 3), "INT64")),
]


@pytest.mark.parametrize("case", INT64_INVALID, ids=[c[0] for c in INT64_INVALID])
def test_int64_type_rows_the_draft_lacks_are_errors_in_both(case) -> None:
    import tosa_serializer as ts

    _, op, ins, out, *attr = case
    attr = [ts.NanPropagationMode.PROPAGATE if a == "PROPAGATE" else a for a in attr]
    data, feed = _one_op_11(op, ins, out, *attr)
    with pytest.raises(TosaValidationError, match=op):
        run_interpreter(data, feed)
    with pytest.raises(TosaValidationError):
        reference.run(data, feed)


def test_int64_add_is_a_1_1_type() -> None:
    """A TOSA 1.0 graph has no i64_t ADD (1.0 tables): the interpreter rejects it. The reference
    model does not check the version and runs it; in a 1.1 graph both run it alike."""
    data10, feed = _one_op_11("ADD", [((2, 3), "INT64")] * 2, ((2, 3), "INT64"), minor=0)
    with pytest.raises(TosaValidationError, match="INT64"):
        run_interpreter(data10, feed)
    data11, feed = _one_op_11("ADD", [((2, 3), "INT64")] * 2, ((2, 3), "INT64"))
    np.testing.assert_array_equal(run_interpreter(data11, feed)[0], reference.run(data11, feed)[0])
