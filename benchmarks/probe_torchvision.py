"""Probe torchvision classifiers through our lowering (INT and FP) and ExecuTorch's (INT).

One subprocess per model and flow (a crash or a timeout costs one cell, not the run); one
JSON line per cell on stdout, e.g.::

    OMP_NUM_THREADS=1 python benchmarks/probe_torchvision.py --size 64 alexnet vgg11 > probe.jsonl

Cells: ``ours-INT`` (fully lowered, max step difference against the float64 fake-quant
model, SQNR vs float on held-out inputs), ``ours-FP`` (fully lowered, max error relative to
the float output's scale), ``et-INT`` (ExecuTorch's TOSAPartitioner delegates one graph, its
SQNR on the same held-out inputs). ``--cells`` picks a subset.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CELLS = ("ours-INT", "ours-FP", "et-INT")
#: Inputs the smallest default does not fit (inception_v3 needs at least 75x75).
MIN_SIZE = {"inception_v3": 75}


def _setup(size: int):
    import torch

    torch.set_num_threads(1)
    sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "lowering")]
    import tv_models

    return torch, tv_models


def _ours(name: str, size: int, profile: str) -> dict:
    import numpy as np

    torch, tv_models = _setup(size)
    from bench_lowering import sqnr

    import lowering
    from lowering.reference import fake_quant_float64

    model, example, calibration = tv_models.build(name, size=size)
    t = time.perf_counter()
    lm = lowering.lower(model, example, profile=profile, calibration=calibration)
    row = {"seconds": round(time.perf_counter() - t, 1), "whole": lm.tosa is not None and not lm.cpu_nodes,
           "cpu": [str(c)[:160] for c in lm.cpu_nodes[:3]]}
    if lm.tosa is None:
        return row
    with torch.no_grad():
        expected = model(*example)
    if profile == "FP":
        got = lm.run(*example)[0]
        row["rel_err"] = float((got - expected).abs().max() / expected.abs().max())
        row["ok"] = bool(torch.allclose(got, expected, atol=1e-4 * float(expected.abs().max()), rtol=1e-3))
        return row
    qp = lm.output_qparams[0]
    raw = lm.run_raw(lm.quantize_inputs(*example))[0].astype(np.int64)
    ref = torch.ops.quantized_decomposed.quantize_per_tensor(
        fake_quant_float64(lm.quantized_model, *example).float(), qp.s, qp.zp, qp.qmin, qp.qmax,
        qp.dtype).numpy().astype(np.int64)
    diff = np.abs(ref - raw)
    row.update(max_step=int(diff.max()), differ=int((diff > 0).sum()), n=int(diff.size))
    held = tv_models.held_out(size=size)
    with torch.no_grad():
        row["sqnr"] = round(sqnr(torch.cat([model(*x) for x in held]),
                                 torch.cat([lm.run(*x)[0] for x in held])), 2)
    return row


def _theirs(name: str, size: int) -> dict:
    torch, tv_models = _setup(size)
    from bench_lowering import sqnr, theirs

    model, example, calibration = tv_models.build(name, size=size)
    try:
        _, dt, run = theirs(model, example, calibration)
    except Exception as e:  # noqa: BLE001 - the peer's failure is a result here
        return {"whole": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
    held = tv_models.held_out(size=size)
    with torch.no_grad():
        s = sqnr(torch.cat([model(*x) for x in held]), torch.cat([run(x[0]) for x in held]))
    return {"whole": True, "seconds": round(dt, 1), "sqnr": round(s, 2)}


def cell(name: str, size: int, which: str) -> dict:
    """One probe cell, in this process."""
    if which == "et-INT":
        return _theirs(name, size)
    return _ours(name, size, which.split("-")[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:  # the child: one cell, one JSON object
        print(json.dumps(cell(a.models[0], a.size, a.cells)), flush=True)
        return
    for name in a.models:
        size = max(a.size, MIN_SIZE.get(name, 0))
        for which in a.cells.split(","):
            cmd = [sys.executable, __file__, name, "--size", str(size), "--cells", which, "--one"]
            t = time.perf_counter()
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                                      env={**os.environ, "OMP_NUM_THREADS": "1"})
                lines = done.stdout.strip().splitlines()
                row = json.loads(lines[-1]) if done.returncode == 0 and lines else {
                    "whole": False, "error": done.stderr.strip().splitlines()[-1:] }
            except subprocess.TimeoutExpired:
                row = {"whole": False, "error": f"timeout {a.timeout:.0f}s"}
            row.update(model=name, cell=which, size=size, wall=round(time.perf_counter() - t, 1))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
