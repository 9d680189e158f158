"""INT48 constants (a lowered INT16 graph's biases and zero points) decode to the spec's values:
six little-endian bytes, two's complement, checked against the byte-by-byte formula."""

from __future__ import annotations

import numpy as np
import pytest

from tosa_verify.dtypes import decode_constant
from tosa_verify.errors import TosaFormatError


def _formula(raw: bytes) -> list[int]:
    """sum(byte_k << 8k) over each value's six bytes, less 2**48 from 2**47 on."""
    out = []
    for k in range(0, len(raw), 6):
        value = sum(b << (8 * i) for i, b in enumerate(raw[k:k + 6]))
        out.append(value - (1 << 48) if value >= 1 << 47 else value)
    return out


@pytest.mark.parametrize("shape", [(), (1,), (16,), (17,), (2, 3, 20), (0,)])
def test_int48_constants_decode_to_the_formulas_values(shape) -> None:
    count = int(np.prod(shape))
    rng = np.random.default_rng(count)
    raw = bytearray(rng.integers(0, 256, 6 * count, dtype=np.uint8).tobytes())
    extremes = [b"\x00\x00\x00\x00\x00\x80", b"\xff\xff\xff\xff\xff\x7f", b"\xff" * 6, b"\x00" * 6]
    for k, value in zip(range(0, 6 * count, 6), extremes, strict=False):
        raw[k:k + 6] = value
    raw = bytes(raw) + b"\x11\x22"  # (trailing bytes past the values are ignored)
    got = decode_constant(np.frombuffer(raw, np.uint8), "INT48", shape)
    assert got.dtype == np.int64 and got.shape == shape
    assert got.ravel().tolist() == _formula(raw[:6 * count])
    if count >= 2:
        assert got.ravel()[:2].tolist() == [-(1 << 47), (1 << 47) - 1]


def test_int48_constant_too_short_is_refused() -> None:
    with pytest.raises(TosaFormatError, match="INT48 tensor of shape \\[3\\] has 17 bytes, needs 18"):
        decode_constant(np.zeros(17, np.uint8), "INT48", (3,))
