"""The common RESCALE's shortcut (``_rescale_common.common_rescale`` and the per-tensor proofs in
Python's ints) against the general prepare it stands in for: the same decisions, the same
parameters, the same outputs and REQUIRE failures, and every unusual or failing RESCALE left to
the general prepare (which reports its errors in the spec's order)."""

from __future__ import annotations

import numpy as np
import pytest

from tosa_verify.errors import TosaError, TosaRequireError
from tosa_verify.graph import Operator, Tensor
from tosa_verify.ops import type_conversion
from tosa_verify.ops._rescale_common import common_rescale
from tosa_verify.ops._rescale_proof import (
    _make_channels,
    _proven_in_range,
    _safe_inputs,
    as_int64,
    proven_per_tensor,
    window_per_tensor,
)
from tosa_verify.ops.registry import OpCall

_WORKING = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}
_RANGES = {t: (int(np.iinfo(w).min), int(np.iinfo(w).max)) for t, w in _WORKING.items()}


def _call(in_t="INT8", out_t="INT32", m=1 << 30, s=30, izp=0, ozp=0, shape=(2, 8), **changes) -> OpCall:
    """A RESCALE call as a plan's prepare sees it; ``changes`` replace attributes (``attr_*``),
    declarations (``decl_<i>``, ``out_decl``) or constant values (``value_<i>``)."""
    decls = [Tensor("x", shape, in_t), Tensor("m", (1,), "INT32"), Tensor("s", (1,), "INT8"),
             Tensor("izp", (1,), in_t), Tensor("ozp", (1,), out_t)]
    values = [None, np.array([m], np.int32), np.array([s], np.int8), np.array([izp], _WORKING[in_t]),
              np.array([ozp], _WORKING[out_t])]
    attrs = {"input_unsigned": False, "output_unsigned": False, "per_channel": False,
             "rounding_mode": "SINGLE_ROUND", "scale32": True}
    out = Tensor("y", shape, out_t)
    for key, value in changes.items():
        kind, _, index = key.rpartition("_")
        if key.startswith("attr_"):
            attrs[key[5:]] = value
        elif kind == "decl":
            decls[int(index)] = value
        elif kind == "value":
            values[int(index)] = value
        else:
            out = value
    return OpCall(3, Operator("RESCALE", attrs, [d.name for d in decls], ["y"]), values, decls, [out])


def _general(call: OpCall):
    """What the general prepare makes of ``call``: its kernel, or the error it raises."""
    params, ms, ss, extremes = type_conversion._setup(call)
    return type_conversion._rescale_kernel(params, ms, ss, False, extremes)


def _random_params(rng: np.random.Generator) -> dict:
    in_t, out_t = (str(t) for t in rng.choice(["INT8", "INT16", "INT32"], 2))
    return {"in_t": in_t, "out_t": out_t, "m": int(rng.integers(0, 1 << 31)) if rng.random() < 0.9 else 0,
            "s": int(rng.integers(2, 63)), "izp": int(rng.integers(-128, 128)) if in_t == "INT8" else 0,
            "ozp": int(rng.integers(-128, 128)) if out_t == "INT8" else 0}


@pytest.mark.parametrize("seed", range(4))
def test_per_tensor_proofs_decide_as_the_channel_proofs(seed) -> None:
    """proven_per_tensor and window_per_tensor give what _proven_in_range and _safe_inputs give
    for the same one-channel RESCALE, None included, over random multipliers, shifts and zero
    points (every shift 2..62, so the int64 headroom and the scale32 range both bind)."""
    rng = np.random.default_rng(70 + seed)
    decided = set()
    for _ in range(300):
        p = _random_params(rng)
        half = 1 << (p["s"] - 1)
        params = (p["in_t"], p["out_t"], True, "SINGLE_ROUND", False, False, p["izp"], p["ozp"], p["m"], p["s"],
                  (-half, half))
        lists = _make_channels([p["m"]], [p["s"]])
        lo, hi = _RANGES[p["in_t"]]
        ours = proven_per_tensor(p["out_t"], p["izp"], p["ozp"], p["m"], p["s"], lo, hi)
        theirs = _proven_in_range(params, lists=lists)
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert as_int64(ours) == theirs and [type(v) for v in as_int64(ours)] == [type(v) for v in theirs]
        window, expected = window_per_tensor(p["in_t"], p["out_t"], p["izp"], p["ozp"], p["m"], p["s"]), \
            _safe_inputs(params, lists)
        assert (window is None) == (expected is None)
        if window is not None:
            assert window[:2] == expected[:2] and window[2] == expected[2]
        decided.add((ours is None, window is None))
    assert len(decided) >= 3  # proven, window only, and neither all occurred


def test_common_rescale_reads_the_parameters_the_general_setup_reads() -> None:
    call = _call("INT8", "INT32", m=1_518_500_250, s=37, izp=-17, ozp=0, attr_rounding_mode="INEXACT_ROUND")
    params = type_conversion._setup(call)[0]
    assert common_rescale(call) == (params[0], params[1], params[3], params[6], params[7], params[8], params[9])
    assert common_rescale(call) == ("INT8", "INT32", "INEXACT_ROUND", -17, 0, 1_518_500_250, 37)


@pytest.mark.parametrize("changes", [
    {"attr_per_channel": True}, {"attr_scale32": False}, {"attr_rounding_mode": "DOUBLE_ROUND"},
    {"attr_input_unsigned": True}, {"attr_output_unsigned": True}, {"attr_rounding_mode": "BANKERS"},
    {"s": 1}, {"s": 63}, {"m": -5}, {"izp": 3, "in_t": "INT16"}, {"ozp": 3, "out_t": "INT16"},
    {"shape": (2, 0)}, {"shape": (1,) * 7}, {"out_decl": Tensor("y", (2, 9), "INT32")},
    {"out_decl": Tensor("y", [2, 8], "INT32")}, {"decl_1": Tensor("m", (1,), "INT16")},
    {"decl_2": Tensor("s", (2,), "INT8")}, {"decl_3": Tensor("izp", (1,), "INT16")},
    {"value_1": np.array([1, 2], np.int32)}, {"value_4": [0]}, {"out_decl": Tensor("y", (2, 8), "INT48")},
])
def test_anything_unusual_or_failing_goes_the_general_way(changes) -> None:
    """common_rescale declines each of these (the general prepare then raises its error, or
    prepares the unusual RESCALE its own way)."""
    keys = ("in_t", "out_t", "m", "s", "izp", "ozp", "shape")
    call = _call(**{k: v for k, v in changes.items() if k in keys},
                 **{k: v for k, v in changes.items() if k not in keys})
    assert common_rescale(call) is None


@pytest.mark.parametrize("seed", range(3))
def test_the_common_kernel_computes_and_fails_as_the_general_kernel(seed) -> None:
    """Random common RESCALEs prepared both ways, run on random data and on each input type's
    extremes: the same outputs bit for bit, or the same REQUIRE failure."""
    rng = np.random.default_rng(500 + seed)
    compared = failed = 0
    for _ in range(120):
        p = _random_params(rng)
        if rng.random() < 0.5:  # (multipliers and shifts of lowered graphs: results in range)
            p["m"], p["s"] = int(rng.integers(1 << 29, 1 << 31)), int(rng.integers(28, 40))
        call = _call(p["in_t"], p["out_t"], p["m"], p["s"], p["izp"], p["ozp"])
        common = common_rescale(call)
        assert common is not None
        ours, theirs = type_conversion._common_kernel(call, common), _general(call)
        lo, hi = _RANGES[p["in_t"]]
        x = np.concatenate([rng.integers(lo, hi, 14, endpoint=True), [lo, hi]]).astype(_WORKING[p["in_t"]])
        x = x.reshape(2, 8)
        results = []
        for kernel in (ours, theirs):
            run = OpCall(3, call.operator, [x, *call.inputs[1:]], call.input_decls, call.output_decls)
            try:
                results.append(kernel(run)[0])
            except TosaError as exc:
                results.append(exc)
        if isinstance(results[1], TosaError):
            assert isinstance(results[0], TosaRequireError) and str(results[0]) == str(results[1])
            failed += 1
        else:
            assert results[0].dtype == results[1].dtype
            np.testing.assert_array_equal(results[0], results[1])
            compared += 1
    assert compared > 50 and failed > 5


def test_large_common_rescales_take_the_float64_kernel(monkeypatch) -> None:
    """Above SMALL_RESCALE elements (read when prepared, as the general prepare does) the common
    RESCALE's kernel is _rescale_fast's, with the same results as the general one."""
    monkeypatch.setattr(type_conversion, "SMALL_RESCALE", 0)
    call = _call("INT8", "INT8", m=1_518_500_250, s=38, izp=5, ozp=-7)
    kernel = type_conversion._common_kernel(call, common_rescale(call))
    assert kernel.__qualname__.startswith("fast_rescale")
    x = np.arange(-128, 128, dtype=np.int8)[:16].reshape(2, 8)
    run = OpCall(3, call.operator, [x, *call.inputs[1:]], call.input_decls, call.output_decls)
    np.testing.assert_array_equal(kernel(run)[0], _general(call)(run)[0])
