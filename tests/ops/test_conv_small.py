"""The small-tensor CONV2D kernel (``ops._conv_small``) against the official reference model:
INT bit for bit, FP within the dot-product error bound; with padding, stride, dilation and zero
points, and the kernel proven to be the one that ran."""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
from tosa_verify import reference
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.plan import plan_for
from tosa_verify.writer import to_flatbuffer

_NP = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP32": np.float32}


def _conv_graph(x_shape, w, bias, in_t, out_t, pad, stride, dilation, izp, wzp) -> bytes:
    w_t = "INT8" if in_t != "FP32" else "FP32"
    acc = {"INT8": "INT32", "INT16": "INT48", "FP32": "FP32"}[in_t]
    kh, kw = w.shape[1:3]
    oh = (x_shape[1] - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (x_shape[2] - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    tensors = {
        "x": Tensor("x", tuple(x_shape), in_t),
        "w": Tensor("w", w.shape, w_t, w),
        "b": Tensor("b", bias.shape, out_t if in_t == "FP32" else acc, bias),
        "izp": Tensor("izp", (1,), in_t, np.array([izp], _NP[in_t])),
        "wzp": Tensor("wzp", (1,), w_t, np.array([wzp], _NP[w_t])),
        "y": Tensor("y", (x_shape[0], oh, ow, w.shape[0]), out_t),
    }
    attrs = {"pad": list(pad), "stride": list(stride), "dilation": list(dilation), "local_bound": False,
             "acc_type": acc}
    consts = [Operator("CONST", {}, [], [name]) for name in ("w", "b", "izp", "wzp")]
    op = Operator("CONV2D", attrs, ["x", "w", "b", "izp", "wzp"], ["y"])
    block = Block("main", [*consts, op], tensors, ["x"], ["y"])
    return to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [block])]))


@pytest.mark.parametrize(("in_t", "hw", "pad", "stride", "dilation", "izp"), [
    ("INT8", (7, 6), (1, 1, 1, 1), (1, 1), (1, 1), -7),
    ("INT8", (7, 6), (0, 2, 1, 0), (2, 1), (1, 2), 127),
    ("INT8", (7, 6), (0, 0, 0, 0), (1, 1), (1, 1), 0),
    ("INT16", (7, 7), (2, 1, 0, 1), (1, 2), (2, 1), 0),
    ("FP32", (8, 7), (1, 0, 1, 2), (2, 2), (1, 1), 0),
])
def test_small_conv2d_matches_the_reference_model(in_t, hw, pad, stride, dilation, izp) -> None:
    rng = np.random.default_rng(sum(pad) + 7 * stride[0] + izp)
    oc, kh, kw, ic = 5, 3, 2, 4
    if in_t == "FP32":
        w = rng.standard_normal((oc, kh, kw, ic)).astype(np.float32)
        bias = rng.standard_normal(oc).astype(np.float32)
        x = rng.standard_normal((2, *hw, ic)).astype(np.float32)
        out_t, wzp = "FP32", 0
    else:
        w = rng.integers(-128, 128, (oc, kh, kw, ic)).astype(np.int8)
        info = np.iinfo(_NP[in_t])
        x = rng.integers(info.min, int(info.max) + 1, (2, *hw, ic)).astype(_NP[in_t])
        x.reshape(-1)[:2] = [info.min, info.max]  # the type's extremes: the static bound's edge
        out_t = "INT32" if in_t == "INT8" else "INT48"
        bias = rng.integers(-(1 << 20), 1 << 20, oc).astype(np.int32 if in_t == "INT8" else np.int64)
        wzp = -3 if in_t == "INT8" else 0
    data = _conv_graph(x.shape, w, bias, in_t, out_t, pad, stride, dilation, izp, wzp)
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[-1].fn.__name__ == "small_conv"
    expected = reference.run(data, [x])  # (the reference model's executable: INT48 outputs too)
    [ours] = tosa_verify.run(graph, [x])
    assert ours.shape == expected[0].shape
    if in_t == "FP32":
        # float64 sums rounded once: far inside the dot-product bound; against a float64 reference
        ref = np.asarray(expected[0], np.float64)
        assert np.max(np.abs(ours - ref)) <= 1e-5 * max(1.0, float(np.max(np.abs(ref))))
    else:
        np.testing.assert_array_equal(ours, expected[0])


def test_large_or_non_finite_convolutions_keep_the_general_kernel() -> None:
    w = np.ones((2, 1, 1, 3), np.float32)
    w[0, 0, 0, 0] = np.inf  # 0 * inf at a padded position would be NaN: no zero padding
    data = _conv_graph((1, 4, 4, 3), w, np.zeros(2, np.float32), "FP32", "FP32", (1, 1, 1, 1), (1, 1), (1, 1),
                       0, 0)
    assert plan_for(tosa_verify.load(data).main).steps[-1].fn.__name__ != "small_conv"


@pytest.mark.parametrize(("in_t", "m", "pad", "stride", "dilation", "izp"), [
    ("INT8", 1, (1, 1, 1, 1), (1, 1), (1, 1), -128),
    ("INT8", 2, (1, 1, 2, 0), (2, 1), (1, 2), 100),
    ("INT16", 1, (1, 0, 0, 1), (1, 1), (1, 1), 0),
])
def test_small_depthwise_conv2d_matches_the_reference_model(in_t, m, pad, stride, dilation, izp) -> None:
    rng = np.random.default_rng(m * 13 + abs(izp))
    c, kh, kw, (ih, iw) = 3, 3, 2, (7, 6)
    w = rng.integers(-128, 128, (kh, kw, c, m)).astype(np.int8)
    info = np.iinfo(_NP[in_t])
    x = rng.integers(info.min, int(info.max) + 1, (2, ih, iw, c)).astype(_NP[in_t])
    x[0, 0, 0] = info.min
    out_t = "INT32" if in_t == "INT8" else "INT48"
    bias = rng.integers(-(1 << 20), 1 << 20, c * m).astype(np.int32 if in_t == "INT8" else np.int64)
    oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    acc = "INT32" if in_t == "INT8" else "INT48"
    tensors = {"x": Tensor("x", x.shape, in_t), "w": Tensor("w", w.shape, "INT8", w),
               "b": Tensor("b", bias.shape, acc, bias),
               "izp": Tensor("izp", (1,), in_t, np.array([izp], _NP[in_t])),
               "wzp": Tensor("wzp", (1,), "INT8", np.array([5 if in_t == "INT8" else 0], np.int8)),
               "y": Tensor("y", (2, oh, ow, c * m), out_t)}
    attrs = {"pad": list(pad), "stride": list(stride), "dilation": list(dilation), "local_bound": False,
             "acc_type": acc}
    ops = [*(Operator("CONST", {}, [], [n]) for n in ("w", "b", "izp", "wzp")),
           Operator("DEPTHWISE_CONV2D", attrs, ["x", "w", "b", "izp", "wzp"], ["y"])]
    data = to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, ["x"], ["y"])])]))
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[-1].fn.__name__ == "small_depthwise"
    np.testing.assert_array_equal(tosa_verify.run(graph, [x])[0], reference.run(data, [x])[0])
