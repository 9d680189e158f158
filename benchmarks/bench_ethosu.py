"""Benchmark: ethosu.compiler.compile_tosa versus ExecuTorch's Ethos-U flow, same run, same TOSA.

For each model (small quantized CNNs built in code, see ``_peer.MODELS``) and target:

1. ExecuTorch quantizes the model and lowers it with ``EthosUPartitioner`` (timed: TOSA
   lowering plus Vela, the full ahead-of-time flow); the TOSA flatbuffer it handed to Vela
   and Vela's summary CSV are kept.
2. That identical TOSA is compiled repeatedly by ExecuTorch's own Vela wrapper
   (``arm_vela.vela_compile``, the Vela stage of its flow) and by ``compile_tosa``.
3. Cycles must be identical in all three (and the command streams byte-identical between
   the two Vela-stage runs); otherwise the script exits with status 1.

Only ratios are printed (ours / theirs; below 1 means compile_tosa is faster), since
absolute times depend on the machine.

Usage::

    python benchmarks/bench_ethosu.py [--models tiny_cnn dw_separable] [--repeats 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peer  # noqa: E402

from ethosu.compiler import compile_tosa  # noqa: E402
from ethosu.performance import parse_summary_csv  # noqa: E402

DEFAULT_TARGETS = ("ethos-u55-128", "ethos-u85-256")


def _interleaved_medians(fns, repeats: int) -> list[float]:
    """Median wall time of each function, run alternately so drift hits all of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, bucket in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) for bucket in times]


def run(models: list[str], targets: list[str], repeats: int) -> int:
    """Run the benchmark and print one row per (model, target); return the exit status."""
    # Warm up imports and caches of both flows so no row pays one-off costs.
    warm = _peer.lower_with_executorch(models[0], targets[0])
    compile_tosa(warm.tosa, targets[0], isolate=False)
    _peer.executorch_vela_compile(warm.tosa, targets[0])

    header = (
        f"{'model':<14}{'target':<15}{'cycles':>9}  {'identical':<10}"
        f"{'ours/ET vela stage':>19}{'ours(no layers)/ET vela':>25}{'ours/ET full flow':>19}"
    )
    print(header)
    print("-" * len(header))
    status = 0
    ratios_stage, ratios_lean, ratios_full = [], [], []
    estimates = []
    for model in models:
        for target in targets:
            peer = _peer.lower_with_executorch(model, target)
            program = compile_tosa(peer.tosa, target, isolate=False)  # in process, as the peer runs Vela
            payload, et_csv, _ = _peer.executorch_vela_compile(peer.tosa, target)
            blocks = _peer.read_vela_bin_stream(payload)
            cycles = {
                program.cycles,
                parse_summary_csv(peer.vela_summary_csv).total_cycles,
                parse_summary_csv(et_csv).total_cycles,
            }
            same = (
                len(cycles) == 1
                and blocks["cmd_data"] == program.command_stream
                and blocks["weight_data"] == program.weights
            )
            if not same:
                status = 1
            estimates.append((model, target, program))
            ours, lean, stage = _interleaved_medians(
                [
                    lambda p=peer, t=target: compile_tosa(p.tosa, t, isolate=False),
                    lambda p=peer, t=target: compile_tosa(p.tosa, t, layers=False, isolate=False),
                    lambda p=peer, t=target: _peer.executorch_vela_compile(p.tosa, t),
                ],
                repeats,
            )
            full = peer.lower_seconds
            ratios_stage.append(ours / stage)
            ratios_lean.append(lean / stage)
            ratios_full.append(ours / full)
            print(
                f"{model:<14}{target:<15}{program.cycles:>9,}  {'yes' if same else 'NO':<10}"
                f"{ours / stage:>19.2f}{lean / stage:>25.2f}{ours / full:>19.4f}"
            )
    print("-" * len(header))
    print(
        f"geometric mean: ours/ET vela stage {statistics.geometric_mean(ratios_stage):.2f}, "
        f"ours(no layers)/ET vela stage {statistics.geometric_mean(ratios_lean):.2f}, "
        f"ours/ET full flow {statistics.geometric_mean(ratios_full):.4f} "
        f"(median of {repeats} runs per Vela-stage timing; one ExecuTorch lowering per row)"
    )
    print()
    print_estimates(estimates)
    if status:
        print("ERROR: cycles or command streams differ for identical TOSA", file=sys.stderr)
    return status


def print_estimates(rows) -> None:
    """Vela's estimates per (model, target): cycles, time, MACs and memory."""
    header = (
        f"{'model':<14}{'target':<15}{'system config / memory mode':<48}{'cycles':>9}"
        f"{'time ms':>9}{'MACs':>11}{'SRAM KiB':>10}{'off-chip KiB':>13}{'cmd B':>7}"
    )
    print(header)
    print("-" * len(header))
    for model, target, program in rows:
        perf = program.performance
        config = f"{program.system_config} / {program.memory_mode}"
        print(
            f"{model:<14}{target:<15}{config:<48}{perf.total_cycles:>9,}"
            f"{perf.inference_time_ms:>9.4f}{perf.macs:>11,}{perf.sram_used_kib:>10.2f}"
            f"{perf.off_chip_used_kib:>13.2f}{len(program.command_stream):>7,}"
        )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(_peer.MODELS), choices=list(_peer.MODELS))
    parser.add_argument("--targets", nargs="+", default=list(DEFAULT_TARGETS))
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    return run(args.models, args.targets, args.repeats)


if __name__ == "__main__":
    sys.exit(main())
