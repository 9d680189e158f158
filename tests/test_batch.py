"""run_batch: batched graphs give, bit for bit, what one tosa_verify.run per sample gives.

The per-sample reference is ``tosa_verify.run`` (itself checked against tosa_reference_model by
the conformance suite); for the INT zoo models one batched sample is also compared with the
reference model directly.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tosa_verify
from tosa_verify.batch import batch_graph, run_batch
from tosa_verify.diff import random_inputs
from tosa_verify.errors import TosaError, TosaInputError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor


def _stack(graph, seeds) -> list[np.ndarray]:
    samples = [random_inputs(graph, seed) for seed in seeds]
    return [np.stack([s[name] for s in samples]) for name in graph.main.inputs]


def _per_sample(graph, stacked) -> list[np.ndarray]:
    outs = [tosa_verify.run(graph, [a[i] for a in stacked]) for i in range(stacked[0].shape[0])]
    return [np.stack(o) for o in zip(*outs, strict=True)]


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bits."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ----------------------------------------------------------------------------- zoo models

FAST = ["mlp", "digits_cnn", "transformer_block", "ds_cnn", "resnet"]


def _zoo_params():
    names = FAST + ["mobilenet_v2"]
    return [pytest.param(n, p, marks=[pytest.mark.slow] if n in ("mobilenet_v2", "resnet") else [])
            for n in names for p in ("INT", "FP")]


@pytest.mark.parametrize(("name", "profile"), _zoo_params())
def test_zoo_batched_is_bit_identical(name, profile):
    import lowering
    from lowering import zoo

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, example, calibration = zoo.MODELS[name]()
        lm = lowering.lower(model, example, profile=profile,
                            calibration=calibration if profile == "INT" else None)
    graph = tosa_verify.load(lm.tosa)
    plan = batch_graph(graph, 2)
    assert plan.graph is not None, f"{name} {profile}: batching refused: {plan.reason}"
    stacked = _stack(graph, range(5))  # batches of 2, 2 and a remainder of 1
    batched = run_batch(graph, stacked, batch_size=2)
    expected = _per_sample(graph, stacked)
    # the batched graph itself runs (run_batch would hide a failure behind its fallback)
    direct = tosa_verify.run(plan.graph, [a[:2].reshape(-1, *a.shape[2:]) for a in stacked])
    for got, want in zip(direct, expected, strict=True):
        assert _identical(got, want[:2].reshape(got.shape))
    for got, want in zip(batched, expected, strict=True):
        assert _identical(got, want), f"{name} {profile}: batched output differs from per-sample runs"
    if profile == "INT":
        import tosa_reference_model as trm

        ref, status = trm.run(lm.tosa, [np.ascontiguousarray(a[3]) for a in stacked])
        assert "VALID" in str(status)
        assert all(np.array_equal(b[3], r) for b, r in zip(batched, ref, strict=True))


# ----------------------------------------------------------------------------- hand-made graphs


def _graph(ops, tensors, inputs, outputs, shapes=()):
    block = Block("main", ops, {t.name: t for t in tensors}, inputs, outputs, {s.name: s for s in shapes})
    return Graph((1, 0, 0, False), [Region("main", [block])])


def _shape(name, values):
    return Tensor(name, (len(values),), "SHAPE", np.asarray(values, np.int64))


def test_reshape_transpose_matmul_with_constant_operand():
    """RESHAPE's shape operand is rescaled, TRANSPOSE keeping axis 0 is kept, and a constant
    MATMUL operand is tiled per sample."""
    w = np.arange(12, dtype=np.float32).reshape(1, 4, 3) / 7
    g = _graph(
        [Operator("CONST_SHAPE", {}, [], ["s"]), Operator("RESHAPE", {}, ["x", "s"], ["r"]),
         Operator("TRANSPOSE", {"perms": [0, 2, 1]}, ["r"], ["t"]), Operator("CONST", {}, [], ["w"]),
         Operator("CONST", {}, [], ["zp"]),
         Operator("MATMUL", {}, ["t", "w", "zp", "zp"], ["y"])],
        [Tensor("x", (8,), "FP32"), Tensor("r", (1, 4, 2), "FP32"), Tensor("t", (1, 2, 4), "FP32"),
         Tensor("w", (1, 4, 3), "FP32", w), Tensor("zp", (1,), "FP32", np.zeros(1, np.float32)),
         Tensor("y", (1, 2, 3), "FP32")],
        ["x"], ["y"], [_shape("s", [1, 4, 2])])
    plan = batch_graph(g, 3)
    assert plan.graph is not None, plan.reason
    xs = np.random.default_rng(0).standard_normal((7, 8)).astype(np.float32)
    [got] = run_batch(g, [xs], batch_size=3)
    want = np.stack([x.reshape(4, 2).T @ w[0] for x in xs.astype(np.float64)]).astype(np.float32)
    assert _identical(got, want[:, None])


def _refusing_graphs():
    x = Tensor("x", (2, 3), "INT32")
    yield "reduction over axis 0", _graph(
        [Operator("REDUCE_SUM", {"axis": 0}, ["x"], ["y"])], [x, Tensor("y", (1, 3), "INT32")], ["x"], ["y"])
    yield "transpose moving axis 0", _graph(
        [Operator("TRANSPOSE", {"perms": [1, 0]}, ["x"], ["y"])], [x, Tensor("y", (3, 2), "INT32")], ["x"], ["y"])
    yield "slice of axis 0", _graph(
        [Operator("CONST_SHAPE", {}, [], ["a"]), Operator("CONST_SHAPE", {}, [], ["b"]),
         Operator("SLICE", {}, ["x", "a", "b"], ["y"])],
        [x, Tensor("y", (1, 3), "INT32")], ["x"], ["y"], [_shape("a", [1, 0]), _shape("b", [1, 3])])
    yield "broadcast of a sample along axis 0", _graph(
        [Operator("CONST", {}, [], ["c"]), Operator("ADD", {}, ["x1", "c"], ["y"])],
        [Tensor("x1", (1, 3), "INT32"), Tensor("c", (2, 3), "INT32", np.arange(6, dtype=np.int32).reshape(2, 3)),
         Tensor("y", (2, 3), "INT32")], ["x1"], ["y"])


@pytest.mark.parametrize(("what", "graph"), list(_refusing_graphs()), ids=lambda v: v if isinstance(v, str) else "")
def test_mixing_ops_refuse_and_fall_back(what, graph):
    plan = batch_graph(graph, 4)
    assert plan.graph is None and plan.reason.startswith("operator ")
    stacked = _stack(graph, range(5))
    for got, want in zip(run_batch(graph, stacked, batch_size=4), _per_sample(graph, stacked), strict=True):
        assert _identical(got, want)


def test_failing_sample_raises_as_run_does():
    """A data-dependent REQUIRE in one sample: the batch falls back, run()'s error surfaces."""
    g = _graph([Operator("INTDIV", {}, ["a", "b"], ["y"])],
               [Tensor("a", (2,), "INT32"), Tensor("b", (2,), "INT32"), Tensor("y", (2,), "INT32")],
               ["a", "b"], ["y"])
    a = np.array([[6, 8], [9, 4], [1, 1]], np.int32)
    b = np.array([[3, 2], [3, 0], [1, 1]], np.int32)
    with pytest.raises(TosaError) as per_sample:
        tosa_verify.run(g, [a[1], b[1]])
    with pytest.raises(type(per_sample.value)) as batched:
        run_batch(g, [a, b], batch_size=3)
    assert str(batched.value) == str(per_sample.value)
    [y] = run_batch(g, [a[[0, 2]], b[[0, 2]]], batch_size=2)
    assert y.tolist() == [[2, 4], [1, 1]]  # integer division, checked against Python's //


def test_bad_stacked_inputs():
    g = next(_refusing_graphs())[1]
    with pytest.raises(TosaInputError, match=r"stacked shape \[2, 3\] is not \[N, \*\[2, 3\]\]"):
        run_batch(g, [np.zeros((2, 3), np.int32)])
