"""torch.sort (sort.default, sort.stable), topk, argsort (default, stable), msort, kthvalue and
median (median.dim, median.default) lowered whole by decomposition
(lowering.passes.decompositions.sorting): a stable rank by pairwise comparison, the indices by
an exact int32 one-hot sum, the values by one GATHER.

Every case lowers whole (no CPU partition). FP: values equal PyTorch's exactly (a GATHER moves
bits); indices equal PyTorch's where the input has no ties, and with ties equal the stable sort's
(``torch.sort(stable=True)``: topk's first k, kthvalue's position k - 1, median's (N - 1) // 2);
PyTorch's own topk / kthvalue / unstable sort may pick another of equal values (tested as not
claimed). NaN sorts as the largest value, as in PyTorch. INT (int8): the values are the input's
levels in sorted order with the input's quantization (0 steps from the fake-quant model), the
indices those of a stable sort of the int8 levels (quantized ties included). Over the size bound
(lowering.passes.limits.QUADRATIC_ELEMENTS in the [..., N, N] comparison) the op stays on the CPU
whole and the model runs as PyTorch computes it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int, judge_whole

import lowering
from lowering.passes.limits import QUADRATIC_ELEMENTS

gen = torch.Generator().manual_seed(31)
NAN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _seeded():
    """Each test draws the same inputs however the tests are selected or ordered."""
    gen.manual_seed(31)


def distinct(*shape, scale: float = 0.25):
    """Distinct values (no ties), in random order, spaced ``scale`` apart."""
    n = int(np.prod(shape))
    return (torch.randperm(n, generator=gen).float() - n / 2).mul(scale).reshape(shape)


def tied(*shape, levels: int = 4):
    """Values with many ties: multiples of 0.5 in [-levels / 2, levels / 2]."""
    return torch.randint(-levels, levels + 1, shape, generator=gen).float() * 0.5


# ----------------------------------------------------------------------------- the ops, each with
# its stable reference (what the lowering claims): torch.sort(stable=True) read as the op reads it


def _stable(x, dim, descending):
    return torch.sort(x, dim=dim, descending=descending, stable=True)


def sort_op(dim=-1, descending=False, stable=None):
    kw = {} if stable is None else {"stable": stable}
    return (lambda x: tuple(torch.sort(x, dim=dim, descending=descending, **kw)),
            lambda x: tuple(_stable(x, dim, descending)))


def topk_op(k, dim=-1, largest=True, sorted_=True):
    def ref(x):
        s = _stable(x, dim, largest)
        return s.values.narrow(dim, 0, k), s.indices.narrow(dim, 0, k)
    return (lambda x: tuple(torch.topk(x, k, dim=dim, largest=largest, sorted=sorted_)), ref)


def argsort_op(dim=-1, descending=False, stable=None):
    kw = {} if stable is None else {"stable": stable}
    return (lambda x: torch.argsort(x, dim=dim, descending=descending, **kw),
            lambda x: _stable(x, dim, descending).indices)


def msort_op():
    return (torch.msort, lambda x: _stable(x, 0, False).values)


def _select(s, dim, position, keepdim):
    out = [t.narrow(dim, position, 1) for t in (s.values, s.indices)]
    return tuple(out if keepdim else [t.squeeze(dim) for t in out])


def kthvalue_op(k, dim=-1, keepdim=False):
    return (lambda x: tuple(torch.kthvalue(x, k, dim, keepdim)),
            lambda x: _select(_stable(x, dim, False), dim, k - 1, keepdim))


def median_op(dim, keepdim=False):
    def ref(x):
        # PyTorch's median: the lower median of the NaN-last stable order; a row with a NaN gives
        # the first NaN (position N - count(NaN) of that order)
        s, n = _stable(x, dim, False), x.shape[dim]
        nans = x.isnan().sum(dim, keepdim=True) if x.is_floating_point() else None
        if nans is None or not nans.any():
            return _select(s, dim, (n - 1) // 2, keepdim)
        pos = torch.where(nans > 0, n - nans, (n - 1) // 2)
        out = [t.gather(dim, pos) for t in (s.values, s.indices)]
        return tuple(out if keepdim else [t.squeeze(dim) for t in out])
    return (lambda x: tuple(torch.median(x, dim, keepdim)), ref)


def median_all_op():
    return (torch.median, lambda x: median_op(0)[1](x.reshape(-1))[0])


#: name -> (op and its stable reference, input shape); the sorted dim is the one the op names
OPS = {
    "sort_1d": (sort_op(), (9,)),
    "sort_last": (sort_op(-1), (3, 7)),
    "sort_dim0_descending": (sort_op(0, True), (6, 4)),
    "sort_dim1_4d": (sort_op(1), (2, 5, 3, 2)),
    "sort_neg2_descending_3d": (sort_op(-2, True), (2, 6, 3)),
    "sort_stable_kwargs": (sort_op(1, True, stable=True), (3, 8)),
    "sort_unstable_kwarg": (sort_op(-1, False, stable=False), (2, 20)),
    "sort_length_1": (sort_op(1), (3, 1, 2)),
    "topk_1": (topk_op(1), (4, 10)),
    "topk_k_equals_n": (topk_op(6), (3, 6)),
    "topk_smallest_dim0": (topk_op(3, 0, largest=False), (7, 4)),
    "topk_neg_dim_4d": (topk_op(2, -3), (2, 5, 3, 2)),
    "topk_1d": (topk_op(4), (11,)),
    "argsort": (argsort_op(), (4, 9)),
    "argsort_descending_dim0": (argsort_op(0, True), (8, 3)),
    "argsort_stable_3d": (argsort_op(1, False, stable=True), (2, 7, 3)),
    "msort": (msort_op(), (7, 3)),
    "kthvalue_1": (kthvalue_op(1), (3, 8)),
    "kthvalue_n_keepdim": (kthvalue_op(5, 0, True), (5, 4)),
    "kthvalue_mid_3d": (kthvalue_op(3, -2), (2, 6, 3)),
    "median_odd": (median_op(-1), (4, 7)),
    "median_even_keepdim": (median_op(0, True), (6, 3)),
    "median_4d": (median_op(2), (2, 3, 5, 2)),
    "median_all": (median_all_op(), (4, 5)),
}


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _equal(got, want):
    """Exactly equal (NaN equal to NaN); shapes and index dtypes included."""
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    if want.is_floating_point():
        assert torch.equal(got.isnan(), want.isnan()), (got, want)
        assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), (got, want)
    else:
        assert torch.equal(got.to(want.dtype), want), (got, want)


def _fp(fn, x):
    model = Fn(fn).eval()
    lm = lowering.lower(model, (x,), profile="FP")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    return lm, _flat(lm.run(x))


@pytest.mark.parametrize("name", sorted(OPS))
def test_fp_without_ties_equals_pytorch(name):
    (fn, stable), shape = OPS[name]
    x = distinct(*shape)
    lm = check_fp(Fn(fn), (x,), atol=0.0, rtol=0.0)  # values exactly, indices equal
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    for got, want in zip(_flat(lm.run(x)), _flat(stable(x)), strict=True):
        _equal(got, want)


@pytest.mark.parametrize("name", sorted(OPS))
def test_fp_with_ties_is_the_stable_sort(name):
    (fn, stable), shape = OPS[name]
    x = tied(*shape)
    assert x.unique().numel() < x.numel()  # the case has ties
    _stable_and_torch_values(fn, stable, x)


def _stable_and_torch_values(fn, stable, x):
    """The FP lowering of ``fn`` on ``x`` gives the stable sort's values and indices, and
    PyTorch's values (whichever of equal values PyTorch's index picked)."""
    _, got = _fp(fn, x)
    for g, want in zip(got, _flat(stable(x)), strict=True):
        _equal(g, want)
    with torch.no_grad():
        theirs = _flat(fn(x))
    for g, t in zip(got, theirs, strict=True):
        if t.is_floating_point():
            _equal(g, t)


def _with_nans(*shape):
    x = tied(*shape)
    x.view(-1)[torch.randperm(x.numel(), generator=gen)[: x.numel() // 4]] = NAN
    x.view(-1)[0], x.view(-1)[-1] = INF, -INF
    return x


@pytest.mark.parametrize("name", sorted(OPS))
def test_fp_nan_sorts_as_the_largest_value(name):
    """NaN after +inf (PyTorch's order), NaNs in index order among themselves; median of a row
    holding a NaN is NaN at the first NaN's index, as PyTorch's."""
    (fn, stable), shape = OPS[name]
    _stable_and_torch_values(fn, stable, _with_nans(*shape))


def test_fp_median_with_nan_matches_pytorch_indices():
    # torch.median's index is the stable lower median's, or the first NaN's: claimed exactly
    x = tied(6, 9)
    x[1, 3] = x[1, 7] = NAN
    x[4, 0] = NAN
    _, got = _fp(lambda x: tuple(torch.median(x, -1)), x)
    with torch.no_grad():
        values, indices = torch.median(x, -1)
    _equal(got[0], values)
    _equal(got[1], indices)
    assert got[0].isnan().tolist() == [False, True, False, False, True, False]


@pytest.mark.parametrize("op", ["topk", "kthvalue", "sort"])
def test_fp_ties_pytorch_breaks_otherwise_are_not_claimed(op):
    """With ties, PyTorch's topk and kthvalue (a selection) and its unstable sort beyond 16
    elements may return another index of an equal value than the stable order's. We claim the
    stable one only: ours is it, PyTorch's points at an equal value, and on this input the two
    do differ (so the claim is not PyTorch's)."""
    x = tied(8, 40, levels=2)
    fn = {"topk": lambda x: tuple(torch.topk(x, 20)),
          "kthvalue": lambda x: tuple(torch.kthvalue(x, 17)),
          "sort": lambda x: tuple(torch.sort(x, -1))}[op]
    stable = {"topk": topk_op(20)[1], "kthvalue": kthvalue_op(17)[1], "sort": sort_op()[1]}[op]
    _, (values, indices) = _fp(fn, x)
    want_values, want_indices = stable(x)
    _equal(values, want_values)
    _equal(indices, want_indices)
    with torch.no_grad():
        their_values, their_indices = fn(x)
    _equal(values, their_values)
    dim_indices = their_indices if their_indices.dim() == 2 else their_indices[:, None]
    picked = x.gather(-1, dim_indices).reshape(their_values.shape)
    assert torch.equal(picked, their_values)
    assert not torch.equal(indices, their_indices)


def test_fp_topk_unsorted_is_returned_sorted():
    """sorted=False lets PyTorch return the top k in any order; ours are sorted, the same set."""
    x = distinct(5, 12)
    _, (values, indices) = _fp(lambda x: tuple(torch.topk(x, 5, sorted=False)), x)
    want = torch.topk(x, 5)
    _equal(values, want.values)
    _equal(indices, want.indices)
    theirs = torch.topk(x, 5, sorted=False)
    assert torch.equal(theirs.values.sort(-1).values, values.sort(-1).values)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8])
@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_integer_tensors_sort(profile, dtype):
    """Integer inputs, no quantization: int64 carried as int32 in TOSA, int8 / int16 compared
    as int32 (TOSA compares int32 only) and gathered in their own type; many ties."""
    x = torch.randint(-50, 50, (3, 12), generator=gen).to(dtype)
    x[:, ::3] = 7
    fn = lambda x: (torch.sort(x, -1, descending=True).values, torch.argsort(x, 0))  # noqa: E731
    lm = lowering.lower(Fn(fn), (x,), profile=profile,
                        calibration=[(x,)] if profile == "INT" else None)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    got = lm.run(x)
    _equal(got[0], torch.sort(x, dim=-1, descending=True, stable=True).values)
    _equal(got[1], torch.sort(x, dim=0, stable=True).indices)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_only_indices_read_needs_no_gather(profile):
    """argsort, and a sort whose values nobody reads: comparisons and sums only."""
    x = distinct(4, 9)
    fn = lambda x: (torch.argsort(x, -1), x.sort(0, descending=True).indices)  # noqa: E731
    lm = check_fp(Fn(fn), (x,), atol=0.0, rtol=0.0) if profile == "FP" else \
        check_int(Fn(fn), (x,), max_steps=0)
    assert lm.cpu_nodes == [] and "GATHER" not in lm.op_counts, lm.op_counts


# ----------------------------------------------------------------------------- INT


def _levels(lm, x) -> torch.Tensor:
    """The int8 levels the lowered model reads for input ``x`` (int64, ``x``'s shape)."""
    return torch.from_numpy(np.asarray(lm.quantize_inputs(x)[0]).astype(np.int64))


@pytest.mark.parametrize("data", ["distinct", "tied"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_int_is_the_stable_sort_of_the_levels(name, data):
    """INT: 0 steps from the fake-quant model; the values are the input's levels in sorted
    order, with the input's quantization; the indices those of the stable sort of the levels
    (equal levels are ties, whatever the float inputs were)."""
    (fn, stable), shape = OPS[name]
    x = distinct(*shape) if data == "distinct" else tied(*shape)
    lm = check_int(Fn(fn), (x,), max_steps=0)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    q = _levels(lm, x)
    qin = lm.input_qparams[0]
    raws = lm.run_raw(lm.quantize_inputs(x))
    wants = _flat(stable(q))
    kinds = _flat(stable(x))
    for raw, want, kind, qp in zip(raws, wants, kinds, lm.output_qparams, strict=True):
        raw = torch.from_numpy(np.asarray(raw).astype(np.int64)).reshape(want.shape)
        if kind.is_floating_point():  # values: the input's levels and quantization
            assert qp is not None and (float(qp.s), int(qp.zp)) == (float(qin.s), int(qin.zp))
        assert torch.equal(raw, want), (raw, want)
    if data == "tied":
        assert q.unique().numel() < q.numel()


# ----------------------------------------------------------------------------- used downstream


class MoERouter(nn.Module):
    """Top-2 routing of tokens to 6 experts: softmax over the top-2 logits, scattered back to a
    dense [tokens, experts] combine weight by one-hot (Mixtral's router)."""

    def __init__(self, dim=8, experts=6, k=2):
        super().__init__()
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts, self.k = experts, k

    def forward(self, x):
        logits = self.gate(x)
        top, chosen = torch.topk(logits, self.k, dim=-1)
        weights = torch.softmax(top, dim=-1)
        dense = (F.one_hot(chosen, self.experts).to(x.dtype) * weights.unsqueeze(-1)).sum(-2)
        return dense, chosen


class TopKMask(nn.Module):
    """Keep each row's top 3 logits (the rest -8) by comparing with the 3rd largest."""

    def forward(self, x):
        kth = torch.topk(x, 3, dim=-1).values[..., -1:]
        return torch.where(x >= kth, x, torch.full_like(x, -8.0))


class TopPFilter(nn.Module):
    """Top-p (nucleus) filtering of a sampling head: probabilities sorted descending, the tail
    past p = 0.8 zeroed, put back in vocabulary order by gathering at the inverse permutation
    (an argsort of the sort's indices)."""

    def forward(self, logits):
        probs = torch.softmax(logits, dim=-1)
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        kept = torch.where(before < 0.8, sorted_probs, torch.zeros_like(sorted_probs))
        return torch.gather(kept, -1, torch.argsort(order, dim=-1))


class GatherByTopk(nn.Module):
    """Rows of a table picked by each query's top-3 scores (index_select), and the values at
    those positions of another tensor (gather)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(10, 4, generator=gen))

    def forward(self, scores, other):
        idx = torch.topk(scores, 3, dim=-1).indices
        rows = torch.index_select(self.table, 0, idx.reshape(-1)).reshape(*idx.shape, 4)
        return rows.sum(-2), torch.gather(other, -1, idx)


class KthThreshold(nn.Module):
    """Values at or below each row's median kept, the rest clipped to it (median.dim), and the
    rows' 2nd smallest (kthvalue) subtracted."""

    def forward(self, x):
        med = torch.median(x, dim=-1, keepdim=True).values
        second = torch.kthvalue(x, 2, dim=-1, keepdim=True).values
        return torch.minimum(x, med) - second


DOWNSTREAM = {
    "moe_router": (MoERouter(), lambda: (distinct(5, 8, scale=0.1),)),
    "topk_mask": (TopKMask(), lambda: (distinct(4, 9),)),
    "top_p_filter": (TopPFilter(), lambda: (distinct(3, 10, scale=0.3),)),
    "gather_by_topk": (GatherByTopk(), lambda: (distinct(4, 10), distinct(4, 10))),
    "kth_threshold": (KthThreshold(), lambda: (distinct(3, 7),)),
}

#: INT against the fake-quant model, in output steps (found: 0 in every case, the sort's values
#: and indices being exact and the rest requantized as the fake-quant model rounds)
INT_DOWNSTREAM_STEPS = 0


@pytest.mark.parametrize("name", sorted(DOWNSTREAM))
def test_fp_downstream(name):
    model, inputs = DOWNSTREAM[name]
    lm = check_fp(model, inputs(), atol=1e-6, rtol=1e-5)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes


@pytest.mark.parametrize("name", sorted(DOWNSTREAM))
def test_int_downstream(name):
    model, inputs = DOWNSTREAM[name]
    lm = check_int(model, inputs(), max_steps=INT_DOWNSTREAM_STEPS)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes


# ----------------------------------------------------------------------------- the size bound


def _largest_lowered_rows(n: int) -> int:
    """Rows of length ``n`` whose [rows, n, n] comparison just fits the bound."""
    return QUADRATIC_ELEMENTS // (n * n)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_at_the_bound_lowers_and_one_row_more_stays_on_the_cpu(profile):
    """[rows, 256] with rows * 256 * 256 at the bound lowers whole; one more row stays on the
    CPU whole (only lowering is compared here: the run of the lowered one is the next case's)."""
    n = 256
    rows = _largest_lowered_rows(n)
    for r, whole in ((rows, True), (rows + 1, False)):
        x = distinct(r, n, scale=0.01)
        lm = lowering.lower(Fn(lambda x: torch.topk(x, 2).values), (x,), profile=profile,
                            calibration=[(x,)] if profile == "INT" else None)
        if whole:
            assert lm.cpu_nodes == [], lm.cpu_nodes
        else:
            assert {c.target for c in lm.cpu_nodes} == {"aten.topk.default", "getitem"}, lm.cpu_nodes


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_over_the_bound_stays_on_the_cpu_and_runs(profile):
    """A sort over 2048 elements a row (2 * 2048 * 2048 comparisons, past the bound): the sort
    stays on the CPU in one piece, the rest lowers, and the model runs as PyTorch computes it
    (INT: as the fake-quant model does)."""
    model = Fn(lambda x: tuple(t * 2 if t.is_floating_point() else t
                               for t in torch.sort(x + 1.0, -1, descending=True))).eval()
    x = distinct(2, 2048, scale=0.001)
    assert 2 * 2048 * 2048 > QUADRATIC_ELEMENTS
    lm = lowering.lower(model, (x,), profile=profile, calibration=[(x,)] if profile == "INT" else None)
    assert {c.target for c in lm.cpu_nodes} == {"aten.sort.default", "getitem"}, lm.cpu_nodes
    assert lm.partitions  # the add and the multiply still lower
    row = judge_whole(lm, model, (x,))
    assert row["ok"], row


def test_fp_at_the_bound_runs_exactly():
    """The largest comparison the bound allows, run: [2, 1024] (2 * 1024 * 1024 = the bound),
    sorted exactly."""
    n = 1024
    rows = _largest_lowered_rows(n)
    x = distinct(rows, n, scale=0.001)
    lm = check_fp(Fn(lambda x: tuple(torch.sort(x, -1))), (x,), atol=0.0, rtol=0.0)
    assert lm.cpu_nodes == [], lm.cpu_nodes
