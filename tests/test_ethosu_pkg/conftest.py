"""Fixtures for the ethosu package tests: INT TOSA graphs from ExecuTorch (cached) and tiny
hand-built graphs.

The ExecuTorch graphs come from ``benchmarks/_peer.py`` (quantize + EthosUPartitioner). Lowering
takes seconds, so each (model, target) result -- the TOSA flatbuffer ExecuTorch handed to Vela
and Vela's summary CSV from that run -- is kept in pytest's cache directory, keyed by the
torch/ExecuTorch/Vela versions and the source of ``_peer.py``.
"""

from __future__ import annotations

import json
import os
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER_PATH = ROOT / "benchmarks" / "_peer.py"
#: Entries the default run needs, shipped with the tests (a fresh clone has no pytest cache, and
#: each ExecuTorch lowering costs ~15 CPU seconds). Their names carry the same key as the cache's
#: (versions of torch, ExecuTorch, Vela, tosa-tools and the source of ``_peer.py``), so any change
#: makes them miss and the graph is lowered again; the slow test
#: ``test_shipped_peer_entries_are_what_executorch_lowers_today`` lowers them afresh and compares.
SHIPPED_DIR = ROOT / "tests" / "data" / "ethosu_peer"


def load_peer():
    """``benchmarks/_peer.py`` (on sys.path through pyproject's pytest ``pythonpath``)."""
    import _peer

    return _peer


def _cache_key(model: str, target: str) -> str:
    # the whole of _peer.py: the Vela half of its flow decides an entry's summary CSV too
    return load_peer().source_key(model, target, PEER_PATH.read_text(), version("ethos-u-vela"), length=20)


class PeerGraphs:
    """Serve a shipped entry (:data:`SHIPPED_DIR`) when its key is today's; otherwise lower on
    first use, then serve from pytest's cache (or a temp dir without cache)."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self._memo: dict[tuple[str, str], Any] = {}

    def __call__(self, model: str, target: str):
        key = (model, target)
        if key not in self._memo:
            self._memo[key] = self._load_or_lower(model, target)
        return self._memo[key]

    def _load_or_lower(self, model: str, target: str):
        name = f"{model}-{target}-{_cache_key(model, target)}.json"
        entry = SHIPPED_DIR / name
        if not entry.is_file():
            entry = self.cache_dir / name
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
        return _result(model, target, entry)

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


def _result(model: str, target: str, entry: Path):
    """The ``_peer.PeerResult`` an entry file holds."""
    meta = json.loads(entry.read_text())
    return load_peer().PeerResult(
        model, target, meta["system_config"], meta["memory_mode"], bytes.fromhex(meta["tosa"]),
        meta["vela_summary_csv"], meta["quantize_seconds"], meta["lower_seconds"], workdir=None,
    )


@pytest.fixture(scope="session")
def peer_graphs(request, tmp_path_factory) -> PeerGraphs:
    """``peer_graphs(model, target)`` -> ``_peer.PeerResult`` (models: ``_peer.MODELS``)."""
    cache = getattr(request.config, "cache", None)
    cache_dir = Path(cache.mkdir("ethosu_peer")) if cache is not None else tmp_path_factory.mktemp("peer")
    return PeerGraphs(cache_dir)


@pytest.fixture(scope="session")
def peer_cache_key():
    """``peer_cache_key(model, target)``: the key an entry of today's versions carries."""
    return _cache_key


@pytest.fixture(scope="session")
def peer_module():
    """The ``benchmarks/_peer.py`` module."""
    return load_peer()
