"""``tosa-verify diff``: its arguments and the verb."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._text import one_line
from ..budget import check_graph_memory, load_input_npy
from ..errors import TosaError, TosaInputError
from ..graph import Graph, load
from ..interpreter import Inputs
from .inputs import random_inputs
from .judge import diff


def build_diff_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``diff`` options to ``parser`` (or a new parser) and return it.

    >>> build_diff_parser().parse_args(["g.tosa", "--seed", "3"]).seed
    3
    """
    if parser is None:
        parser = argparse.ArgumentParser(
            prog="tosa-verify diff",
            description="Compare a TOSA graph op by op against the reference model or another graph.",
        )
    parser.add_argument("graph", help="the TOSA graph (.tosa)")
    parser.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE.npy",
                        help="an input value; repeat in graph input order or give NAME=FILE")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs used when no --input is given")
    parser.add_argument("--against", default=None, metavar="reference|interpreter|OTHER.tosa",
                        help="the reference model (default; with --executor: the interpreter), the "
                             "interpreter, or another TOSA graph")
    parser.add_argument("--precise", action="store_true",
                        help="run the reference model in FP64 and judge floats with the compliance verifier")
    parser.add_argument("--repro-dir", metavar="DIR", help="write a one-operator repro of the first divergence here")
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON ('-' for stdout)")
    parser.add_argument("--only-diverging", action="store_true", help="print only diverging operators in the table")
    return parser


def _read_inputs(specs: Sequence[str], graph: Graph) -> Inputs:
    named: dict[str, np.ndarray] = {}
    ordered: list[np.ndarray] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or spec.endswith(".npy") and Path(spec).exists():
            name, path = "", spec
        value = load_input_npy(path, "input")
        if name:
            named[name] = value
        else:
            ordered.append(value)
    if named and ordered:
        raise TosaInputError("give inputs either all by NAME=FILE or all in order, not mixed")
    return named if named else ordered


def diff_command(args: argparse.Namespace) -> int:
    """Run ``tosa-verify diff`` from parsed arguments; returns the exit code (0/1/2).

    >>> diff_command(build_diff_parser().parse_args(["model.tosa"]))   # doctest: +SKIP
    0
    """

    try:
        graph = load(args.graph)
        check_graph_memory(graph)  # before random inputs are drawn for it
        inputs = _read_inputs(args.input, graph) if args.input else random_inputs(graph, args.seed)
        engine = getattr(args, "engine", None) or "interpreter"
        # another executor is compared with the interpreter unless told otherwise
        against = args.against or ("reference" if engine == "interpreter" else "interpreter")
        report = diff(graph, inputs, against=against, precise=args.precise, engine=engine)
        report.source = args.graph
    except TosaError as exc:
        print(f"tosa-verify diff: error: {exc}", file=sys.stderr)
        return 2
    print(report.format_table(all_ops=not args.only_diverging))
    if args.json:
        text = report.to_json()
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text)
    if args.repro_dir and report.first_divergence is not None:
        try:
            path = report.write_repro(args.repro_dir)
            print(f"repro written to {path}")
        except TosaError as exc:
            print(f"tosa-verify diff: error: cannot write the repro: {exc}", file=sys.stderr)
            return 2
    if report.error:  # (an execution failed: the table shows how far it got; --json has the full text)
        print(f"tosa-verify diff: error: {one_line(report.error)}", file=sys.stderr)
        return 2
    return 0 if report.ok else 1


def diff_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tosa-verify diff ...``: parse ``argv`` (without the verb) and run.

    Exit codes: 0 every operator agrees, 1 a divergence, 2 an error.

    >>> diff_main(["model.tosa", "--seed", "1", "--repro-dir", "repro"])   # doctest: +SKIP
    1
    """
    parser = build_diff_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    return diff_command(args)
