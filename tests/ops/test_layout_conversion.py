"""Focused checks of RESCALE, CAST, RESIZE and the layout ops against the official reference model.

Each test builds a tiny TOSA 1.0 graph with ``tosa_serializer`` and requires ``tosa_verify.run``
to return exactly what ``tosa_reference_model.run`` returns (same dtype, same bits). The inputs
sit on the edges the generated conformance cases rarely hit: RESCALE rounding boundaries,
per-channel scales, unsigned zero points, CAST ties and saturation, RESIZE with odd scales.
The one expected value computed here (a correctly rounded BF16) comes from exact integer
arithmetic, never from our own output.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaRequireError, TosaValidationError

_VALID = reference_model.GraphStatus.TOSA_VALID
_UNPREDICTABLE = reference_model.GraphStatus.TOSA_UNPREDICTABLE


class _Graph:
    """A one-block graph under construction: inputs, constants, one or more operators."""

    def __init__(self) -> None:
        self.graph = ts.TosaSerializer(
            "", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False
        )
        self.feeds: list[np.ndarray] = []
        self.count = 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def input(self, value: np.ndarray, dtype: ts.DType) -> str:
        name = self._name("input")
        self.graph.addInputTensor(
            ts.TosaSerializerTensor(name, list(value.shape), dtype, data=None)
        )
        self.feeds.append(value)
        return name

    def const(self, shape: list[int], dtype: ts.DType, values) -> str:
        return self.graph.addConst(shape, dtype, values, name=self._name("const")).name

    def op(self, op, inputs: list[str], out_shape, out_dtype, attr_kind: str, *attr_args) -> str:
        attr = ts.TosaSerializerAttribute()
        getattr(attr, attr_kind)(*attr_args)
        out = self.graph.addIntermediate(list(out_shape), out_dtype)
        self.graph.addOperator(op, inputs, [out.name], attr)
        self.last = out
        return out.name

    def run_both(self) -> tuple[np.ndarray, np.ndarray]:
        """Run the reference model and ours on the graph; both must succeed."""
        self.graph.addOutputTensor(self.last)
        buf = bytes(self.graph.serialize())
        expected, status = reference_model.run(buf, self.feeds)
        assert status == _VALID, f"reference model status {status}"
        ours = tosa_verify.run(buf, self.feeds)
        assert ours[0].dtype == expected[0].dtype and ours[0].shape == expected[0].shape
        return expected[0], ours[0]

    def assert_identical(self) -> np.ndarray:
        expected, ours = self.run_both()
        if expected.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(ours), np.isnan(expected))
            keep = ~np.isnan(expected)
            bits = np.dtype(f"u{expected.itemsize}")
            np.testing.assert_array_equal(ours.view(bits)[keep], expected.view(bits)[keep])
        elif expected.dtype.kind == "V":
            np.testing.assert_array_equal(ours.view(np.uint8), expected.view(np.uint8))
        else:
            np.testing.assert_array_equal(ours, expected)
        return expected


def _rescale(
    x: np.ndarray,
    in_dtype: ts.DType,
    out_dtype: ts.DType,
    multiplier: list[int],
    shift: list[int],
    *,
    scale32: bool = True,
    rounding: ts.RoundingMode = ts.RoundingMode.SINGLE_ROUND,
    per_channel: bool = False,
    input_zp: int = 0,
    output_zp: int = 0,
    input_unsigned: bool = False,
    output_unsigned: bool = False,
) -> _Graph:
    """A RESCALE graph; zero points are given as the signed bit pattern of their dtype."""
    g = _Graph()
    x_name = g.input(x, in_dtype)
    mul = g.const([len(multiplier)], ts.DType.INT32 if scale32 else ts.DType.INT16, multiplier)
    sh = g.const([len(shift)], ts.DType.INT8, shift)
    izp = g.const([1], in_dtype, [input_zp])
    ozp = g.const([1], out_dtype, [output_zp])
    attr = (scale32, rounding, per_channel, input_unsigned, output_unsigned)
    g.op(ts.Op.RESCALE, [x_name, mul, sh, izp, ozp], x.shape, out_dtype, "RescaleAttribute", *attr)
    return g


# --- RESCALE ---------------------------------------------------------------------------------


def test_rescale_double_round_differs_from_single_round_at_the_boundary() -> None:
    # multiplier 2**30, shift 33 scales by 1/8. For x = 8k + 3 the fraction is 0.375: single
    # rounding (add 2**32) rounds down, double rounding (add 2**32 + 2**30) reaches the next
    # integer. Negative x mirror this; x = 8k + 4 is the ordinary tie.
    x = np.array([3, -3, 11, -11, 4, -4, 5, -5, 2**31 - 1, -(2**31)], dtype=np.int32)
    results = {}
    for mode in (ts.RoundingMode.SINGLE_ROUND, ts.RoundingMode.DOUBLE_ROUND):
        g = _rescale(x, ts.DType.INT32, ts.DType.INT32, [1 << 30], [33], rounding=mode)
        results[mode] = g.assert_identical()
    # the inputs really sit where the two modes disagree
    assert not np.array_equal(
        results[ts.RoundingMode.SINGLE_ROUND], results[ts.RoundingMode.DOUBLE_ROUND]
    )


def test_rescale_per_channel_int8_with_zero_points_and_saturation() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, size=(2, 3, 4), dtype=np.int64).astype(np.int8)
    multiplier = [1 << 30, 1518500250, 2**31 - 1, 1 << 20]
    shift = [30, 31, 28, 21]  # the third channel scales by ~4 and saturates
    g = _rescale(
        x,
        ts.DType.INT8,
        ts.DType.INT8,
        multiplier,
        shift,
        per_channel=True,
        input_zp=-7,
        output_zp=12,
    )
    g.assert_identical()


def test_rescale_scale16_int16_with_rounding_ties() -> None:
    # multiplier 2**14 with shift 16 divides by 4: odd multiples of 2 are exact .5 ties.
    x = np.array([2, -2, 6, -6, 32767, -32768, 1, -1], dtype=np.int16)
    g = _rescale(x, ts.DType.INT16, ts.DType.INT8, [1 << 14], [16], scale32=False)
    g.assert_identical()


def test_rescale_input_unsigned_uint8_and_uint16_zero_point() -> None:
    # uint8 data with zero point 200 (stored as the int8 bit pattern -56), into signed int16
    x = np.array([0, 1, 127, 128, 200, 255], dtype=np.uint8)
    g = _rescale(
        x, ts.DType.INT8, ts.DType.INT16, [1 << 30], [30], input_zp=200 - 256, input_unsigned=True
    )
    g.assert_identical()
    # uint16 data with the 32768 zero point, into signed int8
    x16 = np.array([0, 100, 32767, 32768, 40000, 65535], dtype=np.uint16)
    g = _rescale(
        x16, ts.DType.INT16, ts.DType.INT8, [1 << 30], [38], input_zp=-32768, input_unsigned=True
    )
    g.assert_identical()


def test_rescale_output_unsigned_clamps_negative_results_to_zero() -> None:
    # The output is uint8 carried in int8 (as tosa_reference_model returns it). Negative scaled
    # values clamp to 0 and large ones to 255, after adding the zero point 128.
    x = np.array([-1000, -200, -129, -128, -1, 0, 1, 127, 300], dtype=np.int16)
    g = _rescale(
        x, ts.DType.INT16, ts.DType.INT8, [1 << 30], [30], output_zp=-128, output_unsigned=True
    )
    expected = g.assert_identical()
    assert expected.dtype == np.int8


def test_rescale_require_failure_matches_reference_unpredictable() -> None:
    # apply_scale_32 REQUIREs |value| < 2**(shift-1): 5000 with shift 10 breaks it.
    g = _rescale(np.array([5000], np.int32), ts.DType.INT32, ts.DType.INT32, [1 << 30], [10])
    g.graph.addOutputTensor(g.last)
    buf = bytes(g.graph.serialize())
    _, status = reference_model.run(buf, g.feeds)
    assert status == _UNPREDICTABLE
    with pytest.raises(TosaRequireError):
        tosa_verify.run(buf, g.feeds)


def test_rescale_error_if_double_round_needs_scale32() -> None:
    g = _rescale(
        np.array([1], np.int16),
        ts.DType.INT16,
        ts.DType.INT16,
        [1 << 14],
        [14],
        scale32=False,
        rounding=ts.RoundingMode.DOUBLE_ROUND,
    )
    g.graph.addOutputTensor(g.last)
    with pytest.raises(TosaValidationError, match="DOUBLE_ROUND"):
        tosa_verify.run(bytes(g.graph.serialize()), g.feeds)


# --- CAST ------------------------------------------------------------------------------------


def test_cast_fp32_to_int8_rounds_ties_to_even_and_saturates() -> None:
    x = np.array(
        [
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.5,
            -2.5,
            126.5,
            127.5,
            128.0,
            -128.5,
            -129.0,
            1e10,
            -1e10,
            np.inf,
            -np.inf,
            -0.0,
            0.49999997,
        ],
        dtype=np.float32,
    )
    g = _Graph()
    g.op(ts.Op.CAST, [g.input(x, ts.DType.FP32)], x.shape, ts.DType.INT8, "CastAttribute")
    g.assert_identical()


def test_cast_fp32_to_fp8e4m3_overflows_to_nan() -> None:
    # 448 is the largest e4m3 value; 464 is the tie with the (missing) 480 and rounds to even
    # 448; anything above overflows to NaN in the OCP non-saturating mode.
    x = np.array(
        [448.0, 460.0, 464.0, 465.0, 1e6, -1e6, np.inf, 0.001953125, 0.0009765625], np.float32
    )
    g = _Graph()
    g.op(ts.Op.CAST, [g.input(x, ts.DType.FP32)], x.shape, ts.DType.FP8E4M3, "CastAttribute")
    g.assert_identical()


def _nearest_bf16(value: int) -> float:
    """Round an integer to the nearest bfloat16 (8 significant bits), ties to even, exactly."""
    ulp = Fraction(2) ** (abs(value).bit_length() - 8)
    scaled = Fraction(value) / ulp
    down = scaled.numerator // scaled.denominator
    pick = (
        down + 1
        if scaled - down > Fraction(1, 2) or (scaled - down == Fraction(1, 2) and down % 2)
        else down
    )
    return float(pick * ulp)


def test_cast_int32_to_bf16_rounds_once() -> None:
    # -112984063 is just below the midpoint of two bf16 values; going through float32 first
    # lands exactly on the midpoint and double rounding then picks the far one.
    x = np.array([-112984063, 112984063, 16777217, 2**31 - 1, -(2**31), 255, 257], dtype=np.int32)
    g = _Graph()
    g.op(ts.Op.CAST, [g.input(x, ts.DType.INT32)], x.shape, ts.DType.BF16, "CastAttribute")
    g.graph.addOutputTensor(g.last)
    ours = tosa_verify.run(bytes(g.graph.serialize()), g.feeds)[0].view(ml_dtypes.bfloat16)
    assert ours.astype(np.float64).tolist() == [_nearest_bf16(int(v)) for v in x]


# --- RESIZE and layout -----------------------------------------------------------------------


def _resize(x: np.ndarray, dtype, out_dtype, mode, scale, offset, border) -> _Graph:
    n, ih, iw, c = x.shape
    span_y = (ih - 1) * scale[0] - offset[0] + border[0]
    span_x = (iw - 1) * scale[2] - offset[1] + border[1]
    assert span_y % scale[1] == 0 and span_x % scale[3] == 0, (
        "test parameters must give integer sizes"
    )
    oh, ow = span_y // scale[1] + 1, span_x // scale[3] + 1
    g = _Graph()
    ins = [
        g.input(x, dtype),
        g.const([4], ts.DType.SHAPE, scale),
        g.const([2], ts.DType.SHAPE, offset),
        g.const([2], ts.DType.SHAPE, border),
    ]
    g.op(ts.Op.RESIZE, ins, [n, oh, ow, c], out_dtype, "ResizeAttribute", mode)
    return g


@pytest.mark.parametrize(
    ("scale", "offset", "border"),
    [
        ([3, 1, 2, 1], [0, 0], [0, 0]),
        ([4, 2, 6, 2], [-1, -2], [1, 0]),
        ([5, 3, 7, 4], [2, -3], [1, 4]),
    ],
)
def test_resize_bilinear_int8_to_int32(scale, offset, border) -> None:
    x = np.random.default_rng(3).integers(-128, 128, size=(2, 3, 4, 2)).astype(np.int8)
    _resize(
        x, ts.DType.INT8, ts.DType.INT32, ts.ResizeMode.BILINEAR, scale, offset, border
    ).assert_identical()


def test_resize_nearest_int16_half_way_positions() -> None:
    # scale 2/1 with offset -1 puts samples exactly half way: NEAREST must take the upper one.
    x = np.random.default_rng(4).integers(-32768, 32768, size=(1, 3, 3, 1)).astype(np.int16)
    _resize(
        x, ts.DType.INT16, ts.DType.INT16, ts.ResizeMode.NEAREST, [2, 1, 4, 1], [-1, -1], [1, 1]
    ).assert_identical()


def test_pad_and_transpose_bf16_keep_bits() -> None:
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(ml_dtypes.bfloat16).view("V2")
    g = _Graph()
    padded = g.op(
        ts.Op.PAD,
        [
            g.input(x, ts.DType.BF16),
            g.const([4], ts.DType.SHAPE, [1, 0, 0, 2]),
            g.const([1], ts.DType.BF16, [-1.5]),
        ],
        [3, 5],
        ts.DType.BF16,
        "PadAttribute",
    )
    g.op(ts.Op.TRANSPOSE, [padded], [5, 3], ts.DType.BF16, "TransposeAttribute", [1, 0])
    g.assert_identical()


@pytest.mark.parametrize("output_zp", [0, -17])
def test_rescale_per_channel_int32_float64_and_int64_paths(output_zp) -> None:
    """RESCALE of INT32 accumulators, per channel: channel 0 large values with a large shift
    (|v| * m near 2**61: the int64 path), channel 1 small values with a small shift (whose
    range check fails for the tensor's extremes, so the channels' own extremes decide), and a
    tensor of small values only (the float64 path, ties at .5 included)."""
    rng = np.random.default_rng(3)
    big = rng.integers(-(2**30), 2**30, size=(4, 6)).astype(np.int32)
    small = rng.integers(-(2**18), 2**18, size=(4, 6)).astype(np.int32)
    x = np.stack([big, small], axis=-1)
    g = _rescale(x, ts.DType.INT32, ts.DType.INT8, [2**31 - 1, 1 << 30], [60, 20],
                 per_channel=True, output_zp=output_zp)
    g.assert_identical()
    ties = np.array([[2, -2, 6, -6, 2**20 + 2, -(2**20) - 2], [1, -1, 3, -3, 5, -5]], dtype=np.int32)
    g = _rescale(ties[..., None].repeat(3, -1), ts.DType.INT32, ts.DType.INT8, [1 << 30, 1 << 30, 3 << 29],
                 [32, 31, 33], per_channel=True, output_zp=output_zp)
    g.assert_identical()
