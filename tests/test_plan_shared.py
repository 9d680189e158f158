"""Prepared kernels shared within a plan: RESCALEs of one signature (attributes, types, shapes,
constant multiplier/shift/zero points) get one kernel; any difference gets its own. Results are
the reference model's, and a data REQUIRE failing in a shared kernel names its own operator."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaRequireError
from tosa_verify.plan import plan_for

_VALID = reference_model.GraphStatus.TOSA_VALID
_UNPREDICTABLE = reference_model.GraphStatus.TOSA_UNPREDICTABLE


def _rescales(specs: list[tuple[str, int, int, int]], shape=(2, 3)) -> bytes:
    """One RESCALE INT32 -> INT8 per (input name, multiplier, shift, output_zp), each an output."""
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    for name in dict.fromkeys(s[0] for s in specs):
        g.addInputTensor(ts.TosaSerializerTensor(name, list(shape), ts.DType.INT32, data=None))
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, False, False, False)
    for x, multiplier, shift, output_zp in specs:
        mul = g.addConst([1], ts.DType.INT32, [multiplier])
        sh = g.addConst([1], ts.DType.INT8, [shift])
        izp = g.addConst([1], ts.DType.INT32, [0])
        ozp = g.addConst([1], ts.DType.INT8, [output_zp])
        out = g.addIntermediate(list(shape), ts.DType.INT8)
        g.addOperator(ts.Op.RESCALE, [x, mul.name, sh.name, izp.name, ozp.name], [out.name], attr)
        g.addOutputTensor(out)
    return bytes(g.serialize())


def test_rescales_of_one_signature_share_a_kernel_and_match_the_reference_model() -> None:
    specs = [("x", 1 << 30, 36, 3), ("x", 1 << 30, 36, -5), ("x", 1 << 30, 36, 3), ("x", 1 << 30, 35, 3)]
    data = _rescales(specs)
    x = np.random.default_rng(0).integers(-(1 << 31), 1 << 31, size=(2, 3), dtype=np.int64).astype(np.int32)
    expected, status = reference_model.run(data, [x])
    assert status == _VALID
    graph = tosa_verify.load(data)
    for ours, ref in zip(tosa_verify.run(graph, [x]), expected, strict=True):
        np.testing.assert_array_equal(ours, ref)
    fns = [s.fn for s in plan_for(graph.main).steps]
    assert fns[0] is fns[2]  # the same signature: one kernel
    assert len({id(fns[0]), id(fns[1]), id(fns[3])}) == 3  # another zero point or shift: its own


def test_a_require_failing_in_a_shared_kernel_names_its_own_operator() -> None:
    # shift 10 bounds int32 values to |v| < 512: x2's 5000 breaks the REQUIRE, x1 does not
    data = _rescales([("x1", 1 << 30, 10, 0), ("x2", 1 << 30, 10, 0)])
    ok, bad = np.full((2, 3), 5, np.int32), np.full((2, 3), 5000, np.int32)
    assert reference_model.run(data, [ok, bad])[1] == _UNPREDICTABLE
    graph = tosa_verify.load(data)
    with pytest.raises(TosaRequireError) as raised:
        tosa_verify.run(graph, [ok, bad])
    steps = plan_for(graph.main).steps
    assert steps[0].fn is steps[1].fn
    assert raised.value.op_index == steps[1].index
