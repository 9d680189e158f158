"""The README runs as written: its first command passes and prints what the README shows, its
Python snippets run in order, each in a fresh namespace (self-contained), in a scratch directory,
and the pytest example records then compares its golden."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
CI_RUN = Path(__file__).resolve().parents[1] / ".ci" / "run"


def blocks(kind: str) -> list[str]:
    """The fenced blocks of one kind (python, bash, console) of README.md, in order."""
    return re.findall(rf"^```{kind}\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_first_command_passes_and_prints_what_the_readme_shows(capsys):
    from tosa_verify.cli import main

    first = blocks("bash")[0].strip()
    assert first == "pip install -e . && tosa-verify check"
    argv = shlex.split(first.split("&&")[1])[1:]
    assert main(argv) == 0
    out = capsys.readouterr().out
    shown = blocks("console")[0].strip().splitlines()
    assert shown[-1] == "RESULT: PASS" and out.rstrip().endswith("RESULT: PASS")
    for line in shown:  # the gate table, as printed
        assert line in out.splitlines(), line


def test_ci_runs_the_readme_test_command():
    section = README.read_text(encoding="utf-8").split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    command = re.search(r"```bash\n(.*?)\n```", section, flags=re.S).group(1)
    assert 'keep in sync with README.md "Run the tests"' in CI_RUN.read_text()
    assert command.split("&&")[1].strip() in CI_RUN.read_text()


def test_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    from golden import GoldenStore, Thresholds
    from golden.pytest_plugin import GoldenChecker

    monkeypatch.chdir(tmp_path)
    python = blocks("python")
    assert len(python) >= 4
    printed = []
    for block in python:
        namespace: dict = {}  # each snippet stands alone
        exec(compile(block, str(README), "exec"), namespace)
        tests = [f for name, f in namespace.items() if name.startswith("test_")]
        for test in tests:  # the pytest example: record (--tosa-golden-update), then compare
            store = GoldenStore(tmp_path / "tests" / "goldens")
            test(GoldenChecker(store, True, Thresholds()))
            assert store.cases() == ["digits_cnn/INT"]
            test(GoldenChecker(store, False, Thresholds()))
        printed.append((block, capsys.readouterr().out))
    assert (tmp_path / "model.tosa").exists() and (tmp_path / "out" / "model.tosa").exists()
    assert (tmp_path / "model.pte").stat().st_size > 0
    compile_block = next(out for block, out in printed if "compile_tosa" in block)
    assert compile_block.startswith("LoweredModel(DigitsCNN, INT, 1 TOSA graph")
    assert "rounding explainer" in compile_block and int(compile_block.split()[-1]) > 0  # drift table, cycles


@pytest.mark.parametrize("section", ["Run the tests", "Threads and speed", "Quick start: `tosa-verify check`"])
def test_sections_exist(section):
    assert f"\n## {section}\n" in README.read_text(encoding="utf-8")
