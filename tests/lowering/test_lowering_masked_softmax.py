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
