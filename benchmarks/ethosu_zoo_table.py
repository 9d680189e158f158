"""Vela's estimates for every INT zoo model x Ethos-U target x valid memory mode.

Each model of ``lowering.zoo.MODELS`` is lowered once to INT TOSA 1.0 (``lowering.lower``,
profile ``"INT"``, the zoo's calibration batches) and compiled with
``ethosu.compiler.compile_tosa`` for each target in every memory mode valid for it with the
family's default system config (``ethosu.config.memory_modes_for``). One row per
combination: total and NPU cycles, inference time at the configured clock, and the memory
Vela reports as used -- SRAM, off-chip (DRAM + off-chip flash) and on-chip flash (where
``Sram_Only`` keeps the weights).

Usage::

    python benchmarks/ethosu_zoo_table.py [--models mlp digits_cnn] [--targets ethos-u55-128]
                                          [--int16] [--markdown]

Exits with status 1 if any combination fails to compile.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib.metadata import version

import lowering
from ethosu.compiler import compile_tosa
from ethosu.config import FAMILY_DEFAULTS, family_of, memory_modes_for
from ethosu.errors import EthosUError
from lowering import zoo
from lowering.quantizer import QuantConfig

DEFAULT_TARGETS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")
COLUMNS = (
    ("model", "<", "{}"),
    ("target", "<", "{}"),
    ("memory mode", "<", "{}"),
    ("cycles", ">", "{:,}"),
    ("NPU cycles", ">", "{:,}"),
    ("time ms", ">", "{:.4f}"),
    ("SRAM KiB", ">", "{:.1f}"),
    ("off-chip KiB", ">", "{:.1f}"),
    ("on-chip flash KiB", ">", "{:.1f}"),
)


def lower_zoo_model(name: str, int16: bool = False) -> bytes:
    """The INT TOSA flatbuffer of one zoo model."""
    model, example_inputs, calibration = zoo.MODELS[name]()
    quantization = QuantConfig.int16() if int16 else None
    lowered = lowering.lower(model, example_inputs, profile="INT", quantization=quantization,
                             calibration=calibration)
    if lowered.tosa is None or lowered.cpu_nodes:
        raise RuntimeError(f"{name} did not lower to a single TOSA graph: {lowered.cpu_nodes}")
    return lowered.tosa


def rows(models, targets, int16: bool = False, progress=None):
    """Yield one row (a tuple in :data:`COLUMNS` order, or an error string) per combination."""
    for name in models:
        start = time.perf_counter()
        tosa = lower_zoo_model(name, int16)
        if progress:
            progress(f"{name}: lowered in {time.perf_counter() - start:.1f} s")
        for target in targets:
            for mode in memory_modes_for(target):
                try:
                    program = compile_tosa(tosa, target, memory_mode=mode, layers=False)
                except EthosUError as exc:
                    yield (name, target, mode, f"FAILED: {str(exc).splitlines()[0].split(' | ')[0]}")
                    continue
                perf = program.performance
                flash = sum(a.used_kib for a in perf.memory_areas if a.name == "on_chip_flash")
                yield (name, target, mode, perf.total_cycles, perf.npu_cycles,
                       perf.inference_time_ms, perf.sram_used_kib, perf.off_chip_used_kib, flash)


def format_row(row, markdown: bool, widths) -> str:
    if isinstance(row[-1], str) and row[-1].startswith("FAILED"):
        cells = [*row[:3], row[3]]
    else:
        cells = [fmt.format(value) for value, (_, _, fmt) in zip(row, COLUMNS, strict=True)]
    if markdown:
        return "| " + " | ".join(cells) + " |"
    return "  ".join(f"{c:{align}{w}}" for c, (_, align, _), w in zip(cells, COLUMNS, widths,
                                                                        strict=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(zoo.MODELS), choices=list(zoo.MODELS))
    parser.add_argument("--targets", nargs="+", default=list(DEFAULT_TARGETS))
    parser.add_argument("--int16", action="store_true", help="int16 activations (a16w8)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)

    systems = ", ".join(f"{t}: {FAMILY_DEFAULTS[family_of(t)][0]}" for t in args.targets)
    print(f"# INT{'16' if args.int16 else '8'} zoo on Vela {version('ethos-u-vela')} "
          f"(torch {version('torch')}); system configs: {systems}")
    widths = (18, 14, 21, 10, 10, 8, 9, 12, 17)
    if args.markdown:
        print("| " + " | ".join(c for c, _, _ in COLUMNS) + " |")
        print("|" + "|".join("---:" if a == ">" else "---" for _, a, _ in COLUMNS) + "|")
    else:
        print("  ".join(f"{c:{a}{w}}" for (c, a, _), w in zip(COLUMNS, widths, strict=True)))
    failed = 0
    for row in rows(args.models, args.targets, args.int16,
                    progress=lambda msg: print(msg, file=sys.stderr, flush=True)):
        failed += isinstance(row[-1], str)
        print(format_row(row, args.markdown, widths), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
