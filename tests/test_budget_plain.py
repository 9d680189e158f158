"""The memory need a run checks, from C-level passes (``budget._plain_need``) and with the
tensors' sizes worked out only for an error message (``budget._LazySizes``), against the general
per-tensor pass it stands in for."""

from __future__ import annotations

import numpy as np
import pytest

from tosa_verify import budget
from tosa_verify.errors import TosaSizeError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor

_DTYPES = ("INT8", "INT16", "INT32", "FP32", "FP16", "BOOL", "INT48", "SHAPE")


def _graph(rng: np.random.Generator, tensors: int = 12) -> Graph:
    decls = {}
    for i in range(tensors):
        shape = tuple(int(d) for d in rng.integers(0, 9, rng.integers(0, 4)))
        decls[f"t{i}"] = Tensor(f"t{i}", shape, str(rng.choice(_DTYPES)))
    names = list(decls)
    ops = [Operator("ADD", {}, [names[0], names[1]], [str(n) for n in rng.choice(names + ["undeclared"],
                                                                                 rng.integers(0, 3))])
           for _ in range(6)]
    shapes = {"s0": Tensor("s0", (3,), "SHAPE")} if rng.random() < 0.5 else {}
    if shapes and rng.random() < 0.5:  # a shape named as a tensor: the tensor wins
        shapes[names[0]] = Tensor(names[0], (1000,), "SHAPE")
    block = Block("main", ops, decls, names[:1], names[-1:], shapes)
    return Graph((1, 0, 0, False), [Region("main", [block])])


def _general(graph: Graph) -> int:
    return budget._block_need(graph, graph.main, set(), {}, [])


@pytest.mark.parametrize("seed", range(5))
def test_the_plain_need_is_the_general_passs(seed) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(30):
        graph = _graph(rng)
        assert budget._plain_need(graph.main) == _general(graph) == budget.cached_graph_memory(graph)[0]


@pytest.mark.parametrize("change", ["numpy dim", "negative dim", "list shape", "sub-graph", "none dim"])
def test_blocks_the_plain_pass_cannot_read_go_the_general_way(change) -> None:
    graph = _graph(np.random.default_rng(9))
    block = graph.main
    decl = block.tensors["t3"]
    if change == "numpy dim":
        decl.shape = (np.int64(4), 2)
    elif change == "negative dim":
        decl.shape = (4, -2)
    elif change == "list shape":
        decl.shape = [4, 2]
    elif change == "none dim":
        decl.shape = (4, None)
    else:
        block.operators[0].attrs = {"then_graph": "nowhere"}
    assert budget._plain_need(block) is None
    if change != "none dim":  # (the general pass reads what the loader never makes, its own way)
        assert budget._need_only(graph)[0] == _general(graph)


def test_an_over_budget_graph_still_names_its_largest_tensors() -> None:
    """The sizes are worked out only for the message: the same message as from the full sizes."""
    graph = _graph(np.random.default_rng(3), tensors=20)
    graph.main.tensors["big"] = Tensor("big", (1 << 20, 64), "INT32")
    need, sizes = budget.cached_graph_memory(graph)
    assert isinstance(sizes, budget._LazySizes) and sizes.sizes is None
    full = budget._graph_need(graph)
    assert need == full[0]
    with budget.limits(max_memory=need - 1):
        with pytest.raises(TosaSizeError) as lazy:
            budget.check_need(need, sizes)
        with pytest.raises(TosaSizeError) as eager:
            budget.check_need(*full)
    assert str(lazy.value) == str(eager.value) and "'big' INT32[1048576, 64] 256.0 MiB" in str(lazy.value)
    assert list(sizes) == full[1]
