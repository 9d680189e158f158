"""golden.record: what a recorded golden holds, and that real changes are reported."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import lowering
import tosa_verify
from golden import GoldenStore, diff
from golden.record import model_hash, record_lowered, record_model, seeded_inputs
from tosa_verify.writer import to_flatbuffer


@pytest.fixture(scope="module")
def digits(zoo_lowered):
    return zoo_lowered("digits_cnn")


@pytest.fixture(scope="module")
def digits_golden(digits):
    model, example, calib, lm = digits
    from ethosu.compiler import compile_tosa

    program = compile_tosa(lm.tosa, "ethos-u55-128")
    return record_lowered(lm, seeded_inputs(example, 0), programs=[program], model=model, seed=0)


def test_manifest(digits, digits_golden):
    model, example, calib, lm = digits
    m = digits_golden.manifest
    assert set(m["versions"]) >= {"torch", "tosa-tools", "ethos-u-vela", "tosa-verify"}
    assert m["model_hash"] == model_hash(model) and m["model_hash"].startswith("sha256:")
    assert m["input_seed"] == 0 and m["profile"] == "INT"
    # lowered without a config: the default one is spelled out, so it compares equal to an explicit one
    config = m["quantization"]["config"]
    assert (config["activation_dtype"], config["per_channel"], config["activation_observer"]) == \
        ("torch.int8", True, "histogram")
    assert len(m["quantization"]["params_sha256"]) == 16
    perf = m["performance"]["ethos-u55-128"]
    assert perf["cycles"] > 0 and perf["macs"] > 0
    graph = tosa_verify.load(lm.tosa)
    topo = list(graph.main.inputs) + [o for op in graph.main.operators if op.op not in ("CONST", "CONST_SHAPE")
                                      for o in op.outputs]
    assert m["tensor_order"] == topo
    assert list(digits_golden.outputs) == list(graph.main.outputs)


def test_tensor_stats_use_quant_params_drift_and_provenance(digits, digits_golden):
    model, example, calib, lm = digits
    inputs = seeded_inputs(example, 0)
    captured = tosa_verify.run(lm.tosa, lm.quantize_inputs(*inputs), capture=True).tensors
    qp = lm.quant_params["conv2d_1"]
    real = (captured["conv2d_1"].astype(np.float64) - qp["zero_point"][0]) * qp["scale"][0]
    s = digits_golden.stats["conv2d_1"]
    assert (s.min, s.max) == (pytest.approx(real.min()), pytest.approx(real.max()))
    assert s.mean == pytest.approx(real.mean())
    assert s.torch_node == "conv2d_1" and s.module_path == "conv2"
    report = tosa_verify.drift(lm, inputs, reference=False, local=False, rounding=False)
    assert s.sqnr_db == pytest.approx(report.row("conv2d_1").total.sqnr_db)
    # an accumulator has no scale: raw units, no SQNR
    acc = digits_golden.stats["conv2d_1__acc"]
    assert acc.sqnr_db is None and acc.max == captured["conv2d_1__acc"].max()


def test_seeded_inputs_are_deterministic_and_in_range(digits):
    model, example, calib, lm = digits
    a, b, c = seeded_inputs(example, 0)[0], seeded_inputs(example, 0)[0], seeded_inputs(example, 1)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == example[0].shape and a.dtype == example[0].dtype
    assert float(a.min()) >= float(example[0].min()) and float(a.max()) <= float(example[0].max())


def test_store_roundtrip_is_identical(tmp_path, digits_golden):
    store = GoldenStore(tmp_path)
    store.write("digits_cnn/INT", digits_golden)
    report = diff(store.read("digits_cnn/INT"), digits_golden)
    assert report.cases[0].status == "identical", report.format()


def test_one_step_change_to_a_conv_bias_is_a_regression_naming_the_layer(digits, digits_golden):
    model, example, calib, lm = digits
    graph = tosa_verify.load(lm.tosa)
    t = graph.main.tensors
    # one quantization step of conv2's output, in accumulator units, on one channel's bias
    step = np.rint(2.0 ** t["conv2d_1__rescale_shift"].data.astype(np.float64)
                   / t["conv2d_1__rescale_mult"].data.astype(np.float64)).astype(np.int64)
    bias = t["conv2d_1__bias"].data.copy()
    bias[3] += step[3]
    t["conv2d_1__bias"].data = bias
    changed = dataclasses.replace(lm, tosa=to_flatbuffer(graph))
    new = record_lowered(changed, seeded_inputs(example, 0), model=model, seed=0,
                         programs=[])
    new.manifest["performance"] = digits_golden.manifest["performance"]
    report = diff(digits_golden, new)
    case = report.cases[0]
    assert report.failed and case.status == "numerical-regression", report.format()
    regression = next(f for f in case.findings if f.kind == "numerical-regression")
    assert regression.tensor.startswith("conv2d_1")          # the first changed layer
    assert "first changed layer: conv2d_1" in report.format()
    # nothing upstream of conv2 changed
    for name in ("x", "conv2d"):
        assert digits_golden.stats[name] == new.stats[name]


def test_changed_quantization_config_is_reported(digits_golden, digits):
    model, example, calib, lm = digits
    other = record_model(model, example, calibration=calib, seed=0,
                         quantization=lowering.QuantConfig(per_channel=False))
    other.manifest["performance"] = digits_golden.manifest["performance"]
    report = diff(digits_golden, other)
    text = report.format()
    case = report.cases[0]
    # its own category, naming what changed; never a numerical regression or "within tolerance"
    assert case.status == "config-changed" and report.failed, text
    assert [f.kind for f in case.findings] == ["config-changed"], text
    assert "per_channel: True -> False" in text


def test_int16_activations_and_another_observer_against_an_int8_golden(digits_golden, digits):
    model, example, calib, lm = digits
    for config, expected in ((lowering.QuantConfig.int16(), "activation_dtype: torch.int8 -> torch.int16"),
                             (lowering.QuantConfig(activation_observer="minmax"),
                              "activation_observer: histogram -> minmax")):
        other = record_model(model, example, calibration=calib, seed=0, quantization=config)
        report = diff(digits_golden, other)
        assert report.cases[0].status == "config-changed", report.format()
        assert expected in report.format()
        assert "numerical-regression" not in report.format().lower()


def test_record_model_end_to_end_small():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    g = record_model(model, (torch.rand(2, 4),), targets=("ethos-u55-128",), seed=5)
    assert g.manifest["input_seed"] == 5
    assert g.performance["ethos-u55-128"]["cycles"] > 0
    assert len(g.inputs) == 1 and next(iter(g.inputs.values())).dtype == np.int8
    assert all(s.torch_node for s in g.stats.values())
