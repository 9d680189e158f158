"""Integer tensors the lowering must not get wrong.

* int64 values travel as int32 in TOSA 1.0; a node whose int64 values (on the example inputs,
  or as a constant) do not fit would wrap silently (``ids * 3_000_000``, ``x + 2**40``, a
  hash): it stays on the CPU with the reason, and the whole model still computes PyTorch's
  values.
* ARGMAX takes no INT32 in TOSA 1.0: argmax / argmin of an integer tensor is the first index of
  the extreme value, exactly, ties as PyTorch breaks them.
* A sum of a bool or int8/int16 tensor (a count: ``(x > 0).sum(-1)``) counts in int32.
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp

import lowering
from lowering.api import INT64_RANGE

gen = torch.Generator().manual_seed(8)
IDS = torch.randint(0, 1000, (2, 5), generator=gen)

BEYOND = {
    "product": lambda i: i * 3_000_000,
    "hash": lambda i: (i * 2654435761) % 1000,
    "constant beyond int32": lambda i: i + 2**40,
    "sum beyond int32": lambda i: (i * 10_000_000).sum(),
    "arange beyond int32": lambda i: i + torch.arange(5) * 10**10,
}


@pytest.mark.parametrize("name", list(BEYOND))
def test_int64_beyond_int32_stays_on_the_cpu_and_is_right(name):
    fn = BEYOND[name]
    lm = lowering.lower(Fn(fn), (IDS,), profile="FP")
    assert lm.cpu_nodes and all(c.reason == INT64_RANGE for c in lm.cpu_nodes if c.target != "getitem")
    assert torch.equal(lm.run(IDS)[0].to(torch.int64), fn(IDS))


@pytest.mark.parametrize("fn", [lambda i: (i - 500) // 7 + i % 7, lambda i: i * 1000 + 5])
def test_int64_within_int32_still_lowers(fn):
    lm = check_fp(Fn(fn), (IDS,))
    assert not lm.cpu_nodes


TIED = torch.randint(0, 4, (3, 7), generator=gen)  # (values 0..3 in rows of 7: ties everywhere)


@pytest.mark.parametrize("fn", [
    lambda i: i.argmax(-1), lambda i: i.argmin(0), lambda i: i.argmax(),
    lambda i: torch.argmax(i, 1, keepdim=True), lambda i: (i.to(torch.int32) * -3).argmin(-1),
], ids=["argmax rows", "argmin columns", "argmax flat", "argmax keepdim", "argmin int32"])
def test_argmax_of_integers_is_the_first_extreme(fn):
    lm = check_fp(Fn(fn), (TIED,))
    assert not lm.cpu_nodes and "ARGMAX" not in lm.op_counts


@pytest.mark.parametrize("fn", [
    lambda x: (x > 0).sum(-1), lambda x: (x > 0).sum(), lambda x: (x > 0.5).sum((0, 1), keepdim=True),
    lambda x: (x * 10).to(torch.int8).sum(-1), lambda x: (x * 100).to(torch.int16).sum(0),
], ids=["bool rows", "bool all", "bool keepdim", "int8 rows", "int16 columns"])
def test_sums_of_bool_and_small_integers_count_in_int32(fn):
    x = torch.randn(3, 6, generator=gen)
    lm = check_fp(Fn(fn), (x,))
    assert not lm.cpu_nodes, lm.cpu_nodes
