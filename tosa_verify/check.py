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

This module is the one place in ``tosa_verify`` that joins ``lowering``, ``ethosu`` and ``golden``;
it imports them inside functions only.

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="tosa-verify check")
>>> add_check_arguments(parser)
>>> args = parser.parse_args(["lowering.zoo:mlp", "--min-sqnr", "25"])
>>> check_main(args)          # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import TosaError
from .report import Gate, format_summary, write_html

__all__ = ["CheckError", "LoadedModel", "add_check_arguments", "check_main", "load_model", "main"]

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
DEFAULT_TARGET = "ethos-u55-128"
VGF_TARGET = "vgf"
STEPS = (
    "quantize and lower",
    "validate (interpreter)",
    "interpreter vs reference model",
    "drift vs float",
    "Vela compile",
    "golden compare",
    "report",
)


class CheckError(Exception):
    """An error that ends the check with exit code 2 (one-line message)."""


@dataclass
class LoadedModel:
    """What a model factory returned, plus a name for goldens and reports."""

    name: str
    module: Any
    example_inputs: tuple[Any, ...]
    calibration: Any = None
    source: str = ""


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``check`` verb's arguments to ``parser``.

    >>> p = argparse.ArgumentParser(); add_check_arguments(p)
    >>> p.parse_args([]).target is None
    True
    """
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="path/file.py:factory, package.module:factory or a built-in model name "
                             "(lowering.zoo: digits_cnn, mobilenet_v2, ...); default: digits_cnn")
    parser.add_argument("--profile", choices=("INT", "FP"), default="INT", type=str.upper,
                        help="TOSA profile to lower to (default INT: int8 PT2E quantization)")
    add_quantization_arguments(parser)
    parser.add_argument("--target", action="append", default=None, metavar="TARGET",
                        help=f"Ethos-U target for Vela, repeatable (default {DEFAULT_TARGET}), or vgf: "
                             "compile to VGF and run it on a Vulkan device (INT and FP), gated on "
                             "agreement with the interpreter")
    parser.add_argument("--no-vela", action="store_true", help="skip the Vela compile step")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="a model split around CPU nodes passes the 'fully lowered' gate (each TOSA "
                             "partition is still validated, cross-checked and compiled)")
    parser.add_argument("--golden", metavar="DIR", help="golden store to compare against")
    parser.add_argument("--update-golden", action="store_true",
                        help="record (or replace) the golden in --golden instead of comparing")
    parser.add_argument("--case", metavar="NAME",
                        help="golden case name (default: the factory name); stored as NAME/PROFILE")
    parser.add_argument("--seed", type=int, default=0, help="seed of the golden's inputs (default 0)")
    parser.add_argument("--report", metavar="PATH.html", help="write the HTML report here")
    parser.add_argument("--json", metavar="PATH.json", help="write the machine-readable results here")
    parser.add_argument("--min-sqnr", type=float, metavar="DB",
                        help="gate: every graph output's SQNR vs the float model is at least DB")
    parser.add_argument("--max-lsb", type=float, metavar="N",
                        help="gate: every graph output differs from the fake-quant model by at most N "
                             "quantization steps")
    parser.add_argument("--max-cycles-increase", type=_percent, metavar="PCT",
                        help="gate (with --golden): Vela cycles may grow by at most PCT percent "
                             "(default 5)")
    parser.add_argument("--rounding-travel", type=int, default=8, metavar="N",
                        help="re-run the graph downstream for the N RESCALE/TABLE ops whose other "
                             "rounding changes most elements (default 8; -1: all)")


def add_quantization_arguments(parser: argparse.ArgumentParser) -> None:
    """The INT-profile quantization options shared by ``check`` and ``lower``.

    >>> p = argparse.ArgumentParser(); add_quantization_arguments(p)
    >>> p.parse_args(["--activations", "int16"]).activations
    'int16'
    """
    parser.add_argument("--activations", choices=("int8", "int16"), default="int8",
                        help="INT profile: activation dtype (int16 activations use int8 weights; "
                             "default int8)")
    parser.add_argument("--observer", choices=("histogram", "minmax"), default="histogram",
                        help="INT profile: calibration of activation ranges, histogram (L2-optimal "
                             "range, default) or minmax (observed extremes, never clips)")
    parser.add_argument("--per-tensor-weights", action="store_true",
                        help="INT profile: one weight scale per tensor instead of per output channel")


def quant_config_from_args(args: argparse.Namespace):
    """The ``lowering.QuantConfig`` the quantization options ask for (None for the FP profile).

    >>> p = argparse.ArgumentParser(); add_quantization_arguments(p)
    >>> ns = p.parse_args(["--activations", "int16", "--observer", "minmax"]); ns.profile = "INT"
    >>> cfg = quant_config_from_args(ns); str(cfg.activation_dtype), cfg.activation_observer
    ('torch.int16', 'minmax')
    """
    if getattr(args, "profile", "INT").upper() != "INT":
        return None
    import lowering

    per_channel = not args.per_tensor_weights
    if args.activations == "int16":
        return lowering.QuantConfig.int16(per_channel=per_channel, activation_observer=args.observer)
    return lowering.QuantConfig(per_channel=per_channel, activation_observer=args.observer)


def _percent(text: str) -> float:
    value = float(text.strip().rstrip("%"))
    if value < 0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}")
    return value


# --------------------------------------------------------------------------- model loading


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_model(spec: str | None) -> LoadedModel:
    """Import a model factory and call it. Raises :class:`CheckError` with a one-line message.

    >>> load_model("lowering.zoo:mlp").name
    'mlp'
    >>> load_model("nowhere/missing.py:build")
    Traceback (most recent call last):
    ...
    tosa_verify.check.CheckError: cannot import model 'nowhere/missing.py:build': no such file nowhere/missing.py
    """
    if spec is None or (":" not in spec and not spec.endswith(".py")):
        from lowering import zoo

        name = spec or "digits_cnn"
        if name not in zoo.MODELS:
            raise CheckError(f"unknown model {name!r}: give path/file.py:factory or package.module:factory "
                             f"(built-in: {', '.join(sorted(zoo.MODELS))})")
        factory: Callable[..., Any] = zoo.MODELS[name]
        return _call_factory(factory, name, f"lowering.zoo:{name}")
    where, _, attr = spec.rpartition(":")
    if not where:
        where, attr = spec, ""
    if not attr:
        raise CheckError(f"model {spec!r} names no factory: write {spec}:FACTORY")
    try:
        if where.endswith(".py") or os.sep in where or "/" in where:
            path = Path(where)
            if not path.is_file():
                raise CheckError(f"cannot import model {spec!r}: no such file {where}")
            mod_name = f"_tosa_verify_model_{abs(hash(str(path.resolve())))}"
            module_spec = importlib.util.spec_from_file_location(mod_name, path)
            if module_spec is None or module_spec.loader is None:
                raise CheckError(f"cannot import model {spec!r}: not a Python file")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[mod_name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except CheckError:
        raise
    except SyntaxError as exc:
        raise CheckError(f"cannot import model {spec!r}: SyntaxError: {exc.msg} "
                         f"({exc.filename}, line {exc.lineno})") from None
    except SystemExit as exc:  # a model file that exits must not end the check with its status
        raise CheckError(f"cannot import model {spec!r}: it called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001 - any import-time failure of user code
        raise CheckError(f"cannot import model {spec!r}: {_one_line(exc)}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise CheckError(f"cannot import model {spec!r}: {where} has no callable {attr!r}")
    return _call_factory(factory, attr, spec)


def _call_factory(factory: Callable[..., Any], name: str, spec: str) -> LoadedModel:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = factory()
    except SystemExit as exc:  # a factory that exits (even with 0) has not returned a model
        raise CheckError(f"model factory {spec!r} called sys.exit({exc.code!r}) instead of returning "
                         "(module, example_inputs[, calibration])") from None
    except Exception as exc:  # noqa: BLE001 - user code
        raise CheckError(f"model factory {spec!r} failed: {_one_line(exc)}") from None
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise CheckError(f"model factory {spec!r} must return (module, example_inputs[, calibration]), "
                         f"got {type(result).__name__}")
    module, example = result[0], result[1]
    if not callable(module):
        raise CheckError(f"model factory {spec!r} returned a {type(module).__name__}, not a module")
    example = tuple(example) if isinstance(example, (tuple, list)) else (example,)
    return LoadedModel(name, module, example, result[2] if len(result) == 3 else None, spec)


# --------------------------------------------------------------------------- progress


class _Progress:
    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.times: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, index: int, label: str) -> Iterator[dict[str, str]]:
        self.stream.write(f"[{index}/{len(STEPS)}] {label} ... ")
        self.stream.flush()
        info: dict[str, str] = {}
        start = time.perf_counter()
        try:
            yield info
        except BaseException:
            self.stream.write(f"failed after {time.perf_counter() - start:.1f} s\n")
            self.stream.flush()
            raise
        elapsed = time.perf_counter() - start
        self.times[label] = elapsed
        extra = f" ({info['note']})" if info.get("note") else ""
        self.stream.write(f"{elapsed:.1f} s{extra}\n")
        self.stream.flush()

    def skip(self, index: int, label: str, why: str) -> None:
        self.stream.write(f"[{index}/{len(STEPS)}] {label} ... skipped ({why})\n")
        self.stream.flush()


@contextlib.contextmanager
def _quiet(*, stderr: bool = False) -> Iterator[None]:
    """Silence Python warnings and the torch/torchao loggers' warnings during a step.

    ``stderr=True`` also discards whatever is written to stderr meanwhile (torch.export prints
    partial graphs there on failure, torch's own log handlers bypass the levels set here), so
    a failing step still ends in one error line; ``TOSA_VERIFY_DEBUG=1`` keeps it all.
    """
    loggers = [logging.getLogger(name) for name in ("torch", "torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.ExitStack() as stack:
            warnings.simplefilter("ignore")
            if stderr and not os.environ.get("TOSA_VERIFY_DEBUG"):
                stack.enter_context(_stderr_discarded())
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


@contextlib.contextmanager
def _stderr_discarded() -> Iterator[None]:
    """Send both ``sys.stderr`` and file descriptor 2 to /dev/null for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stderr(sink):
                yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


# --------------------------------------------------------------------------- the check


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


def check_main(args: argparse.Namespace) -> int:
    """Run the check described by ``args`` (see :func:`add_check_arguments`); return the exit code.

    >>> check_main(parser.parse_args(["lowering.zoo:digits_cnn", "--report", "r.html"]))   # doctest: +SKIP
    0
    """
    stderr = sys.stderr
    try:
        state = _run(args, _Progress(stderr))
    except CheckError as exc:
        print(f"tosa-verify check: error: {exc}", file=stderr)
        return EXIT_ERROR
    except TosaError as exc:
        print(f"tosa-verify check: error: {exc}", file=stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("tosa-verify check: interrupted", file=stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        if os.environ.get("TOSA_VERIFY_DEBUG"):
            raise
        print(f"tosa-verify check: error: {_one_line(exc)}", file=stderr)
        return EXIT_ERROR
    return EXIT_FAIL if any(not g.passed for g in state.gates) else EXIT_OK


def _run(args: argparse.Namespace, progress: _Progress) -> _State:
    import tosa_verify

    st = _State()
    if args.max_cycles_increase is not None and not args.golden:
        raise CheckError("--max-cycles-increase compares against a golden: give --golden DIR")
    if args.update_golden and not args.golden:
        raise CheckError("--update-golden needs --golden DIR")
    # Vela compiles integer TOSA only: an FP graph skips the step instead of failing it
    targets = [] if args.no_vela or args.profile == "FP" else (args.target or [DEFAULT_TARGET])
    use_vgf = any(str(t).lower() == VGF_TARGET for t in args.target or [])
    targets = [t for t in targets if str(t).lower() != VGF_TARGET]
    if targets:
        from ethosu.compiler import EthosUConfigError, resolve_config

        for t in targets:
            try:
                resolve_config(t, None, None, None)
            except EthosUConfigError as exc:
                raise CheckError(str(exc)) from None

    # 1. quantize and lower
    with progress.step(1, STEPS[0]) as info, _quiet(stderr=True):
        st.model = load_model(args.model)
        import lowering

        try:
            st.lowered = lowering.lower(st.model.module, st.model.example_inputs, profile=args.profile,
                                        quantization=quant_config_from_args(args),
                                        calibration=st.model.calibration)
        except lowering.LoweringError as exc:
            raise CheckError(f"lowering failed: {exc}") from None
        ops = sum(getattr(st.lowered, "op_counts", {}).values())
        info["note"] = f"{st.model.name}, {ops} TOSA operators"
    if st.lowered.tosa is None:
        return _check_partitions(st, args, progress, targets, use_vgf)
    st.gates.append(Gate("fully lowered", True, "one TOSA graph"))

    # 2. validate
    with progress.step(2, STEPS[1]), _quiet():
        st.tosa_inputs = list(st.lowered.quantize_inputs(*st.model.example_inputs))
        result = tosa_verify.run(st.lowered.tosa, st.tosa_inputs, capture=True)
        st.captured = result.tensors

    # 3. interpreter vs reference model
    with progress.step(3, STEPS[2]) as info:
        st.diff = tosa_verify.diff(st.lowered.tosa, st.tosa_inputs)
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
        st.drift = tosa_verify.drift(st.lowered, st.model.example_inputs,
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


def _drift_gates(st: _State, args: argparse.Namespace) -> None:
    outs = st.drift.output_rows
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
    from golden import GoldenMissingError, GoldenStore, Thresholds
    from golden import diff as golden_diff
    from golden.record import record_lowered, seeded_inputs
    from golden.store import GoldenError

    case = f"{args.case or st.model.name}/{args.profile}"
    store = GoldenStore(args.golden)
    try:
        seen = store.version(case)  # a writer that replaces it meanwhile makes our update fail, not win
    except GoldenError as exc:
        raise CheckError(str(exc)) from None
    new = record_lowered(st.lowered, seeded_inputs(st.model.example_inputs, args.seed), programs=st.programs,
                         model=st.model.module, seed=args.seed, quantization=quant_config_from_args(args))
    try:
        if args.update_golden:
            path = store.write(case, new, update=True, expected=seen)
            st.gates.append(Gate("golden", True, f"recorded {case} in {path}"))
            info["note"] = f"recorded {case}"
            return
        old = store.read(case)
    except GoldenMissingError:
        st.gates.append(Gate("golden", False, f"no golden recorded for {case!r} in {store.root}; "
                                              "run with --update-golden to record it"))
        info["note"] = "missing"
        return
    except GoldenError as exc:
        raise CheckError(str(exc)) from None
    pct = 5.0 if args.max_cycles_increase is None else args.max_cycles_increase
    report = golden_diff(old, new, Thresholds(max_cycles_increase=pct / 100.0), case=case)
    st.golden_report = report
    status = report.cases[0].status if report.cases else "identical"
    st.gates.append(Gate("golden", not report.failed, f"{case}: {status}"))
    info["note"] = status


def _check_partitions(st: _State, args: argparse.Namespace, progress: _Progress,
                      targets: Sequence[str], use_vgf: bool = False) -> _State:
    """A model split around CPU nodes: each TOSA partition is validated, cross-checked with the
    reference model op by op on seeded random inputs and compiled; drift and goldens need one
    graph and are skipped. The "fully lowered" gate fails unless ``--allow-cpu``."""
    import tosa_verify
    from tosa_verify.diff import random_inputs

    parts, cpu = st.lowered.partitions, st.lowered.cpu_nodes
    first = f"; first: {cpu[0].node} ({cpu[0].target}): {cpu[0].reason}" if cpu else ""
    st.gates.append(Gate("fully lowered", bool(args.allow_cpu),
                         f"{len(parts)} TOSA partition(s), {len(cpu)} node(s) left on the CPU{first}"))
    inputs = {p.name: random_inputs(p.tosa, args.seed) for p in parts}
    with progress.step(2, STEPS[1] + f" ({len(parts)} partitions)"), _quiet():
        for p in parts:
            tosa_verify.run(p.tosa, inputs[p.name])
    with progress.step(3, STEPS[2]) as info:
        diverging = []
        for p in parts:
            report = tosa_verify.diff(p.tosa, inputs[p.name])
            if not report.ok:
                at = report.first_divergence
                diverging.append(f"{p.name}: " + (report.error or (f"operator {at.index} {at.op}" if at else "mismatch")))
        st.gates.append(Gate("interpreter == reference model", not diverging,
                             "; ".join(diverging) or f"every operator of {len(parts)} partitions agrees "
                                                     f"(random inputs, seed {args.seed})"))
        info["note"] = "agree" if not diverging else "DIVERGE"
    if use_vgf:
        _vgf_step(st, progress, [p.tosa for p in parts], [inputs[p.name] for p in parts])
    progress.skip(4, STEPS[3], "drift needs one TOSA graph")
    _vela_step(st, progress, args, targets, [p.tosa for p in parts], partitions=True)
    progress.skip(6, STEPS[5], "goldens need one TOSA graph")
    with progress.step(7, STEPS[6]) as info:
        if args.json:
            _write_json(args.json, st, _meta(st, args, progress))
            info["note"] = f"wrote {args.json}"
        if args.report:
            info["note"] = "no HTML report: it needs one TOSA graph"
    lines = ["nodes left on the CPU:"] + [f"  {c.node} ({c.target}): {c.reason}" for c in cpu]
    print("\n".join(lines) + "\n" + format_summary(gates=st.gates))
    return st


def _vela_step(st: _State, progress: _Progress, args: argparse.Namespace, targets: Sequence[str],
               graphs: Sequence[bytes], *, partitions: bool) -> None:
    """Step 5: compile every graph for every target, one gate per target with the cycles summed.

    Vela runs in a child process: a Vela crash must not end check. The programs of a model
    lowered whole are kept for the report (per-layer cycles); of partitions only the sum is.
    """
    if not targets:
        progress.skip(5, STEPS[4], _no_vela_reason(args))
        return
    from ethosu.compiler import VelaCompileError, compile_tosa

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
        info["note"] = ", ".join(notes)


def _vgf_step(st: _State, progress: _Progress, graphs: Sequence[bytes],
              inputs: Sequence[Any]) -> dict[str, Any] | None:
    """``--target vgf``: compile each graph to VGF, run it, gate on agreement with the interpreter.

    Agreement is :func:`vgf.check_agreement`: the deployed program's outputs equal the
    interpreter's (INT) and every operator agrees op by op (FP: within compliance on its own
    inputs). Returns the VGF tensors of a single graph (for drift's VGF column), else None.
    """
    import vgf

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
    from golden.store import tool_versions

    meta: dict[str, Any] = {
        "model": st.model.source if st.model else "",
        "profile": args.profile,
        "targets": ", ".join(p.target for p in st.programs) or "-",
        "TOSA operators": ", ".join(f"{k} {v}" for k, v in sorted((getattr(st.lowered, "op_counts", {}) or {}).items())),
        "step times": ", ".join(f"{k} {v:.1f} s" for k, v in progress.times.items()),
    }
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
        "cpu_nodes": [{"node": c.node, "target": c.target, "reason": c.reason}
                      for c in (getattr(st.lowered, "cpu_nodes", None) or [])],
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


if __name__ == "__main__":
    sys.exit(main())
