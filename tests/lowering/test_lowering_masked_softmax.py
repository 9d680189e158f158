"""INT softmax of a masked score tensor (``scores.masked_fill(mask, -inf).softmax(-1)``,
``torch.where(keep, scores, finfo.min)``: how attention code writes a causal or padding mask).

Quantized whole, the masked tensor's scale had to span the filler (-inf bounded to -256): about
one int8 step per unit of the scores, 0.11 off float. The softmax decomposition now quantizes
the scores alone and zeroes the masked exponentials: no farther from float than the unmasked
softmax of the same scores (plus two steps), and 0 steps from its fake-quant model. FP keeps PyTorch's exact -inf arithmetic.
"""

from __future__ import annotations

import pytest
import torch
from lowering_checks import Fn, check_fp, check_int

gen = torch.Generator().manual_seed(13)
SCORES = torch.randn(2, 6, 6, generator=gen) * 2
CAUSAL = torch.ones(6, 6).triu(1).bool()
PADDING = torch.rand(2, 6, 6, generator=gen) > 0.6
PADDING[..., 0] = False  # (no row masked whole: PyTorch's -inf form makes such a row NaN)

CASES = {
    "masked_fill -inf, causal constant": (lambda s: s.masked_fill(CAUSAL, float("-inf")).softmax(-1), (SCORES,)),
    "masked_fill finfo.min": (lambda s: s.masked_fill(CAUSAL, torch.finfo(torch.float32).min).softmax(-1),
                              (SCORES,)),
    "where keep, -inf": (lambda s: torch.where(~CAUSAL, s, float("-inf")).softmax(dim=-1), (SCORES,)),
    "mask as an input": (lambda s, m: s.masked_fill(m, float("-inf")).softmax(-1), (SCORES, PADDING)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_int_masked_softmax_is_near_float_and_equals_fake_quant(name):
    fn, inputs = CASES[name]
    lm = check_int(Fn(fn), inputs, calibration=[inputs], max_steps=0)
    assert not lm.cpu_nodes
    error = float((lm.run(*inputs)[0] - fn(*inputs)).abs().max())
    # the bar: the INT error of the unmasked softmax of the same scores (what int8 costs a
    # softmax at all), plus two output steps; quantized whole, the masked one was 7x that
    plain = check_int(Fn(lambda s: s.softmax(-1)), (SCORES,), calibration=[(SCORES,)], max_steps=0)
    plain_error = float((plain.run(SCORES)[0] - SCORES.softmax(-1)).abs().max())
    assert error <= plain_error + 2 * lm.output_qparams[0].s, (error, plain_error)


@pytest.mark.parametrize("name", list(CASES))
def test_fp_masked_softmax_is_pytorchs(name):
    fn, inputs = CASES[name]
    assert not check_fp(Fn(fn), inputs, atol=1e-6, rtol=1e-6).cpu_nodes


# nn.MultiheadAttention builds its key-padding mask at run time: ``zeros.masked_fill(pad,
# -inf)``, reshaped to (N * H, 1, S), added to any attn_mask, then given to the attention
# (SDPA) or, with need_weights, to ``baddbmm`` before the softmax. Quantized as a bias, that
# mask's -BOUND left about one int8 step per unit of the scores: 0.24 off float where the
# unmasked MHA is 0.013.
torch.manual_seed(5)
MHA = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
TOKENS = torch.randn(2, 10, 32, generator=gen)
PAD = torch.zeros(2, 10, dtype=torch.bool)
PAD[0, 7:] = True
PAD[1, 4:] = True
CAUSAL_BOOL = torch.ones(10, 10).triu(1).bool()
CAUSAL_FLOAT = torch.zeros(10, 10).masked_fill(CAUSAL_BOOL, float("-inf"))
MHA_CASES = {
    "key_padding_mask": lambda x, pad: MHA(x, x, x, key_padding_mask=pad, need_weights=False)[0],
    "key_padding_mask, bool causal attn_mask":
        lambda x, pad: MHA(x, x, x, key_padding_mask=pad, attn_mask=CAUSAL_BOOL, need_weights=False)[0],
    "key_padding_mask as float -inf, float causal attn_mask":
        lambda x, pad: MHA(x, x, x, key_padding_mask=torch.zeros(pad.shape).masked_fill(pad, float("-inf")),
                           attn_mask=CAUSAL_FLOAT, need_weights=False)[0],
    "key_padding_mask, need_weights (baddbmm + softmax)":
        lambda x, pad: MHA(x, x, x, key_padding_mask=pad)[0],
}


def _mha_int(fn):
    cal_gen = torch.Generator().manual_seed(8)
    calibration = [(torch.randn(TOKENS.shape, generator=cal_gen), PAD) for _ in range(4)] + [(TOKENS, PAD)]
    return check_int(Fn(fn), (TOKENS, PAD), calibration=calibration, max_steps=0)


def _unmasked_mha_error() -> float:
    lm = _mha_int(lambda x, pad: MHA(x, x, x, need_weights=False)[0])
    with torch.no_grad():
        return float((lm.run(TOKENS, PAD)[0] - MHA(TOKENS, TOKENS, TOKENS, need_weights=False)[0]).abs().max())


@pytest.mark.parametrize("name", list(MHA_CASES))
def test_int_mha_with_a_padding_mask_is_as_near_float_as_without(name):
    fn = MHA_CASES[name]
    lm = _mha_int(fn)
    assert not lm.cpu_nodes
    with torch.no_grad():
        error = float((lm.run(TOKENS, PAD)[0] - fn(TOKENS, PAD)).abs().max())
    # the bar: twice the unmasked MHA's error (the masked rows average fewer values, so
    # their error is not the same), far below the bias form's 0.24
    assert error <= 2 * _unmasked_mha_error(), error


@pytest.mark.parametrize("name", list(MHA_CASES))
def test_fp_mha_with_a_padding_mask_is_pytorchs(name):
    assert not check_fp(Fn(MHA_CASES[name]), (TOKENS, PAD), atol=1e-5, rtol=1e-5).cpu_nodes
