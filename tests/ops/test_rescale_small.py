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


def _passes(x: int, m: list[int], s: list[int], izp: int, ozp: int, scale32: bool) -> bool:
    """Whether input value ``x`` passes RESCALE's data REQUIREs in every channel, from the spec's
    apply_scale_32/16 formula in Python integers (no code of ours)."""
    v = x - izp
    for mc, sc in zip(m, s, strict=True):
        if scale32 and not -(1 << (sc - 1)) <= v < 1 << (sc - 1):
            return False
        r = (v * mc + (1 << (sc - 1))) >> sc
        if not (-(1 << 31) <= r < 1 << 31 and -(1 << 31) <= r + ozp < 1 << 31):
            return False
    return True


def _valid_inputs(in_t: str, m: list[int], s: list[int], izp: int, ozp: int, scale32: bool) -> np.ndarray:
    """Every input value of ``in_t`` (INT8 or INT16) that passes (see :func:`_passes`)."""
    lo, hi = (-128, 127) if in_t == "INT8" else (-32768, 32767)
    return np.array([x for x in range(lo, hi + 1) if _passes(x, m, s, izp, ozp, scale32)], dtype=np.int64)


@pytest.mark.parametrize("seed", range(12))
def test_the_check_free_window_is_exactly_the_inputs_that_pass_every_require(seed) -> None:
    """A prepared RESCALE skips the data REQUIREs for inputs in its window: the window must be
    every input value that passes them in every channel (they form an interval), no more."""
    from tosa_verify.ops.type_conversion import _safe_inputs

    rng = np.random.default_rng(seed)
    in_t = ("INT8", "INT16")[seed % 2]
    scale32 = seed % 3 != 0
    nc = int(rng.choice([1, 3, 16]))
    m = rng.integers(0, (1 << 31) if scale32 else (1 << 15), size=nc)
    m[rng.integers(nc)] = int(m.max()) if seed % 4 == 0 else m[0]  # repeated multipliers too
    # shifts around where the REQUIREs start to bind for these input ranges, and far beyond (up
    # to 50: larger ones leave too little int64 headroom, and the general kernel runs instead)
    s = rng.integers(2, 12 if seed % 2 else 20, size=nc) if seed % 5 else rng.integers(2, 51, size=nc)
    izp = int(rng.integers(-128, 128)) if in_t == "INT8" else 0
    ozp = int(rng.integers(-128, 128))
    params = (in_t, "INT8", scale32, "SINGLE_ROUND", False, False, izp, ozp,
              m.astype(np.int64) if nc > 1 else np.int64(m[0]), s.astype(np.int64) if nc > 1 else np.int64(s[0]),
              None)
    valid = _valid_inputs(in_t, m.tolist(), s.tolist(), izp, ozp, scale32)
    window = _safe_inputs(params)
    if valid.size == 0:
        assert window is None
        return
    assert np.array_equal(valid, np.arange(valid[0], valid[-1] + 1))  # an interval
    assert window is not None and window[:2] == (int(valid[0]), int(valid[-1]))


@pytest.mark.parametrize("seed", range(8))
def test_the_check_free_window_of_wide_inputs_ends_where_a_require_starts_to_fail(seed) -> None:
    """INT32/INT48 input with a 16-bit multiplier: the int32 result REQUIRE binds, per channel
    through the multiplier and shift. The window's ends pass every REQUIRE and the values just
    outside fail one (the passing values form an interval: the scaling is monotonic)."""
    from tosa_verify.ops.type_conversion import _safe_inputs

    rng = np.random.default_rng(100 + seed)
    in_t = ("INT32", "INT48")[seed % 2]
    nc = int(rng.choice([2, 5, 16]))
    m = rng.integers(1, 1 << 15, size=nc)
    s = rng.integers(2, 9, size=nc)  # few distinct shifts: several channels share one
    ozp = int(rng.integers(-128, 128))
    params = (in_t, "INT8", False, "SINGLE_ROUND", False, False, 0, ozp, m.astype(np.int64),
              s.astype(np.int64), None)
    window = _safe_inputs(params)
    assert window is not None
    lo, hi = window[:2]
    type_lo, type_hi = (-(1 << 31), (1 << 31) - 1) if in_t == "INT32" else (-(1 << 47), (1 << 47) - 1)
    args = (m.tolist(), s.tolist(), 0, ozp, False)
    assert _passes(lo, *args) and _passes(hi, *args)
    assert lo == type_lo or not _passes(lo - 1, *args)
    assert hi == type_hi or not _passes(hi + 1, *args)
    assert (lo, hi) != (type_lo, type_hi)  # (the REQUIRE binds: the case this test is about)


@pytest.mark.parametrize("seed", range(6))
def test_the_int8_lookup_table_is_the_spec_formula_for_every_input(seed) -> None:
    """The prepared INT8 per-tensor RESCALE's table (built in a few numpy calls, its clips left
    out where the extremes prove them idle) against apply_scale_32 in Python integers, over all
    256 inputs, for random parameters that saturate, reach the edges, or stay inside."""
    from tosa_verify.graph import Operator, Tensor
    from tosa_verify.ops.registry import OpCall
    from tosa_verify.ops.type_conversion import prepare_rescale

    rng = np.random.default_rng(200 + seed)
    x = np.arange(-128, 128, dtype=np.int8)
    for _ in range(40):
        out_t = str(rng.choice(["INT8", "INT16", "INT32"]))
        unsigned = out_t != "INT32" and bool(rng.random() < 0.25)  # (ERROR_IF for INT32 outputs)
        m, s = int(rng.integers(0, 1 << 31)), int(rng.integers(2, 40))
        izp = int(rng.integers(0, 256)) if unsigned else int(rng.integers(-128, 128))
        ozp = int(rng.integers(-128, 128)) if out_t == "INT8" else 0
        working = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}[out_t]
        decls = [Tensor("x", (256,), "INT8"), Tensor("m", (1,), "INT32"), Tensor("s", (1,), "INT8"),
                 Tensor("izp", (1,), "INT8"), Tensor("ozp", (1,), out_t)]
        attrs = {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                 "input_unsigned": unsigned, "output_unsigned": False}
        operator = Operator("RESCALE", attrs, [d.name for d in decls], ["y"])
        values = [None, np.array([m], np.int32), np.array([s], np.int8),
                  np.array([izp], np.uint8).view(np.int8) if unsigned else np.array([izp], np.int8),
                  np.array([ozp], working)]
        call = OpCall(0, operator, values, decls, [Tensor("y", (256,), out_t)])
        kernel = prepare_rescale(call)
        lo, hi = int(np.iinfo(working).min), int(np.iinfo(working).max)
        expected = []
        for v in x.tolist():
            v = (v & 0xFF) if unsigned else v
            scaled = (((v - izp) * m + (1 << (s - 1))) >> s) + ozp
            if not (-(1 << 31) <= scaled <= (1 << 31) - 1) or not (-(1 << (s - 1)) <= v - izp < 1 << (s - 1)):
                expected = None  # a REQUIRE can fail: not a lookup table (other tests cover it)
                break
            expected.append(min(max(scaled, lo), hi))
        if expected is None or kernel.__name__ != "lookup_kernel":
            continue
        [ours] = kernel(OpCall(0, operator, [x, *values[1:]], decls, [Tensor("y", (256,), out_t)]))
        assert ours.dtype == working
        assert ours.tolist() == expected


@pytest.mark.parametrize("shifts", [[9] * 8, [9, 10] * 4, [8, 9, 10, 11, 8, 9, 10, 11]])
def test_per_channel_wide_input_kernel_matches_the_reference_model(shifts) -> None:
    """INT32 input, 16-bit per-channel multipliers: the prepared window kernel's rounding term per
    channel (one shift for every channel, or several) gives the reference model's results."""
    rng = np.random.default_rng(len(set(shifts)))
    multiplier = rng.integers(1 << 13, 1 << 15, size=8).tolist()
    data = _graph((2, 3, 8), "INT32", "INT8", multiplier, shifts, output_zp=-3, scale32=False)
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[0].fn.__name__ == "checked_kernel"
    for scale in (1 << 8, 1 << 12):  # inside the check-free window, and saturating
        x = rng.integers(-scale, scale, size=(2, 3, 8)).astype(np.int32)
        expected, status = reference_model.run(data, [x])
        assert status == reference_model.GraphStatus.TOSA_VALID
        np.testing.assert_array_equal(tosa_verify.run(graph, [x])[0], expected[0])
