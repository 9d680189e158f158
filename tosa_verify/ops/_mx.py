"""Helpers of the TOSA 1.1 draft's MX (OCP microscaling) block-scaled operators.

A block-scaled tensor is a pair: element data (FP8E4M3, FP8E5M2, FP6E2M3, FP6E3M2, FP4E2M1 or
MXINT8) and FP8UE8M0 scales, one scale per ``block_size`` consecutive elements of the innermost
dimension. ``block_size`` is the BlockSize enum of the schema: 1 (not scaled) or 32.

These operators take data and scales as separate tensors; a block-scaled tensor *type*
(``BS32_FP8UE8M0_*``, one tensor carrying both, as MATMUL_T and ROW_GATHER take it) is in
:mod:`tosa_verify.dtypes`.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import block_scales_shape
from .registry import OpCall

#: Element types of a block-scaled tensor (EXT-MX*).
MX_ELEMENT_TYPES = ("FP8E4M3", "FP8E5M2", "FP6E2M3", "FP6E3M2", "FP4E2M1", "MXINT8")
#: The scale type.
SCALE_TYPE = "FP8UE8M0"
#: Values of the schema's BlockSize enum.
BLOCK_SIZES = (1, 32)


def block_size(call: OpCall) -> int:
    """The ``block_size`` attribute; ERROR_IF it is not a BlockSize value (1 or 32).

    Example: for an operator with ``attrs == {"block_size": 32}``, ``block_size(call)`` is 32.
    """
    size = int(call.attrs.get("block_size", 0))
    if size not in BLOCK_SIZES:
        call.fail(f"block_size {size} is not a block_size_t value {BLOCK_SIZES}")
    return size


def scale_shape(shape: tuple[int, ...], size: int) -> tuple[int, ...]:
    """Shape of the scales of a data tensor of ``shape``: innermost dimension divided by ``size``.

    >>> scale_shape((2, 64), 32)
    (2, 2)
    """
    return block_scales_shape(shape, size)


def expand_scales(scales: np.ndarray, size: int) -> np.ndarray:
    """FP8UE8M0 scales as float64, each repeated ``size`` times along the innermost axis.

    The E8M0 code 0xFF is NaN; ``float8_e8m0fnu`` decodes it so.
    """
    return np.repeat(np.asarray(scales).astype(np.float64), size, axis=-1)
