"""The edit tick (tosa_verify._edits) that lets a run of a caller's Graph skip comparing the
whole graph, and the short run path (tosa_verify._fastrun) that uses it.

Every kind of edit must move the tick (else an edited graph would run its stale plan); loading
must not (else every load would make every held graph compare in full); a graph holding a
container that is not watched is compared in full on every run. Results are checked against
the reference model and numpy.
"""

from __future__ import annotations

import copy
import threading
from types import MappingProxyType

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify import _edits, budget
from tosa_verify._edits import WatchedDict, WatchedList
from tosa_verify.errors import TosaInputError, TosaSizeError
from tosa_verify.graph import Operator, Tensor

_VALID = reference_model.GraphStatus.TOSA_VALID


def _add_graph() -> bytes:
    """x (INT32 [2, 3]) + c (constant) -> ABS -> y."""
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", [2, 3], ts.DType.INT32, data=None))
    c = g.addConst([2, 3], ts.DType.INT32, list(range(-3, 3)), name="c")
    s = g.addIntermediate([2, 3], ts.DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.AddAttribute()
    g.addOperator(ts.Op.ADD, ["x", c.name], [s.name], attr)
    out = g.addIntermediate([2, 3], ts.DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.AbsAttribute()
    g.addOperator(ts.Op.ABS, [s.name], [out.name], attr)
    g.addOutputTensor(out)
    return bytes(g.serialize())


_X = np.arange(-6, 6, 2, dtype=np.int32).reshape(2, 3)


def _list_edits() -> dict:
    return {
        "setitem": lambda v: v.__setitem__(0, v[0]), "slice setitem": lambda v: v.__setitem__(slice(0, 1), v[:1]),
        "delitem": lambda v: v.__delitem__(0), "iadd": lambda v: v.__iadd__([]), "imul": lambda v: v.__imul__(1),
        "append": lambda v: v.append(1), "extend": lambda v: v.extend([]), "insert": lambda v: v.insert(0, 1),
        "pop": lambda v: v.pop(), "remove": lambda v: v.remove(v[0]), "clear": lambda v: v.clear(),
        "sort": lambda v: v.sort(), "reverse": lambda v: v.reverse(),
    }


def _dict_edits() -> dict:
    return {
        "setitem": lambda d: d.__setitem__("a", 1), "delitem": lambda d: d.__delitem__("a"),
        "ior": lambda d: d.__ior__({}), "pop": lambda d: d.pop("a"), "popitem": lambda d: d.popitem(),
        "clear": lambda d: d.clear(), "update": lambda d: d.update(), "setdefault": lambda d: d.setdefault("b", 2),
    }


@pytest.mark.parametrize("edit", sorted(_list_edits()))
def test_each_in_place_change_of_a_watched_list_moves_the_tick(edit: str) -> None:
    items = WatchedList([3, 1, 2])
    before = _edits.TICK
    _list_edits()[edit](items)
    assert _edits.TICK != before


@pytest.mark.parametrize("edit", sorted(_dict_edits()))
def test_each_in_place_change_of_a_watched_dict_moves_the_tick(edit: str) -> None:
    items = WatchedDict(a=1)
    before = _edits.TICK
    _dict_edits()[edit](items)
    assert _edits.TICK != before


def test_reading_moves_no_tick_and_watched_containers_behave_as_plain_ones() -> None:
    items, names = WatchedList([1, 2]), WatchedDict(a=1)
    before = _edits.TICK
    assert items == [1, 2] and items[:1] == [1] and names == {"a": 1} and names.get("a") == 1
    assert _edits.TICK == before
    assert copy.deepcopy(items) == [1, 2] and type(copy.deepcopy(names)) is WatchedDict


def _block_edits(graph: tosa_verify.Graph) -> dict:
    """Edits of the graph, its regions and blocks: each moves the tick."""
    block = graph.main
    return {
        "graph version": lambda: setattr(graph, "version", graph.version),
        "region blocks": lambda: setattr(graph.regions[0], "blocks", graph.regions[0].blocks),
        "block operators": lambda: setattr(block, "operators", block.operators),
        "block attribute deleted": lambda: delattr(block, "shapes"),
        "operator in place": lambda: block.operators.__setitem__(1, copy.copy(block.operators[1])),
        "declaration in place": lambda: block.tensors.__setitem__("c", copy.copy(block.tensors["c"])),
        "interface in place": lambda: block.outputs.append("x"),
        "regions in place": lambda: graph.regions.append(graph.regions[0]),
    }


def _leaf_edits(graph: tosa_verify.Graph) -> dict:
    """Edits of an operator or a declaration (no tick: compared on each run)."""
    op, const = graph.main.operators[1], graph.main.tensors["c"]
    return {
        "operator op": lambda: setattr(op, "op", "SUB"),
        "operator attributes": lambda: setattr(op, "attrs", dict(op.attrs)),
        "tensor data": lambda: setattr(const, "data", const.data.copy()),
        "tensor shape": lambda: setattr(const, "shape", (3, 2)),
    }


@pytest.mark.parametrize("edit", sorted(_block_edits(tosa_verify.load(_add_graph()))))
def test_each_edit_of_a_graph_region_or_block_moves_the_tick(edit: str) -> None:
    graph = tosa_verify.load(_add_graph())
    before = _edits.TICK
    _block_edits(graph)[edit]()
    assert _edits.TICK != before


_CHANGES = ("operator in place", "declaration in place", "interface in place", "regions in place")


def _real_edits(graph: tosa_verify.Graph) -> dict:
    """Edits that change what the plans depend on (an object replaced, a value changed)."""
    blocks = {name: edit for name, edit in _block_edits(graph).items() if name in _CHANGES}
    return {**blocks, **_leaf_edits(graph), "graph version": lambda: setattr(graph, "version", (1, 1, 0, False))}


@pytest.mark.parametrize("edit", sorted(_real_edits(tosa_verify.load(_add_graph()))))
def test_each_edit_after_a_run_gets_the_next_run_new_plans(edit: str) -> None:
    graph = tosa_verify.load(_add_graph())
    tosa_verify.run(graph, [_X])
    tosa_verify.run(graph, [_X])  # (found unchanged: the tick and the operators' values recorded)
    state = graph.__dict__["_verified"]
    _real_edits(graph)[edit]()
    tosa_verify.plan.current_blocks(graph)
    assert graph.__dict__["_verified"] is not state


def test_loading_moves_no_tick_and_a_loaded_graph_is_watched() -> None:
    data = _add_graph()
    before = _edits.TICK
    graph = tosa_verify.load(data)
    assert _edits.TICK == before
    assert _edits.watched(graph)
    graph.main.inputs = list(graph.main.inputs)  # a plain list: its changes cannot be seen
    assert not _edits.watched(graph)


def test_a_constructor_takes_the_dataclass_parameters_and_defaults() -> None:
    make = _edits.constructor(Tensor)
    before = _edits.TICK
    made = make("t", (2,), "INT8")
    assert _edits.TICK == before
    assert made == Tensor("t", (2,), "INT8")
    assert _edits.constructor(Operator)("ABS", {}, ["a"], ["b"]) == Operator("ABS", {}, ["a"], ["b"], "")


def _expected(data: bytes, x: np.ndarray) -> np.ndarray:
    expected, status = reference_model.run(data, [x])
    assert status == _VALID
    return expected[0]


def test_an_edit_after_a_run_is_seen_by_the_next_run() -> None:
    data = _add_graph()
    graph = tosa_verify.load(data)
    np.testing.assert_array_equal(tosa_verify.run(graph, [_X])[0], _expected(data, _X))
    np.testing.assert_array_equal(tosa_verify.run(graph, [_X])[0], _expected(data, _X))  # (unchanged: tick)
    graph.main.tensors["c"].data = np.full((2, 3), 100, np.int32)
    np.testing.assert_array_equal(tosa_verify.run(graph, [_X])[0], np.abs(_X + 100))
    graph.main.operators.pop()  # ABS gone: the block's output is now never produced
    graph.main.outputs[0] = graph.main.operators[-1].outputs[0]
    np.testing.assert_array_equal(tosa_verify.run(graph, [_X])[0], _X + 100)


def test_an_unwatched_container_of_a_caller_is_compared_on_every_run() -> None:
    data = _add_graph()
    graph = tosa_verify.load(data)
    operators = list(graph.main.operators)
    graph.main.operators = operators
    np.testing.assert_array_equal(tosa_verify.run(graph, [_X])[0], _expected(data, _X))
    operators.pop()  # no tick: only the full comparison sees it
    graph.main.outputs[0] = operators[-1].outputs[0]
    np.testing.assert_array_equal(tosa_verify.run(graph, [_X])[0], _X + np.arange(-3, 3).reshape(2, 3))


def test_the_short_path_gives_the_general_paths_outputs_and_errors() -> None:
    data = _add_graph()
    graph = tosa_verify.load(data)
    short = tosa_verify.run(graph, [_X])[0]
    assert tosa_verify.plan.run_cache(graph)["runner"] is not None
    general = tosa_verify.run(graph, [_X], capture=True).outputs[0]
    np.testing.assert_array_equal(short, general)
    np.testing.assert_array_equal(short, _expected(data, _X))
    short[:] = 0  # the caller's array: no later run sees it
    np.testing.assert_array_equal(tosa_verify.run(graph, {"x": _X})[0], general)
    np.testing.assert_array_equal(tosa_verify.run(graph, MappingProxyType({"x": _X}))[0], general)  # general binding
    with pytest.raises(TosaInputError, match="input 'x': shape"):
        tosa_verify.run(graph, [_X[:1]])
    need = budget.cached_graph_memory(graph)[0]
    with budget.limits(max_memory=need - 1), pytest.raises(TosaSizeError, match="memory budget"):
        tosa_verify.run(graph, [_X])


def test_runs_of_one_graph_from_several_threads_agree() -> None:
    data = _add_graph()
    graph = tosa_verify.load(data)
    xs = [np.full((2, 3), i - 8, np.int32) for i in range(16)]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        for _ in range(50):
            results[i] = tosa_verify.run(graph, [xs[i]])[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, x in enumerate(xs):
        np.testing.assert_array_equal(results[i], np.abs(x + np.arange(-3, 3).reshape(2, 3)))


def test_replacing_an_op_function_moves_the_tick_and_a_cached_graph_uses_it(monkeypatch) -> None:
    from tosa_verify.ops.registry import REGISTRY

    data = _add_graph()
    before_run = tosa_verify.run(data, [_X])[0]
    tosa_verify.run(data, [_X])  # (the sealed graph recorded the tick)
    before = _edits.TICK
    abs_function = REGISTRY["ABS"]
    monkeypatch.setitem(REGISTRY, "ABS", lambda call: [abs_function(call)[0] + np.int32(1)])
    assert _edits.TICK != before
    np.testing.assert_array_equal(tosa_verify.run(data, [_X])[0], before_run + 1)
