"""The conformance cases the default run generates, shipped with the tests.

Generating them costs a fresh clone about 95 CPU-seconds (about 50 s of the default run on 2
cores): tosa-tools' generator builds every case in Python. The generator's output for one set of
arguments and one tosa-tools version never changes, so the cases the default run asks for are
kept in ``tests/data/conformance_cases.tar.xz`` and unpacked into the case cache on first use.
Each case directory is named by the key :func:`harness.generate` computes from the generator
arguments and the installed tosa-tools version: with another version no shipped case matches and
the cases are generated as before. ``test_shipped_cases.py`` (slow) regenerates them and compares
byte for byte.

Rebuild the archive after a change of generator arguments or tosa-tools::

    rm -rf /tmp/cts && TOSA_VERIFY_CTS_CACHE=/tmp/cts python -m pytest -n auto
    python tests/conformance/shipped.py /tmp/cts
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "conformance_cases.tar.xz"


def unpack(root: Path, archive: Path = ARCHIVE) -> None:
    """Unpack the shipped cases into the cache ``root`` once (case directories already there stay).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     unpack(Path(d), Path(d) / "none.tar.xz")   # no archive: nothing to do
    """
    # TOSA_VERIFY_CTS_SHIPPED=0: generate everything (the tests that compare generator runs)
    if not archive.exists() or os.environ.get("TOSA_VERIFY_CTS_SHIPPED") == "0":
        return
    stat = archive.stat()
    marker = root / f".shipped-{_digest(archive, stat.st_size, stat.st_mtime_ns)}"
    if marker.exists():
        return
    with open(root / ".shipped.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return
        tmp = Path(tempfile.mkdtemp(prefix="shipped-", dir=root))
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            for case_dir in sorted(tmp.iterdir()):
                target = root / case_dir.name
                if not (target / ".complete").exists():
                    shutil.rmtree(target, ignore_errors=True)
                    os.replace(case_dir, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        marker.write_text(str(archive))


@functools.cache
def _digest(archive: Path, size: int, mtime_ns: int) -> str:
    """The archive's content digest, read once per process per version of the file (every
    generate() call asks: hashing 1.4 MB each time would be a read per test)."""
    return hashlib.sha256(archive.read_bytes()).hexdigest()[:12]


def pack(cache: Path, archive: Path = ARCHIVE) -> int:
    """Write every complete case directory of ``cache`` into ``archive`` (sorted, no owners or
    times, so the same cases give the same bytes); return how many directories were packed."""
    dirs = sorted(d for d in cache.iterdir() if d.is_dir() and (d / ".complete").exists())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=9) as tar:
        for d in dirs:
            for path in [d, *sorted(d.rglob("*"))]:
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(cache)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    archive.write_bytes(buf.getvalue())
    return len(dirs)


if __name__ == "__main__":
    n = pack(Path(sys.argv[1]))
    print(f"{n} case directories -> {ARCHIVE} ({ARCHIVE.stat().st_size / 1e6:.1f} MB)")
