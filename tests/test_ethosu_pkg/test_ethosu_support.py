"""check_support predicts, without compiling, which operators Vela refuses."""

from __future__ import annotations

import ethosu_tosa_graphs as graphs
import pytest

from ethosu.compiler import VelaCompileError, check_support, compile_tosa
from ethosu.support import vela_tosa_report

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


@pytest.mark.parametrize(("name", "target", "vela_accepts"), CASES)
def test_prediction_matches_vela(name, target, vela_accepts):
    builder = graphs.PROBES[name][0]
    tosa = builder()
    report = check_support(tosa, target)
    assert report.ok == vela_accepts, report.format()
    if vela_accepts:
        assert compile_tosa(tosa, target).cycles > 0
    else:
        assert report.unsupported[0].reason
        with pytest.raises(VelaCompileError):
            compile_tosa(tosa, target)


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
