"""Ours vs ExecuTorch's Arm backend on ExecuTorch's own Arm op-test suite, same cases, same run.

Every INT/FP TOSA case of ``executorch/backends/arm/test/ops`` (its modules and inputs, see
``_et_suite.py``) goes through both flows:

* ours: ``lowering.lower`` judged by ``_et_suite.judge_ours`` (fully lowered; reference-model
  output within ``qtol`` steps of fake-quant in INT, within ExecuTorch's atol + qtol steps and
  rtol of it in INT16, ExecuTorch's int16 flow; within atol/rtol of float in FP);
* ExecuTorch: its own test function for the case, run by pytest in a child process (its
  pipeline quantizes, lowers, runs the reference model and compares): pass or not. The child
  runs while ours is judged, so one run of this script measures both.

Prints pass / partial / wrong / error counts for both, per profile (INT, INT16, FP), and the cases where we lose.

    python benchmarks/bench_et_suite.py                 # at most 3 cases per test function
    python benchmarks/bench_et_suite.py --all           # every case (hours on 2 cores)
    python benchmarks/bench_et_suite.py --files test_add.py test_conv2d.py --ours-only
    python benchmarks/bench_et_suite.py --json results.json
    python benchmarks/bench_et_suite.py --kind models --all   # the whole-model tests
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import _et_suite  # noqa: E402 - benchmarks/ is this script's directory
import torch  # noqa: E402

torch.set_num_threads(1)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def sample(cases, per_function: int | None):
    """At most ``per_function`` cases of each test function (the first ones, in ET's order)."""
    if per_function is None:
        return cases
    seen: Counter = Counter()
    out = []
    for c in cases:
        fn = c.id.split("[")[0]
        if seen[fn] < per_function:
            out.append(c)
            seen[fn] += 1
    return out


def run_ours(cases, timeout: int) -> dict[str, _et_suite.Verdict]:
    """Our verdict for every case (a case over ``timeout`` seconds is an error)."""
    signal.signal(signal.SIGALRM, _alarm)
    verdicts = {}
    # the reference model prints a version warning per graph on file descriptor 1
    stdout_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        _judge_all(cases, timeout, verdicts)
    finally:
        os.dup2(stdout_fd, 1)
        os.close(devnull)
    return verdicts


def _judge_all(cases, timeout: int, verdicts: dict) -> None:
    for i, c in enumerate(cases):
        signal.alarm(timeout)
        try:
            v = _et_suite.judge_ours(c)
        except _Timeout:
            v = _et_suite.Verdict("error", f"timeout after {timeout} s", timeout)
        except Exception as e:  # noqa: BLE001
            v = _et_suite.Verdict("error", f"{type(e).__name__}: {e}")
        finally:
            signal.alarm(0)
        verdicts[c.id] = v
        if (i + 1) % 25 == 0 or i + 1 == len(cases):
            n_pass = sum(x.status == "pass" for x in verdicts.values())
            print(f"  ours: {i + 1}/{len(cases)} cases, {n_pass} pass", file=sys.stderr, flush=True)


class ExecuTorchRun:
    """ExecuTorch's verdict for every case: its own tests, run by pytest in a child process.

    The child starts at construction and runs while our flow judges the same cases in this
    process, so both verdict sets come from one run of this script (2 cores: one each).
    """

    def __init__(self, cases, workers: int, kind: str = "ops"):
        self.cases = cases
        test_dir = _et_suite._test_dir()
        ids = sorted({c.id.split("#")[0] for c in cases})
        self._tmp = tempfile.TemporaryDirectory(prefix="et-suite-")
        listing = Path(self._tmp.name, "ids.txt")
        listing.write_text("\n".join(str(test_dir / kind / i) for i in ids))
        self.junit = Path(self._tmp.name, "junit.xml")
        # -p _et_suite: its pytest_configure lets the model tests import torchvision
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_et_suite",
               "-o", "addopts=",
               "--rootdir", str(test_dir), f"--junitxml={self.junit}", "-W", "ignore",
               f"@{listing}"]
        if workers > 1:
            cmd += ["-n", str(workers)]
        here = str(Path(__file__).resolve().parent)
        env = {**os.environ, "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))}
        print(f"  ExecuTorch: pytest on {len(ids)} cases, in a child process ...",
              file=sys.stderr, flush=True)
        self.started = time.perf_counter()
        self.log = Path(self._tmp.name, "pytest.log")
        with self.log.open("wb") as log:
            self._proc = subprocess.Popen(cmd, cwd=self._tmp.name, env=env,
                                          stdout=log, stderr=subprocess.STDOUT)

    def verdicts(self, timeout: float) -> dict[str, _et_suite.Verdict]:
        """Wait for the child (at most ``timeout`` seconds) and read its JUnit report."""
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            raise
        print(f"  ExecuTorch: done after {time.perf_counter() - self.started:.0f} s",
              file=sys.stderr, flush=True)
        if not self.junit.exists():
            raise RuntimeError("ExecuTorch's pytest wrote no report; its output ends:\n"
                               + self.log.read_text(errors="replace")[-3000:])
        verdicts: dict[str, _et_suite.Verdict] = {}
        for tc in ET.parse(self.junit).getroot().iter("testcase"):
            name = f"{tc.get('classname', '').split('.')[-1]}.py::{tc.get('name')}"
            status, detail = "pass", ""
            for child in tc:
                if child.tag in ("failure", "error"):
                    status, detail = "error", (child.get("message") or "")[:200]
                elif child.tag == "skipped":
                    status, detail = "error", "xfail/skip: " + (child.get("message") or "")[:200]
            verdicts[name] = _et_suite.Verdict(status, detail, float(tc.get("time", 0)))
        self._tmp.cleanup()
        return {c.id: verdicts.get(c.id.split("#")[0], _et_suite.Verdict("error", "not run"))
                for c in self.cases}


def table(cases, ours, theirs) -> str:
    lines = [f"{'profile':8s} {'flow':11s} {'pass':>6s} {'partial':>8s} {'wrong':>6s} "
             f"{'error':>6s} {'total':>6s}"]
    for profile in ("INT", "INT16", "FP"):  # (INT16: ExecuTorch's int16 flow, 16-bit activations)
        sel = [c for c in cases if c.label == profile]
        if not sel:
            continue
        for flow, verdicts in (("ours", ours), ("ExecuTorch", theirs)):
            if verdicts is None:
                continue
            cnt = Counter(verdicts[c.id].status for c in sel)
            lines.append(f"{profile:8s} {flow:11s} {cnt['pass']:6d} {cnt['partial']:8d} "
                         f"{cnt['wrong']:6d} {cnt['error']:6d} {len(sel):6d}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", nargs="*", help="ExecuTorch test files (default: all of --kind)")
    ap.add_argument("--kind", choices=["ops", "models"], default="ops",
                    help="ExecuTorch's op tests or its whole-model tests")
    ap.add_argument("--all", action="store_true", help="every case, not 3 per test function")
    ap.add_argument("--per-function", type=int, default=3)
    ap.add_argument("--profile", choices=["INT", "FP"], action="append")
    ap.add_argument("--ours-only", action="store_true", help="do not run ExecuTorch's flow")
    ap.add_argument("--executorch-only", action="store_true", help="do not run our flow")
    ap.add_argument("--executorch-json", help="ExecuTorch's verdicts from an earlier --json run "
                    "(ExecuTorch's flow does not change between our commits)")
    # 300 s: on a loaded 2-core machine an attention case took from 83 s to over 120 s
    ap.add_argument("--timeout", type=int, default=300, help="seconds per case (ours)")
    ap.add_argument("--workers", type=int, default=1, help="pytest-xdist workers for ExecuTorch")
    ap.add_argument("--json", help="write every verdict here")
    args = ap.parse_args(argv)

    start = time.perf_counter()
    cases = _et_suite.collect(args.files, kind=args.kind, profiles=tuple(args.profile or ("INT", "FP")))
    cases = [c for c in cases if c.skip is None]
    cases = sample(cases, None if args.all else args.per_function)
    print(f"{len(cases)} cases collected in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    for what, reason in _et_suite.SKIPPED.items():
        print(f"  skipped {what}: {reason}", file=sys.stderr)
    none = _et_suite.Verdict("error", "not run")
    et_run = None
    if not (args.ours_only or args.executorch_json):
        et_run = ExecuTorchRun(cases, args.workers, args.kind)
    ours = {c.id: none for c in cases} if args.executorch_only else run_ours(cases, args.timeout)
    if args.executorch_json:
        saved = json.loads(Path(args.executorch_json).read_text())
        theirs = {c.id: _et_suite.Verdict(**saved[c.id]["executorch"]) if saved.get(c.id, {})
                  .get("executorch") else none for c in cases}
    else:
        theirs = None if et_run is None else et_run.verdicts(timeout=20 * 3600)
    print(table(cases, ours, theirs))
    losses = [c for c in cases if ours[c.id].status != "pass" and
              (theirs is None or theirs[c.id].status == "pass")]
    # cases ExecuTorch marks as expected failures are not gaps: counted, not listed
    xfails = [c for c in losses if c.et_xfail]
    losses = [c for c in losses if not c.et_xfail]
    print(f"\ncases we do not pass that ExecuTorch marks xfail: {len(xfails)}")
    print(f"cases we do not pass{'' if theirs is None else ' and ExecuTorch passes'} "
          f"(not ExecuTorch xfails): {len(losses)}")
    by_reason: dict[str, list[str]] = defaultdict(list)
    for c in losses:
        by_reason[f"{ours[c.id].status}: {ours[c.id].detail[:110]}"].append(c.id)
    for reason, ids in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(ids):4d}  {reason}\n        e.g. {ids[0]}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {c.id: {"profile": c.label, "et_xfail": c.et_xfail, "ours": vars(ours[c.id]),
                    "executorch": vars(theirs[c.id]) if theirs else None} for c in cases}
            | {"skipped": _et_suite.SKIPPED},
            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
