"""The ``tosa-verify`` command line.

Exit codes, for CI gates: 0 success / all gates pass, 1 a check failed (divergence, regression),
2 an error (bad input, bad configuration, invalid graph).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .errors import TosaError

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2

DESCRIPTION = """\
tosa-verify: make PyTorch -> TOSA -> Arm Ethos-U deployment numerically trustworthy.

Verbs:
  run      run a TOSA graph with the bit-exact numpy interpreter, write outputs as .npy
  info     print a TOSA graph's version, profiles/extensions, op histogram, inputs and outputs
  diff     run a graph with the interpreter and the reference model (or against another graph),
           compare every operator's output, name the first divergence, write a one-op repro
  compile  compile an INT TOSA graph for an Ethos-U55/U65/U85 target with Vela, print performance
  support  list the operators Vela will not accept for a target, without compiling
  lower    quantize and lower a PyTorch model to TOSA; write graphs, provenance, quant params
  golden   compare two golden directories (regressions, drift, performance) for CI
  check    the whole job on a model: quantize and lower -> validate -> interpreter vs reference
           diff -> drift vs float -> Vela compile -> golden compare -> report (default model:
           the built-in digits CNN)

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
    from .graph import load
    from .interpreter import run

    graph = load(args.graph)
    inputs = []
    for path in args.input:
        try:
            inputs.append(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as exc:
            raise TosaError(f"cannot read input {path!r}: {exc}") from None
    state: dict[str, np.ndarray] | None = None
    if args.variables:
        state = {}
        if Path(args.variables).exists():
            try:
                with np.load(args.variables, allow_pickle=False) as saved:
                    state = {name: saved[name] for name in saved.files}
            except (OSError, ValueError) as exc:
                raise TosaError(f"cannot read variable state {args.variables!r}: {exc}") from None
    outputs = run(graph, inputs, variables=state)
    if state is not None:
        tmp = Path(f"{args.variables}.tmp.npz")
        np.savez(tmp, **state)
        tmp.replace(args.variables)  # all or nothing: a failed save keeps the old state
        print(f"variables: {', '.join(sorted(state)) or '(none)'} -> {args.variables}")
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, (name, value) in enumerate(zip(graph.main.outputs, outputs, strict=True)):
        target = out_dir / f"output_{i}.npy"
        np.save(target, value)
        print(f"{name}: {value.dtype} {list(value.shape)} -> {target}")
    return EXIT_OK


def _cmd_info(args: argparse.Namespace) -> int:
    from .graph import load
    from .profiles import op_histogram, operator_count_text, profiles_and_extensions

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
    # check.py is the one tosa_verify module allowed to reach into lowering (the CLI join point).
    from .check import CheckError, load_model, lowered_operator_text, quant_config_from_args

    try:
        model = load_model(args.model)
    except CheckError as exc:
        raise TosaError(str(exc)) from None
    import lowering

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
    from golden import GoldenError, Thresholds, diff

    thresholds = Thresholds(max_sqnr_drop_db=args.max_sqnr_drop, max_cycles_increase=args.max_cycles_increase / 100)
    try:
        report = diff(args.old, args.new, thresholds)
    except GoldenError as exc:
        raise TosaError(str(exc)) from None
    print(report.format())
    if args.json:
        Path(args.json).write_text(report.to_json())
    return EXIT_FAIL if report.failed else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``tosa-verify`` (one sub-command per verb)."""
    parser = argparse.ArgumentParser(
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
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("info", help="describe a TOSA graph",
                       description="Print version, profiles/extensions used, op histogram, inputs and outputs.")
    p.add_argument("graph", metavar="GRAPH.tosa")
    p.set_defaults(func=_cmd_info)

    from .diff import build_diff_parser, diff_command

    p = sub.add_parser("diff", help="compare a graph op by op against the reference model or another graph",
                       description="Run GRAPH.tosa with the interpreter and the reference model (or OTHER.tosa), "
                       "compare every operator output, name the first divergence. Exit 0 all match, 1 divergence, 2 error.")
    build_diff_parser(p)
    p.set_defaults(func=diff_command)

    # The ethosu package is a namespace portion beside Vela's ethosu.vela; its CLI pieces live there.
    from ethosu.cli import add_compile_parser, add_support_parser

    add_compile_parser(sub)
    add_support_parser(sub)

    from .check import add_quantization_arguments, add_threads_argument

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

    from .check import add_check_arguments, check_main

    p = sub.add_parser("check", help="quantize, lower, verify, analyse drift, compile and gate a model",
                       description=CHECK_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_check_arguments(p)
    p.set_defaults(func=check_main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tosa-verify`` console script; returns the exit code.

    >>> main(["info", "model.tosa"])   # doctest: +SKIP
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except TosaError as exc:
        print(f"tosa-verify: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("tosa-verify: interrupted", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
