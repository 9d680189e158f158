"""``tosa-verify compile`` and ``tosa-verify support``: sub-commands for the lead's CLI.

Wiring, in ``tosa_verify.cli.build_parser`` after the other verbs::

    from ethosu.cli import add_compile_parser, add_support_parser
    add_compile_parser(sub)
    add_support_parser(sub)

Both set ``func``; errors are :class:`~tosa_verify.errors.TosaError` subclasses
(``EthosUConfigError`` for a bad target/system config/memory mode, listing the valid
choices; ``VelaCompileError`` when Vela refuses the graph), which ``tosa_verify.cli.main``
already turns into exit code 2. Heavy imports (Vela, numpy) happen only when a verb runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_FAIL = 0, 1

_CONFIG_HELP = (
    "Valid combinations are checked before Vela runs; a bad target, system config or memory "
    "mode exits with status 2 and lists the valid choices."
)


def _add_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", "-t", required=True, metavar="TARGET",
                   help="Ethos-U configuration: ethos-u55-{32,64,128,256}, ethos-u65-{256,512}, "
                        "ethos-u85-{128,256,512,1024,2048}")


def add_compile_parser(sub) -> argparse.ArgumentParser:
    """Add the ``compile`` verb to a sub-parsers object; returns its parser.

    Example:
        >>> parser = argparse.ArgumentParser(prog="tosa-verify")
        >>> sub = parser.add_subparsers(dest="verb")
        >>> _ = add_compile_parser(sub)
        >>> args = parser.parse_args(["compile", "g.tosa", "--target", "ethos-u85-256", "--layers"])
        >>> args.target, args.layers, args.func.__name__
        ('ethos-u85-256', True, 'run_compile')
    """
    p = sub.add_parser(
        "compile",
        help="compile a TOSA graph for an Arm Ethos-U NPU with Vela",
        description="Compile GRAPH.tosa with Vela (in a child process, so a Vela crash cannot take "
                    "this process with it) and print Vela's performance "
                    "estimate: cycles, inference time, MACs, memory use and bandwidth per "
                    "memory area. " + _CONFIG_HELP,
    )
    p.add_argument("graph", metavar="GRAPH.tosa")
    _add_config_arguments(p)
    p.add_argument("--system-config", metavar="NAME",
                   help="a System_Config section of Vela's vela.ini or of --config "
                        "(default per family: Ethos_U55_High_End_Embedded, Ethos_U65_High_End, "
                        "Ethos_U85_SYS_DRAM_Mid)")
    p.add_argument("--memory-mode", metavar="NAME",
                   help="a Memory_Mode section (default per family: Shared_Sram, "
                        "Dedicated_Sram_384KB, Sram_Only)")
    p.add_argument("--config", metavar="FILE.ini", dest="config_ini",
                   help="an extra Vela .ini with more system configs / memory modes")
    p.add_argument("--vela-flag", action="append", default=[], metavar="--OPTION=VALUE",
                   help="pass an option to Vela as is (repeatable), e.g. --vela-flag=--optimise=Size")
    p.add_argument("--output-dir", "-o", metavar="DIR",
                   help="write Vela's outputs (.npz, CSVs, debug database), the command stream "
                        "and <graph>_program.json here")
    p.add_argument("--json", metavar="FILE", help="write the program summary as JSON ('-' = stdout)")
    p.add_argument("--layers", action="store_true", help="also print the per-layer table")
    p.add_argument("--in-process", action="store_true",
                   help="run Vela inside this process (saves about a second; a Vela crash ends it)")
    p.set_defaults(func=run_compile)
    return p


def run_compile(args: argparse.Namespace) -> int:
    """Run ``tosa-verify compile`` (see :func:`add_compile_parser`); returns the exit code.

    Example:
        >>> run_compile(parser.parse_args(["compile", "g.tosa", "-t", "ethos-u55-128"]))  # doctest: +SKIP
        0
    """
    from ethosu.compiler import compile_tosa, format_performance_table

    program = compile_tosa(
        args.graph,
        args.target,
        system_config=args.system_config,
        memory_mode=args.memory_mode,
        extra_flags=tuple(args.vela_flag),
        config_ini=args.config_ini,
        isolate=not args.in_process,
    )
    if args.json == "-":
        print(program.to_json())
    else:
        print(format_performance_table(program, layers=args.layers))
    if args.json and args.json != "-":
        Path(args.json).write_text(program.to_json() + "\n", encoding="utf-8")
        print(f"json: {args.json}", file=sys.stderr)
    if args.output_dir:
        for path in program.save(args.output_dir):
            print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def add_support_parser(sub) -> argparse.ArgumentParser:
    """Add the ``support`` verb (check_support without compiling); returns its parser.

    Example:
        >>> parser = argparse.ArgumentParser(prog="tosa-verify")
        >>> sub = parser.add_subparsers(dest="verb")
        >>> _ = add_support_parser(sub)
        >>> parser.parse_args(["support", "g.tosa", "-t", "ethos-u55-128"]).func.__name__
        'run_support'
    """
    p = sub.add_parser(
        "support",
        help="list the operators Vela will refuse for an Ethos-U target, without compiling",
        description="Check GRAPH.tosa against Vela's TOSA operator support for TARGET. "
                    "Exit status 0: every operator is accepted; 1: some are not.",
    )
    p.add_argument("graph", metavar="GRAPH.tosa")
    _add_config_arguments(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_support)
    return p


def run_support(args: argparse.Namespace) -> int:
    """Run ``tosa-verify support``; 0 when Vela accepts every operator, else 1.

    Example:
        >>> run_support(parser.parse_args(["support", "g.tosa", "-t", "ethos-u55-128"]))  # doctest: +SKIP
        #0 BITWISE_AND: Vela lists it as not supported on Ethos-U55 and Ethos-U65 ...
        1
    """
    import json

    from ethosu.support import check_support

    report = check_support(args.graph, args.target)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    return EXIT_OK if report.ok else EXIT_FAIL
