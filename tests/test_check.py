"""`tosa-verify check`: steps, gates, exit codes, model loading, HTML/JSON report."""

from __future__ import annotations

import argparse
import base64
import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from golden import GoldenStore
from tosa_verify.check import CheckError, add_check_arguments, check_main, load_model

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_check(argv: list[str], capsys) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="tosa-verify check")
    add_check_arguments(parser)
    code = check_main(parser.parse_args(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_mlp_passes_its_gates_and_writes_html_and_json(tmp_path, capsys):
    html_path, json_path = tmp_path / "r.html", tmp_path / "r.json"
    code, out, err = run_check(["lowering.zoo:mlp", "--min-sqnr", "30", "--max-lsb", "0",
                                "--report", str(html_path), "--json", str(json_path)], capsys)
    assert code == 0, out + err
    for i, step in enumerate(["quantize and lower", "validate", "interpreter vs reference model",
                              "drift vs float", "Vela compile", "golden compare", "report"], start=1):
        assert re.search(rf"\[{i}/7\] {step}.* \.\.\. ", err), err
    assert re.search(r"\[1/7\] quantize and lower \.\.\. \d+\.\d s", err)
    assert "RESULT: PASS" in out and "min-sqnr" in out and "ethos-u55-128" in out

    page = html_path.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 3  # SQNR along the network, error histogram, cycles per layer
    assert all(base64.b64decode(img)[:8] == PNG_MAGIC for img in images)
    assert "Rounding explainer" in page and "linear_1" in page

    data = json.loads(json_path.read_text())
    assert data["passed"] is True
    assert {g["name"] for g in data["gates"]} >= {"min-sqnr", "max-lsb", "interpreter == reference model",
                                                   "Vela compiles for ethos-u55-128"}
    assert data["vela"]["ethos-u55-128"]["performance"]["total_cycles"] > 0
    assert data["drift"]["rows"][-1]["tensor"] in data["drift"]["outputs"]


def test_a_failing_gate_exits_1(capsys):
    code, out, _ = run_check(["lowering.zoo:mlp", "--no-vela", "--min-sqnr", "200"], capsys)
    assert code == 1
    assert "RESULT: FAIL (min-sqnr)" in out


def test_model_file_that_fails_to_import_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad_model.py"
    bad.write_text("import torch\nraise RuntimeError('broken on purpose')\n")
    report = tmp_path / "sub" / "r.html"
    code, out, err = run_check([f"{bad}:build", "--no-vela", "--report", str(report)], capsys)
    assert code == 2
    assert "RuntimeError: broken on purpose" in report.read_text()  # --report always writes a file
    last = err.strip().splitlines()[-1]
    assert last.startswith("tosa-verify check: error: cannot import model")
    assert "RuntimeError: broken on purpose" in last
    assert "Traceback" not in err


def test_factory_in_a_file_with_calibration(tmp_path, capsys):
    src = tmp_path / "my_model.py"
    src.write_text(
        "import torch\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).eval()\n"
        "    g = torch.Generator().manual_seed(1)\n"
        "    return m, (torch.randn(3, 6, generator=g),), [(torch.randn(3, 6, generator=g),) for _ in range(4)]\n"
    )
    code, out, err = run_check([f"{src}:build", "--no-vela"], capsys)
    assert code == 0, err
    assert "my_model.build, " in err  # the file stem and factory name label the run


def test_golden_record_compare_and_missing(tmp_path, capsys):
    store = tmp_path / "goldens"
    code, out, _ = run_check(["lowering.zoo:mlp", "--no-vela", "--golden", str(store), "--update-golden"], capsys)
    assert code == 0 and (GoldenStore(store).live_dir("mlp/INT") / "manifest.json").exists()
    code, out, _ = run_check(["lowering.zoo:mlp", "--no-vela", "--golden", str(store)], capsys)
    assert code == 0 and "mlp/INT: identical" in out
    code, out, _ = run_check(["lowering.zoo:mlp", "--no-vela", "--golden", str(store), "--case", "other"], capsys)
    assert code == 1 and "no golden recorded for 'other/INT'" in out


def test_option_errors_exit_2(capsys):
    code, _, err = run_check(["lowering.zoo:mlp", "--max-cycles-increase", "5"], capsys)
    assert code == 2 and "--golden" in err
    code, _, err = run_check(["lowering.zoo:mlp", "--target", "ethos-u99-1"], capsys)
    assert code == 2 and "ethos-u99-1" in err


def test_load_model_specs(tmp_path):
    assert load_model("lowering.zoo:mlp").name == "mlp"
    assert load_model("mlp").source == "lowering.zoo:mlp"
    with pytest.raises(CheckError, match="unknown model 'nope'"):
        load_model("nope")
    with pytest.raises(CheckError, match="no callable 'missing'"):
        load_model("lowering.zoo:missing")
    with pytest.raises(CheckError, match="No module named"):
        load_model("no_such_package.models:build")
    (tmp_path / "syn.py").write_text("def f(:\n")
    with pytest.raises(CheckError, match="SyntaxError"):
        load_model(f"{tmp_path / 'syn.py'}:f")
    (tmp_path / "shape.py").write_text("def f():\n    return 3\n")
    with pytest.raises(CheckError, match=r"must return \(module, example_inputs"):
        load_model(f"{tmp_path / 'shape.py'}:f")


@pytest.mark.slow
def test_mobilenet_v2_check_end_to_end(tmp_path):
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tosa_verify.check", "lowering.zoo:mobilenet_v2",
                           "--report", str(tmp_path / "m.html")], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RESULT: PASS" in proc.stdout
    assert elapsed < 120, f"check took {elapsed:.0f} s"


PARTLY_SUPPORTED = (
    "import torch\n"
    "class M(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)\n"
    "        self.c2 = torch.nn.Conv2d(8, 4, 3, padding=1)\n"
    "    def forward(self, x):\n"
    "        return self.c2(torch.nextafter(self.c1(x), torch.ones(1)))  # nextafter: no TOSA lowering\n"
    "def build():\n"
    "    torch.manual_seed(0)\n"
    "    return M().eval(), (torch.randn(1, 3, 8, 8),)\n"
)


def test_partly_lowered_model_checks_every_partition(tmp_path, capsys):
    src = tmp_path / "partly.py"
    src.write_text(PARTLY_SUPPORTED)
    json_path, html_path, store = tmp_path / "p.json", tmp_path / "p.html", tmp_path / "goldens"
    code, out, err = run_check([f"{src}:build", "--json", str(json_path), "--report", str(html_path),
                                "--golden", str(store), "--update-golden"], capsys)
    assert code == 1 and "RESULT: FAIL (fully lowered)" in out
    assert "nextafter (aten.nextafter.default): operator not supported" in out
    # the Vela figure is the sum over the partitions, compiled here independently
    import lowering
    from ethosu.compiler import compile_tosa

    model, example = load_model(f"{src}:build").module, load_model(f"{src}:build").example_inputs
    lowered = lowering.lower(model, example)
    parts = lowered.partitions
    assert len(parts) == 2
    cycles = sum(compile_tosa(p.tosa, "ethos-u55-128").cycles for p in parts)
    assert f"{cycles:,} cycles over 2 partitions" in out
    assert "every operator of 2 partitions agrees" in out
    # drift per partition, on the values PyTorch computes for each partition's inputs: the second
    # partition's input is nextafter's output, quantized as the partition expects it
    assert "[4/7] drift vs float (2 partitions)" in err and "== partition tosa_1 (conv2d_1) ==" in out
    with torch.no_grad():
        fq = lowered.quantized_model(*example)
    data = json.loads(json_path.read_text())
    second = data["partitions"][1]["drift"]
    out_row = next(r for r in second["rows"] if r["tensor"] == second["outputs"][0])
    tosa_out = lowered.partition_models()[1].run(*example)[0]
    assert np.allclose(tosa_out.numpy(), fq.numpy(), atol=3 * float(lowered.partitions[1].output_qparams[0].s))
    assert out_row["total"]["sqnr_db"] > 20
    assert data["passed"] is False and [c["node"] for c in data["cpu_nodes"]] == ["nextafter"]
    # the whole model, run as deployed (partitions on TOSA, nextafter in PyTorch): its output is the
    # fake-quant model's within a step, and its SQNR against float is reported
    whole = lowered.run(*example)[0]
    assert np.allclose(whole.numpy(), fq.numpy(), atol=1.01 * float(lowered.partitions[1].output_qparams[0].s))
    with torch.no_grad():
        want = model(*example).double()
    sqnr = 10 * np.log10(float((want**2).sum()) / float(((whole.double() - want) ** 2).sum()))
    assert data["whole_model"].startswith(f"SQNR {sqnr:.1f} dB") and sqnr > 20
    assert f"CPU nodes in PyTorch) vs float: SQNR {sqnr:.1f} dB" in out
    # the report is written, with one section per partition and the CPU nodes
    page = html_path.read_text()
    assert "Nodes left on the CPU (1)" in page and "aten.nextafter.default" in page
    assert f"SQNR {sqnr:.1f} dB" in page  # the whole model's accuracy
    assert page.count("TOSA partition tosa_") == 2 and page.count("Per-layer SQNR along the network") == 2
    assert GoldenStore(store).cases() == ["partly.build/INT/tosa_0", "partly.build/INT/tosa_1"]
    code, out, _ = run_check([f"{src}:build", "--no-vela", "--golden", str(store), "--allow-cpu"], capsys)
    assert code == 0 and "partly.build/INT/tosa_1: identical" in out and "RESULT: PASS" in out


def test_fp_profile_skips_vela_and_passes(capsys):
    code, out, err = run_check(["lowering.zoo:mlp", "--profile", "FP"], capsys)
    assert code == 0 and "RESULT: PASS" in out
    assert "Vela compile ... skipped (Vela compiles INT-profile TOSA only)" in err


def test_two_build_factories_get_their_own_golden_cases(tmp_path, capsys):
    # both files define build(): the default case name is file stem + factory, so they do not collide
    store = tmp_path / "goldens"
    for stem, width in (("small", 3), ("wide", 5)):
        (tmp_path / f"{stem}.py").write_text(
            "import torch\n"
            "def build():\n"
            "    torch.manual_seed(0)\n"
            f"    return torch.nn.Sequential(torch.nn.Linear(4, {width}), torch.nn.ReLU()).eval(), "
            "(torch.randn(2, 4),)\n")
        code, out, _ = run_check([f"{tmp_path / stem}.py:build", "--no-vela", "--golden", str(store),
                                  "--update-golden"], capsys)
        assert code == 0 and f"recorded {stem}.build/INT" in out
    assert GoldenStore(store).cases() == ["small.build/INT", "wide.build/INT"]
    code, out, _ = run_check([f"{tmp_path / 'small'}.py:build", "--no-vela", "--golden", str(store)], capsys)
    assert code == 0 and "small.build/INT: identical" in out
