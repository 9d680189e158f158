"""Shared checks of the lowering tests (a module of its own: ``from conftest import`` would
find whichever conftest another test directory put on sys.path first)."""

from __future__ import annotations

import numpy as np
import torch

import lowering


class Fn(torch.nn.Module):
    """A module computing ``fn(*inputs)`` (a lambda as a model)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


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
    from lowering.reference import fake_quant_float64, steps_from

    raw = lm.run_raw(lm.quantize_inputs(*inputs))[0]
    return steps_from(raw, fake_quant_float64(lm.quantized_model, *inputs), lm.output_qparams[0])


def _flat(out) -> list:
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def judge_int(lm, example) -> dict:
    """Every output of a whole INT lowering against the float64 fake-quant graph: quantized
    ones in steps, the others (indices, integer data) equal; ``ok`` when all are exact.

    Example:
        >>> m = torch.nn.Linear(4, 2).eval(); x = (torch.randn(3, 4),)
        >>> judge_int(lowering.lower(m, x), x)["ok"]
        True
    """
    from lowering.reference import fake_quant_float64, steps_from

    raws = lm.run_raw(lm.quantize_inputs(*example))
    refs = _flat(fake_quant_float64(lm.quantized_model, *example))
    worst, differ, n = 0, 0, 0
    for raw, ref, qp in zip(raws, refs, lm.output_qparams, strict=True):
        if qp is None and ref.is_floating_point():
            # an unquantized float output: no steps; float32 against the float64 graph (not cast
            # to int64 first, which would call any error below 1.0 exact)
            diff = (~np.isclose(np.asarray(raw, np.float64), ref.double().numpy(), rtol=1e-5, atol=1e-6,
                                equal_nan=True)).astype(np.int64)
        elif qp is not None:
            diff = steps_from(raw, ref, qp)
        else:
            diff = np.abs(ref.numpy().astype(np.int64) - np.asarray(raw).astype(np.int64))
        worst, differ, n = max(worst, int(diff.max(initial=0))), differ + int((diff > 0).sum()), \
            n + diff.size
    levels = np.unique(np.asarray(raws[0])).size
    return {"max_step": worst, "differ": differ, "n": n, "levels": int(levels),
            "ok": worst == 0}


def judge_whole(lm, model, example) -> dict:
    """Every output of a partly lowered model run whole (``lm.run``: partitions on the reference
    model, CPU nodes in PyTorch) against the float64 fake-quant graph (INT) or the float model
    (FP): integer outputs equal, float ones within rtol 1e-5 and atol 1e-6 x the output's scale
    (the CPU nodes compute in float32 where the INT reference computes in float64).

    Example:
        >>> m = Atan2Model(); x = (torch.randn(2, 3),)          # doctest: +SKIP
        >>> judge_whole(lowering.lower(m, x), m, x)["ok"]        # doctest: +SKIP
        True
    """
    from lowering.reference import fake_quant_float64

    with torch.no_grad():
        expected = _flat(fake_quant_float64(lm.quantized_model, *example) if lm.profile == "INT"
                         else model(*example))
    got = lm.run(*example)
    ok, worst = len(got) == len(expected), 0.0
    for g, e in zip(got, expected, strict=False):
        if not e.is_floating_point():
            ok = ok and torch.equal(g.to(e.dtype), e)
            continue
        e = e.double()
        scale = max(float(e.abs().max()), 1.0) if e.numel() else 1.0
        worst = max(worst, float((g.double() - e).abs().max()) if e.numel() else 0.0)
        ok = ok and g.dtype == torch.float32 and torch.allclose(g.double(), e, rtol=1e-5, atol=1e-6 * scale)
    return {"max_abs": worst, "outputs": len(got), "ok": bool(ok)}


def judge_fp(lm, model, example) -> dict:
    """Every output of a whole FP lowering against torch (float: within atol 1e-4 x the
    output's scale, rtol 1e-3; integer outputs equal); ``ok`` when all are.

    Example:
        >>> m = torch.nn.Linear(4, 2).eval(); x = (torch.randn(3, 4),)
        >>> judge_fp(lowering.lower(m, x, profile="FP"), m, x)["ok"]
        True
    """

    with torch.no_grad():
        expected = _flat(model(*example))
    rel, ok, zero, worst = 0.0, True, False, 0.0
    for got, exp in zip(lm.run(*example), expected, strict=True):
        if not exp.is_floating_point():
            ok = ok and torch.equal(got.to(exp.dtype), exp)
            continue
        scale = float(exp.abs().max())
        max_abs = float((got - exp).abs().max())
        rel, worst = max(rel, max_abs / max(scale, 1e-30)), max(worst, max_abs)
        ok = ok and scale > 0 and torch.allclose(got, exp, atol=1e-4 * scale, rtol=1e-3)
        # an all-zero reference (a degenerate tiny config) is matched only by zeros: say so
        zero = zero or scale == 0
    return {"rel_err": rel, "max_abs": worst, "ok": bool(ok), "zero_reference": zero}


def tosa_int16_lookup(tab: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The lowered int16 TABLE's outputs at int16 levels ``q``: the spec's int16 apply_lookup
    (``(base << 7) + (next - base) * fraction``), then the lowering's RESCALE by 1/128 (round
    half up), in numpy.

    Example:
        >>> tosa_int16_lookup(np.arange(513) * 128 - 32768, np.array([-32768, 0, 5])).tolist()
        [-32768, 0, 5]
    """
    t, v = tab.astype(np.int64), q.astype(np.int64)
    index, fraction = (v + 32768) >> 7, v & 0x7F
    return ((t[index] << 7) + (t[index + 1] - t[index]) * fraction + 64) >> 7
