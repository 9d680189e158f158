"""Drift metrics: error statistics, quantization grids, and the NCHW -> TOSA layout of a torch value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compare import _stats as sqnr_and_cosine
from ..dtypes import dtype_info
from .report import HIST_RANGE, ErrorStats


def _stats(expected: np.ndarray, actual: np.ndarray, scale: float | None) -> ErrorStats:
    """Error statistics; SQNR and cosine are tosa_verify.compare's."""
    e = np.ravel(np.asarray(expected, np.float64))
    a = np.ravel(np.asarray(actual, np.float64))
    sqnr, cosine = sqnr_and_cosine(e, a)
    err = np.abs(a - e)
    if not np.isfinite(err).all():
        err = err[np.isfinite(err)]
    if err.size == 0:
        return ErrorStats(sqnr, cosine, float("nan"), None, None, 0, int(e.size), float("nan"))
    max_abs = float(err.max())
    mse = float(np.dot(err, err) / err.size)
    mean_abs = float(err.mean())
    if scale:
        return ErrorStats(sqnr, cosine, max_abs, max_abs / scale, mean_abs / scale,
                          int(np.count_nonzero(err > 0.5 * scale)), int(e.size), mse)
    return ErrorStats(sqnr, cosine, max_abs, None, None, int(np.count_nonzero(err)), int(e.size), mse)


def _grid_stats(expected_int: np.ndarray, actual_int: np.ndarray, q: _Q | None) -> ErrorStats | None:
    """Zero-error statistics when two integer tensors are equal (the common case), else None."""
    if q is None or np.shape(expected_int) != np.shape(actual_int):
        return None
    if not np.array_equal(np.asarray(expected_int), np.asarray(actual_int)):
        return None
    size = int(np.size(actual_int))
    return ErrorStats(math.inf, 1.0, 0.0, 0.0, 0.0, 0, size, 0.0)


def _histogram(diff_steps: np.ndarray) -> list[int]:
    r = np.clip(np.rint(diff_steps[np.isfinite(diff_steps)]), -HIST_RANGE, HIST_RANGE).astype(np.int64)
    return np.bincount(r + HIST_RANGE, minlength=2 * HIST_RANGE + 1).tolist()


# --------------------------------------------------------------------------- layout


def _layout_candidates(tosa_shape: tuple[int, ...], torch_shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...] | None]]:
    """Ways to bring a torch-layout array to ``tosa_shape``: (label, permutation or None=reshape)."""
    st, sa = tuple(tosa_shape), tuple(torch_shape)
    out: list[tuple[str, tuple[int, ...] | None]] = []
    if st == sa:
        out.append(("same", tuple(range(len(sa)))))
    for label, perm in (("NHWC", (0, 2, 3, 1)), ("NDHWC", (0, 2, 3, 4, 1))):
        if len(sa) == len(perm) and st == tuple(sa[p] for p in perm):
            out.append((label, perm))
    if st != sa and int(np.prod(st, dtype=np.int64)) == int(np.prod(sa, dtype=np.int64)) and \
            [d for d in st if d != 1] == [d for d in sa if d != 1]:
        out.append(("reshape", None))
    return out


def _to_tosa_layout(arr: np.ndarray, tosa_shape: tuple[int, ...], how: tuple[int, ...] | None) -> np.ndarray:
    if how is None:
        return np.reshape(arr, tosa_shape)
    return np.transpose(arr, how)


# --------------------------------------------------------------------------- quantization helpers


@dataclass
class _Q:
    scale: float
    zp: int
    qmin: int
    qmax: int

    def quantize(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(np.asarray(x, np.float64) / self.scale) + self.zp, self.qmin, self.qmax)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (np.asarray(q, np.float64) - self.zp) * self.scale


def _qparams(entry: Mapping[str, Any] | None, dtype: str) -> _Q | None:
    if not entry:
        return None
    scales = list(entry.get("scale") or [])
    zps = list(entry.get("zero_point") or [0])
    if len(scales) != 1:
        return None
    info = dtype_info(dtype)
    qmin = int(entry.get("qmin", info.min))
    qmax = int(entry.get("qmax", info.max))
    return _Q(float(scales[0]), int(zps[0]), qmin, qmax)


@dataclass
class _Ref:
    """Per-row working data (not part of the report)."""

    q: _Q | None
    float_value: np.ndarray | None
    fq_value: np.ndarray | None
    fq_int: np.ndarray | None = None
