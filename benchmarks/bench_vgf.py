"""VGF compile and run time against the TOSA reference model and our interpreter, and agreement.

The graphs come from a peer producer, ExecuTorch's Arm backend (TOSA-1.0+INT and TOSA-1.0+FP),
lowering a MobileNetV2 built in code (``lowering.zoo.MobileNetV2``, seeded random weights,
224x224), the same graphs ``bench_interpreter.py`` uses. Width 1.0 (the default) takes the graphs
shipped as test data (``tests/data/peer``, no lowering); another ``--width`` lowers with
ExecuTorch first. Per profile, all in this run on the same graph and
input: ``vgf.compile_tosa`` (model converter + scenario template), ``vgf.run`` (scenario runner
on the Vulkan device the loader finds; here Mesa's CPU driver under the ML emulation layer),
the reference model (``tosa_reference_model`` executable) and our interpreter. Printed: each
time as a ratio to the reference model's run (median of ``--repeats``), and whether the VGF
outputs agree with the interpreter's (INT bit for bit; FP: max abs difference and SQNR).

    python benchmarks/bench_vgf.py [--repeats 3] [--width 1.0]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _median_seconds(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def _compile_fresh(data: bytes):
    """One converter run (``vgf.compile_tosa`` memoizes by graph bytes: clear that first)."""
    import vgf
    from vgf import compiler

    compiler._CACHE.clear()
    return vgf.compile_tosa(data)


def _graph(width: float, profile: str) -> tuple[bytes, np.ndarray]:
    """The peer's TOSA (shipped for width 1.0, else lowered now) and a seeded random input."""
    from bench_interpreter import lower_with_executorch  # benchmarks/ is this script's directory

    if width != 1.0:
        return lower_with_executorch(width, profile)
    root = str(Path(__file__).resolve().parents[1])  # the repository, for tests/ and its data
    if root not in sys.path:
        sys.path.append(root)
    import tosa_verify
    from tests.test_vgf_pkg.peer_data import shipped_tosa
    from tosa_verify.diff import random_inputs

    data = shipped_tosa(f"mobilenet_v2-{profile}-full")
    graph = tosa_verify.load(data)
    return data, random_inputs(graph, 0)[graph.main.inputs[0]]


def bench_profile(profile: str, width: float, repeats: int) -> str:
    """One table row: MobileNetV2 lowered by ExecuTorch in ``profile``, timed on every executor."""
    from functools import partial

    import tosa_verify
    import vgf
    from tosa_verify import reference

    data, x = _graph(width, profile)
    graph = tosa_verify.load(data)
    t_compile, program = _median_seconds(partial(_compile_fresh, data), repeats)
    t_vgf, theirs = _median_seconds(partial(vgf.run, program, [x]), repeats)
    t_ref, ref = _median_seconds(partial(reference.run, data, [x]), repeats)
    t_ours, ours = _median_seconds(partial(tosa_verify.run, graph, [x]), repeats)
    a, b, r = ours[0], theirs[0], ref[0]
    if profile == "INT":
        agree = ("bit-exact" if np.array_equal(a, b) else f"DIFFER in {int((a != b).sum())} elements")
        agree += ", vs reference " + ("bit-exact" if np.array_equal(r, b) else "DIFFERS")
    else:
        verdict = tosa_verify.compare(a, b, dtype="FP32")
        agree = (f"max abs diff {verdict.max_abs_error:.2e}, SQNR {verdict.sqnr_db:.1f} dB"
                 f" ({verdict.mismatched}/{verdict.size} elements differ)")
    return (f"{profile:<6} {len(graph.main.operators):>5} {t_compile / t_ref:>16.2f} {t_vgf / t_ref:>12.2f} "
            f"{t_ours / t_ref:>16.2f} {t_vgf / t_ours:>15.2f}  {agree}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width", type=float, default=1.0, help="MobileNetV2 width multiplier")
    args = parser.parse_args(argv)
    import vgf

    ok, reason = vgf.available()
    if not ok:
        raise SystemExit(f"VGF not available: {reason}")
    print(f"MobileNetV2 width {args.width}, 224x224, lowered by ExecuTorch's Arm backend; "
          f"times as ratios to the reference model's run (median of {args.repeats})")
    print(f"{'graph':<6} {'ops':>5} {'VGF compile/ref':>16} {'VGF run/ref':>12} "
          f"{'interpreter/ref':>16} {'VGF run/interp':>15}  agreement (VGF vs interpreter)")
    for profile in ("INT", "FP"):
        print(bench_profile(profile, args.width, args.repeats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
