"""Image operators (spec chapter "Image"): RESIZE.

The sampling positions depend only on the output row (y) or column (x), so they are computed once
per axis as small integer vectors and the four neighbours are gathered with broadcast fancy
indexing: no per-element Python loop.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from ..numerics import round_to_float
from ._layout_support import check_rank, shape_input
from ._levels import MAX_SCALE
from .facts import Compliance
from .registry import OpCall, register, register_prepare

#: (in_t, out_t) per mode, from the spec's supported data types table.
_RESIZE_TYPES = {
    "BILINEAR": {
        ("INT8", "INT32"),
        ("INT16", "INT48"),
        ("FP16", "FP16"),
        ("BF16", "BF16"),
        ("FP32", "FP32"),
    },
    "NEAREST": {
        ("INT8", "INT8"),
        ("INT16", "INT16"),
        ("FP16", "FP16"),
        ("BF16", "BF16"),
        ("FP32", "FP32"),
    },
}


def _idiv_check(call: OpCall, a: int, b: int, what: str) -> int:
    """Spec ``idiv_check``: ERROR_IF ``a`` is not a multiple of ``b``; C division otherwise."""
    if a % b != 0:
        call.fail(f"{what} is not an integer")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _axis_positions(out_len: int, in_len: int, scale_n: int, scale_d: int, offset: int):
    """Per output coordinate: (i0, i1, d), d being the position's remainder in 1/scale_n units.

    ``i = idiv_floor(o * scale_d + offset, scale_n)`` (floor division, as positions may be < 0).
    """
    pos = np.arange(out_len, dtype=np.int64) * scale_d + offset
    i = np.floor_divide(pos, scale_n)
    d = pos - i * scale_n
    i0 = np.maximum(i, 0)
    i1 = np.minimum(i + 1, in_len - 1)
    return i0, i1, d


@register(
    "RESIZE", operands=("input", "scale", "offset", "border"),
    compliance=Compliance("MAX_RELATIVE", {"scale": 0.006, "ulp_bound": 20.0}),
)
def resize(call: OpCall) -> list[np.ndarray]:
    """RESIZE: NEAREST or BILINEAR resampling of the H and W axes of an NHWC tensor.

    Integer BILINEAR returns the weighted sum scaled by ``scale_y_n * scale_x_n`` (exact, no
    division); floating-point modes compute in float64 and round once to the output type.
    """
    return [_resample(call.inputs[0], _resize_setup(call))]


@register_prepare("RESIZE")
def prepare_resize(call: OpCall):
    """RESIZE with constant scale, offset and border: every ERROR_IF, the sampling indices and
    the weights once; a run only gathers and weighs."""
    if len(call.inputs) != 4 or any(call.inputs[i] is None for i in (1, 2, 3)):
        return None
    sampling = _resize_setup(call)
    return lambda run: [_resample(run.inputs[0], sampling)]


def _resize_setup(call: OpCall) -> tuple:
    """RESIZE's ERROR_IFs, in the spec pseudocode's order, then what a resampling needs of the
    shapes and attributes (see :func:`_resample`). Longer than 80 lines on purpose: it follows
    the pseudocode's checks and index and weight computation in one reading."""
    call.check_arity(4, 1)
    mode = call.attrs.get("mode")
    if mode not in _RESIZE_TYPES:
        call.fail(f"mode {mode} is not NEAREST or BILINEAR")
    in_t, out_t = call.in_dtype(0), call.out_dtype()
    if (in_t, out_t) not in _RESIZE_TYPES[mode]:
        call.fail(f"unsupported {mode} types {in_t} -> {out_t}")
    in_shape = tuple(call.input_decls[0].shape)
    out_shape = tuple(call.out_shape())
    check_rank(call, len(in_shape), 4, 4, "input")
    check_rank(call, len(out_shape), 4, 4, "output")
    n, ih, iw, c = in_shape
    on, oh, ow, oc = out_shape
    call.error_if(on != n, "output batch N != input batch N")
    call.error_if(oc != c, "output channels C != input channels C")
    scale_y_n, scale_y_d, scale_x_n, scale_x_d = shape_input(call, 1, 4, "scale")
    offset_y, offset_x = shape_input(call, 2, 2, "offset")
    border_y, border_x = shape_input(call, 3, 2, "border")

    # ERROR_IFs of the spec pseudocode, in its order.
    call.error_if(max(oh, ow, ih, iw) >= 16384, "max(OH,OW,IH,IW) >= 16384")
    call.error_if(
        scale_y_n <= 0 or scale_y_d <= 0 or scale_x_n <= 0 or scale_x_d <= 0,
        "scale_y_n <= 0 || scale_y_d <= 0 || scale_x_n <= 0 || scale_x_d <= 0",
    )
    call.error_if(
        scale_y_n > (1 << 11) or scale_x_n > (1 << 11),
        "scale_y_n > (1 << 11) || scale_x_n > (1 << 11)",
    )
    call.error_if(
        scale_y_d >= 16 * scale_y_n or scale_x_d >= 16 * scale_x_n,
        "scale_y_d >= 16 * scale_y_n || scale_x_d >= 16 * scale_x_n",
    )
    call.error_if(
        offset_y < -scale_y_n or offset_y >= 16 * scale_y_n,
        "offset_y < -scale_y_n || offset_y >= 16 * scale_y_n",
    )
    call.error_if(
        offset_x < -scale_x_n or offset_x >= 16 * scale_x_n,
        "offset_x < -scale_x_n || offset_x >= 16 * scale_x_n",
    )
    call.error_if(
        border_y < -16 * scale_y_n or border_y >= scale_y_n,
        "border_y < -16 * scale_y_n || border_y >= scale_y_n",
    )
    call.error_if(
        border_x < -16 * scale_x_n or border_x >= scale_x_n,
        "border_x < -16 * scale_x_n || border_x >= scale_x_n",
    )
    # Level 8K: each scale ratio (value of the fraction, so independent of its reduction).
    call.error_if(
        scale_y_n > MAX_SCALE * scale_y_d, "LEVEL_CHECK(scale_y_n / scale_y_d <= MAX_SCALE)"
    )
    call.error_if(
        scale_x_n > MAX_SCALE * scale_x_d, "LEVEL_CHECK(scale_x_n / scale_x_d <= MAX_SCALE)"
    )
    expect_oh = _idiv_check(call, (ih - 1) * scale_y_n - offset_y + border_y, scale_y_d, "OH") + 1
    expect_ow = _idiv_check(call, (iw - 1) * scale_x_n - offset_x + border_x, scale_x_d, "OW") + 1
    if oh != expect_oh:
        call.fail(f"OH != idiv_check((IH - 1) * scale_y_n - offset_y + border_y, scale_y_d) + 1 = {expect_oh}")
    if ow != expect_ow:
        call.fail(f"OW != idiv_check((IW - 1) * scale_x_n - offset_x + border_x, scale_x_d) + 1 = {expect_ow}")

    working = dtype_info(out_t).working
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return ("EMPTY", out_shape, working)
    iy0, iy1, dy = _axis_positions(oh, ih, scale_y_n, scale_y_d, offset_y)
    ix0, ix1, dx = _axis_positions(ow, iw, scale_x_n, scale_x_d, offset_x)
    rows0, rows1 = iy0[:, None], iy1[:, None]
    cols0, cols1 = ix0[None, :], ix1[None, :]

    if mode == "NEAREST":
        # Integer and float both pick the upper neighbour when the fraction is >= 0.5; comparing
        # 2*d >= scale_n decides that exactly (the spec's float form d/scale_n >= 0.5 is the same
        # real-number test).
        rows = np.where(2 * dy >= scale_y_n, iy1, iy0)[:, None]
        cols = np.where(2 * dx >= scale_x_n, ix1, ix0)[None, :]
        return ("NEAREST", rows, cols)

    wy = dy[None, :, None, None]
    wx = dx[None, None, :, None]
    corners = (rows0, cols0, rows1, cols1)
    if out_t in ("INT32", "INT48"):
        # acc = v00*(sy-dy)*(sx-dx) + v01*(sy-dy)*dx + v10*dy*(sx-dx) + v11*dy*dx in int64.
        # |acc| <= 2**15 * 2**11 * 2**11 = 2**37, and for int8 input <= 2**7 * 2**22 = 2**29 (int32):
        # exact in any order, so each corner's weight is one product made here
        sy, sx = scale_y_n, scale_x_n
        weights = ((sy - wy) * (sx - wx), (sy - wy) * wx, wy * (sx - wx), wy * wx)
        return ("INT", corners, weights, working)
    # float64, in the order of the formula (two roundings per term, as always computed here)
    wy = wy / float(scale_y_n)
    wx = wx / float(scale_x_n)
    return ("FLOAT", corners, (1.0 - wy, 1.0 - wx, wy, wx), out_t)


def _resample(x: np.ndarray, sampling: tuple) -> np.ndarray:
    """RESIZE of ``x`` by the ``sampling`` of :func:`_resize_setup`."""
    kind = sampling[0]
    if kind == "NEAREST":
        return np.ascontiguousarray(x[:, sampling[1], sampling[2], :])
    if kind == "EMPTY":
        return np.zeros(sampling[1], dtype=sampling[2])
    rows0, cols0, rows1, cols1 = sampling[1]
    if kind == "INT":
        w00, w01, w10, w11 = sampling[2]
        v = x.astype(np.int64)
        acc = v[:, rows0, cols0, :] * w00 + v[:, rows0, cols1, :] * w01 + v[:, rows1, cols0, :] * w10 \
            + v[:, rows1, cols1, :] * w11
        return acc.astype(sampling[3])
    vy, vx, wy, wx = sampling[2]
    v = x.astype(np.float64)
    acc = v[:, rows0, cols0, :] * vy * vx + v[:, rows0, cols1, :] * vy * wx + v[:, rows1, cols0, :] * wy * vx \
        + v[:, rows1, cols1, :] * wy * wx
    return round_to_float(acc, sampling[3])
