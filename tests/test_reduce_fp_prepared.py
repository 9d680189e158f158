"""The prepared float REDUCE_SUM/MAX/MIN kernels (what a plan runs): MAX/MIN bit-exact with the
reference model (NaN modes, signed zeros, infinities), SUM the float64 sum rounded once (numpy
formula) and, for FP32, close to the reference model's."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.ops.registry import REGISTRY
from tosa_verify.plan import plan_for

_TS = {np.float32: ts.DType.FP32, np.float16: ts.DType.FP16}


def _graph(op, dtype, shape, axis: int, nan_mode: str) -> bytes:
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", list(shape), _TS[dtype], data=None))
    out_shape = list(shape)
    out_shape[axis] = 1
    attr = ts.TosaSerializerAttribute()
    if op == ts.Op.REDUCE_SUM:
        attr.ReduceSumAttribute(axis)
    else:
        mode = ts.NanPropagationMode.PROPAGATE if nan_mode == "PROPAGATE" else ts.NanPropagationMode.IGNORE
        (attr.ReduceMaxAttribute if op == ts.Op.REDUCE_MAX else attr.ReduceMinAttribute)(axis, mode)
    out = g.addIntermediate(out_shape, _TS[dtype])
    g.addOperator(op, ["x"], [out.name], attr)
    g.addOutputTensor(out)
    return bytes(g.serialize())


def _data(rng, dtype, shape, specials: bool) -> np.ndarray:
    x = rng.standard_normal(shape).astype(dtype)
    if specials:
        pick = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], size=shape)
        mask = rng.random(shape) < 0.4
        x[mask] = pick[mask].astype(dtype)
        x[0] = np.nan  # one slice all NaN: IGNORE gives NaN there only
        x[1] = np.where(rng.random(shape[1:]) < 0.5, 0.0, -0.0).astype(dtype)  # only zeros: sign by fold order
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", [ts.Op.REDUCE_MAX, ts.Op.REDUCE_MIN])
@pytest.mark.parametrize("nan_mode", ["PROPAGATE", "IGNORE"])
def test_prepared_reduce_extreme_is_bit_exact(dtype, op, nan_mode) -> None:
    rng = np.random.default_rng(1)
    for axis in (0, 1, 2):
        shape = (3, 4, 5)
        data = _graph(op, dtype, shape, axis, nan_mode)
        graph = tosa_verify.load(data)
        for _ in range(3):
            x = _data(rng, dtype, shape, specials=True)
            expected, status = reference_model.run(data, [x])
            assert status == reference_model.GraphStatus.TOSA_VALID
            ours = tosa_verify.run(graph, [x])[0]
            np.testing.assert_array_equal(ours.view(np.uint16 if dtype == np.float16 else np.uint32),
                                          expected[0].view(np.uint16 if dtype == np.float16 else np.uint32))
        step = plan_for(graph.main).steps[0]
        assert step.fn is not REGISTRY[step.operator.op]  # the prepared kernel ran


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_prepared_reduce_sum_is_the_float64_sum_rounded_once(dtype) -> None:
    rng = np.random.default_rng(2)
    for axis, shape in ((0, (7, 3)), (1, (2, 300, 4)), (2, (2, 3, 9000))):
        data = _graph(ts.Op.REDUCE_SUM, dtype, shape, axis, "")
        graph = tosa_verify.load(data)
        x = _data(rng, dtype, shape, specials=False)
        x.flat[:3] = (-0.0, -0.0, -0.0)
        ours = tosa_verify.run(graph, [x])[0]
        formula = (np.sum(x.astype(np.float64), axis=axis, keepdims=True) + 0.0).astype(dtype)
        np.testing.assert_array_equal(ours, formula)
        assert not np.signbit(ours[ours == 0]).any()  # the accumulator starts at +0
        if dtype == np.float32:  # (the reference model accumulates FP16 in FP16: no peer there)
            expected, status = reference_model.run(data, [x])
            assert status == reference_model.GraphStatus.TOSA_VALID
            np.testing.assert_allclose(ours, expected[0], rtol=1e-5, atol=1e-3)
        step = plan_for(graph.main).steps[0]
        assert step.fn is not REGISTRY[step.operator.op]
