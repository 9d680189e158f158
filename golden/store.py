"""An atomic, versioned store of golden directories, one per case (model / profile / target).

A golden directory holds ``manifest.json`` (schema version, tool versions, model source hash,
quantization config, input seed, Vela summary figures, per-tensor provenance) and ``arrays.npz``
(inputs, outputs, and per TOSA tensor: min, max, mean, std, histogram in quantization steps, SQNR
vs float). Writes go to a temporary directory beside the target and are renamed into place, so a
reader never sees a half-written golden; an existing golden is replaced only when asked.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 1
SCHEMA_NAME = "tosa-verify-golden"
MANIFEST = "manifest.json"
ARRAYS = "arrays.npz"
#: Histogram bins, in quantization steps of the tensor's scale, centred on zero.
HIST_EDGES = np.arange(-128.5, 128.5 + 1, 1.0)


class GoldenError(Exception):
    """Base class of golden-store errors."""


class GoldenMissingError(GoldenError):
    """No golden recorded for this case."""


class GoldenExistsError(GoldenError):
    """A golden exists and the caller did not ask to update it."""


class GoldenCorruptError(GoldenError):
    """A golden directory is unreadable, incomplete, or of a foreign schema."""


@dataclass
class TensorStats:
    """Summary statistics of one TOSA tensor's values (in real units when a scale is known)."""

    min: float
    max: float
    mean: float
    std: float
    histogram: list[int]  # counts per quantization step, see HIST_EDGES
    sqnr_db: float | None = None  # vs the float model's activation, when known
    torch_node: str = ""
    module_path: str = ""


def tensor_stats(
    values: np.ndarray,
    *,
    scale: float | None = None,
    zero_point: int = 0,
    float_reference: np.ndarray | None = None,
    torch_node: str = "",
    module_path: str = "",
) -> TensorStats:
    """Statistics of a tensor: min/max/mean/std, a histogram in quantization steps, SQNR.

    Integer tensors with a ``scale`` are dequantized first; the histogram counts the values'
    distance from the mean in quantization steps (or raw units when no scale is known).

    >>> s = tensor_stats(np.array([0, 2, 4], np.int8), scale=0.5)
    >>> (s.min, s.max, s.mean)
    (0.0, 2.0, 1.0)
    """
    v = np.asarray(values)
    if v.dtype.kind == "V":
        raise ValueError("pass raw-view (bf16/fp8) tensors as float arrays")
    real = v.astype(np.float64)
    if scale is not None and v.dtype.kind in "iu":
        real = (real - zero_point) * scale
    step = scale if scale else 1.0
    if real.size == 0:
        return TensorStats(0.0, 0.0, 0.0, 0.0, [0] * (len(HIST_EDGES) - 1), None, torch_node, module_path)
    finite = real[np.isfinite(real)]
    centred = (finite - finite.mean()) / step if finite.size else finite
    hist, _ = np.histogram(np.clip(centred, HIST_EDGES[0], HIST_EDGES[-1]), bins=HIST_EDGES)
    sqnr = None
    if float_reference is not None:
        sqnr = sqnr_db(np.asarray(float_reference, np.float64).reshape(real.shape), real)
    return TensorStats(
        float(finite.min()) if finite.size else float("nan"),
        float(finite.max()) if finite.size else float("nan"),
        float(finite.mean()) if finite.size else float("nan"),
        float(finite.std()) if finite.size else float("nan"),
        [int(c) for c in hist],
        sqnr,
        torch_node,
        module_path,
    )


def sqnr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of ``test`` against ``reference`` in dB (inf if equal).

    >>> round(sqnr_db(np.array([1.0, -1.0]), np.array([1.1, -0.9])), 2)
    20.0
    """
    reference = np.asarray(reference, np.float64)
    noise = np.sum((reference - np.asarray(test, np.float64)) ** 2)
    signal = np.sum(reference**2)
    if noise == 0:
        return float("inf")
    if signal == 0:
        return float("-inf")
    return float(10 * np.log10(signal / noise))


@dataclass
class Golden:
    """One recorded case: manifest facts, arrays and per-tensor statistics."""

    manifest: dict[str, Any]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    stats: dict[str, TensorStats] = field(default_factory=dict)

    @property
    def versions(self) -> dict[str, str]:
        return dict(self.manifest.get("versions", {}))

    @property
    def performance(self) -> dict[str, Any]:
        """Vela summary figures per target (``{"ethos-u55-128": {"cycles": ...}}``)."""
        return dict(self.manifest.get("performance", {}))


def tool_versions() -> dict[str, str]:
    """Versions of tosa-verify and the tools whose behaviour a golden depends on."""
    from importlib import metadata

    versions = {}
    for dist in ("tosa-verify", "torch", "executorch", "tosa-tools", "ethos-u-vela"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


class GoldenStore:
    """A directory of goldens, one sub-directory per case id such as ``digits_cnn/INT/u55``.

    >>> store = GoldenStore(tmp_path)                     # doctest: +SKIP
    >>> store.write("mlp/INT", golden)                    # doctest: +SKIP
    >>> store.read("mlp/INT").outputs.keys()              # doctest: +SKIP
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def path(self, case: str) -> Path:
        """Directory of ``case``; case ids are relative paths without '..'."""
        parts = Path(case).parts
        if not parts or any(p in ("..", "") or p.startswith(".") for p in parts) or Path(case).is_absolute():
            raise GoldenError(f"invalid golden case id {case!r}")
        return self.root.joinpath(*parts)

    def exists(self, case: str) -> bool:
        return (self.path(case) / MANIFEST).exists()

    def cases(self) -> list[str]:
        """Every case id recorded under the root, sorted."""
        if not self.root.exists():
            return []
        found = []
        for manifest in self.root.rglob(MANIFEST):
            rel = manifest.parent.relative_to(self.root)
            if not any(p.startswith(".") for p in rel.parts):
                found.append(rel.as_posix())
        return sorted(found)

    def read(self, case: str) -> Golden:
        """Read a golden; GoldenMissingError if absent, GoldenCorruptError if unreadable."""
        directory = self.path(case)
        manifest_path = directory / MANIFEST
        if not manifest_path.exists():
            if directory.exists():
                raise GoldenCorruptError(f"golden {case!r} at {directory} has no {MANIFEST}")
            raise GoldenMissingError(f"no golden recorded for {case!r} under {self.root}")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as exc:
            raise GoldenCorruptError(f"golden {case!r}: unreadable {MANIFEST}: {exc}") from None
        if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA_NAME:
            raise GoldenCorruptError(f"golden {case!r}: {MANIFEST} is not a tosa-verify golden manifest")
        if manifest.get("schema_version") != SCHEMA_VERSION:
            raise GoldenCorruptError(
                f"golden {case!r}: schema version {manifest.get('schema_version')!r}, "
                f"this tosa-verify reads {SCHEMA_VERSION}; re-record it with the update flag"
            )
        try:
            with np.load(directory / ARRAYS, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise GoldenCorruptError(f"golden {case!r}: unreadable {ARRAYS}: {exc}") from None
        golden = Golden(manifest=manifest)
        for key, value in arrays.items():
            kind, _, name = key.partition("/")
            if kind == "input":
                golden.inputs[name] = value
            elif kind == "output":
                golden.outputs[name] = value
        try:
            golden.stats = {n: TensorStats(**s) for n, s in manifest.get("tensor_stats", {}).items()}
        except TypeError as exc:
            raise GoldenCorruptError(f"golden {case!r}: malformed tensor_stats: {exc}") from None
        for name in manifest.get("inputs", []):
            if name not in golden.inputs:
                raise GoldenCorruptError(f"golden {case!r}: input {name!r} listed but missing from {ARRAYS}")
        for name in manifest.get("outputs", []):
            if name not in golden.outputs:
                raise GoldenCorruptError(f"golden {case!r}: output {name!r} listed but missing from {ARRAYS}")
        return golden

    def write(self, case: str, golden: Golden, *, update: bool = False) -> Path:
        """Write a golden atomically. An existing one is replaced only with ``update=True``.

        A corrupt existing golden is never overwritten silently either: it takes ``update=True``.
        """
        directory = self.path(case)
        if directory.exists() and not update:
            raise GoldenExistsError(
                f"golden {case!r} exists at {directory}; pass the update flag to replace it"
            )
        directory.parent.mkdir(parents=True, exist_ok=True)
        manifest = dict(golden.manifest)
        manifest.update(
            schema=SCHEMA_NAME,
            schema_version=SCHEMA_VERSION,
            inputs=list(golden.inputs),
            outputs=list(golden.outputs),
            tensor_stats={n: asdict(s) for n, s in golden.stats.items()},
        )
        manifest.setdefault("versions", tool_versions())
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        try:
            arrays = {f"input/{k}": v for k, v in golden.inputs.items()}
            arrays.update({f"output/{k}": v for k, v in golden.outputs.items()})
            np.savez(staging / ARRAYS, **arrays)
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=_json_default))
            if directory.exists():
                # Swap: old -> trash (rename), staging -> target (rename), then delete trash.
                trash = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=directory.parent))
                os.replace(directory, trash / "golden")
                os.replace(staging, directory)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                os.replace(staging, directory)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return directory


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
