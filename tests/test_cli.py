"""The `tosa-verify` verbs run, info, lower and golden: outputs, exit codes, one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tosa_verify
from tosa_verify.cli import main
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer


@pytest.fixture
def add_graph(tmp_path):
    """y = a + b on int32 [2, 3], as a file."""
    tensors = {n: Tensor(n, (2, 3), "INT32") for n in ("a", "b", "y")}
    block = Block("main", [Operator("ADD", {}, ["a", "b"], ["y"])], tensors, ["a", "b"], ["y"])
    path = tmp_path / "add.tosa"
    path.write_bytes(to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [block])])))
    return path


def test_run_writes_outputs_equal_to_the_reference(add_graph, tmp_path, capsys):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.full((2, 3), 40, np.int32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "out"
    assert main(["run", str(add_graph), "--input", str(tmp_path / "a.npy"), "--input",
                 str(tmp_path / "b.npy"), "--output-dir", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out / "output_0.npy"), tosa_verify.reference.run(add_graph, [a, b])[0])
    assert "y: int32 [2, 3]" in capsys.readouterr().out


def test_run_with_a_wrong_input_shape_exits_2_naming_the_tensor(add_graph, tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros((3, 2), np.int32))
    np.save(tmp_path / "b.npy", np.zeros((2, 3), np.int32))
    code = main(["run", str(add_graph), "--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy"),
                 "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "input 'a'" in err and "[3, 2]" in err and len(err.strip().splitlines()) == 1


def test_info_describes_the_graph(add_graph, capsys):
    assert main(["info", str(add_graph)]) == 0
    out = capsys.readouterr().out
    assert "version:     1.0.0" in out
    assert "PRO-INT" in out
    assert "ADD                      1" in out


def test_info_on_a_truncated_file_exits_2(add_graph, tmp_path, capsys):
    bad = tmp_path / "cut.tosa"
    bad.write_bytes(add_graph.read_bytes()[:60])
    assert main(["info", str(bad)]) == 2
    assert "error:" in capsys.readouterr().err


def test_lower_writes_a_graph_the_reference_model_runs(tmp_path, capsys):
    out = tmp_path / "lowered"
    assert main(["lower", "lowering.zoo:mlp", "--profile", "FP", "-o", str(out)]) == 0
    graph = tosa_verify.load(out / "model.tosa")
    assert graph.version[:3] == (1, 0, 0)
    assert (out / "provenance.json").exists() and (out / "quant_params.json").exists()
    import torch

    from lowering import zoo

    model, example, _ = zoo.mlp()
    x = example[0].numpy().astype(np.float32)
    theirs = tosa_verify.reference.run(graph, [x])[0]
    np.testing.assert_allclose(tosa_verify.run(graph, [x])[0], theirs, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(theirs, model.eval()(*example).numpy(), atol=1e-3, rtol=1e-3)
    assert "mlp: FP" in capsys.readouterr().out
    assert main(["lower", str(tmp_path / "missing.py") + ":build", "-o", str(out)]) == 2


def test_lower_refuses_a_factory_returning_a_function_not_a_module(tmp_path, capsys):
    model_file = tmp_path / "lam.py"
    model_file.write_text("import torch\n\ndef build():\n    return (lambda x: x, (torch.zeros(1, 2),))\n")
    assert main(["lower", f"{model_file}:build", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "must return (module, example_inputs[, calibration]) with a torch.nn.Module, got function" in err, err
    assert "AttributeError" not in err and err.count("\n") == 1


def test_lower_quantization_options_reach_the_graph(tmp_path):
    """--activations int16 gives int16 graph I/O; --observer minmax never clips the calibration."""
    import json

    out16 = tmp_path / "int16"
    assert main(["lower", "lowering.zoo:mlp", "--activations", "int16", "-o", str(out16)]) == 0
    graph = tosa_verify.load(out16 / "model.tosa")
    main_block = graph.main
    assert {main_block.tensors[n].dtype for n in main_block.inputs + main_block.outputs} == {"INT16"}
    assert json.loads((out16 / "quant_params.json").read_text())["x"]["qmax"] == 32767

    from lowering import zoo

    _, _, calibration = zoo.mlp()
    seen = torch.cat([b[0] for b in calibration])
    ranges = {}
    for observer in ("minmax", "histogram"):
        out = tmp_path / observer
        assert main(["lower", "lowering.zoo:mlp", "--observer", observer, "-o", str(out)]) == 0
        qp = json.loads((out / "quant_params.json").read_text())["x"]
        ranges[observer] = ((qp["qmax"] - qp["zero_point"][0]) * qp["scale"][0], qp["scale"][0])
    # min/max covers the largest calibration value (up to the zero point's rounding, half a
    # step); the histogram's L2-optimal range is narrower
    (minmax_top, minmax_step), (histogram_top, _) = ranges["minmax"], ranges["histogram"]
    assert minmax_top + minmax_step / 2 >= float(seen.max()) > histogram_top


def test_lower_exact_int16_lookups_option(tmp_path, capsys):
    """--exact-int16-lookups: rsqrt near 0, hundreds of steps off as an int16 TABLE, becomes an
    exact GATHER; without the flag a TABLE; with int8 activations a usage error (exit 2)."""
    from tosa_verify.profiles import op_histogram

    model_file = tmp_path / "steep.py"
    model_file.write_text(
        "import torch\n"
        "class Steep(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.rsqrt(x.abs() + 0.1)\n"
        "def build():\n"
        "    return Steep(), (torch.randn(1, 64),)\n")
    ops = {}
    for flag in ([], ["--exact-int16-lookups"]):
        out = tmp_path / ("exact" if flag else "table")
        assert main(["lower", f"{model_file}:build", "--activations", "int16", *flag, "-o", str(out)]) == 0
        ops[bool(flag)] = op_histogram(tosa_verify.load(out / "model.tosa"))
    assert "TABLE" in ops[False] and "GATHER" not in ops[False]
    assert "GATHER" in ops[True] and "TABLE" not in ops[True]
    capsys.readouterr()
    assert main(["lower", f"{model_file}:build", "--exact-int16-lookups", "-o", str(tmp_path / "x")]) == 2
    assert "--exact-int16-lookups needs --activations int16" in capsys.readouterr().err


def test_golden_verb_gates_on_regressions(tmp_path, capsys):
    from golden import Golden, GoldenStore, tensor_stats

    def golden(shift: int) -> Golden:
        y = (np.arange(8, dtype=np.int16) + shift).astype(np.int8)
        return Golden(manifest={}, inputs={"x": np.zeros(8, np.int8)}, outputs={"y": y},
                      stats={"y": tensor_stats(y, scale=0.1)})

    GoldenStore(tmp_path / "old").write("m/INT", golden(0))
    GoldenStore(tmp_path / "same").write("m/INT", golden(0))
    GoldenStore(tmp_path / "new").write("m/INT", golden(1))
    assert main(["golden", str(tmp_path / "old"), str(tmp_path / "same")]) == 0
    assert main(["golden", str(tmp_path / "old"), str(tmp_path / "new"), "--json", str(tmp_path / "r.json")]) == 1
    assert "NUMERICAL-REGRESSION" in capsys.readouterr().out
    assert '"failed": true' in (tmp_path / "r.json").read_text()
    (GoldenStore(tmp_path / "new").live_dir("m/INT") / "manifest.json").write_text("{ broken")
    assert main(["golden", str(tmp_path / "old"), str(tmp_path / "new")]) == 2
