"""Prepared CONV2D, DEPTHWISE_CONV2D (integer) and MATMUL (integer) on small tensors: one gather
of every window (im2col), one GEMM (or per-channel sum), one cast.

On the small layers of Ethos-U models (a few thousand products) the general kernel's fixed cost,
two dozen numpy calls per run (data-dependent exactness bounds, padding, a GEMM per kernel tap,
the finish), dwarfs the arithmetic. Here everything that depends on declarations and constants
is decided when the plan is built:

* the compute dtype and its exactness bound come from the input *type*'s extremes (not the
  data's): ``max|x - input_zp| * max_oc sum|w - weight_zp|`` bounds every partial sum (see
  :func:`._tensor_common._exact_dtype`), and ``+ bias`` must stay exact and inside out_t's range
  (:func:`._tensor_common._one_pass_finish`): then the GEMM's integer result is exact whatever
  BLAS's summation order, and no REQUIRE can fail. Otherwise the general kernel runs;
* the windows are a precomputed index into the (zero-point-shifted) input, with one extra zero
  row that every padded position points at: a padded position contributes exactly 0, as the
  spec's skipped position does for integers. Floating-point weights must be finite for the same
  (``0 * inf`` is NaN), else the general kernel runs;
* the weight matrix [KH*KW*IC, OC] and the bias in the compute dtype.

A run is then: shift the input into the buffer, gather, GEMM, add the bias, cast.

>>> kernel = small_conv2d(p, weights, (1, 16, 16, 8))    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import dtype_info
from ..numerics import int_range
from ._tensor_common import F64, INT64, _exact_dtype, _one_pass_finish
from .registry import OpCall

#: Largest im2col patch matrix (elements) served here; larger convolutions use the general kernel.
SMALL_CONV = 1 << 18


def small_conv2d(p: dict, weights: dict, in_shape: tuple[int, ...]) -> Callable | None:
    """The small-tensor kernel of a prepared CONV2D (``p`` from ``tensor_ops._conv_setup``,
    ``weights`` from ``tensor_ops.prepare_conv``), or None where it does not apply."""
    n, ih, iw, ic = in_shape
    (kh, kw), (oh, ow), oc = p["kernel"], p["out_spatial"], p["oc"]
    if n * oh * ow * kh * kw * ic > SMALL_CONV or 0 in (n, ih, iw, ic, oh, ow, oc):
        return None
    if weights["float"]:
        w = weights[F64]  # [KH, KW, IC, OC]
        if not np.logical_and.reduce(np.isfinite(w), axis=None):  # (ndarray.all: a Python wrapper)
            return None
        dt, izp = F64, 0
    else:
        lo, hi = int_range(p["in_dt"])
        izp = weights["izp"]
        dt, bound = _exact_dtype(1, max(abs(lo - izp), abs(hi - izp)), weights["l1"])
        if dt is INT64 or not _one_pass_finish(p["bias"], p["out_dt"], bound, dt):
            return None
        w = weights["shifted"].transpose(1, 2, 3, 0)  # [OC, KH, KW, IC] -> [KH, KW, IC, OC]
    matrix = w.astype(dt, order="C").reshape(kh * kw * ic, oc)  # (one copy, contiguous)
    bias = p["bias"].astype(dt)
    index = windows(p["kernel"], p["stride"], p["dilation"], p["pad"], (ih, iw), (oh, ow))
    working = dtype_info(p["out_dt"]).working
    hw, rows, out_shape = ih * iw, n * oh * ow, (n, oh, ow, oc)

    def small_conv(run: OpCall) -> list[np.ndarray]:
        shifted = padded_rows(run.inputs[0], n, hw, ic, dt, izp)  # a padded position reads 0
        acc = shifted[:, index].reshape(rows, -1) @ matrix
        acc += bias  # exact, and within out_t (checked above) / rounded once below (floats)
        return [acc.astype(working).reshape(out_shape)]

    return small_conv


def windows(kernel, stride, dilation, pad, in_hw: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """[OH*OW, KH*KW] flat input positions (``ih * iw`` for a padded position) of every window
    of a 2-D convolution or pooling (``pad``: top, bottom, left, right).

    >>> windows((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), (2, 2), (1, 1)).tolist()
    [[0, 1, 2, 3]]
    """
    (kh, kw), (oh, ow), (ih, iw) = kernel, out_hw, in_hw
    top, _, left, _ = pad
    (sy, sx), (dy, dx) = stride, dilation
    if top <= 0 and left <= 0 and (oh - 1) * sy + (kh - 1) * dy - top < ih and (ow - 1) * sx + (kw - 1) * dx - left < iw \
            and min(sy, sx, dy, dx, iw) > 0:
        return _unpadded_windows(kh, kw, oh, ow, iw, top, left, sy, sx, dy, dx)
    bottom, right = pad[1], pad[3]
    hp, wp = ih + top + bottom, iw + left + right
    if min(top, bottom, left, right) >= 0 and min(sy, sx, dy, dx) > 0 and (oh - 1) * sy + (kh - 1) * dy < hp \
            and (ow - 1) * sx + (kw - 1) * dx < wp:
        # every window inside the padded image: its windows there, each padded position mapped
        # to ih * iw and each input position to its own
        remap = np.empty((hp, wp), np.int64)  # (np.full, without its Python wrapper)
        remap.fill(ih * iw)
        remap[top:top + ih, left:left + iw] = np.arange(ih * iw).reshape(ih, iw)
        return remap.reshape(-1)[_unpadded_windows(kh, kw, oh, ow, wp, 0, 0, sy, sx, dy, dx)]
    iy = (np.arange(oh) * sy - top)[:, None, None, None] + (np.arange(kh) * dy)[None, None, :, None]
    ix = (np.arange(ow) * sx - left)[None, :, None, None] + (np.arange(kw) * dx)[None, None, None, :]
    inside = (iy >= 0) & (iy < ih) & (ix >= 0) & (ix < iw)
    return np.where(inside, iy * iw + ix, ih * iw).reshape(oh * ow, kh * kw)


def _unpadded_windows(kh: int, kw: int, oh: int, ow: int, iw: int, top: int, left: int,
                      sy: int, sx: int, dy: int, dx: int) -> np.ndarray:
    """:func:`windows` where no window reaches the padding (every step > 0): a window's flat
    position is its origin's plus its tap's offset, as outer sums of four ranges (a prepare
    builds one per convolution or pooling: few numpy calls, as each costs more than its work)."""
    if kh == kw == sy == sx == 1 and top == left == 0:  # pointwise: the input positions in order
        return np.arange(oh * ow).reshape(oh * ow, 1)
    row0, col0 = -top * iw, -left
    origins = np.add.outer(np.arange(row0, row0 + oh * sy * iw, sy * iw), np.arange(col0, col0 + ow * sx, sx))
    taps = np.add.outer(np.arange(0, kh * dy * iw, dy * iw), np.arange(0, kw * dx, dx))
    return np.add.outer(origins.reshape(-1), taps.reshape(-1))


def padded_rows(x: np.ndarray, n: int, hw: int, c: int, dt, zp=0, fill=0) -> np.ndarray:
    """``x`` [N, H, W, C] as [N, H*W + 1, C] in ``dt``, minus ``zp``, with one extra row of
    ``fill``: what a padded position of :func:`windows` reads.

    >>> padded_rows(np.arange(4).reshape(1, 2, 2, 1), 1, 4, 1, np.int64, zp=1, fill=-9)[0, :, 0].tolist()
    [-1, 0, 1, 2, -9]
    """
    rows = np.empty((n, hw + 1, c), dt)
    rows[:, hw] = fill
    np.subtract(x.reshape(n, hw, c), zp, out=rows[:, :hw], dtype=dt)
    return rows


def small_depthwise2d(p: dict, shifted_w: np.ndarray, in_shape: tuple[int, ...]) -> Callable | None:
    """The small-tensor kernel of a prepared integer DEPTHWISE_CONV2D (``shifted_w``: the weight
    [KH, KW, C, M] minus its zero point, int64), or None where it does not apply: as
    :func:`small_conv2d`, each window's products summed per channel instead of one GEMM."""
    n, ih, iw, c = in_shape
    kh, kw, _, m = shifted_w.shape
    (oh, ow) = p["out_spatial"]
    if n * oh * ow * kh * kw * c * m > SMALL_CONV or 0 in (n, ih, iw, c, m, oh, ow):
        return None
    lo, hi = int_range(p["in_dt"])
    izp = p["izp"]
    l1 = int(np.abs(shifted_w).sum(axis=(0, 1)).max())  # per output channel (c, m)
    dt, bound = _exact_dtype(1, max(abs(lo - izp), abs(hi - izp)), l1)
    if dt is INT64 or not _one_pass_finish(p["bias"], p["out_dt"], bound, dt):
        return None
    weight = shifted_w.reshape(kh * kw, c, m).astype(dt)
    bias = p["bias"].astype(dt)
    index = windows((kh, kw), p["stride"], p["dilation"], p["pad"], (ih, iw), (oh, ow))
    working = dtype_info(p["out_dt"]).working
    hw, out_shape = ih * iw, (n, oh, ow, c * m)

    def small_depthwise(run: OpCall) -> list[np.ndarray]:
        shifted = padded_rows(run.inputs[0], n, hw, c, dt, izp)  # a padded position reads 0
        patches = shifted[:, index]  # [N, OH*OW, KH*KW, C]
        products = patches[..., None] * weight if m > 1 else patches * weight[..., 0]
        acc = products.sum(axis=2).reshape(out_shape)  # exact: every partial sum <= bound
        acc += bias
        return [acc.astype(working)]

    return small_depthwise


#: Largest MATMUL (elements of A and B together) served by :func:`small_matmul`.
SMALL_MATMUL = 1 << 16


def small_matmul(in_dt: str, out_dt: str, shapes: tuple, a_zp: int, b_zp: int) -> Callable | None:
    """The small-tensor kernel of a prepared integer MATMUL (``shapes``: A [N,H,C], B [N,C,W]),
    or None: the compute dtype from the types' extremes (``C * max|A - A_zp| * max|B - B_zp|``
    bounds every partial sum), so a run is two conversions, one batched GEMM and a cast."""
    (n, h, c), (_, _, w) = shapes
    if n * c * (h + w) > SMALL_MATMUL:
        return None
    lo, hi = int_range(in_dt)
    dt, bound = _exact_dtype(c, max(abs(lo - a_zp), abs(hi - a_zp)), max(abs(lo - b_zp), abs(hi - b_zp)))
    if dt is INT64 or bound > int_range(out_dt)[1]:
        return None  # (the general kernel wraps or saturates, as the reference model does)
    working = dtype_info(out_dt).working

    def small_matmul(run: OpCall) -> list[np.ndarray]:
        a = run.inputs[0].astype(dt)
        b = run.inputs[1].astype(dt)
        if a_zp:
            a -= a_zp
        if b_zp:
            b -= b_zp
        return [np.matmul(a, b).astype(working)]  # exact integers: every partial sum <= bound

    return small_matmul
