"""ExecuTorch delegation (lowering.partitioner) and per-partition TOSA from lowering.lower.

ExecuTorch's runtime has no backend for our payload (it reports "Backend TosaVerifyBackend is
not registered"), so the .pte is not executed here; instead the delegate payloads are read
back and run with the TOSA reference model and our interpreter, and the partitioned program
is evaluated with the payloads standing in for the delegate calls.
"""

from __future__ import annotations

import doctest
import json
import operator

import numpy as np
import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import tosa_reference_model as trm
from executorch.exir import to_edge, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import lowering
import lowering.api
import tosa_verify
from lowering.api import lower_graph_module
from lowering.errors import LoweringError
from lowering.ops import REGISTRY
from lowering.partitioner import (
    BACKEND_ID,
    DelegateSpec,
    TosaPartitioner,
    TosaVerifyBackend,
    delegate_payloads,
    to_aten_module,
)
from lowering.zoo import MODELS


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class WithMaskedScatter(nn.Module):
    """conv -> relu -> mean -> masked_scatter -> linear; aten.masked_scatter (a core ATen op, as
    an ExecuTorch program's CPU part needs) has no TOSA lowering."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)
        self.register_buffer("reference", torch.linspace(0.5, 1.5, 8))
        self.register_buffer("mask", torch.arange(8) % 3 == 0)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean((2, 3))
        return self.fc(y.masked_scatter(self.mask, self.reference))


def _inputs(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _quantize(model, example):
    """PT2E with our TosaQuantizer, then torch.export: what a user hands ExecuTorch."""
    gm = torch.export.export(model, example).module()
    prepared = prepare_pt2e(gm, lowering.TosaQuantizer(example_inputs=example))
    for seed in range(4):
        prepared(_inputs(example[0].shape, seed))
    prepared(*example)
    converted = convert_pt2e(prepared)
    return converted, torch.export.export(converted, example)


def _run_lowered(edge, *inputs):
    """Evaluate a lowered edge program, running each delegate's TOSA payload with the
    reference model (the CPU ops run as torch ops)."""
    ep = edge.exported_program()

    class Run(fx.Interpreter):
        def call_function(self, target, args, kwargs):
            if target is torch.ops.higher_order.executorch_call_delegate:
                lowered, *values = args
                outs, status = trm.run(lowered.processed_bytes,
                                       [np.ascontiguousarray(v.numpy()) for v in values])
                assert "VALID" in str(status)
                return tuple(torch.from_numpy(np.array(o)) for o in outs)
            return super().call_function(target, args, kwargs)

    user = iter(inputs)
    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            args.append(next(user))
        else:
            args.append(ep.state_dict[spec.target] if spec.target in ep.state_dict
                        else ep.constants[spec.target])
    return Run(ep.graph_module).run(*args)


def _delegate_calls(edge) -> int:
    return len(_lowered_modules(edge))


def _output_step(edge) -> float:
    """The quantization step of a quantized program's (first) output: the scale its CPU-side
    dequantize uses."""
    output = edge.exported_program().graph.output_node()
    return output.args[0][0].args[1]


def _lowered_modules(edge) -> list:
    """The LoweredBackendModule of every delegate call, in execution order."""
    gm = edge.exported_program().graph_module
    return [getattr(gm, n.args[0].target) for n in gm.graph.nodes
            if n.target is torch.ops.higher_order.executorch_call_delegate]


def _same_tosa_up_to_tensor_names(a: bytes, b: bytes) -> bool:
    """Whether two TOSA graphs have the same operators, attributes, tensor shapes, dtypes and
    data, and the same inputs and outputs, once the tensor names of ``a`` are mapped to ``b``'s."""
    ga, gb = tosa_verify.load(a).main, tosa_verify.load(b).main
    renamed: dict[str, str] = {}

    def same_tensor(x: str, y: str) -> bool:
        if renamed.setdefault(x, y) != y:
            return False
        tx, ty = ga.tensors.get(x) or ga.shapes[x], gb.tensors.get(y) or gb.shapes[y]
        if (tx.shape, tx.dtype, tx.data is None) != (ty.shape, ty.dtype, ty.data is None):
            return False
        return tx.data is None or np.array_equal(tx.data, ty.data)

    if len(ga.operators) != len(gb.operators):
        return False
    for oa, ob in zip(ga.operators, gb.operators, strict=True):
        if (oa.op, oa.attrs, len(oa.inputs), len(oa.outputs)) != \
                (ob.op, ob.attrs, len(ob.inputs), len(ob.outputs)):
            return False
        if not all(same_tensor(x, y) for x, y in zip(oa.inputs + oa.outputs,
                                                      ob.inputs + ob.outputs, strict=True)):
            return False
    return [renamed.get(t) for t in ga.inputs] == gb.inputs and \
        [renamed.get(t) for t in ga.outputs] == gb.outputs


@pytest.fixture
def pipeline_runs(monkeypatch) -> list[str]:
    """The profile of every pass-pipeline run made during the test: lower() and the
    partitioner both run the pipeline through ``lowering.api.run_pipeline``."""
    runs: list[str] = []
    run_pipeline = lowering.api.run_pipeline

    def counted(gm, ctx, *args, **kwargs):
        runs.append(ctx.profile)
        return run_pipeline(gm, ctx, *args, **kwargs)

    monkeypatch.setattr(lowering.api, "run_pipeline", counted)
    return runs


@pytest.fixture(scope="module")
def small_cnn():
    torch.manual_seed(0)
    model = SmallCNN().eval()
    example = (_inputs((1, 1, 8, 8), 100),)
    calibration = [(_inputs((1, 1, 8, 8), s),) for s in range(4)] + [example]
    lm = lowering.lower(model, example, profile="INT", calibration=calibration)
    return lm, torch.export.export(lm.quantized_model, example)


def test_quantized_cnn_pte_payload_is_our_tosa(small_cnn, tmp_path):
    lm, ep = small_cnn
    part = TosaPartitioner("INT")
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    assert part.cpu_nodes == [] and len(part.partitions) == 1
    # only the input quantize and the output dequantize stay on the CPU
    cpu_ops = sorted(str(n.target).split(".")[-2] for n in edge.exported_program().graph.nodes
                     if n.op == "call_function" and "delegate" not in str(n.target)
                     and n.target is not operator.getitem)
    assert cpu_ops == ["dequantize_per_tensor", "quantize_per_tensor"]

    pte = tmp_path / "small_cnn.pte"
    pte.write_bytes(edge.to_executorch().buffer)
    in_file = delegate_payloads(pte)
    assert [backend for backend, _ in in_file] == [BACKEND_ID]
    payload = in_file[0][1]
    assert delegate_payloads(edge) == in_file  # the LoweredBackendModule's processed_bytes

    graph = tosa_verify.load(payload)
    assert graph.version[:3] == (1, 0, 0)
    for seed in range(3):
        raw = lm.quantize_inputs(_inputs((1, 1, 8, 8), seed))
        expected = lm.run_raw(raw)
        outs, status = trm.run(payload, [np.ascontiguousarray(r) for r in raw])
        assert "VALID" in str(status)
        assert outs[0].dtype == np.int8 and np.array_equal(outs[0], expected[0])
        assert np.array_equal(tosa_verify.run(graph, raw)[0], expected[0])

    # ExecuTorch's runtime reads the program; running it needs a runtime for our backend
    from executorch.extension.pybindings import portable_lib

    program = portable_lib._load_program_from_buffer(pte.read_bytes())
    assert program.num_methods() == 1 and program.get_method_name(0) == "forward"
    assert BACKEND_ID not in portable_lib._get_registered_backend_names()


def test_unsupported_op_stays_on_cpu_between_delegates():
    assert "aten.masked_scatter.default" not in lowering.SUPPORTED_OPS
    torch.manual_seed(1)
    model = WithMaskedScatter().eval()
    example = (_inputs((1, 3, 8, 8), 7),)
    converted, ep = _quantize(model, example)
    part = TosaPartitioner("INT")
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    assert [(c.target, c.reason) for c in part.cpu_nodes] == [
        ("aten.masked_scatter.default", "operator not supported by the TOSA lowering")]
    assert _delegate_calls(edge) == 2
    payloads = delegate_payloads(edge)
    assert [b for b, _ in payloads] == [BACKEND_ID, BACKEND_ID]
    for _, payload in payloads:  # int8 in, int8 out: the boundary Q/DQ stay on the CPU
        graph = tosa_verify.load(payload)
        dtypes = {graph.main.tensors[t].dtype for t in (*graph.main.inputs, *graph.main.outputs)}
        assert dtypes == {"INT8"}
    # delegates + CPU masked_scatter reproduce the fake-quantized model within one output step
    for seed in range(3):
        x = _inputs((1, 3, 8, 8), seed)
        got = _run_lowered(edge, x)[0]
        torch.testing.assert_close(got, converted(x), atol=_output_step(edge) * 1.01, rtol=0)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_pass_pipeline_runs_once_plus_once_per_partition(profile, pipeline_runs):
    """The ATen-stage analysis runs the pipeline once, over the whole program (its trials
    emit partitions cut from that); the edge stage lowers each partition once; the backend
    reuses those bytes. Each payload is what the backend lowered before this reuse existed,
    and the TOSA lower() writes for that partition, under ExecuTorch's node names."""
    torch.manual_seed(1)
    example = (_inputs((1, 3, 8, 8), 7),)
    model = WithMaskedScatter().eval()
    if profile == "INT":
        model, ep = _quantize(model, example)
    else:
        ep = torch.export.export(model, example)
    lm = lowering.lower(model, example, profile=profile)
    pipeline_runs.clear()
    part = TosaPartitioner(profile)
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    assert _delegate_calls(edge) == len(part.partitions) == len(lm.partitions) == 2
    assert len(pipeline_runs) == 1 + len(part.partitions)
    assert not lowering.partitioner._PARTITION_TOSA  # the backend took every kept TOSA
    for lowered, expected in zip(_lowered_modules(edge), lm.partitions, strict=True):
        fresh, _ = lower_graph_module(to_aten_module(lowered.original_module), profile)
        assert lowered.processed_bytes == fresh
        assert _same_tosa_up_to_tensor_names(lowered.processed_bytes, expected.tosa)


#: The CPU node reason for a node whose visitor raised RuntimeError("visitor broke").
_BROKEN_VISITOR = "lowering failed: RuntimeError: visitor broke"


@pytest.fixture(params=[torch.ops.aten.relu.default, torch.ops.aten.linear.default],
                ids=["relu", "linear"])
def broken_visitor(request, monkeypatch):
    """An op whose visitor raises RuntimeError("visitor broke") during the test."""

    def broken(em, node):
        raise RuntimeError("visitor broke")

    monkeypatch.setitem(REGISTRY, request.param, broken)
    return request.param


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_lower_keeps_nodes_a_visitor_refuses_on_cpu(broken_visitor, profile):
    """A visitor that raises does not fail lower(): its nodes are reported in cpu_nodes, each
    named, with the error as the reason, and the rest is lowered as partitions."""
    torch.manual_seed(2)
    x = _inputs((1, 1, 8, 8), 3)
    lm = lowering.lower(SmallCNN().eval(), (x,), profile=profile)
    assert lm.tosa is None and lm.partitions and lm.cpu_nodes
    refused = {n.name for n in lm.graph_module.graph.nodes if n.target is broken_visitor}
    assert {c.node for c in lm.cpu_nodes} == refused
    assert {(c.target, c.reason) for c in lm.cpu_nodes} == {(str(broken_visitor), _BROKEN_VISITOR)}


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_partitioner_keeps_nodes_a_visitor_refuses_on_cpu(broken_visitor, profile):
    """A visitor that raises does not fail the partitioner: the nodes it was to lower (linear's
    decomposition, once linear is not kept whole) stay on the CPU, each named, with the error
    as the reason, and the delegates plus the CPU ops still compute the model. (In INT a
    neighbour may stay too, for its own reason: a conv whose float result the relu reads.)"""
    torch.manual_seed(2)
    model = SmallCNN().eval()
    x = _inputs((1, 1, 8, 8), 3)
    if profile == "INT":
        model, ep = _quantize(model, (x,))
    else:
        ep = torch.export.export(model, (x,))
    part = TosaPartitioner(profile)
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    graph_nodes = {n.name: n for n in edge.exported_program().graph.nodes}
    assert _delegate_calls(edge) == len(part.partitions) >= 1
    assert any(cpu.reason == _BROKEN_VISITOR for cpu in part.cpu_nodes)
    for cpu in part.cpu_nodes:
        assert cpu.reason and cpu.node in graph_nodes
        assert "delegate" not in str(graph_nodes[cpu.node].target)
    tolerance = {"atol": _output_step(edge) * 1.01, "rtol": 0} if profile == "INT" else \
        {"atol": 1e-5, "rtol": 1e-4}
    torch.testing.assert_close(_run_lowered(edge, x)[0], model(x), **tolerance)


def test_backend_error_names_node_and_reason():
    """Handed a partition it cannot lower, the backend says which node and why."""
    ep = torch.export.export(WithMaskedScatter().eval(), (_inputs((1, 3, 8, 8), 1),))
    masked_scatter = next(n.name for n in ep.graph.nodes if n.target is torch.ops.aten.masked_scatter.default)
    with pytest.raises(LoweringError) as error:
        TosaVerifyBackend.preprocess(ep, DelegateSpec("FP").to_compile_specs())
    assert (error.value.node, error.value.target) == (masked_scatter, "aten.masked_scatter.default")
    assert error.value.reason == "operator not supported by the TOSA lowering"
    assert str(error.value) == f"node '{masked_scatter}' (aten.masked_scatter.default): {error.value.reason}"


@pytest.mark.parametrize("how", ["exclude_modules", "exclude_ops", "exclude_nodes"])
def test_user_filter_keeps_layer_on_cpu(small_cnn, how):
    lm, ep = small_cnn
    conv2 = next(n.name for n in ep.graph.nodes if n.op == "call_function"
                 and "conv2" in str(n.meta.get("nn_module_stack", {})))
    kwargs = {"exclude_modules": {"exclude_modules": ["conv2"]},
              "exclude_ops": {"exclude_ops": ["aten.conv2d"]},
              "exclude_nodes": {"exclude_nodes": [conv2]}}[how]
    part = TosaPartitioner("INT", **kwargs)
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    kept = [c for c in part.cpu_nodes if c.target == "aten.convolution.default"]
    assert len(kept) == (2 if how == "exclude_ops" else 1)
    assert all(c.reason.startswith("excluded by") for c in kept)
    assert "conv2" in lowering.partitioner.module_path(
        next(n for n in edge.exported_program().graph.nodes if n.name == kept[-1].node))
    assert _delegate_calls(edge) == (1 if how == "exclude_ops" else 2)
    for seed in range(2):
        x = _inputs((1, 1, 8, 8), seed)
        got = _run_lowered(edge, x)[0]
        torch.testing.assert_close(got, lm.quantized_model(x), atol=lm.output_qparams[0].s * 1.01,
                                   rtol=0)


def test_fp_profile_payload_matches_lower():
    torch.manual_seed(2)
    model = SmallCNN().eval()
    x = (_inputs((1, 1, 8, 8), 3),)
    part = TosaPartitioner("FP")
    edge = to_edge_transform_and_lower(torch.export.export(model, x), partitioner=[part])
    (backend, payload), = delegate_payloads(edge)
    assert backend == BACKEND_ID and part.cpu_nodes == []
    outs, status = trm.run(payload, [x[0].numpy()])
    expected = lowering.lower(model, x, profile="FP").run_raw([x[0].numpy()])
    np.testing.assert_allclose(outs[0], expected[0], rtol=1e-6, atol=1e-6)


def test_to_edge_then_to_backend_flow(small_cnn, pipeline_runs):
    """Without to_edge_transform_and_lower, linear is decomposed to addmm (kept on the CPU);
    the rest is still delegated, with the real weights."""
    lm, ep = small_cnn
    part = TosaPartitioner("INT")
    edge = to_edge(ep)
    pipeline_runs.clear()
    edge = edge.to_backend(part)
    assert {c.target for c in part.cpu_nodes} == {"aten.addmm.default", "aten.permute_copy.default"}
    # the probe, a trial per partition (stand-in weights: partition() sees FakeTensors), and
    # the backend's lowering with the real weights, which therefore cannot reuse the trial's
    assert len(pipeline_runs) == 1 + 2 * len(part.partitions)
    (_, payload), = delegate_payloads(edge)
    x = _inputs((1, 1, 8, 8), 5)
    torch.testing.assert_close(_run_lowered(edge, x)[0], lm.quantized_model(x),
                               atol=lm.output_qparams[0].s * 1.01, rtol=0)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_lower_emits_one_tosa_graph_per_partition(profile, tmp_path, pipeline_runs):
    torch.manual_seed(3)
    model = WithMaskedScatter().eval()
    x = _inputs((1, 3, 8, 8), 4)
    lm = lowering.lower(model, (x,), profile=profile)
    assert pipeline_runs == [profile]  # once over the whole graph; partitions are cut from it
    assert lm.tosa is None and [c.target for c in lm.cpu_nodes] == ["aten.masked_scatter.default"]
    assert len(lm.partitions) == 2 and all(p.tosa for p in lm.partitions)
    first, second = lm.partitions
    assert "conv2d" in first.nodes and "linear" in second.nodes
    assert lm.op_counts.get("CONV2D", 0) >= 2 and lm.provenance
    # partition 0 -> masked_scatter on the CPU -> partition 1 gives the model's result
    graph0, graph1 = (tosa_verify.load(p.tosa) for p in lm.partitions)

    def on_cpu(mid):  # the CPU node, as the deployed program's CPU part runs it
        return np.asarray(torch.from_numpy(np.asarray(mid, np.float32)).masked_scatter(model.mask, model.reference))

    if profile == "FP":
        mid = tosa_verify.run(graph0, [x.numpy()])[0]
        out = tosa_verify.run(graph1, [on_cpu(mid)])[0]
        np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
        return
    (q_in,), (q_mid,) = first.input_qparams, first.output_qparams
    (q_cpu,), (q_out,) = second.input_qparams, second.output_qparams
    assert all(q.dtype == torch.int8 for q in (q_in, q_mid, q_cpu, q_out))
    mid = tosa_verify.run(graph0, [q_in.quantize(x.numpy()).astype(np.int8)])[0]
    scattered = on_cpu(q_mid.dequantize(mid))
    out = tosa_verify.run(graph1, [q_cpu.quantize(scattered).astype(np.int8)])[0]
    expected = lm.quantized_model(x).detach().numpy()
    np.testing.assert_allclose(q_out.dequantize(out), expected, atol=q_out.s * 1.01, rtol=0)
    manifest = json.loads((lm.save(tmp_path) / "manifest.json").read_text())
    assert manifest["graphs"] == ["tosa_0.tosa", "tosa_1.tosa"]
    assert manifest["partitions"][1]["input_qparams"][0]["dtype"] == "int8"


def test_delegate_spec_and_constructor_validation():
    assert TosaPartitioner("fp").delegate_spec == DelegateSpec("FP")
    with pytest.raises(ValueError, match="INT profile"):
        DelegateSpec("FP", ethosu_target="ethos-u55-128")
    with pytest.raises(ValueError, match="profile"):
        TosaPartitioner("INT8")
    from ethosu.errors import EthosUConfigError

    with pytest.raises(EthosUConfigError):
        TosaPartitioner("INT", ethosu_target="ethos-u42")
    spec = DelegateSpec("INT", "ethos-u85-256", memory_mode="Sram_Only", vela_flags=("--optimise=Size",))
    assert DelegateSpec.from_compile_specs(spec.to_compile_specs()) == spec
    assert TosaPartitioner(spec).delegation_spec.backend_id == "TosaVerifyEthosUBackend"


@pytest.mark.parametrize("module", ["lowering.partitioner", "lowering.delegate_backends",
                                    "lowering.delegate_graphs", "lowering.api"])
def test_docstring_examples(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["INT", "FP"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_models_delegate_whole_and_match_lower(name, profile):
    model, example, calibration = MODELS[name]()
    lm = lowering.lower(model, example, profile=profile,
                        calibration=calibration if profile == "INT" else None)
    exported = torch.export.export(lm.quantized_model if profile == "INT" else model,
                                   tuple(example))
    part = TosaPartitioner(profile)
    edge = to_edge_transform_and_lower(exported, partitioner=[part])
    assert part.cpu_nodes == []
    (_, payload), = delegate_payloads(edge)
    raw = lm.quantize_inputs(*example)
    outs, status = trm.run(payload, [np.ascontiguousarray(r) for r in raw])
    assert "VALID" in str(status)
    for got, want in zip(outs, lm.run_raw(raw), strict=True):
        if profile == "INT":
            assert np.array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
