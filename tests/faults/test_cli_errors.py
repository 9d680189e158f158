"""Every verb, every kind of bad argument: one line ``tosa-verify <verb>: error: ...``, exit 2.

The verb list comes from the argument parser itself, so a verb added later is walked too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tosa_verify.cli import build_parser, main

from . import graphs
from .helpers import assert_one_line_error, run_cli

#: A path that names nothing; shaped like a model spec too, so MODEL arguments fail before torch loads
MISSING = "/nonexistent-dir/missing.py:build"


def _verbs() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


VERBS = _verbs()


def _bad_invocations(verb: str, parser: argparse.ArgumentParser) -> list[list[str]]:
    """Argument lists that must fail: an unknown option, and every positional a missing file
    (required options filled with a missing path too)."""
    filled = [verb]
    for action in parser._actions:
        if action.option_strings:
            if action.required:
                filled += [action.option_strings[0], MISSING]
        elif action.nargs != argparse.SUPPRESS:
            filled.append(MISSING)
    return [[verb, "--no-such-option"], filled]


def _main(args: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's usage errors leave through parse_args
        code = exc.code
    return code, capsys.readouterr().err


def test_the_walk_covers_every_documented_verb() -> None:
    assert {"run", "info", "diff", "lower", "compile", "support", "golden", "check"} <= set(VERBS)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_fails_with_one_line(verb: str, capsys) -> None:
    for args in _bad_invocations(verb, VERBS[verb]):
        assert_one_line_error(_main(args, capsys), verb)


def test_a_bad_verb_and_no_verb_are_one_line_too(capsys) -> None:
    for args in (["frobnicate"], []):
        code, err = _main(args, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("tosa-verify: error: ")


def _unwritable(tmp_path: Path) -> str:
    """A path no one can write: below a regular file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return str(blocker / "out")


@pytest.fixture
def add_graph(tmp_path: Path) -> tuple[Path, Path, Path]:
    graph = tmp_path / "add.tosa"
    graph.write_bytes(graphs.add())
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.ones((2, 3), np.int32))
    np.save(b, np.full((2, 3), 2, np.int32))
    return graph, a, b


def test_unwritable_outputs_and_bad_inputs(tmp_path: Path, add_graph, capsys) -> None:
    graph, a, b = add_graph
    bad = _unwritable(tmp_path)
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    wrong_state = tmp_path / "state.npz"
    np.savez(wrong_state, v=np.zeros(3, np.float64))
    cases = [
        ["run", str(graph), "-i", str(a), "-i", str(b), "-o", bad],
        ["run", str(graph), "-i", str(a), "-i", str(b), "--variables", str(tmp_path / "no" / "such" / "s.npz")],
        ["run", str(graph), "-i", str(empty), "-i", str(b)],
        ["run", str(graph), "-i", str(tmp_path / "missing.npy"), "-i", str(b)],
        ["diff", str(graph), "--input", str(a), "--input", str(b), "--json", bad],
        ["diff", str(graph), "--input", str(empty), "--input", str(b)],
        ["golden", str(tmp_path / "nope1"), str(tmp_path / "nope2")],
        ["compile", str(graph), "-t", "ethos-u55-128", "--json", bad],
        ["compile", str(graph), "-t", "ethos-u55-128", "-o", bad],
    ]
    for args in cases:
        line = assert_one_line_error(_main(args, capsys), args[0])
        assert "Errno" not in line or "[Errno" not in line, line
    # nothing half-written: run refused before writing outputs into the unwritable place
    assert not (tmp_path / "a-file").is_dir()


def test_the_golden_verb_gates_on_missing_and_malformed_goldens(tmp_path: Path, capsys) -> None:
    from golden import Golden, GoldenStore, tensor_stats

    y = np.arange(4, dtype=np.int8)
    for side in ("old", "new"):
        GoldenStore(tmp_path / side).write("m/INT", Golden(manifest={}, inputs={"x": y}, outputs={"y": y},
                                                           stats={"y": tensor_stats(y)}))
    assert _main(["golden", str(tmp_path / "old"), str(tmp_path / "new")], capsys)[0] == 0
    (tmp_path / "empty1").mkdir()
    (tmp_path / "empty2").mkdir()
    line = assert_one_line_error(_main(["golden", str(tmp_path / "empty1"), str(tmp_path / "empty2")], capsys),
                                 "golden")
    assert "nothing to compare" in line
    manifest = GoldenStore(tmp_path / "new").live_dir("m/INT") / "manifest.json"
    data = json.loads(manifest.read_text())
    for field, value in (("outputs", "y"), ("tensor_stats", {"y": {"min": "low"}}), ("performance", [1]),
                         ("versions", {"torch": 2})):
        broken = dict(data, **{field: value})
        manifest.write_text(json.dumps(broken))
        line = assert_one_line_error(_main(["golden", str(tmp_path / "old"), str(tmp_path / "new")], capsys),
                                     "golden")
        assert field in line
    manifest.write_text(json.dumps(data))
    bad = _unwritable(tmp_path)
    assert_one_line_error(_main(["golden", str(tmp_path / "old"), str(tmp_path / "new"), "--json", bad], capsys),
                          "golden")


EXITING_MODEL = """
import sys

def build():
    sys.exit({code})
"""

UNEXPORTABLE_MODEL = """
import torch

class Branchy(torch.nn.Module):
    def forward(self, x):
        if float(x.sum()) > 0:  # data-dependent Python control flow: torch.export cannot trace it
            return x + 1
        return x - 1

def build():
    return Branchy(), (torch.ones(1, 4),)
"""


@pytest.mark.parametrize("code", [0, None, 3])
def test_a_model_that_exits_is_an_error_not_a_pass(tmp_path: Path, code, capsys) -> None:
    model = tmp_path / "exits.py"
    model.write_text(EXITING_MODEL.format(code=code))
    for verb in ("lower", "check"):
        args = [verb, f"{model}:build", "-o" if verb == "lower" else "--no-vela",
                *([str(tmp_path / "out")] if verb == "lower" else [])]
        line = assert_one_line_error(_main(args, capsys), verb)
        assert "sys.exit" in line


def test_the_console_script_path_gives_the_same_line(tmp_path: Path) -> None:
    """Through a real process: exit status and stderr as a CI job sees them."""
    model = tmp_path / "exits.py"
    model.write_text(EXITING_MODEL.format(code=0))
    outcome = run_cli(["lower", f"{model}:build", "-o", str(tmp_path / "out")])
    assert_one_line_error(outcome, "lower", contains="sys.exit")


def test_lower_of_an_unexportable_model(tmp_path: Path, capsys) -> None:
    """torch.export fails (and prints a partial graph on stderr): still one line, exit 2."""
    model = tmp_path / "branchy.py"
    model.write_text(UNEXPORTABLE_MODEL)
    assert_one_line_error(_main(["lower", f"{model}:build", "-o", str(tmp_path / "out")], capsys), "lower")


@pytest.mark.slow
def test_lower_of_an_unexportable_model_through_the_console_script(tmp_path: Path) -> None:
    model = tmp_path / "branchy.py"
    model.write_text(UNEXPORTABLE_MODEL)
    assert_one_line_error(run_cli(["lower", f"{model}:build", "-o", str(tmp_path / "out")]), "lower")


def test_lower_into_an_unwritable_directory(tmp_path: Path, capsys) -> None:
    args = ["lower", "lowering.zoo:mlp", "--profile", "FP", "-o", _unwritable(tmp_path)]
    assert_one_line_error(_main(args, capsys), "lower")


def test_debug_mode_still_shows_tracebacks_of_unknown_errors(monkeypatch, capsys) -> None:
    """TOSA_VERIFY_DEBUG=1 re-raises errors that are not the user's input (for bug reports)."""
    import tosa_verify.cli as cli

    def boom(_args):
        raise RuntimeError("a bug of ours")

    parser = build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._actions[-1].choices["info"].set_defaults(func=boom)
    line = assert_one_line_error(_main(["info", "x.tosa"], capsys), "info")
    assert "RuntimeError: a bug of ours" in line
    monkeypatch.setenv("TOSA_VERIFY_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["info", "x.tosa"])


if sys.platform != "linux":  # pragma: no cover - the store's lock and the tests use Linux facilities
    pytest.fail("tests/faults runs on Linux", pytrace=False)
assert os.sep == "/"
