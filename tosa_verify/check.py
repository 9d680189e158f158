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
    add_threads_argument(parser)
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
                        help="golden case name (default: the model file's stem and the factory, "
                             "e.g. my_model.build; a built-in model's name); stored as NAME/PROFILE")
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


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads N``: torch's intra-op threads (shared by ``check`` and ``lower``).

    >>> p = argparse.ArgumentParser(); add_threads_argument(p)
    >>> p.parse_args(["--threads", "2"]).threads
    2
    """
    parser.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                        help="torch intra-op threads while lowering and analysing (default: "
                             "$TOSA_VERIFY_THREADS, else half the cores; 1 on a 2-core machine, "
                             "where a second thread collapses under load)")


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return int(text)


def lowered_operator_text(lowered: Any) -> str:
    """``"12 TOSA operators (+30 CONST/CONST_SHAPE)"`` over every TOSA graph of a lowered model:
    the counts ``tosa-verify info`` prints for the same graphs.

    >>> import lowering
    >>> from lowering import zoo
    >>> lowered_operator_text(lowering.lower(*zoo.mlp()[:2]))   # doctest: +SKIP
    '12 TOSA operators (+30 CONST/CONST_SHAPE)'
    """
    from collections import Counter

    from .graph import load
    from .profiles import op_histogram, operator_count_text

    graphs = [lowered.tosa] if lowered.tosa is not None else [p.tosa for p in lowered.partitions]
    return operator_count_text(sum((op_histogram(load(g)) for g in graphs if g is not None), Counter()),
                               "TOSA operators")


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
    return _call_factory(factory, model_name(spec), spec)


def model_name(spec: str) -> str:
    """The name of a model spec in reports and its default golden case: the file stem (or the
    module's last component) and the factory, so two files' ``build()`` factories do not collide;
    a built-in model keeps its zoo name.

    >>> model_name("models/resnet_small.py:build"), model_name("acme.vision.models:build")
    ('resnet_small.build', 'models.build')
    >>> model_name("lowering.zoo:mlp")
    'mlp'
    """
    where, _, attr = spec.rpartition(":")
    if where == "lowering.zoo":
        return attr
    stem = Path(where).stem if where.endswith(".py") or "/" in where or os.sep in where \
        else where.rsplit(".", 1)[-1]
    return f"{stem}.{attr}"


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
    parts: list[Any] = field(default_factory=list)


def check_main(args: argparse.Namespace) -> int:
    """Run the check described by ``args`` (see :func:`add_check_arguments`); return the exit code.

    >>> check_main(parser.parse_args(["lowering.zoo:digits_cnn", "--report", "r.html"]))   # doctest: +SKIP
    0
    """
    stderr = sys.stderr
    try:
        from lowering.threads import torch_threads

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
    from golden import GoldenMissingError, GoldenStore, Thresholds
    from golden import diff as golden_diff
    from golden.record import record_lowered, seeded_inputs
    from golden.store import GoldenError

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
    import tosa_verify
    from tosa_verify.diff import random_inputs

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
            p.captured = tosa_verify.run(p.lowered.tosa, p.inputs, capture=True).tensors
    with progress.step(3, STEPS[2]) as info:
        diverging = []
        for p in parts:
            p.diff = tosa_verify.diff(p.lowered.tosa, p.inputs)
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
                p.drift = tosa_verify.drift(p.lowered, st.model.example_inputs,
                                            reference=p.diff.expected if p.diff.expected else True,
                                            captured=p.captured, rounding_travel=travel)
            info["note"] = ", ".join(
                f"{p.name} output SQNR {min((r.total.sqnr_db for r in p.drift.output_rows if r.total), default=float('nan')):.1f} dB"
                for p in measured)
        _drift_gates(st, args, [r for p in measured for r in p.drift.output_rows])
    else:
        progress.skip(4, STEPS[3], "no partition's inputs could be computed in PyTorch")
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
    print("\n".join(lines) + "\n" + format_summary(gates=st.gates))
    return st


def _vela_step(st: _State, progress: _Progress, args: argparse.Namespace, targets: Sequence[str],
               graphs: Sequence[bytes], *, partitions: bool, keep: Sequence[list[Any]] = ()) -> None:
    """Step 5: compile every graph for every target, one gate per target with the cycles summed.

    Vela runs in a child process: a Vela crash must not end check. The programs of a model
    lowered whole go to ``st.programs``; of partitions, to ``keep[i]`` for graph ``i``.
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


if __name__ == "__main__":
    sys.exit(main())
