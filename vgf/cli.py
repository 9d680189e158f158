"""The VGF pieces of the ``tosa-verify`` command line.

Wiring, in ``tosa_verify.cli.build_parser``::

    from vgf.cli import add_diff_executor, extend_compile_parser
    extend_compile_parser(add_compile_parser(sub))   # compile GRAPH --target vgf -o model.vgf
    add_diff_executor(diff_parser)                   # diff GRAPH --executor vgf

* ``tosa-verify compile GRAPH.tosa --target vgf [-o model.vgf|DIR] [--json FILE]``: compile with
  the ML SDK model converter, print a summary, write the ``.vgf``;
* ``tosa-verify diff GRAPH.tosa --executor vgf``: run GRAPH on VGF with every tensor captured and
  compare it with the interpreter operator by operator (``--against`` still picks the other side).

``run --executor vgf`` goes through :func:`executor_outputs`. Errors are
:class:`~vgf.errors.VgfError` (a ``TosaError``): exit code 2, one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

#: ``--executor`` choices of ``run`` and ``diff`` (besides the interpreter).
EXECUTORS = ("interpreter", "reference", "vgf")
VGF_TARGET = "vgf"


def extend_compile_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Let the ``compile`` verb take ``--target vgf``; other targets go to its own function.

    Example:
        >>> parser = argparse.ArgumentParser(prog="tosa-verify")
        >>> sub = parser.add_subparsers(dest="verb")
        >>> from ethosu.cli import add_compile_parser
        >>> _ = extend_compile_parser(add_compile_parser(sub))
        >>> parser.parse_args(["compile", "g.tosa", "--target", "vgf"]).func.__name__
        'run_compile_any'
    """
    other: Callable[[argparse.Namespace], int] = p.get_default("func")

    def run_compile_any(args: argparse.Namespace) -> int:
        if str(args.target).lower() == VGF_TARGET:
            return run_compile_vgf(args)
        return other(args)

    p.description = (p.description or "") + (
        " With --target vgf: compile to VGF (Vulkan Graph Format) with the ML SDK model converter; "
        "-o is the .vgf file (or a directory that gets GRAPH.vgf).")
    p.set_defaults(func=run_compile_any)
    return p


def _vgf_path(graph: str, output: str | None) -> Path | None:
    if not output:
        return None
    out = Path(output)
    if out.suffix.lower() == ".vgf":
        return out
    return out / (Path(graph).stem + ".vgf")


def run_compile_vgf(args: argparse.Namespace) -> int:
    """``tosa-verify compile GRAPH --target vgf``: compile, print a summary, save; returns 0.

    Example:
        >>> run_compile_vgf(argparse.Namespace(graph="g.tosa", output_dir="g.vgf", json=None))  # doctest: +SKIP
        0
    """
    from vgf import compile_tosa

    program = compile_tosa(args.graph)
    summary = program.to_dict()
    if getattr(args, "json", None) == "-":
        print(json.dumps(summary, indent=2))
    else:
        lines = [f"{args.graph} -> VGF ({len(program.vgf):,} bytes, model-converter "
                 f"{program.converter_version}, {program.compile_seconds:.1f} s)"]
        for kind, tensors in (("input", program.inputs), ("output", program.outputs)):
            lines += [f"  {kind:<6} {t.name:<32} {t.dtype:<6} {list(t.shape)} {t.format}" for t in tensors]
        lines += [f"  converter: {m}" for m in program.messages]
        print("\n".join(lines))
    if getattr(args, "json", None) and args.json != "-":
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    target = _vgf_path(args.graph, getattr(args, "output_dir", None))
    if target is not None:
        print(f"wrote {program.save(target)}", file=sys.stderr)
    return 0


def add_diff_executor(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--executor interpreter|reference|vgf`` to the ``diff`` verb's parser.

    With ``vgf`` the graph runs on VGF (every tensor captured, :class:`vgf.VgfExecutor`) and is
    compared with the interpreter unless ``--against`` says otherwise.

    Example:
        >>> from tosa_verify.diff import build_diff_parser
        >>> add_diff_executor(build_diff_parser()).parse_args(["g.tosa", "--executor", "vgf"]).executor
        'vgf'
    """
    p.add_argument("--executor", choices=EXECUTORS, default="interpreter",
                   help="what runs GRAPH: the interpreter (default), the reference model, or vgf (the "
                        "ML SDK model converter + scenario runner on a Vulkan device), compared then "
                        "with the interpreter")
    inner: Callable[[argparse.Namespace], int] | None = p.get_default("func")

    def run_diff_any(args: argparse.Namespace) -> int:
        from tosa_verify.diff import diff_command

        args.engine = engine_for(args.executor)
        return (inner or diff_command)(args)

    p.set_defaults(func=run_diff_any)
    return p


def engine_for(executor: str) -> object:
    """The ``engine`` of :func:`tosa_verify.diff` for an ``--executor`` choice.

    Example:
        >>> engine_for("interpreter")
        'interpreter'
        >>> engine_for("vgf").name
        'VGF'
    """
    if executor == VGF_TARGET:
        from vgf import VgfExecutor

        return VgfExecutor()
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    return executor


def executor_outputs(executor: str, graph: object, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``graph`` on ``inputs`` run by ``executor`` (``run --executor``).

    Example:
        >>> executor_outputs("vgf", "g.tosa", [x])   # doctest: +SKIP
        [array(...)]
    """
    if executor == VGF_TARGET:
        import vgf

        return vgf.run(graph, inputs)
    if executor == "reference":
        from tosa_verify import reference

        return list(reference.run(graph, inputs))
    from tosa_verify.interpreter import run

    return list(run(graph, inputs))
