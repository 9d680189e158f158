"""Fixtures for the ethosu package tests: INT TOSA graphs from ExecuTorch (cached) and tiny
hand-built graphs.

The ExecuTorch graphs come from ``benchmarks/_peer.py`` (quantize + EthosUPartitioner). Lowering
takes seconds, so each (model, target) result -- the TOSA flatbuffer ExecuTorch handed to Vela
and Vela's summary CSV from that run -- is kept in pytest's cache directory, keyed by the
torch/ExecuTorch/Vela versions and the source of ``_peer.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER_PATH = ROOT / "benchmarks" / "_peer.py"


def load_peer():
    """Import ``benchmarks/_peer.py`` (the benchmarks directory is not a package)."""
    module = sys.modules.get("_peer")
    if module is None:
        spec = importlib.util.spec_from_file_location("_peer", PEER_PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules["_peer"] = module
        spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class PeerGraph:
    """An INT TOSA graph lowered by ExecuTorch, and what Vela reported inside that flow."""

    model: str
    target: str
    system_config: str
    memory_mode: str
    tosa: bytes
    vela_summary_csv: str


def _cache_key(model: str, target: str) -> str:
    parts = [model, target, PEER_PATH.read_text()]
    parts += [version(p) for p in ("torch", "executorch", "ethos-u-vela", "tosa-tools")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


class PeerGraphs:
    """Lower on first use, then serve from pytest's cache (or a temp dir without cache)."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self._memo: dict[tuple[str, str], PeerGraph] = {}

    def __call__(self, model: str, target: str) -> PeerGraph:
        key = (model, target)
        if key not in self._memo:
            self._memo[key] = self._load_or_lower(model, target)
        return self._memo[key]

    def _load_or_lower(self, model: str, target: str) -> PeerGraph:
        entry = self.cache_dir / f"{model}-{target}-{_cache_key(model, target)}.json"
        lock = entry.with_suffix(".lock")
        deadline = time.monotonic() + 600
        while not entry.is_file():
            try:  # one pytest-xdist worker lowers, the others wait for its cache entry
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                if time.monotonic() > deadline:  # a stale lock: lower here instead
                    lock.unlink(missing_ok=True)
                time.sleep(0.2)
                continue
            os.close(fd)
            try:
                self._lower_into(entry, model, target)
            finally:
                lock.unlink(missing_ok=True)
        meta = json.loads(entry.read_text())
        return PeerGraph(
            model, target, meta["system_config"], meta["memory_mode"],
            bytes.fromhex(meta["tosa"]), meta["vela_summary_csv"],
        )

    @staticmethod
    def _lower_into(entry: Path, model: str, target: str) -> None:
        result = load_peer().lower_with_executorch(model, target)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({
            "system_config": result.system_config,
            "memory_mode": result.memory_mode,
            "tosa": result.tosa.hex(),
            "vela_summary_csv": result.vela_summary_csv,
        }))
        os.replace(tmp, entry)  # atomic: readers never see a partial entry


@pytest.fixture(scope="session")
def peer_graphs(request, tmp_path_factory) -> PeerGraphs:
    """``peer_graphs(model, target)`` -> :class:`PeerGraph` (models: ``_peer.MODELS``)."""
    cache = getattr(request.config, "cache", None)
    cache_dir = Path(cache.mkdir("ethosu_peer")) if cache is not None else tmp_path_factory.mktemp("peer")
    return PeerGraphs(cache_dir)


@pytest.fixture(scope="session")
def peer_module():
    """The ``benchmarks/_peer.py`` module."""
    return load_peer()
