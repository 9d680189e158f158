"""Tensors with no elements (``x[:, :0]``, ``x.narrow(1, 2, 0)``, ``torch.zeros(0)``): TOSA 1.0
has no zero dimension (the reference model fails the graph at allocation, and its in-process
run crashes), so the lowering must never emit one.

FoldConstants takes a tensor with no elements as a constant (its value is known whatever it was
computed from), so a reduction of it folds (the sum of nothing is 0) and ``cat`` leaves it out;
a model output with no elements, or an op that still reads one, stays on the CPU. Every case
is checked against PyTorch (FP) and the fake-quant model (INT), and every TOSA graph made is
checked to declare no zero dimension.
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp, check_int

import lowering
import tosa_verify

gen = torch.Generator().manual_seed(5)


def _x(*shape):
    return torch.randn(*shape, generator=gen)


CASES = {
    "sum of an empty slice": (lambda x: x + x[:, :0].sum(), (4, 4)),
    "mean of an empty narrow, kept dims": (lambda x: x * 2 + x.narrow(1, 2, 0).sum(-1, keepdim=True), (3, 5)),
    "cat with an empty slice": (lambda x: torch.cat([x, x[:, :0] * 2], 1) + 1, (4, 4)),
    "cat with a legacy 1-D empty": (lambda x: torch.cat([x, torch.zeros(0)], 0) * 2, (6,)),
    "cat of empties and a tensor": (lambda x: torch.cat([x[:0], x, x[2:2]], 0).relu(), (3, 4)),
    "numel of an empty tensor": (lambda x: x * x[:0].numel() + x, (2, 3)),
    "empty batch of a reduction": (lambda x: x[:, :0].sum(0).sum() + x.amax(-1, keepdim=True), (4, 4)),
}


def _graphs(lm: lowering.LoweredModel) -> list[bytes]:
    return [lm.tosa] if lm.tosa is not None else [p.tosa for p in lm.partitions]


def _no_zero_dimension(lm: lowering.LoweredModel) -> None:
    for data in _graphs(lm):
        graph = tosa_verify.load(data)
        empty = [name for name, decl in graph.main.tensors.items() if 0 in tuple(decl.shape)]
        assert not empty, f"TOSA tensors with a zero dimension: {empty}"


@pytest.mark.parametrize("case", list(CASES))
def test_fp_lowers_whole_without_a_zero_dimension(case):
    fn, shape = CASES[case]
    lm = check_fp(Fn(fn), (_x(*shape),), atol=1e-6, rtol=1e-6)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes
    _no_zero_dimension(lm)


@pytest.mark.parametrize("case", list(CASES))
def test_int_lowers_whole_without_a_zero_dimension(case):
    fn, shape = CASES[case]
    lm = check_int(Fn(fn), (_x(*shape),), max_steps=0)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes
    _no_zero_dimension(lm)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_an_empty_output_is_computed_on_the_cpu(profile):
    x = _x(4, 4)
    model = Fn(lambda x: (x + 1, x[:0] * 3))
    lm = lowering.lower(model, (x,), profile=profile)
    _no_zero_dimension(lm)
    assert lm.tosa is None and [c.target for c in lm.cpu_nodes] == ["aten.slice.Tensor", "aten.mul.Tensor"]
    got = lm.run(x)
    want = model(x) if profile == "FP" else lm.quantized_model(x)
    assert tuple(got[1].shape) == (0, 4)
    # INT: within one int8 step of the fake-quant model (the output's range over 255 steps)
    step = float(want[0].max() - want[0].min()) / 255 if profile == "INT" else 0.0
    torch.testing.assert_close(got[0], want[0], atol=1.01 * step + 1e-6, rtol=0)


def test_an_op_reading_an_empty_tensor_stays_on_the_cpu():
    from lowering.api import ZERO_SIZED, _zero_sized

    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.zeros(3, 0)
    relu = g.call_function(torch.ops.aten.relu.default, (x,))
    relu.meta["val"] = torch.zeros(3, 0)
    y = g.placeholder("y")
    y.meta["val"] = torch.zeros(3, 2)
    cat = g.call_function(torch.ops.aten.cat.default, ([relu, y], 1))
    cat.meta["val"] = torch.zeros(3, 2)
    assert _zero_sized(relu) == ZERO_SIZED
    assert _zero_sized(cat) is None  # (cat leaves an empty input out)


def test_the_reference_run_of_an_invalid_graph_raises_and_the_process_survives():
    x = _x(4, 4)
    lm = lowering.lower(Fn(lambda x: x + 1), (x,), profile="FP")
    shapes = {"at": [0, 0], "size": [4, 0]}
    import numpy as np

    from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
    from tosa_verify.writer import to_flatbuffer

    block = Block("main", [Operator("CONST_SHAPE", {}, [], ["at"]), Operator("CONST_SHAPE", {}, [], ["size"]),
                           Operator("SLICE", {}, ["x", "at", "size"], ["s"]),
                           Operator("REDUCE_SUM", {"axis": 1, "nan_mode": "PROPAGATE"}, ["s"], ["y"])],
                  {"x": Tensor("x", (4, 4), "FP32"), "s": Tensor("s", (4, 0), "FP32"), "y": Tensor("y", (4, 1), "FP32")},
                  ["x"], ["y"], {n: Tensor(n, (2,), "SHAPE", data=np.array(v, np.int64)) for n, v in shapes.items()})
    lm.tosa = to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [block])]))
    with pytest.raises(tosa_verify.TosaValidationError, match="dim == 0"):
        lm.run_raw([x.numpy()])
