"""model-converter 0.11.0 compiles an elementwise identity as a view of its input: with both tensors
graph outputs, one comes back as zeros. ``vgf`` refuses such a graph naming the operator, and a
capture (``diff --executor vgf``) leaves the view out and rebuilds it, so the zoo's FP transformer
block (LayerNorm weight ones, bias zeros) agrees operator by operator."""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
import vgf
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer
from vgf.aliases import aliases

pytestmark = pytest.mark.usefixtures("vgf_device")


def _mul_then_identity(ones: float, outputs: tuple[str, ...]) -> Graph:
    """t = MUL(x, y); u = MUL(t, const filled with ``ones``)."""
    tensors = {"x": Tensor("x", (1, 16, 64), "FP32"), "y": Tensor("y", (1, 16, 1), "FP32"),
               "s": Tensor("s", (1,), "INT8", np.zeros(1, np.int8)),
               "w": Tensor("w", (1, 1, 64), "FP32", np.full((1, 1, 64), ones, np.float32)),
               "t": Tensor("t", (1, 16, 64), "FP32"), "u": Tensor("u", (1, 16, 64), "FP32")}
    ops = [Operator("CONST", {}, [], ["s"]), Operator("CONST", {}, [], ["w"]),
           Operator("MUL", {}, ["x", "y", "s"], ["t"]), Operator("MUL", {}, ["t", "w", "s"], ["u"])]
    return Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, ["x", "y"], list(outputs))])])


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((1, 16, 64)).astype(np.float32), rng.standard_normal((1, 16, 1)).astype(np.float32)]


def test_identity_and_its_input_both_outputs_is_refused_naming_the_operator():
    graph = _mul_then_identity(1.0, ("t", "u"))
    assert [(a.op.op, a.source) for a in aliases(graph.main)] == [("MUL", "t")]
    with pytest.raises(vgf.VgfCompileError) as err:
        vgf.compile_tosa(to_flatbuffer(graph))
    assert "MUL 'u' multiplies by ones" in str(err.value) and "model-converter 0.11.0" in str(err.value)


@pytest.mark.parametrize("ones, outputs", [(1.0, ("u",)), (2.0, ("t", "u"))])
def test_the_same_graph_runs_when_only_one_is_an_output_or_no_identity(ones, outputs):
    graph = _mul_then_identity(ones, outputs)
    for a, b in zip(vgf.run(to_flatbuffer(graph), _inputs()), tosa_verify.run(graph, _inputs()), strict=True):
        np.testing.assert_array_equal(a, b)


def test_capture_rebuilds_the_identity_and_diff_agrees():
    graph = _mul_then_identity(1.0, ("u",))
    report = tosa_verify.diff(graph, _inputs(), engine=vgf.VgfExecutor(), against="interpreter")
    assert report.ok and not report.error, report.format_table()
    assert set(report.counts()) == {"exact"} and len(report.ops) == 2
