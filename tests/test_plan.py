"""The execution plan (tosa_verify.plan): prepared kernels, folding, caching, checks kept.

The prepared RESCALE kernel (and its check-free fast path, taken when the REQUIREs provably
hold for every input) is compared with the official reference model over random parameters
and inputs covering each type's whole range. Plan behaviour is checked against the
operator-by-operator semantics it replaces: the first error stays at the same operator, the
capture hook sees every operator, an edited graph is re-planned.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify.errors import TosaRequireError, TosaValidationError
from tosa_verify.plan import plan_for

_VALID = reference_model.GraphStatus.TOSA_VALID
_UNPREDICTABLE = reference_model.GraphStatus.TOSA_UNPREDICTABLE
_TS = {"INT8": ts.DType.INT8, "INT16": ts.DType.INT16, "INT32": ts.DType.INT32}
_NP = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}


def _rescale_graph(x, in_t, out_t, multiplier, shift, *, scale32, rounding, per_channel,
                   input_zp=0, output_zp=0, input_unsigned=False, output_unsigned=False) -> bytes:
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", list(x.shape), _TS[in_t], data=None))
    mul = g.addConst([len(multiplier)], ts.DType.INT32 if scale32 else ts.DType.INT16, multiplier, name="m")
    sh = g.addConst([len(shift)], ts.DType.INT8, shift, name="s")
    izp = g.addConst([1], _TS[in_t], [input_zp], name="izp")
    ozp = g.addConst([1], _TS[out_t], [output_zp], name="ozp")
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(scale32, rounding, per_channel, input_unsigned, output_unsigned)
    out = g.addIntermediate(list(x.shape), _TS[out_t])
    g.addOperator(ts.Op.RESCALE, ["x", mul.name, sh.name, izp.name, ozp.name], [out.name], attr)
    g.addOutputTensor(out)
    return bytes(g.serialize())


def _full_range(rng, dtype: str, unsigned: bool, shape) -> np.ndarray:
    info = np.iinfo(np.dtype(_NP[dtype]).str.replace("i", "u") if unsigned else _NP[dtype])
    x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64)
    x.reshape(-1)[:2] = (info.min, info.max)  # both extremes always present
    return x.astype(info.dtype)


@pytest.mark.parametrize("seed", range(3))
def test_prepared_rescale_matches_the_reference_model(seed: int) -> None:
    rng = np.random.default_rng(seed)
    checked = fast = 0
    for _ in range(12):
        in_t = str(rng.choice(["INT8", "INT16", "INT32"]))
        out_t = str(rng.choice(["INT8", "INT16", "INT32"]))
        scale32 = bool(rng.integers(2)) or in_t == "INT32"
        per_channel = bool(rng.integers(2))
        rounding = ts.RoundingMode.DOUBLE_ROUND if scale32 and rng.integers(2) else ts.RoundingMode.SINGLE_ROUND
        input_unsigned = in_t in ("INT8", "INT16") and out_t != "INT32" and bool(rng.integers(3) == 0)
        nc = int(rng.integers(1, 5)) if per_channel else 1
        bits = 31 if scale32 else 15
        multiplier = [int(v) for v in rng.integers(1 << (bits - 2), 1 << bits, size=nc)]
        lo_shift = {"INT8": 8, "INT16": 16, "INT32": 33}[in_t] + (bits - 15 if scale32 else 0) - 8
        shift = [int(v) for v in rng.integers(max(2, lo_shift), min(62, lo_shift + 14), size=nc)]
        input_zp = int(rng.integers(-100, 100)) if in_t == "INT8" else 0
        if input_unsigned:
            input_zp = -32768 if in_t == "INT16" else int(rng.integers(-128, 128))
        output_zp = int(rng.integers(-100, 100)) if out_t == "INT8" else 0
        x = _full_range(rng, in_t, input_unsigned, (2, 3, nc))
        data = _rescale_graph(x, in_t, out_t, multiplier, shift, scale32=scale32, rounding=rounding,
                              per_channel=per_channel, input_zp=input_zp, output_zp=output_zp,
                              input_unsigned=input_unsigned)
        expected, status = reference_model.run(data, [x])
        if status == _UNPREDICTABLE:  # a data REQUIRE failed: ours must say so too
            with pytest.raises(TosaRequireError):
                tosa_verify.run(data, [x])
            continue
        assert status == _VALID
        graph = tosa_verify.load(data)
        for _ in range(2):  # the first run builds the plan, the second reuses it
            np.testing.assert_array_equal(tosa_verify.run(graph, [x])[0], expected[0])
        fast += plan_for(graph.main).steps[0].fn.__name__ == "kernel"  # the check-free path
        checked += 1
    assert checked >= 6 and fast >= 1


def test_prepared_rescale_still_checks_data_requires_when_not_provable() -> None:
    # shift 10 bounds int32 values to |v| < 512: only some inputs break the REQUIRE
    args = dict(scale32=True, rounding=ts.RoundingMode.SINGLE_ROUND, per_channel=False)
    ok = np.array([5, -511], np.int32)
    data = _rescale_graph(ok, "INT32", "INT32", [1 << 30], [10], **args)
    graph = tosa_verify.load(data)
    expected, status = reference_model.run(data, [ok])
    assert status == _VALID
    np.testing.assert_array_equal(tosa_verify.run(graph, [ok])[0], expected[0])
    bad = np.array([5, 5000], np.int32)
    assert reference_model.run(data, [bad])[1] == _UNPREDICTABLE
    with pytest.raises(TosaRequireError):
        tosa_verify.run(graph, [bad])


def _attr(kind: str) -> ts.TosaSerializerAttribute:
    attr = ts.TosaSerializerAttribute()
    getattr(attr, kind)()
    return attr


def _chain_graph(second_op_bad: bool) -> bytes:
    """x -> ADD(x, const) -> RESHAPE(const shape) -> output; optionally a bad declared shape."""
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", [2, 3], ts.DType.INT32, data=None))
    c = g.addConst([2, 3], ts.DType.INT32, list(range(6)), name="c")
    a = g.addIntermediate([2, 3], ts.DType.INT32)
    g.addOperator(ts.Op.ADD, ["x", c.name], [a.name], _attr("AddAttribute"))
    shape = g.addConst([1], ts.DType.SHAPE, [7 if second_op_bad else 6], name="shape")
    out = g.addIntermediate([7 if second_op_bad else 6], ts.DType.INT32)
    g.addOperator(ts.Op.RESHAPE, [a.name, shape.name], [out.name], _attr("ReshapeAttribute"))
    g.addOutputTensor(out)
    return bytes(g.serialize())


def test_static_error_is_reported_at_its_operator_and_every_run() -> None:
    data = _chain_graph(second_op_bad=True)
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(ValueError, match="Invalid TOSA graph"):  # the reference model rejects it
        reference_model.run(data, [x])
    graph = tosa_verify.load(data)
    for _ in range(2):
        with pytest.raises(TosaValidationError) as err:
            tosa_verify.run(graph, [x])
        assert graph.main.operators[err.value.op_index].op == "RESHAPE"


def test_hook_sees_folded_operators_and_capture_matches_the_reference() -> None:
    data = _chain_graph(second_op_bad=False)
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    graph = tosa_verify.load(data)
    expected, status = reference_model.run(data, [x])
    assert status == _VALID
    seen = []
    interp = tosa_verify.Interpreter(graph, hook=lambda i, op, ins, outs: seen.append((i, op.op)))
    values = tosa_verify.interpreter.bind_inputs(graph.main, [x])
    outs = interp.run_block(graph.main, values)
    np.testing.assert_array_equal(outs[0], expected[0])
    assert seen == [(i, op.op) for i, op in enumerate(graph.main.operators)]
    # folded constants are in the plan, not re-run; capture still reports every tensor
    assert any(s.folded for s in plan_for(graph.main).all_steps)
    captured = tosa_verify.run(graph, [x], capture=True).tensors
    assert set(captured) >= {t for op in graph.main.operators for t in op.outputs}


def test_an_edited_graph_is_replanned_and_a_copy_has_no_stale_plan() -> None:
    data = _chain_graph(second_op_bad=False)
    x = np.ones((2, 3), np.int32)
    graph = tosa_verify.load(data)
    before = tosa_verify.run(graph, [x])[0]
    edited = copy.deepcopy(graph)
    const = next(t for t in edited.main.tensors.values() if t.data is not None and t.dtype == "INT32")
    const.data = const.data + 10
    after = tosa_verify.run(edited, [x])[0]
    np.testing.assert_array_equal(after, before + 10)
    graph.main.tensors[const.name].data = graph.main.tensors[const.name].data * 0
    np.testing.assert_array_equal(tosa_verify.run(graph, [x])[0], np.ones(6, np.int32))


def test_run_from_bytes_reuses_the_graph_and_outputs_are_the_callers() -> None:
    data = _chain_graph(second_op_bad=False)
    x = np.ones((2, 3), np.int32)
    first = tosa_verify.run(data, [x])[0]
    second = tosa_verify.run(bytearray(data), [x])[0]
    np.testing.assert_array_equal(first, second)
    first[:] = -1  # an output belongs to the caller: changing it changes no later run
    np.testing.assert_array_equal(tosa_verify.run(data, [x])[0], second)


def test_a_block_input_overrides_a_constant_in_prepared_kernels() -> None:
    # drift.run_operators feeds an operator a replacement for a constant as a block input
    from tosa_verify.drift import run_operators

    args = dict(scale32=True, rounding=ts.RoundingMode.SINGLE_ROUND, per_channel=False)
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16)
    graph = tosa_verify.load(_rescale_graph(x, "INT8", "INT8", [1 << 30], [30], **args))
    other = _rescale_graph(x, "INT8", "INT8", [1 << 29], [30], **args)
    expected, status = reference_model.run(other, [x])
    assert status == _VALID
    op = graph.main.operators[-1]
    got = run_operators(graph, [op], {"x": x, "m": np.array([1 << 29], np.int32)})[op.outputs[0]]
    np.testing.assert_array_equal(got, expected[0])


def test_every_registered_prepare_is_in_use() -> None:
    # a prepare registered before its op function (module order) must still be used
    from tosa_verify.ops.registry import PREPARE, prepare_for

    assert PREPARE and [op for op in PREPARE if prepare_for(op) is None] == []


def test_the_memory_need_is_computed_once_and_checked_against_the_budget_at_each_run() -> None:
    from tosa_verify import budget
    from tosa_verify.errors import TosaSizeError

    data = _chain_graph(second_op_bad=False)
    x = np.ones((2, 3), np.int32)
    graph = tosa_verify.load(data)
    need = budget.graph_memory(graph)[0]
    assert budget.cached_graph_memory(graph) is budget.cached_graph_memory(graph)
    with budget.limits(max_memory=need - 1), pytest.raises(TosaSizeError, match="memory budget"):
        tosa_verify.run(graph, [x])
    with budget.limits(max_memory=need):
        tosa_verify.run(graph, [x])
    with budget.limits(max_memory=need - 1), pytest.raises(TosaSizeError, match="memory budget"):
        tosa_verify.run(data, [x])  # the cached graph of these bytes too
    # a replaced declaration is a new graph for the memory bound (checked before each run)
    name = graph.main.operators[0].outputs[0]
    graph.main.tensors[name] = tosa_verify.graph.Tensor(name, (2, 3, 1000), "INT32")
    with budget.limits(max_memory=need), pytest.raises(TosaSizeError, match="memory budget"):
        tosa_verify.run(graph, [x])
    assert budget.cached_graph_memory(graph)[0] > need


@pytest.mark.parametrize(("out_t", "multiplier", "shift", "output_zp", "rounding"), [
    ("INT32", [1 << 30, 1 << 29], [20, 20], 0, ts.RoundingMode.SINGLE_ROUND),  # result bound: |v| < 2**21
    ("INT8", [1 << 10, 1 << 12], [20, 22], 5, ts.RoundingMode.SINGLE_ROUND),  # value bound: 2**(s-1)
    ("INT16", [1 << 30, 3 << 28], [25, 25], 0, ts.RoundingMode.DOUBLE_ROUND),  # double = single here
    ("INT16", [0, 1 << 30], [12, 14], 0, ts.RoundingMode.SINGLE_ROUND),  # a zero multiplier
])
@pytest.mark.parametrize("float_kernel", [False, True], ids=["int64-window", "with-float64-kernel"])
def test_rescale_data_window_edges_match_the_reference_model(
    out_t, multiplier, shift, output_zp, rounding, float_kernel, monkeypatch
) -> None:
    """The checked fast path takes inputs inside a window where the REQUIREs provably hold: at
    and just outside its edges, ours agrees with the reference model (values or REQUIRE failure).
    Alone (the float64 kernel of ``_rescale_fast`` switched off) and composed with that kernel,
    which hands the data it cannot prove exact to the window path."""
    from tosa_verify.ops import type_conversion
    from tosa_verify.ops.registry import OpCall
    from tosa_verify.ops.type_conversion import _rescale_setup, _safe_inputs

    if not float_kernel:
        monkeypatch.setattr(type_conversion, "fast_rescale", lambda params, fallback: fallback)
    else:  # the float64 kernel serves this (small) tensor too
        monkeypatch.setattr(type_conversion, "SMALL_RESCALE", 0)
    x0 = np.zeros((1, 2), np.int32)
    data = _rescale_graph(x0, "INT32", out_t, multiplier, shift, scale32=True, rounding=rounding,
                          per_channel=True, output_zp=output_zp)
    graph = tosa_verify.load(data)
    plan = plan_for(graph.main)
    step = plan.steps[0]
    if not float_kernel:
        assert step.fn.__name__ == "checked_kernel"
    call = OpCall(0, step.operator, [None, *(plan.constants[n] for n in step.inputs[1:])],
                  step.input_decls, step.output_decls)
    lo, hi, _ = _safe_inputs(_rescale_setup(call))
    info = np.iinfo(np.int32)
    edges = [v for v in (lo - 1, lo, lo + 1, -1, 0, 1, hi - 1, hi, hi + 1) if info.min <= v <= info.max]
    for a in edges:
        for b in (lo, hi, a):
            x = np.array([[a, b]], np.int32)
            expected, status = reference_model.run(data, [x])
            if status == _UNPREDICTABLE:
                assert not (lo <= a <= hi and lo <= b <= hi)  # the window is never too wide
                with pytest.raises(TosaRequireError):
                    tosa_verify.run(graph, [x])
                continue
            assert status == _VALID
            np.testing.assert_array_equal(tosa_verify.run(graph, [x])[0], expected[0])


def test_a_replaced_op_function_is_used_by_a_cached_graph_of_bytes(monkeypatch) -> None:
    from tosa_verify.ops.registry import REGISTRY

    data = _chain_graph(second_op_bad=False)
    x = np.ones((2, 3), np.int32)
    before = tosa_verify.run(data, [x])[0]
    add = REGISTRY["ADD"]
    monkeypatch.setitem(REGISTRY, "ADD", lambda call: [add(call)[0] + np.int32(1)])
    np.testing.assert_array_equal(tosa_verify.run(data, [x])[0], before + 1)
    monkeypatch.setitem(REGISTRY, "ADD", add)
    np.testing.assert_array_equal(tosa_verify.run(data, [x])[0], before)
