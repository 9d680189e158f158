"""Prepared integer AVG_POOL2D and MAX_POOL2D on small tensors: one gather of every window.

As for :mod:`._conv_small`: on small tensors the general kernels' loop over kernel taps (a
numpy call or three per tap) costs far more than the arithmetic. Here the windows are a
precomputed index into the input, with one extra row that every padded position reads: 0 for
the average's zero-point-shifted sum (a padded position is not counted, and the window counts
come from the general set-up), the type's minimum for the maximum (which every in-range value
reaches, and a window always holds one since pad < kernel). The integer sum and maximum are
exact whatever the order; a float maximum follows the spec's tie and NaN rules (see
:func:`small_float_max_pool`).

>>> kernel = small_max_pool(kernel, stride, pad, (1, 16, 16, 8), (8, 8), "INT8")   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import dtype_info
from ..numerics import clip_ufunc, int_range, wrap
from ._conv_small import padded_rows, windows
from .registry import OpCall

#: Largest gathered window matrix (elements) served here; larger pools use the general kernel.
SMALL_POOL = 1 << 16

_INT64 = np.int64


def _small(kernel, in_shape, out_hw) -> bool:
    n, _, _, c = in_shape
    return 0 < n * out_hw[0] * out_hw[1] * kernel[0] * kernel[1] * c <= SMALL_POOL


def _taps(index: np.ndarray) -> np.ndarray:
    """:func:`windows`' [OH*OW, KH*KW] index as [KH*KW, OH*OW]: ``rows.take(taps, axis=1)``
    gathers [N, KH*KW, OH*OW, C], whose reduction over axis 1 (the taps, outermost) is several
    times faster than over a middle axis of a few elements, and ``take`` faster than indexing.
    The taps are still reduced in (ky, kx) order, one after another.

    >>> _taps(np.array([[0, 1], [2, 3]])).tolist()
    [[0, 2], [1, 3]]
    """
    return np.ascontiguousarray(index.T)


def small_max_pool(kernel, stride, pad, in_shape, out_hw, dt: str) -> Callable | None:
    """The small-tensor MAX_POOL2D kernel (integer ``dt``, checks done), or None."""
    if not _small(kernel, in_shape, out_hw):
        return None
    n, ih, iw, c = in_shape
    taps = _taps(windows(kernel, stride, (1, 1), pad, (ih, iw), out_hw))
    floor, working, hw = int_range(dt)[0], dtype_info(dt).working, ih * iw
    out_shape = (n, *out_hw, c)

    def small_max_pool(run: OpCall) -> list[np.ndarray]:
        values = padded_rows(run.inputs[0], n, hw, c, working, fill=floor)
        return [np.maximum.reduce(values.take(taps, axis=1), axis=1).reshape(out_shape)]

    return small_max_pool


def small_avg_pool(p: dict, in_shape) -> Callable | None:
    """The small-tensor kernel of an integer AVG_POOL2D (``p`` from ``pooling._avg_pool_params``,
    every check done), or None."""
    kernel, out_shape = p["kernel"], p["shape"]
    if not _small(kernel, in_shape, out_shape[1:3]):
        return None
    n, ih, iw, c = in_shape
    taps = _taps(windows(kernel, p["stride"], (1, 1), p["pad"], (ih, iw), out_shape[1:3]))
    hw, in_zp, out_zp = ih * iw, p["in_zp"], p["out_zp"]
    multiplier, shift = p["multiplier"], p["shift"]
    rounding = np.left_shift(_INT64(1), shift - 1)
    lo, hi = int_range(p["dt"])
    working = dtype_info(p["dt"]).working
    # |x - zp| <= 2**16: only a window of 2**15 or more positions can leave int32 (which the
    # reference model wraps, as the general kernel does)
    may_wrap = kernel[0] * kernel[1] << 16 >= 1 << 31

    def small_avg_pool(run: OpCall) -> list[np.ndarray]:
        shifted = padded_rows(run.inputs[0], n, hw, c, _INT64, in_zp)  # padding adds nothing
        acc = np.add.reduce(shifted.take(taps, axis=1), axis=1).reshape(out_shape)
        if may_wrap:
            acc = wrap(acc, "INT32")
        acc *= multiplier  # apply_scale_32 (single rounding): exact in int64, |acc| < 2**31
        acc += rounding
        acc >>= shift
        acc += out_zp
        clip_ufunc(acc, lo, hi, out=acc)
        return [acc.astype(working)]

    return small_avg_pool


def small_float_max_pool(kernel, stride, pad, in_shape, out_hw, dt: str, mode: str) -> Callable | None:
    """The small-tensor kernel of a float MAX_POOL2D (checks done), or None.

    The spec folds ``apply_max_s`` over each window in (ky, kx) order; as one reduction over the
    gathered windows: PROPAGATE is ``np.maximum`` (a NaN wins; padding reads -inf, which no real
    value loses to), IGNORE is ``np.fmax`` (NaN ignored, an all-NaN window stays NaN; padding
    reads NaN). Equal values have equal bits except the zeros: a zero maximum takes the first
    zero in scan order, as the fold's ``acc >= value ? acc : value`` keeps the earlier value.
    float32 holds every FP16/BF16/FP8 value, so the comparisons and the cast back are exact.
    """
    if not _small(kernel, in_shape, out_hw):
        return None
    n, ih, iw, c = in_shape
    taps = _taps(windows(kernel, stride, (1, 1), pad, (ih, iw), out_hw))  # [KH*KW, OH*OW]
    working, hw, out_shape = dtype_info(dt).working, ih * iw, (n, *out_hw, c)
    ufunc, fill = (np.fmax, np.nan) if mode == "IGNORE" else (np.maximum, -np.inf)

    def small_float_max_pool(run: OpCall) -> list[np.ndarray]:
        window = padded_rows(run.inputs[0], n, hw, c, np.float32, fill=fill).take(taps, axis=1)
        result = ufunc.reduce(window, axis=1)  # [N, OH*OW, C]
        if np.count_nonzero(result) != result.size:  # some ±0 (NaN counts as nonzero)
            first = np.argmax(window == 0, axis=1)[:, None]
            result = np.where(result == 0, np.take_along_axis(window, first, axis=1)[:, 0], result)
        return [result.reshape(out_shape).astype(working, copy=False)]

    return small_float_max_pool


def small_float_avg_pool(p: dict, in_shape) -> Callable | None:
    """The small-tensor kernel of an FP32/FP16 AVG_POOL2D (``p`` from
    ``pooling._avg_pool_params``, checks done), or None: each window's in-range values summed in
    float64 (padding reads +0.0, which changes no sum; the final ``+ 0.0`` gives the spec's +0
    accumulator start for a window of -0.0 values), divided by its count, rounded once."""
    kernel, out_shape = p["kernel"], p["shape"]
    if p["dt"] not in ("FP32", "FP16") or not _small(kernel, in_shape, out_shape[1:3]):
        return None
    n, ih, iw, c = in_shape
    taps = _taps(windows(kernel, p["stride"], (1, 1), p["pad"], (ih, iw), out_shape[1:3]))
    count = p["count"].reshape(1, -1, 1).astype(np.float64)  # [1, OH*OW, 1]
    working, hw = dtype_info(p["dt"]).working, ih * iw

    def small_float_avg_pool(run: OpCall) -> list[np.ndarray]:
        total = np.add.reduce(padded_rows(run.inputs[0], n, hw, c, np.float64).take(taps, axis=1), axis=1)
        total += 0.0
        total /= count
        return [total.reshape(out_shape).astype(working)]

    return small_float_avg_pool
