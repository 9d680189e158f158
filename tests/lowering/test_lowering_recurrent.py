"""Recurrent layers (nn.GRU, nn.LSTM, nn.RNN: unrolled through PyTorch's own decomposition),
instance norm (per-sample statistics, or running statistics) and cosine similarity (PyTorch's
decomposition, whose in-place ``clamp_min_`` and clones are made functional when spliced).

FP against PyTorch within 1e-4; INT bit-exact against the fake-quant model evaluated in
float64 (every output); every case lowers whole, with no CPU node."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lowering
from lowering.reference import fake_quant_float64

gen = torch.Generator().manual_seed(5)


def randn(*shape):
    return torch.randn(*shape, generator=gen)


def _leaves(x) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def _fp(model, inputs):
    lm = lowering.lower(model.eval(), inputs, profile="FP")
    assert not lm.cpu_nodes and lm.tosa is not None
    with torch.no_grad():
        expected = _leaves(model(*inputs))
    got = lm.run(*inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert tuple(g.shape) == tuple(e.shape)
        torch.testing.assert_close(g.float(), e.float(), atol=1e-4, rtol=1e-4)
    return lm


def _int_steps(model, inputs, calibration) -> list[int]:
    """Largest |TOSA - float64 fake-quant| per output, in quantization steps."""
    lm = lowering.lower(model.eval(), inputs, profile="INT", calibration=calibration)
    assert not lm.cpu_nodes and lm.tosa is not None
    expected = _leaves(fake_quant_float64(lm.quantized_model, *inputs))
    raw = lm.run_raw(lm.quantize_inputs(*inputs))
    steps = []
    for e, r, qp in zip(expected, raw, lm.output_qparams, strict=True):
        q = torch.ops.quantized_decomposed.quantize_per_tensor(
            e.float(), qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype).numpy().astype(np.int64)
        steps.append(int(np.abs(q - np.asarray(r).astype(np.int64)).max()))
    return steps


class WithState(nn.Module):
    """A recurrent layer called with an initial state (ExecuTorch's GRU test passes one)."""

    def __init__(self, rnn: nn.Module):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, h):
        return self.rnn(x, h)


RECURRENT = {
    "gru_2_layers": lambda: (nn.GRU(4, 8, 2), (randn(3, 2, 4),)),
    "gru_with_state": lambda: (WithState(nn.GRU(4, 6, 1)), (randn(3, 2, 4), randn(1, 2, 6))),
    "lstm_batch_first": lambda: (nn.LSTM(4, 8, 1, batch_first=True), (randn(2, 3, 4),)),
    "rnn_tanh_bidirectional": lambda: (nn.RNN(4, 8, 1, bidirectional=True), (randn(3, 2, 4),)),
    "rnn_relu_no_bias": lambda: (nn.RNN(4, 5, 1, nonlinearity="relu", bias=False), (randn(3, 1, 4),)),
}


#: the default run keeps one case of each layer kind per profile; the rest run under -m slow
SLOW_RECURRENT = {"FP": ("gru_2_layers",),
                  "INT": ("gru_2_layers", "lstm_batch_first", "rnn_tanh_bidirectional")}


def _recurrent_params(profile: str) -> list:
    return [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_RECURRENT[profile] else [])
            for n in sorted(RECURRENT)]


@pytest.mark.parametrize("name", _recurrent_params("FP"))
def test_recurrent_fp(name):
    torch.manual_seed(0)
    model, inputs = RECURRENT[name]()
    _fp(model, inputs)


@pytest.mark.parametrize("name", _recurrent_params("INT"))
def test_recurrent_int_bit_exact(name):
    torch.manual_seed(0)
    model, inputs = RECURRENT[name]()
    calibration = [tuple(randn(*x.shape) for x in inputs) for _ in range(3)] + [inputs]
    assert max(_int_steps(model, inputs, calibration)) == 0


class InstanceNorm(nn.Module):
    def __init__(self, norm: nn.Module):
        super().__init__()
        self.norm = norm

    def forward(self, x):
        return self.norm(x)


def _running_stats_norm() -> nn.Module:
    norm = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    with torch.no_grad():
        norm.running_mean.copy_(randn(3))
        norm.running_var.copy_(randn(3).abs() + 0.5)
        norm.weight.copy_(randn(3))
        norm.bias.copy_(randn(3))
    return norm


def _affine_norm() -> nn.Module:
    norm = nn.InstanceNorm1d(4, affine=True)
    with torch.no_grad():
        norm.weight.copy_(randn(4))
        norm.bias.copy_(randn(4))
    return norm


NORMS = {
    "instance_norm_2d": lambda: (nn.InstanceNorm2d(3), randn(2, 3, 5, 6) * 3 + 1),
    "instance_norm_1d_affine": lambda: (_affine_norm(), randn(2, 4, 7)),
    "instance_norm_running_stats": lambda: (_running_stats_norm(), randn(1, 3, 4, 4)),
}


@pytest.mark.parametrize("name", sorted(NORMS))
def test_instance_norm_fp(name):
    norm, x = NORMS[name]()
    _fp(InstanceNorm(norm), (x,))


@pytest.mark.parametrize("name", sorted(NORMS))
def test_instance_norm_int_bit_exact(name):
    norm, x = NORMS[name]()
    calibration = [(randn(*x.shape) * x.std() + x.mean(),) for _ in range(3)] + [(x,)]
    assert _int_steps(InstanceNorm(norm), (x,), calibration) == [0]


class Cosine(nn.Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, a, b):
        return F.cosine_similarity(a, b, dim=self.dim, eps=self.eps)


COSINE = {
    "same_input": lambda: (Cosine(), (lambda x: (x, x.clone()))(randn(1, 6, 8, 8))),
    "two_inputs_last_dim": lambda: (Cosine(dim=-1), (randn(2, 5, 16), randn(2, 5, 16))),
    "broadcast_large_eps": lambda: (Cosine(dim=1, eps=0.5), (randn(3, 8), randn(1, 8))),
}


@pytest.mark.parametrize("name", sorted(COSINE))
def test_cosine_similarity_fp(name):
    model, inputs = COSINE[name]()
    _fp(model, inputs)


@pytest.mark.parametrize("name", sorted(COSINE))
def test_cosine_similarity_int_bit_exact(name):
    model, inputs = COSINE[name]()
    assert _int_steps(model, inputs, [inputs]) == [0]


def test_spliced_nodes_carry_values():
    """Every node PyTorch's decomposition splices in gets value metadata (a later rewrite of
    the same pass reads its shape), computed from the real inputs."""
    from lowering.graph_utils import propagate_values, val
    from lowering.passes.decompositions.rnn import recurrent
    from lowering.passes.rewrites import apply_rewrites

    model, (x,) = RECURRENT["gru_2_layers"]()
    gm = lowering.api.export_module(model.eval(), (x,))
    propagate_values(gm, (x,))
    assert apply_rewrites(gm, {torch.ops.aten.gru.input: recurrent}, None)
    spliced = [t for t in gm.graph.nodes if t.op == "call_function"
               and t.target not in (torch.ops.aten.unbind.int, torch.ops.aten.split.Tensor)]
    assert spliced and all(val(t) is not None for t in spliced)
    out = gm.graph.output_node().args[0][0]
    with torch.no_grad():
        torch.testing.assert_close(val(out), model(x)[0])


class NonzeroBeside(nn.Module):
    """nonzero's result size depends on the values; the computation beside it does not."""

    def forward(self, x):
        y = torch.relu(x) * 2.0
        return torch.nonzero(y > 1.0), y + 1.0


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_data_dependent_shape_stays_on_cpu_with_reason(profile):
    """nonzero (a data-dependent output shape, which TOSA cannot hold) stays on the CPU, named
    with its reason; the rest of the graph is lowered and computes what PyTorch computes."""
    x = randn(4, 5)
    lm = lowering.lower(NonzeroBeside().eval(), (x,), profile=profile, calibration=[(x,)])
    assert [(c.node, c.target) for c in lm.cpu_nodes] == [("nonzero", "aten.nonzero.default")]
    assert lm.cpu_nodes[0].reason == lowering.api.DYNAMIC_SHAPE
    (part,) = lm.partition_models()
    outputs = part.run(x)
    expected = torch.relu(x) * 2.0 + 1.0
    tol = 0.05 if profile == "INT" else 1e-6  # INT: within a step of the int8 output
    assert any(o.shape == expected.shape and o.is_floating_point() and
               torch.allclose(o, expected, atol=tol) for o in outputs)


class GridSample(nn.Module):
    def forward(self, x, grid):
        return F.grid_sample(x, grid, align_corners=False)


def test_fp_only_decomposition_names_the_profile_in_int():
    """grid_sample lowers in FP only (its coordinates are indices): in INT it stays on the CPU
    and the reason says so, naming the node and the op."""
    x, grid = torch.rand(1, 1, 4, 4, generator=gen), torch.rand(1, 5, 5, 2, generator=gen) * 2 - 1
    lm = lowering.lower(GridSample().eval(), (x, grid), profile="INT", calibration=[(x, grid)])
    assert [(c.node, c.target, c.reason) for c in lm.cpu_nodes] == [
        ("grid_sampler", "aten.grid_sampler.default",
         "operator has no TOSA INT lowering (decomposed in FP only)")]
