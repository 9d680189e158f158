"""Prepare-time helpers of the plan (RESCALE shift halves, convolution weight bounds, type
ranges), each against an independent formula (Python integers, numpy.iinfo), and a per-channel
scale32 RESCALE's checked path (the one reading those halves) against the reference model."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tests.test_plan import _rescale_graph
from tosa_verify.errors import TosaRequireError
from tosa_verify.numerics import int_range, reciprocal_scale
from tosa_verify.ops._rescale_proof import _by_shift, _scaled_range
from tosa_verify.ops._tensor_common import _l1_max, _one_pass_finish
from tosa_verify.ops.pooling import _window_counts
from tosa_verify.ops.type_conversion import _HALVES


def test_reciprocal_scale_follows_the_spec_with_k_the_smallest_power_of_two_reached() -> None:
    for value in [*range(1, 300), 4095, 4096, 4097, 1 << 20, (1 << 31) - 1, 1 << 31]:
        # spec: k = 32 - count_leading_zeros(value - 1), the least k with 2**k >= value
        k = next(k for k in range(33) if 1 << k >= value)
        assert reciprocal_scale(value) == ((((1 << 30) + 1) << k) // value, 30 + k), value


@pytest.mark.parametrize("in_size, out_size, kernel, stride, pad", [
    (4, 3, 3, 2, 1), (5, 5, 3, 1, 1), (8, 4, 2, 2, 0), (7, 3, 3, 3, 2), (1, 1, 1, 1, 0), (3, 0, 2, 1, 0)])
def test_window_counts_are_each_windows_in_range_positions(in_size, out_size, kernel, stride, pad) -> None:
    expected = [sum(0 <= o * stride - pad + t < in_size for t in range(kernel)) for o in range(out_size)]
    assert _window_counts(in_size, out_size, kernel, stride, pad) == expected


def test_shift_halves_are_one_shifted_by_shift_minus_one() -> None:
    assert [int(_HALVES[s]) for s in range(2, 63)] == [1 << (s - 1) for s in range(2, 63)]
    assert _HALVES.dtype == np.int64 and not _HALVES.flags.writeable


@pytest.mark.parametrize("dtype", ["INT8", "INT16", "INT32"])
def test_int_range_is_the_signed_integer_range(dtype: str) -> None:
    info = np.iinfo({"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}[dtype])
    assert int_range(dtype) == (int(info.min), int(info.max))


@pytest.mark.parametrize("seed", range(3))
def test_l1_max_is_the_largest_output_channel_sum_of_magnitudes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = rng.integers(-255, 256, size=(int(rng.integers(1, 9)), 3, 3, int(rng.integers(1, 9))))
    expected = max(sum(abs(int(v)) for v in w[oc].reshape(-1)) for oc in range(w.shape[0]))
    assert _l1_max(w, 0) == expected
    expected_axis3 = max(sum(abs(int(v)) for v in w[..., c].reshape(-1)) for c in range(w.shape[3]))
    assert _l1_max(w, 3) == expected_axis3


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_l1_max_of_a_narrow_weight_widens_before_taking_magnitudes(dtype) -> None:
    # a prepared CONV2D without weight zero point passes the int8/int16 weight as it is: |-128|
    # (|-32768|) must not wrap to itself in the weight's own type
    info = np.iinfo(dtype)
    w = np.array([[info.min, info.min, 1], [info.max, -1, 0]], dtype)
    expected = max(sum(abs(int(v)) for v in row) for row in w.tolist())
    assert _l1_max(w, 0) == expected == 2 * -int(info.min) + 1


def _random_channels(seed: int, max_channels: int, shifts: tuple[int, int]):
    """200 random (multipliers, shifts) of 1..max_channels channels, shifts in [shifts[0], a
    random top below shifts[1]), with their _by_shift groups."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(1, max_channels))
        ms = rng.integers(0, 1 << 31, n).tolist()
        ss = rng.integers(shifts[0], int(rng.integers(shifts[0] + 1, shifts[1])), n).tolist()
        yield rng, ms, ss, _by_shift(ms, ss, min(ms), max(ms), min(ss), max(ss))


@pytest.mark.parametrize("seed", range(4))
def test_by_shift_is_each_shifts_smallest_and_largest_multiplier(seed: int) -> None:
    for _, ms, ss, groups in _random_channels(seed, 40, (2, 6)):
        pairs = list(zip(ms, ss, strict=True))
        assert groups == [(s, min(m for m, t in pairs if t == s), max(m for m, t in pairs if t == s))
                          for s in sorted(set(ss))]


@pytest.mark.parametrize("seed", range(4))
def test_scaled_range_is_the_extremes_over_every_channel(seed: int) -> None:
    for rng, ms, ss, groups in _random_channels(seed, 12, (2, 40)):
        for v in (int(rng.integers(-(1 << 40), 1 << 40)), -1, 0, 1):
            # the spec's scaling of v by every channel, in Python's integers
            scaled = [(v * m + (1 << (s - 1))) >> s for m, s in zip(ms, ss, strict=True)]
            assert _scaled_range(v, groups) == (min(scaled), max(scaled))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.dtype(np.float32), np.dtype(np.float64)])
def test_one_pass_finish_takes_the_float_types_exact_integer_limit(dt) -> None:
    limit = 1 << (24 if np.dtype(dt) == np.float32 else 53)
    bias = np.array([-7, 3], np.int64)
    int48_max = (1 << 47) - 1
    for bound in (limit - 8, limit - 7, int48_max - 7, int48_max - 6):
        # the bound plus max|bias| must stay below the limit and within INT48's range
        total = bound + 7
        assert _one_pass_finish(bias, "INT48", bound, dt) == (total < limit and total <= int48_max)


def test_per_channel_scale32_rescale_checks_requires_by_channel() -> None:
    # channel shifts 10 and 12 bound INT32 inputs to |v| < 512 and < 2048: the checked path's
    # per-channel halves decide which inputs are unpredictable, as in the reference model
    args = dict(scale32=True, rounding=ts.RoundingMode.SINGLE_ROUND, per_channel=True)
    ok = np.array([[511, -2048], [-512, 2047]], np.int32)
    data = _rescale_graph(ok, "INT32", "INT32", [1 << 30, 1 << 29], [10, 12], **args)
    graph = tosa_verify.load(data)
    expected, status = reference_model.run(data, [ok])
    assert status == reference_model.GraphStatus.TOSA_VALID
    np.testing.assert_array_equal(tosa_verify.run(graph, [ok])[0], expected[0])
    for bad in (np.array([[512, 0], [0, 0]], np.int32), np.array([[0, 2048], [0, 0]], np.int32)):
        assert reference_model.run(data, [bad])[1] == reference_model.GraphStatus.TOSA_UNPREDICTABLE
        with pytest.raises(TosaRequireError):
            tosa_verify.run(graph, [bad])
