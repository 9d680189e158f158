"""Graphs of a peer producer, ExecuTorch's Arm TOSA backend, on VGF against our interpreter.

MobileNetV2 (INT and FP) lowered by ExecuTorch: INT outputs bit for bit, FP operator by operator
within the spec's compliance bounds (each float tensor that is not bit-identical re-run alone by
the reference model and judged under its compliance mode). The default run takes a reduced
MobileNetV2 (the first two stages at 32x32: stem, depthwise/pointwise blocks, a residual ADD,
ReLU6 clamps, last conv, pooling, classifier); the full 224x224 network is ``-m slow``.
Each graph is compiled to VGF once per module and run once per test.
"""

from __future__ import annotations

import pytest

import tosa_verify

from .helpers import diff_within_compliance, outputs_agree_bit_exact, peer_mobilenet_v2

pytestmark = pytest.mark.usefixtures("vgf_device")


def _ops(tosa: bytes) -> set[str]:
    return {op.op for op in tosa_verify.load(tosa).main.operators}


def test_reduced_peer_mobilenet_v2_int_runs_bit_exact_on_vgf():
    tosa = peer_mobilenet_v2("INT")
    # ExecuTorch folds the INT ReLU6 into the RESCALE's output range: no CLAMP to see here
    assert {"CONV2D", "DEPTHWISE_CONV2D", "ADD", "RESCALE", "AVG_POOL2D"} <= _ops(tosa)
    outputs_agree_bit_exact(tosa, seed=1)


def test_reduced_peer_mobilenet_v2_fp_agrees_operator_by_operator_within_compliance():
    tosa = peer_mobilenet_v2("FP")
    assert {"CONV2D", "DEPTHWISE_CONV2D", "ADD", "CLAMP"} <= _ops(tosa)
    report = diff_within_compliance(tosa)
    assert {op.op for op in report.ops if op.status == "within_compliance"} >= {"CONV2D", "DEPTHWISE_CONV2D"}


@pytest.mark.slow
def test_peer_mobilenet_v2_int_runs_bit_exact_on_vgf():
    outputs_agree_bit_exact(peer_mobilenet_v2("INT", full=True))


@pytest.mark.slow
def test_peer_mobilenet_v2_fp_agrees_operator_by_operator_within_compliance():
    diff_within_compliance(peer_mobilenet_v2("FP", full=True))
