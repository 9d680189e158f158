"""Integer numerics of the TOSA spec, vectorized over numpy int64 arrays.

All integer arithmetic happens in int64 with explicit wrap or saturate at the end: int64 holds
every intermediate the spec allows (int48 * int16 < 2**63, int32 * int32 < 2**63).
"""

from __future__ import annotations

import functools

import numpy as np

from .dtypes import dtype_info

INT64 = np.int64

try:  # numpy 2: the clip ufunc itself, which np.clip calls after 4-10 us of argument handling
    from numpy._core.umath import clip as clip_ufunc
except ImportError:  # numpy 1
    from numpy.core.umath import clip as clip_ufunc
# (clip_ufunc is the ufunc np.clip itself calls: the same results bit for bit, at a numpy
# call's cost on a small array, where the kernels of a small graph clip on every run)


@functools.cache  # (prepares ask per operator; the answer depends on the dtype name alone)
def int_range(dtype: str, *, unsigned: bool = False) -> tuple[int, int]:
    """The [min, max] of an integer TOSA dtype, signed or unsigned.

    >>> int_range("INT8"), int_range("INT16", unsigned=True)
    ((-128, 127), (0, 65535))
    """
    bits = dtype_info(dtype).bits
    if unsigned:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def saturate(values: np.ndarray, dtype: str, *, unsigned: bool = False) -> np.ndarray:
    """Clip int64 ``values`` to the range of ``dtype`` (signed or unsigned) as int64.

    >>> saturate(np.array([-300, 5, 300]), "INT8").tolist()
    [-128, 5, 127]
    """
    lo, hi = int_range(dtype, unsigned=unsigned)
    return clip_ufunc(np.asarray(values, dtype=INT64), lo, hi)


def wrap(values: np.ndarray, dtype: str) -> np.ndarray:
    """Two's-complement wrap int64 ``values`` to the width of ``dtype`` (as int64).

    >>> wrap(np.array([128, -129, 255]), "INT8").tolist()
    [-128, 127, -1]
    """
    bits = dtype_info(dtype).bits
    v = np.asarray(values, dtype=INT64)
    if bits >= 64:
        return v
    shift = 64 - bits
    return (v << shift) >> shift


def to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """Cast int64 values already inside ``dtype``'s range to its working numpy dtype."""
    return np.asarray(values).astype(dtype_info(dtype).working, copy=False)


def apply_scale_32(
    value: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, double_round: bool = False
) -> np.ndarray:
    """Spec ``apply_scale_32``: ``(value * multiplier + round) >> shift`` in int64.

    The caller checks the REQUIREs (multiplier >= 0, 2 <= shift <= 62, value in range).

    >>> apply_scale_32(np.array([100]), np.array([1 << 30]), np.array([31])).tolist()
    [50]
    """
    value = np.asarray(value, dtype=INT64)
    shift = np.asarray(shift, dtype=INT64)
    rounding = np.left_shift(INT64(1), shift - 1)
    if double_round:
        big = shift > 31
        rounding = (
            rounding
            + np.where(big & (value >= 0), 1 << 30, 0)
            - np.where(big & (value < 0), 1 << 30, 0)
        )
    return (value * np.asarray(multiplier, dtype=INT64) + rounding) >> shift


def apply_scale_16(value: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Spec ``apply_scale_16`` for int48 values and int16 multipliers, in int64.

    >>> apply_scale_16(np.array([-7]), np.array([1 << 14]), np.array([15])).tolist()
    [-3]
    """
    value = np.asarray(value, dtype=INT64)
    shift = np.asarray(shift, dtype=INT64)
    rounding = np.left_shift(INT64(1), shift - 1)
    return (value * np.asarray(multiplier, dtype=INT64) + rounding) >> shift


def count_leading_zeros32(values: np.ndarray) -> np.ndarray:
    """Count leading zeros of int32 values viewed as 32-bit patterns (32 for zero).

    >>> count_leading_zeros32(np.array([0, 1, -1, 0x00010000], np.int32)).tolist()
    [32, 31, 0, 15]
    """
    v = np.asarray(values).astype(np.int64) & 0xFFFFFFFF
    out = np.full(v.shape, 32, dtype=INT64)
    nz = v != 0
    # bit_length via float64 log2 is exact for 32-bit integers
    out[nz] = 31 - np.floor(np.log2(v[nz].astype(np.float64))).astype(INT64)
    return out


def reciprocal_scale(value: int) -> tuple[int, int]:
    """Spec ``reciprocal_scale``: (multiplier, shift) approximating 1/value, for AVG_POOL2D.

    >>> reciprocal_scale(9)
    (1908874355, 34)
    """
    if value <= 0:
        raise ValueError("reciprocal_scale needs value > 0")
    # 32 - clz32(value - 1) is the bit length of value - 1 below 2**31 (Python's int, no numpy call)
    k = (value - 1).bit_length() if value <= 1 << 31 else 32 - int(count_leading_zeros32(np.array([value - 1]))[0])
    numerator = ((1 << 30) + 1) << k
    return numerator // value, 30 + k


#: TOSA float formats: (significand bits incl. the implicit one, min normal exponent,
#: largest finite value, has infinities).
FLOAT_FORMATS: dict[str, tuple[int, int, float, bool]] = {
    "FP32": (24, -126, float(np.finfo(np.float32).max), True),
    "FP16": (11, -14, 65504.0, True),
    "BF16": (8, -126, float.fromhex("0x1.fe00000000000p+127"), True),
    "FP8E4M3": (4, -6, 448.0, False),
    "FP8E5M2": (3, -14, 57344.0, True),
    # TOSA 1.1 MX element types (OCP MX): no infinity and no NaN, see round_to_float
    "FP6E2M3": (4, 0, 7.5, False),
    "FP6E3M2": (3, -2, 28.0, False),
    "FP4E2M1": (2, 0, 6.0, False),
}
#: Formats with neither infinity nor NaN: an out-of-range value saturates to the largest one.
_SATURATING = {"FP6E2M3", "FP6E3M2", "FP4E2M1"}


def round_to_float(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 ``values`` to nearest-even in TOSA float ``dtype``; return its working array.

    FP32 and FP16 use numpy's cast, which is IEEE-754 round-to-nearest-even in one step. BF16 and
    FP8 are rounded here: ml_dtypes converts float64 through float32 and can round twice.

    One rounding step straight from float64 (numpy/ml_dtypes may go through float32 first, which
    double-rounds). Results beyond the largest finite value become infinity of the right sign, or
    NaN for FP8E4M3, which has none (spec ``round_to_nearest_float``, OCP non-saturating mode).

    >>> round_to_float(np.array([1.0625, 300.0, 470.0]), "FP8E4M3").astype(float).tolist()
    [1.0, 288.0, nan]
    """
    x = np.asarray(values, dtype=np.float64)
    if dtype in ("FP32", "FP16"):
        with np.errstate(over="ignore"):  # out of range rounds to +-inf, as IEEE-754 specifies
            return x.astype(dtype_info(dtype).working)
    bits, emin, largest, has_inf = FLOAT_FORMATS[dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        _, exp = np.frexp(x)  # |x| = m * 2**exp with 0.5 <= m < 1
        # quantum of the target format at x's binade; fixed below the normal range (subnormals)
        quantum = np.ldexp(1.0, np.maximum(exp - 1, emin) - (bits - 1))
        # x / quantum and the product are exact: both are power-of-two scalings in float64
        rounded = np.round(x / quantum) * quantum
        overflow = np.abs(rounded) > largest
        # infinity keeps the sign; FP8E4M3 has none and gives the (positive) NaN 0x7F, as the
        # reference model does
        special = np.copysign(np.inf, x) if has_inf else np.nan
        if dtype in _SATURATING:
            special = np.copysign(largest, x)
        rounded = np.where(overflow, special, rounded)
        return rounded.astype(dtype_info(dtype).working)
