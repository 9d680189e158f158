"""The golden store: atomic writes, explicit updates, corruption reported, never overwritten silently."""

from __future__ import annotations

import json

import numpy as np
import pytest

from golden import (
    SCHEMA_VERSION,
    Golden,
    GoldenCorruptError,
    GoldenExistsError,
    GoldenMissingError,
    GoldenStore,
    tensor_stats,
)


def make_golden(output_shift: int = 0) -> Golden:
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, size=(1, 8), dtype=np.int8)
    y = (x.astype(np.int16) + output_shift).clip(-128, 127).astype(np.int8)
    return Golden(
        manifest={"model_hash": "abc", "input_seed": 0, "quantization": {"activations": "int8"}},
        inputs={"x": x},
        outputs={"y": y},
        stats={"y": tensor_stats(y, scale=0.1, torch_node="relu", module_path="net.relu")},
    )


def test_round_trip(tmp_path):
    store = GoldenStore(tmp_path)
    g = make_golden()
    store.write("mlp/INT", g)
    back = store.read("mlp/INT")
    np.testing.assert_array_equal(back.outputs["y"], g.outputs["y"])
    np.testing.assert_array_equal(back.inputs["x"], g.inputs["x"])
    assert back.stats["y"] == g.stats["y"]
    assert back.manifest["schema_version"] == SCHEMA_VERSION
    assert set(back.versions) >= {"torch", "executorch", "tosa-tools", "ethos-u-vela", "tosa-verify"}
    assert store.cases() == ["mlp/INT"]


def test_existing_golden_needs_the_update_flag(tmp_path):
    store = GoldenStore(tmp_path)
    store.write("c", make_golden(0))
    with pytest.raises(GoldenExistsError, match="update"):
        store.write("c", make_golden(1))
    np.testing.assert_array_equal(store.read("c").outputs["y"], make_golden(0).outputs["y"])
    store.write("c", make_golden(1), update=True)
    np.testing.assert_array_equal(store.read("c").outputs["y"], make_golden(1).outputs["y"])


def test_failed_write_leaves_the_old_golden_and_no_debris(tmp_path, monkeypatch):
    store = GoldenStore(tmp_path)
    store.write("c", make_golden(0))

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError, match="disk full"):
        store.write("c", make_golden(1), update=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(store.read("c").outputs["y"], make_golden(0).outputs["y"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_missing_and_corrupt_goldens_are_reported(tmp_path):
    store = GoldenStore(tmp_path)
    with pytest.raises(GoldenMissingError):
        store.read("nothing")
    store.write("c", make_golden())
    manifest = store.live_dir("c") / "manifest.json"
    manifest.write_text("{ not json")
    with pytest.raises(GoldenCorruptError, match="unreadable manifest.json"):
        store.read("c")
    manifest.write_text(json.dumps({"schema": "someone-else", "schema_version": 1}))
    with pytest.raises(GoldenCorruptError, match="not a tosa-verify golden"):
        store.read("c")
    # A corrupt golden is not replaced without the update flag either.
    with pytest.raises(GoldenExistsError):
        store.write("c", make_golden())


def test_foreign_schema_version_and_truncated_arrays(tmp_path):
    store = GoldenStore(tmp_path)
    store.write("c", make_golden())
    manifest = store.live_dir("c") / "manifest.json"
    data = json.loads(manifest.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    manifest.write_text(json.dumps(data))
    with pytest.raises(GoldenCorruptError, match="schema version"):
        store.read("c")
    data["schema_version"] = SCHEMA_VERSION
    manifest.write_text(json.dumps(data))
    arrays = store.live_dir("c") / "arrays.npz"
    arrays.write_bytes(arrays.read_bytes()[:40])
    with pytest.raises(GoldenCorruptError, match="arrays.npz"):
        store.read("c")


def test_case_ids_cannot_escape_the_root(tmp_path):
    store = GoldenStore(tmp_path)
    for bad in ("../x", "/abs", "a/../../b", ".hidden"):
        with pytest.raises(Exception, match="invalid golden case id"):
            store.path(bad)


def test_tensor_stats_are_in_real_units_and_quantization_steps():
    q = np.array([-2, 0, 2, 4], np.int8)
    s = tensor_stats(q, scale=0.5, zero_point=0, float_reference=np.array([-1.0, 0.0, 1.0, 2.0]))
    assert (s.min, s.max, s.mean) == (-1.0, 2.0, 0.5)
    assert s.std == pytest.approx(np.std([-1.0, 0.0, 1.0, 2.0]))
    assert s.sqnr_db == float("inf")
    # centred values in steps of 0.5: -3, -1, 1, 3 -> four bins, one count each
    assert sum(s.histogram) == 4 and max(s.histogram) == 1
