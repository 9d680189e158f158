"""Prepared SLICE, PAD, GREATER/GREATER_EQUAL/EQUAL, SELECT, MAXIMUM/MINIMUM, CAST, REVERSE,
TILE, NEGATE, GATHER, POW, REDUCE_PRODUCT/ALL/ANY, RESIZE and TRANSPOSE_CONV2D (common in one-op graphs):
the plan's kernels, run twice on a loaded graph, against the reference model bit for bit; a
declaration the checks refuse keeps the op function's error, word for word."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaRequireError, TosaValidationError
from tosa_verify.ops.registry import REGISTRY
from tosa_verify.plan import plan_for

_RNG = np.random.default_rng(31)
_TS = {np.dtype(np.int8): ts.DType.INT8, np.dtype(np.int16): ts.DType.INT16, np.dtype(np.int32): ts.DType.INT32,
       np.dtype(np.float32): ts.DType.FP32, np.dtype(np.bool_): ts.DType.BOOL}


def _graph(op, feeds: list[np.ndarray], consts: list[tuple], out_shape, out_dtype, attr: str, *args) -> bytes:
    """``op`` of the graph inputs ``feeds`` then the constants ``consts`` ((shape, dtype, values))."""
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    names = []
    for i, x in enumerate(feeds):
        g.addInputTensor(ts.TosaSerializerTensor(f"x{i}", list(x.shape), _TS[x.dtype], data=None))
        names.append(f"x{i}")
    names += [g.addConst(shape, dtype, values, name=f"c{i}").name for i, (shape, dtype, values) in enumerate(consts)]
    out = g.addIntermediate(list(out_shape), out_dtype)
    attribute = ts.TosaSerializerAttribute()
    getattr(attribute, attr)(*args)
    g.addOperator(op, names, [out.name], attribute)
    g.addOutputTensor(out)
    return bytes(g.serialize())


def _cases() -> dict:
    x8 = _RNG.integers(-128, 128, size=(2, 6, 5)).astype(np.int8)
    xf = _RNG.standard_normal((3, 4)).astype(np.float32)
    xf[0, :3] = [np.nan, -0.0, np.inf]
    yf = _RNG.standard_normal((1, 4)).astype(np.float32)
    yf[0, 1] = 0.0
    cond = _RNG.integers(0, 2, size=(3, 1)).astype(np.bool_)
    xc = np.array([[-0.5, 0.5, 1.5, 2.5, -2.5, 127.4, 300.0, -1e9, np.inf, -np.inf, -0.0, 7.49]], np.float32)
    xi = _RNG.integers(-(2**31), 2**31, size=(4, 8)).astype(np.int32)
    x16 = _RNG.integers(-(2**15), 2**15, size=(3, 7)).astype(np.int16)
    x16[0, 0] = -(2**15)  # (its negation saturates)
    indices = _RNG.integers(0, 6, size=(2, 4)).astype(np.int32)
    positive = np.abs(_RNG.standard_normal((3, 4))).astype(np.float32) + 0.25
    flags = _RNG.integers(0, 2, size=(4, 5)).astype(np.bool_)
    flags[:, 0], flags[:, 1] = True, False
    image8 = _RNG.integers(-128, 128, size=(1, 5, 6, 3)).astype(np.int8)
    image_f = _RNG.standard_normal((1, 5, 6, 3)).astype(np.float32)
    return {
        "slice": ([x8], _graph(ts.Op.SLICE, [x8], [([3], ts.DType.SHAPE, [1, 2, 0]), ([3], ts.DType.SHAPE, [1, 3, 4])],
                               [1, 3, 4], ts.DType.INT8, "SliceAttribute")),
        "pad": ([xf], _graph(ts.Op.PAD, [xf], [([4], ts.DType.SHAPE, [1, 0, 2, 1]), ([1], ts.DType.FP32, [-2.5])],
                             [4, 7], ts.DType.FP32, "PadAttribute")),
        **{op.lower(): ([xf, yf], _graph(getattr(ts.Op, op), [xf, yf], [], [3, 4], ts.DType.BOOL, f"{name}Attribute"))
           for op, name in (("GREATER", "Greater"), ("GREATER_EQUAL", "GreaterEqual"), ("EQUAL", "Equal"))},
        "select": ([cond, xf, yf], _graph(ts.Op.SELECT, [cond, xf, yf], [], [3, 4], ts.DType.FP32, "SelectAttribute")),
        "maximum": ([xf, yf], _graph(ts.Op.MAXIMUM, [xf, yf], [], [3, 4], ts.DType.FP32, "MaximumAttribute",
                                     ts.NanPropagationMode.PROPAGATE)),
        "minimum": ([xf, yf], _graph(ts.Op.MINIMUM, [xf, yf], [], [3, 4], ts.DType.FP32, "MinimumAttribute",
                                     ts.NanPropagationMode.IGNORE)),
        "cast_int8_fp32": ([x8], _graph(ts.Op.CAST, [x8], [], x8.shape, ts.DType.FP32, "CastAttribute")),
        "cast_fp32_int8": ([xc], _graph(ts.Op.CAST, [xc], [], xc.shape, ts.DType.INT8, "CastAttribute")),
        "cast_int32_int8": ([xi], _graph(ts.Op.CAST, [xi], [], xi.shape, ts.DType.INT8, "CastAttribute")),
        "reverse": ([x8], _graph(ts.Op.REVERSE, [x8], [], x8.shape, ts.DType.INT8, "ReverseAttribute", 1)),
        "tile": ([xf], _graph(ts.Op.TILE, [xf], [([2], ts.DType.SHAPE, [2, 3])], [6, 12], ts.DType.FP32,
                              "TileAttribute")),
        **{f"negate_{name}": ([x], _graph(ts.Op.NEGATE, [x], [([1], dtype, [zp]), ([1], dtype, [-zp])], x.shape, dtype,
                                          "NegateAttribute"))
           for name, x, dtype, zp in (("int8", x8, ts.DType.INT8, 5), ("int16", x16, ts.DType.INT16, 0),
                                      ("int32", xi // 2, ts.DType.INT32, 0), ("fp32", xf, ts.DType.FP32, 0))},
        "gather_constant_indices": ([x8], _graph(ts.Op.GATHER, [x8], [([2, 4], ts.DType.INT32, [5, 0, 5, 2, 1, 1, 3, 4])],
                                                 [2, 4, 5], ts.DType.INT8, "GatherAttribute")),
        "gather_indices_fed": ([x8, indices], _graph(ts.Op.GATHER, [x8, indices], [], [2, 4, 5], ts.DType.INT8,
                                                     "GatherAttribute")),
        "pow": ([positive], _graph(ts.Op.POW, [positive], [([1, 4], ts.DType.FP32, [0.5, 1.5, 2.0, -1.25])],
                                   [3, 4], ts.DType.FP32, "PowAttribute")),
        "reduce_product": ([positive], _graph(ts.Op.REDUCE_PRODUCT, [positive], [], [3, 1], ts.DType.FP32,
                                        "ReduceProductAttribute", 1)),
        **{f"resize_{name}": ([x], _graph(ts.Op.RESIZE, [x], [([4], ts.DType.SHAPE, scale), ([2], ts.DType.SHAPE, offset),
                                                          ([2], ts.DType.SHAPE, border)], out, dtype, "ResizeAttribute",
                                          getattr(ts.ResizeMode, mode)))
           for name, x, mode, scale, offset, border, out, dtype in (
               ("nearest_int8", image8, "NEAREST", [4, 2, 4, 2], [-1, -1], [1, 1], [1, 10, 12, 3], ts.DType.INT8),
               ("bilinear_int8", image8, "BILINEAR", [3, 2, 3, 2], [0, 0], [0, -1], [1, 7, 8, 3], ts.DType.INT32),
               ("bilinear_fp32", image_f, "BILINEAR", [5, 3, 7, 4], [1, 2], [-1, -1], [1, 7, 9, 3], ts.DType.FP32),
               ("nearest_fp32", image_f, "NEAREST", [5, 3, 7, 4], [1, 2], [-1, -1], [1, 7, 9, 3], ts.DType.FP32))},
        "transpose_conv_int8": ([image8[:, :4, :5]], _graph(
            ts.Op.TRANSPOSE_CONV2D, [image8[:, :4, :5]],
            [([4, 2, 2, 3], ts.DType.INT8, _RNG.integers(-127, 128, size=48).tolist()),
             ([4], ts.DType.INT32, [5, -70, 0, 1234]), ([1], ts.DType.INT8, [-3]), ([1], ts.DType.INT8, [0])],
            [1, 8, 10, 4], ts.DType.INT32, "TransposeConv2dAttribute", [0, 0, 0, 0], [2, 2], False, ts.DType.INT32)),
        "transpose_conv_fp32": ([image_f[:, :3, :3, :2]], _graph(
            ts.Op.TRANSPOSE_CONV2D, [image_f[:, :3, :3, :2]],
            [([3, 3, 3, 2], ts.DType.FP32, _RNG.standard_normal(54).astype(np.float32).tolist()),
             ([3], ts.DType.FP32, [0.5, -1.0, 0.25]), ([1], ts.DType.FP32, [0.0]), ([1], ts.DType.FP32, [0.0])],
            [1, 6, 7, 3], ts.DType.FP32, "TransposeConv2dAttribute", [1, 0, -1, 1], [1, 2], False, ts.DType.FP32)),
        **{f"reduce_{kind}": ([flags], _graph(getattr(ts.Op, f"REDUCE_{kind.upper()}"), [flags], [], [1, 5], ts.DType.BOOL,
                                              f"Reduce{kind.title()}Attribute", 0))
           for kind in ("all", "any")},
    }


#: Float ops whose results the spec bounds rather than fixes (the reference model computes POW,
#: the product and bilinear weights in float32 steps, we in float64 then one rounding), each
#: bit for bit the op function's (test below): case -> the most ulp from the reference model's
#: value; RESIZE's weighted sums cancel near zero, so its bound (the spec's is relative to the
#: largest magnitude) is in ulp of the output's largest element.
APPROXIMATE = {"pow": 2, "reduce_product": 2, "resize_bilinear_fp32": 4, "transpose_conv_fp32": 4}
RELATIVE_TO_LARGEST = {"resize_bilinear_fp32", "transpose_conv_fp32"}


@pytest.mark.parametrize("case", sorted(_cases()))
def test_a_prepared_kernel_matches_the_reference_model(case: str) -> None:
    feeds, data = _cases()[case]
    (expected,), status = reference_model.run(data, feeds)
    assert status == reference_model.GraphStatus.TOSA_VALID
    graph = tosa_verify.load(data)
    for _ in range(2):  # the first run builds the plan, the second runs the prepared kernel
        (ours,) = tosa_verify.run(graph, feeds)
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        bits = f"u{expected.itemsize}" if expected.dtype.kind == "f" else expected.dtype
        if case in APPROXIMATE:
            if case in RELATIVE_TO_LARGEST:
                error = np.abs(ours.astype(np.float64) - expected).max()
                assert error <= APPROXIMATE[case] * np.spacing(np.abs(expected).max()), error
            else:
                ulps = np.abs(ours.view(np.int32).astype(np.int64) - expected.view(np.int32).astype(np.int64))
                assert ulps.max() <= APPROXIMATE[case], ulps
        else:
            np.testing.assert_array_equal(ours.view(bits), expected.view(bits))
    step = plan_for(graph.main, graph).steps[-1]
    assert step.fn is not REGISTRY[step.operator.op]  # the prepared kernel ran


@pytest.mark.parametrize("case", sorted(_cases()))
def test_a_prepared_kernel_equals_the_op_function(case: str, monkeypatch) -> None:
    feeds, data = _cases()[case]
    graph = tosa_verify.load(data)
    tosa_verify.run(graph, feeds)
    (prepared,) = tosa_verify.run(graph, feeds)
    op = graph.main.operators[-1].op
    function = REGISTRY[op]
    monkeypatch.setitem(REGISTRY, op, lambda call: function(call))  # (no prepare for a wrapper)
    (unprepared,) = tosa_verify.run(tosa_verify.load(data), feeds)
    assert prepared.dtype == unprepared.dtype
    bits = f"u{prepared.itemsize}" if prepared.dtype.kind == "f" else prepared.dtype
    np.testing.assert_array_equal(prepared.view(bits), unprepared.view(bits))


@pytest.mark.parametrize("case", sorted(_cases()))
def test_a_refused_declaration_keeps_the_op_functions_error(case: str, monkeypatch) -> None:
    feeds, data = _cases()[case]
    graph = tosa_verify.load(data)
    op = graph.main.operators[-1]
    graph.main.tensors[op.outputs[0]].shape = (9, 9, 9)  # (an output shape no check accepts)
    with pytest.raises(TosaValidationError) as planned:
        tosa_verify.run(graph, feeds)
    function = REGISTRY[op.op]
    monkeypatch.setitem(REGISTRY, op.op, lambda call: function(call))  # (no prepare for a wrapper)
    with pytest.raises(TosaValidationError) as unprepared:
        tosa_verify.run(graph, feeds)
    assert str(planned.value) == str(unprepared.value)


def test_a_prepared_float_to_int_cast_keeps_the_nan_require(monkeypatch) -> None:
    # (the spec's REQUIRE of a NaN input, which the reference model does not report: the op
    # function's error is the reference here)
    x = np.array([[1.0, np.nan]], np.float32)
    graph = tosa_verify.load(_graph(ts.Op.CAST, [x], [], x.shape, ts.DType.INT8, "CastAttribute"))
    for _ in range(2):
        with pytest.raises(TosaRequireError, match=r"operator 0 CAST .*REQUIRE\(input is not NaN") as prepared:
            tosa_verify.run(graph, [x])
    assert plan_for(graph.main, graph).steps[0].fn is not REGISTRY["CAST"]
    function = REGISTRY["CAST"]
    monkeypatch.setitem(REGISTRY, "CAST", lambda call: function(call))
    with pytest.raises(TosaRequireError) as unprepared:
        tosa_verify.run(graph, [x])
    assert str(prepared.value) == str(unprepared.value)


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf, 0.0])
def test_a_prepared_pow_keeps_each_require(bad: float, monkeypatch) -> None:
    """Each POW REQUIRE a run's data can break (a negative, NaN or infinite base; 0 to a
    non-positive power) raises the op function's error word for word from the prepared kernel."""
    x = np.array([[2.0, bad, 0.5, 3.0]], np.float32)
    data = _graph(ts.Op.POW, [x], [([1, 4], ts.DType.FP32, [0.5, -1.5, 2.0, 1.0])], [1, 4], ts.DType.FP32,
                  "PowAttribute")
    graph = tosa_verify.load(data)
    good = np.ones_like(x)
    tosa_verify.run(graph, [good])
    assert plan_for(graph.main, graph).steps[-1].fn is not REGISTRY["POW"]
    with pytest.raises(TosaRequireError, match=r"operator 1 POW .*REQUIRE") as prepared:
        tosa_verify.run(graph, [x])
    function = REGISTRY["POW"]
    monkeypatch.setitem(REGISTRY, "POW", lambda call: function(call))
    with pytest.raises(TosaRequireError) as unprepared:
        tosa_verify.run(tosa_verify.load(data), [x])
    assert str(prepared.value) == str(unprepared.value)
