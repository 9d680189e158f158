"""The float64 RESCALE kernel (``ops._rescale_fast``) against the official reference model.

Each case is a RESCALE graph with constant scales (so the interpreter prepares it and the fast
kernel runs: a spy proves it did), on tensors larger than one block of the kernel, with channel
counts that do not divide the block, inputs at their type's extremes and on rounding ties; the
outputs must be bit-identical to ``tosa_reference_model``'s.
"""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.ops import _rescale_fast, type_conversion


@pytest.fixture(autouse=True)
def _float64_kernel_at_every_size(monkeypatch):
    """These tests are about the float64 kernel: it serves small tensors too here."""
    monkeypatch.setattr(type_conversion, "SMALL_RESCALE", 0)

_DTYPES = {"INT8": (ts.DType.INT8, np.int8), "INT16": (ts.DType.INT16, np.int16),
           "INT32": (ts.DType.INT32, np.int32)}


def _graph(x: np.ndarray, in_t: str, out_t: str, multiplier, shift, per_channel: bool,
           input_zp: int, output_zp: int) -> bytes:
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", list(x.shape), _DTYPES[in_t][0], data=None))
    consts = [g.addConst([len(multiplier)], ts.DType.INT32, list(multiplier), name="m"),
              g.addConst([len(shift)], ts.DType.INT8, list(shift), name="s"),
              g.addConst([1], _DTYPES[in_t][0], [input_zp], name="izp"),
              g.addConst([1], _DTYPES[out_t][0], [output_zp], name="ozp")]
    out = g.addIntermediate(list(x.shape), _DTYPES[out_t][0])
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, per_channel, False, False)
    g.addOperator(ts.Op.RESCALE, ["x", *(c.name for c in consts)], [out.name], attr)
    g.addOutputTensor(out)
    return bytes(g.serialize())


def _case(rng: np.random.Generator, in_t: str, out_t: str, per_channel: bool):
    channels = int(rng.choice([7, 96, 144])) if per_channel else 1
    nc = channels if per_channel else 1
    shift = rng.integers(32, 46, nc) if in_t == "INT32" else rng.integers(20, 32, nc)
    multiplier = rng.integers(1 << 29, 1 << 31, nc)
    multiplier[0] = 1 << 30  # a power of two: x * m / 2**s hits exact .5 ties
    lo, hi = np.iinfo(_DTYPES[in_t][1]).min, np.iinfo(_DTYPES[in_t][1]).max
    span = (-(1 << 20), 1 << 20) if in_t == "INT32" else (lo, hi)
    x = rng.integers(span[0], span[1], (3, 101, 240 // channels + 1, channels), endpoint=True)
    # the range's ends, and (INT32) x = +-2**(s-31): x * 2**30 / 2**s = +-0.5, a rounding tie
    tie = 1 << (int(shift[0]) - 31) if in_t == "INT32" else 1
    x.reshape(-1, channels)[:4, 0] = [span[0], span[1], tie, -tie]
    input_zp = int(rng.integers(-128, 128)) if in_t == "INT8" else 0
    output_zp = int(rng.integers(-128, 128)) if out_t == "INT8" else 0
    return x.astype(_DTYPES[in_t][1]), multiplier, shift, input_zp, output_zp


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize(("in_t", "out_t"), [("INT32", "INT8"), ("INT32", "INT16"), ("INT8", "INT32"),
                                             ("INT16", "INT8"), ("INT8", "INT8")])
def test_fast_rescale_is_bit_identical_to_the_reference_model(in_t, out_t, per_channel, monkeypatch):
    calls = []
    original = _rescale_fast._blocks
    monkeypatch.setattr(_rescale_fast, "_blocks", lambda *a: calls.append(1) or original(*a))
    rng = np.random.default_rng([ord(c) for c in in_t + out_t] + [per_channel])
    x, multiplier, shift, input_zp, output_zp = _case(rng, in_t, out_t, per_channel)
    tosa = _graph(x, in_t, out_t, multiplier.tolist(), shift.tolist(), per_channel, input_zp, output_zp)
    expected, status = reference_model.run(tosa, [x])
    assert status == reference_model.GraphStatus.TOSA_VALID
    [ours] = tosa_verify.run(tosa, [x])
    assert calls, "the float64 kernel did not run"
    assert ours.dtype == expected[0].dtype
    np.testing.assert_array_equal(ours, expected[0])


def test_int32_input_beyond_the_float64_bound_falls_back_to_int64(monkeypatch):
    # |x| * m near 2**61: not exact in float64, so the int64 kernel must take over
    calls = []
    original = _rescale_fast._blocks
    monkeypatch.setattr(_rescale_fast, "_blocks", lambda *a: calls.append(1) or original(*a))
    x = np.array([[2**31 - 1, -(2**31), 123456789, -987654321]], np.int32)
    tosa = _graph(x, "INT32", "INT8", [2**31 - 1], [40], False, 0, 3)
    expected, status = reference_model.run(tosa, [x])
    assert status == reference_model.GraphStatus.TOSA_VALID
    [ours] = tosa_verify.run(tosa, [x])
    assert not calls
    np.testing.assert_array_equal(ours, expected[0])


def test_large_shift_adds_the_zero_point_after_the_floor(monkeypatch):
    # shift 49 (a classifier's output scale): (output_zp + 128) * 2**49 is not exact in float64,
    # so the zero point is added after the floor; the product x * m stays below 2**53
    posts = []
    original = _rescale_fast._blocks
    monkeypatch.setattr(_rescale_fast, "_blocks", lambda *a: posts.append(a[3]) or original(*a))
    rng = np.random.default_rng(49)
    x = rng.integers(-(1 << 21), 1 << 21, (4, 1000)).astype(np.int32)
    x[0, :3] = [(1 << 18) * 3, -(1 << 18) * 3, 1 << 18]  # m = 2**30: x / 2**19, ties at odd 2**18
    tosa = _graph(x, "INT32", "INT8", [1 << 30], [49], False, 0, -5)
    expected, status = reference_model.run(tosa, [x])
    assert status == reference_model.GraphStatus.TOSA_VALID
    [ours] = tosa_verify.run(tosa, [x])
    assert posts == [123]  # output_zp - INT8's lo
    np.testing.assert_array_equal(ours, expected[0])
