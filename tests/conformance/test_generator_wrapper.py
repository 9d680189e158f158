"""Our wrapper of tosa-tools' generator (``_generator.py``) writes the same cases, byte for byte,
as the generator with its own ``copy.deepcopy``."""

from __future__ import annotations

from pathlib import Path

from .harness import generate


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_fast_deepcopy_writes_the_same_cases(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TOSA_VERIFY_CTS_SHIPPED", "0")
    monkeypatch.setenv("TOSA_VERIFY_CTS_CACHE", str(tmp_path / "fast"))
    fast = _files(generate("MUL"))
    monkeypatch.setenv("TOSA_VERIFY_CTS_CACHE", str(tmp_path / "plain"))
    monkeypatch.setenv("TOSA_VERIFY_GENERATOR_PLAIN_DEEPCOPY", "1")
    plain = _files(generate("MUL"))
    assert any(name.endswith(".tosa") for name in plain), "the generator wrote no graphs"
    assert fast == plain
