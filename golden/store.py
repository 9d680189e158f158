"""An atomic, versioned store of golden directories, one per case (model / profile / target).

A golden directory holds ``manifest.json`` (schema version, tool versions, model source hash,
quantization config, input seed, Vela summary figures, per-tensor provenance) and ``arrays.npz``
(inputs, outputs, and per TOSA tensor: min, max, mean, std, histogram in quantization steps, SQNR
vs float).

On disk a case directory holds versions and one pointer::

    digits_cnn/INT/CURRENT            the name of the live version, e.g. ".v.18f3...-4242-9c1e"
    digits_cnn/INT/.v.18f3...-4242-9c1e/{manifest.json, arrays.npz}
    digits_cnn/INT/.lock              fcntl lock serializing writers

A write builds the new version in a staging directory beside the live one, renames it to its
version name, then replaces ``CURRENT`` with ``os.replace``: the single atomic step. A reader
(or a writer killed at any point) therefore sees the old golden or the new one, never none;
what a killed writer leaves (staging, an unreferenced version) is removed by the next write.
Writers hold the case's lock; one that finds the golden changed since it started is told
(:class:`GoldenConflictError`) instead of silently overwriting. Symlinks inside the store and
case ids with odd characters are refused. Goldens of the earlier flat layout (``manifest.json``
directly in the case directory) are still read, and replaced by the versioned layout on update.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 1
SCHEMA_NAME = "tosa-verify-golden"
MANIFEST = "manifest.json"
ARRAYS = "arrays.npz"
CURRENT = "CURRENT"
LOCK = ".lock"
VERSION_PREFIX = ".v."
STAGING_PREFIX = ".staging."
#: Seconds a writer waits for another writer of the same case before giving up.
LOCK_TIMEOUT = 120.0
_RESERVED = {CURRENT, MANIFEST, ARRAYS}
_VERSION_NAME = re.compile(r"^\.v\.[0-9a-f]+-[0-9]+-[0-9a-f]+$")
#: The atomic switch of a write; a module attribute so fault tests can slow it down.
_replace = os.replace
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


class GoldenBusyError(GoldenError):
    """Another writer held the case's lock for longer than :data:`LOCK_TIMEOUT`."""


class GoldenConflictError(GoldenError):
    """Another writer replaced the golden while this one was recording; nothing was written."""


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

    # ------------------------------------------------------------------ names and paths

    def path(self, case: str) -> Path:
        """Directory of ``case``; raises :class:`GoldenError` for an id that is not a plain
        relative path (NUL or control characters, backslashes, empty, ``.``/``..`` or hidden
        parts, reserved names) or that leads through a symlink."""
        if not isinstance(case, str) or not case:
            raise GoldenError(f"invalid golden case id {case!r}: empty or not a string")
        bad = next((c for c in case if ord(c) < 32 or c in "\\\x7f"), None)
        if bad is not None:
            raise GoldenError(f"invalid golden case id {case!r}: contains the character {bad!r}")
        parts = case.split("/")
        for part in parts:
            if part in ("", ".", "..") or part.startswith(".") or part in _RESERVED:
                raise GoldenError(f"invalid golden case id {case!r}: part {part!r} is empty, relative, "
                                  "hidden or reserved (use names like model/INT)")
            if len(part.encode()) > 200:
                raise GoldenError(f"invalid golden case id {case!r}: part longer than 200 bytes")
        directory = self.root.joinpath(*parts)
        walked = self.root
        for part in parts:
            walked = walked / part
            if walked.is_symlink():
                raise GoldenError(f"golden case {case!r}: {walked} is a symlink; the store does not follow links")
        return directory

    def exists(self, case: str) -> bool:
        directory = self.path(case)
        return (directory / CURRENT).exists() or (directory / MANIFEST).exists()

    def version(self, case: str) -> str | None:
        """The live version of ``case`` (``None`` when none is recorded): pass it to
        :meth:`write` as ``expected`` to detect a concurrent writer."""
        directory = self.path(case)
        current = self._current(case, directory)
        if current is not None:
            return current
        return MANIFEST if (directory / MANIFEST).exists() else None

    def live_dir(self, case: str) -> Path:
        """The directory holding the live ``manifest.json`` and ``arrays.npz`` of ``case``.

        >>> store.live_dir("mlp/INT") / "manifest.json"   # doctest: +SKIP
        PosixPath('goldens/mlp/INT/.v.18f3a9c2e1b0-4242-9c1e/manifest.json')
        """
        directory = self.path(case)
        current = self._current(case, directory)
        if current is not None:
            return directory / current
        if (directory / MANIFEST).exists():
            return directory
        raise GoldenMissingError(f"no golden recorded for {case!r} under {self.root}")

    def cases(self) -> list[str]:
        """Every case id recorded under the root, sorted; a symlink inside the store is an error."""
        if not self.root.exists():
            return []
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            here = Path(dirpath)
            for name in dirnames + filenames:
                if (here / name).is_symlink():
                    raise GoldenCorruptError(f"golden store {self.root} holds a symlink {here / name}; "
                                             "the store does not follow links")
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if CURRENT in filenames or MANIFEST in filenames:
                rel = here.relative_to(self.root)
                if rel.parts:
                    found.append(rel.as_posix())
        return sorted(found)

    # ------------------------------------------------------------------ reading

    def _current(self, case: str, directory: Path) -> str | None:
        """The version name ``CURRENT`` points at, or None when there is no pointer."""
        pointer = directory / CURRENT
        try:
            if pointer.is_symlink():
                raise GoldenCorruptError(f"golden {case!r}: {pointer} is a symlink")
            text = pointer.read_text(encoding="ascii", errors="replace")[:200].strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise GoldenCorruptError(f"golden {case!r}: unreadable {CURRENT}: {exc.strerror}") from None
        if not _VERSION_NAME.match(text):
            raise GoldenCorruptError(f"golden {case!r}: {CURRENT} names no version ({text[:40]!r})")
        return text

    def read(self, case: str) -> Golden:
        """Read a golden; GoldenMissingError if absent, GoldenCorruptError if unreadable."""
        directory = self.path(case)
        for _ in range(20):
            current = self._current(case, directory)
            if current is None:
                break
            version_dir = directory / current
            if version_dir.is_dir():
                try:
                    return self._read_version(case, version_dir)
                except GoldenCorruptError:
                    if self._current(case, directory) == current:
                        raise
            elif self._current(case, directory) == current:
                raise GoldenCorruptError(f"golden {case!r}: {CURRENT} names {current}, which is missing")
            # a writer switched CURRENT and removed the old version while we read it: read again
        else:
            raise GoldenCorruptError(f"golden {case!r}: keeps changing while being read")
        if (directory / MANIFEST).exists():
            return self._read_version(case, directory)  # the earlier flat layout
        # Hidden leftovers of a first write that was killed mean "never recorded"; a plain file
        # without a manifest or pointer is a damaged golden.
        stray = sorted(p.name for p in directory.iterdir() if not p.name.startswith(".") and not p.is_dir()) \
            if directory.is_dir() else []
        if stray:
            raise GoldenCorruptError(f"golden {case!r} at {directory} has {stray} but no {CURRENT} or {MANIFEST}")
        raise GoldenMissingError(f"no golden recorded for {case!r} under {self.root}")

    def _read_version(self, case: str, directory: Path) -> Golden:
        for name in (MANIFEST, ARRAYS):
            try:
                mode = os.lstat(directory / name).st_mode
            except FileNotFoundError:
                raise GoldenCorruptError(f"golden {case!r}: {name} is missing in {directory}") from None
            if not stat.S_ISREG(mode):
                raise GoldenCorruptError(f"golden {case!r}: {directory / name} is not a regular file")
        manifest_path = directory / MANIFEST
        try:
            if manifest_path.stat().st_size > 256 << 20:
                raise GoldenCorruptError(f"golden {case!r}: {MANIFEST} is larger than 256 MiB")
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise GoldenCorruptError(f"golden {case!r}: unreadable {MANIFEST}: {' '.join(str(exc).split())}") from None
        _check_manifest(case, manifest)
        arrays = _read_arrays(case, directory / ARRAYS, manifest)
        golden = Golden(manifest=manifest)
        for key, value in arrays.items():
            kind, _, name = key.partition("/")
            if kind == "input":
                golden.inputs[name] = value
            elif kind == "output":
                golden.outputs[name] = value
        golden.stats = {n: TensorStats(**s) for n, s in manifest.get("tensor_stats", {}).items()}
        return golden

    # ------------------------------------------------------------------ writing

    @contextmanager
    def _lock(self, case: str, directory: Path, timeout: float) -> Iterator[None]:
        path = directory / LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise GoldenError(f"golden {case!r}: {path} is a symlink") from None
            raise
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise GoldenBusyError(f"golden {case!r} is being written by another process "
                                              f"(lock {path} held for more than {timeout:g} s)") from None
                    time.sleep(0.02)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def write(self, case: str, golden: Golden, *, update: bool = False, expected: str | None | object = ...,
              lock_timeout: float | None = None) -> Path:
        """Write a golden atomically. An existing one is replaced only with ``update=True``.

        ``expected`` is the :meth:`version` the caller saw when it started recording (default:
        the version at the call). If another writer replaced the golden since, nothing is
        written and :class:`GoldenConflictError` says so. A corrupt existing golden is never
        overwritten silently either: it takes ``update=True``.
        """
        directory = self.path(case)
        if expected is ...:
            expected = self._version_or_none(case)
        directory.mkdir(parents=True, exist_ok=True)
        self.path(case)  # the directories just made (or found) must not be links
        manifest = dict(golden.manifest)
        arrays = {f"input/{k}": np.asarray(v) for k, v in golden.inputs.items()}
        arrays.update({f"output/{k}": np.asarray(v) for k, v in golden.outputs.items()})
        manifest.update(
            schema=SCHEMA_NAME,
            schema_version=SCHEMA_VERSION,
            inputs=list(golden.inputs),
            outputs=list(golden.outputs),
            tensor_stats={n: asdict(s) for n, s in golden.stats.items()},
            arrays={k: {"dtype": v.dtype.str, "shape": list(v.shape)} for k, v in arrays.items()},
        )
        manifest.setdefault("versions", tool_versions())
        text = json.dumps(manifest, indent=1, sort_keys=True, default=_json_default)
        with self._lock(case, directory, LOCK_TIMEOUT if lock_timeout is None else lock_timeout):
            current = self._current(case, directory)
            live = current or (MANIFEST if (directory / MANIFEST).exists() else None)
            if live is not None and not update:
                raise GoldenExistsError(f"golden {case!r} exists at {directory}; pass the update flag to replace it")
            if live != expected:
                raise GoldenConflictError(
                    f"golden {case!r} was replaced by another writer while this one was recording "
                    f"({expected or 'none'} -> {live or 'none'}); nothing written, run again to replace it")
            _clean(directory, keep=current)
            token = f"{time.time_ns():x}-{os.getpid()}-{secrets.token_hex(4)}"
            staging = directory / f"{STAGING_PREFIX}{token}"
            staging.mkdir()
            try:
                np.savez(staging / ARRAYS, **arrays)
                (staging / MANIFEST).write_text(text, encoding="utf-8")
                for name in (ARRAYS, MANIFEST):
                    _fsync(staging / name)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)  # a failed write leaves nothing behind
                raise
            version = f"{VERSION_PREFIX}{token}"
            os.rename(staging, directory / version)
            pointer = directory / f".{CURRENT}.{token}"
            pointer.write_text(version + "\n", encoding="ascii")
            _fsync(pointer)
            _replace(pointer, directory / CURRENT)  # the one atomic step: old -> new
            _fsync(directory)
            _clean(directory, keep=version)
        return directory

    def _version_or_none(self, case: str) -> str | None:
        try:
            return self.version(case)
        except GoldenCorruptError:
            return None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clean(directory: Path, keep: str | None) -> None:
    """Remove what killed writers left in ``directory`` (call with the case's lock held):
    staging directories, pointer temporaries, versions other than ``keep``, the flat-layout files
    once a version is live, and the flat layout's staging/trash beside the case directory."""
    for entry in directory.iterdir():
        name = entry.name
        stale = (name.startswith((STAGING_PREFIX, f".{CURRENT}."))
                 or (name.startswith(VERSION_PREFIX) and name != keep)
                 or (keep is not None and name in (MANIFEST, ARRAYS)))
        if not stale:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    for entry in directory.parent.glob(f".{directory.name}.*"):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


_NUMBER = (int, float)


def _check_manifest(case: str, manifest: Any) -> None:
    """GoldenCorruptError naming the field when the manifest's fields have the wrong types."""
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA_NAME:
        raise GoldenCorruptError(f"golden {case!r}: {MANIFEST} is not a tosa-verify golden manifest")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise GoldenCorruptError(
            f"golden {case!r}: schema version {manifest.get('schema_version')!r}, "
            f"this tosa-verify reads {SCHEMA_VERSION}; re-record it with the update flag"
        )

    def bad(field_name: str, want: str) -> GoldenCorruptError:
        value = repr(manifest.get(field_name))
        return GoldenCorruptError(f"golden {case!r}: {MANIFEST} field {field_name!r} must be {want}, "
                                  f"got {value[:60]}")

    for key in ("inputs", "outputs", "tensor_order"):
        value = manifest.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(key, "a list of tensor names")
    for key in ("versions", "performance", "tensor_stats", "arrays", "op_counts"):
        if not isinstance(manifest.get(key, {}), dict):
            raise bad(key, "an object")
    if not all(isinstance(v, str) for v in manifest.get("versions", {}).values()):
        raise bad("versions", "an object of version strings")
    for target, perf in manifest.get("performance", {}).items():
        if not isinstance(perf, dict) or not isinstance(perf.get("cycles", 0), _NUMBER):
            raise GoldenCorruptError(f"golden {case!r}: performance of {target!r} must be an object with numeric cycles")
    if not isinstance(manifest.get("quantization", {}), (dict, type(None))):
        raise bad("quantization", "an object")
    for name, s in manifest.get("tensor_stats", {}).items():
        ok = (isinstance(s, dict) and set(s) <= set(TensorStats.__dataclass_fields__)
              and all(isinstance(s.get(k), _NUMBER) for k in ("min", "max", "mean", "std"))
              and isinstance(s.get("histogram"), list) and all(isinstance(c, int) for c in s["histogram"])
              and isinstance(s.get("sqnr_db"), (*_NUMBER, type(None)))
              and all(isinstance(s.get(k, ""), str) for k in ("torch_node", "module_path")))
        if not ok:
            raise GoldenCorruptError(f"golden {case!r}: malformed tensor_stats entry {name!r}")
    for key, spec in manifest.get("arrays", {}).items():
        if not (isinstance(spec, dict) and isinstance(spec.get("dtype"), str) and isinstance(spec.get("shape"), list)
                and all(isinstance(d, int) and d >= 0 for d in spec["shape"])):
            raise GoldenCorruptError(f"golden {case!r}: malformed arrays entry {key!r}")


def _read_arrays(case: str, path: Path, manifest: dict[str, Any]) -> dict[str, np.ndarray]:
    """The arrays of a golden, checked against the manifest and the memory budget before any
    member is decompressed (a zip bomb or a lying header is refused, not allocated)."""
    from tosa_verify.budget import load_npz
    from tosa_verify.errors import TosaError

    specs = manifest.get("arrays")
    if specs:
        expected = {k: (v["dtype"], tuple(v["shape"])) for k, v in specs.items()}
    else:  # flat-layout goldens list names only
        expected = {f"input/{n}": None for n in manifest.get("inputs", [])}
        expected.update({f"output/{n}": None for n in manifest.get("outputs", [])})
    try:
        arrays = load_npz(path, f"golden {case!r} {ARRAYS}", expected)
    except TosaError as exc:
        raise GoldenCorruptError(str(exc)) from None
    for kind in ("input", "output"):
        for name in manifest.get(f"{kind}s", []):
            if f"{kind}/{name}" not in arrays:
                raise GoldenCorruptError(f"golden {case!r}: {kind} {name!r} listed but missing from {ARRAYS}")
    return arrays


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
