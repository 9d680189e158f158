"""tosa_verify.reference (the reference-model executor) and tosa_verify.writer (Graph -> bytes)."""

from __future__ import annotations

import glob
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import tosa_serializer as ts
from fuzz.strategies import Builder, RandomDraw, b_conv, b_rescale  # tests/ is on sys.path

import tosa_verify
from tosa_verify import reference
from tosa_verify.errors import TosaRequireError, TosaValidationError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer

ROOT = Path(__file__).resolve().parents[1]


def _graph(ops, tensors, inputs, outputs) -> Graph:
    return Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, inputs, outputs)])])


def _add_graph(dtype: str = "INT32", shape=(2, 3)) -> bytes:
    tensors = {n: Tensor(n, shape, dtype) for n in ("a", "b", "c")}
    return to_flatbuffer(_graph([Operator("ADD", {}, ["a", "b"], ["c"])], tensors, ["a", "b"], ["c"]))


def _intdiv_graph() -> bytes:
    tensors = {n: Tensor(n, (3,), "INT32") for n in ("a", "b", "c")}
    return to_flatbuffer(_graph([Operator("INTDIV", {}, ["a", "b"], ["c"])], tensors, ["a", "b"], ["c"]))


def _conv16_case(seed: int = 0):
    b = Builder(np.random.default_rng(seed))
    x = b.input((1, 4, 4, 2), "INT16")
    y = b_conv(RandomDraw(seed), b, x, depthwise=False)  # INT16 x INT8 -> INT48
    z = b_rescale(RandomDraw(seed + 1), b, y, out_dtype="INT16")
    return b.finish([z, y])


def test_run_matches_interpreter_list_and_dict_inputs():
    data = _add_graph()
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.full((2, 3), -7, np.int32)
    (ref,) = reference.run(data, [a, b])
    assert ref.dtype == np.int32
    np.testing.assert_array_equal(ref, a + b)
    (ref2,) = reference.run(data, {"b": b, "a": a})
    np.testing.assert_array_equal(ref2, ref)
    np.testing.assert_array_equal(tosa_verify.run(data, [a, b])[0], ref)


def test_python_and_cli_backends_agree_bf16():
    data = _add_graph("BF16", (4,))
    a = np.array([1.5, -2.0, 3.25, 0.0], ml_dtypes.bfloat16).view("V2")
    b = np.array([0.25, 1.0, -3.0, 7.0], ml_dtypes.bfloat16).view("V2")
    (cli,) = reference.run(data, [a, b], backend="cli")
    (py,) = reference.run(data, [a, b], backend="python")
    assert cli.dtype == py.dtype == np.dtype("V2")
    assert cli.tobytes() == py.tobytes()
    assert cli.tobytes() == tosa_verify.run(data, [a, b])[0].tobytes()


def test_int48_outputs_come_back_through_the_cli():
    case = _conv16_case()
    outs = reference.run(case.data, case.inputs, backend="python")  # falls back to the CLI
    ours = tosa_verify.run(case.data, case.inputs)
    assert outs[1].dtype == np.int64 and outs[1].size > 0
    for r, o in zip(outs, ours, strict=True):
        np.testing.assert_array_equal(r, o)


def test_capture_returns_every_tensor_equal_to_the_interpreter():
    case = _conv16_case(3)
    ref = reference.run(case.data, case.inputs, capture=True)
    ours = tosa_verify.run(case.data, case.inputs, capture=True)
    graph = tosa_verify.load(case.data)
    assert set(ref.tensors) >= set(graph.main.tensors)
    for name in graph.main.tensors:
        np.testing.assert_array_equal(ref.tensors[name], ours.tensors[name], err_msg=name)
    for r, o in zip(ref.outputs, ours.outputs, strict=True):
        np.testing.assert_array_equal(r, o)


def test_precise_mode_and_bounds():
    b = Builder(np.random.default_rng(1))
    a = b.input((1, 2, 8), "FP32")
    w = b.input((1, 8, 3), "FP32")
    z1, z2 = b.const(np.array([0.0]), "FP32"), b.const(np.array([0.0]), "FP32")
    out = b.op("MATMUL", [a, w, z1, z2], (1, 2, 3), "FP32")
    case = b.finish([out])
    res = reference.run(case.data, case.inputs, bounds=True)
    assert isinstance(res, reference.ReferenceResult)
    assert res.outputs[0].dtype == np.float64 and res.outputs[0].shape == (1, 2, 3)
    bound = res.bounds[out.name]
    x = case.inputs[a.name].astype(np.float64)
    y = case.inputs[w.name].astype(np.float64)
    np.testing.assert_allclose(res.outputs[0], x @ y, rtol=1e-12)
    np.testing.assert_allclose(bound, np.abs(x) @ np.abs(y), rtol=1e-12)
    (precise,) = reference.run(case.data, case.inputs, precise=True)
    assert precise.dtype == np.float64


def test_error_status_raises_validation_error():
    tensors = {"a": Tensor("a", (3,), "INT32"), "c": Tensor("c", (3,), "INT32")}
    # CLAMP on INT32 is not a TOSA 1.0 type combination: the reference model reports ERROR
    op = Operator("CLAMP", {"min_val": (0).to_bytes(4, "little"), "max_val": (5).to_bytes(4, "little"),
                            "nan_mode": "PROPAGATE"}, ["a"], ["c"])
    data = to_flatbuffer(_graph([op], tensors, ["a"], ["c"]))
    with pytest.raises(TosaValidationError, match="ERROR status") as info:
        reference.run(data, [np.zeros(3, np.int32)])
    assert not isinstance(info.value, TosaRequireError)


def test_unpredictable_status_raises_require_error_and_the_process_survives():
    a = np.array([7, 1, 5], np.int32)
    b = np.array([2, 0, 1], np.int32)  # division by zero: a REQUIRE fails
    with pytest.raises(TosaRequireError, match="REQUIRE"):
        reference.run(_intdiv_graph(), [a, b])
    with pytest.raises(TosaRequireError):
        reference.run(_add_graph(), [np.full((2, 3), 2**31 - 1, np.int32)] * 2)
    (ok,) = reference.run(_intdiv_graph(), [a, np.array([2, 1, 1], np.int32)])
    np.testing.assert_array_equal(ok, [3, 1, 5])


def test_bad_inputs_are_rejected_like_the_interpreter():
    with pytest.raises(tosa_verify.TosaInputError):
        reference.run(_add_graph(), [np.zeros((2, 3), np.int32)])


# --------------------------------------------------------------------------- writer


def _same_graph(g1: Graph, g2: Graph) -> None:
    assert len(g1.regions) == len(g2.regions)
    for r1, r2 in zip(g1.regions, g2.regions, strict=True):
        for b1, b2 in zip(r1.blocks, r2.blocks, strict=True):
            assert b1.operators == b2.operators
            assert (b1.inputs, b1.outputs) == (b2.inputs, b2.outputs)
            assert b1.tensors.keys() == b2.tensors.keys() and b1.shapes.keys() == b2.shapes.keys()
            for name, t1 in {**b1.tensors, **b1.shapes}.items():
                t2 = b2.tensors.get(name) or b2.shapes[name]
                assert (t1.shape, t1.dtype, t1.variable) == (t2.shape, t2.dtype, t2.variable)
                if t1.data is None:
                    assert t2.data is None
                else:
                    assert np.asarray(t1.data).tobytes() == np.asarray(t2.data).tobytes(), name


def test_writer_round_trips_fuzz_graphs_with_every_attribute_kind():
    from fuzz.strategies import INT_BUILDERS, build_single

    for k, kind in enumerate(sorted(INT_BUILDERS)):
        case = build_single(RandomDraw(k), k, kind)
        g = tosa_verify.load(case.data)
        _same_graph(g, tosa_verify.load(to_flatbuffer(g)))


@pytest.mark.parametrize("op", ["CONV2D", "RESCALE", "COND_IF", "RESIZE", "CLAMP", "TABLE"])
def test_writer_round_trips_conformance_graphs(op):
    from conformance.harness import generate

    files = sorted(glob.glob(str(generate(op) / "**" / "*.tosa"), recursive=True))
    assert files, f"the generator produced no {op} cases"
    for path in files:
        try:
            g = tosa_verify.load(path)
        except tosa_verify.TosaError:
            continue  # negative cases that do not even parse
        _same_graph(g, tosa_verify.load(to_flatbuffer(g)))


def test_writer_keeps_control_flow_regions():
    ser = ts.TosaSerializer("", ts.ConstMode.EMBED, 1, 0, 0, False)
    main = ser.currRegion.currBasicBlock
    for name in ("c", "x", "y"):
        main.addTensor(name, [2] if name != "c" else [], ts.DType.INT32 if name != "c" else ts.DType.BOOL)
    main.addInput("c")
    main.addInput("x")
    main.addOutput("y")
    attr = ts.TosaSerializerAttribute()
    attr.CondIfAttribute("then_b", "else_b")
    main.addOperator(ts.Op.COND_IF, ["c", "x"], ["y"], attr)
    for region, op in (("then_b", "IDENTITY"), ("else_b", "NEGATE")):
        ser.startRegion(region)
        ser.currRegion.addBasicBlock(region)
        blk = ser.currRegion.currBasicBlock
        blk.addTensor("i", [2], ts.DType.INT32)
        blk.addTensor("o", [2], ts.DType.INT32)
        blk.addInput("i")
        blk.addOutput("o")
        attr = ts.TosaSerializerAttribute()
        ins = ["i"]
        if op == "NEGATE":
            for z in ("z1", "z2"):
                blk.addTensor(z, [1], ts.DType.INT32, np.array([0], np.int32))
                cattr = ts.TosaSerializerAttribute()
                cattr.ConstAttribute()
                blk.addOperator(ts.Op.CONST, [], [z], cattr)
            ins += ["z1", "z2"]
            attr.NegateAttribute()
        else:
            attr.IdentityAttribute()
        blk.addOperator(ts.Op.__members__[op], ins, ["o"], attr)
    data = ser.serialize()
    g = tosa_verify.load(data)
    again = to_flatbuffer(g)
    _same_graph(g, tosa_verify.load(again))
    x = np.array([3, -4], np.int32)
    for cond in (True, False):
        inputs = [np.array(cond), x]
        np.testing.assert_array_equal(reference.run(again, inputs)[0], tosa_verify.run(again, inputs)[0])
        np.testing.assert_array_equal(reference.run(again, inputs, capture=True).outputs[0], x if cond else -x)


def test_writer_int4_minus_eight_is_written_exactly():
    """tosa_serializer refuses INT4 -8; the writer patches the packed bytes instead.

    -8 is outside int4_t ([-7, 7]), so the loader must reject what the writer wrote: that
    rejection is only possible if the nibble 0x8 reached the file.
    """
    w = np.array([-8, 7, -1, 3, -8, 0], np.int8).reshape(2, 1, 1, 3)
    tensors = {"w": Tensor("w", (2, 1, 1, 3), "INT4", data=w), "o": Tensor("o", (2, 1, 1, 3), "INT4")}
    ops = [Operator("CONST", {}, [], ["w"]), Operator("IDENTITY", {}, ["w"], ["o"])]
    data = to_flatbuffer(_graph(ops, tensors, [], ["o"]))
    with pytest.raises(tosa_verify.TosaValidationError, match="holds -8"):
        tosa_verify.load(data)
    ok = w.copy()
    ok[ok == -8] = -7
    tensors["w"] = Tensor("w", (2, 1, 1, 3), "INT4", data=ok)
    g2 = tosa_verify.load(to_flatbuffer(_graph(ops, tensors, [], ["o"])))
    np.testing.assert_array_equal(g2.main.tensors["w"].data, ok)


def test_writer_rank0_shape_constant():
    tensors = {"x": Tensor("x", (1,), "INT8"), "y": Tensor("y", (), "INT8")}
    g = Graph((1, 0, 0, False), [Region("main", [Block(
        "main", [Operator("CONST_SHAPE", {}, [], ["s"]), Operator("RESHAPE", {}, ["x", "s"], ["y"])],
        tensors, ["x"], ["y"], {"s": Tensor("s", (0,), "SHAPE", data=np.zeros(0, np.int64))})])])
    data = to_flatbuffer(g)
    x = np.array([5], np.int8)
    assert reference.run(data, [x])[0] == tosa_verify.run(data, [x])[0] == 5


def _zero_dimension_graph() -> bytes:
    """x (4, 4) -> SLICE of 4 x 0 -> REDUCE_SUM over axis 1 -> (4, 1): loads, fails when run."""
    shapes = {n: Tensor(n, (2,), "SHAPE", data=np.array(v, np.int64)) for n, v in (("at", [0, 0]), ("size", [4, 0]))}
    tensors = {"x": Tensor("x", (4, 4), "FP32"), "s": Tensor("s", (4, 0), "FP32"), "y": Tensor("y", (4, 1), "FP32")}
    ops = [Operator("CONST_SHAPE", {}, [], ["at"]), Operator("CONST_SHAPE", {}, [], ["size"]),
           Operator("SLICE", {}, ["x", "at", "size"], ["s"]),
           Operator("REDUCE_SUM", {"axis": 1, "nan_mode": "PROPAGATE"}, ["s"], ["y"])]
    return to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, ["x"], ["y"], shapes)])]))


def test_a_zero_dimension_is_an_error_and_the_in_process_backend_does_not_crash():
    # tosa_reference_model.run ends the process (a segfault) on such a graph: the python backend
    # hands it to the executable instead, which reports the ERROR like any other
    data = _zero_dimension_graph()
    x = np.ones((4, 4), np.float32)
    assert not reference.survives_in_process(tosa_verify.load(data))
    assert reference.survives_in_process(tosa_verify.load(_add_graph()))
    for backend in ("python", "cli"):
        with pytest.raises(TosaValidationError, match="dim == 0"):
            reference.run(data, [x], backend=backend)
    with pytest.raises(TosaValidationError, match=r"SLICE .*ERROR_IF\(size\[index\] <= 0\)"):
        tosa_verify.run(data, [x])
