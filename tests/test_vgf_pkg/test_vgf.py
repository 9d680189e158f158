"""VGF: our lowerings compiled by the ML SDK model converter and run on a Vulkan device agree with
the interpreter -- bit for bit in the INT profile, within the spec's compliance bounds (operator
by operator, judged against the reference model) in the FP profile.

Every expectation comes from an independent executor: our interpreter (itself bit-exact against
``tosa_reference_model``) and the reference model for the local FP verdicts.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import numpy as np
import pytest

import tosa_verify
import vgf
from tosa_verify.diff import random_inputs
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer

from .helpers import diff_within_compliance, outputs_agree_bit_exact

pytestmark = pytest.mark.usefixtures("vgf_device")


@pytest.mark.parametrize("name", ["digits_cnn", "mlp", "ds_cnn", "resnet", "transformer_block"])
def test_zoo_int_models_run_bit_exact_on_vgf(name, zoo_lowered):
    outputs_agree_bit_exact(zoo_lowered(name, "INT")[3].tosa)


@pytest.mark.parametrize("name", ["digits_cnn", "mlp", "ds_cnn", "resnet", "transformer_block"])
def test_zoo_fp_models_agree_operator_by_operator_within_compliance(name, zoo_lowered):
    diff_within_compliance(zoo_lowered(name, "FP")[3].tosa)


def test_capture_equals_the_interpreters_tensors_in_int(zoo_lowered):
    tosa = zoo_lowered("digits_cnn", "INT")[3].tosa
    graph = tosa_verify.load(tosa)
    inputs = random_inputs(graph, 3)
    theirs = vgf.capture(graph, inputs).tensors
    ours = tosa_verify.run(graph, inputs, capture=True).tensors
    computed = {n for op in graph.main.operators if op.op not in ("CONST", "CONST_SHAPE") for n in op.outputs}
    assert computed <= set(theirs)
    for name in computed:
        np.testing.assert_array_equal(theirs[name], ours[name], err_msg=name)


def _with_one_rescale_changed(graph: Graph, inputs) -> tuple[Graph, int]:
    """A copy of ``graph`` whose first RESCALE with a visible effect has a doubled multiplier."""
    base = tosa_verify.run(graph, inputs, capture=True).tensors
    for index, op in enumerate(graph.main.operators):
        if op.op != "RESCALE":
            continue
        changed = copy.deepcopy(graph)
        mult = changed.main.tensors[op.inputs[1]]
        mult.data = (np.asarray(mult.data).astype(np.int64) // 2 + (1 << 29)).astype(mult.data.dtype)
        after = tosa_verify.run(changed, inputs, capture=True).tensors[op.outputs[0]]
        if not np.array_equal(after, base[op.outputs[0]]):
            return changed, index
    raise AssertionError("no RESCALE whose change shows")


class _ExecutesAnotherGraph(vgf.VgfExecutor):
    """VGF that runs a different graph than it is given: a stand-in for a converter bug."""

    def __init__(self, graph: Graph) -> None:
        super().__init__()
        self.graph = graph

    def capture(self, graph, inputs):
        return super().capture(self.graph, inputs)


def test_diff_names_the_operator_vgf_computes_differently(zoo_lowered):
    graph = tosa_verify.load(zoo_lowered("mlp", "INT")[3].tosa)
    inputs = random_inputs(graph, 1)
    changed, index = _with_one_rescale_changed(graph, inputs)
    report = tosa_verify.diff(graph, inputs, engine=_ExecutesAnotherGraph(changed), against="interpreter")
    first = report.first_divergence
    assert first is not None and (first.index, first.op) == (index, "RESCALE"), report.format_table()
    assert first.outputs[0].inputs_identical
    assert not report.ok
    # everything before the changed operator agrees exactly
    assert all(op.status == "exact" for op in report.ops if op.index < index)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p))
    return subprocess.run([sys.executable, "-m", "tosa_verify.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_cli_compile_run_and_diff_on_vgf(tmp_path, zoo_lowered):
    tosa = zoo_lowered("mlp", "INT")[3].tosa
    graph = tosa_verify.load(tosa)
    model = tmp_path / "model.tosa"
    model.write_bytes(tosa)
    inputs = random_inputs(graph, 2)
    changed, index = _with_one_rescale_changed(graph, inputs)
    bad = tmp_path / "changed.tosa"
    bad.write_bytes(to_flatbuffer(changed))

    proc = _cli("compile", str(model), "--target", "vgf", "-o", str(tmp_path / "model.vgf"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "model.vgf").read_bytes() == vgf.compile_tosa(model).vgf
    assert "model-converter" in proc.stdout

    x = tmp_path / "x.npy"
    np.save(x, inputs[graph.main.inputs[0]])
    proc = _cli("run", str(model), "--executor", "vgf", "--input", str(x), "--output-dir", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output_0.npy"), tosa_verify.run(graph, inputs)[0])

    # the changed graph on VGF against the original graph (also on VGF): the changed op is named
    proc = _cli("diff", str(bad), "--executor", "vgf", "--against", str(model), "--seed", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"first divergence: operator {index} RESCALE" in proc.stdout


def test_converter_crash_is_a_one_line_error_and_the_caller_survives():
    # a constant tensor without the CONST operator that produces it: model-converter 0.11.0 aborts
    tensors = {"a": Tensor("a", (1, 4), "INT32"), "w": Tensor("w", (1, 4), "INT32", np.ones((1, 4), np.int32)),
               "c": Tensor("c", (1, 4), "INT32")}
    block = Block("main", [Operator("ADD", {}, ["a", "w"], ["c"])], tensors, ["a"], ["c"])
    data = to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [block])]))
    with pytest.raises(vgf.VgfCompileError) as err:
        vgf.compile_tosa(data)
    message = str(err.value)
    assert message.startswith("model-converter: ") and "\n" not in message
    assert err.value.step == "model-converter"
    assert isinstance(err.value, tosa_verify.TosaError)


def test_runtime_environment_is_private(zoo_lowered):
    tosa = zoo_lowered("mlp", "INT")[3].tosa
    before = dict(os.environ)
    vgf.run(tosa, random_inputs(tosa_verify.load(tosa), 0))
    assert dict(os.environ) == before
    from vgf._runtime import runtime_env

    env = runtime_env()
    graph_dir, tensor_dir = env["VK_LAYER_PATH"].split(os.pathsep)
    # the Graph layer's manifest directory comes first, each manifest in its own directory
    assert os.listdir(graph_dir) == ["VkLayer_Graph.json"] and os.listdir(tensor_dir) == ["VkLayer_Tensor.json"]


def test_wrong_inputs_are_rejected_before_running(zoo_lowered):
    tosa = zoo_lowered("mlp", "INT")[3].tosa
    with pytest.raises(tosa_verify.TosaInputError):
        vgf.run(tosa, [np.zeros((1, 2), np.float32)])


def test_available_reports_ok_here():
    assert vgf.available() == (True, "ok")


def test_runner_timeout_is_a_one_line_error(zoo_lowered):
    program = vgf.compile_tosa(zoo_lowered("mlp", "INT")[3].tosa)
    inputs = random_inputs(program.graph, 0)
    with pytest.raises(vgf.VgfRuntimeError) as err:
        vgf.run(program, inputs, timeout=0.01)
    assert str(err.value).startswith("scenario-runner: timed out after 0.01 s") and "\n" not in str(err.value)


def test_missing_tool_says_what_to_install(monkeypatch):
    from vgf import _runtime

    monkeypatch.setattr(_runtime, "_package_dir", lambda package: None)
    _runtime.tool_path.cache_clear()
    try:
        with pytest.raises(vgf.VgfUnavailableError, match="pip install ai-ml-sdk-model-converter"):
            _runtime.tool_path("model-converter")
        with pytest.raises(vgf.VgfUnavailableError, match="pip install ai-ml-emulation-layer-for-vulkan"):
            _runtime.emulation_layer_dir()
    finally:
        _runtime.tool_path.cache_clear()
