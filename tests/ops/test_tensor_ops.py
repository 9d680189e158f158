"""Focused checks of the tensor operators against the official reference model.

Each test builds a one-operator TOSA 1.0 graph with ``tosa_serializer`` (weights, bias and zero
points as CONST tensors), runs it through the reference model and through
:func:`tosa_verify.run`, and requires identical integer outputs (floating-point outputs: equal
within a tight tolerance of the reference's FP64 "precise" result). The cases aim at what the
generated conformance cases rarely reach: zero points with padding, strides and dilations
together, negative TRANSPOSE_CONV2D padding, INT32 accumulator wrap-around and INT48
saturation, signed zeros and NaN modes. No expected value is written here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify import reference
from tosa_verify.errors import TosaValidationError

DT = ts.DType
_NP = {
    DT.INT4: np.int8,
    DT.INT8: np.int8,
    DT.INT16: np.int16,
    DT.INT32: np.int32,
    DT.INT48: np.int64,
    DT.FP16: np.float16,
    DT.BF16: ml_dtypes.bfloat16,
    DT.FP32: np.float32,
}
_RNG = np.random.default_rng(1234)


def _graph(op, attr, inputs, consts, outputs) -> bytes:
    """``op`` with placeholders ``inputs`` and CONSTs ``consts`` ((shape, dtype) / (array, dtype))."""
    graph = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    names = [graph.addPlaceholder(list(shape), dtype).name for shape, dtype in inputs]
    for i, (arr, dtype) in enumerate(consts):
        names.append(
            _int4_const(graph, arr, f"const4_{i}")
            if dtype == DT.INT4
            else graph.addConst(list(arr.shape), dtype, arr).name
        )
    outs = [graph.addOutput(list(shape), dtype).name for shape, dtype in outputs]
    graph.addOperator(op, names, outs, attr)
    return bytes(graph.serialize())


def _int4_const(graph, arr: np.ndarray, name: str) -> str:
    """An INT4 CONST. tosa_serializer's addConst fails on negative INT4 values, so add the packed
    bytes (two nibbles a byte, low nibble first) as INT8 and retype the tensor."""
    assert arr.ndim == 1 or arr.shape[-1] % 2 == 0  # rows pack independently only when even
    nibbles = arr.astype(np.uint8) & 0xF
    if arr.shape[-1] % 2:
        nibbles = np.concatenate([nibbles, np.zeros(1, np.uint8)])
    packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).view(np.int8)
    graph.addConst(list(packed.shape), DT.INT8, packed, name=name)
    tensor = graph.currRegion.currBasicBlock.tensors[name]
    tensor.setDtype(DT.INT4)
    tensor.SetDimSize(arr.ndim - 1, arr.shape[-1])
    return name


def _attr(kind: str, *args) -> ts.TosaSerializerAttribute:
    attr = ts.TosaSerializerAttribute()
    getattr(attr, kind)(*args)
    return attr


def _ints(shape, dtype, lo=None, hi=None) -> np.ndarray:
    info = np.iinfo(_NP[dtype])
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return _RNG.integers(lo, hi + 1, size=shape).astype(_NP[dtype])


def _assert_same_as_reference(
    graph: bytes, feeds: list[np.ndarray], *, cli: bool = False
) -> list[np.ndarray]:
    """Our outputs equal the reference model's. ``cli``: run the reference executable (through
    :mod:`tosa_verify.reference`), needed for INT48 outputs, which ``tosa_reference_model.run``
    cannot return."""
    if cli:
        ref = reference.run(graph, feeds)
    else:
        ref, status = reference_model.run(graph, feeds)
        assert status == reference_model.GraphStatus.TOSA_VALID
    ours = tosa_verify.run(graph, feeds)
    for a, b in zip(ours, ref, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    return ours


def _conv_consts(w, w_dtype, bias, out_dtype, in_dtype, izp, wzp):
    return [
        (w, w_dtype),
        (bias, out_dtype),
        (np.array([izp], _NP[in_dtype]), in_dtype),
        (np.array([wzp], _NP[w_dtype]), w_dtype),
    ]


@pytest.mark.parametrize(
    ("pad", "stride", "dilation", "izp", "wzp", "w_dtype"),
    [
        ([1, 1, 0, 1], [2, 1], [1, 2], -128, 127, DT.INT8),
        ([0, 0, 0, 0], [1, 1], [1, 1], 5, 0, DT.INT4),
        ([3, 2, 3, 3], [3, 2], [2, 1], 0, -3, DT.INT8),
    ],
)
def test_conv2d_int8(pad, stride, dilation, izp, wzp, w_dtype):
    n, ih, iw, ic, oc, kh, kw = 2, 9, 8, 6, 3, 3, 2
    oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    assert (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) % stride[0] == 0
    assert (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) % stride[1] == 0
    lo, hi = (-7, 7) if w_dtype == DT.INT4 else (None, None)  # int4_t is [-7, 7]
    w = _ints((oc, kh, kw, ic), w_dtype, lo, hi)
    consts = _conv_consts(
        w, w_dtype, _ints((oc,), DT.INT32, -5000, 5000), DT.INT32, DT.INT8, izp, wzp
    )
    attr = _attr("Conv2dAttribute", pad, stride, dilation, False, DT.INT32)
    graph = _graph(
        ts.Op.CONV2D, attr, [((n, ih, iw, ic), DT.INT8)], consts, [((n, oh, ow, oc), DT.INT32)]
    )
    _assert_same_as_reference(graph, [_ints((n, ih, iw, ic), DT.INT8)])


def test_conv3d_int8_broadcast_bias():
    n, shape, ic, oc = 1, (4, 5, 6), 3, 4
    kernel, pad, stride = (2, 3, 1), [1, 0, 1, 1, 0, 1], [1, 2, 2]
    out = [
        (shape[i] - 1 + pad[2 * i] + pad[2 * i + 1] - (kernel[i] - 1)) // stride[i] + 1
        for i in range(3)
    ]
    consts = _conv_consts(
        _ints((oc, *kernel, ic), DT.INT8),
        DT.INT8,
        _ints((1,), DT.INT32, -99, 99),
        DT.INT32,
        DT.INT8,
        -7,
        2,
    )
    attr = _attr("Conv3dAttribute", pad, stride, [1, 1, 1], False, DT.INT32)
    graph = _graph(
        ts.Op.CONV3D, attr, [((n, *shape, ic), DT.INT8)], consts, [((n, *out, oc), DT.INT32)]
    )
    _assert_same_as_reference(graph, [_ints((n, *shape, ic), DT.INT8)])


def test_depthwise_conv2d_int8_multiplier():
    n, ih, iw, c, m = 1, 7, 6, 3, 2
    pad, stride, dilation = [1, 1, 2, 0], [2, 1], [1, 2]
    oh = (ih - 1 + 2 - 2) // 2 + 1
    ow = (iw - 1 + 2 - 2 * 2) // 1 + 1
    consts = _conv_consts(
        _ints((3, 3, c, m), DT.INT8),
        DT.INT8,
        _ints((c * m,), DT.INT32),
        DT.INT32,
        DT.INT8,
        100,
        -100,
    )
    attr = _attr("DepthwiseConv2dAttribute", pad, stride, dilation, False, DT.INT32)
    graph = _graph(
        ts.Op.DEPTHWISE_CONV2D,
        attr,
        [((n, ih, iw, c), DT.INT8)],
        consts,
        [((n, oh, ow, c * m), DT.INT32)],
    )
    _assert_same_as_reference(graph, [_ints((n, ih, iw, c), DT.INT8)])


@pytest.mark.parametrize("out_pad", [[0, 0, 0, 0], [-2, 1, 2, -1]])
def test_transpose_conv2d_int8(out_pad):
    n, ih, iw, ic, oc, kh, kw, sy, sx = 1, 4, 3, 3, 2, 3, 4, 2, 3
    oh = (ih - 1) * sy + out_pad[0] + out_pad[1] + kh
    ow = (iw - 1) * sx + out_pad[2] + out_pad[3] + kw
    consts = _conv_consts(
        _ints((oc, kh, kw, ic), DT.INT8), DT.INT8, _ints((oc,), DT.INT32), DT.INT32, DT.INT8, -1, 1
    )
    attr = _attr("TransposeConv2dAttribute", out_pad, [sy, sx], False, DT.INT32)
    graph = _graph(
        ts.Op.TRANSPOSE_CONV2D,
        attr,
        [((n, ih, iw, ic), DT.INT8)],
        consts,
        [((n, oh, ow, oc), DT.INT32)],
    )
    _assert_same_as_reference(graph, [_ints((n, ih, iw, ic), DT.INT8)])


def test_conv2d_int16_saturates_int48_like_the_reference():
    # bias close to the INT48 maximum: the reference model saturates acc + bias to 48 bits
    n, ih, iw, ic, oc = 1, 3, 3, 4, 2
    bias = np.array([(1 << 47) - 10, -(1 << 47) + 10], np.int64)
    consts = _conv_consts(_ints((oc, 1, 1, ic), DT.INT8), DT.INT8, bias, DT.INT48, DT.INT16, 0, 0)
    attr = _attr("Conv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], False, DT.INT48)
    graph = _graph(
        ts.Op.CONV2D, attr, [((n, ih, iw, ic), DT.INT16)], consts, [((n, ih, iw, oc), DT.INT48)]
    )
    _assert_same_as_reference(graph, [_ints((n, ih, iw, ic), DT.INT16)], cli=True)


def test_matmul_int8_accumulator_wraps_like_the_reference():
    # 140000 * 255 * 255 overflows int32: the spec says REQUIRE, the reference model wraps
    c = 140_000
    consts = [(np.array([127], np.int8), DT.INT8), (np.array([-128], np.int8), DT.INT8)]
    graph = _graph(
        ts.Op.MATMUL,
        _attr("MatMulAttribute"),
        [((1, 2, c), DT.INT8), ((1, c, 1), DT.INT8)],
        consts,
        [((1, 2, 1), DT.INT32)],
    )
    a = np.full((1, 2, c), -128, np.int8)
    a[0, 1, ::2] = 0
    _assert_same_as_reference(graph, [a, np.full((1, c, 1), 127, np.int8)])


@pytest.mark.parametrize(("dtype", "zp"), [(DT.INT8, -20), (DT.INT16, 0)])
def test_avg_pool2d_int_counts_exclude_padding(dtype, zp):
    n, ih, iw, c = 1, 7, 6, 3
    kernel, stride, pad = [3, 3], [2, 1], [2, 2, 1, 2]
    oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
    ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    consts = [(np.array([zp], _NP[dtype]), dtype), (np.array([-zp], _NP[dtype]), dtype)]
    attr = _attr("AvgPool2dAttribute", kernel, stride, pad, DT.INT32)
    graph = _graph(
        ts.Op.AVG_POOL2D, attr, [((n, ih, iw, c), dtype)], consts, [((n, oh, ow, c), dtype)]
    )
    _assert_same_as_reference(graph, [_ints((n, ih, iw, c), dtype)])


@pytest.mark.parametrize(
    "nan_mode", [ts.NanPropagationMode.PROPAGATE, ts.NanPropagationMode.IGNORE]
)
def test_max_pool2d_fp32_nan_and_signed_zero(nan_mode):
    values = np.array([0.0, -0.0, np.nan, 1.0, -np.inf, np.inf, -1.0], np.float32)
    x = _RNG.choice(values, size=(1, 5, 6, 4)).astype(np.float32)
    x[0, :2, :2, 0] = np.nan  # an all-NaN window
    attr = _attr("MaxPool2dAttribute", [2, 2], [1, 2], [1, 0, 1, 1], nan_mode)
    graph = _graph(ts.Op.MAX_POOL2D, attr, [((1, 5, 6, 4), DT.FP32)], [], [((1, 5, 4, 4), DT.FP32)])
    ours = _assert_same_as_reference(graph, [x])
    ref = reference_model.run(graph, [x])[0][0]
    # assert_array_equal treats -0.0 == +0.0: the spec's tie rule fixes the sign, check it too
    np.testing.assert_array_equal(np.signbit(ours[0]), np.signbit(ref))


@pytest.mark.parametrize(
    "nan_mode", [ts.NanPropagationMode.PROPAGATE, ts.NanPropagationMode.IGNORE]
)
def test_argmax_fp16_nan_modes(nan_mode):
    values = np.array([np.nan, -np.inf, -0.0, 0.0, 2.0, np.inf], np.float16)
    x = _RNG.choice(values, size=(4, 6, 5)).astype(np.float16)
    x[1, :, 2] = np.nan
    x[2, :, 3] = [np.nan, -np.inf, np.nan, -np.inf, np.nan, np.nan]
    attr = _attr("ArgMaxAttribute", 1, nan_mode)
    graph = _graph(ts.Op.ARGMAX, attr, [((4, 6, 5), DT.FP16)], [], [((4, 5), DT.INT32)])
    _assert_same_as_reference(graph, [x])


def _assert_close_to_precise_reference(graph: bytes, feeds: list[np.ndarray]) -> None:
    ref = reference.run(graph, feeds, precise=True)  # FP64 results
    ours = tosa_verify.run(graph, feeds)
    for a, b in zip(ours, ref, strict=True):
        scale = max(1.0, float(np.max(np.abs(b))))
        np.testing.assert_allclose(a.astype(np.float64), b, rtol=0, atol=1e-5 * scale)


def test_conv2d_fp32_close_to_fp64_reference():
    n, ih, iw, ic, oc = 1, 6, 7, 4, 3
    w = _RNG.uniform(-1, 1, (oc, 3, 3, ic)).astype(np.float32)
    consts = [(w, DT.FP32), (_RNG.uniform(-1, 1, (oc,)).astype(np.float32), DT.FP32)]
    consts += [(np.zeros(1, np.float32), DT.FP32)] * 2
    attr = _attr("Conv2dAttribute", [1, 1, 0, 2], [1, 2], [1, 1], False, DT.FP32)
    graph = _graph(
        ts.Op.CONV2D, attr, [((n, ih, iw, ic), DT.FP32)], consts, [((n, 6, 4, oc), DT.FP32)]
    )
    _assert_close_to_precise_reference(
        graph, [_RNG.uniform(-1, 1, (n, ih, iw, ic)).astype(np.float32)]
    )


@pytest.mark.parametrize("inverse", [False, True])
def test_fft2d_close_to_fp64_reference(inverse):
    shape = (2, 8, 16)
    attr = _attr("FFT2dAttribute", inverse, False)
    graph = _graph(ts.Op.FFT2D, attr, [(shape, DT.FP32)] * 2, [], [(shape, DT.FP32)] * 2)
    feeds = [_RNG.uniform(-1, 1, shape).astype(np.float32) for _ in range(2)]
    _assert_close_to_precise_reference(graph, feeds)


def test_rfft2d_close_to_fp64_reference():
    attr = _attr("RFFT2dAttribute", False)
    graph = _graph(ts.Op.RFFT2D, attr, [((3, 4, 8), DT.FP32)], [], [((3, 4, 5), DT.FP32)] * 2)
    _assert_close_to_precise_reference(graph, [_RNG.uniform(-1, 1, (3, 4, 8)).astype(np.float32)])


def test_error_if_cases_are_rejected():
    x = ((1, 4, 4, 2), DT.INT8)
    # output height does not match the CONV2D shape formula
    consts = _conv_consts(
        _ints((2, 3, 3, 2), DT.INT8), DT.INT8, np.zeros(2, np.int32), DT.INT32, DT.INT8, 0, 0
    )
    attr = _attr("Conv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], False, DT.INT32)
    bad_shape = _graph(ts.Op.CONV2D, attr, [x], consts, [((1, 3, 2, 2), DT.INT32)])
    # a non-zero zero point on INT16 input
    pool = _attr("AvgPool2dAttribute", [2, 2], [2, 2], [0, 0, 0, 0], DT.INT32)
    zps = [(np.array([1], np.int16), DT.INT16), (np.array([0], np.int16), DT.INT16)]
    bad_zp = _graph(
        ts.Op.AVG_POOL2D, pool, [((1, 4, 4, 2), DT.INT16)], zps, [((1, 2, 2, 2), DT.INT16)]
    )
    # RFFT2D width not a power of two
    bad_fft = _graph(
        ts.Op.RFFT2D,
        _attr("RFFT2dAttribute", False),
        [((1, 4, 6), DT.FP32)],
        [],
        [((1, 4, 4), DT.FP32)] * 2,
    )
    for graph, feeds in [
        (bad_shape, [np.zeros((1, 4, 4, 2), np.int8)]),
        (bad_zp, [np.zeros((1, 4, 4, 2), np.int16)]),
        (bad_fft, [np.zeros((1, 4, 6), np.float32)]),
    ]:
        with pytest.raises(TosaValidationError):
            tosa_verify.run(graph, feeds)


@pytest.mark.parametrize("stride", [[1, 1], [2, 2], [2, 1], [1, 3]])
@pytest.mark.parametrize("dilation", [[1, 1], [2, 1]])
def test_depthwise_conv2d_int8_blocked_kernel(stride, dilation):
    """The row-blocked, column-phase DEPTHWISE_CONV2D kernel (M = 1, several samples, zero
    points, asymmetric padding, strides and dilations that mix phases)."""
    n, ih, iw, c = 3, 11, 13, 5
    pad = [1, 2, 2, 1]
    oh = (ih - 1 + pad[0] + pad[1] - 2 * dilation[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - 2 * dilation[1]) // stride[1] + 1
    ih = (oh - 1) * stride[0] + 1 + 2 * dilation[0] - pad[0] - pad[1]  # idiv_check exact
    iw = (ow - 1) * stride[1] + 1 + 2 * dilation[1] - pad[2] - pad[3]
    consts = _conv_consts(_ints((3, 3, c, 1), DT.INT8), DT.INT8, _ints((c,), DT.INT32, -5000, 5000),
                          DT.INT32, DT.INT8, -3, 7)
    attr = _attr("DepthwiseConv2dAttribute", pad, stride, dilation, False, DT.INT32)
    graph = _graph(ts.Op.DEPTHWISE_CONV2D, attr, [((n, ih, iw, c), DT.INT8)], consts,
                   [((n, oh, ow, c), DT.INT32)])
    _assert_same_as_reference(graph, [_ints((n, ih, iw, c), DT.INT8)])


@pytest.mark.parametrize(("stride", "dilation", "ic"), [([1, 1], [1, 1], 3), ([2, 2], [1, 1], 3),
                                                        ([1, 2], [2, 1], 7), ([1, 1], [1, 1], 200)])
def test_conv2d_int8_gathered_patches_and_pointwise(stride, dilation, ic):
    """CONV2D's one-GEMM paths: gathered patches for few input channels (taps * IC <= 256),
    the per-tap path beyond, and the pointwise (1x1) GEMM."""
    n, oc = 2, 6
    for k in (3, 1):
        pad = [1, 0, 2, 1] if k == 3 else [0, 0, 0, 0]
        oh, ow = 4, 5
        ih = (oh - 1) * stride[0] + 1 + (k - 1) * dilation[0] - pad[0] - pad[1]
        iw = (ow - 1) * stride[1] + 1 + (k - 1) * dilation[1] - pad[2] - pad[3]
        consts = _conv_consts(_ints((oc, k, k, ic), DT.INT8), DT.INT8, _ints((oc,), DT.INT32, -9000, 9000),
                              DT.INT32, DT.INT8, 5, -2)
        attr = _attr("Conv2dAttribute", pad, stride, dilation, False, DT.INT32)
        graph = _graph(ts.Op.CONV2D, attr, [((n, ih, iw, ic), DT.INT8)], consts, [((n, oh, ow, oc), DT.INT32)])
        _assert_same_as_reference(graph, [_ints((n, ih, iw, ic), DT.INT8)])
