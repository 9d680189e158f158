"""INT16 (a16w8) element-wise functions within two steps of the fake-quant model, in general.

The int16 TABLE interpolates between 513 samples 128 input levels apart. Where fn is steep
(sqrt, 1/x, rsqrt, log near 0) or has a kink or a saturation inside a segment (softshrink,
hardsigmoid, hardswish, an output range narrower than fn's), that interpolation was tens to
hundreds of steps off (std: 511, rsqrt: 285, log: 149, hardsigmoid(3x): 23). The lowering
computes, for each int16 TABLE, its error at every input level against the fake-quant value
and, with ``QuantConfig.exact_int16_lookups``, above ``INT16_TABLE_MAX_STEPS`` (2), looks the
function up exactly instead: one GATHER from a table of all 65536 levels. Smooth functions
keep their TABLE; without the option every function does (TABLE is native on every Ethos-U;
GATHER is not on Ethos-U55/U65, where Vela then refuses the whole graph)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_int

import lowering
import lowering.ops.activation as activation
from lowering import QuantConfig
from lowering.qparams import QParams

#: the TABLE's own bound: a function past it is looked up exactly (0 steps; a float32
#: rounding tie of the reference aside)
BOUND = activation.INT16_TABLE_MAX_STEPS
#: int16 with the exact lookups asked for
EXACT = QuantConfig.int16(exact_lookups=True)

gen = torch.Generator().manual_seed(0)


def randn(*shape, scale=1.0):
    return torch.randn(*shape, generator=gen) * scale


#: name -> (model, inputs); each comment: the TABLE's step error on these inputs / its worst
#: error over every input level (of its worst TABLE), which the lowering judges by
CASES = {
    "std": (Fn(lambda x: x.std(dim=1, unbiased=False, keepdim=True)), (randn(2, 3, 5, 7),)),  # 511 / 512
    "reciprocal": (Fn(lambda x: torch.reciprocal(x.abs() + 0.1)), (randn(1, 3, 6, 6),)),  # 52 / 65022
    "rsqrt": (Fn(lambda x: torch.rsqrt(x.abs() + 0.1)), (randn(1, 3, 6, 6),)),  # 285 / 374
    "log": (Fn(lambda x: torch.log(x.abs() + 0.1)), (randn(1, 3, 6, 6),)),  # 149 / 163
    "hypot": (Fn(torch.hypot), (randn(2, 16), randn(2, 16))),  # 7 / 512
    "softshrink": (Fn(lambda x: F.softshrink(x, 0.5)), (randn(1, 3, 6, 6),)),  # 15 / 20
    "hardsigmoid": (Fn(lambda x: F.hardsigmoid(3 * x)), (randn(1, 3, 6, 6),)),  # 23 / 40
    "hardswish": (Fn(F.hardswish), (randn(1, 3, 6, 6, scale=4.0),)),  # 1 / 22
    "layer_norm": (nn.LayerNorm(8), (randn(2, 5, 8),)),  # 1 / 30
    "group_norm": (nn.GroupNorm(2, 4), (randn(2, 4, 5, 5),)),  # 0 / 23
    "softmax_dim_m2": (Fn(lambda x: torch.softmax(x, dim=-2)), (randn(2, 3, 8, 8),)),  # 2 / 65022
    "softmax_dim_0": (Fn(lambda x: torch.softmax(x, dim=0)), (randn(3, 4, 5),)),  # 2 / 65022
    "local_response_norm": (nn.LocalResponseNorm(3), (randn(1, 6, 5, 5),)),  # 7 / 65022
    "softsign": (Fn(F.softsign), (randn(1, 3, 6, 6, scale=3.0),)),  # 8 / 65022
}


def _calibration(inputs):
    g = torch.Generator().manual_seed(1)
    return [tuple(torch.randn(x.shape, generator=g) * x.std() + x.mean() for x in inputs)
            for _ in range(4)] + [tuple(inputs)]


#: cases of two functions in a row, each within the bound: softmax's exp keeps its TABLE (1-2
#: steps), and the steep 1/sum after the sum amplifies a step of the sum into a few
COMPOSED = {"softmax_dim_m2": 3 * BOUND, "softmax_dim_0": 3 * BOUND}


@pytest.mark.parametrize("name", sorted(CASES))
def test_int16_function_is_within_the_bound_of_fake_quant(name):
    model, inputs = CASES[name]
    lm = check_int(model, inputs, calibration=_calibration(inputs), quantization=EXACT,
                   max_steps=COMPOSED.get(name, BOUND))
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    assert lm.op_counts.get("GATHER", 0) >= 1, lm.op_counts  # at least one TABLE was not good enough


@pytest.mark.parametrize("fn", [torch.sigmoid, torch.tanh, torch.erf, F.gelu, F.silu], ids=lambda f: f.__name__)
def test_smooth_int16_function_keeps_its_table(fn):
    """A smooth function whose output range is fn's over the whole input range stays one TABLE.
    (MinMax observers: the default histogram observer clips the output's top, so gelu or silu
    saturate inside the input range, a kink the TABLE misses by ~16 steps: a lookup then.)"""
    x = torch.linspace(-4.0, 4.0, 108).reshape(1, 3, 6, 6)
    lm = check_int(Fn(fn), (x,), calibration=[(x,)], max_steps=BOUND,
                   quantization=QuantConfig.int16(activation_observer="minmax", exact_lookups=True))
    assert lm.cpu_nodes == [] and lm.op_counts.get("TABLE") == 1 and "GATHER" not in lm.op_counts, lm.op_counts


def _sym16(bound: float) -> QParams:
    return QParams(np.array([float(np.float32(bound / 32767))]), np.array([0]), torch.int16, -32767, 32767)


@pytest.mark.parametrize("name, fn, bound, out, want_lookup", [
    ("sigmoid", torch.sigmoid, 8.0, 1.0, False),
    ("tanh", torch.tanh, 4.0, 1.0, False),
    ("sqrt", torch.sqrt, 4.0, 2.0, True),          # sqrt near 0: 512 steps
    ("reciprocal", torch.reciprocal, 4.0, 10.0, True),
    ("sigmoid_saturated", torch.sigmoid, 8.0, 0.9, True),  # the output saturates inside a segment
])
def test_the_table_error_decides(name, fn, bound, out, want_lookup):
    """The TABLE's worst error over every int16 input level (numpy, at lowering time) is what
    decides between the TABLE and the lookup."""
    _, worst = activation._int16_table_fit(fn, _sym16(bound), _sym16(out))
    assert (worst > BOUND) == want_lookup, worst


def test_steep_function_is_exact_at_every_int16_level():
    """rsqrt's lookup holds the fake-quant value of every level in [qmin, qmax]."""
    x = torch.linspace(0.01, 4.0, 65535).reshape(1, -1)
    lm = lowering.lower(Fn(torch.rsqrt), (x,), profile="INT", quantization=EXACT, calibration=[(x,)])
    assert lm.cpu_nodes == [] and "GATHER" in lm.op_counts and "TABLE" not in lm.op_counts, lm.op_counts
    qi, qo = lm.input_qparams[0], lm.output_qparams[0]
    levels = torch.arange(qi.qmin, qi.qmax + 1).to(torch.int16)
    raw = np.asarray(lm.run_raw([levels.numpy().reshape(1, -1)])[0]).astype(np.int64).reshape(-1)
    want = activation._table_entries(torch.rsqrt, levels, qi, qo).numpy().astype(np.int64)
    np.testing.assert_array_equal(raw, want)


def test_without_the_option_every_int16_function_is_a_table():
    """The default: a TABLE (native on Ethos-U55/U65, which have no GATHER), as accurate as the
    interpolation allows."""
    model, inputs = CASES["rsqrt"]
    lm = check_int(model, inputs, calibration=_calibration(inputs), quantization=QuantConfig.int16(),
                   max_steps=32767)
    assert lm.op_counts.get("TABLE") == 1 and "GATHER" not in lm.op_counts, lm.op_counts


def test_the_lookup_compiles_with_vela_on_ethos_u85_only():
    """Vela 5.2 puts the 65536-entry GATHER on the Ethos-U85 NPU; Ethos-U55/U65 have no GATHER
    and TOSA no CPU fallback: Vela refuses the graph, as check_support predicts."""
    from ethosu.compiler import check_support, compile_tosa
    from ethosu.errors import VelaCompileError

    model, inputs = CASES["layer_norm"]
    lm = lowering.lower(model, inputs, profile="INT", quantization=EXACT, calibration=_calibration(inputs))
    assert lm.op_counts.get("GATHER") == 1, lm.op_counts
    program = compile_tosa(lm.tosa, "ethos-u85-256", layers=False)
    assert program.tosa_ops_on_npu.get("GATHER") == 1 and program.cycles > 0
    assert [i.op for i in check_support(lm.tosa, "ethos-u55-128").unsupported] == ["GATHER"]
    with pytest.raises(VelaCompileError, match="Gather"):
        compile_tosa(lm.tosa, "ethos-u55-128", layers=False)


@pytest.mark.parametrize("fn", [torch.sigmoid, F.silu], ids=lambda f: f.__name__)
def test_int16_table_output_takes_the_observed_range(fn):
    """An int16 TABLE's output is observed by min/max even under the default histogram
    observer: the histogram trimmed the top of the output, a saturation inside one of the
    TABLE's segments that its interpolation cannot follow (sigmoid: 81.8 dB against float
    before, 90.5 dB after; silu 68.6 and 71.4 dB)."""
    x = randn(2, 64, scale=3.0)
    calibration = _calibration((x,))
    lm = lowering.lower(Fn(fn), (x,), profile="INT", quantization=QuantConfig.int16(), calibration=calibration)
    top = max(float(fn(c[0]).max()) for c in calibration)
    qo = lm.output_qparams[0]
    assert float(qo.s) * qo.qmax == pytest.approx(top, rel=1e-6)
    (got,) = lm.run(x)
    want = fn(x)
    sqnr = 10 * torch.log10(want.pow(2).mean() / (got - want).pow(2).mean())
    assert sqnr > 70
