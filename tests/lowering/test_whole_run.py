"""A partly lowered model run whole (``LoweredModel.run``): TOSA partitions on the reference model,
CPU nodes in PyTorch, against the float model (FP) and the float64 fake-quant model (INT)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.fx as fx
from lowering_checks import judge_whole
from quirk_models import build
from test_quirks import CPU_ONLY

import lowering
import tosa_verify
from lowering.lowered import LoweredModel
from lowering.whole_run import WholeRunError, run_whole, source_node


class NextafterBetween(torch.nn.Module):
    """relu + 1 (TOSA), nextafter (CPU), * 2 + (TOSA, reading both)."""

    def forward(self, x):
        y = torch.relu(x) + 1
        return torch.nextafter(y, x) * 2 + y


class LateInput(torch.nn.Module):
    """One partition {relu, add} whose second input (a CPU nextafter) comes, in graph order, after
    another CPU node that reads the partition's output: the partition must wait for it."""

    def forward(self, x):
        a = torch.relu(x)
        d = torch.nextafter(a, x + 2)
        c = torch.nextafter(x, x + 3)
        return d, a + c


def _example():
    torch.manual_seed(0)
    return (torch.randn(2, 3),)


@pytest.mark.parametrize("model", [NextafterBetween(), LateInput()], ids=["nextafter_between", "late_input"])
@pytest.mark.parametrize("profile", ["INT", "FP"])
def test_partitioned_model_runs_whole(model, profile):
    example = _example()
    lm = lowering.lower(model, example, profile=profile)
    assert lm.tosa is None and {c.target for c in lm.cpu_nodes} == {"aten.nextafter.default"}
    # INT: the TOSA partitions are bit-exact and the CPU nodes see the same dequantized values
    row = judge_whole(lm, model, example)
    assert row["ok"], row


def test_late_input_partition_is_one_graph():
    # the case the evaluation order exists for: relu and the add are one TOSA graph
    lm = lowering.lower(LateInput(), _example(), profile="FP")
    groups = [sorted(p.nodes) for p in lm.partitions]
    assert any("relu" in g and len(g) > 1 for g in groups), groups


@pytest.mark.parametrize("profile", ["INT", "FP"])
@pytest.mark.parametrize("name", sorted(CPU_ONLY))
def test_quirk_models_with_cpu_nodes_run_whole_and_exact(name, profile):
    model, example, calibration = build(name)
    lm = lowering.lower(model, example, profile=profile, calibration=calibration)
    assert lm.cpu_nodes and lm.tosa is None
    row = judge_whole(lm, model, example)
    assert row["ok"], row


def test_fp_partition_inputs_from_a_decomposed_node():
    # FP: the float model has "add" where the lowered graph has its decomposition "add_tensor";
    # the second partition's inputs were looked up by the lowered name and not found
    example = _example()
    lm = lowering.lower(NextafterBetween(), example, profile="FP")
    second = lm.partition_models()[1]
    assert second.input_names == ["nextafter", "add_tensor"]
    y = torch.relu(example[0]) + 1
    nextafter, add = second.quantize_inputs(*example)
    np.testing.assert_array_equal(add, y.numpy())
    np.testing.assert_array_equal(nextafter, torch.nextafter(y, example[0]).numpy())


def test_boundary_inside_a_decomposition_is_refused_by_name():
    # a lowered graph where "sub_part" is an intermediate of logsumexp's decomposition (only
    # read inside it): the float model has no such value, so no whole run can bind it
    lowered = fx.Graph()
    x = lowered.placeholder("x")
    part = lowered.call_function(torch.ops.aten.sub.Tensor, (x, x))
    part.name, part.meta["orig_node"] = "sub_part", "logsumexp"
    last = lowered.call_function(torch.ops.aten.exp.default, (part,))
    last.meta["orig_node"] = "logsumexp"
    lowered.output(last)
    lm = LoweredModel(profile="FP", tosa=None, partitions=[], cpu_nodes=[], provenance={},
                      quant_params={}, float_model=None, quantized_model=None,
                      graph_module=fx.GraphModule(torch.nn.Module(), lowered))
    source = fx.Graph()
    source.output(source.call_function(torch.logsumexp, (source.placeholder("x"), 0)))
    nodes = {n.name: n for n in source.nodes}
    with pytest.raises(WholeRunError, match="'sub_part' has no node in the PyTorch model.*logsumexp"):
        source_node(lm, "sub_part", nodes)
    # the decomposition's result stands for the node it came from
    assert source_node(lm, last.name, nodes).name == "logsumexp"


def test_whole_run_without_a_pytorch_graph_says_so():
    lm = LoweredModel(profile="FP", tosa=None, partitions=[], cpu_nodes=[], provenance={},
                      quant_params={}, float_model=None, quantized_model=None)
    with pytest.raises(WholeRunError, match="keeps no PyTorch graph"):
        run_whole(lm, torch.ones(1))


class ScalarArgs(torch.nn.Module):
    """Python numbers among the forward arguments: export keeps a placeholder for each. The
    topk is over 2048 elements a row, beyond the sort decomposition's size bound
    (lowering.passes.limits.QUADRATIC_ELEMENTS), so it stays on the CPU."""

    def forward(self, x, k: int, alpha: float, y):
        return torch.topk(x * alpha, k).values + y[..., :k]


@pytest.mark.parametrize("profile", ["INT", "FP"])
def test_python_number_arguments_bind_to_their_placeholders(profile):
    torch.manual_seed(0)
    model, example = ScalarArgs(), (torch.randn(2, 2048), 3, 0.5, torch.randn(2, 2048))
    lm = lowering.lower(model, example, profile=profile)
    assert {c.target for c in lm.cpu_nodes} == {"aten.topk.default", "getitem"}
    row = judge_whole(lm, model, example)
    assert row["ok"], row
    # and each partition's inputs, as drift and check take them, come from PyTorch's values
    for part in lm.partition_models():
        block = tosa_verify.load(part.tosa).main
        assert [a.shape for a in part.quantize_inputs(*example)] == \
            [tuple(block.tensors[n].shape) for n in block.inputs]
