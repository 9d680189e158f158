"""Image operators (spec chapter "Image"): RESIZE.

The sampling positions depend only on the output row (y) or column (x), so they are computed once
per axis as small integer vectors; the neighbours are then gathered from the input's (H*W) plane
by one ``np.take`` of a precomputed [corner, OH, OW] index, and weighed by per-corner row and
column weights: no per-element Python loop. With constant scale, offset and border (the usual
case) all of that is computed once, by :func:`prepare_resize`, and a run only gathers and weighs.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

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
    return [_resize_setup(call)(call.inputs[0])]


@register_prepare("RESIZE")
def prepare_resize(call: OpCall):
    """RESIZE with constant scale, offset and border: every ERROR_IF, the sampling indices and
    the weights once; a run only gathers and weighs (the op function's resampler, kept)."""
    if len(call.inputs) != 4 or any(call.inputs[i] is None for i in (1, 2, 3)):
        return None
    resample = _resize_setup(call)
    return lambda run: [resample(run.inputs[0])]


def _resize_setup(call: OpCall) -> Callable[[np.ndarray], np.ndarray]:
    """RESIZE's ERROR_IFs, in the spec pseudocode's order, then the resampler of the input the
    shapes and attributes define (``resample(input) -> output``). Longer than 80 lines on
    purpose: it follows the pseudocode's checks and index and weight computation in one reading."""
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
        return lambda x: np.zeros(out_shape, dtype=working)
    iy0, iy1, dy = _axis_positions(oh, ih, scale_y_n, scale_y_d, offset_y)
    ix0, ix1, dx = _axis_positions(ow, iw, scale_x_n, scale_x_d, offset_x)
    # the input seen as [N, IH*IW, C]: a (row, column) neighbour is one index into its plane
    plane_shape = (n, ih * iw, c)

    if mode == "NEAREST":
        # Integer and float both pick the upper neighbour when the fraction is >= 0.5; comparing
        # 2*d >= scale_n decides that exactly (the spec's float form d/scale_n >= 0.5 is the same
        # real-number test).
        rows = np.where(2 * dy >= scale_y_n, iy1, iy0)
        cols = np.where(2 * dx >= scale_x_n, ix1, ix0)
        nearest = rows[:, None] * iw + cols[None, :]
        return lambda x: np.take(x.reshape(plane_shape), nearest, axis=1)

    # corners in the order of the spec's sum: (y0, x0), (y0, x1), (y1, x0), (y1, x1)
    corners = np.stack([rows[:, None] * iw + cols[None, :]
                        for rows, cols in ((iy0, ix0), (iy0, ix1), (iy1, ix0), (iy1, ix1))])
    if out_t in ("INT32", "INT48"):
        # acc = v00*(sy-dy)*(sx-dx) + v01*(sy-dy)*dx + v10*dy*(sx-dx) + v11*dy*dx, in out_t's
        # working dtype: |acc| <= 2**15 * 2**11 * 2**11 = 2**37 for int16 input (int64), and
        # <= 2**7 * 2**22 = 2**29 for int8 input (int32), so every product and partial sum is
        # exact, in any order.
        compute = working
        y_near, y_far = scale_y_n - dy, dy
        x_near, x_far = scale_x_n - dx, dx
        finish = None
    else:
        # float64, in the order of the formula (two roundings per term, as always computed here),
        # then one rounding to out_t
        compute = np.dtype(np.float64)
        y_far = dy / float(scale_y_n)
        x_far = dx / float(scale_x_n)
        y_near, x_near = 1.0 - y_far, 1.0 - x_far
        # FP32 and FP16: round_to_float's own one-step cast, without its errstate (ops run with
        # numpy's floating-point warnings off), a good part of a small resize's run time
        if out_t in ("FP32", "FP16"):
            finish = operator.methodcaller("astype", working)
        else:
            finish = functools.partial(round_to_float, dtype=out_t)
    weight_y = np.stack([y_near, y_near, y_far, y_far]).astype(compute)[:, :, None, None]
    weight_x = np.stack([x_near, x_far, x_near, x_far]).astype(compute)[:, None, :, None]
    if 4 * oh * ow * c <= _SMALL_WEIGHTS:
        # numpy multiplies a weight broadcast along C (innermost, often only a few channels)
        # element by element in short inner loops: spelt out over C it is one long loop
        weight_y = np.ascontiguousarray(np.broadcast_to(weight_y, (4, oh, ow, c)))
        weight_x = np.ascontiguousarray(np.broadcast_to(weight_x, (4, oh, ow, c)))
    return functools.partial(_bilinear, plane_shape=plane_shape, corners=corners, compute=compute,
                             weight_y=weight_y, weight_x=weight_x, finish=finish)


#: Largest bilinear weight array ([corner, OH, OW, C] elements) a resampler keeps spelt out over
#: the channels; larger resizes broadcast their per-row and per-column weights instead.
_SMALL_WEIGHTS = 1 << 16


def _bilinear(x: np.ndarray, *, plane_shape: tuple[int, int, int], corners: np.ndarray, compute: np.dtype,
              weight_y: np.ndarray, weight_x: np.ndarray,
              finish: Callable[[np.ndarray], np.ndarray] | None) -> np.ndarray:
    """BILINEAR of ``x``: its four neighbours ``corners`` ([4, OH, OW] into the input's H*W
    plane, in ``compute``), each times its row weight then its column weight, summed in corner
    order; then rounded to the float output by ``finish``, or returned as is when it is None
    (an integer sum is already the output)."""
    terms = np.take(x.astype(compute).reshape(plane_shape), corners, axis=1)  # [N, 4, OH, OW, C]
    terms *= weight_y
    terms *= weight_x
    acc = np.add(terms[:, 0], terms[:, 1])
    acc += terms[:, 2]
    acc += terms[:, 3]
    return acc if finish is None else finish(acc)
