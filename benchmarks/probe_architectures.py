"""Survey: standard architectures nobody here wrote through our lowering, INT and FP, as a table.

Models: the small builds of ``tests/lowering/arch_models.py`` (torchvision segmentation,
HuggingFace tiny configs, keyword-spotting / audio nets, RNNs, decoders, masked attention), of
``tests/lowering/quirk_models.py`` (more HF tiny configs, torchvision video / detection
backbones, user-code quirks; ``--quirks`` for all of them) and any torchvision classifier as
``tv:NAME`` (``tv_models.build`` at ``--size``). Profiles INT (int8), INT16 (a16w8) and FP. One
subprocess per model and profile (a crash or a timeout costs one cell); e.g.::

    OMP_NUM_THREADS=1 python benchmarks/probe_architectures.py --all tv:resnext50_32x4d
    OMP_NUM_THREADS=1 python benchmarks/probe_architectures.py --quirks --profiles INT,INT16,FP

Per cell: fully lowered? (partitions, CPU nodes and the first reasons), or REFUSED with
lower()'s one-line LoweringError (an ERROR is anything else: a traceback is a defect); INT:
steps between every TOSA output and the fake-quant model evaluated in float64 (0 = bit-exact;
integer outputs such as argmax must be equal), FP: max error over each float output's scale (``ok`` at atol 1e-4 x scale, rtol 1e-3, as ``test_torchvision``
judges). No timings are printed: this measures coverage, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _models(name: str, size: int):
    """``(model, example, calibration)`` of ``name`` (``tv:NAME`` or an arch_models key)."""
    import torch

    torch.set_num_threads(1)
    sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "lowering")]
    import arch_models
    import quirk_models
    import tv_models

    if name.startswith("tv:"):
        return tv_models.build(name[3:], size=size)
    if name in quirk_models.BUILDERS:
        return quirk_models.build(name)
    return arch_models.build(name)


def cell(name: str, size: int, profile: str) -> dict:
    """One survey cell (model ``name``, ``profile``), in this process."""
    import lowering
    from lowering.errors import LoweringError
    from lowering.quantizer import QuantConfig

    model, example, calibration = _models(name, size)
    from lowering_checks import judge_fp, judge_int  # tests/lowering, on sys.path (_models)
    quant = QuantConfig.int16() if profile == "INT16" else None
    try:
        lm = lowering.lower(model, example, profile="FP" if profile == "FP" else "INT",
                            calibration=calibration, quantization=quant)
    except LoweringError as e:  # the clean refusal: one line naming the cause
        return {"whole": False, "refused": str(e)[:200]}
    row = {"whole": lm.tosa is not None and not lm.cpu_nodes, "parts": len(lm.partitions),
           "cpu": [f"{c.node} ({c.target}): {c.reason}"[:150] for c in lm.cpu_nodes[:3]],
           "n_cpu": len(lm.cpu_nodes)}
    if lm.tosa is None:
        return row
    row.update(judge_int(lm, example) if profile != "FP" else judge_fp(lm, model, example))
    return row


def peer_cell(name: str, size: int, profile: str) -> dict:
    """ExecuTorch's Arm TOSA backend on the same model (INT: its own TOSAQuantizer on the same
    calibration): how many delegated graphs, and which ops it leaves outside them."""
    from collections import Counter

    model, example, calibration = _models(name, size)  # puts benchmarks/ on sys.path
    from _peer import executorch_edge

    edge, _ = executorch_edge(model, example, profile, calibration)
    nodes = [n for n in edge.exported_program().graph_module.graph.nodes
             if n.op == "call_function"]
    left = Counter(str(getattr(n.target, "__name__", n.target)) for n in nodes
                   if "delegate" not in str(n.target) and "getitem" not in str(n.target)
                   and "quantize" not in str(n.target))
    return {"whole": not left, "parts": sum("delegate" in str(n.target) for n in nodes),
            "n_cpu": sum(left.values()), "cpu": [f"{k} x{v}" for k, v in left.most_common(3)]}


def _run_child(name: str, size: int, profile: str, timeout: float, peer: bool = False) -> dict:
    cmd = [sys.executable, __file__, name, "--size", str(size), "--profiles", profile, "--one",
           *(["--peer"] if peer else [])]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        return {"whole": False, "error": f"timeout {timeout:.0f}s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"whole": False, "error": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}


def _verdict(row: dict) -> str:
    if "error" in row:
        return "ERROR " + row["error"]
    if "refused" in row:
        return "REFUSED " + row["refused"]
    if not row["whole"]:
        return f"PARTIAL {row['parts']} parts, {row['n_cpu']} cpu: " + "; ".join(row["cpu"][:1])
    if "max_step" not in row and "rel_err" not in row:  # the peer's row: coverage only
        return "whole (delegated)"
    if "max_step" in row:
        return ("exact" if row["ok"] else f"WRONG {row['differ']}/{row['n']} off, "
                f"max {row['max_step']} steps") + f" ({row['levels']} levels)"
    if row.get("zero_reference"):
        return ("zeros as torch (all-zero output: proves little)" if row["max_abs"] == 0
                else f"WRONG: torch's output is all zeros, ours max abs {row['max_abs']:.1e}")
    return ("ok" if row["ok"] else "WRONG") + f" rel_err {row['rel_err']:.1e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--all", action="store_true", help="every arch_models entry too")
    ap.add_argument("--quirks", action="store_true", help="every quirk_models entry too")
    ap.add_argument("--size", type=int, default=64, help="torchvision input height and width")
    ap.add_argument("--profiles", default="INT,FP")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--jsonl", help="also write one JSON line per cell here")
    ap.add_argument("--peer", action="store_true",
                    help="also ExecuTorch's Arm TOSA backend per cell (INT, FP): delegated whole?")
    ap.add_argument("--peer-only", action="store_true", help="only ExecuTorch's rows")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:  # the child: one cell, one JSON object
        one = peer_cell if a.peer else cell
        print(json.dumps(one(a.models[0], a.size, a.profiles)), flush=True)
        return
    names = list(a.models)
    if a.all:
        sys.path.insert(0, str(HERE.parent / "tests" / "lowering"))
        import arch_models

        names = [*arch_models.BUILDERS, *names]
    if a.quirks:
        sys.path.insert(0, str(HERE.parent / "tests" / "lowering"))
        import quirk_models

        names = [*quirk_models.BUILDERS, *names]
    out = open(a.jsonl, "a") if a.jsonl else None  # noqa: SIM115 - open for the whole run
    print(f"{'model':32} {'profile':7} verdict")
    for name in names:
        for profile in a.profiles.split(","):
            rows = [] if a.peer_only else [("", _run_child(name, a.size, profile, a.timeout))]
            if (a.peer or a.peer_only) and profile != "INT16":
                rows.append((" ET", _run_child(name, a.size, profile, a.timeout, peer=True)))
            for who, row in rows:
                print(f"{name:32} {profile + who:7} {_verdict(row)}", flush=True)
                if out:
                    out.write(json.dumps({"model": name, "profile": profile + who, **row}) + "\n")
                    out.flush()


if __name__ == "__main__":
    main()
