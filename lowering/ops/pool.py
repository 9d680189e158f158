"""max_pool2d (dilation, ceil_mode) / avg_pool2d (ceil_mode, divisor_override) /
adaptive_avg_pool2d (uneven windows too) and spatial mean -> MAX_POOL2D / AVG_POOL2D
(/ DEPTHWISE_CONV2D)."""

from __future__ import annotations

import numpy as np
import torch

from ..graph_utils import NHWC
from ..serialize import INT_OF
from .common import (
    FP_MAX,
    int48_to_int32,
    integer_divisor,
    requantize,
    rescale_ties_even,
    ties_possible,
)
from .conv import _crop, _pair
from .registry import register

aten = torch.ops.aten


def _zps(em, node, x_node):
    if em.is_int:
        qi = em.qin(node, x_node)
        dt = INT_OF[qi.dtype]
        return em.const("izp", [qi.zp], dt, [1]), em.const("ozp", [qi.zp], dt, [1]), "INT32"
    z = em.const("zp", [0.0], "FP32", [1])
    return z, z, "FP32"


def avg_pool(em, node, x_node, x, in_shape, kernel, stride, pads):
    izp, ozp, acc = _zps(em, node, x_node)
    out_shape = em.shape(node, NHWC) if len(em.shape(node)) == 4 else None
    qo, qi = em.qout(node), em.qin(node, x_node)
    scale = qi.s / (kernel[0] * kernel[1] * qo.s) if em.is_int else 1.0
    if em.is_int and not any(pads) and (ties_possible(scale) or integer_divisor(scale)
                                         or (qo.s, qo.zp) != (qi.s, qi.zp)):
        # AVG_POOL2D rounds .5 away from zero, and a requantize to other output qparams after
        # it rounds twice (at the input's scale first, where a mean of a narrower range keeps
        # few levels); the fake-quant mean rounds once, ties to even: exact window sums, one
        # RESCALE instead
        sums = _int_window_sums(em, node, x_node, x, kernel, stride, pads)
        return _rescale_sums(em, sums, qo, scale, "rescale",
                             em.out(node, NHWC) if out_shape else None)
    if em.is_int and any(pads):
        # AVG_POOL2D's reciprocal of each window's count is inexact and rounds again in the
        # requantize: exact sums, each block of equal counts rescaled once instead
        exact = _exact_padded_avg(em, node, x_node, x, kernel, stride, pads,
                                  em.out(node, NHWC) if out_shape else None)
        if exact is not None:
            return exact
    same_q = (not em.is_int) or (qo.s == qi.s and qo.zp == qi.zp)
    out = em.out(node, NHWC) if (out_shape and same_q) else em.new(
        "pool", [in_shape[0], (in_shape[1] + pads[0] + pads[1] - kernel[0]) // stride[0] + 1,
                 (in_shape[2] + pads[2] + pads[3] - kernel[1]) // stride[1] + 1, in_shape[3]],
        em.writer.dtypes[x])
    em.writer.op("AVG_POOL2D", [x, izp, ozp], out, kernel=kernel, stride=stride, pad=pads,
                 acc_type=acc)
    if not same_q:
        target = em.out(node, NHWC) if out_shape else None
        out = requantize(em, out, qi, qo, "rq", out_name=target)
    return out


def window_counts(size: int, lo: int, k: int, stride: int, n_out: int) -> list[int]:
    """The input elements (not padding) in each of ``n_out`` windows along one axis, with
    ``lo`` padding before the input.

    Example:
        >>> window_counts(6, 1, 3, 2, 4)  # the first and the ceil-mode last window overhang
        [2, 3, 3, 1]
    """
    return [min(i * stride - lo + k, size) - max(i * stride - lo, 0) for i in range(n_out)]


def _runs(values: list[int]) -> list[tuple[int, int, int]]:
    """(start, length, value) of each run of equal ``values``."""
    runs: list[tuple[int, int, int]] = []
    for i, v in enumerate(values):
        if runs and runs[-1][2] == v:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, v)
        else:
            runs.append((i, 1, v))
    return runs


def _rescale_sums(em, sums, qo, scale, suffix, out_name=None):
    """Window sums -> the output type, ties to even (INT48 sums of int16 inputs first to INT32:
    exact, a window holds far fewer than 2**16 elements)."""
    if em.writer.dtypes[sums] == "INT48":
        sums = int48_to_int32(em, sums, 0, suffix + "_i32")
    return rescale_ties_even(em, sums, INT_OF[qo.dtype], scale, qo.zp, suffix, out_name=out_name)


def _concat(em, parts, axis, suffix, out_name=None):
    if len(parts) == 1 and out_name is None:
        return parts[0]
    shape = list(em.writer.shapes[parts[0]])
    shape[axis] = sum(em.writer.shapes[p][axis] for p in parts)
    out = out_name or em.new(suffix, shape, em.writer.dtypes[parts[0]])
    em.writer.op("CONCAT" if len(parts) > 1 else "IDENTITY", parts, out,
                 **({"axis": axis} if len(parts) > 1 else {}))
    return out


def _exact_padded_avg(em, node, x_node, x, kernel, stride, pads, out_name):
    """INT average pool whose windows overlap TOSA ``pads`` (never counted: PyTorch's
    ``count_include_pad=False`` and the ceil-mode overhang): exact INT32 window sums
    (:func:`_int_window_sums`), every block of outputs with one window count rescaled once by
    ``s_in / (count * s_out)``, ties to even as the fake-quant mean rounds. None when the
    counts form more than 16 blocks (AVG_POOL2D then)."""
    qi, qo = em.qin(node, x_node), em.qout(node)
    n, h, w, c = em.writer.shapes[x]
    # (the blocks decided before any operator is emitted: a declined pool leaves none behind)
    oh = (h + pads[0] + pads[1] - kernel[0]) // stride[0] + 1
    ow = (w + pads[2] + pads[3] - kernel[1]) // stride[1] + 1
    rows = _runs(window_counts(h, pads[0], kernel[0], stride[0], oh))
    cols = _runs(window_counts(w, pads[2], kernel[1], stride[1], ow))
    if len(rows) * len(cols) > 16:
        return None
    sums = _int_window_sums(em, node, x_node, x, kernel, stride, pads)
    if em.writer.dtypes[sums] == "INT48":  # SLICE takes no INT48 (exact: see _rescale_sums)
        sums = int48_to_int32(em, sums, 0, "sums_i32")
    bands = []
    for i, (r0, rl, rc) in enumerate(rows):
        cells = []
        for j, (c0, cl, cc) in enumerate(cols):
            blk = sums
            if (rl, cl) != (oh, ow):
                blk = em.new(f"blk{i}_{j}", [n, rl, cl, c], em.writer.dtypes[sums])
                em.writer.op("SLICE", [sums, em.const_shape(f"blk{i}_{j}_start", [0, r0, c0, 0]),
                                       em.const_shape(f"blk{i}_{j}_size", [n, rl, cl, c])], blk)
            one = len(rows) * len(cols) == 1
            cells.append(_rescale_sums(em, blk, qo, qi.s / (rc * cc * qo.s), f"blk{i}_{j}_rs",
                                       out_name if one else None))
        bands.append(_concat(em, cells, 2, f"band{i}"))
    return bands[0] if len(bands) * len(cols) == 1 else _concat(em, bands, 1, "bands", out_name)


def _window_args(node, count: int):
    """The call's ``count`` positional args (missing ones None), and its kernel, stride and
    padding as [h, w] (stride defaults to the kernel, padding to 0)."""
    a = list(node.args) + [None] * (count - len(node.args))
    kernel = _pair(a[1])
    stride = _pair(a[2]) if a[2] else kernel
    padding = _pair(a[3] if a[3] is not None else 0)
    return a, kernel, stride, padding


def _fit_windows(em, x, in_shape, kernel, stride, pads, out_hw):
    """Pads that make ``out_hw`` windows tile the input exactly (TOSA's output-size rule):
    the trailing pad grows for ceil_mode windows and shrinks (then the input is cropped) for
    rows/columns PyTorch's floor mode leaves unread; returns (x, its shape, [t, b, l, r])."""
    new, rems = [], []
    for i in range(2):
        span = (out_hw[i] - 1) * stride[i] + kernel[i]
        hi = span - in_shape[1 + i] - pads[2 * i]
        new += [pads[2 * i], max(hi, 0)]
        rems.append(max(-hi, 0))
    if any(rems):
        x = _crop(em, x, in_shape, *rems)
        in_shape = em.writer.shapes[x]
    return x, in_shape, new


def _lowest(em, x) -> float | int:
    """The smallest value of ``x``'s TOSA dtype (the padding a max pool never picks)."""
    dt = em.writer.dtypes[x]
    return -FP_MAX if dt.startswith("FP") else -(1 << (int(dt[3:]) - 1))


def _pad(em, x, pads, value, suffix):
    """PAD NHWC ``x`` by ``pads`` = [t, b, l, r] with ``value``."""
    n, h, w, c = em.writer.shapes[x]
    dt = em.writer.dtypes[x]
    shape = [n, h + pads[0] + pads[1], w + pads[2] + pads[3], c]
    out = em.new(suffix, shape, dt)
    em.writer.op("PAD", [x, em.const_shape(f"{suffix}_pads", [0, 0, *pads, 0, 0]),
                         em.const(f"{suffix}_value", [value], dt, [1])], out)
    return out


def _reshape(em, x, shape, suffix):
    out = em.new(suffix, shape, em.writer.dtypes[x])
    em.writer.op("RESHAPE", [x, em.const_shape(f"{suffix}_shape", shape)], out)
    return out


def _transpose(em, x, perm, suffix):
    shape = [em.writer.shapes[x][p] for p in perm]
    out = em.new(suffix, shape, em.writer.dtypes[x])
    em.writer.op("TRANSPOSE", [x], out, perms=list(perm))
    return out


def _dilated_max_pool(em, node, x, in_shape, kernel, stride, padding, dil, out_hw):
    """max_pool2d with dilation via space-to-batch: the input, padded with the lowest value,
    split into its ``dh x dw`` phases (row ``q * dh + r`` -> phase r, row q), one dense
    MAX_POOL2D (stride 1) over all phases, the phases interleaved back, then every
    ``stride``-th row/column kept by a 1x1 MAX_POOL2D."""
    n, _, _, c = in_shape
    dense = [(o - 1) * s + 1 for o, s in zip(out_hw, stride, strict=True)]  # stride-1 rows
    q = [-(-(o + d * (k - 1)) // d) for o, d, k in zip(dense, dil, kernel, strict=True)]
    full = [qq * d for qq, d in zip(q, dil, strict=True)]
    hi = [f - size - p for f, size, p in zip(full, in_shape[1:3], padding, strict=True)]
    x = _pad(em, x, [padding[0], max(hi[0], 0), padding[1], max(hi[1], 0)], _lowest(em, x),
             "dil_pad")
    if hi[0] < 0 or hi[1] < 0:
        x = _crop(em, x, em.writer.shapes[x], max(-hi[0], 0), max(-hi[1], 0))
    dh, dw = dil
    x = _reshape(em, x, [n, q[0], dh, q[1], dw, c], "phases")
    x = _transpose(em, x, [0, 2, 4, 1, 3, 5], "phases_t")
    x = _reshape(em, x, [n * dh * dw, q[0], q[1], c], "phase_batch")
    r = [q[0] - kernel[0] + 1, q[1] - kernel[1] + 1]
    pooled = em.new("phase_pool", [n * dh * dw, r[0], r[1], c], em.writer.dtypes[x])
    em.writer.op("MAX_POOL2D", [x], pooled, kernel=list(kernel), stride=[1, 1],
                 pad=[0, 0, 0, 0], nan_mode="PROPAGATE")
    x = _reshape(em, pooled, [n, dh, dw, r[0], r[1], c], "interleave")
    x = _transpose(em, x, [0, 3, 1, 4, 2, 5], "interleave_t")
    x = _reshape(em, x, [n, r[0] * dh, r[1] * dw, c], "dense")
    if r[0] * dh != dense[0] or r[1] * dw != dense[1]:
        x = _crop(em, x, em.writer.shapes[x], r[0] * dh - dense[0], r[1] * dw - dense[1])
    if list(stride) == [1, 1]:
        out = em.out(node, NHWC)
        em.writer.op("IDENTITY", [x], out)
        return out
    out = em.out(node, NHWC)
    em.writer.op("MAX_POOL2D", [x], out, kernel=[1, 1], stride=list(stride), pad=[0, 0, 0, 0],
                 nan_mode="PROPAGATE")
    return out


@register(aten.max_pool2d.default)
def max_pool2d(em, node):
    """max_pool2d -> MAX_POOL2D (ceil_mode by a longer trailing pad; dilation: see
    :func:`_dilated_max_pool`)."""
    a, kernel, stride, padding = _window_args(node, 6)
    x_node = a[0]
    dilation = _pair(a[4] if a[4] is not None else 1)
    in_shape = em.shape(x_node, NHWC)
    out_hw = em.shape(node, NHWC)[1:3]
    x = em.tensor(x_node, NHWC)
    if dilation != [1, 1]:
        out = _dilated_max_pool(em, node, x, in_shape, kernel, stride, padding, dilation, out_hw)
        em.bind(node, out, NHWC)
        return
    x, _, pads = _fit_windows(em, x, in_shape, kernel, stride,
                              [padding[0], padding[0], padding[1], padding[1]], out_hw)
    out = em.out(node, NHWC)
    em.writer.op("MAX_POOL2D", [x], out, kernel=kernel, stride=stride, pad=pads,
                 nan_mode="PROPAGATE")
    em.bind(node, out, NHWC)


@register(aten.avg_pool2d.default)
def avg_pool2d(em, node):
    """avg_pool2d -> AVG_POOL2D; padding that counts in the divisor is an explicit PAD with
    the zero point, the ceil_mode overhang (never counted) TOSA's own padding."""
    a, kernel, stride, padding = _window_args(node, 7)
    x_node = a[0]
    count_include_pad = True if a[5] is None else bool(a[5])
    in_shape = em.shape(x_node, NHWC)
    x = em.tensor(x_node, NHWC)
    if a[6] is not None:
        pads = [padding[0], padding[0], padding[1], padding[1]]
        x, in_shape, pads = _fit_windows(em, x, in_shape, kernel, stride, pads,
                                         em.shape(node, NHWC)[1:3])
        em.bind(node, _window_sum(em, node, x_node, x, kernel, stride, pads, a[6]), NHWC)
        return
    pads = [padding[0], padding[0], padding[1], padding[1]]
    if any(pads) and count_include_pad:
        pv = em.qin(node, x_node).zp if em.is_int else 0.0
        x = _pad(em, x, pads, pv, "padded")
        in_shape, pads = em.writer.shapes[x], [0, 0, 0, 0]
    x, in_shape, pads = _fit_windows(em, x, in_shape, kernel, stride, pads,
                                     em.shape(node, NHWC)[1:3])
    out = avg_pool(em, node, x_node, x, in_shape, kernel, stride, pads)
    em.bind(node, out, NHWC)


def _window_sum(em, node, x_node, x, kernel, stride, pads, divisor):
    """avg_pool2d with ``divisor_override``: the window sums over the real elements (a
    DEPTHWISE_CONV2D with weights of one; exact in INT32) divided by ``divisor`` (in INT
    folded into the RESCALE to the output)."""
    c = em.writer.shapes[x][3]
    if not em.is_int:
        w = np.full([*kernel, c, 1], 1.0 / divisor, np.float32)
        zp = em.const("zp", [0.0], "FP32", [1])
        out = em.out(node, NHWC)
        em.writer.op("DEPTHWISE_CONV2D", [x, em.const("ones", w, "FP32", list(w.shape)),
                                          em.const("bias", np.zeros(c), "FP32", [c]), zp, zp],
                     out, pad=pads, stride=list(stride), dilation=[1, 1], local_bound=False,
                     acc_type="FP32")
        return out
    qi, qo = em.qin(node, x_node), em.qout(node)
    sums = _int_window_sums(em, node, x_node, x, kernel, stride, pads)
    return _rescale_sums(em, sums, qo, qi.s / (divisor * qo.s), "rescale", em.out(node, NHWC))


def _int_window_sums(em, node, x_node, x, kernel, stride, pads):
    """The exact window sums of the zero-point-free quantized ``x`` (NHWC): a DEPTHWISE_CONV2D
    with weights of one, INT32 (INT48 for int16 input)."""
    n, h, w_in, c = em.writer.shapes[x]
    qi = em.qin(node, x_node)
    dt = INT_OF[qi.dtype]
    acc = "INT48" if dt == "INT16" else "INT32"
    w = np.ones([*kernel, c, 1], np.int8)
    out_hw = [(size + p0 + p1 - k) // st + 1 for size, p0, p1, k, st in
              zip([h, w_in], pads[0::2], pads[1::2], kernel, stride, strict=True)]
    sums = em.new("sums", [n, *out_hw, c], acc)
    em.writer.op("DEPTHWISE_CONV2D", [x, em.const("ones", w, "INT8", list(w.shape)),
                                      em.const("bias", np.zeros(c), acc, [c]),
                                      em.const("xzp", [qi.zp], dt, [1]),
                                      em.const("wzp", [0], "INT8", [1])],
                 sums, pad=pads, stride=list(stride), dilation=[1, 1], local_bound=False,
                 acc_type=acc)
    return sums


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling windows [floor(i*size/out), ceil((i+1)*size/out)).

    Example:
        >>> adaptive_windows(5, 3)
        [(0, 2), (1, 4), (3, 5)]
    """
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _uneven_adaptive(em, node, x_node, x, in_shape, oh, ow):
    """adaptive_avg_pool2d with uneven windows: one SLICE + AVG_POOL2D per output element
    (windows of one output row share a row SLICE), CONCAT along W, then along H; INT8 by
    :func:`_uneven_adaptive_int`."""
    if em.is_int and em.qin(node, x_node).dtype == torch.int8:
        return _uneven_adaptive_int(em, node, x_node, x, in_shape, oh, ow)
    n, _, w_in, c = in_shape
    dt = em.writer.dtypes[x]
    izp, ozp, acc = _zps(em, node, x_node)
    rows = []
    for i, (h0, h1) in enumerate(adaptive_windows(in_shape[1], oh)):
        band = em.new(f"r{i}", [n, h1 - h0, w_in, c], dt)
        em.writer.op("SLICE", [x, em.const_shape(f"r{i}_start", [0, h0, 0, 0]),
                               em.const_shape(f"r{i}_size", [n, h1 - h0, w_in, c])], band)
        cells = []
        for j, (w0, w1) in enumerate(adaptive_windows(w_in, ow)):
            cell = em.new(f"r{i}c{j}", [n, h1 - h0, w1 - w0, c], dt)
            em.writer.op("SLICE", [band, em.const_shape(f"r{i}c{j}_start", [0, 0, w0, 0]),
                                   em.const_shape(f"r{i}c{j}_size", [n, h1 - h0, w1 - w0, c])],
                         cell)
            avg = em.new(f"r{i}c{j}_avg", [n, 1, 1, c], dt)
            em.writer.op("AVG_POOL2D", [cell, izp, ozp], avg, kernel=[h1 - h0, w1 - w0],
                         stride=[1, 1], pad=[0, 0, 0, 0], acc_type=acc)
            cells.append(avg)
        row = em.new(f"r{i}_cat", [n, 1, ow, c], dt)
        em.writer.op("CONCAT", cells, row, axis=2)
        rows.append(row)
    qo, qi = em.qout(node), em.qin(node, x_node)
    if em.is_int and (qo.s != qi.s or qo.zp != qi.zp):
        cat = em.new("cat", [n, oh, ow, c], dt)
        em.writer.op("CONCAT", rows, cat, axis=1)
        return requantize(em, cat, qi, qo, "rq", out_name=em.out(node, NHWC))
    out = em.out(node, NHWC)
    em.writer.op("CONCAT", rows, out, axis=1)
    return out


def _uneven_adaptive_int(em, node, x_node, x, in_shape, oh, ow):
    """INT8 uneven adaptive average pool rounded once, ties to even, like the fake-quant
    quantize (per-window AVG_POOL2D rounds .5 away from zero, and a requantize after it
    rounds twice; vgg's 2x2 -> 7x7 head meets those ties). Exact INT32 window sums (one
    SLICE + :func:`_int_window_sums` per output element), scaled to a common divisor ``L``
    (the LCM of the window areas) by one MUL with the integers ``L / area``, then one
    RESCALE by ``s_in / (L * s_out)``."""
    n, h_in, w_in, c = in_shape
    rows_w, cols_w = adaptive_windows(h_in, oh), adaptive_windows(w_in, ow)
    rows = []
    for i, (h0, h1) in enumerate(rows_w):
        cells = []
        for j, (w0, w1) in enumerate(cols_w):
            cell = em.new(f"r{i}c{j}", [n, h1 - h0, w1 - w0, c], em.writer.dtypes[x])
            em.writer.op("SLICE", [x, em.const_shape(f"r{i}c{j}_start", [0, h0, w0, 0]),
                                   em.const_shape(f"r{i}c{j}_size", [n, h1 - h0, w1 - w0, c])],
                         cell)
            cells.append(_int_window_sums(em, node, x_node, cell, [h1 - h0, w1 - w0], [1, 1],
                                          [0, 0, 0, 0]))
        rows.append(em.new(f"r{i}_cat", [n, 1, ow, c], "INT32"))
        em.writer.op("CONCAT", cells, rows[-1], axis=2)
    sums = em.new("sums_cat", [n, oh, ow, c], "INT32")
    em.writer.op("CONCAT", rows, sums, axis=1)
    areas = np.array([[(h1 - h0) * (w1 - w0) for w0, w1 in cols_w] for h0, h1 in rows_w])
    lcm = int(np.lcm.reduce(areas.ravel()))
    if lcm > 1 and (areas != lcm).any():  # bring every window to the divisor L
        weights = em.const("lcm_w", (lcm // areas).reshape(1, oh, ow, 1), "INT32", [1, oh, ow, 1])
        scaled = em.new("sums_l", [n, oh, ow, c], "INT32")
        em.writer.op("MUL", [sums, weights, em.const("mul_shift", [0], "INT8", [1])], scaled)
        sums = scaled
    qi, qo = em.qin(node, x_node), em.qout(node)
    return rescale_ties_even(em, sums, INT_OF[qo.dtype], qi.s / (lcm * qo.s), qo.zp, "rescale",
                             out_name=em.out(node, NHWC))


@register(aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(em, node):
    """adaptive_avg_pool2d -> one AVG_POOL2D when the output divides the input, else
    :func:`_uneven_adaptive`."""
    x_node = node.args[0]
    oh, ow = _pair(node.args[1])
    in_shape = em.shape(x_node, NHWC)
    H, W = in_shape[1], in_shape[2]
    oh, ow = oh or H, ow or W
    x = em.tensor(x_node, NHWC)
    if H % oh or W % ow:
        out = _uneven_adaptive(em, node, x_node, x, in_shape, oh, ow)
    else:
        k = [H // oh, W // ow]
        out = avg_pool(em, node, x_node, x, in_shape, k, k, [0, 0, 0, 0])
    em.bind(node, out, NHWC)
