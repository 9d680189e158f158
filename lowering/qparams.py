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


def _per_channel_view(t: torch.Tensor, axis: int | None, rank: int) -> torch.Tensor:
    """A per-channel parameter shaped to broadcast along ``axis`` (per-tensor: unchanged)."""
    if axis is None:
        return t
    shape = [1] * rank
    shape[axis] = -1
    return t.reshape(shape)


def dequantize_exact(q: torch.Tensor, scale, zero_point, axis: int | None = None) -> torch.Tensor:
    """The real value ``(q - zp) * scale`` in float64 (exact for float32 scales), per tensor or
    per channel along ``axis``: what integer arithmetic (RESCALE, AVG_POOL2D...) computes with.

    Example:
        >>> q = torch.tensor([127], dtype=torch.int8)
        >>> float(dequantize_exact(q, 0.003921568859368563, -128)[0])
        1.0000000591389835
    """
    s = _per_channel_view(torch.as_tensor(scale, dtype=torch.float64), axis, q.dim())
    zp = _per_channel_view(torch.as_tensor(0 if zero_point is None else zero_point,
                                           dtype=torch.float64), axis, q.dim())
    return (q.double() - zp) * s


def dequantize_f32(q: torch.Tensor, scale, zero_point, axis: int | None = None) -> torch.Tensor:
    """PyTorch's dequantization ``(q - zp) * scale``: the float32 value it returns, in float64.

    ``quantized_decomposed.dequantize_per_tensor`` computes in float32 (its scale rounded to
    float32 first); ``dequantize_per_channel`` in the scales' dtype, then casts to float32.
    Both factors of the product are exact in float64 and so is the product (at most 24 + 24
    bits), so rounding it once to float32 gives torch's value exactly. That value, not the
    exact real ``(q - zp) * scale``, is what the fake-quant graph feeds its ops: at ``q = 127``
    with scale ``float32(1/255)`` and zero point -128 the real product is 1.0000000591 (acos:
    NaN) while torch's is 1.0 (acos: 0).

    Example:
        >>> q = torch.tensor([127], dtype=torch.int8)
        >>> float(dequantize_f32(q, 0.003921568859368563, -128)[0])
        1.0
        >>> q = torch.tensor([127, 5], dtype=torch.int8)
        >>> dequantize_f32(q, torch.tensor([0.5, 0.25]), torch.tensor([0, 1]), axis=0).tolist()
        [63.5, 1.0]
    """
    if axis is None:  # torch: (q.to(float32) - zp) * scale, one float32 operation each
        n = (q.to(torch.float32) - int(zero_point)).double()
        s = torch.tensor(float(scale), dtype=torch.float32)
    else:  # torch: (q - zps) * scales in the scales' dtype (integers rounded to it first)
        s = torch.as_tensor(scale)
        s = _per_channel_view(s if s.is_floating_point() else s.double(), axis, q.dim())
        zp = _per_channel_view(torch.as_tensor(0 if zero_point is None else zero_point,
                                               dtype=torch.int64), axis, q.dim())
        n = (q.to(torch.int64) - zp).to(s.dtype).double()
    return (n * s.double()).to(s.dtype).to(torch.float32).double()


def quantize_f64(x: torch.Tensor, scale, zero_point, qmin: int, qmax: int, dtype: torch.dtype,
                 axis: int | None = None) -> torch.Tensor:
    """The ideal quantization ``clamp(round_half_even(x / scale) + zp, qmin, qmax)`` in float64.

    float64 rather than torch's float32 ``x * (1 / scale)``: float32 rounding flips a few
    values across a rounding tie, and those one-step flips grow layer by layer in deep nets.
    A NaN becomes what torch's cast makes of it (0 for int8).

    Example:
        >>> quantize_f64(torch.tensor([0.25, 0.75, 9.0]), 0.5, 0, -128, 127, torch.int8).tolist()
        [0, 2, 18]
    """
    s = _per_channel_view(torch.as_tensor(scale, dtype=torch.float64), axis, x.dim())
    zp = _per_channel_view(torch.as_tensor(zero_point, dtype=torch.float64), axis, x.dim())
    return (torch.round(x.double() / s) + zp).clamp(qmin, qmax).to(dtype)


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
