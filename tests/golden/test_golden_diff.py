"""Golden diff classification on goldens built with known changes."""

from __future__ import annotations

import numpy as np

from golden import Golden, Thresholds, diff, tensor_stats


def make(outputs=None, sqnr=(40.0, 35.0), cycles=1000, bias_shift=0, versions=None) -> Golden:
    rng = np.random.default_rng(1)
    conv = rng.integers(-50, 50, size=(1, 4, 4, 8)).astype(np.int8)
    conv_changed = (conv.astype(np.int16) + bias_shift).astype(np.int8)
    out = conv_changed.reshape(1, -1)[:, :10].copy() if outputs is None else outputs
    stats = {
        "input": tensor_stats(rng.integers(-5, 5, size=(4,)).astype(np.int8), scale=0.1),
        "conv1_out": tensor_stats(conv_changed, scale=0.05, torch_node="conv2d", module_path="features.0"),
        "fc_out": tensor_stats(out, scale=0.2, torch_node="linear", module_path="classifier"),
    }
    stats["conv1_out"].sqnr_db, stats["fc_out"].sqnr_db = sqnr
    return Golden(
        manifest={
            "tensor_order": ["input", "conv1_out", "fc_out"],
            "performance": {"ethos-u55-128": {"cycles": cycles}},
            "versions": versions or {"torch": "2.13.0"},
        },
        inputs={"x": np.zeros((1, 4), np.int8)},
        outputs={"logits": out},
        stats=stats,
    )


def test_identical():
    report = diff(make(), make())
    assert report.cases[0].status == "identical"
    assert not report.failed


def test_integer_output_change_is_a_regression_naming_the_first_changed_layer():
    report = diff(make(), make(bias_shift=1))
    case = report.cases[0]
    assert case.status == "numerical-regression" and report.failed
    finding = next(f for f in case.findings if f.kind == "numerical-regression")
    assert finding.tensor == "conv1_out"
    assert "conv1_out" in report.format()


def test_sqnr_drop_is_drift_naming_layer_and_module():
    report = diff(make(), make(sqnr=(36.5, 35.0)), Thresholds(max_sqnr_drop_db=1.0))
    case = report.cases[0]
    assert case.status == "quantization-drift"
    finding = case.findings[0]
    assert (finding.tensor, finding.torch_node, finding.module_path) == ("conv1_out", "conv2d", "features.0")
    # under the threshold: not drift
    assert diff(make(), make(sqnr=(39.5, 35.0))).cases[0].status == "identical"


def test_cycles_increase_is_a_performance_regression():
    assert diff(make(), make(cycles=1100), Thresholds(max_cycles_increase=0.05)).cases[0].status == "performance-regression"
    assert diff(make(), make(cycles=1040), Thresholds(max_cycles_increase=0.05)).cases[0].status == "identical"


def test_float_outputs_within_and_outside_tolerance():
    base = np.linspace(-1, 1, 10, dtype=np.float32).reshape(1, 10)
    near = base + np.float32(1e-4)
    far = base + np.float32(1e-1)
    assert diff(make(outputs=base), make(outputs=near)).cases[0].status == "within-tolerance"
    assert diff(make(outputs=base), make(outputs=far)).cases[0].status == "numerical-regression"


def test_tool_version_changes_are_reported_not_failed():
    report = diff(make(), make(versions={"torch": "2.14.0"}))
    assert report.cases[0].version_changes == {"torch": ("2.13.0", "2.14.0")}
    assert not report.failed
    assert "torch 2.13.0 -> 2.14.0" in report.format()
