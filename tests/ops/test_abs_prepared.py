"""Prepared ABS: the plan's kernel against the reference model, bit for bit, with int32's
REQUIRE (INT32_MIN) still failing where the reference model says the result is unpredictable,
and a type ERROR_IF still reported by the op function at run time."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaRequireError, TosaValidationError
from tosa_verify.ops.registry import REGISTRY
from tosa_verify.plan import plan_for

_TS = {np.float32: ts.DType.FP32, np.float16: ts.DType.FP16, np.int32: ts.DType.INT32, np.int8: ts.DType.INT8}
_STATUS = reference_model.GraphStatus


def _graph(dtype, shape) -> bytes:
    graph = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    graph.addInputTensor(ts.TosaSerializerTensor("x", list(shape), _TS[dtype], data=None))
    out = graph.addIntermediate(list(shape), _TS[dtype])
    attr = ts.TosaSerializerAttribute()
    attr.AbsAttribute()
    graph.addOperator(ts.Op.ABS, ["x"], [out.name], attr)
    graph.addOutputTensor(out)
    return bytes(graph.serialize())


def _values(dtype) -> np.ndarray:
    rng = np.random.default_rng(11)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.concatenate([rng.integers(info.min + 1, info.max, 200), [info.min + 1, -1, 0, 1, info.max]]
                              ).astype(dtype).reshape(1, -1)
    info = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, float(info.smallest_subnormal), -float(info.max)]
    return np.concatenate([rng.standard_normal(200) * 100, special]).astype(dtype).reshape(1, -1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_prepared_abs_matches_the_reference_model_bit_for_bit(dtype) -> None:
    x = _values(dtype)
    data = _graph(dtype, x.shape)
    graph = tosa_verify.load(data)
    (expected,), status = reference_model.run(data, [x])
    assert status == _STATUS.TOSA_VALID
    for _ in range(2):  # the first run builds the plan, the second runs the prepared kernel
        (ours,) = tosa_verify.run(graph, [x])
        assert ours.dtype == expected.dtype
        np.testing.assert_array_equal(ours.view(f"u{x.itemsize}"), expected.view(f"u{x.itemsize}"))
    assert plan_for(graph.main, graph).steps[0].fn is not REGISTRY["ABS"]  # the prepared kernel ran


def test_prepared_int32_abs_keeps_the_require_on_int32_min() -> None:
    x = np.array([[5, np.iinfo(np.int32).min, -3]], np.int32)
    data = _graph(np.int32, x.shape)
    _, status = reference_model.run(data, [x])
    assert status == _STATUS.TOSA_UNPREDICTABLE
    graph = tosa_verify.load(data)
    for _ in range(2):
        with pytest.raises(TosaRequireError, match=r"operator 0 ABS .*REQUIRE\(apply_sub_s\(0, value1\) fits int32"):
            tosa_verify.run(graph, [x])


def test_an_int8_abs_is_refused_with_the_op_functions_error(monkeypatch) -> None:
    # (the serializer refuses to write it: the graph is edited after loading)
    x = np.array([[1, -2]], np.int8)
    graph = tosa_verify.load(_graph(np.float32, x.shape))
    for decl in graph.main.tensors.values():
        decl.dtype = "INT8"
    with pytest.raises(TosaValidationError, match=r"operator 0 ABS .*unsupported type combination") as planned:
        tosa_verify.run(graph, [x])
    abs_function = REGISTRY["ABS"]
    monkeypatch.setitem(REGISTRY, "ABS", lambda call: abs_function(call))  # no prepare for a replaced function
    with pytest.raises(TosaValidationError) as unprepared:
        tosa_verify.run(graph, [x])
    assert str(planned.value) == str(unprepared.value)
