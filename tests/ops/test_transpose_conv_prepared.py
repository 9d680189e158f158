"""The prepared TRANSPOSE_CONV2D (constant weight, bias and zero points) on loaded one-op graphs,
run twice so that the plan's kernel runs: INT8 (with zero points), INT16 x INT8 -> INT48 (read
through an identity RESCALE to INT32: the reference model's ``run`` cannot return INT48) and
FP32, for 1x1, 2x2 and 3x3 kernels, strides 1 and 2 (the stride == kernel block kernel among
them), out_pad of either sign and batch 2; against the reference model (integers bit for bit,
FP32 within 1e-6 of the largest magnitude, as the reference model sums in float32) and bit for
bit against the op function. A declaration the checks refuse keeps the op function's error."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaValidationError
from tosa_verify.ops.registry import REGISTRY
from tosa_verify.plan import plan_for

_RNG = np.random.default_rng(7)
_TS = {"INT8": ts.DType.INT8, "INT16": ts.DType.INT16, "INT32": ts.DType.INT32, "INT48": ts.DType.INT48,
       "FP32": ts.DType.FP32}
#: in_t -> (weight_t, out_t, acc_type)
_SIGNATURE = {"INT8": ("INT8", "INT32", "INT32"), "INT16": ("INT8", "INT48", "INT48"), "FP32": ("FP32", "FP32", "FP32")}


def _values(dtype: str, shape: tuple[int, ...], low: int = -128, high: int = 128) -> np.ndarray:
    if dtype == "FP32":
        return _RNG.standard_normal(shape).astype(np.float32)
    return _RNG.integers(low, high, size=shape).astype(np.int16 if dtype == "INT16" else np.int8)


def _graph(in_t: str, x_shape, w_shape, stride, out_pad, bias, zero_points, out_shape=None) -> tuple[bytes, list]:
    """A TRANSPOSE_CONV2D of the graph input with constant weight, bias and zero points; an
    INT48 result goes on through an identity RESCALE to INT32. Returns (graph, feeds)."""
    w_t, out_t, acc_t = _SIGNATURE[in_t]
    n, ih, iw, _ = x_shape
    oc, kh, kw, _ = w_shape
    if out_shape is None:
        out_shape = [n, (ih - 1) * stride[0] + out_pad[0] + out_pad[1] + kh,
                     (iw - 1) * stride[1] + out_pad[2] + out_pad[3] + kw, oc]
    weight = _values(w_t, w_shape, -127)
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", list(x_shape), _TS[in_t], data=None))
    consts = [g.addConst(list(w_shape), _TS[w_t], weight.reshape(-1).tolist(), name="w"),
              g.addConst([len(bias)], _TS[out_t], list(bias), name="b"),
              g.addConst([1], _TS[in_t], [zero_points[0]], name="izp"),
              g.addConst([1], _TS[w_t], [zero_points[1]], name="wzp")]
    out = g.addIntermediate(list(out_shape), _TS[out_t])
    attr = ts.TosaSerializerAttribute()
    attr.TransposeConv2dAttribute(list(out_pad), list(stride), False, _TS[acc_t])
    g.addOperator(ts.Op.TRANSPOSE_CONV2D, ["x", *(c.name for c in consts)], [out.name], attr)
    if out_t == "INT48":  # value * 2**14 >> 14: the INT48 values, as INT32 (they fit)
        rescale = [g.addConst([1], ts.DType.INT16, [1 << 14], name="m"), g.addConst([1], ts.DType.INT8, [14], name="s"),
                   g.addConst([1], ts.DType.INT48, [0], name="rizp"), g.addConst([1], ts.DType.INT32, [0], name="rozp")]
        read = g.addIntermediate(list(out_shape), ts.DType.INT32)
        attr = ts.TosaSerializerAttribute()
        attr.RescaleAttribute(False, ts.RoundingMode.SINGLE_ROUND, False, False, False)
        g.addOperator(ts.Op.RESCALE, [out.name, *(c.name for c in rescale)], [read.name], attr)
        out = read
    g.addOutputTensor(out)
    return bytes(g.serialize()), [_values(in_t, tuple(x_shape), -(2**15) if in_t == "INT16" else -128,
                                          2**15 if in_t == "INT16" else 128)]


#: name -> (in_t, input shape, weight shape [OC, KH, KW, IC], stride, out_pad, bias, (input_zp, weight_zp))
CASES = {
    "int8_k2_s2_blocks": ("INT8", (1, 8, 8, 4), (4, 2, 2, 4), (2, 2), (0, 0, 0, 0), [5, -70, 0, 1234], (-3, 0)),
    "int8_k2_s2_batch2_zero_points": ("INT8", (2, 4, 5, 3), (4, 2, 2, 3), (2, 2), (0, 0, 0, 0), [9], (17, -5)),
    "int8_k1_s1": ("INT8", (2, 3, 4, 6), (5, 1, 1, 6), (1, 1), (0, 0, 0, 0), [1, 2, 3, 4, 5], (-128, 0)),
    "int8_k1_s2_gaps_out_pad": ("INT8", (1, 4, 3, 2), (3, 1, 1, 2), (2, 2), (1, 0, 0, 2), [-7, 0, 7], (4, 0)),
    "int8_k3_s2_overlap_negative_out_pad": ("INT8", (2, 4, 4, 3), (2, 3, 3, 3), (2, 2), (-1, -2, 1, -1), [100, -100],
                                            (-1, 3)),
    "int8_k3_s1": ("INT8", (1, 5, 4, 8), (4, 3, 3, 8), (1, 1), (0, 0, 0, 0), [0, 1, -1, 2], (0, 0)),
    # a bias so large that only the input's extremes can show the sums in range: the per-run
    # dtype choice (and the wrap the reference model applies to an INT32 overflow)
    "int8_k2_s2_huge_bias": ("INT8", (1, 3, 3, 4), (2, 2, 2, 4), (2, 2), (0, 0, 0, 0), [2**31 - 50, -(2**31)], (0, 0)),
    "int16_k2_s2_blocks": ("INT16", (1, 4, 4, 3), (4, 2, 2, 3), (2, 2), (0, 0, 0, 0), [3, -3, 2**20, 0], (0, 0)),
    "int16_k3_s2_out_pad": ("INT16", (2, 3, 3, 2), (3, 3, 3, 2), (2, 2), (1, -1, 0, 2), [11, 0, -11], (0, 0)),
    "int16_k1_s1": ("INT16", (1, 4, 4, 5), (2, 1, 1, 5), (1, 1), (0, 0, 0, 0), [0], (0, 0)),
    "fp32_k2_s2_blocks": ("FP32", (1, 8, 8, 4), (4, 2, 2, 4), (2, 2), (0, 0, 0, 0), [0.5, -1.0, 0.25, -0.0], (0, 0)),
    "fp32_k2_s2_batch2": ("FP32", (2, 3, 5, 3), (2, 2, 2, 3), (2, 2), (0, 0, 0, 0), [-0.0], (0, 0)),
    "fp32_k1_s1": ("FP32", (2, 4, 3, 7), (3, 1, 1, 7), (1, 1), (0, 0, 0, 0), [1.0, 2.0, 3.0], (0, 0)),
    "fp32_k3_s1_negative_out_pad": ("FP32", (1, 5, 6, 3), (3, 3, 3, 3), (1, 1), (-2, 1, 0, -1), [0.5, -1.0, 0.25],
                                    (0, 0)),
    "fp32_k3_s2_out_pad_batch2": ("FP32", (2, 3, 4, 2), (2, 3, 3, 2), (2, 2), (1, 2, -1, 0), [0.125], (0, 0)),
    "fp32_k2_s1x2": ("FP32", (1, 4, 4, 4), (4, 2, 2, 4), (1, 2), (0, 1, 1, 0), [0.0], (0, 0)),
}


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(f"u{values.itemsize}") if values.dtype.kind == "f" else values


def _conv_step(graph):
    """The plan's TRANSPOSE_CONV2D step."""
    return next(s for s in plan_for(graph.main, graph).steps if s.operator.op == "TRANSPOSE_CONV2D")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_prepared_kernel_matches_the_reference_model(case: str) -> None:
    data, feeds = _graph(*CASES[case])
    (expected,), status = reference_model.run(data, feeds)
    assert status == reference_model.GraphStatus.TOSA_VALID
    graph = tosa_verify.load(data)
    for _ in range(2):  # the first run builds the plan, the second runs the prepared kernel again
        (ours,) = tosa_verify.run(graph, feeds)
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        if expected.dtype.kind == "f":
            # the reference model sums in float32, we in float64 rounded once
            error = np.abs(ours.astype(np.float64) - expected).max()
            assert error <= 1e-6 * np.abs(expected).max(), error
        else:
            np.testing.assert_array_equal(ours, expected)
    assert _conv_step(graph).fn is not REGISTRY["TRANSPOSE_CONV2D"]  # the prepared kernel ran


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_prepared_kernel_equals_the_op_function(case: str, monkeypatch) -> None:
    data, feeds = _graph(*CASES[case])
    graph = tosa_verify.load(data)
    tosa_verify.run(graph, feeds)
    (prepared,) = tosa_verify.run(graph, feeds)
    assert _conv_step(graph).fn is not REGISTRY["TRANSPOSE_CONV2D"]
    function = REGISTRY["TRANSPOSE_CONV2D"]
    monkeypatch.setitem(REGISTRY, "TRANSPOSE_CONV2D", lambda call: function(call))  # (no prepare for a wrapper)
    (unprepared,) = tosa_verify.run(tosa_verify.load(data), feeds)
    assert prepared.dtype == unprepared.dtype
    np.testing.assert_array_equal(_bits(prepared), _bits(unprepared))


def test_a_negative_zero_bias_gives_the_op_functions_plus_zero() -> None:
    """A lone -0 product plus a -0 bias: the spec's sum starts at +0, so the output is +0."""
    data, feeds = _graph("FP32", (1, 2, 2, 1), (1, 2, 2, 1), (2, 2), (0, 0, 0, 0), [-0.0], (0, 0))
    feeds = [np.full((1, 2, 2, 1), -0.0, np.float32)]
    graph = tosa_verify.load(data)
    for _ in range(2):
        (ours,) = tosa_verify.run(graph, feeds)
        assert not np.signbit(ours).any()


@pytest.mark.parametrize("case", ["fp32_k2_s2_blocks", "fp32_k3_s1_negative_out_pad"])
def test_infinities_and_nans_give_the_op_functions_values(case: str, monkeypatch) -> None:
    data, feeds = _graph(*CASES[case])
    feeds[0][0, 0, 0, :2] = [np.inf, np.nan]
    feeds[0][0, 1, 1, 0] = -np.inf
    graph = tosa_verify.load(data)
    tosa_verify.run(graph, feeds)
    (prepared,) = tosa_verify.run(graph, feeds)
    assert np.isnan(prepared).any() and np.isinf(prepared).any()
    function = REGISTRY["TRANSPOSE_CONV2D"]
    monkeypatch.setitem(REGISTRY, "TRANSPOSE_CONV2D", lambda call: function(call))
    (unprepared,) = tosa_verify.run(tosa_verify.load(data), feeds)
    np.testing.assert_array_equal(prepared, unprepared)  # (NaN where the op function's is NaN)


@pytest.mark.parametrize("case", ["int8_k2_s2_blocks", "fp32_k3_s1_negative_out_pad"])
def test_a_wrong_output_shape_keeps_the_op_functions_error(case: str, monkeypatch) -> None:
    in_t, x_shape, w_shape, stride, out_pad, bias, zero_points = CASES[case]
    data, feeds = _graph(in_t, x_shape, w_shape, stride, out_pad, bias, zero_points, out_shape=[1, 9, 9, w_shape[0]])
    graph = tosa_verify.load(data)
    for _ in range(2):  # (the plan keeps the op function: each run reports the error)
        with pytest.raises(TosaValidationError, match="TRANSPOSE_CONV2D") as planned:
            tosa_verify.run(graph, feeds)
    assert _conv_step(graph).fn is REGISTRY["TRANSPOSE_CONV2D"]
    function = REGISTRY["TRANSPOSE_CONV2D"]
    monkeypatch.setitem(REGISTRY, "TRANSPOSE_CONV2D", lambda call: function(call))
    with pytest.raises(TosaValidationError) as unprepared:
        tosa_verify.run(tosa_verify.load(data), feeds)
    assert str(planned.value) == str(unprepared.value)
