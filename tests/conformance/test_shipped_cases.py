"""The shipped conformance cases (``shipped.py``) are the ones the default run asks for, and
exactly what tosa-tools' generator writes today."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import shipped
from .harness import generate


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".complete"}


def test_the_default_run_finds_its_cases_in_the_archive(tmp_path, monkeypatch) -> None:
    """A key change (generator arguments, tosa-tools version) makes the archive dead weight:
    then this fails until the archive is rebuilt (see shipped.py)."""
    monkeypatch.setenv("TOSA_VERIFY_CTS_CACHE", str(tmp_path))
    shipped.unpack(tmp_path)
    unpacked = {d.name for d in tmp_path.iterdir() if (d / ".complete").exists()}
    for op in ("ADD", "RESCALE", "CONV2D"):
        assert generate(op).name in unpacked, f"{op}: its cases are not in {shipped.ARCHIVE.name}"
    assert len(unpacked) >= 90, "the archive holds the default run's ~98 case directories"


def test_unpack_keeps_a_case_directory_already_there(tmp_path) -> None:
    shipped.unpack(tmp_path)
    victim = next(d for d in sorted(tmp_path.iterdir()) if (d / ".complete").exists())
    (victim / "mine.txt").write_text("kept")
    for marker in tmp_path.glob(".shipped-*"):
        marker.unlink()
    shipped.unpack(tmp_path)
    assert (victim / "mine.txt").read_text() == "kept"


@pytest.mark.slow
@pytest.mark.parametrize("op", ["ADD", "RESCALE", "CONV2D", "MATMUL"])
def test_shipped_cases_are_what_the_generator_writes_today(op, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TOSA_VERIFY_CTS_CACHE", str(tmp_path / "shipped"))
    from_archive = generate(op)
    monkeypatch.setenv("TOSA_VERIFY_CTS_CACHE", str(tmp_path / "fresh"))
    monkeypatch.setenv("TOSA_VERIFY_CTS_SHIPPED", "0")
    regenerated = generate(op)
    assert from_archive.name == regenerated.name
    assert _files(from_archive) == _files(regenerated)
