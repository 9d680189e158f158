"""Math ops lowered by decomposition: prelu, leaky_relu (in place too), vector norms, scaled
dot-product attention, tril/triu, max/min along a dim, addmm's beta/alpha, matmul with 1-D
operands, shifts by a number, attention with computed projection weights, fill and copy, and
a linear called several times (its shared bias); and ops a user's model brings that ExecuTorch's
Arm backend does not take: log_sigmoid, hardshrink / softshrink, rrelu in eval mode, exp2, frac,
erfc, nan_to_num (one TABLE each in INT), lerp, addcmul / addcdiv, hypot, logaddexp, xlogy,
var_mean / std_mean, outer and diff (decompositions), kron, tensordot, take_along_dim, diag of
a vector or a matrix, trace, diag_embed, the inf-norm, cross, deg2rad, addmv and einsum traces (PyTorch's own
decompositions), copysign, signbit, heaviside and rad2deg (decompositions). FP is checked against PyTorch, INT within
one quantization step of the fake-quant model (and int16 for the continuous functions of the
latter group); every case must lower whole."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from lowering_checks import Fn, check_fp, check_int

import lowering
from lowering import QuantConfig

gen = torch.Generator().manual_seed(7)


def randn(*shape):
    return torch.randn(*shape, generator=gen)


class Lambda(nn.Module):
    """``fn(self, *inputs)`` with the given submodules / tensors as attributes."""

    def __init__(self, fn, **attrs):
        super().__init__()
        self.fn = fn
        for k, v in attrs.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def sdpa(**kw):
    return lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, **kw)


class SharedLinearSteps(nn.Module):
    """One linear (with bias) applied to inputs of very different ranges, as the unrolled
    time steps of a recurrent cell apply theirs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        h = torch.tanh(self.lin(torch.cat([h, h[:, :1]], 1) * 0.1))
        return self.lin(torch.cat([h, h[:, :1]], 1) * 4.0)


CASES = {
    "prelu_channels": (Lambda(lambda s, x: s.p(x), p=nn.PReLU(4, 0.3)), (randn(2, 4, 5, 5),)),
    "prelu_single": (Lambda(lambda s, x: s.p(x) * 2, p=nn.PReLU(init=0.1)), (randn(3, 7),)),
    "leaky_relu_inplace": (Lambda(lambda s, x: F.leaky_relu(x - 0.5, 0.2, inplace=True) + x),
                           (randn(2, 6),)),
    "leaky_relu_module": (Lambda(lambda s, x: s.a(x * 3), a=nn.LeakyReLU(0.05, inplace=True)),
                          (randn(2, 3, 4),)),
    "vector_norm_2_dim": (Lambda(lambda s, x: torch.linalg.vector_norm(x, dim=-1, keepdim=True)),
                          (randn(3, 4, 6),)),
    "vector_norm_1_all": (Lambda(lambda s, x: torch.linalg.vector_norm(x, 1)), (randn(4, 5),)),
    "vector_norm_inf": (Lambda(lambda s, x: torch.linalg.vector_norm(x, float("inf"), dim=(0, 2))),
                        (randn(3, 4, 5),)),
    "vector_norm_3": (Lambda(lambda s, x: torch.linalg.vector_norm(x, 3, dim=1)), (randn(2, 8),)),
    "normalize": (Lambda(lambda s, x: x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
                         .clamp_min(1e-6)), (randn(4, 6),)),
    "sdpa_plain": (Lambda(sdpa()), (randn(1, 2, 5, 8), randn(1, 2, 7, 8), randn(1, 2, 7, 8))),
    "sdpa_causal_scale": (Lambda(sdpa(is_causal=True, scale=0.25)),
                          (randn(2, 6, 4), randn(2, 6, 4), randn(2, 6, 4))),
    "sdpa_bool_mask_input": (Lambda(lambda s, q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m)), (randn(2, 4, 8), randn(2, 5, 8), randn(2, 5, 8),
                                 torch.rand(4, 5, generator=gen) > 0.4)),
    "sdpa_float_mask_input": (Lambda(lambda s, q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m)), (randn(2, 4, 8), randn(2, 5, 8), randn(2, 5, 8), randn(4, 5))),
    # whole rows masked: PyTorch's attention gives 0 there
    "sdpa_inf_mask_const": (Lambda(lambda s, q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=s.m), m=torch.tensor([0.0, -float("inf"), 0.5])[:, None].expand(3, 4)),
        (randn(1, 3, 8), randn(1, 4, 8), randn(1, 4, 8))),
    "tril_triu": (Lambda(lambda s, x: torch.tril(x, 1) - torch.triu(x, -1) * 0.5),
                  (randn(2, 4, 6),)),
    "max_dim_values_indices": (Lambda(lambda s, x: torch.max(x, 1)), (randn(3, 6, 2),)),
    "min_dim_keepdim": (Lambda(lambda s, x: torch.min(x, -1, keepdim=True)), (randn(4, 5),)),
    "max_dim_values": (Lambda(lambda s, x: x.max(dim=0).values * 2), (randn(5, 3),)),
    "addmm_beta_alpha": (Lambda(lambda s, c, a, b: torch.addmm(c, a, b, beta=0.25, alpha=-1.5)),
                         (randn(3, 4), randn(3, 6), randn(6, 4))),
    "addmm_beta_only": (Lambda(lambda s, a: torch.addmm(s.c, a, s.w, beta=2.0), c=randn(4),
                               w=randn(6, 4)), (randn(3, 6),)),
    "addmm_beta_zero": (Lambda(lambda s, c, a, b: torch.addmm(c, a, b, beta=0.0)),
                        (randn(2, 3), randn(2, 5), randn(5, 3))),
    "matmul_vector_matrix": (Lambda(lambda s, v, m: v @ m), (randn(6), randn(2, 6, 3))),
    "matmul_matrix_vector": (Lambda(lambda s, m, v: m @ v), (randn(4, 6), randn(6))),
    "matmul_dot": (Lambda(lambda s, a, b: torch.matmul(a, b)), (randn(7), randn(7))),
    "matmul_const_vector": (Lambda(lambda s, m: m @ s.v, v=randn(5)), (randn(3, 5),)),
    "mha_separate_qkv": (Lambda(lambda s, q, k, v: s.m(q, k, v)[0], m=nn.MultiheadAttention(8, 2)),
                         (randn(4, 2, 8), randn(5, 2, 8), randn(5, 2, 8))),
    "mha_unbatched_weights": (Lambda(lambda s, q, k, v: s.m(q, k, v),
                                     m=nn.MultiheadAttention(6, 3, batch_first=True)),
                              (randn(3, 6), randn(4, 6), randn(4, 6))),
    "fill_scalar": (Lambda(lambda s, x: torch.empty_like(x).fill_(0.75) * x + x.clone().fill_(1)),
                    (randn(3, 4),)),
    "full_like": (Lambda(lambda s, x: torch.full_like(x, -2.0) + x), (randn(2, 5),)),
    "copy_into_buffer": (Lambda(lambda s, x: torch.zeros(2, 3, 4).copy_(x * 2) - x),
                         (randn(3, 4),)),
    "shared_linear_steps": (SharedLinearSteps(), (randn(4, 6),)),
}


_gen11 = torch.Generator().manual_seed(11)


def _randn2(*shape, scale: float = 2.0):
    return torch.randn(*shape, generator=_gen11) * scale


#: ops a user's model brings that ExecuTorch's Arm backend does not take (one TABLE each in INT,
#: or a decomposition)
BEYOND_EXECUTORCH = {
    "log_sigmoid": (Fn(F.logsigmoid), (_randn2(3, 9, scale=4.0),)),
    "log_sigmoid_module": (torch.nn.LogSigmoid(), (_randn2(2, 4, 5),)),
    "hardshrink": (Fn(lambda x: F.hardshrink(x, 0.7)), (_randn2(4, 8),)),
    "softshrink": (Fn(lambda x: F.softshrink(x, 0.3) * 2), (_randn2(4, 8),)),
    "rrelu_eval": (torch.nn.RReLU(0.1, 0.3), (_randn2(3, 7),)),
    "exp2": (Fn(torch.exp2), (_randn2(2, 6),)),
    "frac": (Fn(torch.frac), (_randn2(3, 6),)),
    "erfc": (Fn(torch.special.erfc), (_randn2(5, 4, scale=1.5),)),
    "erfc_method": (Fn(lambda x: x.erfc() + x), (_randn2(5, 4, scale=1.5),)),
    "nan_to_num_finite": (Fn(lambda x: torch.nan_to_num(x * 3)), (_randn2(2, 5),)),
    "lerp_scalar_low": (Fn(lambda a, b: torch.lerp(a, b, 0.25)), (_randn2(3, 4), _randn2(3, 4))),
    "lerp_scalar_high": (Fn(lambda a, b: torch.lerp(a, b, 0.9)), (_randn2(3, 4), _randn2(1, 4))),
    "lerp_tensor": (Fn(lambda a, b, w: torch.lerp(a, b, w)), (_randn2(2, 5), _randn2(2, 5), torch.rand(2, 5, generator=_gen11))),
    "addcmul": (Fn(lambda x, a, b: torch.addcmul(x, a, b, value=-0.5)), (_randn2(2, 6), _randn2(2, 6), _randn2(1, 6))),
    "addcdiv": (Fn(lambda x, a, b: torch.addcdiv(x, a, b.abs() + 1, value=2)), (_randn2(2, 6), _randn2(2, 6), _randn2(2, 6))),
    "hypot": (Fn(torch.hypot), (_randn2(3, 5), _randn2(3, 5))),
    "logaddexp": (Fn(torch.logaddexp), (_randn2(4, 5), _randn2(4, 5))),
    "var_mean_layer_norm": (Fn(lambda x: (x - torch.var_mean(x, -1, keepdim=True, unbiased=False)[1])
                               * torch.rsqrt(torch.var_mean(x, -1, keepdim=True, unbiased=False)[0] + 1e-5)),
                            (_randn2(2, 3, 16),)),
    "var_mean_both": (Fn(lambda x: sum(torch.var_mean(x, dim=(0, 2)))), (_randn2(3, 4, 5),)),
    "std_mean": (Fn(lambda x: torch.std_mean(x, 1, correction=0)[0] * 2 - torch.std_mean(x, 1)[1]), (_randn2(4, 6),)),
    "outer": (Fn(torch.outer), (_randn2(5), _randn2(3))),
    "diff_last": (Fn(torch.diff), (_randn2(3, 7),)),
    "xlogy": (Fn(lambda x, y: torch.xlogy(x * (x > 0), y.abs() + 0.1)), (_randn2(3, 5), _randn2(3, 5))),
    "diff_twice_dim0_prepend": (Fn(lambda x, p: torch.diff(x, n=2, dim=0, prepend=p)), (_randn2(4, 3), _randn2(1, 3))),
    # PyTorch's own decompositions (lowering.passes.decompositions.composite)
    "kron": (Fn(torch.kron), (_randn2(2, 3), _randn2(3, 2))),
    "tensordot": (Fn(lambda a, b: torch.tensordot(a, b, dims=([1, 2], [0, 1]))), (_randn2(2, 3, 4), _randn2(3, 4, 5))),
    "take_along_dim": (Fn(lambda x: torch.take_along_dim(x, torch.tensor([[2, 0, 3], [1, 1, 0]]), -1)),
                       (_randn2(2, 4),)),
    "diag_of_vector": (Fn(lambda x: torch.diag(x) + 1), (_randn2(5),)),
    "diag_embed": (Fn(torch.diag_embed), (_randn2(2, 4),)),
    "norm_inf": (Fn(lambda x: torch.linalg.norm(x, ord=float("inf"), dim=-1)), (_randn2(3, 6),)),
    "cross": (Fn(lambda a, b: torch.linalg.cross(a, b, dim=-1)), (_randn2(2, 4, 3), _randn2(2, 4, 3))),
    "deg2rad": (Fn(lambda x: torch.deg2rad(x * 90)), (_randn2(3, 5),)),
    "addmv": (Fn(torch.addmv), (_randn2(3), _randn2(3, 4), _randn2(4))),
    "einsum_trace": (Fn(lambda x: torch.einsum("bii->b", x)), (_randn2(2, 4, 4),)),
    "diag_of_matrix": (Fn(lambda x: torch.diag(x, 1) * 2), (_randn2(4, 5),)),
    "trace": (Fn(lambda x: torch.trace(x) + x.sum() * 0.1), (_randn2(4, 4),)),
    "copysign": (Fn(torch.copysign), (_randn2(3, 6), _randn2(3, 6))),
    "copysign_number": (Fn(lambda x: torch.copysign(x, -1.0) + torch.copysign(x, 2)), (_randn2(2, 5),)),
    "signbit": (Fn(lambda x: torch.where(torch.signbit(x), x * 2, x)), (_randn2(3, 6),)),
    "heaviside": (Fn(lambda x, v: torch.heaviside(torch.where(x.abs() > 1, x, 0.0), v)), (_randn2(3, 6), _randn2(1, 6))),
    "rad2deg": (Fn(torch.rad2deg), (_randn2(3, 5),)),
}
CASES.update(BEYOND_EXECUTORCH)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fp(name):
    model, inputs = CASES[name]
    lm = check_fp(model, inputs)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_int(name):
    model, inputs = CASES[name]
    lm = check_int(model, inputs)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32])
@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_shift_by_number(dtype, profile):
    """``x << 2`` / ``x >> 1`` keep the dtype of ``x`` (not promoted with a float scalar)."""
    model = Lambda(lambda s, x: (x << 2) ^ (x >> 1)).eval()
    x = torch.randint(-20, 20, (3, 5), generator=gen, dtype=dtype)
    lm = lowering.lower(model, (x,), profile=profile)
    assert lm.cpu_nodes == []
    (out,) = lm.run_raw([x.numpy()])
    assert np.array_equal(np.asarray(out).astype(np.int64), model(x).numpy().astype(np.int64))


def test_in_place_prelu_source_is_functionalized():
    """An in-place op before prelu: the prelu reads the mutated value."""
    def fn(s, x):
        y = x - 1.0
        y.mul_(2.0)
        return s.p(y) + y

    model = Lambda(fn, p=nn.PReLU(3, 0.25))
    x = randn(2, 3, 4)
    assert check_fp(model, (x,)).cpu_nodes == []
    assert check_int(model, (x,)).cpu_nodes == []


def test_shared_bias_gets_one_node_per_linear_in_int():
    """The fake-quant model scales each step's int32 bias by that step's input scale."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowering.quantizer import QuantConfig, TosaQuantizer

    model, inputs = SharedLinearSteps().eval(), (randn(4, 6),)
    gm = torch.export.export(model, inputs).module(check_guards=False)
    prepared = prepare_pt2e(gm, TosaQuantizer(QuantConfig(), example_inputs=inputs))
    prepared(*inputs)
    q = convert_pt2e(prepared)
    dq = torch.ops.quantized_decomposed
    for n in q.graph.nodes:
        if n.target != torch.ops.aten.linear.default:
            continue
        x_scale = n.args[0].args[1]
        bias_dq = n.args[2]
        w_scale = getattr(q, n.args[1].args[1].target)
        b_scale = getattr(q, bias_dq.args[1].target)
        assert bias_dq.target in (dq.dequantize_per_channel.default, dq.dequantize_per_tensor.default)
        torch.testing.assert_close(b_scale, x_scale * w_scale)


#: with a jump, the int16 TABLE's interpolation between samples cannot follow: these are looked
#: up exactly in a 65536-entry table instead (lowering.ops.activation._int16_lookup): 0 steps
STEP = {"hardshrink", "frac"}


#: where the int16 TABLE's linear interpolation between samples 128 levels apart cannot follow
#: the function (the same TABLE as ExecuTorch's, see tests/lowering/test_lowering_tables.py):
#: sqrt, 1/x and log next to 0 (hypot, addcdiv, xlogy), softshrink's kink at +-lambd, and
#: log_sigmoid's output saturating inside a segment; judged as ExecuTorch judges its int16
#: tests, within 1e-3 of the output's range: 32 of 32767 steps. Found 29, 18, 22, 2 and 4.
INT16_TABLE_LIMITED = {"log_sigmoid", "log_sigmoid_module", "hypot", "addcdiv", "xlogy", "softshrink"}


@pytest.mark.parametrize("name", sorted(BEYOND_EXECUTORCH))
def test_int16_beyond_executorch(name):
    model, inputs = BEYOND_EXECUTORCH[name]
    lm = check_int(model, inputs, quantization=QuantConfig.int16(),
                   max_steps=32 if name in INT16_TABLE_LIMITED else 0 if name in STEP else 1)
    assert lm.cpu_nodes == []


def test_fp_special_values():
    """NaN and infinities through the FP graphs, as PyTorch gives them."""
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, -0.5, 1e30, -1e30])
    for fn in (F.logsigmoid, F.hardshrink, F.softshrink, torch.frac, torch.nan_to_num,
               lambda x: torch.nan_to_num(x, nan=1.5, posinf=9.0, neginf=-9.0), torch.special.erfc,
               lambda x: torch.logaddexp(x, x), lambda x: torch.logaddexp(x, torch.zeros_like(x)),
               lambda x: torch.copysign(torch.ones_like(x), x), lambda x: torch.signbit(x).float(),
               lambda x: torch.heaviside(x, torch.tensor([0.25]))):
        model = Fn(fn).eval()
        lm = lowering.lower(model, (special,), profile="FP")
        out = lm.run(special)[0]
        torch.testing.assert_close(out, model(special), equal_nan=True, atol=1e-6, rtol=1e-5)


def test_xlogy_zero_times_nan_is_nan_as_in_pytorch():
    x = torch.tensor([0.0, 0.0, 2.0, 0.0])
    y = torch.tensor([float("nan"), 0.0, 3.0, 5.0])
    model = Fn(torch.xlogy).eval()
    out = lowering.lower(model, (x, y), profile="FP").run(x, y)[0]
    torch.testing.assert_close(out, torch.xlogy(x, y), equal_nan=True)


def test_training_rrelu_stays_on_the_cpu():
    """rrelu's training-mode slopes are random: no TOSA graph can reproduce them."""
    lm = lowering.lower(Fn(lambda x: F.rrelu(x, training=True)).eval(), (_randn2(2, 3),), profile="FP")
    assert [c.target for c in lm.cpu_nodes] == ["aten.rrelu.default"]


@pytest.mark.parametrize("order", [float("inf"), -float("inf")])
def test_int_inf_norm_is_the_extreme_magnitude(order):
    """ord=+-inf is the max / min of |x| in INT too (the INT pass bounding infinite scalars once
    made it ord=256: a pow graph the reference model reports UNPREDICTABLE)."""
    model = Fn(lambda x: torch.linalg.vector_norm(x, ord=order, dim=-1)).eval()
    x = _randn2(4, 7)
    lm = lowering.lower(model, (x,), quantization=QuantConfig(), calibration=[(x,)])
    assert lm.cpu_nodes == [] and "POW" not in lm.op_counts
    expected = x.abs().amax(-1) if order > 0 else x.abs().amin(-1)
    (out,) = lm.run(x)
    step = float(x.abs().max()) / 127
    torch.testing.assert_close(out, expected, atol=2 * step, rtol=0)


@pytest.mark.parametrize("fn", [torch.log1p, torch.expm1, F.mish, F.softplus], ids=lambda f: f.__name__)
def test_fp_functions_built_with_a_constant_keep_a_0d_result(fn):
    """log1p of a 0-d tensor (``x.sum().log1p()``) added a [1] constant, which made the
    result [1] where the graph declared []: the reference model refused the graph."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(3))
    lm = check_fp(Fn(lambda t: fn(t.sum())), (x,), atol=1e-6, rtol=1e-6)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("fn", [torch.round, torch.sign, torch.floor, torch.ceil, torch.trunc, torch.frac],
                         ids=lambda f: f.__name__)
def test_fp_rounding_keeps_the_sign_of_zero_as_pytorch(fn):
    """round(-0.0) is -0.0, sign(-0.0) and sign(NaN) are +0.0 in PyTorch; the FP graph gave
    +0.0, -0.0 and NaN (round restored the sign by a comparison with 0, sign kept x * 0)."""
    x = torch.tensor([-0.0, 0.0, -0.3, 0.4, -2.5, 2.5, -0.5, 1e30, -float("inf"), float("nan")])
    lm = check_fp(Fn(fn), (x,), atol=0, rtol=0) if not fn(x).isnan().any() else lowering.lower(Fn(fn), (x,), profile="FP")
    got, want = lm.run(x)[0], fn(x)
    assert torch.equal(got.isnan(), want.isnan())
    finite = ~want.isnan()
    assert torch.equal(got[finite], want[finite]) and torch.equal(got.signbit()[finite], want.signbit()[finite])
