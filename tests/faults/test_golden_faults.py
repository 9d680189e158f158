"""Goldens under faults: killed writers, concurrent writers, corrupt files, links, odd names."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from golden import GoldenStore, diff
from golden.store import (
    CURRENT,
    LOCK,
    GoldenConflictError,
    GoldenCorruptError,
    GoldenError,
    GoldenExistsError,
    GoldenMissingError,
)

from . import bombs
from .golden_writer import golden
from .helpers import ROOT

CASE = "model/INT"


def _writer(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-m", "tests.faults.golden_writer", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _entries(store: GoldenStore) -> list[str]:
    return sorted(p.name for p in store.path(CASE).iterdir())


def _assert_clean(store: GoldenStore) -> None:
    """One live version, its pointer and the lock file: nothing a killed writer left."""
    entries = _entries(store)
    versions = [e for e in entries if e.startswith(".v.")]
    assert len(versions) == 1 and set(entries) == {CURRENT, LOCK, versions[0]}, entries
    assert not [p for p in store.path(CASE).parent.iterdir() if p.name.startswith(".")]


def _kill_during_updates(tmp_path: Path, kills: int) -> None:
    store = GoldenStore(tmp_path)
    store.write(CASE, golden(0))
    rng = random.Random(12)
    seen_values = set()
    mid_write = 0
    for _ in range(kills):
        before = int(store.read(CASE).outputs["y"][0])
        proc = _writer("loop", str(tmp_path), CASE, "0.05")
        assert proc.stdout.readline().startswith("wrote"), proc.stderr.read()  # it is writing
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        got = store.read(CASE)  # never absent, never half-written
        value = int(got.outputs["y"][0])
        assert np.array_equal(got.outputs["y"], np.full(4096, value, np.int32))
        assert value >= 0 and (value == before or value >= 1)
        seen_values.add(value)
        mid_write += any(e.startswith((".staging.", ".CURRENT.")) for e in _entries(store)) or \
            sum(e.startswith(".v.") for e in _entries(store)) > 1
    # next write: the leftovers of every kill are gone
    store.write(CASE, golden(-1), update=True)
    _assert_clean(store)
    assert int(store.read(CASE).outputs["y"][0]) == -1
    # some kills landed in the middle of a write (its staging, pointer or version left behind);
    # which write they hit depends on the machine's load, so the values seen are not asserted
    assert mid_write > 0, seen_values


def test_ten_kills_during_golden_updates(tmp_path: Path) -> None:
    _kill_during_updates(tmp_path, 10)


@pytest.mark.slow
def test_a_hundred_kills_during_golden_updates(tmp_path: Path) -> None:
    _kill_during_updates(tmp_path, 100)


def test_a_kill_at_every_step_of_a_write(tmp_path: Path, monkeypatch) -> None:
    """Stop a write after each file-system step (as a kill would) and read the golden back."""
    import golden.store as store_module

    steps = ["np.savez", "rename", "switch"]
    for stop_at in steps:
        root = tmp_path / stop_at
        store = GoldenStore(root)
        store.write(CASE, golden(1))

        class Killed(BaseException):
            pass

        def die(*_args, **_kwargs):
            raise Killed

        with monkeypatch.context() as m:
            if stop_at == "np.savez":
                m.setattr(store_module.np, "savez", die)
            elif stop_at == "rename":
                m.setattr(store_module.os, "rename", die)
            else:
                m.setattr(store_module, "_replace", die)
            with pytest.raises(Killed):
                store.write(CASE, golden(2), update=True)
        assert int(store.read(CASE).outputs["y"][0]) == 1  # the old golden, whole
        store.write(CASE, golden(3), update=True)
        _assert_clean(store)


def test_concurrent_writers_serialize_and_the_loser_is_told(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path)
    store.write(CASE, golden(0))
    writers = [_writer("race", str(tmp_path), CASE, "4", "0.1") for _ in range(2)]
    results = [w.communicate(timeout=120) for w in writers]
    lines = []
    for (out, err), w in zip(results, writers, strict=True):
        assert w.returncode == 0, err  # no raw FileNotFoundError / ENOTEMPTY, nothing unhandled
        lines += out.split("\n")
    recorded = [line for line in lines if line == "recorded"]
    conflicts = [line for line in lines if line.startswith("conflict")]
    assert len(recorded) + len(conflicts) == 8
    assert conflicts and recorded  # they overlapped, and each overlap had one winner
    assert all("was replaced by another writer" in line for line in conflicts)
    assert int(store.read(CASE).outputs["y"][0]) in {w.pid for w in writers}
    store.write(CASE, golden(1), update=True)
    _assert_clean(store)


def test_the_update_flag_and_the_expected_version(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path)
    assert store.version(CASE) is None
    store.write(CASE, golden(0))
    with pytest.raises(GoldenExistsError):
        store.write(CASE, golden(1))
    seen = store.version(CASE)
    store.write(CASE, golden(1), update=True)
    with pytest.raises(GoldenConflictError, match="was replaced by another writer"):
        store.write(CASE, golden(2), update=True, expected=seen)
    assert int(store.read(CASE).outputs["y"][0]) == 1


# --------------------------------------------------------------------------- corrupt goldens


def _live(store: GoldenStore) -> Path:
    return store.live_dir(CASE)


def test_a_zip_bomb_in_a_golden_is_refused_unopened(tmp_path: Path, monkeypatch) -> None:
    store = GoldenStore(tmp_path)
    store.write(CASE, golden(0))
    arrays = _live(store) / "arrays.npz"
    bombs.zip_bomb_npz(arrays)
    assert bombs.expands_to(arrays) > 3 << 30
    # the manifest says output/y is int32[4096]: the member's header disagrees before any data is read
    with pytest.raises(GoldenCorruptError, match="the manifest says"):
        store.read(CASE)
    # a flat-layout golden has no shapes in its manifest: the memory budget refuses it
    manifest = json.loads((_live(store) / "manifest.json").read_text())
    del manifest["arrays"]
    (_live(store) / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("TOSA_VERIFY_MAX_MEMORY", "1G")
    with pytest.raises(GoldenCorruptError, match="memory budget"):
        store.read(CASE)


def test_the_golden_verb_on_a_zip_bomb_in_a_child_under_2_gib(tmp_path: Path) -> None:
    from .helpers import assert_one_line_error, run_cli

    for side in ("old", "new"):
        GoldenStore(tmp_path / side).write(CASE, golden(0))
    bombs.zip_bomb_npz(GoldenStore(tmp_path / "new").live_dir(CASE) / "arrays.npz")
    outcome = run_cli(["golden", str(tmp_path / "old"), str(tmp_path / "new")],
                      env={"TOSA_VERIFY_MAX_MEMORY": "1G"})
    assert_one_line_error(outcome, "golden", contains="arrays.npz")
    assert outcome.seconds < 30 and outcome.max_rss_bytes < 2 << 30


@pytest.mark.parametrize("damage", ["truncated arrays", "truncated manifest", "empty arrays", "no arrays",
                                    "member renamed", "extra member", "pointer to nowhere", "garbage pointer"])
def test_damaged_goldens_are_corrupt_not_crashes(tmp_path: Path, damage: str) -> None:
    store = GoldenStore(tmp_path)
    store.write(CASE, golden(0))
    live = _live(store)
    arrays, manifest = live / "arrays.npz", live / "manifest.json"
    if damage == "truncated arrays":
        arrays.write_bytes(arrays.read_bytes()[:200])
    elif damage == "truncated manifest":
        manifest.write_text(manifest.read_text()[:50])
    elif damage == "empty arrays":
        arrays.write_bytes(b"")
    elif damage == "no arrays":
        arrays.unlink()
    elif damage == "member renamed":
        np.savez(arrays, **{"input/x": np.arange(16, dtype=np.int8), "output/z": np.zeros(4096, np.int32)})
    elif damage == "extra member":
        np.savez(arrays, **{"input/x": np.arange(16, dtype=np.int8), "output/y": np.zeros(4096, np.int32),
                            "output/extra": np.zeros(1)})
    elif damage == "pointer to nowhere":
        (store.path(CASE) / CURRENT).write_text(".v.1-1-ab\n")
    else:
        (store.path(CASE) / CURRENT).write_text("../../etc\n")
    with pytest.raises(GoldenCorruptError):
        store.read(CASE)


@pytest.mark.parametrize(("field", "value"), [
    ("inputs", "x"), ("outputs", [1]), ("tensor_stats", []), ("tensor_stats", {"y": {"min": None}}),
    ("performance", {"u55": {"cycles": "many"}}), ("versions", ["torch"]), ("arrays", {"output/y": {"shape": 3}}),
    ("quantization", "int8"), ("schema_version", "1"),
])
def test_manifest_fields_of_the_wrong_type(tmp_path: Path, field: str, value) -> None:
    store = GoldenStore(tmp_path)
    store.write(CASE, golden(0))
    path = _live(store) / "manifest.json"
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(GoldenCorruptError, match=field.replace("_", ".") if field != "schema_version" else "schema"):
        store.read(CASE)


# --------------------------------------------------------------------------- links and names


def test_symlinks_in_the_store_are_refused(tmp_path: Path) -> None:
    outside = GoldenStore(tmp_path / "outside")
    outside.write(CASE, golden(7))
    store = GoldenStore(tmp_path / "store")
    store.write("real/INT", golden(0))
    (store.root / "linked").symlink_to(outside.root / "model", target_is_directory=True)
    with pytest.raises(GoldenError, match="symlink"):
        store.read("linked/INT")
    with pytest.raises(GoldenError, match="symlink"):
        store.write("linked/INT", golden(1), update=True)
    with pytest.raises(GoldenCorruptError, match="symlink"):
        store.cases()
    with pytest.raises(GoldenError, match="symlink"):
        diff(store, outside)
    assert int(outside.read(CASE).outputs["y"][0]) == 7  # nothing outside was touched
    (store.root / "linked").unlink()
    live = store.live_dir("real/INT")
    (live / "arrays.npz").unlink()
    (live / "arrays.npz").symlink_to(outside.live_dir(CASE) / "arrays.npz")
    with pytest.raises(GoldenCorruptError, match="not a regular file"):
        store.read("real/INT")


@pytest.mark.parametrize("case", ["a\x00b", "../escape", "a/../../b", "/abs", "a//b", "a/", ".hidden", "a/.v.1",
                                  "a\\b", "a\nb", "CURRENT", "m/manifest.json", "", "x" * 300])
def test_odd_case_names_are_refused_clearly(tmp_path: Path, case: str) -> None:
    store = GoldenStore(tmp_path)
    for action in (lambda: store.write(case, golden(0)), lambda: store.read(case)):
        with pytest.raises(GoldenError, match="invalid golden case id") as info:
            action()
        assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_stale_leftovers_are_cleaned_on_the_next_write(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path)
    store.write(CASE, golden(0))
    directory = store.path(CASE)
    (directory / ".staging.1-2-ab").mkdir()
    (directory / ".staging.1-2-ab" / "arrays.npz").write_bytes(b"x" * 1000)
    (directory / ".v.2-3-cd").mkdir()  # a version written but never switched to
    (directory / ".CURRENT.3-4-ef").write_text(".v.2-3-cd\n")
    (directory.parent / ".INT.old.xyz").mkdir()  # the flat layout's trash
    assert int(store.read(CASE).outputs["y"][0]) == 0  # leftovers do not confuse a reader
    store.write(CASE, golden(1), update=True)
    _assert_clean(store)


def test_flat_layout_goldens_are_read_and_migrated(tmp_path: Path) -> None:
    """The layout before versioned directories: manifest.json and arrays.npz in the case dir."""
    store = GoldenStore(tmp_path)
    store.write(CASE, golden(5))
    live = store.live_dir(CASE)
    flat = store.path(CASE)
    manifest = json.loads((live / "manifest.json").read_text())
    del manifest["arrays"]  # the flat layout did not record shapes
    for name in os.listdir(flat):
        path = flat / name
        if path.is_dir():
            (path / "arrays.npz").rename(flat / "arrays.npz")
            for f in path.iterdir():
                f.unlink()
            path.rmdir()
        else:
            path.unlink()
    (flat / "manifest.json").write_text(json.dumps(manifest))
    assert sorted(os.listdir(flat)) == ["arrays.npz", "manifest.json"]
    assert store.cases() == [CASE]
    assert int(store.read(CASE).outputs["y"][0]) == 5
    with pytest.raises(GoldenExistsError):
        store.write(CASE, golden(6))
    store.write(CASE, golden(6), update=True)
    _assert_clean(store)
    assert int(store.read(CASE).outputs["y"][0]) == 6


def test_missing_is_missing(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path)
    with pytest.raises(GoldenMissingError):
        store.read(CASE)
    with pytest.raises(GoldenMissingError, match="does not exist"):
        diff(tmp_path / "nope1", tmp_path / "nope2")


def test_a_writer_that_cannot_get_the_lock_is_told(tmp_path: Path) -> None:
    import fcntl

    from golden.store import GoldenBusyError

    store = GoldenStore(tmp_path)
    store.write(CASE, golden(0))
    with open(store.path(CASE) / LOCK, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another writer, mid-update
        start = time.monotonic()
        with pytest.raises(GoldenBusyError, match="being written by another process"):
            store.write(CASE, golden(1), update=True, lock_timeout=0.3)
        assert 0.3 <= time.monotonic() - start < 10
        assert int(store.read(CASE).outputs["y"][0]) == 0  # readers never wait for the lock
    store.write(CASE, golden(1), update=True)
    assert int(store.read(CASE).outputs["y"][0]) == 1
