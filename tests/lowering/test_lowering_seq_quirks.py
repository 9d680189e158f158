"""What sequence and transformer models bring: recurrent cells in a hand-written time loop,
grouped-query attention, normalisation of a transposed (non-contiguous) tensor, and None
among a model's outputs; each lowered whole and checked against PyTorch (FP) or the
fake-quant model (INT)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int
from torch import nn

import lowering


class CellLoop(nn.Module):
    """A recurrent cell stepped over the time axis by a python loop (state starts at zero)."""

    def __init__(self, cell: nn.Module):
        super().__init__()
        self.cell = cell

    def forward(self, x):
        state, outputs = None, []
        for t in range(x.shape[1]):
            state = self.cell(x[:, t], state)
            outputs.append(state[0] if isinstance(state, tuple) else state)
        return torch.stack(outputs, 1)


CELLS = {
    "lstm": lambda: nn.LSTMCell(4, 6),
    "gru": lambda: nn.GRUCell(4, 6),
    "rnn_tanh": lambda: nn.RNNCell(4, 6),
    "rnn_relu": lambda: nn.RNNCell(4, 6, nonlinearity="relu"),
}


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_recurrent_cell_loop_lowers_whole(cell):
    torch.manual_seed(0)
    model, x = CellLoop(CELLS[cell]()), (torch.randn(2, 3, 4),)
    assert check_fp(model, x, atol=1e-5, rtol=1e-4).cpu_nodes == []
    assert check_int(model, x).cpu_nodes == []


class GroupedQueryAttention(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def test_grouped_query_attention_repeats_each_kv_head_for_its_query_group():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    lm = check_fp(GroupedQueryAttention(), (q, k, v), atol=1e-5, rtol=1e-4)
    assert lm.cpu_nodes == []
    # (the independent reference: each kv head repeated by hand)
    expected = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                              is_causal=True)
    torch.testing.assert_close(lm.run(q, k, v)[0], expected, atol=1e-5, rtol=1e-4)
    assert check_int(GroupedQueryAttention(), (q, k, v)).cpu_nodes == []


NON_CONTIGUOUS = {
    "group_norm": (lambda: Fn(nn.GroupNorm(2, 8).forward), lambda x: x.transpose(1, 2)),
    "functional_group_norm": (lambda: Fn(lambda x: F.group_norm(x, 4)), lambda x: x.permute(0, 2, 1).unsqueeze(-1)),
    "instance_norm": (lambda: Fn(nn.InstanceNorm1d(8, affine=True).forward), lambda x: x.transpose(1, 2)),
    "adaptive_avg_pool3d": (lambda: Fn(lambda x: F.adaptive_avg_pool3d(x, (1, 2, 2))),
                            lambda x: x.reshape(2, 5, 4, 2).permute(3, 0, 1, 2).unsqueeze(0)),
}


@pytest.mark.parametrize("case", sorted(NON_CONTIGUOUS))
def test_normalisation_of_a_transposed_tensor(case):
    make, move = NON_CONTIGUOUS[case]
    norm = make()
    model = Fn(lambda x: norm(move(x)))
    x = (torch.randn(2, 5, 8),)
    assert check_fp(model, x, atol=1e-5, rtol=1e-4).cpu_nodes == []
    assert check_int(model, x).cpu_nodes == []


class WithNones(nn.Module):
    def forward(self, x):
        return x.relu(), None, {"logits": x * 2, "aux": None}, (None, x + 1)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_none_outputs_are_left_out(profile):
    x = torch.randn(4, 3)
    lm = lowering.lower(WithNones(), (x,), profile=profile)
    assert lm.cpu_nodes == [] and len(lm.output_names) == 3
    expected = [t for t in torch.utils._pytree.tree_leaves(WithNones()(x)) if t is not None]
    tolerance = 0.0 if profile == "FP" else 0.02  # (INT: within a step of int8 on |x| <= ~3)
    for got, want in zip(lm.run(x), expected, strict=True):
        assert float((got - want).abs().max()) <= tolerance


def test_a_model_returning_only_none_is_refused_clearly():
    with pytest.raises(lowering.LoweringError, match="returns no tensor"):
        lowering.lower(Fn(lambda x: None), (torch.ones(2),), profile="FP")
