"""API surface: LoweredModel fields, save(), provenance, int16, QAT, errors, CPU fallback."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
from lowering_checks import check_int, float64_step_diff, max_step_error

import lowering
import tosa_verify
from lowering import LoweringError, QuantConfig, TosaQuantizer


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = nn.functional.avg_pool2d(y, 2)
        return self.fc(y.flatten(1))


def _tiny():
    torch.manual_seed(0)
    return Tiny().eval(), (torch.randn(2, 3, 8, 8),)


def test_int_end_to_end_and_fields(tmp_path):
    m, ex = _tiny()
    lm = lowering.lower(m, ex, profile="INT")
    assert isinstance(lm.tosa, bytes) and lm.profile == "INT"
    assert max_step_error(lm, ex) <= 1
    assert lm.float_model is not None and lm.quantized_model is not None
    assert lm.input_qparams[0].dtype == torch.int8
    # every TOSA tensor maps back to a torch node with module path and source line
    assert lm.provenance["conv2d"]["nn_module_stack"] == "conv"
    assert "test_lowering_api.py" in lm.provenance["conv2d"]["source"]
    assert any(v["fx_node"] == "linear" for v in lm.provenance.values())
    assert lm.quant_params["conv2d"]["dtype"] == "int8"  # relu folded into RESCALE saturation
    d = lm.save(tmp_path / "out")
    assert (d / "model.tosa").read_bytes() == lm.tosa
    man = json.loads((d / "manifest.json").read_text())
    assert man["tosa_version"] == "1.0.0" and man["profile"] == "INT"
    assert json.loads((d / "provenance.json").read_text())


def test_tosa_version_is_1_0_0():
    from tosa.TosaGraph import TosaGraph

    m, ex = _tiny()
    g = TosaGraph.GetRootAsTosaGraph(lowering.lower(m, ex, profile="FP").tosa, 0)
    v = g.Version()
    assert (v._Major(), v._Minor(), v._Patch(), v._Draft()) == (1, 0, 0, False)


def test_int_ops_are_integer():
    from lowering.serialize import read_tosa_ops

    m, ex = _tiny()
    ops = read_tosa_ops(lowering.lower(m, ex, profile="INT").tosa)
    # the 2x2 average pool keeps its input's quantization (/4: .5 ties): window sums by a
    # DEPTHWISE_CONV2D of ones, then RESCALE with ties to even (no AVG_POOL2D)
    assert "CONV2D" in ops and "RESCALE" in ops and "DEPTHWISE_CONV2D" in ops


def test_fp_profile():
    m, ex = _tiny()
    lm = lowering.lower(m, ex, profile="FP")
    torch.testing.assert_close(lm.run(*ex)[0], m(*ex), atol=1e-4, rtol=1e-4)


def test_int16_activations():
    m, ex = _tiny()
    # int16 steps are 256x finer than int8; fp32 noise in the fake-quant reference
    # reaches 2 steps here (open item in the report)
    lm = check_int(m, ex, quantization=QuantConfig.int16(), max_steps=2)
    assert lm.input_qparams[0].dtype == torch.int16


def test_int16_table():
    m = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid()).eval()
    check_int(m, (torch.randn(4, 8),), quantization=QuantConfig.int16(), max_steps=2)


class _Neg(nn.Module):
    def forward(self, x):
        return torch.neg(x)


class _AbsShifted(nn.Module):
    def forward(self, x):
        return torch.abs(x) - 0.25


@pytest.mark.parametrize("model", [_Neg, _AbsShifted], ids=["neg", "abs"])
def test_int16_neg_and_abs_are_exact_where_the_output_saturates(model):
    """int16 neg and abs are NEGATE / ABS on int32 and one RESCALE, not an int16 TABLE: the
    TABLE's samples, 128 levels apart, cannot follow the output's saturation where the observer
    gave the output a slightly narrower range than the input's (4-12 steps off on these inputs,
    24 on ExecuTorch's a16w8 neg test); now within a step of the float64 fake-quant."""
    for seed in range(4):
        torch.manual_seed(seed)
        x = torch.rand(10, 10) - 0.5
        lm = lowering.lower(model().eval(), (x,), quantization=QuantConfig.int16(), calibration=[(x,)])
        ops = {op.op for op in tosa_verify.load(lm.tosa).main.operators}
        assert "TABLE" not in ops and ops & {"NEGATE", "ABS"}
        assert int(float64_step_diff(lm, (x,)).max()) <= 1, seed


def test_per_tensor_weights():
    """Per-tensor weights lower and agree with the fake-quant model evaluated in float64.

    Exactly: Tiny's 2x2 average pool keeps its input's quantization, so a window sum divided
    by 4 often lands on a .5 tie, which the lowering rounds to even as PyTorch's quantize
    does (issue 10); float32 fake-quant could be a step off after the linear layer, so the
    float64 evaluation is the reference here.
    """
    import numpy as np

    from lowering.reference import fake_quant_float64

    m, ex = _tiny()
    lm = lowering.lower(m, ex, profile="INT", quantization=QuantConfig(per_channel=False))
    assert lm.tosa is not None and not lm.cpu_nodes
    qp = lm.output_qparams[0]
    raw = lm.run_raw(lm.quantize_inputs(*ex))[0].astype(np.int64)
    ref = torch.ops.quantized_decomposed.quantize_per_tensor(
        fake_quant_float64(lm.quantized_model, *ex).float(), qp.s, qp.zp, qp.qmin, qp.qmax,
        qp.dtype).numpy().astype(np.int64)
    assert np.abs(ref - raw).max() == 0


def test_qat_prepare_qat_pt2e_then_lower():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

    m, ex = _tiny()
    gm = torch.export.export(m.train(), ex).module(check_guards=False)
    cfg = QuantConfig(qat=True)
    prepared = prepare_qat_pt2e(gm, TosaQuantizer(cfg, ex))
    opt = torch.optim.SGD(prepared.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        prepared(*ex).sum().backward()
        opt.step()
    converted = convert_pt2e(prepared)
    lm = lowering.lower(converted, ex, profile="INT")
    assert max_step_error(lm, ex) <= 1


def test_supported_ops_from_registry():
    ops = lowering.SUPPORTED_OPS
    for name in ["aten.conv2d.default", "aten.linear.default", "aten.softmax.int"
                 if "aten.softmax.int" in ops else "aten.amax.default", "aten.add.Tensor"]:
        assert name in ops
    assert len(ops) > 80


def test_unsupported_op_stays_on_cpu():
    class M(nn.Module):
        def forward(self, x):
            return torch.special.entr(torch.relu(x)) + 1

    lm = lowering.lower(M(), (torch.rand(3),), profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.special_entr.default"]
    assert lm.tosa is None and lm.partitions


def test_untraceable_model_raises():
    class M(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow
                return x + 1
            return x - 1

    with pytest.raises(LoweringError) as e:
        lowering.lower(M(), (torch.randn(3),), profile="FP")
    msg = str(e.value)
    # one line naming the cause (a branch on a tensor's value) and the model's source line
    assert "\n" not in msg and "python branching on a tensor's value" in msg, msg
    assert "test_lowering_api.py:" in msg, msg


def test_unsupported_dtype_raises_naming_node():
    """A model with nothing of a TOSA type is bad input (float64 side computations next to
    lowerable work stay on the CPU instead: test_float64_side_computation_stays_on_cpu...)."""
    class M(nn.Module):
        def forward(self, x):
            return x * 2

    for profile in ("FP", "INT"):
        with pytest.raises(LoweringError) as e:
            lowering.lower(M(), (torch.randn(3, dtype=torch.float64),), profile=profile)
        assert e.value.node == "mul" and "float64" in e.value.reason


def test_model_failing_on_its_example_inputs_raises_naming_node():
    model = nn.Linear(4, 2).eval()
    with pytest.raises(LoweringError) as e:
        lowering.lower(model, (torch.randn(1, 4).to(torch.complex64),), profile="FP")
    assert e.value.node == "linear" and "fails on the example inputs" in e.value.reason


class SideComputations(nn.Module):
    """A conv with a float64 side computation and integer index arithmetic next to it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)

    def forward(self, x, idx):
        y = torch.relu(self.conv(x))
        side = (x.double() * 3).sum() + 1  # float64: no TOSA type
        j = idx * 3 + 1                    # int64 index math, carried as int32
        return y, side, j


def _side_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 2, 5, 5, generator=g), torch.randint(-20, 20, (4,), generator=g)


def test_quantizer_observes_only_float32_tensors():
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    ex = _side_inputs()
    gm = torch.export.export(SideComputations().eval(), ex).module(check_guards=False)
    prepared = prepare_pt2e(gm, TosaQuantizer(QuantConfig(), ex))
    observed = []
    for n in prepared.graph.nodes:
        if n.op == "call_module" and "activation_post_process" in str(n.target):
            v = n.args[0].meta.get("val")
            observed.append((n.args[0].name, v.dtype))
    assert observed and all(dtype == torch.float32 for _, dtype in observed), observed
    names = {name for name, _ in observed}
    assert "conv2d" in names or "relu" in names
    assert not any(name.startswith(("mul_", "add_", "sum", "_to_copy")) for name in names), names


def test_float64_side_computation_stays_on_cpu_integers_are_lowered():
    ex = _side_inputs()
    model = SideComputations().eval()
    lm = lowering.lower(model, ex, profile="INT")
    # the float64 chain (cast, *3, sum, +1) stays on the CPU, untouched by the passes
    assert [(c.node, c.target) for c in lm.cpu_nodes] == [
        ("to", "aten.to.dtype"), ("mul", "aten.mul.Tensor"), ("sum_1", "aten.sum.default"),
        ("add", "aten.add.Tensor")]
    assert all(c.reason == "unsupported dtype torch.float64 (TOSA 1.0 has no such type)"
               for c in lm.cpu_nodes)
    # the conv and the index math form one TOSA partition
    (partition,) = lm.partitions
    assert partition.nodes[:2] == ["conv2d", "relu"] and len(partition.nodes) == 4

    class WithoutFloat64(SideComputations):
        def forward(self, x, idx):
            y, _, j = super().forward(x, idx)
            return y, j

    whole = WithoutFloat64().eval()
    whole.load_state_dict(model.state_dict())
    lm = lowering.lower(whole, ex, profile="INT")
    assert lm.tosa is not None and not lm.cpu_nodes
    assert max_step_error(lm, ex) <= 1
    _, j = lm.run(*ex)
    assert j.dtype == torch.int64 and torch.equal(j, ex[1] * 3 + 1)


def test_data_dependent_shape_stays_on_cpu():
    """A boolean-mask index (shape depends on the values) stays on the CPU, named with why."""
    class M(nn.Module):
        def forward(self, x):
            return x[x > 0]

    lm = lowering.lower(M(), (torch.randn(5),), profile="FP")
    assert [(c.node, c.target, c.reason) for c in lm.cpu_nodes] == [
        ("index", "aten.index.Tensor", lowering.api.DYNAMIC_SHAPE)]


@pytest.mark.parametrize("config", [QuantConfig(), QuantConfig.int16()], ids=["int8", "int16"])
def test_unused_input_keeps_one_int_graph(config):
    """An input nothing reads stays a graph input, quantized like the other activations."""

    class IgnoresSecond(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x, unused):
            return self.fc(x)

    torch.manual_seed(0)
    example = (torch.randn(2, 4), torch.randn(2, 3))
    lm = lowering.lower(IgnoresSecond().eval(), example, profile="INT", quantization=config)
    assert lm.tosa is not None and not lm.cpu_nodes
    activation = "INT16" if config.activation_dtype == torch.int16 else "INT8"
    assert lm.input_dtypes == [activation, activation]
    assert max_step_error(lm, example) <= 1


class _NanInTheMiddle(nn.Module):
    """A conv, then log of values that go negative (NaN), then a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 1)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        y = torch.log(self.conv(x) - 10.0)
        return self.fc(y.flatten(1))


def test_int_calibration_on_nan_names_the_node_and_the_source_line():
    torch.manual_seed(0)
    x = torch.randn(1, 1, 2, 2)
    with pytest.raises(LoweringError) as info:
        lowering.lower(_NanInTheMiddle().eval(), (x,), profile="INT")
    message = str(info.value)
    assert "node 'log' (aten.log.default) gives NaN or infinity" in message
    assert "calibration batch 1" in message
    assert "torch.log(self.conv(x) - 10.0)" in message  # the model's own source line
    # the float graph is fine: FP lowers (its NaNs are IEEE values like any other)
    assert lowering.lower(_NanInTheMiddle().eval(), (x,), profile="FP").op_counts


def test_calibration_diagnosis_names_the_first_of_several_batches_to_fail():
    from lowering.calibration import first_non_finite

    class Sqrt(nn.Module):
        def forward(self, x):
            return torch.sqrt(x) + 1.0

    gm = torch.export.export(Sqrt(), (torch.ones(3),)).module(check_guards=False)
    batches = [(torch.ones(3),), (torch.tensor([1.0, -1.0, 2.0]),)]
    assert first_non_finite(gm, batches).startswith("calibration batch 2, node 'sqrt' (aten.sqrt.default)")
    assert first_non_finite(gm, batches[:1]) is None
