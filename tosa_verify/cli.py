"""The ``tosa-verify`` command line.

Exit codes, for CI gates: 0 success / all gates pass, 1 a check failed (divergence, regression),
2 an error (bad input, bad configuration, invalid graph).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ethosu.cli import add_compile_parser, add_support_parser
from golden import Thresholds, diff
from vgf.cli import add_diff_executor, executor_outputs, extend_compile_parser

from . import budget
from .app.args import (
    EVAL_DESCRIPTION,
    add_check_arguments,
    add_eval_arguments,
    add_quantization_arguments,
    add_threads_argument,
)
from .diff import build_diff_parser, diff_command
from .errors import TosaError
from .graph import load
from .interpreter import run
from .profiles import op_histogram, operator_count_text, profiles_and_extensions

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2

DESCRIPTION = """\
tosa-verify: make PyTorch -> TOSA -> Arm Ethos-U deployment numerically trustworthy.

Verbs:
  run      run a TOSA graph with the bit-exact numpy interpreter, write outputs as .npy
  info     print a TOSA graph's version, profiles/extensions, op histogram, inputs and outputs
  diff     run a graph with the interpreter and the reference model (or against another graph),
           compare every operator's output, name the first divergence, write a one-op repro
  compile  compile an INT TOSA graph for an Ethos-U55/U65/U85 target with Vela, print performance;
           --target vgf: compile to VGF with the ML SDK model converter (run/diff: --executor vgf)
  support  list the operators Vela will not accept for a target, without compiling
  lower    quantize and lower a PyTorch model to TOSA; write graphs, provenance, quant params
  golden   compare two golden directories (regressions, drift, performance) for CI
  check    the whole job on a model: quantize and lower -> validate -> interpreter vs reference
           diff -> drift vs float -> Vela compile -> golden compare -> report (default model:
           the built-in digits CNN)
  eval     float vs fake-quant vs TOSA over a data set: top-1/top-5 agreement, accuracy, confusion,
           output SQNR distribution, per-layer SQNR; batched and parallel (default: the digits
           CNN on its 450 held-out images)

Exit codes: 0 success, 1 a check failed, 2 an error (bad input, invalid graph).
"""


CHECK_DESCRIPTION = """\
Run the whole job on a model and gate it:
  1 quantize and lower (lowering.lower, INT by default)   2 validate the TOSA (spec ERROR_IFs)
  3 interpreter vs reference model, op by op              4 drift vs float, per layer
  5 Vela compile for each --target                        6 golden compare (--golden DIR)
  7 report: terminal summary, --report report.html with plots, --json

MODEL is path/file.py:factory or package.module:factory returning (module, example_inputs[,
calibration]); without MODEL the built-in digits CNN (trained on scikit-learn's load_digits) is used.
Exit codes: 0 all gates pass, 1 a gate failed, 2 an error.
"""


def _cmd_run(args: argparse.Namespace) -> int:
    graph = load(args.graph)
    inputs = [budget.load_input_npy(path, "input") for path in args.input]
    state: dict[str, np.ndarray] | None = None
    if args.variables:
        state = {}
        if Path(args.variables).exists():
            state = budget.load_npz(args.variables, "variable state")
    outputs = _run_outputs(args, graph, inputs, state)
    if state is not None:
        tmp = Path(f"{args.variables}.tmp.npz")
        np.savez(tmp, **state)
        tmp.replace(args.variables)  # all or nothing: a failed save keeps the old state
        print(f"variables: {', '.join(sorted(state)) or '(none)'} -> {args.variables}")
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, (name, value) in enumerate(zip(graph.main.outputs, outputs, strict=True)):
        target = out_dir / f"output_{i}.npy"
        if isinstance(value, tuple):  # block scaled: (values, scales), as the reference model writes them
            np.save(target.with_name(f"output_{i}_scale.npy"), value[1])
            value = value[0]
        np.save(target, value)
        print(f"{name}: {value.dtype} {list(value.shape)} -> {target}")
    return EXIT_OK


def _run_outputs(args: argparse.Namespace, graph, inputs: list, state: dict | None) -> list:
    """``run``: the outputs from the interpreter, or from ``--executor`` (no variable state there)."""
    executor = getattr(args, "executor", "interpreter")
    if executor == "interpreter":
        return run(graph, inputs, variables=state)
    if state is not None:
        raise TosaError(f"--variables needs the interpreter, not --executor {executor}")
    return executor_outputs(executor, graph, inputs)


def _cmd_info(args: argparse.Namespace) -> int:
    graph = load(args.graph)
    profiles, extensions = profiles_and_extensions(graph)
    block = graph.main
    print(f"file:        {args.graph}")
    print(f"version:     {graph.version_string}")
    print(f"profiles:    {', '.join(profiles) or '-'}")
    print(f"extensions:  {', '.join(extensions) or '-'}")
    print(f"regions:     {len(graph.regions)}  blocks: {sum(len(r.blocks) for r in graph.regions)}")
    print("inputs:")
    for name in block.inputs:
        t = block.tensors[name]
        print(f"  {name:<40} {t.dtype:<8} {list(t.shape)}")
    print("outputs:")
    for name in block.outputs:
        t = block.tensors[name]
        print(f"  {name:<40} {t.dtype:<8} {list(t.shape)}")
    hist = op_histogram(graph)
    print(f"operators:   {operator_count_text(hist)}")
    for op, count in hist.most_common():
        print(f"  {op:<24} {count}")
    return EXIT_OK


def _cmd_lower(args: argparse.Namespace) -> int:
    import lowering  # lazy: start-up speed (torch); the application layer's verbs import it

    from .app.models import (  # lazy: start-up speed
        _quiet,
        load_model,
        lowered_operator_text,
        quant_config_from_args,
    )

    with _quiet(stderr=True):  # torch's warnings and dumps are not ours to print; our error line is
        model = load_model(args.model)
        try:
            lowered = lowering.lower(model.module.eval(), model.example_inputs, profile=args.profile,
                                     quantization=quant_config_from_args(args),
                                     calibration=model.calibration, threads=args.threads)
        except lowering.LoweringError as exc:
            raise TosaError(f"lowering failed: {exc}") from None
    out = lowered.save(args.output_dir)
    graphs = sorted(p.name for p in out.glob("*.tosa"))
    print(f"{model.name}: {args.profile}, {lowered_operator_text(lowered)}, "
          f"{len(lowered.cpu_nodes)} nodes left on the CPU -> {out} ({', '.join(graphs)})")
    for node in lowered.cpu_nodes:
        print(f"  on CPU: {node.node} ({node.target}): {node.reason}")
    return EXIT_OK


def _cmd_golden(args: argparse.Namespace) -> int:
    thresholds = Thresholds.from_options(args.max_sqnr_drop, args.max_cycles_increase)
    report = diff(args.old, args.new, thresholds)
    print(report.format())
    if args.json:
        Path(args.json).write_text(report.to_json())
    return EXIT_FAIL if report.failed else EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from .app.check import check_main  # lazy: start-up speed (imports lowering, torch)

    return check_main(args)


def _cmd_eval(args: argparse.Namespace) -> int:
    from .app.eval_cli import eval_main  # lazy: start-up speed (imports lowering, torch)

    return eval_main(args)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: ``tosa-verify <verb>: error: ...``.

    Sub-parsers inherit the class (argparse makes them with ``type(parent)``), so a verb added
    later gets the same behaviour.
    """

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse reports a verb's unknown options from the top parser; name the verb instead.
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            verbs = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})
            verbs.get(getattr(parsed, "verb", None), self).error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


def _size(text: str) -> int:
    try:
        return budget.parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_budget_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-memory", type=_size, metavar="SIZE",
                   help=f"memory budget of a run, e.g. 512M or 4G (default: ${budget.ENV_MAX_MEMORY}, "
                        "else half of physical memory); a graph needing more is refused before it runs")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``tosa-verify`` (one sub-command per verb)."""
    parser = _Parser(
        prog="tosa-verify", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True

    p = sub.add_parser("run", help="run a TOSA graph with the numpy interpreter",
                       description="Run GRAPH.tosa on .npy inputs (graph input order) and write output_0.npy ...")
    p.add_argument("graph", metavar="GRAPH.tosa")
    p.add_argument("--input", "-i", action="append", default=[], metavar="FILE.npy",
                   help="an input array; repeat in graph input order")
    p.add_argument("--output-dir", "-o", default=".", metavar="DIR", help="where output_N.npy go (default: .)")
    p.add_argument("--variables", metavar="STATE.npz",
                   help="carry variable tensors across runs: start from STATE.npz if it exists, "
                        "write the final values back to it")
    _add_budget_arguments(p)
    p.add_argument("--executor", choices=("interpreter", "reference", "vgf"), default="interpreter",
                   help="what runs the graph: the interpreter (default), the reference model, or vgf "
                        "(ML SDK model converter + scenario runner on a Vulkan device)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("info", help="describe a TOSA graph",
                       description="Print version, profiles/extensions used, op histogram, inputs and outputs.")
    p.add_argument("graph", metavar="GRAPH.tosa")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("diff", help="compare a graph op by op against the reference model or another graph",
                       description="Run GRAPH.tosa with the interpreter and the reference model (or OTHER.tosa), "
                       "compare every operator output, name the first divergence. Exit 0 all match, 1 divergence, 2 error.")
    build_diff_parser(p)
    _add_budget_arguments(p)
    p.set_defaults(func=diff_command)
    add_diff_executor(p)
    # The ethosu package is a namespace portion beside Vela's ethosu.vela; its CLI pieces live there.
    extend_compile_parser(add_compile_parser(sub))
    add_support_parser(sub)

    p = sub.add_parser("lower", help="lower a PyTorch model to TOSA and save it",
                       description="Quantize (INT) and lower MODEL (path/file.py:factory or package.module:factory "
                       "returning (module, example_inputs[, calibration]); default: the digits CNN) to TOSA 1.0; "
                       "write model.tosa (one file per partition when some ops stay on the CPU), "
                       "provenance.json, quant_params.json and manifest.json.")
    p.add_argument("model", nargs="?", metavar="MODEL")
    p.add_argument("--profile", choices=("INT", "FP"), default="INT", type=str.upper)
    add_quantization_arguments(p)
    p.add_argument("--output-dir", "-o", default="lowered", metavar="DIR")
    add_threads_argument(p)
    p.set_defaults(func=_cmd_lower)

    p = sub.add_parser("golden", help="compare two golden directories",
                       description="Compare the goldens in OLD and NEW case by case and classify every change "
                       "(identical, within tolerance, quantization drift, numerical or performance regression). "
                       "Exit 0 when nothing regressed, 1 on a regression or a missing case, 2 on an unreadable golden.")
    p.add_argument("old", metavar="OLD_DIR")
    p.add_argument("new", metavar="NEW_DIR")
    p.add_argument("--max-sqnr-drop", type=float, default=1.0, metavar="DB",
                   help="per-layer SQNR drop that counts as drift (default 1 dB)")
    p.add_argument("--max-cycles-increase", type=float, default=5.0, metavar="PCT",
                   help="Vela cycle increase that counts as a regression (default 5 %%)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    p.set_defaults(func=_cmd_golden)

    p = sub.add_parser("check", help="quantize, lower, verify, analyse drift, compile and gate a model",
                       description=CHECK_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_check_arguments(p)
    _add_budget_arguments(p)
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("eval", help="evaluate a lowered model over a data set (agreement, accuracy, SQNR)",
                       description=EVAL_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_eval_arguments(p)
    p.set_defaults(func=_cmd_eval)
    return parser


def _known_errors() -> tuple[type[BaseException], ...]:
    """The error classes that are the user's input or environment, not a bug of ours.

    Packages are looked up in ``sys.modules`` only: an error of a package never imported cannot
    be raised, and importing torch (through ``lowering``) just to report an error would be slow.
    """
    known: list[type[BaseException]] = [TosaError, OSError, ValueError, MemoryError]
    for module, name in (("lowering.errors", "LoweringError"), ("golden.store", "GoldenError"),
                         ("tosa_verify.app.models", "CheckError")):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            known.append(cls)
    return tuple(known)


def error_message(exc: BaseException) -> str:
    """One line describing ``exc`` for ``tosa-verify <verb>: error: ...``.

    >>> error_message(FileNotFoundError(2, "No such file or directory", "out/x.npy"))
    "No such file or directory: 'out/x.npy'"
    >>> error_message(SystemExit(0))
    'the model code called sys.exit(0); a model file must return (module, example_inputs), not exit'
    """
    if isinstance(exc, SystemExit):
        return (f"the model code called sys.exit({exc.code!r}); a model file must return "
                "(module, example_inputs), not exit")
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {os.fsdecode(exc.filename)!r}" if exc.filename is not None else ""
        return f"{exc.strerror}{where}"
    if isinstance(exc, MemoryError):
        return f"out of memory ({budget.ENV_MAX_MEMORY} or --max-memory sets the memory budget)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, _known_errors()) and type(exc) not in (ValueError, OSError):
        return text
    return f"{type(exc).__name__}: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tosa-verify`` console script; returns the exit code.

    Every failure of a verb ends as one line on stderr, ``tosa-verify <verb>: error: ...``, and
    exit code 2 (set ``TOSA_VERIFY_DEBUG=1`` to see the traceback of an unexpected one).

    >>> main(["info", "model.tosa"])   # doctest: +SKIP
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"tosa-verify {args.verb}"
    try:
        with budget.limits(max_memory=getattr(args, "max_memory", None)):
            code = args.func(args)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one top-level handler
        if os.environ.get("TOSA_VERIFY_DEBUG") and not isinstance(exc, _known_errors()):
            raise
        sys.stdout.flush()
        print(f"{prog}: error: {error_message(exc)}", file=sys.stderr)
        return EXIT_ERROR
    if not isinstance(code, int) or isinstance(code, bool) or code not in (EXIT_OK, EXIT_FAIL, EXIT_ERROR):
        print(f"{prog}: error: internal error: the verb returned {code!r}", file=sys.stderr)
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
