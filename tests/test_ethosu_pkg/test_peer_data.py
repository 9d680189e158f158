"""The ExecuTorch results shipped for the default run (tests/data/ethosu_peer) are what
ExecuTorch lowers today, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SHIPPED = sorted((Path(__file__).resolve().parents[1] / "data" / "ethosu_peer").glob("*.json"))


def test_shipped_entries_match_the_installed_versions(peer_cache_key):
    """Each shipped entry's name carries the key of today's versions and ``_peer.py``; one that
    does not is dead weight (the fixture would lower again), so it must be regenerated."""
    assert SHIPPED, "no shipped ExecuTorch entries"
    for path in SHIPPED:
        model, _, rest = path.stem.partition("-")
        target = rest.rsplit("-", 1)[0]
        assert path.name == f"{model}-{target}-{peer_cache_key(model, target)}.json", (
            f"{path.name} is stale: run the slow test_shipped_peer_entries_are_what_executorch_lowers_today "
            "and copy .pytest_cache/d/ethosu_peer/<entry> here")


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem.rsplit("-", 1)[0] for p in SHIPPED])
def test_shipped_peer_entries_are_what_executorch_lowers_today(path, peer_module):
    model, _, rest = path.stem.partition("-")
    target = rest.rsplit("-", 1)[0]
    shipped = json.loads(path.read_text())
    fresh = peer_module.lower_with_executorch(model, target)
    assert bytes.fromhex(shipped["tosa"]) == fresh.tosa
    assert shipped["vela_summary_csv"] == fresh.vela_summary_csv
    assert (shipped["system_config"], shipped["memory_mode"]) == (fresh.system_config, fresh.memory_mode)
