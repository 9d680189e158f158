"""The README's Python examples run as written (in order, in one namespace, in a scratch dir)."""

from __future__ import annotations

import re
from pathlib import Path

import lowering
from lowering import zoo

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    """The ```python blocks of README.md, in order."""
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # the interpreter example reads model.tosa: the zoo MLP lowered to INT
    model, example, calibration = zoo.mlp()
    lowering.lower(model, example, calibration=calibration).save(tmp_path)
    blocks = python_blocks()
    assert len(blocks) >= 4
    namespace: dict = {}
    printed = []
    for block in blocks:
        code = compile(block, str(README), "exec")
        if "def test_" in block:  # a pytest example: it needs the tosa_golden fixture (tests/golden)
            continue
        exec(code, namespace)
        printed.append((block, capsys.readouterr().out))
    assert (tmp_path / "out" / "model.tosa").exists() and (tmp_path / "model.pte").stat().st_size > 0
    compile_block = next(out for block, out in printed if "compile_tosa" in block)
    assert "rounding explainer" in compile_block and int(compile_block.split()[-1]) > 0  # drift table, cycles
