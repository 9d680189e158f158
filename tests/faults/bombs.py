"""Files that claim far more than they hold: a zip bomb ``.npz`` and a lying ``.npy`` header."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

CHUNK = 64 << 20  # zeros per repeated deflate segment


def npy_header(shape: tuple[int, ...], descr: str = "|u1") -> bytes:
    """A version 1.0 ``.npy`` header (magic, length, dict, padding to 64 bytes)."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text) + pad + 1) + text + b" " * pad + b"\n"


def huge_header_npy(path: Path, shape: tuple[int, ...] = (1 << 40,)) -> Path:
    """An ``.npy`` whose header claims ``shape`` (a terabyte by default) over 16 bytes of data."""
    path.write_bytes(npy_header(shape) + bytes(16))
    return path


def _deflate_zeros(chunks: int, prefix: bytes) -> tuple[bytes, int]:
    """Raw deflate of ``prefix`` + ``chunks`` * CHUNK zeros, built from one compressed segment
    repeated (each ends on a full flush, so segments are independent) plus an empty final block."""
    head = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = head.compress(prefix) + head.flush(zlib.Z_FULL_FLUSH)
    body = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = body.compress(bytes(CHUNK)) + body.flush(zlib.Z_FULL_FLUSH)
    return first + segment * chunks + b"\x03\x00", len(prefix) + chunks * CHUNK


def zip_bomb_npz(path: Path, member: str = "output/y.npy", chunks: int = 48) -> Path:
    """An ``.npz`` of a few megabytes holding one member of ``chunks`` * 64 MiB (3 GiB by
    default): a valid ``.npy`` header for a uint8 array of that size, then deflated zeros.
    The CRC is left zero: only a reader that decompresses everything would notice."""
    size = chunks * CHUNK
    data, raw_size = _deflate_zeros(chunks, npy_header((size,)))
    name = member.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, 0, len(data), raw_size, len(name), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, 0, len(data), raw_size,
                          len(name), 0, 0, 0, 0, 0, 0)
    offset = len(local) + len(name) + len(data)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + len(name), offset, 0)
    path.write_bytes(local + name + data + central + name + end)
    return path


def expands_to(path: Path) -> int:
    """What the archive's directory says its members hold, uncompressed (checked, not trusted)."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return sum(i.file_size for i in archive.infolist())

