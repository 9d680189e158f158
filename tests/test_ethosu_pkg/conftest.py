"""Fixtures for the ethosu package tests: INT TOSA graphs from ExecuTorch (cached) and tiny
hand-built graphs.

The ExecuTorch graphs come from ``benchmarks/_peer.py`` (quantize + EthosUPartitioner). Lowering
takes seconds, so each (model, target) result -- the TOSA flatbuffer ExecuTorch handed to Vela
and Vela's summary CSV from that run -- is kept in pytest's cache directory, keyed by the
torch/ExecuTorch/Vela versions and the source of ``_peer.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER_PATH = ROOT / "benchmarks" / "_peer.py"


def load_peer():
    """``benchmarks/_peer.py`` (on sys.path through pyproject's pytest ``pythonpath``)."""
    import _peer

    return _peer


def _cache_key(model: str, target: str) -> str:
    parts = [model, target, PEER_PATH.read_text()]
    parts += [version(p) for p in ("torch", "executorch", "ethos-u-vela", "tosa-tools")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


class PeerGraphs:
    """Lower on first use, then serve from pytest's cache (or a temp dir without cache)."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self._memo: dict[tuple[str, str], Any] = {}

    def __call__(self, model: str, target: str):
        key = (model, target)
        if key not in self._memo:
            self._memo[key] = self._load_or_lower(model, target)
        return self._memo[key]

    def _load_or_lower(self, model: str, target: str):
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
        return load_peer().PeerResult(
            model, target, meta["system_config"], meta["memory_mode"], bytes.fromhex(meta["tosa"]),
            meta["vela_summary_csv"], meta["quantize_seconds"], meta["lower_seconds"], workdir=None,
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
            "quantize_seconds": result.quantize_seconds,
            "lower_seconds": result.lower_seconds,
        }))
        os.replace(tmp, entry)  # atomic: readers never see a partial entry


@pytest.fixture(scope="session")
def peer_graphs(request, tmp_path_factory) -> PeerGraphs:
    """``peer_graphs(model, target)`` -> ``_peer.PeerResult`` (models: ``_peer.MODELS``)."""
    cache = getattr(request.config, "cache", None)
    cache_dir = Path(cache.mkdir("ethosu_peer")) if cache is not None else tmp_path_factory.mktemp("peer")
    return PeerGraphs(cache_dir)


@pytest.fixture(scope="session")
def peer_module():
    """The ``benchmarks/_peer.py`` module."""
    return load_peer()
