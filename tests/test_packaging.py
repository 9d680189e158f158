"""Packaging facts the project depends on."""

from __future__ import annotations

import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ethosu_is_a_namespace_portion_beside_vela() -> None:
    # An ethosu/__init__.py of ours would hide Vela's ethosu.vela.
    assert not (ROOT / "ethosu" / "__init__.py").exists()
    vela = importlib.import_module("ethosu.vela")
    assert hasattr(vela, "__path__")
    import ethosu

    paths = [Path(p).resolve() for p in ethosu.__path__]
    assert (ROOT / "ethosu").resolve() in paths
    assert any((p / "vela").is_dir() for p in paths)


def test_supported_ops_come_from_the_registry() -> None:
    import tosa_verify
    from tosa_verify.ops.registry import REGISTRY

    assert tuple(sorted(REGISTRY)) == tosa_verify.SUPPORTED_OPS
