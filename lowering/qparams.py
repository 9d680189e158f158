"""Quantization parameters and fixed-point scale helpers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class QParams:
    """Affine quantization parameters of one tensor: ``real = scale * (q - zero_point)``.

    ``scale``/``zero_point`` hold one entry (per-tensor) or one per channel along ``axis``.

    Example:
        >>> qp = QParams(np.array([0.5]), np.array([-3]), torch.int8, -128, 127)
        >>> qp.dequantize(np.array([-3, 1])).tolist()
        [0.0, 2.0]
    """

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: torch.dtype
    qmin: int
    qmax: int
    axis: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    @property
    def s(self) -> float:
        """Per-tensor scale as a float."""
        return float(self.scale.reshape(-1)[0])

    @property
    def zp(self) -> int:
        """Per-tensor zero point as an int."""
        return int(self.zero_point.reshape(-1)[0])

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """Integer array -> float array (per-tensor only)."""
        return (q.astype(np.float64) - self.zp) * self.s

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Float array -> integer array, same rounding as torch (half to even)."""
        q = np.round(np.asarray(x, dtype=np.float32) * np.float32(1.0 / self.s)) + self.zp
        return np.clip(q, self.qmin, self.qmax).astype(np.int64)

    def to_json(self) -> dict:
        return {
            "scale": [float(v) for v in self.scale.reshape(-1)],
            "zero_point": [int(v) for v in self.zero_point.reshape(-1)],
            "dtype": str(self.dtype).replace("torch.", ""),
            "qmin": int(self.qmin),
            "qmax": int(self.qmax),
            "axis": self.axis,
        }


def quantize_scale(scale: float, scale32: bool = True) -> tuple[int, int]:
    """Real multiplier -> (integer multiplier, right shift) for TOSA RESCALE.

    Example:
        >>> quantize_scale(0.5)
        (1073741824, 31)
        >>> quantize_scale(0.25, scale32=False)
        (16384, 16)
    """
    if scale <= 0.0:
        return (0, 2)
    bits = 31 if scale32 else 15
    m, e = math.frexp(scale)
    mult = int(round(m * (1 << bits)))
    if mult == (1 << bits):
        mult //= 2
        e += 1
    shift = bits - e
    while shift > 62:
        mult = (mult + 1) >> 1
        shift -= 1
    while shift < 2:
        # scale too large to represent: saturate (only happens for absurd scales)
        mult = min(mult * 2, (1 << bits) - 1)
        shift += 1
    return mult, shift


def quantize_scales(scales, scale32: bool = True) -> tuple[list[int], list[int]]:
    """Vectorised :func:`quantize_scale`.

    Example:
        >>> quantize_scales([0.5, 0.25])
        ([1073741824, 1073741824], [31, 32])
    """
    mults, shifts = [], []
    for s in np.asarray(scales, dtype=np.float64).reshape(-1):
        m, sh = quantize_scale(float(s), scale32)
        mults.append(m)
        shifts.append(sh)
    return mults, shifts
