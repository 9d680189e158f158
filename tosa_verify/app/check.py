"""``tosa-verify check [MODEL]``: the whole flow on one model, with gates for CI.

MODEL is ``path/file.py:factory``, ``package.module:factory`` or the name of a built-in model of
``lowering.zoo`` (default: the digits CNN); the factory returns ``(module, example_inputs)`` or
``(module, example_inputs, calibration)``. The steps, each timed on stderr:

1. quantize and lower (``lowering.lower``)
2. validate: run the numpy interpreter once (a spec ERROR_IF is an error, exit 2)
3. interpreter vs reference model, operator by operator (``tosa_verify.diff``)
4. drift vs float (``tosa_verify.drift``)
5. Vela compile for each ``--target`` (default ethos-u55-128)
6. golden compare (``--golden DIR``; ``--update-golden`` records it)
7. report: terminal summary, ``--report report.html``, ``--json report.json``

Exit codes: 0 all gates pass, 1 a gate failed, 2 an error (model file that does not import,
lowering error, invalid graph, bad option). Gates: interpreter == reference model, Vela
compiles, ``--min-sqnr DB`` (every graph output's SQNR vs float), ``--max-lsb N`` (every graph
output's max difference from the fake-quant model, in quantization steps), the golden diff
(``--max-cycles-increase PCT`` feeds its performance gate).

Application layer: this module joins ``lowering``, ``ethosu``, ``vgf`` and ``golden`` and imports
them at module level (``docs/ARCHITECTURE.md``); ``tosa-verify check`` imports it when the verb
runs, not to build the parser.

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="tosa-verify check")
>>> add_check_arguments(parser)
>>> args = parser.parse_args(["lowering.zoo:mlp", "--min-sqnr", "25"])
>>> check_main(args)          # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import lowering
import vgf
from ethosu.compiler import EthosUConfigError, VelaCompileError, compile_tosa, resolve_config
from golden import GoldenMissingError, GoldenStore, Thresholds
from golden import diff as golden_diff
from golden.record import record_lowered, seeded_inputs
from golden.store import GoldenError, tool_versions
from lowering.threads import torch_threads

from ..compare import _stats as sqnr_and_cosine
from ..diff import diff, random_inputs
from ..drift import drift
from ..errors import TosaError
from ..interpreter import run
from ..report import Gate, format_summary, write_html
from .args import DEFAULT_TARGET, VGF_TARGET, add_check_arguments
from .models import (
    STEPS,
    CheckError,
    LoadedModel,
    _one_line,
    _Progress,
    _quiet,
    load_model,
    lowered_operator_text,
    quant_config_from_args,
)

__all__ = ["check_main", "main"]

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


@dataclass
class _State:
    model: LoadedModel | None = None
    lowered: Any = None
    tosa_inputs: list[Any] = field(default_factory=list)
    captured: dict[str, Any] = field(default_factory=dict)
    diff: Any = None
    drift: Any = None
    programs: list[Any] = field(default_factory=list)
    golden_report: Any = None
    vgf: list[Any] = field(default_factory=list)
    golden_note: str = ""
    gates: list[Gate] = field(default_factory=list)
    parts: list[Any] = field(default_factory=list)
    whole_model: str = ""  #: a partly lowered model's end-to-end accuracy (whole_model_accuracy)


def check_main(args: argparse.Namespace) -> int:
    """Run the check described by ``args`` (see :func:`add_check_arguments`); return the exit code.

    >>> check_main(parser.parse_args(["lowering.zoo:digits_cnn", "--report", "r.html"]))   # doctest: +SKIP
    0
    """
    stderr = sys.stderr
    try:
        with torch_threads(getattr(args, "threads", None)):
            state = _run(args, _Progress(stderr))
    except (CheckError, TosaError) as exc:
        return _error_exit(args, str(exc))
    except KeyboardInterrupt:
        print("tosa-verify check: interrupted", file=stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        if os.environ.get("TOSA_VERIFY_DEBUG"):
            raise
        return _error_exit(args, _one_line(exc))
    return EXIT_FAIL if any(not g.passed for g in state.gates) else EXIT_OK


def _error_exit(args: argparse.Namespace, message: str) -> int:
    """Print the one-line error; with ``--report``, write a report that says it (a CI job that
    publishes the report finds one on every run)."""
    print(f"tosa-verify check: error: {message}", file=sys.stderr)
    if getattr(args, "report", None):
        try:
            write_html(args.report, gates=[Gate("check ran", False, message)],
                       title=f"tosa-verify check: {args.model or 'digits_cnn'} ({args.profile}): error")
        except OSError as exc:
            print(f"tosa-verify check: error: cannot write {args.report}: {exc}", file=sys.stderr)
    return EXIT_ERROR


def _run(args: argparse.Namespace, progress: _Progress) -> _State:
    st = _State()
    targets, use_vgf = _targets(args)

    # 1. quantize and lower
    with progress.step(1, STEPS[0]) as info, _quiet(stderr=True):
        st.model = load_model(args.model)
        try:
            st.lowered = lowering.lower(st.model.module, st.model.example_inputs, profile=args.profile,
                                        quantization=quant_config_from_args(args),
                                        calibration=st.model.calibration, threads=args.threads)
        except lowering.LoweringError as exc:
            raise CheckError(f"lowering failed: {exc}") from None
        info["note"] = f"{st.model.name}, {lowered_operator_text(st.lowered)}"
    if st.lowered.tosa is None:
        return _check_partitions(st, args, progress, targets, use_vgf)
    st.gates.append(Gate("fully lowered", True, "one TOSA graph"))

    # 2. validate
    with progress.step(2, STEPS[1]), _quiet():
        st.tosa_inputs = list(st.lowered.quantize_inputs(*st.model.example_inputs))
        result = run(st.lowered.tosa, st.tosa_inputs, capture=True)
        st.captured = result.tensors

    # 3. interpreter vs reference model
    with progress.step(3, STEPS[2]) as info:
        st.diff = diff(st.lowered.tosa, st.tosa_inputs)
        if st.diff.ok:
            st.gates.append(Gate("interpreter == reference model", True, f"{len(st.diff.ops)} operators agree"))
        else:
            first = st.diff.first_divergence
            detail = st.diff.error or (f"first divergence at operator {first.index} {first.op}" if first else "mismatch")
            st.gates.append(Gate("interpreter == reference model", False, detail))
        info["note"] = "agree" if st.diff.ok else "DIVERGE"

    # VGF runs before drift, whose executor attribution gets a VGF column
    vgf_tensors = _vgf_step(st, progress, [st.lowered.tosa], [st.tosa_inputs]) if use_vgf else None

    # 4. drift
    with progress.step(4, STEPS[3]) as info, _quiet():
        travel = None if args.rounding_travel is not None and args.rounding_travel < 0 else args.rounding_travel
        st.drift = drift(st.lowered, st.model.example_inputs,
                                     reference=st.diff.expected if st.diff.expected else True,
                                     captured=st.captured, rounding_travel=travel,
                                     executors={"VGF": vgf_tensors} if vgf_tensors else None)
        outs = st.drift.output_rows
        worst = min((r.total.sqnr_db for r in outs if r.total), default=float("nan"))
        info["note"] = f"output SQNR {worst:.1f} dB"
    _drift_gates(st, args)

    # 5. Vela
    _vela_step(st, progress, args, targets, [st.lowered.tosa], partitions=False)

    # 6. golden
    if args.golden:
        with progress.step(6, STEPS[5]) as info, _quiet():
            _golden(st, args, info)
    else:
        progress.skip(6, STEPS[5], "no --golden")

    # 7. report
    with progress.step(7, STEPS[6]) as info:
        meta = _meta(st, args, progress)
        if args.report:
            path = write_html(args.report, drift=st.drift, programs=st.programs, diff=st.diff,
                              golden=st.golden_report, gates=st.gates,
                              title=f"tosa-verify check: {st.model.name} ({args.profile})", meta=meta)
            info["note"] = f"wrote {path}"
        if args.json:
            _write_json(args.json, st, meta)
    # the summary comes after the progress lines, so the table ends the output
    print(format_summary(st.drift, programs=st.programs, diff=st.diff, golden=st.golden_report,
                         gates=st.gates))
    return st


def _targets(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The Ethos-U targets to compile for and whether VGF runs; bad options raise CheckError."""
    if args.max_cycles_increase is not None and not args.golden:
        raise CheckError("--max-cycles-increase compares against a golden: give --golden DIR")
    if args.update_golden and not args.golden:
        raise CheckError("--update-golden needs --golden DIR")
    # Vela compiles integer TOSA only: an FP graph skips the step instead of failing it
    targets = [] if args.no_vela or args.profile == "FP" else (args.target or [DEFAULT_TARGET])
    use_vgf = any(str(t).lower() == VGF_TARGET for t in args.target or [])
    targets = [t for t in targets if str(t).lower() != VGF_TARGET]
    for t in targets:
        try:
            resolve_config(t, None, None, None)
        except EthosUConfigError as exc:
            raise CheckError(str(exc)) from None
    return targets, use_vgf


def _drift_gates(st: _State, args: argparse.Namespace, outs: Sequence[Any] | None = None) -> None:
    """The min-sqnr and max-lsb gates over ``outs`` (default: the graph's output rows)."""
    outs = st.drift.output_rows if outs is None else outs
    if args.min_sqnr is not None:
        vals = [(r.tensor, r.total.sqnr_db) for r in outs if r.total]
        bad = [(n, v) for n, v in vals if not v >= args.min_sqnr]
        shown = ", ".join(f"{n} {v:.1f} dB" for n, v in vals) or "no float reference for the outputs"
        st.gates.append(Gate("min-sqnr", bool(vals) and not bad, f"{shown} (gate >= {args.min_sqnr:g} dB)"))
    if args.max_lsb is not None:
        vals = [(r.tensor, r.lowering.max_steps) for r in outs if r.lowering and r.lowering.max_steps is not None]
        bad = [(n, v) for n, v in vals if not v <= args.max_lsb]
        shown = ", ".join(f"{n} {v:g} LSB" for n, v in vals) or "no quantized outputs"
        st.gates.append(Gate("max-lsb", bool(vals) and not bad,
                             f"TOSA vs fake-quant: {shown} (gate <= {args.max_lsb:g})"))


def _golden(st: _State, args: argparse.Namespace, info: dict[str, str]) -> None:
    gate, st.golden_report, info["note"] = _golden_case(args, f"{args.case or st.model.name}/{args.profile}",
                                                        st.lowered, st.programs, st.model)
    st.gates.append(gate)


def _golden_case(args: argparse.Namespace, case: str, lowered: Any, programs: Sequence[Any],
                 model: LoadedModel) -> tuple[Gate, Any, str]:
    """Record or compare the golden ``case`` of one TOSA graph: (gate, diff report, step note).

    A missing golden fails the gate and says how to record it: a first run records only when
    asked (``--update-golden``), so a typo in ``--golden`` or ``--case`` cannot pass silently.
    """
    store = GoldenStore(args.golden)
    try:
        seen = store.version(case)  # a writer that replaces it meanwhile makes our update fail, not win
    except GoldenError as exc:
        raise CheckError(str(exc)) from None
    new = record_lowered(lowered, seeded_inputs(model.example_inputs, args.seed), programs=programs,
                         model=model.module, seed=args.seed, quantization=quant_config_from_args(args))
    try:
        if args.update_golden:
            path = store.write(case, new, update=True, expected=seen)
            return Gate("golden", True, f"recorded {case} in {path}"), None, f"recorded {case}"
        old = store.read(case)
    except GoldenMissingError:
        return (Gate("golden", False, f"no golden recorded for {case!r} in {store.root}; record it "
                                      "first: run again with --update-golden"), None,
                "missing: record it with --update-golden")
    except GoldenError as exc:
        raise CheckError(str(exc)) from None
    thresholds = Thresholds.from_options(max_cycles_increase_pct=args.max_cycles_increase)
    report = golden_diff(old, new, thresholds, case=case)
    status = report.cases[0].status if report.cases else "identical"
    return Gate("golden", not report.failed, f"{case}: {status}"), report, status


@dataclass
class _Part:
    """One TOSA partition of a partly lowered model and what the check found for it."""

    name: str
    lowered: Any
    inputs: list[Any]
    real_inputs: bool
    captured: dict[str, Any] = field(default_factory=dict)
    diff: Any = None
    drift: Any = None
    programs: list[Any] = field(default_factory=list)
    golden_report: Any = None


def _check_partitions(st: _State, args: argparse.Namespace, progress: _Progress,
                      targets: Sequence[str], use_vgf: bool = False) -> _State:
    """A model split around CPU nodes: every step runs per TOSA partition.

    Each partition takes the values PyTorch computes for its inputs from the example inputs
    (``LoweredModel.partition_models``; seeded random inputs if that fails), is validated,
    cross-checked op by op, analysed for drift, run on VGF (``use_vgf``), compiled, and has its
    own golden case ``NAME/PROFILE/tosa_N``; the report has a section per partition and the CPU
    nodes. The "fully lowered" gate fails unless ``--allow-cpu``.
    """
    cpu = st.lowered.cpu_nodes
    first = f"; first: {cpu[0].node} ({cpu[0].target}): {cpu[0].reason}" if cpu else ""
    parts: list[_Part] = []
    for pm in st.lowered.partition_models():
        try:
            parts.append(_Part(pm.partition, pm, list(pm.quantize_inputs(*st.model.example_inputs)), True))
        except Exception:  # noqa: BLE001 - the partition is still checked, on random inputs
            parts.append(_Part(pm.partition, pm, random_inputs(pm.tosa, args.seed), False))
    st.parts = parts
    st.gates.append(Gate("fully lowered", bool(args.allow_cpu),
                         f"{len(parts)} TOSA partition(s), {len(cpu)} node(s) left on the CPU{first}"))
    with progress.step(2, STEPS[1] + f" ({len(parts)} partitions)"), _quiet():
        for p in parts:
            p.captured = run(p.lowered.tosa, p.inputs, capture=True).tensors
    with progress.step(3, STEPS[2]) as info:
        diverging = []
        for p in parts:
            p.diff = diff(p.lowered.tosa, p.inputs)
            if not p.diff.ok:
                at = p.diff.first_divergence
                diverging.append(f"{p.name}: " + (p.diff.error or (f"operator {at.index} {at.op}" if at else "mismatch")))
        random = [p.name for p in parts if not p.real_inputs]
        on = f" (random inputs, seed {args.seed}: {', '.join(random)})" if random else ""
        st.gates.append(Gate("interpreter == reference model", not diverging,
                             "; ".join(diverging) or f"every operator of {len(parts)} partitions agrees{on}"))
        info["note"] = "agree" if not diverging else "DIVERGE"
    if use_vgf:
        _vgf_step(st, progress, [p.lowered.tosa for p in parts], [p.inputs for p in parts])
    measured = [p for p in parts if p.real_inputs]
    if measured:
        with progress.step(4, STEPS[3] + f" ({len(measured)} partitions)") as info, _quiet():
            travel = None if args.rounding_travel is not None and args.rounding_travel < 0 else args.rounding_travel
            for p in measured:
                p.drift = drift(p.lowered, st.model.example_inputs,
                                            reference=p.diff.expected if p.diff.expected else True,
                                            captured=p.captured, rounding_travel=travel)
            info["note"] = ", ".join(
                f"{p.name} output SQNR {min((r.total.sqnr_db for r in p.drift.output_rows if r.total), default=float('nan')):.1f} dB"
                for p in measured)
        _drift_gates(st, args, [r for p in measured for r in p.drift.output_rows])
    else:
        progress.skip(4, STEPS[3], "no partition's inputs could be computed in PyTorch")
    with progress.step(4, "whole model: TOSA partitions + CPU nodes vs float") as info, _quiet():
        sqnr, st.whole_model = whole_model_accuracy(st.lowered, st.model)
        info["note"] = st.whole_model
        if args.min_sqnr is not None and sqnr is not None:
            st.gates.append(Gate("min-sqnr whole model", sqnr >= args.min_sqnr,
                                 f"{st.whole_model} (gate >= {args.min_sqnr:g} dB)"))
    _vela_step(st, progress, args, targets, [p.lowered.tosa for p in parts], partitions=True,
               keep=[p.programs for p in parts])
    if args.golden:
        with progress.step(6, STEPS[5] + f" ({len(measured)} partitions)") as info, _quiet():
            notes = []
            for p in measured:
                gate, p.golden_report, note = _golden_case(
                    args, f"{args.case or st.model.name}/{args.profile}/{p.name}", p.lowered, p.programs, st.model)
                st.gates.append(Gate(f"golden {p.name}", gate.passed, gate.detail))
                notes.append(f"{p.name}: {note}")
            info["note"] = ", ".join(notes)
    else:
        progress.skip(6, STEPS[5], "no --golden")
    _partitions_report(st, args, progress, parts, cpu)
    return st



def whole_model_accuracy(lowered: Any, model: LoadedModel) -> tuple[float | None, str]:
    """A partly lowered model run whole (``LoweredModel.run``: its TOSA partitions on the
    reference model, its CPU nodes in PyTorch) against the float model on the example inputs:
    the SQNR over its float outputs (None when it has none or could not be run) and a line
    saying it (integer outputs: how many elements differ), or why it could not be run.

    >>> whole_model_accuracy(lowering.lower(m, x), LoadedModel("m", m, x))   # doctest: +SKIP
    (38.4, 'SQNR 38.4 dB, max abs 0.0123 over 1 output')
    """
    import torch

    try:
        with torch.no_grad():
            got = lowered.run(*model.example_inputs)
            want = [t for t in torch.utils._pytree.tree_leaves(model.module(*model.example_inputs))
                    if isinstance(t, torch.Tensor)]
    except Exception as exc:  # noqa: BLE001 - reported, the partitions were checked one by one
        return None, f"not run ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    if len(got) != len(want):
        return None, f"not compared: {len(got)} outputs against the float model's {len(want)}"
    floats = [(g, w) for g, w in zip(got, want, strict=True) if w.is_floating_point()]
    parts, sqnr = [], None
    if floats:
        expected = np.concatenate([w.double().reshape(-1).numpy() for _, w in floats])
        actual = np.concatenate([g.double().reshape(-1).numpy() for g, _ in floats])
        sqnr, _ = sqnr_and_cosine(expected, actual)
        parts.append(f"SQNR {sqnr:.1f} dB, max abs {float(np.max(np.abs(actual - expected), initial=0)):.3g}")
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not w.is_floating_point():
            parts.append(f"integer output {i}: {int((g.to(w.dtype) != w).sum())} of {w.numel()} differ")
    return sqnr, ", ".join(parts) + f" over {len(want)} output{'s' if len(want) != 1 else ''}"


def _partitions_report(st: _State, args: argparse.Namespace, progress: _Progress,
                       parts: Sequence[_Part], cpu: Sequence[Any]) -> None:
    """Step 7 of a partly lowered model: HTML/JSON reports and the summary, a section per partition."""
    with progress.step(7, STEPS[6]) as info:
        meta = _meta(st, args, progress)
        if args.report:
            path = write_html(args.report, gates=st.gates, meta=meta, cpu_nodes=cpu,
                              partitions=[(f"{p.name}: {', '.join(p.lowered.partitions[0].nodes)}", p.drift,
                                           p.programs, p.diff, p.golden_report) for p in parts],
                              title=f"tosa-verify check: {st.model.name} ({args.profile}, "
                                    f"{len(parts)} TOSA partitions)")
            info["note"] = f"wrote {path}"
        if args.json:
            _write_json(args.json, st, meta)
    lines = []
    for p in parts:
        lines.append(f"== partition {p.name} ({', '.join(p.lowered.partitions[0].nodes)}) ==")
        lines.append(format_summary(p.drift, programs=p.programs, diff=p.diff, golden=p.golden_report))
        lines.append("")
    lines += ["nodes left on the CPU:"] + [f"  {c.node} ({c.target}): {c.reason}" for c in cpu]
    lines += ["", f"whole model (TOSA partitions on the reference model, CPU nodes in PyTorch) vs float: "
                  f"{st.whole_model}"]
    print("\n".join(lines) + "\n" + format_summary(gates=st.gates))


def _vela_step(st: _State, progress: _Progress, args: argparse.Namespace, targets: Sequence[str],
               graphs: Sequence[bytes], *, partitions: bool, keep: Sequence[list[Any]] = ()) -> None:
    """Step 5: compile every graph for every target, one gate per target with the cycles summed.

    Vela runs in a child process: a Vela crash must not end check. The programs of a model
    lowered whole go to ``st.programs``; of partitions, to ``keep[i]`` for graph ``i``.
    """
    if not targets:
        progress.skip(5, STEPS[4], _no_vela_reason(args))
        return
    with progress.step(5, STEPS[4] + f" ({', '.join(targets)})") as info:
        notes = []
        for t in targets:
            try:
                programs = [compile_tosa(g, t, isolate=True) for g in graphs]
            except VelaCompileError as exc:
                st.gates.append(Gate(f"Vela compiles for {t}", False, str(exc).splitlines()[0]))
                continue
            cycles = sum(p.cycles for p in programs)
            over = f" over {len(graphs)} partitions" if partitions else ""
            st.gates.append(Gate(f"Vela compiles for {t}", True, f"{cycles:,} cycles{over}"))
            notes.append(f"{t}: {cycles:,} cycles")
            if not partitions:
                st.programs.extend(programs)
            for kept, program in zip(keep, programs, strict=False):
                kept.append(program)
        info["note"] = ", ".join(notes)


def _vgf_step(st: _State, progress: _Progress, graphs: Sequence[bytes],
              inputs: Sequence[Any]) -> dict[str, Any] | None:
    """``--target vgf``: compile each graph to VGF, run it, gate on agreement with the interpreter.

    Agreement is :func:`vgf.check_agreement`: the deployed program's outputs equal the
    interpreter's (INT) and every operator agrees op by op (FP: within compliance on its own
    inputs). Returns the VGF tensors of a single graph (for drift's VGF column), else None.
    """
    ok, reason = vgf.available()
    if not ok:
        raise CheckError(f"--target vgf: {reason}")
    with progress.step(5, "VGF compile and run") as info:
        results = []
        for graph, values in zip(graphs, inputs, strict=True):
            try:
                results.append(vgf.check_agreement(graph, values))
            except vgf.VgfError as exc:
                st.gates.append(Gate("VGF == interpreter", False, str(exc)))
                info["note"] = "VGF failed"
                return None
        bad = [r.detail for r in results if not r.ok]
        detail = "; ".join(bad) or "; ".join(r.detail for r in results)
        st.gates.append(Gate("VGF == interpreter", not bad, detail))
        st.vgf = results
        info["note"] = "agree" if not bad else "DIVERGE"
    return results[0].tensors if len(results) == 1 else None


def _no_vela_reason(args: argparse.Namespace) -> str:
    if args.profile == "FP" and not args.no_vela:
        return "Vela compiles INT-profile TOSA only"
    return "--no-vela" if args.no_vela else "no Ethos-U --target"


def _meta(st: _State, args: argparse.Namespace, progress: _Progress) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "model": st.model.source if st.model else "",
        "profile": args.profile,
        "targets": ", ".join(p.target for p in st.programs) or "-",
        "TOSA operators": ", ".join(f"{k} {v}" for k, v in sorted((getattr(st.lowered, "op_counts", {}) or {}).items())),
        "step times": ", ".join(f"{k} {v:.1f} s" for k, v in progress.times.items()),
    }
    if st.whole_model:
        meta["whole model vs float (partitions on TOSA, CPU nodes in PyTorch)"] = st.whole_model
    meta.update({f"version {k}": v for k, v in tool_versions().items()})
    return meta


def _write_json(path: str, st: _State, meta: dict[str, Any]) -> None:
    data = {
        "meta": meta,
        "gates": [{"name": g.name, "passed": g.passed, "detail": g.detail} for g in st.gates],
        "passed": all(g.passed for g in st.gates),
        "drift": st.drift.to_dict() if st.drift is not None else None,
        "diff_ok": st.diff.ok if st.diff is not None else None,
        "vela": {p.target: p.to_dict(layers=False) for p in st.programs},
        "vgf": [r.to_dict() for r in st.vgf],
        "golden": json.loads(st.golden_report.to_json()) if st.golden_report is not None else None,
        "whole_model": st.whole_model or None,
        "cpu_nodes": [{"node": c.node, "target": c.target, "reason": c.reason}
                      for c in (getattr(st.lowered, "cpu_nodes", None) or [])],
        "partitions": [{"name": p.name, "nodes": p.lowered.partitions[0].nodes, "real_inputs": p.real_inputs,
                        "diff_ok": p.diff.ok if p.diff is not None else None,
                        "drift": p.drift.to_dict() if p.drift is not None else None,
                        "vela": {v.target: v.to_dict(layers=False) for v in p.programs},
                        "golden": json.loads(p.golden_report.to_json()) if p.golden_report is not None else None}
                       for p in st.parts],
    }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, default=str))


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m tosa_verify.check``), same as ``tosa-verify check``."""
    parser = argparse.ArgumentParser(prog="tosa-verify check",
                                     description="Quantize, lower, verify, analyse drift, compile and "
                                                 "gate one model.")
    add_check_arguments(parser)
    return check_main(parser.parse_args(argv))
