"""Ops torch.export keeps whole that are another spelling of what lowers, replaced by PyTorch's
own decomposition (lowering.passes.decompositions.composite): torch.clip, x.mT / x.mH /
x.adjoint() / x.T, torch.tensor_split, torch.broadcast_tensors, inner / vdot / multi_dot /
chain_matmul, diagflat, trapezoid / cumulative_trapezoid, rot90, renorm, index_fill, the
dropouts in eval; and losses a model may compute in its forward: mse, L1, smooth-L1, Huber,
binary cross-entropy, KL divergence, soft margin.

Every case lowers whole and is checked against PyTorch (FP; sums and products run in another
order, hence 1e-6, and 5e-6 for the three-matrix products) and against the fake-quant model
(INT, 0 steps). cross_entropy / nll_loss and binary_cross_entropy_with_logits have their own
decompositions (lowering.passes.decompositions.losses, tests/lowering/test_lowering_losses_cum.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int

gen = torch.Generator().manual_seed(11)


def _x(*shape):
    return torch.randn(*shape, generator=gen)


_PROBS = torch.rand(4, 5, generator=gen) * 0.9 + 0.05
CASES = {
    "clip": (lambda x: torch.clip(x, min=0) + torch.clip(x, -0.5, 0.5) + torch.clip(x, max=torch.zeros(4)),
             (_x(3, 4),)),
    "tensor_split": (lambda x: torch.tensor_split(x, 3, dim=-1)[1].sum(-1) +
                     torch.tensor_split(x, [1, 4], dim=1)[2].sum(-1), (_x(2, 6),)),
    "mT mH adjoint T": (lambda x: x.mT @ x + x.T + x.mH + x.adjoint(), (_x(3, 3),)),
    "broadcast_tensors": (lambda x, y: sum(torch.broadcast_tensors(x, y)), (_x(3, 1), _x(1, 4))),
    "mse l1 smooth_l1 huber": (lambda x, y: F.mse_loss(x, y) + F.l1_loss(x, y) + F.smooth_l1_loss(x, y) +
                               F.huber_loss(x, y, delta=0.5), (_x(3, 4), _x(3, 4))),
    "losses unreduced": (lambda x, y: F.mse_loss(x, y, reduction="none") + F.l1_loss(x, y, reduction="sum"),
                         (_x(3, 4), _x(3, 4))),
    "binary_cross_entropy": (lambda p, y: F.binary_cross_entropy(p, y), (_PROBS, torch.rand(4, 5, generator=gen))),
    "kl_div": (lambda x, y: F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction="batchmean"),
               (_x(3, 5), _x(3, 5))),
    "soft_margin": (lambda x, y: F.soft_margin_loss(x, y.sign()), (_x(3, 4), _x(3, 4))),
    "inner vdot": (lambda x, y: torch.inner(x, y) + torch.vdot(x, y), (_x(4), _x(4))),
    "inner 2-D": (lambda x, y: torch.inner(x, y), (_x(3, 4), _x(2, 4))),
    "multi_dot chain_matmul": (lambda a, b: torch.linalg.multi_dot([a, b, b.T]) + torch.chain_matmul(a, b, b),
                               (_x(3, 4), _x(4, 4))),
    "diagflat": (lambda x: torch.diagflat(x) + torch.diagflat(x[:3], 1)[:4, :4], (_x(4),)),
    "trapezoid": (lambda x: torch.trapezoid(x, dim=-1) + torch.trapz(x, dx=0.5) +
                  torch.trapezoid(x, torch.linspace(0, 1, 5)), (_x(3, 5),)),
    "cumulative_trapezoid": (lambda x: torch.cumulative_trapezoid(x, torch.linspace(0, 2, 5)), (_x(3, 5),)),
    "dropouts in eval": (lambda x: F.alpha_dropout(x, 0.5, False) + F.feature_alpha_dropout(x, 0.5, False) +
                         F.dropout1d(x, 0.3, False), (_x(2, 3, 4),)),
    "rot90": (lambda x: torch.rot90(x, 1, (0, 1)) + torch.rot90(x, 2, (0, 1)) + torch.rot90(x, -1, (0, 1)),
              (_x(4, 4),)),
    "renorm": (lambda x: torch.renorm(x, 2, 0, 1.0), (_x(3, 5),)),
    "index_fill": (lambda x: x.index_fill(1, torch.tensor([0, 2]), -1.0), (_x(3, 4),)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fp_lowers_whole(name):
    fn, inputs = CASES[name]
    tolerance = 5e-6 if "multi_dot" in name else 1e-6
    lm = check_fp(Fn(fn), inputs, atol=tolerance, rtol=tolerance)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes


@pytest.mark.parametrize("name", list(CASES))
def test_int_lowers_whole_and_matches_fake_quant(name):
    fn, inputs = CASES[name]
    lm = check_int(Fn(fn), inputs, max_steps=0)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes
