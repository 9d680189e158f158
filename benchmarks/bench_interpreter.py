"""Interpreter speed and memory against the TOSA reference model, on the same graphs and inputs.

The graphs come from a peer producer, ExecuTorch's Arm backend (TOSA-1.0+INT and TOSA-1.0+FP),
lowering a MobileNetV2 (width 1.0, 224x224, built in code with random weights, as in
``lowering.zoo``). Each executor runs in its own fresh process, so peak memory (VmHWM above
the process's Python + numpy baseline: the executor's libraries, graph and run) is its own. Printed: the ratio ours/reference of the median
run time, each one's peak memory in MiB, and whether the outputs agree (INT exactly).

    python benchmarks/bench_interpreter.py [--repeats 5] [--width 1.0]

``--small`` runs the small-graph suite instead (``_small_graphs``: small CNN/MLP, softmax, layer
norm, sigmoid/tanh, residual BMM, pooling/concat, encoder block, depthwise residual, each lowered
by ExecuTorch as INT8, INT16 and FP), in one process with one thread, the executors interleaved,
timed in process CPU time:
per graph the ratio ours/reference of the median time per call (``run(bytes, inputs)``, loading
included), of a *cold* call (the same with the interpreter's cache of recently run graphs
emptied first, so it loads, plans and runs: what a first call on new bytes costs), and per run of
an already loaded graph (``run(graph, inputs)``), each against the reference's whole call (it
has no separate load); then the geometric means.

    OMP_NUM_THREADS=1 python benchmarks/bench_interpreter.py --small [--repeats 7] [--cache DIR]

``--tiny`` runs the same table and geometric means over the tiny-graph suite instead
(``_tiny_graphs``: one or two common torch ops each, 1-10 TOSA operators, lowered by ExecuTorch
as INT8 and/or FP), where a call's fixed cost (load, plan, binding, checks) dominates.

    OMP_NUM_THREADS=1 python benchmarks/bench_interpreter.py --tiny [--repeats 7] [--cache DIR]

By default the four measurements are interleaved call by call, so machine load hits all alike;
``--back-to-back`` times each one as a block of ``--repeats`` calls in a row instead (the way a
loop over a dataset calls one executor), which keeps each executor's code and data in the CPU
caches. The reference model gains more from that than we do (on a one-operator graph its call
takes about a quarter of its interleaved time), so the ratios come out higher: run both.

``--phases`` splits the cold call of each small graph (already in ``--cache``) into its phases:
loading the bytes, the memory check, the plan (every declaration-only ERROR_IF, prepared
kernels), the first run; each as a ratio to the reference model's whole call.

``--floor`` splits each small graph's cold call into the operators' own work (every prepare
and every prepared kernel, timed inside the call) and the rest (reading the flatbuffer, the plan's
bookkeeping, the memory check, the run loop), and prints the geometric mean ours/reference of the
whole cold call and of the rest alone: what a cold call would cost if every operator were free.

    OMP_NUM_THREADS=1 python benchmarks/bench_interpreter.py --floor [--repeats 7] [--cache DIR]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WORKER = r"""
import json, sys, time
import numpy as np
def hwm_kib():
    # VmHWM belongs to this process image; ru_maxrss would carry the (torch-sized) parent's
    # high-water mark across fork+exec on Linux.
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
base = hwm_kib()  # Python + numpy, before the executor
graph_path, inputs_path, executor, repeats, out_path = sys.argv[1:6]
data = open(graph_path, "rb").read()
inputs = [np.load(inputs_path)]
if executor == "ours":
    import tosa_verify
    run = lambda: tosa_verify.run(data, inputs)
else:
    import tosa_reference_model
    def run():
        outs, status = tosa_reference_model.run(data, inputs)
        assert "VALID" in str(status), status
        return outs
times = []
for _ in range(int(repeats)):
    t = time.perf_counter(); outs = run(); times.append(time.perf_counter() - t)
peak = hwm_kib()
np.save(out_path, np.asarray(outs[0]))
print(json.dumps({"times": times, "peak_kib": peak - base}))
"""


def lower_with_executorch(width: float, profile: str) -> tuple[bytes, np.ndarray]:
    """TOSA bytes of MobileNetV2 lowered by ExecuTorch's Arm backend, and a graph input."""
    import torch
    from _peer import executorch_tosa

    from lowering.zoo import MobileNetV2

    torch.manual_seed(0)
    model = MobileNetV2(width).eval()
    example = (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(7)),)
    tosa = executorch_tosa(model, example, profile).tosa
    import tosa_verify

    graph = tosa_verify.load(tosa)
    decl = graph.main.tensors[graph.main.inputs[0]]
    rng = np.random.default_rng(0)
    if decl.dtype == "INT8":
        x = rng.integers(-128, 128, size=decl.shape, dtype=np.int8)
    else:
        x = rng.standard_normal(decl.shape).astype(np.float32)
    return tosa, x


def measure(executor: str, graph: Path, x: Path, repeats: int, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", WORKER, str(graph), str(x), executor, str(repeats), str(out)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{executor} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _seconds(fn, *args) -> float:
    # CPU time of this (single-threaded) process, not wall time: on a shared, loaded machine
    # wall time mostly measures waiting for a core. Both executors run on the calling thread.
    start = time.process_time()
    fn(*args)
    return time.process_time() - start


def _cold_call(source: bytes, values) -> None:
    """``tosa_verify.run`` on ``source`` as on bytes never seen: the interpreter's cache of
    recently run graphs emptied first (dropping the last graph is part of the call, as an
    eviction is), so it loads, plans and runs."""
    import tosa_verify
    from tosa_verify import plan as plan_module

    plan_module._GRAPHS.clear()
    tosa_verify.run(source, values)


def small_suite(repeats: int, cache: Path, only: str | None = None, lower: bool = True, tiny: bool = False,
                back_to_back: bool = False) -> int:
    """Per-graph table and geometric means ours/reference over :mod:`_small_graphs` (or, with
    ``tiny``, :mod:`_tiny_graphs`); ``back_to_back``: each measurement as a block of calls in a
    row instead of interleaved."""
    import tosa_reference_model
    from _small_graphs import random_inputs, small_graphs
    from _tiny_graphs import tiny_graphs

    import tosa_verify

    graphs = (tiny_graphs if tiny else small_graphs)(cache, progress=lambda m: print(m, flush=True),
                                                      lower_missing=lower)
    print(f"{'tiny' if tiny else 'small'}-graph suite, {len(graphs)} ExecuTorch-lowered graphs; "
          f"median of {repeats}, one thread, {'back to back' if back_to_back else 'interleaved'}")
    print(f"{'graph':<26} {'ops':>4} {'ref ms':>7} {'call ours/ref':>14} {'cold call':>10} "
          f"{'loaded ours/ref':>16} {'outputs':>22}")
    call_ratios, cold_ratios, run_ratios = [], [], []
    for key, data in sorted(graphs.items()):
        if only and only not in key:
            continue
        graph = tosa_verify.load(data)
        inputs = random_inputs(graph)
        ref_outs, status = tosa_reference_model.run(data, inputs)
        if "VALID" not in str(status):
            print(f"{key:<26} reference model: {status}")
            continue
        ours = tosa_verify.run(data, inputs)
        agree = _agreement(key, ours, ref_outs)
        measurements = ((tosa_reference_model.run, data), (tosa_verify.run, data), (_cold_call, data),
                        (tosa_verify.run, graph))
        times: list[list[float]] = [[] for _ in measurements]
        if back_to_back:  # each a block of calls in a row
            for t, (fn, *args) in zip(times, measurements, strict=True):
                t.extend(_seconds(fn, *args, inputs) for _ in range(repeats))
        else:  # interleaved, so machine load hits all four alike
            for _ in range(repeats):
                for t, (fn, *args) in zip(times, measurements, strict=True):
                    t.append(_seconds(fn, *args, inputs))
        ref, call, cold, run = (float(np.median(t)) for t in times)
        call_ratios.append(call / ref)
        cold_ratios.append(cold / ref)
        run_ratios.append(run / ref)
        ops = sum(len(b.operators) for r in graph.regions for b in r.blocks)
        print(f"{key:<26} {ops:>4} {ref * 1e3:>7.2f} {call / ref:>14.2f} {cold / ref:>10.2f} {run / ref:>16.2f} "
              f"{agree:>22}", flush=True)
    # (issue 17's bars: a call including its load, which only a cold call does, <= 1.0; a run of
    # a loaded graph <= 0.5; a call on bytes run before reuses their loaded graph, no load)
    print(f"geometric mean ours/reference over {len(call_ratios)} graphs: per call on bytes run before "
          f"{_gm(call_ratios):.2f}, cold call (load included) {_gm(cold_ratios):.2f} (target <= 1.0), "
          f"per run of a loaded graph {_gm(run_ratios):.2f} (target <= 0.5)")
    return 0


def phases(repeats: int, cache: Path, only: str | None = None) -> int:
    """Where a cold call's time goes: per graph, each phase of ``run(bytes, inputs)`` on bytes
    never seen (load, memory check, plan with its ERROR_IF checks, first run) as a ratio to the
    reference model's whole call, measured interleaved with it; then the geometric means."""
    import tosa_reference_model
    from _small_graphs import random_inputs, small_graphs

    import tosa_verify
    from tosa_verify.plan import plan_for, verify_graph

    names = ("load", "verify", "plan", "run")
    print(f"cold call by phase, ours/reference whole call; median of {repeats}, one thread")
    print(f"{'graph':<26}" + "".join(f"{n:>8}" for n in names))
    table = {n: [] for n in names}
    for key, data in sorted(small_graphs(cache, lower_missing=False).items()):
        if only and only not in key:
            continue
        inputs = random_inputs(tosa_verify.load(data))
        times: dict[str, list[float]] = {n: [] for n in ("ref", *names)}
        for _ in range(repeats):
            times["ref"].append(_seconds(tosa_reference_model.run, data, inputs))
            start = time.process_time()
            graph = tosa_verify.load(data)  # a new Graph: nothing of an earlier call is reused
            marks = [start, time.process_time()]
            verify_graph(graph)
            marks.append(time.process_time())
            plan_for(graph.main)
            marks.append(time.process_time())
            tosa_verify.run(graph, inputs)
            marks.append(time.process_time())
            for name, t0, t1 in zip(names, marks, marks[1:], strict=False):
                times[name].append(t1 - t0)
        ref = float(np.median(times["ref"]))
        ratios = [float(np.median(times[n])) / ref for n in names]
        for n, r in zip(names, ratios, strict=True):
            table[n].append(r)
        print(f"{key:<26}" + "".join(f"{r:>8.2f}" for r in ratios), flush=True)
    print(f"{'geometric mean':<26}" + "".join(f"{_gm(table[n]):>8.2f}" for n in names))
    return 0


def floor(repeats: int, cache: Path, only: str | None = None, tiny: bool = False) -> int:
    """Per graph (already in ``cache``), the cold call ours/reference whole, its operators' share
    (prepares and prepared kernels) and the rest; then the geometric means of the whole and of
    the rest alone (see the module docstring)."""
    import tosa_reference_model
    from _small_graphs import random_inputs, small_graphs
    from _tiny_graphs import tiny_graphs

    import tosa_verify
    from tosa_verify import plan as plan_module

    clock = time.process_time
    spent = [0.0]  # time inside prepares and prepared kernels during the current call
    stock = plan_module.prepare_for

    def timed_kernel(kernel):
        def run(call):
            start = clock()
            try:
                return kernel(call)
            finally:
                spent[0] += clock() - start
        return run

    def timed_prepare_for(op: str):
        prepare = stock(op)
        if prepare is None:
            return None

        def timed(call):
            start = clock()
            try:
                kernel = prepare(call)
            finally:
                spent[0] += clock() - start
            return None if kernel is None else timed_kernel(kernel)
        return timed

    graphs = (tiny_graphs if tiny else small_graphs)(cache, lower_missing=False)
    print(f"cold call, operators' own work and the rest, ours/reference; median of {repeats}, one thread")
    print(f"{'graph':<26} {'cold':>7} {'operators':>10} {'rest':>7}")
    wholes, rests = [], []
    plan_module.prepare_for = timed_prepare_for
    try:
        for key, data in sorted(graphs.items()):
            if only and only not in key:
                continue
            inputs = random_inputs(tosa_verify.load(data))
            ref, whole, ops = [], [], []
            for _ in range(repeats):
                ref.append(_seconds(tosa_reference_model.run, data, inputs))
                spent[0] = 0.0
                whole.append(_seconds(_cold_call, data, inputs))
                ops.append(spent[0])
            r, w, o = float(np.median(ref)), float(np.median(whole)), float(np.median(ops))
            wholes.append(w / r)
            rests.append((w - o) / r)
            print(f"{key:<26} {w / r:>7.2f} {o / r:>10.2f} {(w - o) / r:>7.2f}", flush=True)
    finally:
        plan_module.prepare_for = stock
    print(f"geometric mean over {len(wholes)} graphs: cold call {_gm(wholes):.2f}, without the operators' own "
          f"work {_gm(rests):.2f}")
    return 0


def _gm(ratios: list[float]) -> float:
    return float(np.exp(np.mean(np.log(ratios))))


def _agreement(key: str, ours, ref) -> str:
    """INT outputs must match bit for bit; FP ones are shown as the largest absolute difference."""
    if "_INT" in key:
        bad = sum(int((np.asarray(a) != np.asarray(b)).sum()) for a, b in zip(ours, ref, strict=True))
        return "bit-exact" if bad == 0 else f"DIFFER in {bad}"
    diff = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0))
               for a, b in zip(ours, ref, strict=True))
    return f"max abs diff {diff:.2e}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--width", type=float, default=1.0, help="MobileNetV2 width multiplier")
    parser.add_argument("--small", action="store_true", help="the small-graph suite instead of MobileNetV2")
    parser.add_argument("--tiny", action="store_true",
                        help="the tiny-graph suite (1-10 operators, _tiny_graphs) instead of MobileNetV2")
    parser.add_argument("--cached-only", action="store_true", help="small suite: only graphs already in --cache")
    parser.add_argument("--back-to-back", action="store_true",
                        help="small or tiny suite: time each measurement as a block of calls in a row, not interleaved")
    parser.add_argument("--phases", action="store_true",
                        help="small suite (graphs already in --cache): a cold call's phases against the reference")
    parser.add_argument("--floor", action="store_true",
                        help="small (or --tiny) suite, graphs already in --cache: a cold call without its "
                        "operators' own work against the reference")
    parser.add_argument("--only", help="small suite: only graphs whose name contains this")
    parser.add_argument("--cache", type=Path, help="small or tiny suite: directory of the lowered graphs "
                        "(reused across runs; default tosa_verify_small_graphs or tosa_verify_tiny_graphs in the "
                        "temporary directory)")
    args = parser.parse_args(argv)
    if args.cache is None:
        args.cache = Path(tempfile.gettempdir()) / f"tosa_verify_{'tiny' if args.tiny else 'small'}_graphs"
    if args.phases:
        return phases(args.repeats, args.cache, args.only)
    if args.floor:
        return floor(args.repeats, args.cache, args.only, args.tiny)
    if args.small or args.tiny:
        return small_suite(args.repeats, args.cache, args.only, not args.cached_only, args.tiny, args.back_to_back)
    import tosa_verify

    print(f"MobileNetV2 width {args.width}, 224x224, lowered by ExecuTorch's Arm backend; median of {args.repeats}")
    print(f"{'graph':<8} {'ops':>5} {'time ours/ref':>14} {'peak MiB ours':>14} {'peak MiB ref':>13} {'outputs':>22}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        for profile in ("INT", "FP"):
            data, x = lower_with_executorch(args.width, profile)
            graph_path, x_path = tmpdir / f"{profile}.tosa", tmpdir / f"{profile}_x.npy"
            graph_path.write_bytes(data)
            np.save(x_path, x)
            ours = measure("ours", graph_path, x_path, args.repeats, tmpdir / "ours.npy")
            ref = measure("reference", graph_path, x_path, args.repeats, tmpdir / "ref.npy")
            a, b = np.load(tmpdir / "ours.npy"), np.load(tmpdir / "ref.npy")
            if profile == "INT":
                agree = "bit-exact" if np.array_equal(a, b) else f"DIFFER in {int((a != b).sum())}"
            else:
                agree = f"max abs diff {float(np.max(np.abs(a.astype(np.float64) - b))):.2e}"
            ratio = float(np.median(ours["times"]) / np.median(ref["times"]))
            worst = max(worst, ratio)
            ops = sum(len(b.operators) for r in tosa_verify.load(data).regions for b in r.blocks)
            print(f"{profile:<8} {ops:>5} {ratio:>14.2f} {ours['peak_kib'] / 1024:>14.1f} "
                  f"{ref['peak_kib'] / 1024:>13.1f} {agree:>22}")
    print(f"target: time ratio <= 1.0; worst {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
