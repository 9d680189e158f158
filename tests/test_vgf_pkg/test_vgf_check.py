"""``tosa-verify check MODEL --target vgf``: the lowered TOSA compiled and run on VGF (INT and FP),
gated on agreement with the interpreter, with a VGF column in drift's executor attribution."""

from __future__ import annotations

import json

import pytest
from test_check import run_check as _check  # tests/test_check.py: check_main with captured output

pytestmark = pytest.mark.usefixtures("vgf_device")


@pytest.mark.parametrize("profile", ["INT", "FP"])
def test_check_target_vgf_gates_on_agreement_and_adds_a_drift_column(profile, tmp_path, capsys):
    report = tmp_path / "r.json"
    code, out, err = _check(["lowering.zoo:mlp", "--profile", profile, "--target", "vgf",
                             "--json", str(report)], capsys)
    assert code == 0, out + err
    assert "VGF compile and run" in err
    assert ("no Ethos-U --target" if profile == "INT" else "Vela compiles INT-profile TOSA only") in err
    data = json.loads(report.read_text())
    gate = next(g for g in data["gates"] if g["name"] == "VGF == interpreter")
    assert gate["passed"], gate
    assert not data["vela"]  # --target vgf alone: no Vela compile
    assert data["vgf"][0]["program"]["converter_version"] == "0.11.0"
    rows = data["drift"]["rows"]
    checked = [r for r in rows if "VGF" in r["executors"]]
    assert checked and len(checked) == len([r for r in rows if r["executor_mismatched"] is not None])
    if profile == "INT":  # bit-exact: every tensor identical
        assert all(r["executors"]["VGF"]["mismatched"] == 0 for r in checked)
        assert "interpreter == VGF on every tensor" in out
    for attribution in data["drift"]["attribution"].values():
        assert "VGF_share" in attribution and "VGF_mse" in attribution
