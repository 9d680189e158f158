"""Time and memory bombs: each ends in one clean error, quickly, without the memory it claims."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import tosa_verify
from tosa_verify import budget
from tosa_verify.errors import TosaInputError, TosaLimitError, TosaSizeError

from . import bombs, graphs
from .helpers import assert_one_line_error, run_cli

GIB = 1 << 30
SMALL = {budget.ENV_MAX_MEMORY: "1G"}


# --------------------------------------------------------------------------- time


def test_nested_loops_stop_at_the_execution_budget() -> None:
    graph = tosa_verify.load(graphs.nested_loops())
    start = time.monotonic()
    with budget.limits(max_operations=3000), pytest.raises(TosaLimitError) as info:
        tosa_verify.run(graph, [np.zeros(1, np.int32)])
    assert time.monotonic() - start < 30
    message = str(info.value)
    # names the loop that ran out (the inner one, inside the outer one's body) and the budget
    assert message.startswith("operator 0 WHILE_LOOP") and "'OUTER_BODY'" in message
    assert "more than 3000 operators" in message and "\n" not in message


def test_the_budget_counts_every_nesting_level_together() -> None:
    """The inner loop alone would stop at its own iteration cap; the budget is the total: the
    outer condition (2 operators) and body (1, the inner WHILE_LOOP) take 3, each inner
    iteration 4 (INNER_COND 2 + INNER_BODY 2), so a budget of 3 + 4k runs exactly k."""
    from tosa_verify.ops import control_flow

    graph = tosa_verify.load(graphs.nested_loops())
    for k in (5, 17):
        runs = []
        original = control_flow.charge

        def counting(call, block, runs=runs, original=original):
            runs.append(block.name)
            original(call, block)

        control_flow.charge = counting
        try:
            with budget.limits(max_operations=3 + 4 * k), pytest.raises(TosaLimitError):
                tosa_verify.run(graph, [np.zeros(1, np.int32)])
        finally:
            control_flow.charge = original
        # OUTER_COND, OUTER_BODY, then k (INNER_COND, INNER_BODY) pairs, then the refused one
        assert runs[:2] == ["OUTER_COND", "OUTER_BODY"]
        assert runs[2:-1] == ["INNER_COND", "INNER_BODY"] * k and runs[-1] == "INNER_COND"


def _loops(tmp_path: Path) -> tuple[Path, Path]:
    graph = tmp_path / "loops.tosa"
    graph.write_bytes(graphs.nested_loops())
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(1, np.int32))
    return graph, x


def test_nested_loops_through_the_cli_end_in_one_line(tmp_path: Path) -> None:
    graph, x = _loops(tmp_path)
    fewer = run_cli(["run", str(graph), "-i", str(x)],
                    env={**SMALL, budget.ENV_MAX_OPERATIONS: "2000", budget.ENV_MAX_SECONDS: "600"})
    assert_one_line_error(fewer, "run", contains="more than 2000 operators")
    assert fewer.seconds < 30 and fewer.max_rss_bytes < 2 * GIB


@pytest.mark.slow
def test_nested_loops_with_the_default_budget_end_within_30_s(tmp_path: Path) -> None:
    graph, x = _loops(tmp_path)
    outcome = run_cli(["run", str(graph), "-i", str(x), "-o", str(tmp_path)], env=SMALL, timeout=60)
    line = assert_one_line_error(outcome, "run", contains="execution budget")
    # the operator count stops it, or on a loaded machine the clock first
    assert "WHILE_LOOP" in line and (f"more than {budget.DEFAULT_MAX_OPERATIONS} operators" in line
                                     or f"longer than {budget.DEFAULT_MAX_SECONDS:g} s" in line), line
    assert outcome.seconds < 30 and outcome.max_rss_bytes < 2 * GIB


def test_the_clock_stops_control_flow_whatever_the_operator_count() -> None:
    graph = tosa_verify.load(graphs.nested_loops())
    start = time.monotonic()
    with budget.limits(max_operations=10**9, max_seconds=0.5), pytest.raises(TosaLimitError) as info:
        tosa_verify.run(graph, [np.zeros(1, np.int32)])
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 10 and "ran longer than 0.5 s" in str(info.value)


# --------------------------------------------------------------------------- memory


def test_the_memory_bound_of_a_small_graph() -> None:
    """add on INT32[2, 3]: three tensors of 24 bytes plus one 64-bit working copy of the output."""
    need, sizes = budget.graph_memory(tosa_verify.load(graphs.add()))
    assert need == 3 * 2 * 3 * 4 + 8 * 2 * 3
    assert [s for s, _, _ in sizes] == [24, 24, 24]


@pytest.mark.parametrize("verb", ["run", "diff"])
def test_six_chained_gigabyte_tiles_are_refused_before_running(tmp_path: Path, verb: str) -> None:
    graph = tmp_path / "tiles.tosa"
    graph.write_bytes(graphs.tile_chain([1 << 20, 1, 1, 1, 1, 1]))
    assert graph.stat().st_size < 4096
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(1024, np.int8))
    args = [verb, str(graph), *(["-i", str(x)] if verb == "run" else ["--input", str(x)])]
    outcome = run_cli(args, env=SMALL)
    line = assert_one_line_error(outcome, verb, contains="memory budget of 1.0 GiB")
    assert "largest tensors: 't1' INT8[1073741824] 1.0 GiB" in line
    assert outcome.seconds < 30 and outcome.max_rss_bytes < 2 * GIB


def test_max_memory_beats_the_environment(tmp_path: Path) -> None:
    graph = tmp_path / "tiles.tosa"
    graph.write_bytes(graphs.tile_chain([64]))  # 64 KiB of INT8 output
    x = tmp_path / "x.npy"
    np.save(x, np.arange(1024).astype(np.int8))
    small = run_cli(["run", str(graph), "-i", str(x), "-o", str(tmp_path), "--max-memory", "64K"], env=SMALL)
    assert_one_line_error(small, "run", contains="(--max-memory)")
    ok = run_cli(["run", str(graph), "-i", str(x), "-o", str(tmp_path), "--max-memory", "1M"],
                 env={budget.ENV_MAX_MEMORY: "1K"})
    assert ok.code == 0, ok.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "output_0.npy"), np.tile(np.arange(1024).astype(np.int8), 64))


def test_an_npy_header_claiming_a_terabyte(tmp_path: Path) -> None:
    liar = bombs.huge_header_npy(tmp_path / "liar.npy")
    with pytest.raises(TosaInputError, match="truncated"):
        budget.load_npy(liar)
    graph = tmp_path / "add.tosa"
    graph.write_bytes(graphs.add())
    outcome = run_cli(["run", str(graph), "-i", str(liar), "-i", str(liar)], env=SMALL)
    assert_one_line_error(outcome, "run", contains="liar.npy")
    assert outcome.max_rss_bytes < 2 * GIB


def test_an_npy_over_the_budget_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.npy"
    np.save(big, np.zeros(1 << 16, np.int8))
    with budget.limits(max_memory="32K"), pytest.raises(TosaSizeError, match="memory budget of 32.0 KiB"):
        budget.load_npy(big)
    with budget.limits(max_memory="1M"):
        assert budget.load_npy(big).shape == (1 << 16,)


def test_a_zip_bomb_as_variable_state(tmp_path: Path) -> None:
    bomb = bombs.zip_bomb_npz(tmp_path / "state.npz", member="v.npy")
    assert bomb.stat().st_size < 8 << 20 and bombs.expands_to(bomb) > 3 * GIB
    graph = tmp_path / "add.tosa"
    graph.write_bytes(graphs.add())
    a = tmp_path / "a.npy"
    np.save(a, np.zeros((2, 3), np.int32))
    outcome = run_cli(["run", str(graph), "-i", str(a), "-i", str(a), "--variables", str(bomb)], env=SMALL)
    assert_one_line_error(outcome, "run", contains="memory budget")
    assert outcome.seconds < 30 and outcome.max_rss_bytes < 2 * GIB


def test_saved_variable_state_of_the_wrong_dtype_is_an_input_error() -> None:
    import tosa_serializer as ts

    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    block = ser.regions[0].basicBlocks[0]
    block.addTensor("x", [3], ts.DType.FP32, None, "", False, False, "")
    block.addInput("x")
    block.addTensor("var", [3], ts.DType.FP32, None, "", False, True, "state")
    block.addTensor("y", [3], ts.DType.FP32, None, "", False, False, "")
    block.addOutput("y")
    attr = ts.TosaSerializerAttribute()
    attr.AddAttribute()
    block.addOperator(ts.Op.ADD, ["x", "var"], ["y"], attr)
    data = ser.serialize()
    x = np.array([1, 2, 3], np.float32)
    state = {"state": np.array([10, 20, 30], np.float32)}
    np.testing.assert_array_equal(tosa_verify.run(data, [x], variables=state)[0], x + state["state"])
    for wrong, match in ((np.zeros(3, np.float64), "expected dtype float32"), (np.zeros(4, np.float32), "shape")):
        with pytest.raises(TosaInputError, match=match):
            tosa_verify.run(data, [x], variables={"state": wrong})



def test_the_memory_bound_of_shared_sub_graphs_costs_no_more_than_their_number() -> None:
    """60 COND_IFs nested, each naming the next level as both branches: 2**60 paths, 61 blocks.
    Each level declares c (BOOL, 1 byte), x and y (INT8[3]) and runs one operator with an
    INT8[3] output (a 64-bit working copy: 24 bytes), so the bound is 31 bytes per level."""
    from tests.ops.test_control_flow_variables import nested_cond_if_graph

    graph = tosa_verify.load(nested_cond_if_graph(60))
    start = time.monotonic()
    need, _ = budget.graph_memory(graph)
    assert time.monotonic() - start < 5
    assert need == 31 * 61


def test_budget_settings_are_parsed_or_refused_clearly(monkeypatch) -> None:
    assert [budget.parse_size(t) for t in ("1K", "1.5M", "2G", "2gb", "4096")] == [1024, 3 << 19, 2 * GIB, 2 * GIB, 4096]
    for bad in ("", "-1G", "0", "1Q", "lots"):
        with pytest.raises(ValueError, match="invalid size"):
            budget.parse_size(bad)
    monkeypatch.setenv(budget.ENV_MAX_OPERATIONS, "12")
    monkeypatch.setenv(budget.ENV_MAX_SECONDS, "2.5")
    monkeypatch.setenv(budget.ENV_MAX_MEMORY, "3M")
    assert (budget.max_operations(), budget.max_seconds(), budget.max_memory()) == (12, 2.5, 3 << 20)
    with budget.limits(max_operations=7, max_memory="1K"):
        assert (budget.max_operations(), budget.max_memory()) == (7, 1024)
    for name, value in ((budget.ENV_MAX_OPERATIONS, "1.5"), (budget.ENV_MAX_SECONDS, "-1"),
                        (budget.ENV_MAX_MEMORY, "much")):
        monkeypatch.setenv(name, value)
        with pytest.raises(TosaInputError, match=name):
            (budget.max_operations(), budget.max_seconds(), budget.max_memory())
        monkeypatch.delenv(name)
