"""Long differential fuzzing run: random TOSA graphs through the interpreter and the reference model.

Usage (from the repository root)::

    python benchmarks/fuzz_long.py                    # 10,000 graphs, seeds 0..9999
    python benchmarks/fuzz_long.py -n 2000 --start 50000 --jobs 2
    python benchmarks/fuzz_long.py --replay multi:1234 # re-run one case and print both results

Graph ``i`` is built from seed ``start + i``; its kind cycles single, single, multi, fp, v11 (INT
single-op graphs, small quantized networks, floating-point single ops, TOSA 1.1 draft
operators; ``--kinds`` picks another cycle, e.g. ``--kinds v11`` for 1.1 graphs only), so every reported case is reproducible with ``--replay KIND:SEED``. Prints the count of each outcome (agree, both-error,
both-unpredictable, unsupported, disagree), a per-operator breakdown, every disagreement, and
exits 1 if any disagreement was found.

>>> main(["-n", "8", "--jobs", "1"])   # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

KINDS = ("single", "single", "multi", "fp", "v11")


def _one(seed: int, kinds: Sequence[str] = KINDS) -> tuple[int, str, str, list[str], str]:
    from fuzz.differential import run_case
    from fuzz.strategies import case_from_seed

    kind = kinds[seed % len(kinds)]
    try:
        case = case_from_seed(kind, seed)
    except Exception as exc:  # noqa: BLE001 - a generator bug is reported, not fatal
        return seed, kind, "build-failure", [], f"{type(exc).__name__}: {exc}"
    try:
        outcome = run_case(case)
    except Exception as exc:  # noqa: BLE001 - an executor crash counts as a disagreement
        return seed, kind, "disagree", case.ops, f"crash: {type(exc).__name__}: {exc}"
    return seed, kind, outcome.kind, case.ops, outcome.detail


def replay(spec: str) -> int:
    """Re-run one case (``KIND:SEED``) and print the graph, both results and the verdict."""
    import numpy as np
    from fuzz.differential import run_case
    from fuzz.strategies import case_from_seed

    import tosa_verify
    from tosa_verify import reference
    from tosa_verify.diff import diff

    kind, _, seed = spec.partition(":")
    case = case_from_seed(kind, int(seed))
    graph = tosa_verify.load(case.data)
    for op in graph.main.operators:
        print(f"  {op.op:<18} {op.attrs} {op.inputs} -> {op.outputs}")
    for name, fn in (("interpreter", tosa_verify.run), ("reference", reference.run)):
        try:
            print(name, [np.asarray(o).tolist() for o in fn(case.data, case.inputs)])
        except tosa_verify.TosaError as exc:
            print(name, "raised", type(exc).__name__, exc)
    outcome = run_case(case)
    print("outcome:", outcome.kind, outcome.detail)
    if outcome.kind == "disagree":
        print(diff(case.data, case.inputs).format_table(all_ops=False))
    return 0 if outcome.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--count", type=int, default=10_000, help="number of graphs (default 10000)")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--replay", metavar="KIND:SEED", help="re-run one case verbosely")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="comma-separated kinds graph i cycles through (default %(default)s; v11 alone: --kinds v11)")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay)

    kinds = tuple(args.kinds.split(","))
    seeds = range(args.start, args.start + args.count)
    outcomes: Counter[str] = Counter()
    per_op: Counter[tuple[str, str]] = Counter()
    problems: list[tuple[int, str, str, list[str], str]] = []
    started = time.time()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = pool.map(partial(_one, kinds=kinds), seeds, chunksize=25)
            for done, result in enumerate(results, 1):
                _record(result, outcomes, per_op, problems)
                _progress(done, args.count, started, outcomes)
    else:
        for done, seed in enumerate(seeds, 1):
            _record(_one(seed, kinds), outcomes, per_op, problems)
            _progress(done, args.count, started, outcomes)
    elapsed = time.time() - started
    total = sum(outcomes.values())
    print(f"\nfuzzed {total} graphs (seeds {args.start}..{args.start + args.count - 1}) in {elapsed:.0f} s")
    for key, value in sorted(outcomes.items()):
        print(f"  {key:<20} {value}")
    print("per operator (graphs containing it):")
    ops = sorted({op for op, _ in per_op})
    for op in ops:
        row = {k: v for (o, k), v in per_op.items() if o == op}
        print(f"  {op:<22} " + ", ".join(f"{k} {v}" for k, v in sorted(row.items())))
    for seed, kind, what, ops_, detail in problems:
        print(f"{what}: --replay {kind}:{seed} ops={ops_}\n    {detail[:400]}")
    disagreements = outcomes["disagree"] + outcomes["build-failure"]
    print("RESULT:", "PASS (no disagreement)" if not disagreements else f"FAIL ({disagreements} problem cases)")
    return 0 if not disagreements else 1


def _record(result, outcomes, per_op, problems) -> None:
    seed, kind, what, ops, detail = result
    outcomes[what] += 1
    for op in set(ops):
        per_op[(op, what)] += 1
    if what in ("disagree", "build-failure"):
        problems.append(result)


def _progress(done: int, total: int, started: float, outcomes: Counter) -> None:
    if done % 500 == 0 or done == total:
        rate = done / max(time.time() - started, 1e-9)
        print(f"  {done}/{total} ({rate:.1f}/s) disagree={outcomes['disagree']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
