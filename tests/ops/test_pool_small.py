"""The small-tensor integer pooling kernels (``ops._pool_small``) against the official reference
model, bit for bit: padding (never counted, never the maximum), strides, zero points, and the
kernel proven to be the one that ran."""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
from tosa_verify import reference
from tosa_verify.compare import compare
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.plan import plan_for
from tosa_verify.writer import to_flatbuffer

_NP = {"INT8": np.int8, "INT16": np.int16, "FP32": np.float32, "FP16": np.float16}


def _pool_graph(op: str, x_shape, dt, kernel, stride, pad, izp=0, ozp=0) -> bytes:
    oh = (x_shape[1] + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
    ow = (x_shape[2] + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    tensors = {"x": Tensor("x", tuple(x_shape), dt), "y": Tensor("y", (x_shape[0], oh, ow, x_shape[3]), dt)}
    attrs = {"kernel": list(kernel), "stride": list(stride), "pad": list(pad)}
    ops, inputs = [], ["x"]
    if op == "AVG_POOL2D":
        attrs["acc_type"] = "INT32" if dt.startswith("INT") else "FP32"
        for name, zp in (("izp", izp), ("ozp", ozp)):
            tensors[name] = Tensor(name, (1,), dt, np.array([zp], _NP[dt]))
            ops.append(Operator("CONST", {}, [], [name]))
            inputs.append(name)
    else:
        attrs["nan_mode"] = "PROPAGATE"
    block = Block("main", [*ops, Operator(op, attrs, inputs, ["y"])], tensors, ["x"], ["y"])
    return to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [block])]))


@pytest.mark.parametrize("op", ["AVG_POOL2D", "MAX_POOL2D"])
@pytest.mark.parametrize(("dt", "hw", "kernel", "stride", "pad", "izp", "ozp"), [
    ("INT8", (8, 8), (2, 2), (2, 2), (0, 0, 0, 0), -3, 5),
    ("INT8", (7, 9), (3, 3), (2, 1), (1, 1, 2, 0), 127, -128),
    ("INT16", (6, 5), (3, 2), (1, 1), (2, 1, 1, 1), 0, 0),
])
def test_small_integer_pool_matches_the_reference_model(op, dt, hw, kernel, stride, pad, izp, ozp) -> None:
    rng = np.random.default_rng(hw[0] * 31 + kernel[0])
    info = np.iinfo(_NP[dt])
    x = rng.integers(info.min, int(info.max) + 1, (2, *hw, 3)).astype(_NP[dt])
    x[0, 0, 0] = info.min  # a corner value next to the padding
    x[1, -1, -1] = info.max
    data = _pool_graph(op, x.shape, dt, kernel, stride, pad, izp, ozp)
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[-1].fn.__name__ == f"small_{op[:3].lower()}_pool"
    expected = reference.run(data, [x])
    np.testing.assert_array_equal(tosa_verify.run(graph, [x])[0], expected[0])


@pytest.mark.parametrize("mode", ["PROPAGATE", "IGNORE"])
@pytest.mark.parametrize(("dt", "hw", "kernel", "stride", "pad"), [
    ("FP32", (8, 8), (2, 2), (2, 2), (0, 0, 0, 0)),
    ("FP32", (7, 9), (3, 3), (2, 1), (1, 1, 2, 0)),
    ("FP16", (6, 5), (3, 2), (1, 1), (2, 1, 1, 1)),
])
def test_small_float_max_pool_matches_the_reference_model_bit_for_bit(mode, dt, hw, kernel, stride, pad) -> None:
    # ties of signed zeros (the first in scan order wins), NaN per mode, infinities, all-NaN
    # and all -inf windows next to the padding
    rng = np.random.default_rng(hw[1] * 7 + kernel[1])
    np_dt = {"FP32": np.float32, "FP16": np.float16}[dt]
    specials = np.array([0.0, -0.0, np.nan, 1.5, -np.inf, np.inf, -1.0, -0.0, 0.0], np_dt)
    x = rng.choice(specials, size=(2, *hw, 3)).astype(np_dt)
    x[0, :kernel[0], :kernel[1], 0] = np.nan
    x[1, :kernel[0], :kernel[1], 1] = -np.inf
    x[1, -kernel[0]:, -kernel[1]:, 2] = rng.choice([0.0, -0.0], size=(kernel[0], kernel[1]))
    data = _pool_graph("MAX_POOL2D", x.shape, dt, kernel, stride, pad)
    graph = tosa_verify.load(data)
    graph.main.operators[-1].attrs["nan_mode"] = mode
    data = to_flatbuffer(graph)
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[-1].fn.__name__ == "small_float_max_pool"
    expected = reference.run(data, [x])[0]
    for _ in range(2):
        ours = tosa_verify.run(graph, [x])[0]
        assert ours.dtype == expected.dtype
        np.testing.assert_array_equal(ours.view(f"u{ours.itemsize}"), expected.view(f"u{ours.itemsize}"))


@pytest.mark.parametrize(("dt", "hw", "kernel", "stride", "pad"), [
    ("FP32", (16, 16), (2, 2), (2, 2), (0, 0, 0, 0)),
    ("FP32", (7, 9), (3, 3), (2, 1), (1, 1, 2, 0)),
    ("FP16", (6, 5), (3, 2), (1, 1), (2, 1, 1, 1)),
])
def test_small_float_avg_pool_is_the_float64_window_mean_rounded_once(dt, hw, kernel, stride, pad) -> None:
    rng = np.random.default_rng(hw[0] + kernel[0])
    np_dt = _NP[dt]
    x = rng.normal(0, 100, (2, *hw, 3)).astype(np_dt)
    x[0, :kernel[0], :kernel[1], 0] = -0.0  # a window of -0.0 next to the padding: +0.0
    x[1, 0, 0, 1], x[1, -1, -1, 2], x[0, 1, 1, 2] = np.inf, -np.inf, np.nan
    data = _pool_graph("AVG_POOL2D", x.shape, dt, kernel, stride, pad)
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[-1].fn.__name__ == "small_float_avg_pool"
    # independent reference: each output's in-range window values, summed in order in float64
    oh = (hw[0] + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
    ow = (hw[1] + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    expected = np.empty((2, oh, ow, 3), np_dt)
    for y, z in np.ndindex(oh, ow):
        ys = [i for i in range(y * stride[0] - pad[0], y * stride[0] - pad[0] + kernel[0]) if 0 <= i < hw[0]]
        xs = [j for j in range(z * stride[1] - pad[2], z * stride[1] - pad[2] + kernel[1]) if 0 <= j < hw[1]]
        total = np.zeros((2, 3))
        with np.errstate(invalid="ignore"):
            for i in ys:
                for j in xs:
                    total = total + x[:, i, j].astype(np.float64)
        expected[:, y, z] = (total / (len(ys) * len(xs))).astype(np_dt)
    for _ in range(2):
        ours = tosa_verify.run(graph, [x])[0]
        np.testing.assert_array_equal(ours.view(f"u{x.itemsize}"), expected.view(f"u{x.itemsize}"))
    if dt == "FP32":  # and the reference model's result within its compliance bound
        precise = reference.run(data, [x], bounds=True)
        verdict = compare(precise.outputs[0], ours, op="AVG_POOL2D", bounds=next(iter(precise.bounds.values()), None))
        assert verdict.status in ("exact", "within_compliance"), verdict
