"""tosa_verify.drift against independent recomputations (torch hooks, direct graph edits)."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

import lowering
import tosa_verify
from tosa_verify.drift import DriftReport, DriftRow, ErrorStats
from tosa_verify.writer import to_flatbuffer


class ConvFC(torch.nn.Module):
    """A conv whose output is not followed by an activation (so its TOSA tensor is NHWC and plain)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 5 * 5, 6)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


@pytest.fixture(scope="module")
def conv_fc():
    torch.manual_seed(0)
    model = ConvFC().eval()
    gen = torch.Generator().manual_seed(3)
    calib = [(torch.randn(2, 2, 5, 5, generator=gen),) for _ in range(4)]
    x = (torch.randn(2, 2, 5, 5, generator=gen),)
    lm = lowering.lower(model, x, calibration=calib)
    return model, x, lm


@pytest.fixture(scope="module")
def mlp(zoo_lowered):
    model, example, _, lowered = zoo_lowered("mlp")
    return model, example, lowered


def _sqnr(ref: np.ndarray, test: np.ndarray) -> float:
    ref, test = ref.astype(np.float64), test.astype(np.float64)
    return 10 * math.log10(np.sum(ref**2) / np.sum((ref - test) ** 2))


def _dequant(lm, name: str, value: np.ndarray) -> np.ndarray:
    qp = lm.quant_params[name]
    return (value.astype(np.float64) - qp["zero_point"][0]) * qp["scale"][0]


def test_layer_sqnr_matches_a_direct_computation_from_torch_activations(conv_fc):
    model, x, lm = conv_fc
    float_conv = {}
    handle = model.conv.register_forward_hook(lambda m, i, o: float_conv.setdefault("v", o.detach()))
    model(*x)
    handle.remove()
    captured = tosa_verify.run(lm.tosa, lm.quantize_inputs(*x), capture=True).tensors

    report = tosa_verify.drift(lm, x)
    row = report.row("conv2d")
    assert row.torch_node == "conv2d" and row.module_path == "conv"
    assert row.layout == "NHWC" and row.shape == (2, 5, 5, 4)

    f = float_conv["v"].permute(0, 2, 3, 1).numpy().astype(np.float64)  # NCHW -> TOSA NHWC
    t = _dequant(lm, "conv2d", captured["conv2d"])
    assert row.total.sqnr_db == pytest.approx(_sqnr(f, t), rel=1e-9)
    cos = float(np.sum(f * t) / (np.linalg.norm(f) * np.linalg.norm(t)))
    assert row.total.cosine == pytest.approx(cos, rel=1e-9)
    scale = lm.quant_params["conv2d"]["scale"][0]
    assert row.total.max_abs == pytest.approx(float(np.abs(f - t).max()), rel=1e-9)
    assert row.total.max_steps == pytest.approx(float(np.abs(f - t).max()) / scale, rel=1e-9)

    # the graph output against the float model's output
    out = report.output_rows[0]
    t_out = _dequant(lm, out.tensor, captured[out.tensor]).reshape(2, 6)
    assert out.total.sqnr_db == pytest.approx(_sqnr(model(*x).detach().numpy(), t_out), rel=1e-9)


class InPlaceAfterRelu(torch.nn.Module):
    """In-place ops with Python numbers after a fused conv + ReLU: quantization rebuilds the
    ``add_`` / ``mul_`` nodes under new names (their numbers made constants)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.relu = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.relu(self.conv(x))
        y += 1.5
        y.mul_(0.5)
        return torch.nn.functional.hardswish(y).mean((2, 3))


def test_rows_after_in_place_ops_compare_with_their_own_float_values():
    """Each row's float value is the float model's value of that very node, as forward hooks
    and plain arithmetic recompute it (it was once the value three in-place ops later)."""
    torch.manual_seed(0)
    model = InPlaceAfterRelu().eval()
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(1, 3, 8, 8, generator=gen),)
    lm = lowering.lower(model, x, calibration=[(torch.randn(1, 3, 8, 8, generator=gen),) for _ in range(4)] + [x])
    relu = torch.relu(model.conv(x[0])).detach()
    expected = {"conv2d": relu, "add": relu + 1.5, "mul": (relu + 1.5) * 0.5}
    captured = tosa_verify.run(lm.tosa, lm.quantize_inputs(*x), capture=True).tensors
    report = tosa_verify.drift(lm, x, local=False, rounding=False)
    for prefix, value in expected.items():
        (row,) = [r for r in report.rows if r.torch_node.startswith(prefix) and r.alias_of is None]
        f = value.permute(0, 2, 3, 1).numpy().astype(np.float64)
        t = _dequant(lm, row.tensor, captured[row.tensor])
        assert row.total.sqnr_db == pytest.approx(_sqnr(f, t), rel=1e-9), prefix
        assert row.total.sqnr_db > 30, prefix


def test_fake_quant_column_is_the_fake_quant_models_own_value(mlp):
    model, x, lm = mlp
    report = tosa_verify.drift(lm, x, local=False, rounding=False)
    out = report.output_rows[0]
    fq = lm.quantized_model(*x).detach().numpy().astype(np.float64)   # ends in a dequantize node
    f = model(*x).detach().numpy()
    assert out.quantization.sqnr_db == pytest.approx(_sqnr(f, fq), abs=0.05)
    # a faithful lowering: the TOSA output sits on the fake-quant grid point
    assert out.lowering.off == 0 and out.lowering.max_steps == 0
    assert all(r.executor_mismatched == 0 for r in report.rows)


def _perturb(lm, name: str, factor: float):
    graph = tosa_verify.load(lm.tosa)
    decl = graph.main.tensors[name]
    decl.data = np.round(decl.data.astype(np.float64) * factor).astype(decl.data.dtype)
    return dataclasses.replace(lm, tosa=to_flatbuffer(graph))


def test_perturbed_rescale_multiplier_shows_up_as_lowering_error_at_that_layer(mlp):
    model, x, lm = mlp
    clean = tosa_verify.drift(lm, x, rounding=False)
    assert clean.first_lowering_divergence() is None

    broken = tosa_verify.drift(_perturb(lm, "linear_1__rescale_mult", 1.03), x, rounding=False)
    first = broken.first_lowering_divergence()
    assert first is not None and first.torch_node == "linear_1" and first.module_path == "layers.1"
    assert first.local_lowering.off > 0 and first.local_lowering.max_steps >= 1
    # upstream untouched, downstream affected only by propagation (its own layer is exact)
    assert broken.row("linear").lowering.off == 0 and broken.row("linear").local_lowering.off == 0
    assert broken.row("linear_2").lowering.off > 0
    assert broken.row("linear_2").local_lowering.off == 0
    assert broken.row("linear_1").total.sqnr_db < clean.row("linear_1").total.sqnr_db
    assert "lowering first departs from fake-quant at linear_1" in broken.format_table()


def test_local_error_isolates_a_layer_from_upstream_error(mlp):
    model, x, lm = mlp
    # wreck the first layer's multiplier: the propagated SQNR of later layers collapses, the
    # local SQNR of later layers (fed float-accurate inputs) does not
    broken = tosa_verify.drift(_perturb(lm, "linear__rescale_mult", 0.5), x, rounding=False)
    clean = tosa_verify.drift(lm, x, rounding=False)
    assert broken.row("linear_2").total.sqnr_db < clean.row("linear_2").total.sqnr_db - 6
    assert broken.row("linear_2").local.sqnr_db == pytest.approx(clean.row("linear_2").local.sqnr_db, abs=1e-9)
    assert broken.row("linear").local.sqnr_db < 10


def test_rounding_explainer_agrees_with_a_full_rerun(mlp):
    model, x, lm = mlp
    report = tosa_verify.drift(lm, x)
    tosa_in = lm.quantize_inputs(*x)
    base = tosa_verify.run(lm.tosa, tosa_in, capture=True).tensors
    assert len(report.rounding) == lm.op_counts["RESCALE"]
    for r in report.rounding:
        assert r.op == "RESCALE" and r.mode == "SINGLE_ROUND" and r.alternative == "DOUBLE_ROUND"
        graph = tosa_verify.load(lm.tosa)
        op = graph.main.operators[r.op_index]
        op.attrs["rounding_mode"] = "DOUBLE_ROUND"
        flipped = tosa_verify.run(to_flatbuffer(graph), tosa_in, capture=True).tensors
        assert r.changed == int(np.count_nonzero(flipped[r.tensor] != base[r.tensor]))
        out = lm.output_names[0]
        assert r.output_changed == int(np.count_nonzero(flipped[out] != base[out]))
        assert r.travelled is (r.changed > 0)


def test_rounding_travel_budget_limits_reruns(mlp):
    model, x, lm = mlp
    report = tosa_verify.drift(lm, x, rounding_travel=0)
    assert all(r.travelled is None for r in report.rounding if r.changed)
    assert all(r.travelled is False for r in report.rounding if not r.changed)


def test_report_formats_and_json(conv_fc):
    model, x, lm = conv_fc
    report = tosa_verify.drift(lm, x)
    assert isinstance(report, DriftReport) and all(isinstance(r, DriftRow) for r in report.rows)
    assert isinstance(report.rows[0].total, ErrorStats)
    table = report.format_table()
    for r in report.rows:
        assert r.tensor[-10:] in table
    assert "rounding explainer" in table and "executor: interpreter == reference model" in table
    data = json.loads(report.to_json())
    assert [r["tensor"] for r in data["rows"]] == [r.tensor for r in report.rows]
    assert data["attribution"][report.outputs[0]]["quantization_share"] > 0.9
    # rows are in topological order: graph inputs first, then by producing operator
    indices = [r.op_index for r in report.rows]
    assert indices == sorted(indices)
    assert report.rows[0].op == "input"


def test_fp_profile_reports_float_rounding_only():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    x = (torch.randn(2, 8),)
    lm = lowering.lower(model, x, profile="FP")
    report = tosa_verify.drift(lm, x)
    assert report.profile == "FP" and report.rounding == []
    out = report.output_rows[0]
    assert out.scale is None and out.quantization is None
    assert out.total.sqnr_db > 100
    assert report.first_lowering_divergence() is None


def test_library_does_not_import_lowering():
    """The core (drift included) loads neither lowering, ethosu, golden, vgf nor torch (the
    application layer's imports are checked statically by tests/test_layering.py)."""
    code = ("import sys, tosa_verify, tosa_verify.drift, tosa_verify.diff, tosa_verify.evaluate;"
            "bad = [m for m in ('lowering', 'ethosu', 'golden', 'vgf', 'torch') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("activations", ["int8", "int16"])
def test_table_explainer_matches_a_graph_edit(activations):
    """Near-tie TABLE entries, recomputed here from torch.sigmoid, flipped in the graph by hand."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Sigmoid(), torch.nn.Linear(16, 4)).eval()
    gen = torch.Generator().manual_seed(1)
    calib = [(torch.randn(64, 8, generator=gen) * 2,) for _ in range(4)]
    x = (torch.randn(256, 8, generator=gen) * 2,)
    config = lowering.QuantConfig.int16() if activations == "int16" else lowering.QuantConfig()
    lm = lowering.lower(model, x, calibration=calib, quantization=config)
    report = tosa_verify.drift(lm, x, rounding_travel=None)

    graph = tosa_verify.load(lm.tosa)
    index, op = next((i, o) for i, o in enumerate(graph.main.operators) if o.op == "TABLE")
    row = next(r for r in report.rounding if r.op_index == index)
    table = graph.main.tensors[op.inputs[1]].data.astype(np.int64)
    q_in = lm.quant_params[op.inputs[0]]
    if activations == "int8":
        levels = np.arange(-128, 128)
        q_out = lm.quant_params[op.outputs[0]]
    else:  # 513 samples every 128 levels; our lowering keeps entries in output steps (RESCALE 1/128)
        levels = np.clip(np.arange(513) * 128 - 32768, -32768, 32767)
        rescale = next(o for o in graph.main.operators if o.inputs and o.inputs[0] == op.outputs[0])
        q_out = lm.quant_params[rescale.outputs[0]]
    real_in = (levels - q_in["zero_point"][0]) * q_in["scale"][0]
    # (sigmoid in float32, as the explainer evaluates the model's node: in float64 an entry at
    # the edge of the near-tie window can fall the other side of it)
    exact = torch.sigmoid(torch.tensor(real_in, dtype=torch.float32)).double().numpy() / q_out["scale"][0] \
        + q_out["zero_point"][0]
    lo, hi = np.iinfo(np.int8 if activations == "int8" else np.int16).min, \
        np.iinfo(np.int8 if activations == "int8" else np.int16).max
    near = (np.abs(exact - np.floor(exact) - 0.5) < 0.05) & (exact > lo) & (exact < hi)
    assert near.sum() > 0 and row.note.startswith(f"{int(near.sum())} near-tie entries")

    flipped_table = np.where(near, np.where(table >= exact, table - 1, table + 1), table)
    tosa_in = lm.quantize_inputs(*x)
    base = tosa_verify.run(graph, tosa_in, capture=True).tensors
    graph.main.tensors[op.inputs[1]].data = flipped_table.astype(graph.main.tensors[op.inputs[1]].data.dtype)
    flipped = tosa_verify.run(to_flatbuffer(graph), tosa_in, capture=True).tensors
    assert row.changed == int(np.count_nonzero(flipped[op.outputs[0]] != base[op.outputs[0]])) > 0
    out = lm.output_names[0]
    assert row.output_changed == int(np.count_nonzero(flipped[out] != base[out]))
