"""Tensor.scatter_add / torch.scatter_add, index_add (alpha), scatter_reduce (sum, prod, amax,
amin, mean; include_self True and False) and torch.cumprod lowered whole by
``lowering/passes/decompositions/scatter_cum.py``: duplicate indices, negative dims, indices
as constants and as inputs, sources wider than the index, an index narrower than ``self``,
integer tensors, a segment sum (GNN readout) and beyond the size bound.

FP: float results against PyTorch within atol = rtol = 1e-5: a position hit by d sources sums
them in another order than PyTorch's one-by-one accumulation (found at most 2.4e-7 on sums
below 3.1 of up to 3 sources; 1.4e-6 on sums up to 13 of about 40 sources per
position: rtol 1e-5 covers it); amax / amin / positions hit once are exact, and cumprod multiplies in
REDUCE_PRODUCT's order (found at most 1.2e-7 relative); mean multiplies by a looked-up 1 / count
where PyTorch divides (found at most 6e-8). Integer results exactly (torch.equal).
INT (int8; sum, amax, amin, mean of float tensors): within one output step of the fake-quant model,
and 0 steps against the fake-quant model evaluated in float64 (judge_int): the mask's select
moves int8 values unchanged, and the sum and its combination with ``self`` are each rounded once,
as the fake-quant model rounds them. prod and cumprod are FP only (TOSA has no integer product
reduction), and so are integer amax / amin (INT's max reduction requantizes); they stay whole on
the CPU in INT.
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp, check_int, judge_int, judge_whole

import lowering

torch.set_num_threads(1)

#: FP float outputs: see the module docstring
FP_TOL = 1e-5


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=_gen(seed))


#: [2, 4] indices into 5 positions, duplicates in both rows, position 4 never hit
INDEX = torch.tensor([[0, 0, 2, 1], [3, 3, 3, 0]])
#: 200 sources onto 5 positions: about 40 per position
MANY = torch.randint(5, (2, 200), generator=_gen(44))
#: index_add's 1-D index into 4 rows: row 0 three times, row 3 never
ROWS = torch.tensor([0, 2, 0, 0, 1])


def scatter_reduce(reduce, include_self=True, dim=1, index=INDEX):
    return Fn(lambda x, s: x.scatter_reduce(dim, index, s, reduce, include_self=include_self))


class SegmentSum(torch.nn.Module):
    """A GNN readout: node features summed per graph (``batch`` names each node's graph)."""

    def forward(self, h, batch):
        return torch.zeros(3, h.shape[1]).index_add(0, batch, h)


#: name -> (model, inputs, also checked in INT)
CASES = {
    "scatter_add_duplicates": (Fn(lambda x, s: x.scatter_add(1, INDEX, s)), (_x(2, 5, seed=1), _x(2, 4, seed=2)),
                               True),
    "scatter_add_many_duplicates": (Fn(lambda x, s: x.scatter_add(1, MANY, s)), (_x(2, 5, seed=42), _x(2, 200, seed=43)),
                                    True),
    "scatter_add_functional_dim0": (Fn(lambda x, s: torch.scatter_add(x, 0, INDEX.T % 2, s)),
                                    (_x(2, 2, seed=3), _x(4, 2, seed=4)), True),
    "scatter_add_negative_dim_3d": (Fn(lambda x, s: x.scatter_add(-2, INDEX.reshape(2, 4, 1).expand(2, 4, 3), s)),
                                    (_x(2, 5, 3, seed=5), _x(2, 4, 3, seed=6)), True),
    "scatter_add_index_input": (Fn(lambda x, i, s: x.scatter_add(1, i, s)),
                                (_x(2, 5, seed=7), INDEX, _x(2, 4, seed=8)), True),
    "scatter_add_wider_src_narrower_index": (Fn(lambda x, s: x.scatter_add(-1, INDEX[:1], s)),
                                             (_x(3, 5, seed=9), _x(2, 6, seed=10)), True),
    "scatter_add_int": (Fn(lambda x, s: x.scatter_add(1, INDEX, s)),
                        (torch.randint(-50, 50, (2, 5), generator=_gen(11)),
                         torch.randint(-50, 50, (2, 4), generator=_gen(12))), True),
    "index_add_alpha": (Fn(lambda x, s: x.index_add(0, ROWS, s, alpha=2.0)), (_x(4, 3, seed=13), _x(5, 3, seed=14)),
                        True),
    "index_add_negative_dim_index_input": (Fn(lambda x, i, s: x.index_add(-1, i, s)),
                                           (_x(2, 3, 4, seed=15), ROWS % 4, _x(2, 3, 5, seed=16)), True),
    "index_add_int": (Fn(lambda x, s: x.index_add(1, ROWS % 3, s, alpha=3)),
                      (torch.randint(-9, 9, (2, 3), generator=_gen(17)),
                       torch.randint(-9, 9, (2, 5), generator=_gen(18))), True),
    "segment_sum": (SegmentSum(), (_x(7, 4, seed=19), torch.tensor([0, 0, 1, 1, 1, 2, 0])), True),
    "reduce_sum_include_self": (scatter_reduce("sum"), (_x(2, 5, seed=20), _x(2, 4, seed=21)), True),
    "reduce_sum_exclude_self": (scatter_reduce("sum", False), (_x(2, 5, seed=22), _x(2, 4, seed=23)), True),
    "reduce_amax_include_self": (scatter_reduce("amax"), (_x(2, 5, seed=24), _x(2, 4, seed=25)), True),
    "reduce_amax_exclude_self": (scatter_reduce("amax", False), (_x(2, 5, seed=26), _x(2, 4, seed=27)), True),
    "reduce_amin_include_self_neg_dim": (scatter_reduce("amin", dim=-1), (_x(2, 5, seed=28), _x(2, 4, seed=29)),
                                         True),
    "reduce_amin_exclude_self": (scatter_reduce("amin", False), (_x(2, 5, seed=30), _x(2, 4, seed=31)), True),
    "reduce_amax_int": (scatter_reduce("amax", False), (torch.randint(-9, 9, (2, 5), generator=_gen(32)),
                                                        torch.randint(-9, 9, (2, 4), generator=_gen(33))), False),
    "reduce_mean_include_self": (scatter_reduce("mean"), (_x(2, 5, seed=45), _x(2, 4, seed=46)), True),
    "reduce_mean_exclude_self": (scatter_reduce("mean", False), (_x(2, 5, seed=47), _x(2, 4, seed=48)), True),
    "reduce_mean_many_duplicates": (scatter_reduce("mean", False, index=MANY), (_x(2, 5, seed=49), _x(2, 200, seed=50)),
                                    True),
    "reduce_prod_include_self": (scatter_reduce("prod"), (_x(2, 5, seed=34), _x(2, 4, seed=35)), False),
    "reduce_prod_exclude_self": (scatter_reduce("prod", False), (_x(2, 5, seed=36), _x(2, 4, seed=37)), False),
    "cumprod_last": (Fn(lambda x: torch.cumprod(x, -1)), (0.5 + torch.rand(3, 9, generator=_gen(38)),), False),
    "cumprod_dim0_signs_zero": (Fn(lambda x: torch.cumprod(x, 0)),
                                (torch.cat([_x(4, 3, seed=39), torch.zeros(1, 3), _x(3, 3, seed=40)]),), False),
    "cumprod_negative_middle_dim": (Fn(lambda x: torch.cumprod(x, -2)), (_x(2, 6, 3, seed=41),), False),
    "cumprod_1d_inf_nan": (Fn(lambda x: torch.cumprod(x, 0)),
                           (torch.tensor([2.0, float("inf"), -1.0, 0.0, 3.0]),), False),
}


def _float_error(model, inputs, lm) -> float:
    with torch.no_grad():
        ref = model(*inputs)
    got = lm.run(*inputs)[0]
    if not ref.is_floating_point():
        return 0.0
    finite = ref.isfinite()
    return float((got[finite] - ref[finite]).abs().max())


@pytest.mark.parametrize("name", list(CASES))
def test_fp_lowers_whole_and_matches_torch(name):
    model, inputs, _ = CASES[name]
    model = model.eval()
    if name == "cumprod_1d_inf_nan":  # NaN (inf * 0) at the same places as PyTorch's
        lm = lowering.lower(model, inputs, profile="FP")
        got, ref = lm.run(*inputs)[0], model(*inputs)
        torch.testing.assert_close(got, ref, atol=0.0, rtol=0.0, equal_nan=True)
        assert bool(ref.isnan().any())
    else:
        lm = check_fp(model, inputs, atol=FP_TOL, rtol=FP_TOL)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes


@pytest.mark.parametrize("name", [k for k, v in CASES.items() if v[2]])
def test_int_lowers_whole_and_matches_fake_quant(name):
    model, inputs, _ = CASES[name]
    lm = check_int(model, inputs, max_steps=1)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    judged = judge_int(lm, inputs)
    assert judged["ok"], judged


def test_duplicates_accumulate_every_source():
    """Each position gets the sum of all its sources: position 0 of row 0 is hit twice, position 3
    of row 1 three times; summing ones makes the counts visible exactly."""
    model = Fn(lambda x, s: x.scatter_add(1, INDEX, s))
    lm = check_fp(model, (torch.zeros(2, 5), torch.ones(2, 4)), atol=0.0, rtol=0.0)
    got = lm.run(torch.zeros(2, 5), torch.ones(2, 4))[0]
    assert torch.equal(got, torch.tensor([[2.0, 1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 3.0, 0.0]]))


@pytest.mark.parametrize("seed", range(3))
def test_index_input_is_read_at_run_time(seed):
    """One lowering serves other indices of the same shape (duplicates included)."""
    model, inputs, _ = CASES["scatter_add_index_input"]
    lm = check_fp(model.eval(), inputs, atol=FP_TOL, rtol=FP_TOL)
    other = (_x(2, 5, seed=50 + seed), torch.randint(5, (2, 4), generator=_gen(60 + seed)), _x(2, 4, seed=70 + seed))
    torch.testing.assert_close(lm.run(*other)[0], model(*other), atol=FP_TOL, rtol=FP_TOL)


@pytest.mark.parametrize("model, target", [
    (scatter_reduce("prod"), "aten.scatter_reduce.two"),
    (Fn(lambda x, s: torch.cumprod(x, -1) + s), "aten.cumprod.default")], ids=["prod", "cumprod"])
def test_products_stay_whole_on_the_cpu_in_int(model, target):
    """Not claimed in INT: the op stays on the CPU in one piece and the partial lowering runs."""
    inputs = (0.5 + torch.rand(2, 5, generator=_gen(80)), _x(2, 4, seed=81) if target.startswith("aten.scatter")
              else _x(2, 5, seed=81))
    model = model.eval()
    lm = lowering.lower(model, inputs, profile="INT", calibration=[inputs])
    assert [c.target for c in lm.cpu_nodes] == [target]
    judged = judge_whole(lm, model, inputs)  # the CPU op in PyTorch, against float64 fake-quant
    assert judged["ok"], judged


def test_integer_scatter_reduce_mean_stays_whole_on_the_cpu():
    """An integer mean is a floor division by the count: not decomposed, it runs on the CPU."""
    model = scatter_reduce("mean").eval()
    inputs = (torch.randint(-9, 9, (2, 5), generator=_gen(82)), torch.randint(-9, 9, (2, 4), generator=_gen(83)))
    lm = lowering.lower(model, inputs, profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.scatter_reduce.two"]
    torch.testing.assert_close(lm.run(*inputs)[0], model(*inputs), atol=0.0, rtol=0.0)


@pytest.mark.parametrize("kind, profile", [("scatter_add", "FP"), ("scatter_add", "INT"), ("index_add", "FP"),
                                           ("index_add", "INT"), ("cumprod", "FP")])
def test_beyond_the_size_bound_the_op_stays_whole_on_the_cpu(kind, profile):
    """A one-hot mask (or cumprod's triangle) over QUADRATIC_ELEMENTS: the op stays on the CPU in
    one piece, the ops around it lower, and the model runs as PyTorch computes it."""
    from lowering.passes.limits import QUADRATIC_ELEMENTS

    if kind == "scatter_add":
        index = torch.randint(2048, (4, 300), generator=_gen(90))
        model = Fn(lambda x, s: (x * 2.0).scatter_add(1, index, s) + 1.0)
        inputs, elements = (_x(4, 2048, seed=91), _x(4, 300, seed=92)), 4 * 300 * 2048
        target = "aten.scatter_add.default"
    elif kind == "index_add":
        index = torch.randint(1500, (1500,), generator=_gen(93))
        model = Fn(lambda x, s: (x * 2.0).index_add(0, index, s) + 1.0)
        inputs, elements = (_x(1500, 2, seed=94), _x(1500, 2, seed=95)), 1500 * 2 * 1500
        target = "aten.index_add.default"
    else:
        model = Fn(lambda x: torch.cumprod(x * 2.0, -1) + 1.0)
        inputs, elements = (0.5 + 0.5 * torch.rand(2, 1100, generator=_gen(96)),), 2 * 1100 * 1100
        target = "aten.cumprod.default"
    assert elements > QUADRATIC_ELEMENTS
    model = model.eval()
    lm = lowering.lower(model, inputs, profile=profile, calibration=[inputs] if profile == "INT" else None)
    assert [c.target for c in lm.cpu_nodes] == [target]
    assert len(lm.partitions) == 2
    with torch.no_grad():
        expected = model(*inputs)
    got = lm.run(*inputs)[0]
    if profile == "FP":
        torch.testing.assert_close(got, expected, atol=0.0, rtol=0.0)
    else:  # against the fake-quant model in float64, the CPU op run in PyTorch
        judged = judge_whole(lm, model, inputs)
        assert judged["ok"], judged
