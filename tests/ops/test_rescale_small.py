"""Prepared RESCALEs of small tensors (a lookup table for INT8 input, else the int64 kernel)
against the official reference model, bit for bit, over every INT8 input value."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.plan import plan_for

_DTYPES = {"INT8": ts.DType.INT8, "INT16": ts.DType.INT16, "INT32": ts.DType.INT32}


def _graph(shape, in_t, out_t, multiplier, shift, *, input_zp=0, output_zp=0, input_unsigned=False,
           scale32=True) -> bytes:
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", list(shape), _DTYPES[in_t], data=None))
    per_channel = len(multiplier) > 1
    consts = [g.addConst([len(multiplier)], ts.DType.INT32 if scale32 else ts.DType.INT16, list(multiplier),
                         name="m"),
              g.addConst([len(shift)], ts.DType.INT8, list(shift), name="s"),
              g.addConst([1], _DTYPES[in_t], [input_zp], name="izp"),
              g.addConst([1], _DTYPES[out_t], [output_zp], name="ozp")]
    out = g.addIntermediate(list(shape), _DTYPES[out_t])
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(scale32, ts.RoundingMode.SINGLE_ROUND, per_channel, input_unsigned, False)
    g.addOperator(ts.Op.RESCALE, ["x", *(c.name for c in consts)], [out.name], attr)
    g.addOutputTensor(out)
    return bytes(g.serialize())


@pytest.mark.parametrize(("out_t", "multiplier", "shift", "input_zp", "output_zp", "unsigned", "kernel"), [
    ("INT8", [1 << 30], [31], -5, 7, False, "lookup_kernel"),   # halving: ties at every odd value
    ("INT8", [1_518_500_250], [30], 3, -128, False, "lookup_kernel"),  # saturates at both ends
    ("INT32", [1 << 30], [20], 0, 0, False, "lookup_kernel"),
    ("INT16", [1_234_567_890], [24], 128, 0, True, "lookup_kernel"),  # unsigned input, zp 128
    ("INT8", [1 << 30, 3 << 28, 0, 12345], [31, 33, 10, 20], 1, 2, False, "kernel"),  # per channel
    ("INT8", [1 << 14], [15], 0, 0, False, "kernel"),  # apply_scale_16: not proven, int64 window
])
def test_small_int8_rescale_is_bit_identical_to_the_reference_model(
        out_t, multiplier, shift, input_zp, output_zp, unsigned, kernel) -> None:
    x = np.arange(-128, 128, dtype=np.int8).reshape(64, 4)
    data = _graph(x.shape, "INT8", out_t, multiplier, shift, input_zp=input_zp, output_zp=output_zp,
                  input_unsigned=unsigned, scale32=multiplier != [1 << 14])
    expected, status = reference_model.run(data, [x])
    assert status == reference_model.GraphStatus.TOSA_VALID
    graph = tosa_verify.load(data)
    if kernel != "kernel":
        assert plan_for(graph.main).steps[0].fn.__name__ == kernel
    [ours] = tosa_verify.run(graph, [x])
    assert ours.dtype == expected[0].dtype
    np.testing.assert_array_equal(ours, expected[0])


def test_small_int32_rescale_window_edges_match_the_reference_model() -> None:
    # per channel INT32 -> INT8 on a small tensor: the int64 kernel behind a data window, with the
    # REQUIRE failure of an out-of-window value still reported
    multiplier, shift = [1 << 30, 1 << 29], [20, 21]
    data = _graph((2, 2), "INT32", "INT8", multiplier, shift, output_zp=-3)
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[0].fn.__name__ == "checked_kernel"
    for row in ([-(1 << 19), (1 << 19) - 1], [(1 << 19), 5], [12345, -(1 << 19) - 1]):
        x = np.array([row, row[::-1]], np.int32)
        expected, status = reference_model.run(data, [x])
        if status == reference_model.GraphStatus.TOSA_UNPREDICTABLE:
            with pytest.raises(tosa_verify.errors.TosaRequireError):
                tosa_verify.run(graph, [x])
            continue
        assert status == reference_model.GraphStatus.TOSA_VALID
        np.testing.assert_array_equal(tosa_verify.run(graph, [x])[0], expected[0])
