"""EmbeddingBag / F.embedding_bag (sum, mean, max; 2-D inputs, constant offsets, offsets as an
input, include_last_offset, padding_idx, per_sample_weights, a table given as an input, the
aten overloads), adaptive_max_pool2d with uneven windows (and 3-D inputs, outputs larger than
the input) and LocalResponseNorm (4-D, 5-D, 3-D inputs; its avg_pool3d, and avg_pool3d of its
own) lowered whole by the decompositions of ``lowering/passes/decompositions/bags_pools.py``.

FP is checked against PyTorch within 1e-5 (the TOSA graph computes in float32 what PyTorch
computes: gathers, exact maxima, sums in another order, and LRN's POW). INT is checked against
the fake-quant model within one output quantization step, and exactly against that model
evaluated in float64: the bags' gathers, maxima and the adaptive max pool move int8 values
unchanged, and every sum, mean, matmul and LRN's pool, pow and division is rounded once, as
the fake-quant model rounds it; the one step allowed is the float32 reference's own rounding
where a mean lands on a tie (the avg_pool3d cases)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int, judge_int, max_step_error

torch.set_num_threads(1)

aten = torch.ops.aten

#: FP: float32 against float32 PyTorch
FP_TOL = 1e-5
#: INT: output quantization steps from the fake-quant model (see the module docstring)
INT_STEPS = 1.0


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=_gen(seed))


def _ids(rows, *shape, seed=0, dtype=torch.int64):
    return torch.randint(rows, shape, generator=_gen(seed)).to(dtype)


class Bag(nn.Module):
    """An ``nn.EmbeddingBag``; ``offsets`` (a buffer) when given, else read from the inputs."""

    def __init__(self, rows=12, width=5, offsets=None, seed=1, **kw):
        super().__init__()
        torch.manual_seed(seed)
        self.bag = nn.EmbeddingBag(rows, width, **kw)
        with torch.no_grad():  # a padding row that is not zero: it must be left out anyway
            self.bag.weight.add_(0.1 * torch.randn(self.bag.weight.shape, generator=_gen(seed)))
        self.const = offsets is not None
        if self.const:
            self.register_buffer("offsets", offsets)

    def forward(self, ids, *rest):
        if self.const:
            return self.bag(ids, self.offsets, *rest)
        return self.bag(ids, *rest)


class BagTimesTwo(Bag):
    """A bag whose output feeds more TOSA work (the bag is not the whole graph)."""

    def forward(self, ids, *rest):
        return torch.relu(super().forward(ids, *rest)) * 2.0 - 0.25


TABLE = _x(9, 6, seed=5)

#: name -> (module, inputs)
BAGS = {
    # 2-D inputs: every bag as long as a row (the offsets torch builds are constants)
    "sum_2d": (Bag(mode="sum"), (_ids(12, 4, 6, seed=1),)),
    "mean_2d": (Bag(mode="mean"), (_ids(12, 3, 5, seed=2),)),
    "max_2d": (Bag(mode="max"), (_ids(12, 2, 7, seed=3),)),
    "max_2d_one_bag_wide": (Bag(rows=30, width=16, mode="max"), (_ids(30, 1, 9, seed=4),)),
    "sum_2d_single_column": (Bag(mode="sum"), (_ids(12, 5, 1, seed=5),)),
    "sum_2d_then_relu": (BagTimesTwo(mode="sum"), (_ids(12, 3, 4, seed=6),)),
    "mean_2d_large": (Bag(rows=200, width=32, mode="mean"), (_ids(200, 16, 12, seed=60),)),
    # 1-D inputs with constant offsets: bags of different sizes, an empty one
    "sum_const_offsets": (Bag(mode="sum", offsets=torch.tensor([0, 2, 2, 7])), (_ids(12, 9, seed=7),)),
    "mean_const_offsets": (Bag(mode="mean", offsets=torch.tensor([0, 1, 4, 4, 5])),
                           (_ids(12, 8, seed=8),)),
    "max_const_offsets": (Bag(mode="max", offsets=torch.tensor([0, 3, 3, 4])), (_ids(12, 10, seed=9),)),
    "sum_const_last_offset": (Bag(mode="sum", include_last_offset=True,
                                  offsets=torch.tensor([0, 4, 5, 5, 9])), (_ids(12, 9, seed=10),)),
    "max_const_last_offset": (Bag(mode="max", include_last_offset=True,
                                  offsets=torch.tensor([0, 2, 6])), (_ids(12, 6, seed=11),)),
    "sum_const_offsets_large": (Bag(rows=120, width=20, mode="sum",
                                    offsets=torch.tensor([0, 1, 1, 6, 18, 19, 25, 25, 31])),
                                (_ids(120, 36, seed=64),)),
    "mean_const_even_1d": (Bag(mode="mean", offsets=torch.tensor([0, 3, 6])), (_ids(12, 9, seed=12),)),
    # offsets given as an input
    "sum_input_offsets": (Bag(mode="sum"), (_ids(12, 9, seed=13), torch.tensor([0, 2, 2, 6]))),
    "mean_input_offsets": (Bag(mode="mean"), (_ids(12, 7, seed=14), torch.tensor([0, 3, 4]))),
    "max_input_offsets": (Bag(mode="max"), (_ids(12, 8, seed=15), torch.tensor([0, 1, 1, 5]))),
    "max_input_offsets_large": (Bag(rows=150, width=24, mode="max", padding_idx=7),
                                (_ids(150, 40, seed=61), torch.tensor([0, 3, 3, 10, 22, 23, 31]))),
    "sum_input_offsets_large": (Bag(rows=150, width=24, mode="sum"),
                                (_ids(150, 40, seed=62), torch.tensor([0, 9, 9, 17, 30]))),
    "max_input_offsets_one_bag": (Bag(mode="max"), (_ids(12, 5, seed=16), torch.tensor([0]))),
    "mean_input_last_offset": (Bag(mode="mean", include_last_offset=True),
                               (_ids(12, 8, seed=17), torch.tensor([0, 5, 5, 8]))),
    "sum_input_offsets_int32": (Bag(mode="sum"), (_ids(12, 6, seed=18, dtype=torch.int32),
                                                  torch.tensor([0, 4], dtype=torch.int32))),
    # padding_idx (its row is not zero here, and is still left out)
    "sum_padding_2d": (Bag(mode="sum", padding_idx=3), (torch.tensor([[3, 1, 4], [0, 3, 3], [5, 6, 3]]),)),
    "mean_padding_2d": (Bag(mode="mean", padding_idx=3),
                        (torch.tensor([[3, 1, 4], [3, 3, 3], [5, 6, 3], [7, 8, 9]]),)),
    "max_padding_2d": (Bag(mode="max", padding_idx=0), (torch.tensor([[0, 0, 0, 0], [0, 2, 5, 0]]),)),
    "mean_padding_const_offsets": (Bag(mode="mean", padding_idx=2, offsets=torch.tensor([0, 2, 2, 5])),
                                   (torch.tensor([2, 2, 1, 2, 7, 9, 2]),)),
    "max_padding_const_offsets": (Bag(mode="max", padding_idx=-1, offsets=torch.tensor([0, 3, 4])),
                                  (torch.tensor([11, 4, 11, 11, 2, 8]),)),
    "max_padding_input_offsets": (Bag(mode="max", padding_idx=5),
                                  (torch.tensor([5, 1, 5, 5, 3, 0, 5]), torch.tensor([0, 2, 4]))),
    "mean_padding_input_offsets": (Bag(mode="mean", padding_idx=5),
                                   (torch.tensor([5, 1, 5, 5, 3, 0, 5]), torch.tensor([0, 2, 4]))),
    "sum_padding_input_offsets": (Bag(mode="sum", padding_idx=4),
                                  (torch.tensor([4, 1, 4, 6, 3]), torch.tensor([0, 1, 3]))),
    # per_sample_weights (sum mode)
    "sum_weights_2d": (Fn(lambda i, w: F.embedding_bag(i, TABLE, per_sample_weights=w, mode="sum")),
                       (_ids(9, 3, 4, seed=19), torch.rand(3, 4, generator=_gen(20)))),
    "sum_weights_const_offsets": (Bag(mode="sum", offsets=torch.tensor([0, 1, 1, 6])),
                                  (_ids(12, 8, seed=21), torch.rand(8, generator=_gen(22)) - 0.3)),
    "sum_weights_input_offsets": (Bag(mode="sum", padding_idx=2),
                                  (torch.tensor([2, 1, 0, 2, 7, 4]), torch.tensor([0, 3, 3]),
                                   torch.rand(6, generator=_gen(23)) * 2)),
    # the table as an input (F.embedding_bag with a computed weight)
    "mean_table_input": (Fn(lambda i, w: F.embedding_bag(i, w, mode="mean")),
                         (_ids(9, 3, 4, seed=24), _x(9, 6, seed=25))),
    "max_table_input_padding": (Fn(lambda i, o, w: F.embedding_bag(i, w, o, mode="max", padding_idx=1)),
                                (torch.tensor([1, 3, 1, 1, 8, 2]), torch.tensor([0, 2, 4]),
                                 _x(9, 6, seed=26))),
    "sum_table_input_ragged": (Fn(lambda i, w: F.embedding_bag(i, w, torch.tensor([0, 4, 5]),
                                                               mode="sum", padding_idx=0)),
                               (torch.tensor([0, 2, 3, 1, 0, 6, 8]), _x(9, 6, seed=27))),
    # the aten overloads called directly
    "aten_embedding_bag": (Fn(lambda i, o: aten.embedding_bag.default(TABLE, i, o, False, 1)[0]),
                           (_ids(9, 7, seed=28), torch.tensor([0, 2, 5]))),
    "aten__embedding_bag": (Fn(lambda i: aten._embedding_bag.default(
        TABLE, i, torch.tensor([0, 3, 3]), False, 2, False, None, False, 4)[0]),
        (torch.tensor([4, 4, 1, 4, 2, 7]),)),
}

POOLS = {
    "adaptive_max_3x5": (nn.AdaptiveMaxPool2d((3, 5)), (_x(2, 3, 7, 9, seed=30),)),
    "adaptive_max_square": (nn.AdaptiveMaxPool2d(4), (_x(1, 4, 10, 10, seed=31),)),
    "adaptive_max_7_from_odd": (nn.AdaptiveMaxPool2d(7), (_x(1, 2, 11, 13, seed=32),)),
    "adaptive_max_one_axis_even": (nn.AdaptiveMaxPool2d((2, 3)), (_x(3, 2, 8, 7, seed=33),)),
    "adaptive_max_keep_width": (nn.AdaptiveMaxPool2d((4, None)), (_x(1, 3, 9, 6, seed=34),)),
    "adaptive_max_upscale": (nn.AdaptiveMaxPool2d((5, 4)), (_x(1, 2, 3, 3, seed=35),)),
    "adaptive_max_batchless": (nn.AdaptiveMaxPool2d((3, 2)), (_x(4, 8, 5, seed=36),)),
    "adaptive_max_batchless_even": (nn.AdaptiveMaxPool2d(2), (_x(3, 6, 4, seed=37),)),
    "adaptive_max_functional_then_conv": (
        nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveMaxPool2d((5, 3)), nn.Flatten(),
                      nn.Linear(60, 3)), (_x(2, 3, 12, 7, seed=38),)),
    "lrn_default": (nn.LocalResponseNorm(3), (_x(2, 6, 5, 5, seed=40),)),
    "lrn_alexnet": (nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0), (_x(1, 8, 6, 7, seed=41) * 3,)),
    "lrn_even_size": (nn.LocalResponseNorm(4, alpha=0.1, beta=0.5, k=1.5), (_x(2, 7, 4, 3, seed=42),)),
    "lrn_wider_than_channels": (nn.LocalResponseNorm(9, alpha=0.3, beta=1.0, k=0.5), (_x(1, 3, 4, 4, seed=43),)),
    "lrn_large": (nn.LocalResponseNorm(5, alpha=1e-3, beta=0.75, k=1.0), (_x(2, 24, 13, 11, seed=63) * 4,)),
    "lrn_5d": (nn.LocalResponseNorm(2, alpha=0.05, beta=0.6, k=1.0), (_x(2, 5, 3, 4, 3, seed=44),)),
    "lrn_3d": (nn.LocalResponseNorm(3, alpha=0.2, beta=0.75), (_x(2, 6, 9, seed=45),)),
    "lrn_after_conv": (nn.Sequential(nn.Conv2d(2, 6, 3), nn.ReLU(), nn.LocalResponseNorm(5, alpha=0.01)),
                       (_x(1, 2, 8, 8, seed=46),)),
    "avg_pool3d_cube": (Fn(lambda x: F.avg_pool3d(x, 2)), (_x(1, 3, 4, 6, 6, seed=47),)),
    "avg_pool3d_pad_ceil": (Fn(lambda x: F.avg_pool3d(x, (3, 2, 3), (2, 2, 1), (1, 1, 0), ceil_mode=True)),
                            (_x(2, 2, 7, 5, 6, seed=48),)),
    "avg_pool3d_exclude_pad": (Fn(lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False)),
                               (_x(1, 2, 5, 6, 7, seed=49),)),
    "avg_pool3d_depth_divisor": (Fn(lambda x: F.avg_pool3d(x, (3, 1, 1), 1, divisor_override=2)),
                                 (_x(1, 2, 5, 3, 4, seed=50),)),
    "avg_pool3d_batchless": (Fn(lambda x: F.avg_pool3d(x, (2, 3, 3), 1)), (_x(3, 4, 5, 5, seed=51),)),
}

CASES = {**{f"bag_{k}": v for k, v in BAGS.items()}, **POOLS}


@pytest.mark.parametrize("name", list(CASES))
def test_fp_lowers_whole_and_matches_torch(name):
    model, inputs = CASES[name]
    lm = check_fp(model, inputs, atol=FP_TOL, rtol=FP_TOL)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("name", list(CASES))
def test_int_lowers_whole_and_matches_fake_quant(name):
    """Within :data:`INT_STEPS` of the float32 fake-quant model; against the fake-quant model
    evaluated in float64 (no float32 rounding at ties in the reference) exact: the one step
    allowed is the float32 reference's (avg_pool3d's means land on ties)."""
    model, inputs = CASES[name]
    lm = check_int(model, inputs, max_steps=INT_STEPS)
    assert lm.cpu_nodes == []
    judged = judge_int(lm, inputs)
    assert judged["ok"], judged


def test_bags_are_gathers_and_reductions():
    """The bag becomes one GATHER of the table and a reduction, not a CPU piece."""
    for name, reduce_op in (("sum_2d", "REDUCE_SUM"), ("max_const_offsets", "REDUCE_MAX"),
                            ("mean_input_offsets", "MATMUL")):
        model, inputs = BAGS[name]
        for check in (check_fp, check_int):
            lm = check(model, inputs)
            assert "GATHER" in lm.op_counts and reduce_op in lm.op_counts, (name, lm.op_counts)


def test_uneven_adaptive_max_pool_is_one_max_pool():
    model, inputs = POOLS["adaptive_max_7_from_odd"]
    for check in (check_fp, check_int):
        lm = check(model, inputs)
        assert lm.op_counts.get("MAX_POOL2D") == 1 and "GATHER" in lm.op_counts, lm.op_counts


def test_lrn_is_one_pool_over_channels():
    """LRN's channel-window sum is one 2-D pool (an AVG_POOL2D, or the window sums of a
    DEPTHWISE_CONV2D of ones) of the reshaped squares, in both profiles."""
    model, inputs = POOLS["lrn_alexnet"]
    for check in (check_fp, check_int):
        counts = check(model, inputs).op_counts
        assert counts.get("AVG_POOL2D", 0) + counts.get("DEPTHWISE_CONV2D", 0) == 1, counts


def test_embedding_bag_extra_outputs_stay_on_the_cpu():
    """The offset2bag / bag_size / max_indices results have no decomposition: an op reading
    them keeps the bag on the CPU, and the partial lowering still computes PyTorch's values."""
    m = Fn(lambda i, o: aten._embedding_bag.default(TABLE, i, o, False, 2)[3].float() + 1.0)
    inputs = (torch.tensor([1, 4, 2, 8, 0]), torch.tensor([0, 2]))
    lm = check_fp(m, inputs)
    assert any("embedding_bag" in c.target for c in lm.cpu_nodes)


@pytest.mark.parametrize("name", ["sum_input_offsets", "mean_padding_input_offsets",
                                  "max_input_offsets_large", "mean_input_last_offset",
                                  "sum_weights_input_offsets", "sum_const_offsets", "max_padding_2d"])
def test_indices_and_offsets_are_read_at_run_time(name):
    """One lowering serves other ids, offsets and weights of the same shapes: the bags are
    computed from the inputs, not from the example's values."""
    model, inputs = BAGS[name]
    model = model.eval()
    fp = check_fp(model, inputs, atol=FP_TOL, rtol=FP_TOL)
    int_lm = check_int(model, inputs, max_steps=INT_STEPS)
    rows = model.bag.weight.shape[0]
    for seed in range(3):
        gen = _gen(100 + seed)
        other = []
        for k, x in enumerate(inputs):
            if x.is_floating_point():
                other.append(torch.rand(x.shape, generator=gen))
            elif k == 0:
                other.append(torch.randint(rows, x.shape, generator=gen).to(x.dtype))
            else:  # sorted offsets from 0, bags possibly empty
                count = inputs[0].numel()
                cuts = torch.randint(count + 1, (x.numel() - 1,), generator=gen).sort().values
                other.append(torch.cat([torch.zeros(1, dtype=x.dtype), cuts.to(x.dtype)]))
                if model.bag.include_last_offset:
                    other[-1][-1] = count
        other = tuple(other)
        with torch.no_grad():
            ref = model(*other)
        torch.testing.assert_close(fp.run(*other)[0], ref, atol=FP_TOL, rtol=FP_TOL)
        assert max_step_error(int_lm, other) <= INT_STEPS
