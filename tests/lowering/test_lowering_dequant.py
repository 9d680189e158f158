"""Dequantization as PyTorch computes it: a float32 value, which an element-wise function sees.

``torch.ones`` calibrates the input to scale float32(1/255), zero point -128, so q = 127 is
1.0000000591 as a real number (outside acos's domain) but exactly 1.0 in PyTorch's float32
dequantization, and the output range is degenerate (scale 2**-20): ExecuTorch's
``test_acos[ones]`` and ``test_acosh[ones]`` (INT) were 128 and 255 steps off. The references
here are PyTorch's own ``quantized_decomposed`` ops and numpy formulas, not our code.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers quantized_decomposed
import torch.fx as fx
from lowering_checks import tosa_int16_lookup

import lowering
from lowering.ops.activation import int8_table, int16_table
from lowering.qparams import QParams, dequantize_f32
from lowering.reference import capture, fake_quant_float64

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

#: the qparams of ExecuTorch's [ones] cases (observer output on torch.ones(1, 7, 10, 12))
ONES_IN = (0.003921568859368563, -128)
ONES_OUT = (9.5367431640625e-07, -128)
FUNCTIONS = {"acos": torch.acos, "acosh": torch.acosh, "asin": torch.asin}


def _q8(scale: float, zp: int) -> QParams:
    return QParams(np.array([scale]), np.array([zp]), torch.int8, -128, 127)


def _torch_fake_quant_table(fn, si: float, zi: int, so: float, zo: int) -> np.ndarray:
    """PyTorch's own float32 fake-quant of every int8 level: dequantize -> fn -> quantize."""
    q = torch.arange(-128, 128, dtype=torch.int8)
    x = qd.dequantize_per_tensor(q, si, zi, -128, 127, torch.int8)
    return qd.quantize_per_tensor(fn(x), so, zo, -128, 127, torch.int8).numpy()


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_table_at_the_ones_qparams_is_torchs_fake_quant(name):
    fn = FUNCTIONS[name]
    expected = _torch_fake_quant_table(fn, *ONES_IN, *ONES_OUT)
    np.testing.assert_array_equal(int8_table(fn, _q8(*ONES_IN), _q8(*ONES_OUT)), expected)
    # the case discriminates: at the real input 255 * scale (numpy, float64) q = 127 is NaN
    # (acos, asin: 0 after torch's cast) or 3.4e-4 (acosh: saturated at 127)
    with np.errstate(invalid="ignore"):
        real = getattr(np, "arc" + name[1:])(np.float64(255) * ONES_IN[0]) / ONES_OUT[0]
    real_entry = 0 if np.isnan(real) else np.clip(np.round(real) + ONES_OUT[1], -128, 127)
    assert expected[255] != real_entry


def test_int16_table_samples_are_torchs_fake_quant():
    """Each of the 513 samples is the quantization of fn at torch's float32 input, except
    beside a segment whose interpolation between those samples is 2 or more steps off the
    fake-quant (acos's steep end near 1): there a sample moves to share that error between its
    two segments, so that no level ends further off than the worst was, most nearer, and the
    levels of the last segment (the edge of acos's domain) are as fn's samples give them."""
    # q = 32767 is 65519 * float32(1/65519) = 1.0000000519 as a real number, 1.0 in float32
    qi = QParams(np.array([1.526274900243152e-05]), np.array([-32752]), torch.int16, -32768, 32767)
    qo = QParams(np.array([2.0 ** -12]), np.array([3]), torch.int16, -32768, 32767)
    idx = (torch.arange(513) * 128 - 32768).clamp(-32768, 32767).to(torch.int16)
    x = qd.dequantize_per_tensor(idx, qi.s, qi.zp, -32768, 32767, torch.int16)
    assert float(x[-1]) == 1.0 and (np.float64(32767) - qi.zp) * qi.s > 1.0
    want = (torch.round(torch.acos(x.double()) / qo.s) + qo.zp).clamp(-32768, 32767).numpy()
    got = int16_table(torch.acos, qi, qo)
    levels = torch.arange(-32768, 32768).to(torch.int16)
    y = torch.acos(qd.dequantize_per_tensor(levels, qi.s, qi.zp, -32768, 32767, torch.int16).double())
    fake_quant = (torch.round(y / qo.s) + qo.zp).clamp(-32768, 32767).numpy().astype(np.int64)
    sampled = got.astype(np.int64)
    sampled[:512] = want[:512]  # fn's own samples (512, the virtual level: as got has it)
    err_sampled = np.abs(tosa_int16_lookup(sampled, levels.numpy()) - fake_quant)
    err = np.abs(tosa_int16_lookup(got, levels.numpy()) - fake_quant)
    moved = np.flatnonzero(got[:512] != want[:512])
    assert 0 < len(moved) <= 8 and moved.min() >= 500 and moved.max() <= 510  # the steep end only
    near = slice(128 * (moved.min() - 1), 128 * (moved.max() + 1))  # the moved samples' segments
    for k in moved:  # each beside a segment 2 or more steps off
        assert err_sampled[128 * (k - 1):128 * (k + 1)].max() >= 2
    assert err[near].max() < err_sampled[near].max() and err.max() <= err_sampled.max()
    assert err.sum() < err_sampled.sum()
    np.testing.assert_array_equal(err[-128:], err_sampled[-128:])
    # sample 512 is the virtual level 32768, which no input has: it continues the last
    # segment so that the TOSA interpolation at q = 32767 (fraction 127) is acos(1.0) = 0
    t = got.astype(np.int64)
    assert (t[511] * 128 + (t[512] - t[511]) * 127 + 64) >> 7 == qo.zp


@pytest.mark.parametrize("fn", [torch.acos, torch.acosh])
def test_lowered_ones_case_matches_torch_and_the_evaluator(fn):
    class M(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    x = torch.ones(1, 7, 10, 12)
    lm = lowering.lower(M().eval(), (x,), profile="INT", calibration=[(x,)])
    qp = lm.output_qparams[0]
    raw = np.asarray(lm.run_raw(lm.quantize_inputs(x))[0]).astype(np.int64)
    for ref in (lm.quantized_model(x), fake_quant_float64(lm.quantized_model, x)):
        q = qd.quantize_per_tensor(ref.float(), qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)
        np.testing.assert_array_equal(raw, q.numpy().astype(np.int64).reshape(raw.shape))


def _graph(dq_target, dq_args: tuple, attrs: dict) -> fx.GraphModule:
    """q -> dequantize -> (neg, add(dq, dq)): an element-wise function and arithmetic."""
    root = torch.nn.Module()
    g = fx.Graph()
    q = g.placeholder("q")
    args = []
    for a in dq_args:
        if isinstance(a, str) and a in attrs:
            root.register_buffer(a, attrs[a])
            a = g.get_attr(a)
        args.append(a)
    dq = g.call_function(dq_target, (q, *args))
    g.output((g.call_function(aten.neg.default, (dq,)), g.call_function(aten.add.Tensor, (dq, dq))))
    return fx.GraphModule(root, g)


def _check_evaluator(gm: fx.GraphModule, q: torch.Tensor, torch_dq: torch.Tensor,
                     real: np.ndarray) -> None:
    values = capture(gm, [q], f64=True).values
    neg, add = (n.name for n in gm.graph.output_node().args[0])
    # the element-wise function sees torch's float32 value, arithmetic the real one
    np.testing.assert_array_equal(values[neg], -torch_dq.double().numpy())
    np.testing.assert_array_equal(values[add], real + real)


def test_evaluator_dequantizes_per_tensor_as_torch():
    rng = np.random.default_rng(0)
    for dtype, lo, hi in ((torch.int8, -128, 127), (torch.int16, -32768, 32767)):
        for _ in range(20):
            # a float64 scale that float32 does not hold: torch rounds it first
            scale, zp = float(rng.uniform(1e-5, 2.0)), int(rng.integers(lo, hi + 1))
            q = torch.from_numpy(rng.integers(lo, hi + 1, size=64)).to(dtype)
            want = qd.dequantize_per_tensor(q, scale, zp, lo, hi, dtype)
            assert want.dtype == torch.float32
            np.testing.assert_array_equal(dequantize_f32(q, scale, zp).numpy(), want.double().numpy())
            gm = _graph(qd.dequantize_per_tensor.default, (scale, zp, lo, hi, dtype), {})
            real = (q.numpy().astype(np.float64) - zp) * scale
            _check_evaluator(gm, q, want, real)


def test_evaluator_dequantizes_per_channel_as_torch():
    rng = np.random.default_rng(1)
    lo, hi = -(2 ** 31), 2 ** 31 - 1
    for _ in range(20):
        # int32 levels beyond 2**24: torch rounds (q - zp) to float32 before the product
        scales = torch.from_numpy(rng.uniform(1e-6, 1e-2, size=3)).float()
        zps = torch.from_numpy(rng.integers(-100, 100, size=3))
        q = torch.from_numpy(rng.integers(-(2 ** 30), 2 ** 30, size=(2, 3, 4))).to(torch.int32)
        want = qd.dequantize_per_channel(q, scales, zps, 1, lo, hi, torch.int32)
        np.testing.assert_array_equal(dequantize_f32(q, scales, zps, axis=1).numpy(),
                                      want.double().numpy())
        gm = _graph(qd.dequantize_per_channel.default, ("s", "z", 1, lo, hi, torch.int32),
                    {"s": scales, "z": zps})
        real = (q.numpy().astype(np.float64) - zps.numpy()[:, None]) * \
            scales.double().numpy()[:, None]
        _check_evaluator(gm, q, want, real)


@pytest.mark.parametrize("fn", [torch.acos, torch.asin])
def test_lowered_int16_table_at_plus_minus_one_matches_torch(fn):
    """int16 (a16w8) acos/asin at x = +-1: the TABLE sample at -32768 lies below -1 (NaN);
    the lowered model was 32518 (acos) / 32525 (asin) steps off PyTorch's fake-quant there."""
    class M(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    x = torch.tensor([[-1.0, -0.5, 0.0, 0.5, 1.0]])
    lm = lowering.lower(M().eval(), (x,), profile="INT", quantization=lowering.QuantConfig.int16(),
                        calibration=[(x,)])
    qp = lm.output_qparams[0]
    raw = np.asarray(lm.run_raw(lm.quantize_inputs(x))[0]).astype(np.int64).reshape(-1)
    ref = qd.quantize_per_tensor(lm.quantized_model(x).float(), qp.s, qp.zp, qp.qmin, qp.qmax,
                                 qp.dtype).numpy().astype(np.int64).reshape(-1)
    # at +-1 the steepest segment (sqrt-like) allows a few steps; the old table was 32518 off
    assert np.abs(raw - ref).max() <= 16, (raw, ref)
