"""F.cross_entropy (class indices with weight, ignore_index, reduction, label_smoothing; class
probabilities), F.nll_loss (nll_loss_nd, nll_loss_forward, nll_loss2d_forward),
F.binary_cross_entropy_with_logits (weight, pos_weight), torch.aminmax, torch.cummax /
torch.cummin and torch.logcumsumexp lowered whole by
``lowering/passes/decompositions/losses.py`` and ``cumulative.py``.

FP: against PyTorch, float outputs within atol = rtol = FP_TOL (sums and log_softmax run in
another order than PyTorch's kernels, mean multiplies by a reciprocal, logcumsumexp sums a
shifted triangle where PyTorch adds one term at a time: found at most 2 float32 ulps of the
output's magnitude, 7.6e-6 absolute on a summed loss of about 40; see
``test_fp_error_is_a_few_ulps``), integer outputs (indices) equal.
Edge cases: ties and NaN in cummax / cummin (PyTorch's last-occurrence indices), ignore_index
inside and outside the class range, a batch with every target ignored (NaN mean, as PyTorch),
infinities in logcumsumexp, 1-D and N-D inputs, dim 0 and -1, integer tensors.

INT (int8): within 1 output step of the fake-quant model and 0 steps against it evaluated in
float64 (judge_int; indices equal), which is what is claimed: a loss of int8 logits is not near
PyTorch's float loss in general (log_softmax of quantized logits, then requantized sums and a
reciprocal), nor are running extrema of quantized values (they are levels of the input's
quantization, their indices PyTorch's on the fake-quant input). An all-ignored mean is 0 in
INT, as the fake-quant model's (no int8 NaN; PyTorch's is NaN). Integer cummax / cummin /
aminmax stay whole on the CPU in INT (INT's max reduction requantizes), as does any cumulative
op whose [..., L, L] triangle exceeds QUADRATIC_ELEMENTS (both profiles).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int, judge_int, judge_whole

import lowering

torch.set_num_threads(1)

#: FP float outputs: see the module docstring
FP_TOL = 1e-5


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _x(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, generator=_gen(seed)) * scale


#: class weights of 5 classes (a constant of the model)
WEIGHT = torch.rand(5, generator=_gen(100)) + 0.25
#: [6] class indices, one ignored at the default ignore_index
TARGETS = torch.tensor([0, 4, 2, 2, -100, 1])
#: [6] class indices without -100 (with ignore_index=2: two of them ignored)
TARGETS_IN_RANGE = torch.tensor([0, 4, 2, 2, 3, 1])
#: [2, 3, 4] targets of a [2, 5, 3, 4] segmentation map, some ignored
MAP_TARGETS = torch.randint(0, 5, (2, 3, 4), generator=_gen(101)).masked_fill(
    torch.rand(2, 3, 4, generator=_gen(102)) < 0.2, -100)
#: rounded to halves: ties in the running extrema
TIED = torch.round(_x(4, 7, seed=103) * 2) / 2


def _probabilities(*shape, seed):
    return torch.softmax(_x(*shape, seed=seed), 1)


#: name -> (function, inputs, also checked in INT)
CASES = {
    # cross_entropy, class indices
    "ce_mean": (lambda x, t: F.cross_entropy(x, t), (_x(6, 5, seed=1), TARGETS), True),
    "ce_sum": (lambda x, t: F.cross_entropy(x, t, reduction="sum"), (_x(6, 5, seed=2), TARGETS), True),
    "ce_none": (lambda x, t: F.cross_entropy(x, t, reduction="none"), (_x(6, 5, seed=3), TARGETS), True),
    "ce_weight_ignore_in_range_mean": (lambda x, t: F.cross_entropy(x, t, weight=WEIGHT, ignore_index=2),
                                       (_x(6, 5, seed=4), TARGETS_IN_RANGE), True),
    "ce_weight_ignore_in_range_none": (lambda x, t: F.cross_entropy(x, t, weight=WEIGHT, ignore_index=2,
                                                                    reduction="none"),
                                       (_x(6, 5, seed=5), TARGETS_IN_RANGE), True),
    "ce_smoothing_mean": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), (_x(6, 5, seed=6), TARGETS),
                          True),
    "ce_smoothing_weight_ignore_sum": (lambda x, t: F.cross_entropy(x, t, weight=WEIGHT, ignore_index=2,
                                                                    label_smoothing=0.2, reduction="sum"),
                                       (_x(6, 5, seed=7), TARGETS_IN_RANGE), True),
    "ce_smoothing_weight_mean": (lambda x, t: F.cross_entropy(x, t, weight=WEIGHT, label_smoothing=0.3),
                                 (_x(6, 5, seed=8), TARGETS), True),
    "ce_smoothing_none": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2, reduction="none"),
                          (_x(6, 5, seed=9), TARGETS), True),
    "ce_1d_sample": (lambda x, t: F.cross_entropy(x, t), (_x(5, seed=10), torch.tensor(3)), True),
    "ce_4d_segmentation": (lambda x, t: F.cross_entropy(x, t, weight=WEIGHT), (_x(2, 5, 3, 4, seed=11), MAP_TARGETS),
                           True),
    "ce_4d_segmentation_none": (lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1),
                                (_x(2, 5, 3, 4, seed=12), MAP_TARGETS), True),
    "ce_weight_input": (lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
                        (_x(6, 5, seed=13), TARGETS, WEIGHT), True),
    # cross_entropy, class probabilities
    "ce_probabilities_mean": (lambda x, p: F.cross_entropy(x, p), (_x(6, 5, seed=14), _probabilities(6, 5, seed=15)),
                              True),
    "ce_probabilities_weight_smoothing_sum": (lambda x, p: F.cross_entropy(x, p, weight=WEIGHT, label_smoothing=0.2,
                                                                           reduction="sum"),
                                              (_x(6, 5, seed=16), _probabilities(6, 5, seed=17)), True),
    "ce_probabilities_3d_none": (lambda x, p: F.cross_entropy(x, p, reduction="none"),
                                 (_x(2, 5, 4, seed=18), _probabilities(2, 5, 4, seed=19)), True),
    "ce_probabilities_1d_none": (lambda x, p: F.cross_entropy(x, p, reduction="none", label_smoothing=0.1),
                                 (_x(5, seed=44), torch.softmax(_x(5, seed=45), 0)), True),
    # nll_loss
    "nll_mean": (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), (_x(6, 5, seed=20), TARGETS), True),
    "nll_weight_sum": (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, weight=WEIGHT, reduction="sum"),
                       (_x(6, 5, seed=21), TARGETS), True),
    "nll_ignore_in_range_none": (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, ignore_index=4, reduction="none"),
                                 (_x(6, 5, seed=22), TARGETS_IN_RANGE), True),
    "nll_1d": (lambda x, t: F.nll_loss(F.log_softmax(x, 0), t), (_x(5, seed=23), torch.tensor(1)), True),
    "nll_3d_weight": (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, weight=WEIGHT),
                      (_x(2, 5, 4, seed=24), torch.tensor([[0, 1, 4, -100], [3, 3, 2, 0]])), True),
    "nll_loss_forward": (lambda x, t: sum(torch.ops.aten.nll_loss_forward(F.log_softmax(x, 1), t, WEIGHT, 1, -100)),
                         (_x(6, 5, seed=25), TARGETS), True),
    "nll_loss2d_forward": (lambda x, t: torch.ops.aten.nll_loss2d_forward(F.log_softmax(x, 1), t, None, 2, 1),
                           (_x(2, 5, 3, 4, seed=26), MAP_TARGETS.clamp(min=0)), True),
    # binary_cross_entropy_with_logits
    "bce_mean": (lambda x, y: F.binary_cross_entropy_with_logits(x, y),
                 (_x(6, 5, seed=27, scale=3.0), torch.rand(6, 5, generator=_gen(28))), True),
    "bce_weight_pos_weight_sum": (lambda x, y: F.binary_cross_entropy_with_logits(
        x, y, weight=WEIGHT, pos_weight=3 * WEIGHT, reduction="sum"),
        (_x(6, 5, seed=29, scale=3.0), torch.rand(6, 5, generator=_gen(30))), True),
    "bce_pos_weight_none_extremes": (lambda x, y: F.binary_cross_entropy_with_logits(
        x, y, pos_weight=torch.tensor([2.0, 0.5, 1.0]), reduction="none"),
        (torch.tensor([[-40.0, -3.0, 0.0], [0.5, 8.0, 40.0]]), torch.tensor([[0.0, 1.0, 0.5], [1.0, 0.0, 1.0]])), False),
    "bce_none_3d": (lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
                    (_x(2, 3, 4, seed=31, scale=3.0), torch.rand(2, 3, 4, generator=_gen(32))), True),
    "bce_0d": (lambda x, y: F.binary_cross_entropy_with_logits(x, y), (torch.tensor(0.7), torch.tensor(1.0)), False),
    # aminmax
    "aminmax_dim": (lambda x: torch.aminmax(x, dim=1), (_x(4, 6, seed=33),), True),
    "aminmax_keepdim_negative": (lambda x: torch.aminmax(x, dim=-1, keepdim=True), (_x(2, 3, 5, seed=34),), True),
    "aminmax_all": (lambda x: torch.aminmax(x), (_x(3, 4, seed=35),), True),
    "aminmax_int": (lambda x: torch.aminmax(x, dim=0), (torch.randint(-50, 50, (4, 3), generator=_gen(36)),), False),
    # cummax / cummin
    "cummax_ties_last_dim": (lambda x: torch.cummax(x, -1), (TIED,), True),
    "cummin_ties_dim0": (lambda x: torch.cummin(x, 0), (TIED,), True),
    "cummax_1d": (lambda x: torch.cummax(x, 0), (torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 5.0, 5.0]),), True),
    "cummin_3d_middle": (lambda x: torch.cummin(x, 1), (torch.round(_x(2, 6, 3, seed=37)),), True),
    "cummax_distinct": (lambda x: torch.cummax(x, 1), (_x(3, 8, seed=38),), True),
    "cummax_values_only": (lambda x: torch.cummax(x, 1).values * 2.0, (_x(3, 8, seed=39),), True),
    "cummax_nan": (lambda x: torch.cummax(x, 0), (torch.tensor([1.0, 3.0, float("nan"), 4.0, float("nan"), 2.0]),),
                   False),
    "cummin_inf": (lambda x: torch.cummin(x, 0), (torch.tensor([1.0, -float("inf"), 0.0, -float("inf")]),), False),
    "cummax_int": (lambda x: torch.cummax(x, 1), (torch.randint(-3, 3, (3, 9), generator=_gen(40)),), False),
    "cummin_int32": (lambda x: torch.cummin(x, 0), (torch.randint(-3, 3, (9, 2), generator=_gen(41),
                                                                  dtype=torch.int32),), False),
    # logcumsumexp
    "logcumsumexp_last": (lambda x: torch.logcumsumexp(x, -1), (_x(3, 9, seed=42, scale=3.0),), True),
    "logcumsumexp_dim0": (lambda x: torch.logcumsumexp(x, 0), (_x(7, 2, seed=43, scale=3.0),), True),
    "logcumsumexp_1d_wide_range": (lambda x: torch.logcumsumexp(x, 0),
                                   (torch.tensor([-80.0, 0.0, -30.0, 60.0, -100.0, 59.0]),), False),
    "logcumsumexp_infinities": (lambda x: torch.logcumsumexp(x, 0),
                                (torch.tensor([-float("inf"), -float("inf"), 1.0, -float("inf"), float("inf"), 2.0]),),
                                False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fp_lowers_whole_and_matches_torch(name):
    fn, inputs, _ = CASES[name]
    model = Fn(fn).eval()
    lm = lowering.lower(model, inputs, profile="FP")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    with torch.no_grad():
        expected = model(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    got = lm.run(*inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert tuple(g.shape) == tuple(e.shape), (g.shape, e.shape)
        if e.is_floating_point():
            # NaN and infinities at the same places, as PyTorch's
            torch.testing.assert_close(g, e, atol=FP_TOL, rtol=FP_TOL, equal_nan=True)
        else:
            assert torch.equal(g.to(e.dtype), e), (g, e)


@pytest.mark.parametrize("name", [k for k, v in CASES.items() if v[2]])
def test_int_lowers_whole_and_matches_fake_quant(name):
    fn, inputs, _ = CASES[name]
    lm = check_int(Fn(fn), inputs, max_steps=1)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    judged = judge_int(lm, inputs)  # indices equal, quantized outputs 0 steps from float64 fake-quant
    assert judged["ok"], judged


def test_cummax_ties_pick_the_last_occurrence():
    """PyTorch's cummax / cummin index is the last position holding the running value; the
    reference is PyTorch itself, on a row of repeated values where the first and the last
    occurrence differ everywhere."""
    x = torch.tensor([[2.0, 2.0, 1.0, 2.0, 3.0, 3.0], [0.0, 0.0, 0.0, -1.0, -1.0, 0.0]])
    for op in (torch.cummax, torch.cummin):
        model = Fn(lambda x, op=op: op(x, -1))
        lm = check_fp(model, (x,), atol=0.0, rtol=0.0)
        assert lm.cpu_nodes == []
        indices = lm.run(x)[1]
        assert torch.equal(indices, op(x, -1).indices)
        first = torch.tensor([[0, 0, 0, 0, 4, 4], [0, 0, 0, 3, 3, 3]]) if op is torch.cummin else None
        if first is not None:  # the first-occurrence rule would differ: the test can tell them apart
            assert not torch.equal(indices, first)


@pytest.mark.parametrize("seed", range(3))
def test_targets_are_read_at_run_time(seed):
    """One lowering serves other targets of the same shape, ignored ones included, in both
    profiles (INT: against the fake-quant model)."""
    model = Fn(lambda x, t: F.cross_entropy(x, t, weight=WEIGHT, ignore_index=2, label_smoothing=0.1)).eval()
    inputs = (_x(6, 5, seed=50), TARGETS_IN_RANGE)
    other = (_x(6, 5, seed=60 + seed), torch.randint(0, 5, (6,), generator=_gen(70 + seed)))
    fp = check_fp(model, inputs, atol=FP_TOL, rtol=FP_TOL)
    torch.testing.assert_close(fp.run(*other)[0], model(*other), atol=FP_TOL, rtol=FP_TOL)
    lm = check_int(model, inputs, max_steps=1)
    assert judge_int(lm, other)["ok"]


def test_all_ignored_mean_is_nan_in_fp_and_zero_in_int():
    """Every target ignored: PyTorch's mean is 0 / 0 = NaN; FP gives NaN too. INT has no NaN:
    the lowered loss is 0, as the fake-quant model's (not PyTorch's NaN: not claimed)."""
    model = Fn(lambda x, t: F.cross_entropy(x, t)).eval()
    x, ignored = _x(6, 5, seed=80), torch.full((6,), -100)
    assert torch.isnan(model(x, ignored))
    fp = lowering.lower(model, (x, TARGETS), profile="FP")
    assert fp.cpu_nodes == [] and torch.isnan(fp.run(x, ignored)[0])
    nll = Fn(lambda x, t: F.nll_loss(x, t, ignore_index=3)).eval()
    fp = lowering.lower(nll, (x, TARGETS_IN_RANGE), profile="FP")
    assert torch.isnan(fp.run(x, torch.full((6,), 3))[0]) and torch.isnan(nll(x, torch.full((6,), 3)))
    lm = check_int(model, (x, TARGETS), max_steps=1)
    assert lm.cpu_nodes == []
    got = lm.run(x, ignored)[0]
    assert float(got) == float(lm.quantized_model(x, ignored)) == 0.0


def test_fp_error_is_a_few_ulps():
    """The FP figures of the module docstring: the largest difference from PyTorch over every
    float case, in float32 ulps of the output's magnitude."""
    worst = 0.0
    for fn, inputs, _ in CASES.values():
        model = Fn(fn).eval()
        expected = model(*inputs)
        expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        got = lowering.lower(model, inputs, profile="FP").run(*inputs)
        for g, e in zip(got, expected, strict=True):
            finite = e.isfinite() if e.is_floating_point() else None
            if finite is None or not finite.any():
                continue
            ulp = torch.finfo(torch.float32).eps * e[finite].abs().clamp(min=1.0)
            worst = max(worst, float(((g[finite] - e[finite]).abs() / ulp).max()))
    assert worst <= 4, worst


def _cpu_ops(lm) -> list[str]:
    """The ops left on the CPU, without the getitems reading a tuple op's results there."""
    return [c.target for c in lm.cpu_nodes if c.target != "getitem"]


@pytest.mark.parametrize("fn, inputs, target", [
    (lambda x: torch.cummax(x, 1)[0] + 1, (torch.randint(-3, 3, (3, 9), generator=_gen(90)),), "aten.cummax.default"),
    (lambda x: torch.cummin(x, 0)[1] + 1, (torch.randint(-3, 3, (9, 2), generator=_gen(91)),), "aten.cummin.default"),
    (lambda x: torch.aminmax(x, dim=0)[1] + 1, (torch.randint(-50, 50, (4, 3), generator=_gen(92)),),
     "aten.aminmax.default"),
], ids=["cummax", "cummin", "aminmax"])
def test_integer_extrema_stay_whole_on_the_cpu_in_int(fn, inputs, target):
    """INT's max reduction requantizes: integer running extrema and aminmax are not claimed;
    the op stays on the CPU in one piece and the model runs as PyTorch computes it."""
    model = Fn(fn).eval()
    lm = lowering.lower(model, inputs, profile="INT", calibration=[inputs])
    assert _cpu_ops(lm) == [target], lm.cpu_nodes
    assert all(c.reason for c in lm.cpu_nodes)
    assert torch.equal(lm.run(*inputs)[0], model(*inputs))


@pytest.mark.parametrize("op, profile", [("cummax", "FP"), ("cummax", "INT"), ("logcumsumexp", "FP"),
                                         ("logcumsumexp", "INT")])
def test_beyond_the_size_bound_the_op_stays_whole_on_the_cpu(op, profile):
    """A [..., L, L] triangle over QUADRATIC_ELEMENTS: the op stays on the CPU in one piece, the
    ops around it lower, and the model runs as PyTorch computes it (INT: against the fake-quant
    model in float64, the CPU op run in PyTorch)."""
    from lowering.passes.limits import QUADRATIC_ELEMENTS

    x = _x(2, 1100, seed=95)
    assert x.numel() * 1100 > QUADRATIC_ELEMENTS
    if op == "cummax":
        model = Fn(lambda x: torch.cummax(x * 2.0, -1)[0] + 1.0).eval()
    else:
        model = Fn(lambda x: torch.logcumsumexp(x * 2.0, -1) + 1.0).eval()
    lm = lowering.lower(model, (x,), profile=profile, calibration=[(x,)] if profile == "INT" else None)
    assert _cpu_ops(lm) == [f"aten.{op}.default"], lm.cpu_nodes
    assert len(lm.partitions) == 2
    if profile == "FP":
        torch.testing.assert_close(lm.run(x)[0], model(x), atol=0.0, rtol=0.0)
    else:
        judged = judge_whole(lm, model, (x,))
        assert judged["ok"], judged
