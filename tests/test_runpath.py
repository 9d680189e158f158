"""The per-run path of ``tosa_verify.run`` on a loaded graph (``tosa_verify._runpath``): what it
takes once per graph must not loosen the per-run checks of the caller's inputs, and the numpy
error state it sets for the kernels must be the caller's again afterwards."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaInputError


def _exp_graph(shape=(2, 3)) -> bytes:
    graph = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    graph.addInputTensor(ts.TosaSerializerTensor("x", list(shape), ts.DType.FP32, data=None))
    out = graph.addIntermediate(list(shape), ts.DType.FP32)
    attr = ts.TosaSerializerAttribute()
    attr.ExpAttribute()
    graph.addOperator(ts.Op.EXP, ["x"], [out.name], attr)
    graph.addOutputTensor(out)
    return bytes(graph.serialize())


def test_kernels_run_without_warnings_and_the_error_state_is_restored() -> None:
    graph = tosa_verify.load(_exp_graph())
    x = np.array([[1000.0, -1000.0, np.nan], [0.0, 1.0, np.inf]], np.float32)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):  # the first run plans, the second takes the prepared path
            (y,) = tosa_verify.run(graph, [x])
    assert np.geterr() == before
    assert y[0, 0] == np.inf and y[0, 1] == 0.0 and np.isnan(y[0, 2]) and y[1, 2] == np.inf
    with pytest.warns(RuntimeWarning):  # the caller's own numpy calls warn as before
        np.exp(np.array([1000.0], np.float32))


@pytest.mark.parametrize("inputs", [
    [np.zeros((2, 3), np.float64)],                 # wrong dtype
    [np.zeros((3, 2), np.float32)],                 # wrong shape
    {"y": np.zeros((2, 3), np.float32)},            # wrong name
    [np.zeros((2, 3), np.float32)] * 2,             # too many
])
def test_bad_inputs_are_refused_on_every_run_of_a_planned_graph(inputs) -> None:
    graph = tosa_verify.load(_exp_graph())
    good = np.ones((2, 3), np.float32)
    for form in ([good], (good,), {"x": good}):
        np.testing.assert_array_equal(tosa_verify.run(graph, form)[0], np.float32(np.e) * np.ones((2, 3)))
    for _ in range(2):
        with pytest.raises(TosaInputError):
            tosa_verify.run(graph, inputs)


def test_an_input_array_subclass_or_list_still_binds() -> None:
    graph = tosa_verify.load(_exp_graph((1, 2)))
    tosa_verify.run(graph, [np.zeros((1, 2), np.float32)])
    (y,) = tosa_verify.run(graph, [np.ma.masked_array(np.zeros((1, 2), np.float32))])
    np.testing.assert_array_equal(y, np.ones((1, 2), np.float32))


def test_threads_running_one_graph_each_get_their_own_results() -> None:
    # one thread at a time fills the plan's reusable calls; the others make their own
    from concurrent.futures import ThreadPoolExecutor

    graph = tosa_verify.load(_exp_graph((64, 64)))
    xs = [np.full((64, 64), i / 10, np.float32) for i in range(16)]
    tosa_verify.run(graph, [xs[0]])
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: tosa_verify.run(graph, [x])[0], xs * 8))
    for x, y in zip(xs * 8, results, strict=True):
        np.testing.assert_array_equal(y, np.exp(x.astype(np.float64)).astype(np.float32))


def test_a_run_leaves_no_arrays_in_the_plans_calls() -> None:
    from tosa_verify._runpath import compiled_steps
    from tosa_verify.plan import plan_for

    graph = tosa_verify.load(_exp_graph())
    tosa_verify.run(graph, [np.ones((2, 3), np.float32)])
    compiled = compiled_steps(plan_for(graph.main, graph))
    assert not compiled.lock.locked()
    assert all(entry[5].inputs is None and entry[5].runtime is None for entry in compiled.entries)


def test_a_cached_graphs_plan_skips_the_fingerprint_and_plan_for_rebuilds_it() -> None:
    """A graph run from bytes gets its plan without the per-block fingerprint (its snapshot of
    op functions stands in); plan_for on that block builds a fingerprinted plan with the same
    result, and a graph the caller holds keeps its fingerprint check (an edit is seen)."""
    from tosa_verify import plan as plan_module

    data = _exp_graph()
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    plan_module._GRAPHS.clear()
    (y,) = tosa_verify.run(data, [x])
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)
    graph = plan_module._GRAPHS[data]
    sealed_plan = graph.main.__dict__["_plan"]
    assert sealed_plan.fingerprint == ()
    rebuilt = plan_module.plan_for(graph.main, graph)
    assert rebuilt is not sealed_plan and rebuilt.fingerprint == plan_module._fingerprint(graph.main)
    (again,) = tosa_verify.run(data, [x])
    np.testing.assert_array_equal(again, y)

    held = tosa_verify.load(data)
    (first,) = tosa_verify.run(held, [x])
    assert held.main.__dict__["_plan"].fingerprint == plan_module._fingerprint(held.main)
    held.main.operators[0].op = "ABS"  # an edit of the caller's graph gets a new plan
    (absolute,) = tosa_verify.run(held, [x])
    np.testing.assert_array_equal(first, y)
    np.testing.assert_array_equal(absolute, np.abs(x))


def _freed_without_the_cycle_collector(source: bytes, inputs: list[np.ndarray]) -> list[str]:
    """The types of the objects a run of ``source`` left in reference cycles once the
    interpreter's cache let go of its graph (a graph run from bytes is cached, then evicted)."""
    import gc

    from tosa_verify import plan as plan_module

    plan_module._GRAPHS.clear()
    gc.collect()
    gc.disable()
    try:
        tosa_verify.run(source, inputs)  # load, plan, Runner, run
        tosa_verify.run(source, inputs)  # the cached graph's Runner
        plan_module._GRAPHS.clear()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return left


def test_a_graph_dropped_from_the_run_cache_is_freed_at_once() -> None:
    """No reference cycle (plan <-> block, runner -> interpreter -> graph -> runner, memory sizes
    -> graph): a cyclic collector pass costs every later call its share."""
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    assert _freed_without_the_cycle_collector(_exp_graph(), [x]) == []


def test_a_quantized_peer_graph_dropped_from_the_run_cache_is_freed_at_once() -> None:
    # ExecuTorch's int8 DS-CNN: prepared RESCALEs, convolutions
    from test_peer_graphs import _peer_tosa

    peer_int_cnn = _peer_tosa("ds_cnn-INT")
    graph = tosa_verify.load(peer_int_cnn)
    rng = np.random.default_rng(0)
    inputs = [rng.integers(-128, 128, graph.main.tensors[n].shape).astype(np.int8) for n in graph.main.inputs]
    assert _freed_without_the_cycle_collector(peer_int_cnn, inputs) == []
