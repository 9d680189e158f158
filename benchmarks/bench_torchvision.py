"""torchvision classifiers: our lowering vs ExecuTorch's Arm backend, same models, same run.

For each model of ``tests/lowering/tv_models.py`` (random weights, 96x96, the same calibration
for both flows): INT8 SQNR vs the float model on held-out inputs (ours / theirs), lowering time
ratio ours/theirs, the share of output elements within one step of PyTorch's float32
fake-quant model (each flow against its own), TOSA operator counts, and Vela cycles of our
graph on Ethos-U55-128 and U85-256.

    python benchmarks/bench_torchvision.py [--models m1,m2] [--size 64] [--no-vela] [model ...]

``--models`` (or positional names) takes any torchvision classifier; ``--size`` overrides the
input size (default: 96, or the size ``tv_models.MORE_MODELS`` gives). A model ExecuTorch does
not delegate whole prints its error and NaN in its columns.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
from bench_lowering import ours, sqnr, theirs  # noqa: E402 - benchmarks/ is on sys.path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lowering"))
import tv_models  # noqa: E402

from ethosu.compiler import compile_tosa  # noqa: E402
from lowering.serialize import read_tosa_ops  # noqa: E402

torch.set_num_threads(1)


def _within_one_step(run, quantized, example, qp_out) -> float:
    """Share of output elements within one output step of the float32 fake-quant model."""
    with torch.no_grad():
        ref = quantized(*example)
    out = run(example[0])
    return float(((ref - out).abs() <= qp_out * 1.0001).float().mean())


def _theirs_or_nan(model, example, calibration):
    """ExecuTorch's ``(tosa, seconds, run)``, or ``(None, nan, None)`` with its error printed."""
    try:
        return theirs(model, example, calibration)
    except Exception as e:  # noqa: BLE001 - the peer's failure is a result here
        print(f"  ExecuTorch: {type(e).__name__}: {str(e)[:200]}", flush=True)
        return None, float("nan"), None


def main(names, size: int | None = None, vela: bool = True) -> None:
    """Print one row per model (see the module docstring)."""
    rows = []
    for name in names:
        model, example, calibration = tv_models.build(name, size=size)
        held_out = tv_models.held_out(size=example[0].shape[-1])
        t_ours, dt_o, run_o = ours(model, example, calibration)
        import lowering

        lm = lowering.lower(model, example, profile="INT", calibration=calibration)
        t_theirs, dt_t, run_t = _theirs_or_nan(model, example, calibration)
        with torch.no_grad():
            ref = torch.cat([model(*x) for x in held_out])
            s_o = sqnr(ref, torch.cat([run_o(x[0]) for x in held_out]))
            s_t = sqnr(ref, torch.cat([run_t(x[0]) for x in held_out])) if run_t else float("nan")
        one_o = _within_one_step(run_o, lm.quantized_model, example, lm.output_qparams[0].s)
        cycles = {t: compile_tosa(t_ours, t, layers=False, isolate=True).cycles if vela else 0
                  for t in ("ethos-u55-128", "ethos-u85-256")}
        rows.append((name, s_o, s_t, dt_o / dt_t, one_o, len(read_tosa_ops(t_ours)),
                     len(read_tosa_ops(t_theirs)) if t_theirs else 0, cycles))
        print(f"{name}: SQNR ours {s_o:.1f} dB theirs {s_t:.1f} dB, time ratio {dt_o / dt_t:.2f}, "
              f"ops {rows[-1][5]}/{rows[-1][6]}, cycles {cycles}", flush=True)
    print("\nmodel                 SQNR dB held-out   time     within 1 step   TOSA ops   "
          "Vela cycles (ours)")
    print("                        ours  theirs   ours/ET   (ours, f32 FQ)  ours/ET    "
          "U55-128     U85-256")
    for name, s_o, s_t, r, one, n_o, n_t, cyc in rows:
        print(f"{name:20s} {s_o:7.1f} {s_t:7.1f} {r:9.2f} {100 * one:14.1f}%  {n_o:5d}/{n_t:<5d}"
              f" {cyc['ethos-u55-128']:11,d} {cyc['ethos-u85-256']:11,d}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--models", default="", help="comma-separated torchvision model names")
    ap.add_argument("--size", type=int, default=None, help="input height and width")
    ap.add_argument("--no-vela", action="store_true", help="skip the Vela cycle columns")
    a = ap.parse_args()
    picked = [*a.names, *filter(None, a.models.split(","))] or list(tv_models.MODELS)
    main(picked, a.size, not a.no_vela)
