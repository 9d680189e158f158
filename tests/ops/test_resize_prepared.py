"""Prepared RESIZE (constant scale, offset and border): the plan's kernel, run twice on a loaded
one-op graph, against the reference model (integer and NEAREST results bit for bit, float
BILINEAR within the bound below) and bit for bit against the op function; a declaration the
checks refuse keeps the op function's error, word for word."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify import reference
from tosa_verify.errors import TosaValidationError
from tosa_verify.ops import image
from tosa_verify.ops.image import prepare_resize
from tosa_verify.ops.registry import REGISTRY, OpCall
from tosa_verify.plan import plan_for

_TS = {np.dtype(np.int8): ts.DType.INT8, np.dtype(np.int16): ts.DType.INT16,
       np.dtype(np.float16): ts.DType.FP16, np.dtype(np.float32): ts.DType.FP32}


def _resize_graph(x: np.ndarray, mode: str, scale, offset, border, out_shape, out_dtype) -> bytes:
    """One RESIZE of the graph input ``x`` with constant (CONST_SHAPE) scale, offset and border."""
    g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    g.addInputTensor(ts.TosaSerializerTensor("x", list(x.shape), _TS[x.dtype], data=None))
    names = ["x"] + [g.addConst([len(values)], ts.DType.SHAPE, list(values), name=name).name
                     for name, values in (("scale", scale), ("offset", offset), ("border", border))]
    out = g.addIntermediate(list(out_shape), out_dtype)
    attribute = ts.TosaSerializerAttribute()
    attribute.ResizeAttribute(getattr(ts.ResizeMode, mode))
    g.addOperator(ts.Op.RESIZE, names, [out.name], attribute)
    g.addOutputTensor(out)
    return bytes(g.serialize())


def _image(shape, dtype, seed: int) -> np.ndarray:
    """A random NHWC image: the whole integer range, or normal floats."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


#: case -> (input shape, input dtype, mode, scale, offset, border, output shape, output dtype).
#: Output sizes follow OH = (IH - 1) * scale_y_n - offset_y + border_y) / scale_y_d + 1.
CASES = {
    # ExecuTorch's nn.Upsample(scale_factor=2) (scale 4/2, offset -1, border 1)
    "nearest_int8_upscale": ((1, 8, 8, 4), np.int8, "NEAREST", [4, 2, 4, 2], [-1, -1], [1, 1],
                             (1, 16, 16, 4), ts.DType.INT8),
    "nearest_int8_downscale": ((2, 7, 9, 3), np.int8, "NEAREST", [1, 2, 1, 2], [0, 0], [0, 0],
                               (2, 4, 5, 3), ts.DType.INT8),
    # non-integer scales 3/2 and 5/3, an offset and a negative border
    "nearest_int8_fractional": ((1, 5, 6, 2), np.int8, "NEAREST", [3, 2, 5, 3], [1, 1], [-1, 0],
                                (1, 6, 9, 2), ts.DType.INT8),
    "nearest_int16": ((1, 5, 6, 3), np.int16, "NEAREST", [5, 3, 7, 4], [1, 2], [-1, -1],
                      (1, 7, 9, 3), ts.DType.INT16),
    "bilinear_int8_upscale": ((1, 8, 8, 4), np.int8, "BILINEAR", [4, 2, 4, 2], [-1, -1], [1, 1],
                              (1, 16, 16, 4), ts.DType.INT32),
    "bilinear_int8_fractional": ((2, 5, 6, 3), np.int8, "BILINEAR", [3, 2, 5, 3], [0, 1], [0, 0],
                                 (2, 7, 9, 3), ts.DType.INT32),
    # the largest scale numerator (2**11), where the int8 sums use int32's range the most
    "bilinear_int8_largest_scale": ((1, 3, 4, 2), np.int8, "BILINEAR", [2048, 1024, 2048, 682],
                                    [0, 0], [0, -6], (1, 5, 10, 2), ts.DType.INT32),
    "bilinear_int8_downscale": ((1, 9, 7, 5), np.int8, "BILINEAR", [2, 5, 3, 7], [1, -2], [0, 1],
                                (1, 4, 4, 5), ts.DType.INT32),
    "bilinear_int16": ((1, 5, 6, 3), np.int16, "BILINEAR", [2048, 1024, 2048, 1024], [-2048, -1024],
                       [0, 1024], (1, 11, 13, 3), ts.DType.INT48),
    # [corner, OH, OW, C] weights over the spelt-out limit: the broadcast weights
    "bilinear_int8_large": ((1, 32, 32, 5), np.int8, "BILINEAR", [4, 2, 4, 2], [-1, -1], [1, 1],
                            (1, 64, 64, 5), ts.DType.INT32),
    "nearest_fp32": ((1, 5, 6, 3), np.float32, "NEAREST", [5, 3, 7, 4], [1, 2], [-1, -1],
                     (1, 7, 9, 3), ts.DType.FP32),
    "nearest_fp16_downscale": ((2, 7, 9, 3), np.float16, "NEAREST", [1, 2, 2, 3], [0, 1], [0, 0],
                               (2, 4, 6, 3), ts.DType.FP16),
    "bilinear_fp32_upscale": ((1, 8, 8, 4), np.float32, "BILINEAR", [4, 2, 4, 2], [-1, -1], [1, 1],
                              (1, 16, 16, 4), ts.DType.FP32),
    "bilinear_fp32_fractional": ((2, 5, 6, 3), np.float32, "BILINEAR", [5, 3, 7, 4], [1, 2], [-1, -1],
                                 (2, 7, 9, 3), ts.DType.FP32),
    "bilinear_fp32_large": ((1, 32, 32, 5), np.float32, "BILINEAR", [4, 2, 4, 2], [-1, -1], [1, 1],
                            (1, 64, 64, 5), ts.DType.FP32),
    "bilinear_fp16": ((1, 5, 6, 3), np.float16, "BILINEAR", [3, 2, 5, 3], [0, 1], [0, 0],
                      (1, 7, 9, 3), ts.DType.FP16),
}


def _case(name: str) -> tuple[np.ndarray, bytes]:
    in_shape, in_dtype, mode, scale, offset, border, out_shape, out_dtype = CASES[name]
    x = _image(in_shape, in_dtype, seed=sorted(CASES).index(name))
    return x, _resize_graph(x, mode, scale, offset, border, out_shape, out_dtype)


def _bits(a: np.ndarray) -> np.ndarray:
    """``a`` as unsigned integers of its width (float), so that NaN and -0.0 compare exactly."""
    return a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_prepared_resize_matches_the_reference_model(case: str) -> None:
    x, data = _case(case)
    if CASES[case][-1] == ts.DType.INT48:
        # (the reference model's Python binding returns no INT48 output: its executable does)
        (expected,) = reference.run(data, [x], backend="cli")
    else:
        (expected,), status = reference_model.run(data, [x])
        assert status == reference_model.GraphStatus.TOSA_VALID
    graph = tosa_verify.load(data)
    for _ in range(2):  # the first run builds the plan, the second runs the prepared kernel
        (ours,) = tosa_verify.run(graph, [x])
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        if "bilinear_fp" in case:
            # The reference model weighs in float32 steps, we in float64 then round once (the
            # spec bounds the error, relative to the largest magnitude: the weighted sums cancel)
            error = np.abs(ours.astype(np.float64) - expected.astype(np.float64)).max()
            assert error <= 4 * np.spacing(np.abs(expected).max()), error
        else:
            np.testing.assert_array_equal(_bits(ours), _bits(expected))
    assert plan_for(graph.main, graph).steps[-1].fn is not REGISTRY["RESIZE"]  # the prepared kernel ran


def _spec_resize(x: np.ndarray, mode: str, scale, offset, out_shape) -> np.ndarray:
    """RESIZE by the spec pseudocode, one output position at a time; floats in float64, each
    term ``v * weight_y * weight_x`` and the sum in the formula's order, then one rounding (the
    op function's float semantics, which the prepared kernel must keep bit for bit)."""
    scale_y_n, scale_y_d, scale_x_n, scale_x_d = scale
    offset_y, offset_x = offset
    _, ih, iw, _ = x.shape
    integer = x.dtype.kind == "i"
    v = x.astype(np.int64 if integer else np.float64)
    out = np.zeros((x.shape[0], out_shape[1], out_shape[2], x.shape[3]), v.dtype)
    for oy in range(out_shape[1]):
        y = oy * scale_y_d + offset_y
        iy, dy = y // scale_y_n, y % scale_y_n
        iy0, iy1 = max(iy, 0), min(iy + 1, ih - 1)
        for ox in range(out_shape[2]):
            x_pos = ox * scale_x_d + offset_x
            ix, dx = x_pos // scale_x_n, x_pos % scale_x_n
            ix0, ix1 = max(ix, 0), min(ix + 1, iw - 1)
            if mode == "NEAREST":
                out[:, oy, ox] = v[:, iy1 if 2 * dy >= scale_y_n else iy0, ix1 if 2 * dx >= scale_x_n else ix0]
            elif integer:
                out[:, oy, ox] = (v[:, iy0, ix0] * (scale_y_n - dy) * (scale_x_n - dx)
                                  + v[:, iy0, ix1] * (scale_y_n - dy) * dx
                                  + v[:, iy1, ix0] * dy * (scale_x_n - dx) + v[:, iy1, ix1] * dy * dx)
            else:
                fy, fx = dy / float(scale_y_n), dx / float(scale_x_n)
                out[:, oy, ox] = (v[:, iy0, ix0] * (1.0 - fy) * (1.0 - fx) + v[:, iy0, ix1] * (1.0 - fy) * fx
                                  + v[:, iy1, ix0] * fy * (1.0 - fx) + v[:, iy1, ix1] * fy * fx)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_prepared_and_unprepared_resize_follow_the_spec_formula_bit_for_bit(case: str, monkeypatch) -> None:
    _, _, mode, scale, offset, _, out_shape, _ = CASES[case]
    x, data = _case(case)
    if x.dtype.kind == "f":
        x[0, 0, 0, 0], x[0, -1, 1, -1] = np.inf, -0.0  # (inf times a 0 weight is NaN; -0.0 sums)
    expected = _spec_resize(x, mode, scale, offset, out_shape)
    graph = tosa_verify.load(data)
    results = [tosa_verify.run(graph, [x])[0] for _ in range(2)]  # (the second: the prepared kernel)
    assert plan_for(graph.main, graph).steps[-1].fn is not REGISTRY["RESIZE"]
    function = REGISTRY["RESIZE"]
    monkeypatch.setitem(REGISTRY, "RESIZE", lambda call: function(call))  # (no prepare for a wrapper)
    results.append(tosa_verify.run(tosa_verify.load(data), [x])[0])
    for result in results:
        expected_typed = expected.astype(result.dtype)  # (float64 rounded once; integers exact)
        if result.dtype.kind == "i":
            np.testing.assert_array_equal(result.astype(np.int64), expected)
        np.testing.assert_array_equal(_bits(result), _bits(expected_typed))


@pytest.mark.parametrize("case", sorted(name for name in CASES if name.startswith("bilinear_fp")))
def test_the_float_bilinear_sums_are_the_spec_formulas_in_float64_bit_for_bit(case: str) -> None:
    # (an output's one rounding to float32 or float16 hides almost any float64 difference: the
    # sums before it are compared here, so that the order of the products and additions is kept)
    _, _, mode, scale, offset, _, out_shape, _ = CASES[case]
    x, data = _case(case)
    x[0, 0, 0, 0] = np.inf
    resample = image._resize_setup(_prepare_call(tosa_verify.load(data)))
    sums = resample.func(x, **{**resample.keywords, "finish": None})
    assert sums.dtype == np.float64
    np.testing.assert_array_equal(_bits(sums), _bits(_spec_resize(x, mode, scale, offset, out_shape)))


@pytest.mark.parametrize(("scale", "offset", "border", "out_shape", "message"), [
    ([0, 2, 4, 2], [-1, -1], [1, 1], (1, 16, 16, 4),
     "ERROR_IF(scale_y_n <= 0 || scale_y_d <= 0 || scale_x_n <= 0 || scale_x_d <= 0)"),
    ([4, 2, 4, 64], [-1, -1], [1, 1], (1, 16, 16, 4),
     "ERROR_IF(scale_y_d >= 16 * scale_y_n || scale_x_d >= 16 * scale_x_n)"),
    ([4, 2, 4, 2], [-1, -5], [1, 1], (1, 16, 16, 4), "ERROR_IF(offset_x < -scale_x_n || offset_x >= 16 * scale_x_n)"),
    ([4, 2, 4, 2], [-1, -1], [1, 1], (1, 16, 15, 4),
     "ERROR_IF(OW != idiv_check((IW - 1) * scale_x_n - offset_x + border_x, scale_x_d) + 1 = 16)"),
    ([4, 7, 4, 2], [-1, -1], [1, 1], (1, 16, 16, 4), "ERROR_IF(OH is not an integer)"),
])
def test_a_refused_resize_keeps_the_op_functions_error(scale, offset, border, out_shape, message,
                                                       monkeypatch) -> None:
    x = _image((1, 8, 8, 4), np.int8, seed=7)
    data = _resize_graph(x, "NEAREST", scale, offset, border, out_shape, ts.DType.INT8)
    assert reference_model.run(data, [x])[1] != reference_model.GraphStatus.TOSA_VALID
    graph = tosa_verify.load(data)
    for _ in range(2):
        with pytest.raises(TosaValidationError) as planned:
            tosa_verify.run(graph, [x])
        assert str(planned.value).endswith(message)
    assert plan_for(graph.main, graph).steps[-1].fn is REGISTRY["RESIZE"]  # the prepare declined
    function = REGISTRY["RESIZE"]
    monkeypatch.setitem(REGISTRY, "RESIZE", lambda call: function(call))  # (no prepare for a wrapper)
    with pytest.raises(TosaValidationError) as unprepared:
        tosa_verify.run(tosa_verify.load(data), [x])
    assert str(planned.value) == str(unprepared.value)


@pytest.mark.parametrize("run_time", [1, 2, 3])
def test_resize_is_not_prepared_without_constant_scale_offset_and_border(run_time: int) -> None:
    x = _image((1, 8, 8, 4), np.int8, seed=8)
    graph = tosa_verify.load(_resize_graph(x, "NEAREST", [4, 2, 4, 2], [-1, -1], [1, 1], (1, 16, 16, 4),
                                           ts.DType.INT8))
    call = _prepare_call(graph)
    assert prepare_resize(call) is not None
    constants = call.inputs
    constants[run_time] = None  # (as the plan passes an input only known at run time)
    assert prepare_resize(call) is None


def _prepare_call(graph: tosa_verify.Graph) -> OpCall:
    """The call a plan passes to the prepare of ``graph``'s RESIZE: constant inputs' values, None
    for the run-time input."""
    plan = plan_for(graph.main, graph)
    step = plan.steps[-1]
    constants = [None] + [plan.constants[name] for name in step.inputs[1:]]
    return OpCall(step.index, step.operator, constants, step.input_decls, step.output_decls)
