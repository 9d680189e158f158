"""Ops torch.export keeps whole that are another spelling of what lowers, replaced by PyTorch's
own decomposition (lowering.passes.decompositions.composite): torch.clip, x.mT / x.mH /
x.adjoint() / x.T, torch.tensor_split, torch.broadcast_tensors; and losses a model may compute
in its forward: mse, L1, smooth-L1, Huber, binary cross-entropy, KL divergence, soft margin.

Every case lowers whole and is checked against PyTorch (FP; the losses' means sum in another
order, hence 1e-6) and against the fake-quant model (INT, 0 steps). cross_entropy / nll_loss
and binary_cross_entropy_with_logits stay on the CPU, whole: checked too.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int

import lowering

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
}


@pytest.mark.parametrize("name", list(CASES))
def test_fp_lowers_whole(name):
    fn, inputs = CASES[name]
    lm = check_fp(Fn(fn), inputs, atol=1e-6, rtol=1e-6)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes


@pytest.mark.parametrize("name", list(CASES))
def test_int_lowers_whole_and_matches_fake_quant(name):
    fn, inputs = CASES[name]
    lm = check_int(Fn(fn), inputs, max_steps=0)
    assert lm.tosa is not None and not lm.cpu_nodes, lm.cpu_nodes


@pytest.mark.parametrize("profile", ["FP", "INT"])
@pytest.mark.parametrize(("fn", "target"), [
    (lambda x, t: F.cross_entropy(x, t) + x.mean(), "aten.cross_entropy_loss.default"),
    (lambda x, t: F.binary_cross_entropy_with_logits(x, t.float().unsqueeze(-1).expand(4, 5) / 5) + x.mean(),
     "aten.binary_cross_entropy_with_logits.default"),
], ids=["cross_entropy", "bce_with_logits"])
def test_losses_left_whole_on_the_cpu_still_run(fn, target, profile):
    x, t = _x(4, 5), torch.randint(0, 5, (4,), generator=gen)
    lm = lowering.lower(Fn(fn), (x, t), profile=profile)
    assert [c.target for c in lm.cpu_nodes] == [target]
    want = fn(x, t) if profile == "FP" else lm.quantized_model(x, t)
    got = lm.run(x, t)[0]
    # INT: the CPU loss reads the partition's dequantized mean, within a step of fake-quant's
    torch.testing.assert_close(got, want.reshape(got.shape), atol=1e-5 if profile == "FP" else 0.05, rtol=0)
