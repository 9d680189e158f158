"""Helpers shared by the reduction, data-layout, scatter/gather, image and type-conversion ops.

* Level 8K limits (the level the conformance suite and ``tosa_reference_model`` default to) and
  the argument-rank checks that use them.
* Reading SHAPE-typed operands (int64 arrays from CONST_SHAPE) as Python ints.
* Correctly rounded conversion of float64 values to any TOSA floating-point dtype.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from .registry import OpCall

#: Level 8K maxima (spec "Levels" table). The interpreter applies level 8K, as the reference
#: model's default ``--tosa_level EIGHTK`` and the conformance generator do.
MAX_RANK = 6
MAX_TENSOR_LIST_SIZE = 64
MAX_SCALE = 256

#: TOSA float dtype -> (significand bits incl. the implicit one, minimum normal exponent,
#: largest finite value, has an infinity). FP8E4M3 has no infinity: overflow gives NaN (OCP
#: non-saturating mode), as do the spec's "outside the representable range" rules.
FLOAT_FORMATS: dict[str, tuple[int, int, float, bool]] = {
    "FP32": (24, -126, float(np.finfo(np.float32).max), True),
    "FP16": (11, -14, 65504.0, True),
    "BF16": (8, -126, float.fromhex("0x1.fe00000000000p+127"), True),
    "FP8E4M3": (4, -6, 448.0, False),
    "FP8E5M2": (3, -14, 57344.0, True),
}


def check_rank(call: OpCall, rank: int, lo: int, hi: int, what: str) -> None:
    """ERROR_IF the rank of an argument is outside its spec range (``hi`` is MAX_RANK or fixed)."""
    call.error_if(rank < lo or rank > hi, f"rank({what}) = {rank} not in [{lo}, {hi}]")


def shape_input(call: OpCall, i: int, length: int | None, what: str) -> list[int]:
    """Values of SHAPE operand ``i`` as Python ints; ERROR_IF it is not a SHAPE of ``length``."""
    call.error_if(call.in_dtype(i) != "SHAPE", f"{what} is {call.in_dtype(i)}, not a shape_t")
    values = np.asarray(call.inputs[i]).reshape(-1)
    if length is not None:
        call.error_if(values.size != length, f"length({what}) = {values.size} != {length}")
    return [int(v) for v in values]


def check_same_dtype(call: OpCall, allowed: tuple[str, ...], *inputs: int) -> str:
    """ERROR_IF the listed inputs and output 0 do not share one dtype from ``allowed``."""
    dtype = call.out_dtype()
    call.error_if(dtype not in allowed, f"in_out_t {dtype} not supported")
    for i in inputs:
        call.error_if(
            call.in_dtype(i) != dtype, f"input {i} is {call.in_dtype(i)}, output is {dtype}"
        )
    return dtype


def round_to_float(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 ``values`` to nearest-even in TOSA float ``dtype``; return its working array.

    One rounding step straight from float64 (numpy/ml_dtypes may go through float32 first, which
    double-rounds). Results beyond the largest finite value become infinity of the right sign, or
    NaN for FP8E4M3, which has none (spec ``round_to_nearest_float``, OCP non-saturating mode).

    >>> round_to_float(np.array([1.0625, 300.0, 470.0]), "FP8E4M3").astype(float).tolist()
    [1.0, 288.0, nan]
    """
    bits, emin, largest, has_inf = FLOAT_FORMATS[dtype]
    x = np.asarray(values, dtype=np.float64)
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
        rounded = np.where(overflow, special, rounded)
        return rounded.astype(dtype_info(dtype).working)
