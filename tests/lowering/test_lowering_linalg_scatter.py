"""torch.addbmm / baddbmm / F.pdist (lowering.passes.decompositions.batched_linalg, matmul),
Tensor.scatter with src or value and F.max_unpool1d / 2d / 3d (scatter_write), and integer
fmod / remainder (int_division, arith), lowered whole.

Every case asserts the model lowers whole (``lm.cpu_nodes == []``) and compares values with an
independent reference: FP against PyTorch, INT against the fake-quant model in output steps
(integer results: equal). Cases that cannot lower assert they stay on the CPU in one piece with
a reason, and that the partly lowered model still computes PyTorch's values.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int

import lowering
from lowering.passes.decompositions.scatter_write import last_write_mask
from lowering.passes.limits import QUADRATIC_ELEMENTS

aten = torch.ops.aten
gen = torch.Generator().manual_seed(23)


def randn(*shape):
    return torch.randn(shape, generator=gen)


def randint(high, *shape, dtype=torch.int64):
    return torch.randint(0, high, shape, generator=gen, dtype=dtype)


def whole_fp(model, inputs, atol=1e-5, rtol=1e-5):
    lm = check_fp(model, inputs, atol=atol, rtol=rtol)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    return lm


def whole_int(model, inputs, max_steps=1.0):
    lm = check_int(model, inputs, max_steps=max_steps)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes
    return lm


def runs_as_pytorch(lm, model, inputs):
    with torch.no_grad():
        expected = model(*inputs)
    torch.testing.assert_close(lm.run(*inputs)[0], expected, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- addbmm / baddbmm
ADDBMM = {
    "plain": ((3, 5), {}),
    "beta_alpha": ((3, 5), dict(beta=0.5, alpha=2.0)),
    "negative_alpha": ((3, 5), dict(beta=-1.0, alpha=-0.25)),
    "broadcast_row": ((5,), {}),
    "broadcast_column": ((3, 1), dict(alpha=3.0)),
}


@pytest.mark.parametrize("name", list(ADDBMM))
def test_addbmm_fp_and_int(name):
    """addbmm as one addmm of the batches laid side by side: FP within float32 rounding of
    PyTorch's batch-by-batch sum, INT within one step of fake-quant."""
    shape, kw = ADDBMM[name]
    model = Fn(lambda i, x, y: torch.addbmm(i, x, y, **kw))
    inputs = (randn(*shape), randn(4, 3, 6), randn(4, 6, 5))
    whole_fp(model, inputs)
    whole_int(model, inputs)


def test_addbmm_one_batch_is_addmm():
    model = Fn(lambda i, x, y: torch.addbmm(i, x, y, alpha=0.5))
    inputs = (randn(2, 3), randn(1, 2, 4), randn(1, 4, 3))
    whole_fp(model, inputs)
    whole_int(model, inputs)


@pytest.mark.parametrize("op", ["addbmm", "baddbmm"])
def test_beta_zero_ignores_nan_input(op):
    """beta = 0: PyTorch ignores ``input`` (its NaN does not propagate), so must the lowering."""
    fn = getattr(torch, op)
    model = Fn(lambda i, x, y: fn(i, x, y, beta=0.0, alpha=1.5))
    shape = (3, 5) if op == "addbmm" else (4, 3, 5)
    inputs = (torch.full(shape, float("nan")), randn(4, 3, 6), randn(4, 6, 5))
    whole_fp(model, inputs)


BADDBMM = {
    "plain": ((4, 3, 5), {}),
    "beta_alpha": ((4, 3, 5), dict(beta=0.5, alpha=2.0)),
    "broadcast_vector": ((5,), dict(alpha=-1.0)),
    "broadcast_batch": ((1, 3, 5), dict(beta=2.0)),
    "broadcast_matrix": ((3, 5), {}),
}


@pytest.mark.parametrize("name", list(BADDBMM))
def test_baddbmm_variants_fp_and_int(name):
    """baddbmm (matmul.py's decomposition): broadcast inputs, beta and alpha."""
    shape, kw = BADDBMM[name]
    model = Fn(lambda i, x, y: torch.baddbmm(i, x, y, **kw))
    inputs = (randn(*shape), randn(4, 3, 6), randn(4, 6, 5))
    whole_fp(model, inputs)
    whole_int(model, inputs)


def test_integer_addbmm_stays_whole_on_the_cpu():
    """Integer batches: no float matmul path; the op stays on the CPU whole and runs."""
    model = Fn(lambda i, x, y: torch.addbmm(i, x, y))
    inputs = (randint(5, 2, 3), randint(5, 4, 2, 3), randint(5, 4, 3, 3))
    lm = lowering.lower(model, inputs, profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.addbmm.default"]
    assert torch.equal(lm.run(*inputs)[0].to(torch.int64), model(*inputs))


# ----------------------------------------------------------------------------- pdist
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, float("inf")])
@pytest.mark.parametrize("rows", [2, 7])
def test_pdist_fp(p, rows):
    """Condensed pairwise distances in PyTorch's order, within float32 rounding."""
    model = Fn(lambda x: F.pdist(x, p=p))
    whole_fp(model, (randn(rows, 4),))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
def test_pdist_int(p):
    model = Fn(lambda x: F.pdist(x, p=p))
    whole_int(model, (randn(6, 3),))


def test_pdist_of_repeated_rows_is_zero():
    """Identical rows: distance 0 exactly (sqrt of an exact zero sum)."""
    x = randn(3, 4).repeat(2, 1)
    # (the other distances are square roots within float32 rounding of PyTorch's, whichever
    # values the shared generator gives this test)
    lm = whole_fp(Fn(lambda t: F.pdist(t)), (x,), atol=1e-6, rtol=1e-6)
    got, want = lm.run(x)[0], F.pdist(x)
    assert int((want == 0).sum()) == 3 and torch.equal(got[want == 0], want[want == 0])


def test_pdist_order_zero_stays_whole_on_the_cpu():
    """p = 0 (a count of differing coordinates) has no lowering: CPU, whole, PyTorch's values."""
    model, x = Fn(lambda t: F.pdist(t, p=0)), (randn(5, 3),)
    lm = lowering.lower(model, x, profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.pdist.default"]
    runs_as_pytorch(lm, model, x)


def test_pdist_infinite_order_int_keeps_its_order():
    """INT, p = inf: BoundInfiniteScalars used to hand pdist p = 256 (limits.BOUND), a 256-norm
    (inf where 1.86 was due); limits._BOUNDS spares pdist's order now. Whether the op lowers or
    stays on the CPU, its values are the max-norm's."""
    model, x = Fn(lambda t: F.pdist(t, p=float("inf"))), (randn(5, 3),)
    lm = lowering.lower(model, x, profile="INT")
    torch.testing.assert_close(lm.run(*x)[0], model(*x), atol=0.05, rtol=0)


def test_pdist_beyond_the_size_bound_stays_whole_on_the_cpu():
    rows = 2049  # 2049 * 2048 / 2 pairs of width 2: 4.2M gathered elements > QUADRATIC_ELEMENTS
    assert rows * (rows - 1) // 2 * 2 > QUADRATIC_ELEMENTS
    model, x = Fn(lambda t: F.pdist(t)), (randn(rows, 2),)
    lm = lowering.lower(model, x, profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.pdist.default"]


def test_cdist_already_lowers():
    model = Fn(lambda a, c: torch.cdist(a, c))
    inputs = (randn(6, 3), randn(4, 3))
    whole_fp(model, inputs)
    whole_int(model, inputs)


# ----------------------------------------------------------------------------- scatter
def test_pytorch_cpu_scatter_keeps_the_last_duplicate():
    """The premise of the last-write mask: PyTorch's CPU scatter writes the sources in index
    order, so the last of the duplicates wins (measured on random duplicate-heavy indices, dim 0
    and 1), and :func:`last_write_mask` reproduces it."""
    for _ in range(50):
        index = randint(4, 6, 9)
        src = torch.arange(54.0).reshape(6, 9)
        got = torch.full((6, 4), -1.0).scatter(1, index, src)
        mask = last_write_mask(index, 4)  # [6, 9, 4]
        expected = torch.where(mask.any(1), (mask * src[..., None]).sum(1), torch.tensor(-1.0))
        assert torch.equal(got, expected)
        for r in range(6):
            for p in range(4):
                hits = (index[r] == p).nonzero()
                if hits.numel():
                    assert got[r, p] == src[r, hits[-1, 0]]
        assert torch.equal(torch.full((4, 6), -1.0).scatter(0, index.T.contiguous(), src.T.contiguous()), got.T)


def scatter_src(dim):
    return Fn(lambda x, i, s: x.scatter(dim, i, s))


SCATTER = {  # self shape, dim, index shape, src shape, unique (a permutation along dim)
    "dim1_unique": ((3, 5), 1, (3, 5), (3, 5), True),
    "dim1_duplicates": ((3, 5), 1, (3, 7), (3, 7), False),
    "dim0_duplicates": ((4, 3), 0, (6, 3), (6, 3), False),
    "dim_minus1_3d": ((2, 3, 4), -1, (2, 3, 6), (2, 3, 6), False),
    "dim1_3d_narrower_index": ((2, 5, 4), 1, (1, 3, 2), (2, 4, 4), False),
    "src_larger": ((3, 4), 1, (3, 2), (4, 5), False),
    "single_source": ((3, 4), 1, (3, 1), (3, 1), False),
}


def scatter_inputs(name, dtype=torch.float32):
    shape, dim, ishape, sshape, unique = SCATTER[name]
    positions = shape[dim]
    if unique:
        index = torch.stack([torch.randperm(positions, generator=gen) for _ in range(ishape[0])])
    else:
        index = randint(positions, *ishape)
    if dtype == torch.float32:
        return randn(*shape), index, randn(*sshape)
    if dtype == torch.bool:
        return randint(2, *shape) > 0, index, randint(2, *sshape) > 0
    return randint(100, *shape, dtype=dtype) - 50, index, randint(100, *sshape, dtype=dtype) - 50


@pytest.mark.parametrize("name", list(SCATTER))
def test_scatter_src_fp_is_exact(name):
    """A run-time index (a model input), duplicates included: PyTorch's values bit for bit."""
    dim = SCATTER[name][1]
    whole_fp(scatter_src(dim), scatter_inputs(name), atol=0, rtol=0)


@pytest.mark.parametrize("name", list(SCATTER))
def test_scatter_src_int(name):
    dim = SCATTER[name][1]
    whole_int(scatter_src(dim), scatter_inputs(name))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("name", ["dim1_duplicates", "dim0_duplicates", "dim1_3d_narrower_index"])
def test_scatter_src_integer_and_bool_exact_in_both_profiles(name, dtype):
    dim = SCATTER[name][1]
    inputs = scatter_inputs(name, dtype)
    whole_fp(scatter_src(dim), inputs)
    lm = lowering.lower(scatter_src(dim), inputs, profile="INT")
    assert lm.cpu_nodes == [], lm.cpu_nodes
    assert torch.equal(lm.run(*inputs)[0].to(dtype), scatter_src(dim)(*inputs))


def test_scatter_constant_index_folds_the_mask():
    """A constant index with duplicates (the mask is computed once, a constant)."""
    index = torch.tensor([[0, 2, 2, 1], [3, 3, 3, 0]])
    model = Fn(lambda x, s: x.scatter(1, index, s))
    inputs = (randn(2, 4), randn(2, 4))
    lm = whole_fp(model, inputs, atol=0, rtol=0)
    assert "REDUCE_ANY" in lm.op_counts  # which positions are written
    whole_int(model, inputs)


def test_scatter_constant_narrower_index():
    index = torch.tensor([[1, 1], [0, 2]])
    model = Fn(lambda x, s: x.scatter(0, index, s))
    inputs = (randn(3, 4), randn(2, 3))
    whole_fp(model, inputs, atol=0, rtol=0)
    whole_int(model, inputs)


def test_scatter_float_specials_fp_bit_for_bit():
    """NaN, infinities and -0.0 written and kept: the -0.0 filler adds exactly to each."""
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, -0.0, 0.0, 8.0]])
    src = torch.tensor([[float("nan"), -0.0, float("inf"), 0.0], [-0.0, float("-inf"), 7.0, 0.0]])
    index = torch.tensor([[0, 1, 2, 2], [0, 1, 0, 3]])
    model = scatter_src(1)
    lm = lowering.lower(model, (x, index, src), profile="FP")
    assert lm.cpu_nodes == [], lm.cpu_nodes
    got, expected = lm.run(x, index, src)[0], model(x, index, src)
    assert torch.equal(torch.isnan(got), torch.isnan(expected))
    keep = ~torch.isnan(expected)
    assert torch.equal(got[keep], expected[keep])
    assert torch.equal(torch.signbit(got[keep]), torch.signbit(expected[keep]))


def test_scatter_in_place():
    def fn(x, i, s):
        y = x.clone()
        y.scatter_(-1, i, s)
        return y * 2

    inputs = (randn(3, 5), randint(5, 3, 4), randn(3, 4))
    whole_fp(Fn(fn), inputs, atol=0, rtol=0)
    whole_int(Fn(fn), inputs)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_value_fp_and_int(dim):
    index = randint(4, 3, 4)
    model = Fn(lambda x, i: x.scatter(dim, i, 1.5))
    inputs = (randn(4, 4), index)
    whole_fp(model, inputs, atol=0, rtol=0)
    whole_int(model, inputs)


def test_scatter_value_bool_and_integer_exact():
    index = randint(6, 2, 3)
    mask = Fn(lambda x, i: x.scatter(1, i, True))
    x = torch.zeros(2, 6, dtype=torch.bool)
    whole_fp(mask, (x, index))
    lm = lowering.lower(mask, (x, index), profile="INT")
    assert lm.cpu_nodes == [] and torch.equal(lm.run(x, index)[0].bool(), mask(x, index))
    ints = Fn(lambda x, i: x.scatter(0, i, -7))
    x = randint(9, 6, 3, dtype=torch.int32)
    whole_fp(ints, (x, index.T.contiguous()))


def test_scatter_in_a_float_model_int():
    """A one-hot target built by scatter (argmax index) feeding float arithmetic."""
    def fn(x):
        hot = torch.zeros_like(x).scatter(1, x.argmax(1, keepdim=True), 1.0)
        return x * hot + x

    model, inputs = Fn(fn), (randn(4, 6),)
    whole_fp(model, inputs, atol=0, rtol=0)
    whole_int(model, inputs)


def test_scatter_beyond_the_size_bound_stays_whole_on_the_cpu():
    """2048 positions x 1100 sources: a [1, 1100, 2048] mask beyond QUADRATIC_ELEMENTS."""
    inputs = (randn(1, 2048), randint(2048, 1, 1100), randn(1, 1100))
    assert 1100 * 2048 > QUADRATIC_ELEMENTS
    model = scatter_src(1)
    lm = lowering.lower(model, inputs, profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.scatter.src"]
    assert lm.cpu_nodes[0].reason
    torch.testing.assert_close(lm.run(*inputs)[0], model(*inputs), atol=0, rtol=0)


def test_scatter_with_reduce_stays_whole_on_the_cpu():
    model = Fn(lambda x, i, s: x.scatter(1, i, s, reduce="multiply"))
    inputs = (randn(2, 4), randint(4, 2, 3), randn(2, 3))
    lm = lowering.lower(model, inputs, profile="FP")
    assert len(lm.cpu_nodes) == 1 and "scatter" in lm.cpu_nodes[0].target
    runs_as_pytorch(lm, model, inputs)


# ----------------------------------------------------------------------------- max_unpool
def pooled(dims, shape, kernel, stride=None):
    x = randn(*shape)
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
    return pool(x, kernel, stride, return_indices=True)


UNPOOL = {  # dims, input shape, kernel, stride, output size
    "2d": (2, (2, 3, 6, 6), 2, None, None),
    "2d_batchless": (2, (3, 6, 8), 2, None, None),
    "2d_overlapping": (2, (1, 2, 7, 7), 3, 2, None),  # duplicate indices (shared maxima)
    "2d_output_size": (2, (1, 2, 5, 5), 2, None, (5, 5)),
    "1d": (1, (2, 3, 10), 2, None, None),
    "1d_overlapping": (1, (1, 2, 9), 3, 1, None),
    "3d": (3, (1, 2, 4, 4, 4), 2, None, None),
}


def unpool_model(name):
    dims, _, kernel, stride, size = UNPOOL[name]
    unpool = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[dims]
    return Fn(lambda y, i: unpool(y, i, kernel, stride, output_size=size))


@pytest.mark.parametrize("name", list(UNPOOL))
def test_max_unpool_fp_exact_and_int(name):
    dims, shape, kernel, stride, _ = UNPOOL[name]
    inputs = pooled(dims, shape, kernel, stride)
    if "overlapping" in name:
        assert inputs[1].flatten(-dims).unique(dim=-1).shape[-1] < inputs[1].flatten(-dims).shape[-1]
    model = unpool_model(name)
    whole_fp(model, inputs, atol=0, rtol=0)
    whole_int(model, inputs)


#: max_pool2d(..., return_indices=True) cases: input shape, pool arguments; the inputs are
#: rounded to halves so that windows hold tied maxima (PyTorch takes the first in scan order)
POOL_INDICES = {
    "k2": ((1, 2, 6, 6), dict(kernel_size=2)),
    "k3_s2_pad1": ((2, 3, 7, 5), dict(kernel_size=3, stride=2, padding=1)),
    "k3_s2_ceil": ((1, 2, 7, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
    "k2_dilated": ((1, 1, 9, 9), dict(kernel_size=2, stride=2, dilation=2)),
    "batchless": ((3, 6, 6), dict(kernel_size=2)),
    "k1": ((1, 2, 6, 6), dict(kernel_size=1)),
    "rectangular_pad": ((1, 2, 5, 8), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1))),
}


def _tied(shape):
    return torch.round(randn(*shape) * 2) / 2


@pytest.mark.parametrize("name", list(POOL_INDICES))
def test_max_pool2d_indices_fp_are_pytorchs(name):
    shape, kwargs = POOL_INDICES[name]
    model = Fn(lambda x: F.max_pool2d(x, return_indices=True, **kwargs))
    x = _tied(shape)
    lm = whole_fp(model, (x,), atol=0, rtol=0)  # values and indices, compared exactly
    assert torch.equal(lm.run(x)[1].long(), model(x)[1])


@pytest.mark.parametrize("name", list(POOL_INDICES))
def test_max_pool2d_indices_int_are_the_fake_quant_models(name):
    """INT: the indices of the fake-quant model's pool (ties of quantized values included)."""
    shape, kwargs = POOL_INDICES[name]
    model = Fn(lambda x: F.max_pool2d(x, return_indices=True, **kwargs))
    x = _tied(shape)
    lm = whole_int(model, (x,))
    assert torch.equal(lm.run(x)[1].long(), lm.quantized_model(x)[1])


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2),
                                    dict(kernel_size=2, stride=1, dilation=2, ceil_mode=True)], ids=str)
@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_max_pool1d_indices(kwargs, profile):
    """max_pool1d(..., return_indices=True): max_pool2d's indices over a one-row plane."""
    model = Fn(lambda x: F.max_pool1d(x, return_indices=True, **kwargs))
    x = _tied((2, 3, 11))
    lm = whole_fp(model, (x,), atol=0, rtol=0) if profile == "FP" else whole_int(model, (x,))
    want = model(x)[1] if profile == "FP" else lm.quantized_model(x)[1]
    assert torch.equal(lm.run(x)[1].long(), want)


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_pool_then_unpool_lowers_whole(profile):
    """SegNet's pool -> unpool: the unpool reads the lowered pool's indices."""
    model = Fn(lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2))
    x = (randn(1, 2, 6, 6),)
    lm = whole_fp(model, x, atol=0, rtol=0) if profile == "FP" else whole_int(model, x)
    assert lm.cpu_nodes == []


# ----------------------------------------------------------------------------- fmod / remainder
INT_PAIRS = {
    "signs": (torch.tensor([7, -7, 7, -7, 6, -6, 0, 1, -1]), torch.tensor([3, 3, -3, -3, 3, -3, 5, -4, 4])),
    "large": (torch.tensor([2**30 + 5, -(2**30) - 5, 123456789, -987654321]), torch.tensor([7, 7, -1000, 33333])),
}


def int_inputs(name, dtype):
    x, y = INT_PAIRS[name]
    return x.to(dtype), y.to(dtype)


def exact_in_both_profiles(model, inputs):
    expected = model(*inputs)
    for profile in ("FP", "INT"):
        lm = lowering.lower(model, inputs, profile=profile)
        assert lm.cpu_nodes == [], (profile, lm.cpu_nodes)
        assert torch.equal(lm.run(*inputs)[0].to(expected.dtype), expected), profile


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("name", list(INT_PAIRS))
def test_integer_remainder_takes_the_divisors_sign(name, dtype):
    """torch.remainder of integers (arith.remainder: x - floor_div(x, y) * y): exact."""
    exact_in_both_profiles(Fn(torch.remainder), int_inputs(name, dtype))


@pytest.mark.parametrize("divisor", [3, -3, 1, -1, 7])
def test_integer_remainder_by_a_number(divisor):
    x = torch.arange(-10, 11)
    exact_in_both_profiles(Fn(lambda t: torch.remainder(t, divisor)), (x,))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("name", list(INT_PAIRS))
def test_integer_fmod_takes_the_dividends_sign(name, dtype):
    exact_in_both_profiles(Fn(torch.fmod), int_inputs(name, dtype))


@pytest.mark.parametrize("divisor", [3, -3, 1, -1, 7])
def test_integer_fmod_by_a_number(divisor):
    exact_in_both_profiles(Fn(lambda t: torch.fmod(t, divisor)), (torch.arange(-10, 11),))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16])
def test_integer_fmod_of_narrow_integers(dtype):
    """int8 / int16 (INTDIV in int32, the result cast back), extremes of the type included."""
    x = torch.tensor([7, -7, 7, -7, 100, -128, 127], dtype=dtype)
    y = torch.tensor([3, 3, -3, -3, 7, 5, -6], dtype=dtype)
    exact_in_both_profiles(Fn(torch.fmod), (x, y))


def test_integer_fmod_mixed_widths():
    """int32 by int64: PyTorch's promoted int64 result."""
    x, y = int_inputs("signs", torch.int32)
    exact_in_both_profiles(Fn(torch.fmod), (x, y.to(torch.int64)))


def test_float_fmod_still_lowers():
    x, y = randn(8) * 5, randn(8) + 3
    whole_fp(Fn(torch.fmod), (x, y))
