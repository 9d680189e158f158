"""Indexing ops lowered to GATHER / SCATTER / data movement, in both profiles, checked on values."""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp, check_int

torch.set_num_threads(1)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


class BufferIndex(torch.nn.Module):
    """Indexing with an int64 buffer (a compile-time constant index, with a negative entry)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("idx", torch.tensor([[2, -1], [0, 1]]))

    def forward(self, x):
        return x[self.idx] * 2.0


def _both(model, inputs, int_too=True):
    lm = check_fp(model, inputs)
    assert lm.cpu_nodes == []
    if int_too:
        gen = _gen(99)
        calibration = [tuple(x + 0.2 * torch.randn(x.shape, generator=gen)
                             if x.is_floating_point() else x for x in inputs)
                       for _ in range(3)] + [tuple(inputs)]
        lm = check_int(model, inputs, calibration=calibration)
        assert lm.cpu_nodes == []


X = torch.randn(4, 5, 6, generator=_gen())


CASES = {
    "gather_dim0": (lambda x, i: torch.gather(x, 0, i) + 1.0,
                    (X, torch.randint(4, (3, 5, 2), generator=_gen(1)))),
    "gather_dim2": (lambda x, i: torch.gather(x, 2, i),
                    (X, torch.randint(6, (4, 2, 6), generator=_gen(2)))),
    "gather_dim_neg": (lambda x, i: torch.gather(x, -2, i),
                       (X, torch.randint(5, (2, 7, 3), generator=_gen(3)))),
    "index_one": (lambda x, i: x[i], (X, torch.tensor([3, 0, 0, -2]))),
    "index_two_broadcast": (lambda x, i, j: x[i, j],
                            (X, torch.tensor([[1], [3]]), torch.tensor([0, 4, -1]))),
    "index_after_slice": (lambda x, i: x[:, i], (X, torch.tensor([[4, 0], [2, 2]]))),
    "index_last": (lambda x, i: x[:, :, i], (X, torch.tensor([5, 1]))),
    "index_split_dims": (lambda x, i, j: x[i, :, j],
                         (X, torch.tensor([0, 3, 1]), torch.tensor([5, 5, 2]))),
    "index_new_axis": (lambda x, i: x[i, None], (X, torch.tensor([2, 1]))),
    "index_put": (lambda x, i, j, v: torch.index_put(x, (i, j), v),
                  (X, torch.tensor([0, 3, 1]), torch.tensor([4, 4, 2]),
                   torch.randn(3, 6, generator=_gen(4)))),
    "index_put_middle": (lambda x, i, v: torch.ops.aten.index_put.default(x, [None, i], v),
                         (X, torch.tensor([1, 3]), torch.randn(6, generator=_gen(5)))),
    "index_put_split_dims": (lambda x, i, k, v: torch.ops.aten.index_put.default(
        x, [i, None, k], v), (X, torch.tensor([2, 0]), torch.tensor([1, 5]),
                              torch.randn(2, 5, generator=_gen(6)))),
    "index_put_accumulate": (lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
                             (X, torch.tensor([3, 1]), torch.randn(2, 5, 6, generator=_gen(7)))),
    "index_put_mask": (lambda x, v: torch.ops.aten.index_put.default(x, [None, x[0, :, 0] > 0], v),
                       (X, torch.tensor(0.25))),
    "index_copy": (lambda x, i, s: x.index_copy(1, i, s),
                   (X, torch.tensor([4, 0]), torch.randn(4, 2, 6, generator=_gen(8)))),
    "select_scatter": (lambda x, s: x.select_scatter(s, 2, -1),
                       (X, torch.randn(4, 5, generator=_gen(9)))),
    "slice_scatter_step": (lambda x, s: x.slice_scatter(s, 1, 1, None, 2),
                           (X, torch.randn(4, 2, 6, generator=_gen(10)))),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1), (X,)),
    "repeat_interleave_flat": (lambda x: x[:2, :2, :2].repeat_interleave(3), (X,)),
    "unfold": (lambda x: x.unfold(2, 3, 2), (X,)),
    "unfold_first": (lambda x: x.unfold(0, 2, 1) - 0.5, (X,)),
    "as_strided_view": (lambda x: torch.as_strided(x, (10, 12), (12, 1)), (X,)),
    "as_strided_windows": (lambda x: torch.as_strided(x, (3, 4), (2, 5), 3), (X,)),
    "roll_two_dims": (lambda x: torch.roll(x, (-1, 8), (1, 2)) * 2.0, (X,)),
    "roll_flat": (lambda x: torch.roll(x, 7), (X,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_indexing_fp_and_int(name):
    fn, inputs = CASES[name]
    _both(Fn(fn), inputs)


def test_constant_buffer_index():
    _both(BufferIndex(), (torch.randn(3, 4, generator=_gen(11)),))


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool])
def test_gather_and_index_of_integer_and_bool_tensors(dtype):
    x = torch.randint(0, 2 if dtype == torch.bool else 50, (5, 4), generator=_gen(12)).to(dtype)
    i = torch.tensor([[3, 0], [1, 1], [2, 0], [0, 3], [1, 2]])
    for profile_check in (check_fp, check_int):
        assert profile_check(Fn(lambda x, i: torch.gather(x, 1, i)), (x, i)).cpu_nodes == []
        assert profile_check(Fn(lambda x, i: x[i[:, 0]]), (x, i)).cpu_nodes == []


def test_index_put_of_int_tensor_and_accumulate():
    x = torch.arange(24, dtype=torch.int32).reshape(2, 3, 4)
    args = (x, torch.tensor([1, 0]), torch.tensor([2, 2]), torch.tensor([5, -7], dtype=torch.int32))
    for accumulate in (False, True):
        m = Fn(lambda x, i, j, v, a=accumulate: torch.index_put(x, (i, j, j), v, accumulate=a))
        assert check_fp(m, args).cpu_nodes == []
        assert check_int(m, args).cpu_nodes == []


def test_one_hot():
    i = torch.tensor([[0, 3], [2, 4]])
    m = Fn(lambda i: torch.nn.functional.one_hot(i, 6))
    assert check_fp(m, (i,)).cpu_nodes == []
    assert check_int(m, (i,)).cpu_nodes == []


def test_slice_scatter_of_int8():
    x = torch.randint(-9, 9, (3, 5), generator=_gen(13)).to(torch.int8)
    s = torch.randint(-9, 9, (3, 2), generator=_gen(14)).to(torch.int8)
    m = Fn(lambda x, s: x.slice_scatter(s, 1, 2, 4))
    assert check_int(m, (x, s)).cpu_nodes == []
    assert check_fp(m, (x, s)).cpu_nodes == []
