"""Shared checks of the lowering tests (a module of its own: ``from conftest import`` would
find whichever conftest another test directory put on sys.path first)."""

from __future__ import annotations

import numpy as np
import torch

import lowering


def max_step_error(lm: lowering.LoweredModel, inputs) -> float:
    """Largest |TOSA - fake-quant| over all outputs, in output quantization steps."""
    ref = lm.quantized_model(*inputs)
    ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    raw = lm.run_raw(lm.quantize_inputs(*inputs))
    worst = 0.0
    for r, t, qp in zip(ref, raw, lm.output_qparams, strict=True):
        if qp is None:
            worst = max(worst, float((r.detach().float() - torch.from_numpy(np.array(t)).float()).abs().max()))
            continue
        q_ref = torch.ops.quantized_decomposed.quantize_per_tensor(
            r.detach().float(), qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype).numpy().astype(np.int64)
        worst = max(worst, float(np.abs(q_ref - np.asarray(t).astype(np.int64)).max()))
    return worst


def check_fp(model, inputs, atol=1e-3, rtol=1e-3):
    model = model.eval()
    lm = lowering.lower(model, inputs, profile="FP")
    with torch.no_grad():
        ref = model(*inputs)
    ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    out = lm.run(*inputs)
    for r, o in zip(ref, out, strict=True):
        assert tuple(o.shape) == tuple(r.shape), (o.shape, r.shape)
        if r.dtype.is_floating_point:
            torch.testing.assert_close(o.float(), r.float(), atol=atol, rtol=rtol)
        else:
            assert torch.equal(o.to(r.dtype), r)
    return lm


def check_int(model, inputs, calibration=None, quantization=None, max_steps=1.0):
    model = model.eval()
    if calibration is None:
        gen = torch.Generator().manual_seed(1)
        calibration = [tuple(torch.randn(x.shape, generator=gen) * x.float().std().clamp(min=1e-3)
                             + x.float().mean()
                             if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                             for x in inputs)
                       for _ in range(4)] + [tuple(inputs)]
    lm = lowering.lower(model, inputs, profile="INT", quantization=quantization,
                        calibration=calibration)
    err = max_step_error(lm, inputs)
    assert err <= max_steps, f"INT output differs from fake-quant by {err} steps"
    return lm


def float64_step_diff(lm: lowering.LoweredModel, inputs) -> np.ndarray:
    """|TOSA - float64 fake-quant| of the first (quantized) output, in quantization steps:
    the fake-quant graph evaluated in float64 (``fake_quant_float64``), so float32 rounding
    noise of the reference cannot hide or fake a difference."""
    from lowering.reference import fake_quant_float64

    qp = lm.output_qparams[0]
    raw = np.asarray(lm.run_raw(lm.quantize_inputs(*inputs))[0]).astype(np.int64)
    ref = torch.ops.quantized_decomposed.quantize_per_tensor(
        fake_quant_float64(lm.quantized_model, *inputs).float(), qp.s, qp.zp, qp.qmin, qp.qmax,
        qp.dtype).numpy().astype(np.int64)
    return np.abs(ref - raw)
