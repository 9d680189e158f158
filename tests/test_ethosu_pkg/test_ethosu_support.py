"""check_support predicts, without compiling, which operators Vela refuses."""

from __future__ import annotations

import ethosu_tosa_graphs as graphs
import pytest

from ethosu.compiler import VelaCompileError, check_support, compile_tosa
from ethosu.support import vela_tosa_report
from tosa_verify.graph import load

CASES = [
    (name, target, expected[0 if target != "ethos-u85-256" else 1])
    for name, expected in ((n, (u55, u85)) for n, (_, u55, u85) in graphs.PROBES.items())
    for target in ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")
]


def test_bitwise_and_is_flagged_on_u55_only():
    tosa = graphs.bitwise_and()
    report = check_support(tosa, "ethos-u55-128")
    assert not report.ok and len(report) == 1
    issue = report.unsupported[0]
    assert (issue.index, issue.op) == (0, "BITWISE_AND")
    assert "not supported on Ethos-U55" in issue.reason
    assert "BITWISE_AND" in report.format()
    assert check_support(tosa, "ethos-u85-256").ok
    # and Vela agrees: it refuses the graph for U55, compiles it for U85
    with pytest.raises(VelaCompileError) as info:
        compile_tosa(tosa, "ethos-u55-128")
    assert "could not run on NPU" in str(info.value) and "check_support" in str(info.value)
    assert compile_tosa(tosa, "ethos-u85-256").cycles > 0


def _probed_operator(tosa: bytes) -> str:
    """The operator a probe graph is about: its first one that is not a constant."""
    return next(op.op for op in load(tosa).main.operators if op.op not in ("CONST", "CONST_SHAPE"))


@pytest.mark.parametrize(("name", "target", "vela_accepts"), CASES)
def test_prediction_matches_vela(name, target, vela_accepts):
    builder = graphs.PROBES[name][0]
    tosa = builder()
    report = check_support(tosa, target)
    assert report.ok == vela_accepts, report.format()
    if vela_accepts:
        assert compile_tosa(tosa, target).cycles > 0
    else:
        # the refusal is pinned on the probed operator (not, say, the RESCALE after it)
        assert report.unsupported[0].reason and report.unsupported[0].op == _probed_operator(tosa)
        with pytest.raises(VelaCompileError):
            compile_tosa(tosa, target)


#: probe -> words the Ethos-U55/U65 reason must contain: the tensor and the limit it breaks.
SHAPE_RULE_REASONS = {
    "resize_nearest_plain_x2": ("in0", "scale 2/1 x 2/1", "half-pixel-centre", "align-corners"),
    "resize_nearest_align_corners_6_3": ("in0", "upscale by 6", "2, 4 or 8"),
    "resize_nearest_half_pixel_x2_batch2": ("in0", "batch 2", "batch 1"),
    "resize_bilinear_half_pixel_x2": ("in0", "BILINEAR", "identity"),
    "transpose_conv2d_stride1x2_four_rows": ("in0", "stride 1x2", "(4x4, kernel 1x2)", "height"),
    "transpose_conv2d_i16_rescale": ("layer-1", "multiplier 16384, shift 20", "scale exactly 1"),
    "transpose_conv2d_i16_alone": ("layer-1", "graph output", "RESCALE"),
}


@pytest.mark.parametrize("name", sorted(SHAPE_RULE_REASONS))
def test_shape_rules_name_the_tensor_and_the_limit(name):
    tosa = graphs.PROBES[name][0]()
    for target in ("ethos-u55-128", "ethos-u65-256"):
        (issue,) = check_support(tosa, target).unsupported
        assert issue.op == _probed_operator(tosa)
        for word in SHAPE_RULE_REASONS[name]:
            assert word in issue.reason, issue.reason
        # and the whole line, as compile_tosa appends it to Vela's refusal
        with pytest.raises(VelaCompileError, match="check_support: #[0-9]+ " + issue.op):
            compile_tosa(tosa, target, layers=False)
    assert check_support(tosa, "ethos-u85-256").ok


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_executorch_graphs_are_fully_supported(peer_graphs, target):
    report = check_support(peer_graphs("tiny_cnn", target).tosa, target)
    assert report.ok and report.operators_checked > 5


def test_report_is_read_from_vela():
    report = vela_tosa_report()
    assert {"CONV2D", "ADD", "TABLE"} <= report.u55_supported
    assert {"GATHER", "SCATTER", "BITWISE_AND"} <= report.u55_not_supported
    assert any(line.startswith("TRANSPOSE_CONV2D") for line in report.u85_unsupported)
    assert report.vela_version


def test_report_dict_and_warnings():
    report = check_support(graphs.conv3d(dynamic_weights=True), "ethos-u85-256")
    assert report.ok and len(report.warnings) == 1
    data = report.to_dict()
    assert data["ok"] and data["warnings"][0]["op"] == "CONV3D"
