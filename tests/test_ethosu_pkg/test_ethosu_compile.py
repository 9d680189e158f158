"""compile_tosa on real INT TOSA graphs: values, every valid memory mode, parity with ExecuTorch."""

from __future__ import annotations

import csv
import io
import json
import math
import tempfile

import ethosu_tosa_graphs as graphs
import numpy as np
import pytest

from ethosu.compiler import NpuProgram, compile_tosa, format_performance_table, memory_modes_for
from ethosu.performance import parse_summary_csv

TARGETS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")
#: ExecuTorch lowers for Ethos-U65 with the same TOSA spec as for Ethos-U55 (+u55 subset).
TOSA_TARGET = {"ethos-u55-128": "ethos-u55-128", "ethos-u65-256": "ethos-u55-128",
               "ethos-u85-256": "ethos-u85-256"}
#: every memory mode of every target; the default run compares each target's first memory mode
#: with ExecuTorch's Vela (two compiles each), the others run with ``-m slow``
MODE_CASES = [pytest.param(t, m, marks=[pytest.mark.slow] if k else [])
              for t in TARGETS for k, m in enumerate(memory_modes_for(t))]
#: Columns that name the run rather than describe the result.
NAMING_COLUMNS = {"experiment", "network"}


def _csv_row(text: str) -> dict[str, str]:
    return next(csv.DictReader(io.StringIO(text)))


def test_imports_vela_and_our_compiler_side_by_side():
    import ethosu.vela
    import ethosu.vela.vela

    import ethosu
    import ethosu.compiler

    assert callable(ethosu.vela.vela.main)
    assert callable(ethosu.compiler.compile_tosa)
    assert len(list(ethosu.__path__)) >= 2  # our portion and Vela's


def test_valid_memory_modes_per_family():
    assert memory_modes_for("ethos-u55-128") == ("Sram_Only", "Shared_Sram")
    six = ("Sram_Only", "Shared_Sram", "Dedicated_Sram", "Dedicated_Sram_256KB",
           "Dedicated_Sram_384KB", "Dedicated_Sram_512KB")
    assert memory_modes_for("ethos-u65-256") == six
    assert memory_modes_for("ethos-u85-256") == six


@pytest.fixture(scope="module")
def conv_tosa() -> bytes:
    return graphs.conv2d()


def test_compile_hand_built_graph_defaults(conv_tosa, capfd):
    program = compile_tosa(conv_tosa, "ethos-u55-128")
    assert isinstance(program, NpuProgram)
    assert (program.system_config, program.memory_mode) == ("Ethos_U55_High_End_Embedded", "Shared_Sram")
    assert program.cycles > 0 and program.command_stream
    assert program.tosa_ops_on_npu == {"CONV2D": 1}
    # nothing Vela printed reached the real stdout/stderr
    out, err = capfd.readouterr()
    assert "Network summary" not in out + err
    assert "Network summary" in program.vela_log


def test_without_layers_same_result(conv_tosa):
    full = compile_tosa(conv_tosa, "ethos-u85-256")
    lean = compile_tosa(conv_tosa, "ethos-u85-256", layers=False)
    assert lean.layers == () and full.layers
    assert lean.cycles == full.cycles and lean.command_stream == full.command_stream
    assert lean.tosa_ops_on_npu == full.tosa_ops_on_npu == {"CONV2D": 1}
    assert "--enable-debug-db" not in lean.vela_args


def test_temporary_files_are_removed(conv_tosa, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    compile_tosa(conv_tosa, "ethos-u85-256")
    assert list(scratch.iterdir()) == []


def test_save_json_and_table(conv_tosa, tmp_path):
    program = compile_tosa(conv_tosa, "ethos-u85-256")
    written = {p.name for p in program.save(tmp_path / "out")}
    assert "network_vela.npz" in written and "network_program.json" in written
    assert "network_summary_Ethos_U85_SYS_DRAM_Mid.csv" in written
    with np.load(tmp_path / "out" / "network_vela.npz", allow_pickle=False) as npz:
        assert npz["cmd_data"].tobytes() == program.command_stream
    data = json.loads(program.to_json())
    assert data["performance"]["total_cycles"] == program.cycles
    assert data["command_stream"]["bytes"] == len(program.command_stream)
    assert data["layers"][0]["tosa_op"] == "CONV2D"
    table = format_performance_table(program, layers=True)
    assert f"{program.cycles:,}" in table and "CONV2D" in table and "sum of layers" in table


def test_extra_flags_reach_vela(conv_tosa):
    size = compile_tosa(conv_tosa, "ethos-u65-256", extra_flags=["--optimise=Size"])
    assert "--optimise=Size" in size.vela_args
    assert size.cycles > 0
    spaced = compile_tosa(conv_tosa, "ethos-u65-256", extra_flags=["--optimise", "Size"])
    assert spaced.command_stream == size.command_stream


def test_user_config_ini(conv_tosa, tmp_path):
    from ethosu.config import read_config_files

    base = read_config_files().parser["System_Config.Ethos_U55_High_End_Embedded"]
    lines = ["[System_Config.My_U55_250MHz]"]
    lines += [f"{k}={'250e6' if k == 'core_clock' else v}" for k, v in base.items()]
    ini = tmp_path / "mine.ini"
    ini.write_text("\n".join(lines) + "\n")
    mine = compile_tosa(conv_tosa, "ethos-u55-128", system_config="My_U55_250MHz", config_ini=ini)
    assert mine.system_config == "My_U55_250MHz"
    assert mine.performance.core_clock_hz == 250e6
    assert mine.cycles > 0
    assert math.isclose(mine.performance.inference_time_s, mine.cycles / 250e6)
    # Vela's memory modes stay available next to the user's system config
    assert compile_tosa(conv_tosa, "ethos-u55-128", system_config="My_U55_250MHz",
                        memory_mode="Sram_Only", config_ini=ini).cycles > 0


def _check_against_vela_csv(program: NpuProgram, csv_text: str) -> None:
    """Our dataclass fields against an independently written Vela summary CSV."""
    row = _csv_row(csv_text)
    perf = program.performance
    assert perf.total_cycles == int(row["cycles_total"]) > 0
    assert perf.npu_cycles == int(row["cycles_npu"]) > 0
    assert perf.macs == int(row["nn_macs"]) > 0
    assert perf.core_clock_hz == float(row["core_clock"])
    assert perf.inference_time_s == float(row["inference_time"])
    assert math.isclose(perf.inference_time_s, perf.total_cycles / perf.core_clock_hz)
    assert math.isclose(perf.inferences_per_second, 1 / perf.inference_time_s)
    assert perf.sram_used_kib == float(row["sram_memory_used"]) > 0
    assert perf.off_chip_used_kib == float(row["dram_memory_used"]) + float(row["off_chip_flash_memory_used"])
    for area in perf.memory_areas:
        assert area.used_kib == float(row[f"{area.name}_memory_used"])
        assert area.total_bytes == int(row[f"{area.name}_total_bytes"])
        assert area.peak_bandwidth_gb_s == float(row[f"{area.name}_bandwidth"])
        assert area.access_cycles == int(row[f"cycles_{area.name}_access"])
    ours = _csv_row(program.artifacts[next(n for n in program.artifacts if "_summary_" in n)].decode())
    for column, value in row.items():
        if column not in NAMING_COLUMNS:
            assert ours[column] == value, column


def _check_layers(program: NpuProgram, tosa_ops: list[str]) -> None:
    layers = program.layers
    assert layers, "Vela's per-layer CSV has rows"
    total = sum(layer.cycles for layer in layers)
    assert 0.9 * program.cycles <= total <= 1.1 * program.cycles
    assert sum(layer.macs for layer in layers) == program.performance.macs
    assert all(layer.target == "NPU" for layer in layers)
    # an operation chained into its predecessor (Ethos-U85) costs 0 cycles and has no OFM memory
    assert sum(layer.cycles > 0 for layer in layers) >= len(layers) / 2
    assert all(layer.memory_area in ("Sram", "Dram", "OnChipFlash", "OffChipFlash", "")
               for layer in layers)
    assert any(layer.memory_area for layer in layers)
    for layer in layers:
        assert layer.cycles >= 0 and 0 <= layer.mac_utilisation_pct <= 100
        assert layer.tosa_op_index is not None and tosa_ops[layer.tosa_op_index] == layer.tosa_op


@pytest.mark.parametrize(("target", "memory_mode"), MODE_CASES)
def test_every_valid_memory_mode_matches_executorch_vela(peer_graphs, peer_module, target, memory_mode):
    from tosa_verify.graph import load

    peer = peer_graphs("tiny_cnn", TOSA_TARGET[target])
    program = compile_tosa(peer.tosa, target, memory_mode=memory_mode)
    assert program.memory_mode == memory_mode
    assert program.cycles > 0
    assert program.command_stream[:4] == b"COP1" and len(program.command_stream) > 64
    assert program.weights and program.inputs and program.outputs
    tosa_ops = [op.op for op in load(peer.tosa).main.operators]
    expected_ops: dict[str, int] = {}
    for op in tosa_ops:
        if op not in ("CONST", "CONST_SHAPE"):
            expected_ops[op] = expected_ops.get(op, 0) + 1
    assert program.tosa_ops_on_npu == expected_ops
    _check_layers(program, tosa_ops)

    # ExecuTorch's own Vela wrapper on the identical TOSA and configuration
    payload, et_csv, _ = peer_module.executorch_vela_compile(peer.tosa, target, memory_mode=memory_mode)
    blocks = peer_module.read_vela_bin_stream(payload)
    assert blocks["cmd_data"] == program.command_stream
    assert blocks["weight_data"] == program.weights
    _check_against_vela_csv(program, et_csv)


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_same_cycles_as_executorch_partitioner_flow(peer_graphs, target):
    peer = peer_graphs("tiny_cnn", target)
    program = compile_tosa(peer.tosa, target)
    assert (program.system_config, program.memory_mode) == (peer.system_config, peer.memory_mode)
    assert program.cycles == parse_summary_csv(peer.vela_summary_csv).total_cycles
    _check_against_vela_csv(program, peer.vela_summary_csv)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dw_separable", "residual_cnn"])
@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_larger_models_match_executorch(peer_graphs, model, target):
    from tosa_verify.graph import load

    peer = peer_graphs(model, target)
    program = compile_tosa(peer.tosa, target)
    _check_against_vela_csv(program, peer.vela_summary_csv)
    _check_layers(program, [op.op for op in load(peer.tosa).main.operators])


def test_isolated_compile_equals_in_process(conv_tosa):
    inside = compile_tosa(conv_tosa, "ethos-u55-128", isolate=False)
    child = compile_tosa(conv_tosa, "ethos-u55-128")  # isolated by default
    assert child.command_stream == inside.command_stream and child.cycles == inside.cycles
    assert [layer.cycles for layer in child.layers] == [layer.cycles for layer in inside.layers]
    assert "Network summary" in child.vela_log


def test_isolated_refusal_names_vela_reason():
    import ethosu_tosa_graphs as graphs

    from ethosu.errors import VelaCompileError

    tosa = graphs.bitwise_and(graphs.I8)  # int8 BITWISE_AND: not an Ethos-U55 operator
    with pytest.raises(VelaCompileError) as inside:
        compile_tosa(tosa, "ethos-u55-128", isolate=False)
    with pytest.raises(VelaCompileError) as child:
        compile_tosa(tosa, "ethos-u55-128", isolate=True)
    assert "could not run on NPU" in str(inside.value) and "could not run on NPU" in str(child.value)


#: The two ways an isolated compile starts Vela: forked from the pre-imported zygote (the
#: default), or a fresh interpreter (TOSA_VERIFY_VELA_ZYGOTE=0, or when the zygote cannot run).
STARTS = ["zygote", "fresh-interpreter"]


def _vela_replaced_by(monkeypatch, start: str, code: str) -> None:
    """Make the isolated child run ``code`` instead of Vela, on the ``start`` path."""
    import sys

    import ethosu.compiler as compiler

    if start == "zygote":
        monkeypatch.setattr(compiler, "_VELA_CHILD_CODE", code)
    else:
        monkeypatch.setenv("TOSA_VERIFY_VELA_ZYGOTE", "0")
        monkeypatch.setattr(compiler, "_VELA_COMMAND", (sys.executable, "-c", code))


@pytest.mark.parametrize("start", STARTS)
def test_a_vela_crash_is_an_error_not_the_end_of_the_caller(conv_tosa, monkeypatch, start):
    """A segfault in Vela's native core must only end the child process."""
    from ethosu.errors import VelaCompileError

    _vela_replaced_by(monkeypatch, start, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(VelaCompileError, match="SIGSEGV"):
        compile_tosa(conv_tosa, "ethos-u55-128")  # isolated by default
    monkeypatch.undo()  # the next compile, on the same zygote, is a normal one again
    assert compile_tosa(conv_tosa, "ethos-u55-128").cycles > 0


@pytest.mark.parametrize("start", STARTS)
def test_a_hanging_vela_is_killed_after_the_timeout(conv_tosa, monkeypatch, start):
    import time

    from ethosu.errors import VelaCompileError

    _vela_replaced_by(monkeypatch, start, "import time; time.sleep(60)")
    start_time = time.monotonic()
    with pytest.raises(VelaCompileError, match="did not finish within 1 s"):
        compile_tosa(conv_tosa, "ethos-u55-128", timeout=1)
    assert time.monotonic() - start_time < 30


def test_the_fresh_interpreter_path_compiles_the_same(conv_tosa, monkeypatch):
    forked = compile_tosa(conv_tosa, "ethos-u55-128")
    monkeypatch.setenv("TOSA_VERIFY_VELA_ZYGOTE", "0")
    fresh = compile_tosa(conv_tosa, "ethos-u55-128")
    assert fresh.command_stream == forked.command_stream and fresh.cycles == forked.cycles


def test_a_dead_zygote_is_replaced(conv_tosa):
    import ethosu.compiler as compiler

    compile_tosa(conv_tosa, "ethos-u55-128")
    compiler._zygote._proc.kill()
    compiler._zygote._proc.wait()
    # the first request after its death falls back to a fresh interpreter or restarts it
    assert compile_tosa(conv_tosa, "ethos-u55-128").cycles > 0
    assert compile_tosa(conv_tosa, "ethos-u55-128").cycles > 0
    assert compiler._zygote._proc is not None and compiler._zygote._proc.poll() is None
