"""torch intra-op threads for lowering: 1 thread vs 2 (and the default policy) in the same run.

Each measurement is a fresh interpreter lowering the width-1.0 MobileNetV2 of ``lowering.zoo``
(INT, the zoo's 4 calibration batches) with ``torch.set_num_threads(k)``; the configurations
alternate so the machine's load (other processes) hits them alike. Printed: each configuration's
median as a ratio of the 1-thread median, with the 1-minute load average before and after.

    python benchmarks/bench_threads.py [--reps 3] [--load N]

``--load N`` starts N busy-looping processes for the duration (a loaded machine made on
purpose); without it, whatever else runs on the machine is the load.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import os, sys, time, torch
sys.path.insert(0, {root!r})
from lowering import zoo
import lowering
from lowering.threads import resolve_threads
k = {threads!r}
model, example, calibration = zoo.mobilenet_v2(1.0)
start = time.perf_counter()
lowering.lower(model, example, calibration=calibration, threads=k)
print(time.perf_counter() - start, resolve_threads(k) or torch.get_num_threads())
"""


def _busy() -> None:
    while True:
        pass


def measure(threads: int | None) -> tuple[float, int]:
    """Seconds to lower MobileNetV2 1.0 in a fresh process, and the torch threads it ran with."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "TOSA_VERIFY_THREADS")}
    code = CHILD.format(root=str(ROOT), threads=threads)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--load", type=int, default=0, help="busy processes to start (default 0)")
    args = parser.parse_args()
    load = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for p in load:
        p.start()
    try:
        print(f"cores {os.cpu_count()}, load average before {os.getloadavg()[0]:.2f}, "
              f"busy processes started {args.load}", flush=True)
        configs = {"1 thread": 1, "2 threads": 2, "default (threads=None)": None}
        times: dict[str, list[float]] = {name: [] for name in configs}
        used: dict[str, int] = {}
        for rep in range(args.reps):
            for name, k in configs.items():
                t, used[name] = measure(k)
                times[name].append(t)
                ratio = t / times["1 thread"][rep]
                print(f"  rep {rep}: {name:<30} {ratio:5.2f}x the 1-thread run of this rep "
                      f"(torch threads {used[name]})", flush=True)
        base = statistics.median(times["1 thread"])
        print(f"load average after {os.getloadavg()[0]:.2f}")
        for name, ts in times.items():
            print(f"{name:<30} median / 1-thread median = {statistics.median(ts) / base:.2f} "
                  f"(min/max over reps {min(ts) / base:.2f}/{max(ts) / base:.2f}, threads {used[name]})")
    finally:
        for p in load:
            p.terminate()


if __name__ == "__main__":
    main()
