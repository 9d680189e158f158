"""Prepared FP32/FP16 RECIPROCAL and EXP: the float64 result rounded once, bit for bit.

RECIPROCAL divides in the working type (IEEE division rounds once, as float64 then one rounding
does); EXP evaluates in float64 in place. Both must equal numpy's float64 formula rounded once to
the output type on edge values (zeros of both signs, subnormals, infinities, NaN, overflow).
"""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify

_TS = {np.float32: ts.DType.FP32, np.float16: ts.DType.FP16}


def _edge_values(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    rng = np.random.default_rng(5)
    spread = np.ldexp(1.0 + rng.random(400), rng.integers(info.minexp - info.nmant, info.maxexp, 400))
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, float(info.smallest_subnormal), float(info.max),
               float(info.tiny), 1.0, -1.0, 3.0, 88.7, 88.8, -103.0, 11.1]
    with np.errstate(over="ignore"):
        values = np.concatenate([spread, -spread, special]).astype(dtype)
    return values.reshape(1, -1)


def _graph(op: str, x: np.ndarray) -> bytes:
    graph = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    dtype = _TS[x.dtype.type]
    graph.addInputTensor(ts.TosaSerializerTensor("x", list(x.shape), dtype, data=None))
    out = graph.addIntermediate(list(x.shape), dtype)
    attr = ts.TosaSerializerAttribute()
    getattr(attr, f"{op.capitalize()}Attribute")()
    graph.addOperator(getattr(ts.Op, op), ["x"], [out.name], attr)
    graph.addOutputTensor(out)
    return bytes(graph.serialize())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", ["RECIPROCAL", "EXP"])
def test_prepared_fp_unary_is_the_float64_result_rounded_once(op: str, dtype) -> None:
    x = _edge_values(dtype)
    data = _graph(op, x)
    graph = tosa_verify.load(data)
    for _ in range(2):  # first run and a run of the planned graph
        (ours,) = tosa_verify.run(graph, [x])
        with np.errstate(all="ignore"):
            wide = x.astype(np.float64)
            expected = (1.0 / wide if op == "RECIPROCAL" else np.exp(wide)).astype(dtype)
        assert ours.dtype == dtype
        np.testing.assert_array_equal(ours.view(f"u{x.itemsize}"), expected.view(f"u{x.itemsize}"))
    if op == "RECIPROCAL" and dtype == np.float32:  # correctly rounded: the reference model's too
        got, status = reference_model.run(data, [x])
        assert status == reference_model.GraphStatus.TOSA_VALID
        finite = np.isfinite(x) & (np.abs(x) >= np.finfo(dtype).tiny) & (np.abs(x) <= 1e37)
        np.testing.assert_array_equal(got[0][finite], ours[finite])
