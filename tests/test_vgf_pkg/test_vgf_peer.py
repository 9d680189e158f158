"""Graphs of a peer producer, ExecuTorch's Arm TOSA backend, on VGF against our interpreter.

MobileNetV2 width 1.0 at 224x224, INT and FP, as ExecuTorch lowers it: INT outputs bit for bit;
FP outputs bit-identical, or else every operator within the spec's compliance bound. A reduced
MobileNetV2 (the first two stages at 32x32: stem, depthwise/pointwise blocks, a residual ADD,
ReLU6 clamps, last conv, pooling, classifier) in FP is also compared operator by operator (each
float tensor that is not bit-identical re-run alone by the reference model and judged under its
compliance mode). The graphs are shipped test data (``tests/data/peer``, see
:mod:`.peer_data`): the default run needs no ExecuTorch lowering; a slow test checks that the
shipped graphs are what ExecuTorch lowers today.
"""

from __future__ import annotations

import pytest

import tosa_verify

from . import peer_data
from .helpers import (
    diff_within_compliance,
    fp_outputs_agree,
    outputs_agree_bit_exact,
    peer_mobilenet_v2,
)
from .peer_data import GRAPHS, executorch_lowering, shipped_tosa

pytestmark = pytest.mark.usefixtures("vgf_device")


def _ops(tosa: bytes) -> set[str]:
    return {op.op for op in tosa_verify.load(tosa).main.operators}


def _shape(tosa: bytes, name: str) -> tuple[int, ...]:
    block = tosa_verify.load(tosa).main
    return tuple(block.tensors[name].shape)


def test_peer_mobilenet_v2_int_runs_bit_exact_on_vgf():
    tosa = peer_mobilenet_v2("INT")
    block = tosa_verify.load(tosa).main
    assert _shape(tosa, block.inputs[0]) == (1, 3, 224, 224) and _shape(tosa, block.outputs[0]) == (1, 1000)
    # ExecuTorch folds the INT ReLU6 into the RESCALE's output range: no CLAMP to see here
    assert {"CONV2D", "DEPTHWISE_CONV2D", "ADD", "RESCALE", "AVG_POOL2D"} <= _ops(tosa)
    outputs_agree_bit_exact(tosa, seed=1)


def test_peer_mobilenet_v2_fp_outputs_agree_on_vgf():
    tosa = peer_mobilenet_v2("FP")
    block = tosa_verify.load(tosa).main
    assert _shape(tosa, block.inputs[0]) == (1, 3, 224, 224) and _shape(tosa, block.outputs[0]) == (1, 1000)
    assert {"CONV2D", "DEPTHWISE_CONV2D", "ADD", "CLAMP"} <= _ops(tosa)
    fp_outputs_agree(tosa)  # asserts; identical today, operator by operator otherwise


def test_reduced_peer_mobilenet_v2_fp_agrees_operator_by_operator_within_compliance():
    tosa = peer_mobilenet_v2("FP", full=False)
    assert {"CONV2D", "DEPTHWISE_CONV2D", "ADD", "CLAMP"} <= _ops(tosa)
    report = diff_within_compliance(tosa)
    assert {op.op for op in report.ops if op.status == "within_compliance"} >= {"CONV2D", "DEPTHWISE_CONV2D"}


def test_shipped_weights_are_predicted_from_the_seeded_model():
    # every conv and the classifier of the full network (52 + 1) come from the seeded model: the
    # shipped residual is the graph's structure, a few hundredths of the flatbuffer
    entries = peer_data.json.loads(peer_data.MANIFEST.read_text())
    for name in ("mobilenet_v2-INT-full", "mobilenet_v2-FP-full"):
        assert {r["source"] for r in entries[name]["recipes"]} == set(peer_data.folded_weights(
            peer_data.mobilenet_v2(True)[0]))
        residual = (peer_data.DATA_DIR / f"{name}.residual.xz").stat().st_size
        assert residual < 0.03 * entries[name]["size"], (name, residual)


def test_a_shipped_graph_that_does_not_rebuild_exactly_is_an_error(tmp_path, monkeypatch):
    # one flipped bit in a predicted weight: the rebuilt flatbuffer is refused, not used
    name = "mobilenet_v2-FP-reduced"
    data = peer_data.lzma.decompress((peer_data.DATA_DIR / f"{name}.residual.xz").read_bytes())
    entry = peer_data.json.loads(peer_data.MANIFEST.read_text())[name]
    offset = entry["recipes"][0]["offset"]
    (tmp_path / f"{name}.residual.xz").write_bytes(peer_data.lzma.compress(
        data[:offset] + bytes([data[offset] ^ 1]) + data[offset + 1:]))
    (tmp_path / "peer_graphs.json").write_text(peer_data.MANIFEST.read_text())
    monkeypatch.setattr(peer_data, "DATA_DIR", tmp_path)
    monkeypatch.setattr(peer_data, "MANIFEST", tmp_path / "peer_graphs.json")
    shipped_tosa.cache_clear()
    try:
        with pytest.raises(peer_data.PeerDataError, match="does not have the recorded SHA-256"):
            shipped_tosa(name)
    finally:
        shipped_tosa.cache_clear()


@pytest.mark.slow
def test_peer_mobilenet_v2_fp_agrees_operator_by_operator_within_compliance():
    diff_within_compliance(peer_mobilenet_v2("FP"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GRAPHS))
def test_shipped_peer_graphs_are_what_executorch_lowers_today(name):
    # the shipped data is only worth something while it is ExecuTorch's lowering of today
    assert executorch_lowering(name) == shipped_tosa(name), (
        f"{name}: ExecuTorch lowers differently now: python -m tests.test_vgf_pkg.peer_data {name}")
