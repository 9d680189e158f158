"""torch.count_nonzero (dim None / int / tuple / negative), torch.isclose (rtol, atol, equal_nan;
NaN and inf; as a mask feeding where) and torch.bucketize / torch.searchsorted (constant and
input boundaries, 1-D and batched, right / side, out_int32, a sorter, values exactly on
boundaries, NaN;
the indices feeding an embedding or index_select as positional-bucket code does) lowered whole
by ``lowering/passes/decompositions/compare_count.py``.

FP is checked against PyTorch exactly (atol = rtol = 0): the outputs are integers or booleans
(compared with torch.equal), and the one float output (isclose's mask picking between inputs in
``where``) is a selection of input values. INT (count_nonzero, bucketize, searchsorted, isclose)
is checked exactly (0 steps) against the fake-quant model: the integer results come
from comparing int8 values with the zero / boundaries quantized at the input's scale, which is
what the fake-quant model compares (isclose in INT: tests/lowering/test_lowering_tile_pool3d.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from lowering_checks import Fn, check_fp, check_int

import lowering

torch.set_num_threads(1)

NAN, INF = float("nan"), float("inf")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=_gen(seed))


def _sparse(*shape, seed=0):
    """Values with many exact zeros, and -0.0 among them."""
    x = torch.relu(_x(*shape, seed=seed))
    x[..., ::3] = -0.0
    return x


BOUNDS = torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5])
#: BOUNDS out of order (sorted by a ``sorter``)
UNSORTED = BOUNDS[torch.tensor([3, 0, 4, 2, 1])]
#: values on every boundary, between them, beyond both ends
ON_BOUNDS = torch.tensor([-2.0, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5, 3.0])


class Buckets(nn.Module):
    """Bucketize against a constant buffer of boundaries."""

    def __init__(self, right=False, out_int32=False):
        super().__init__()
        self.register_buffer("bounds", BOUNDS.clone())
        self.right, self.out_int32 = right, out_int32

    def forward(self, x):
        return torch.bucketize(x, self.bounds, right=self.right, out_int32=self.out_int32)


class PositionalBuckets(nn.Module):
    """A learned bias per distance bucket (T5-style relative positions): bucketize the
    distances, look the bucket up in an embedding."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.register_buffer("bounds", torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0]))
        self.bias = nn.Embedding(6, 4)

    def forward(self, distance):
        return self.bias(torch.bucketize(distance.abs(), self.bounds))


class SearchSelect(nn.Module):
    """searchsorted indices picking rows of a table by index_select."""

    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.tensor([-0.5, 0.0, 0.5]))
        self.register_buffer("table", _x(4, 3, seed=9))

    def forward(self, x):
        return torch.index_select(self.table, 0, torch.searchsorted(self.edges, x, right=True))


def _distances():
    return torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 16.0, 17.0, 30.0]]) - 7.0


#: name -> (model, inputs, also checked in INT)
CASES = {
    # count_nonzero
    "count_all": (Fn(lambda x: torch.count_nonzero(x)), (_sparse(3, 4, 5, seed=1),), True),
    "count_dim": (Fn(lambda x: torch.count_nonzero(x, dim=1)), (_sparse(3, 4, 5, seed=2),), True),
    "count_neg_dim": (Fn(lambda x: torch.count_nonzero(x, -1)), (_sparse(3, 4, 5, seed=3),), True),
    "count_tuple": (Fn(lambda x: torch.count_nonzero(x, dim=(0, -1))), (_sparse(3, 4, 5, seed=4),), True),
    "count_minus_zero_nan_inf": (Fn(lambda x: torch.count_nonzero(x, 0)),
                                 (torch.tensor([[0.0, -0.0, NAN, INF, -INF, 1e-30]] * 2),), False),
    "count_int": (Fn(lambda x: torch.count_nonzero(x, 1)),
                  (torch.randint(-2, 3, (4, 6), generator=_gen(5)),), True),
    "count_bool": (Fn(lambda x: torch.count_nonzero(x > 0, dim=(1,))), (_x(4, 6, seed=6),), True),
    "count_then_float": (Fn(lambda x: torch.count_nonzero(x, 1).float() * 0.5), (_sparse(4, 7, seed=7),), True),
    # isclose
    "isclose_default": (Fn(lambda a, b: torch.isclose(a, b)),
                        (torch.tensor([1.0, 1.0, 0.0, 1e-9, 1e5]),
                         torch.tensor([1.0 + 1e-6, 1.0 + 1e-4, 1e-8, 0.0, 1e5 + 1.0])), False),
    "isclose_tolerances": (Fn(lambda a, b: torch.isclose(a, b, rtol=1e-2, atol=1e-3)),
                           (_x(6, 7, seed=8), _x(6, 7, seed=8) + 1e-2 * _x(6, 7, seed=9)), False),
    "isclose_nan_inf_equal_nan": (
        Fn(lambda a, b: torch.isclose(a, b, equal_nan=True)),
        (torch.tensor([NAN, NAN, 1.0, INF, INF, -INF, INF, 2.0]),
         torch.tensor([NAN, 1.0, NAN, INF, -INF, -INF, 1e38, 2.0])), False),
    "isclose_nan_inf": (
        Fn(lambda a, b: torch.isclose(a, b)),
        (torch.tensor([NAN, NAN, 1.0, INF, INF, -INF, INF, 2.0]),
         torch.tensor([NAN, 1.0, NAN, INF, -INF, -INF, 1e38, 2.0])), False),
    "isclose_infinite_atol": (Fn(lambda a, b: torch.isclose(a, b, atol=INF)),
                              (torch.tensor([1.0, INF, NAN, -5.0]), torch.tensor([1e30, 1.0, 1.0, 7.0])),
                              False),
    "isclose_exact_only": (Fn(lambda a, b: torch.isclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)),
                           (torch.tensor([1.0, NAN, -0.0]), torch.tensor([1.0, NAN, 0.0])), False),
    "isclose_broadcast": (Fn(lambda a, b: torch.isclose(a, b, rtol=0.1)), (_x(3, 4, seed=10), _x(4, seed=10)),
                          False),
    "isclose_mask_in_where": (
        Fn(lambda a, b: torch.where(torch.isclose(a, b, rtol=1e-2, atol=1e-2), a, torch.zeros_like(a))),
        (_x(5, 6, seed=11), _x(5, 6, seed=11) + 2e-2 * _x(5, 6, seed=12)), False),
    # bucketize / searchsorted
    "bucketize_left_on_bounds": (Buckets(), (ON_BOUNDS,), True),
    "bucketize_right_on_bounds": (Buckets(right=True), (ON_BOUNDS,), True),
    "bucketize_int32_random": (Buckets(out_int32=True), (_x(3, 8, seed=13),), True),
    "bucketize_nan": (Buckets(), (torch.tensor([NAN, 0.0, -INF, INF]),), False),
    "bucketize_input_bounds": (Fn(lambda x, b: torch.bucketize(x, b)),
                               (_x(4, 5, seed=14), torch.tensor([-1.0, 0.0, 0.0, 2.0])), False),
    "bucketize_int": (Fn(lambda x: torch.bucketize(x, torch.tensor([-3, 0, 2, 5]), right=True)),
                      (torch.randint(-6, 7, (12,), generator=_gen(15)),), True),
    "searchsorted_left": (Fn(lambda x: torch.searchsorted(BOUNDS, x)), (ON_BOUNDS.reshape(2, 5),), True),
    "searchsorted_side_right": (Fn(lambda x: torch.searchsorted(BOUNDS, x, side="right", out_int32=True)),
                                (ON_BOUNDS,), True),
    "searchsorted_batched": (Fn(lambda s, x: torch.searchsorted(s, x)),
                             (torch.sort(_x(3, 6, seed=16), -1).values, _x(3, 4, seed=17)), False),
    "searchsorted_batched_right": (Fn(lambda s, x: torch.searchsorted(s, x, right=True)),
                                   (torch.tensor([[0.0, 1.0, 1.0, 2.0], [-1.0, -1.0, 3.0, 4.0]]),
                                    torch.tensor([[1.0, 0.0, 2.0], [-1.0, 3.0, 5.0]])), False),
    "searchsorted_const_sorter": (Fn(lambda x: torch.searchsorted(UNSORTED, x, sorter=UNSORTED.argsort())),
                                  (ON_BOUNDS,), True),
    "searchsorted_input_sorter": (Fn(lambda s, x, o: torch.searchsorted(s, x, right=True, sorter=o)),
                                  (UNSORTED, ON_BOUNDS, UNSORTED.argsort()), True),
    "positional_buckets_embedding": (PositionalBuckets(), (_distances(),), True),
    "searchsorted_index_select": (SearchSelect(), (torch.tensor([-1.0, -0.5, 0.0, 0.2, 0.5, 0.9]),), True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fp_lowers_whole_and_matches_torch_exactly(name):
    model, inputs, _ = CASES[name]
    lm = check_fp(model, inputs, atol=0.0, rtol=0.0)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes


@pytest.mark.parametrize("name", [k for k, v in CASES.items() if v[2]])
def test_int_lowers_whole_and_matches_fake_quant_exactly(name):
    model, inputs, _ = CASES[name]
    lm = check_int(model, inputs, max_steps=0)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes


def test_int_bucket_indices_are_the_quantized_inputs_buckets():
    """In INT the buckets are those of the int8 input against the boundaries quantized at the
    input's scale: the lowered indices equal bucketize of the dequantized input against the
    dequantized boundaries (computed here, independently of the fake-quant graph), and differ
    from the float buckets only for values within a step of a boundary."""
    model = Buckets().eval()
    x = torch.linspace(-2.0, 2.0, 41)
    lm = check_int(model, (x,), max_steps=0)
    qp = lm.input_qparams[0]

    def fake_quant(t):
        q = torch.ops.quantized_decomposed.quantize_per_tensor(t, qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)
        return torch.ops.quantized_decomposed.dequantize_per_tensor(q, qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)

    got = lm.run(x)[0]
    assert torch.equal(got, torch.bucketize(fake_quant(x), fake_quant(BOUNDS)))
    differ = got != torch.bucketize(x, BOUNDS)
    near = (x.unsqueeze(-1) - BOUNDS).abs().min(-1).values <= qp.s
    assert not bool((differ & ~near).any())


def test_isclose_lowers_whole_in_int():
    """isclose in INT: ``|x - y| <= atol + |rtol * y|`` on the quantized values, all of it
    lowered, the boolean equal to the fake-quant model's."""
    model = Fn(lambda a, b: torch.isclose(a * 2.0, b, rtol=0.1)).eval()
    inputs = (_x(4, 5, seed=20), 2.0 * _x(4, 5, seed=20) + 0.05 * _x(4, 5, seed=21))
    lm = lowering.lower(model, inputs, profile="INT", calibration=[inputs])
    assert lm.cpu_nodes == []
    got = lm.run(*inputs)[0]
    assert got.dtype == torch.bool
    assert torch.equal(got, lm.quantized_model(*inputs))


def test_int_isclose_infinite_atol_is_a_tolerance_not_a_mask_value():
    """INT bounds infinite scalars (attention-mask fillers) to 256, but not isclose's atol: with
    atol=inf every finite pair is close, even 900 apart."""
    model = Fn(lambda a, b: torch.isclose(a * 2.0, b, atol=INF)).eval()
    inputs = (torch.tensor([0.0, 300.0, -200.0, 1.0]), torch.tensor([0.0, -300.0, 250.0, 1.5]))
    lm = lowering.lower(model, inputs, profile="INT", calibration=[inputs])
    assert [c.target for c in lm.cpu_nodes] == ["aten.isclose.default"]
    assert bool(lm.run(*inputs)[0].all())


def test_bucketize_beyond_the_size_bound_stays_whole_on_the_cpu():
    """2100 values against 1000 boundaries would be a 2.1e6-element comparison, over
    QUADRATIC_ELEMENTS: bucketize stays on the CPU in one piece, the ops around it lower, and the
    result is PyTorch's."""
    from lowering.passes.limits import QUADRATIC_ELEMENTS

    bounds = torch.linspace(-3.0, 3.0, 1000)
    model = Fn(lambda x: torch.bucketize(x * 2.0, bounds) + 1).eval()
    x = _x(2100, seed=22)
    assert x.numel() * bounds.numel() > QUADRATIC_ELEMENTS
    lm = lowering.lower(model, (x,), profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.bucketize.Tensor"]
    assert len(lm.partitions) == 2  # the MUL before it and the ADD after it
    assert torch.equal(lm.run(x)[0], model(x))


def test_bucketize_is_one_comparison_and_one_sum():
    """No GATHER or CPU piece: one broadcast comparison against the boundaries, a cast and a
    REDUCE_SUM."""
    lm = check_fp(Buckets(right=True), (ON_BOUNDS,), atol=0.0, rtol=0.0)
    counts = lm.op_counts
    assert counts.get("GREATER", 0) + counts.get("GREATER_EQUAL", 0) == 1 and counts["REDUCE_SUM"] == 1, counts


@pytest.mark.parametrize("seed", range(3))
def test_input_boundaries_are_read_at_run_time(seed):
    """One lowering serves other boundaries of the same shape: they are compared at run time,
    not folded from the example's values."""
    model = Fn(lambda x, b: torch.bucketize(x, b, right=True)).eval()
    example = (_x(4, 5, seed=30), torch.tensor([-1.0, 0.0, 0.0, 2.0]))
    lm = check_fp(model, example, atol=0.0, rtol=0.0)
    other = (_x(4, 5, seed=31 + seed), torch.sort(_x(4, seed=40 + seed)).values)
    assert torch.equal(lm.run(*other)[0], model(*other))
