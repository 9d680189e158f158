"""Dataset-scale throughput: batched, parallel interpreter vs the TOSA reference model.

MobileNetV2 width 1.0 (``lowering.zoo``, 224x224) is lowered to INT and FP TOSA. On the same
inputs, in one run, we measure inferences per second of

* ``tosa_reference_model`` one inference at a time (the peer; one process);
* ``tosa_verify.run_batch`` at batch 1, 8 and 32 in one process;
* the same shards spread over ``--workers`` processes (``tosa_verify.evaluate.run_sharded``).

Reference and our runs alternate (reference, ours, reference, ...), so on a shared, loaded machine
both see the same load; printed figures are ratios to the reference measured in this run. The INT
outputs are checked bit for bit against the reference model's on the inputs both ran.

The MAC bound: the graph's multiply-accumulates per image (CONV2D, DEPTHWISE_CONV2D, MATMUL,
counted from the TOSA shapes) over the MAC rate of one float32 GEMM peer measured in the same run
(``np.matmul`` of 1024x1024 matrices on ``--workers`` processes' worth of cores) gives the
inferences/s no GEMM-based executor can beat here; the table shows how far each one is from it.

    python benchmarks/bench_eval.py [--inputs 32] [--reference-inputs 4] [--workers 2]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def graph_macs(graph) -> int:
    """Multiply-accumulates of one run: CONV2D/CONV3D/DEPTHWISE/TRANSPOSE_CONV2D/MATMUL."""
    block, total = graph.main, 0
    for op in block.operators:
        shape = lambda name: block.tensors[name].shape  # noqa: E731
        if op.op in ("CONV2D", "CONV3D"):
            w = shape(op.inputs[1])
            total += int(np.prod(shape(op.outputs[0]))) * int(np.prod(w[1:]))
        elif op.op == "DEPTHWISE_CONV2D":
            kh, kw = shape(op.inputs[1])[:2]
            total += int(np.prod(shape(op.outputs[0]))) * kh * kw
        elif op.op == "TRANSPOSE_CONV2D":
            total += int(np.prod(shape(op.inputs[0]))) * int(np.prod(shape(op.inputs[1])[:3]))
        elif op.op == "MATMUL":
            n, h, c = shape(op.inputs[0])
            total += n * h * c * shape(op.inputs[1])[2]
    return total


def gemm_mac_rate(workers: int, seconds: float = 2.0) -> float:
    """float32 GEMM multiply-accumulates per second on ``workers`` processes (the peer bound)."""
    import concurrent.futures as cf
    import multiprocessing

    with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        rates = list(pool.map(_gemm_worker, [seconds] * workers))
    return sum(rates)


def _gemm_worker(seconds: float) -> float:
    import threadpoolctl

    threadpoolctl.threadpool_limits(1)
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ a
        count += 1
    return count * 1024 ** 3 / (time.perf_counter() - start)


def reference(tosa: bytes, stacked: np.ndarray, k: int) -> tuple[float, float, list[np.ndarray]]:
    """tosa_reference_model on the first ``k`` inputs, one at a time: inferences per second (wall
    clock), per CPU second of this process, and the outputs."""
    import tosa_reference_model as trm

    outs, start, cpu = [], time.perf_counter(), time.process_time()
    with _stdout_silenced():  # the reference model prints a version warning per graph
        for i in range(k):
            out, status = trm.run(tosa, [np.ascontiguousarray(stacked[i])])
            assert "VALID" in str(status), status
            outs.append(np.asarray(out[0]))
    return k / (time.perf_counter() - start), k / (time.process_time() - cpu), outs


@contextlib.contextmanager
def _stdout_silenced():
    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def lower(profile: str, width: float):
    import lowering
    from lowering import zoo

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, example, calibration = zoo.mobilenet_v2(width_mult=width)
        lm = lowering.lower(model, example, profile=profile, calibration=calibration if profile == "INT" else None)
    return lm, example


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=64,
                        help="inputs per batched measurement (default 64: a 32-batch shard per worker)")
    parser.add_argument("--reference-inputs", type=int, default=4, help="inputs for the reference model (default 4)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--profiles", default="INT,FP")
    args = parser.parse_args()

    import threadpoolctl
    import torch

    import tosa_verify
    from tosa_verify.batch import batch_graph
    from tosa_verify.evaluate import run_sharded
    from tosa_verify.plan import plan_for

    torch.set_num_threads(1)
    threadpoolctl.threadpool_limits(1)
    peak = gemm_mac_rate(args.workers)
    rows = []
    for profile in args.profiles.split(","):
        lm, example = lower(profile, args.width)
        graph = tosa_verify.load(lm.tosa)
        macs = graph_macs(graph)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(args.inputs, *example[0].shape[1:], generator=gen)
        q = lm.quantize_inputs(x)[0]
        stacked = q.reshape(args.inputs, *graph.main.tensors[graph.main.inputs[0]].shape)
        ref_n = min(args.reference_inputs, args.inputs)

        measures = [("ours, batch 1, 1 process", 1, 1, min(args.inputs, 8)),
                    ("ours, batch 8, 1 process", 8, 1, min(args.inputs, 32)),
                    ("ours, batch 32, 1 process", 32, 1, min(args.inputs, 32)),
                    (f"ours, batch 1, {args.workers} processes", 1, args.workers, min(args.inputs, 8)),
                    (f"ours, batch 8, {args.workers} processes", 8, args.workers, args.inputs),
                    (f"ours, batch 32, {args.workers} processes", 32, args.workers, args.inputs)]
        # start the worker processes and let them parse the graph before any timing, and build
        # this process's batched graphs and their plans: a data set evaluation pays this once,
        # not per batch (the workers build theirs inside the measurement)
        run_sharded(lm.tosa, [stacked[:args.workers]], batch_size=1, workers=args.workers)
        tosa_verify.run(graph, [stacked[0]])
        plans = {b: batch_graph(graph, b) for b in (8, 32)}
        for plan in plans.values():
            if plan.graph is not None:
                plan_for(plan.graph.main)
        ref_rates: list[float] = []
        ref_outs: list[np.ndarray] = []
        for label, batch, workers, n in measures:
            # alternate: each of our runs has a reference run beside it
            rate, ref_cpu, ref_outs = reference(lm.tosa, stacked, ref_n)
            ref_rates.append(rate)
            start, cpu = time.perf_counter(), time.process_time()
            if workers == 1:
                [ours] = tosa_verify.run_batch(graph, [stacked[:n]], batch_size=batch, plans=plans)
            else:
                [ours] = run_sharded(lm.tosa, [stacked[:n]], batch_size=batch, workers=workers)
            ours_rate = n / (time.perf_counter() - start)
            # per CPU second: load-independent, but only meaningful for work done in this process
            cpu_ratio = n / (time.process_time() - cpu) / ref_cpu if workers == 1 else None
            exact = all(np.array_equal(ours[i], ref_outs[i]) for i in range(min(n, ref_n)))
            rows.append((profile, label, ours_rate, rate, cpu_ratio, exact, macs))
        rows.append((profile, "tosa_reference_model, 1 at a time", float(np.median(ref_rates)),
                     float(np.median(ref_rates)), 1.0, True, macs))
        print(f"{profile}: {macs / 1e9:.3f} GMAC per image; reference model {np.median(ref_rates):.2f} inf/s "
              f"(median of {len(ref_rates)} interleaved runs)", flush=True)
        for _, label, rate, ref, _cpu, _exact, _ in rows[-len(measures) - 1:]:
            print(f"  {label:<38} {rate:7.2f} inf/s {rate / ref:6.1f}x reference", flush=True)

    print(f"\nGEMM peer: {peak / 1e9:.1f} GMAC/s float32 on {args.workers} process(es)\n")
    header = (f"{'profile':<7} {'executor':<38} {'inf/s':>7} {'x reference':>12} {'x ref CPU-s':>12} "
              f"{'% MAC bound':>12} {'bits = ref':>10}")
    print(header)
    print("-" * len(header))
    for profile, label, rate, ref, cpu_ratio, exact, macs in rows:
        bound = peak / macs
        same = ("yes" if exact else "NO") if profile == "INT" else "-"
        cpu = f"{cpu_ratio:11.1f}x" if cpu_ratio is not None else f"{'-':>12}"
        print(f"{profile:<7} {label:<38} {rate:7.2f} {rate / ref:11.1f}x {cpu} {100 * rate / bound:11.1f}% "
              f"{same:>10}")
    for profile in dict.fromkeys(r[0] for r in rows):
        best = max((r for r in rows if r[0] == profile), key=lambda r: r[2] / r[3])
        print(f"\n{profile}: best {best[2] / best[3]:.1f}x the reference model ({best[1]})", end="")
    print("\n\nx reference: against the reference run interleaved with it (wall clock); x ref CPU-s: "
          "inferences per CPU second of this process against the reference's (one process only: "
          "independent of the machine's load); % MAC bound: inf/s over (GEMM peer MAC/s / MACs per "
          "image). FP outputs differ from the reference model's within the spec's tolerance (float64 "
          "accumulation), so only INT is compared bit for bit.")


if __name__ == "__main__":
    main()
