"""A Hugging Face T5ForConditionalGeneration (ExecuTorch's test_T5ForConditionalGeneration
downloads t5-small; here a tiny random-weight config, nothing downloaded): lowered whole in INT
and FP, INT equal to the fake-quant model in float64, FP to PyTorch within float32 rounding.
Its attention masks are ``where(mask, 0, finfo.min)``. Slow: ``python -m pytest -m slow``."""

from __future__ import annotations

import pytest
import torch
from lowering_checks import float64_step_diff

import lowering
from lowering.torchvision_compat import allow_cpu_torchvision

pytestmark = pytest.mark.slow


def _t5():
    allow_cpu_torchvision()  # (transformers imports torchvision)
    from transformers import T5Config, T5ForConditionalGeneration

    class Logits(T5ForConditionalGeneration):
        def forward(self, input_ids, attention_mask, decoder_input_ids):
            return super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                   decoder_input_ids=decoder_input_ids, use_cache=False,
                                   return_dict=True).logits

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=200, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                   num_decoder_layers=2, num_heads=4, use_cache=False)
    ids = torch.randint(0, 200, (1, 12))
    return Logits(cfg).eval(), (ids, torch.ones_like(ids), torch.tensor([[0]]))


def test_t5_int_whole_and_equal_to_float64_fake_quant():
    model, example = _t5()
    lm = lowering.lower(model, example, profile="INT", calibration=[example])
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes[:3]
    assert float64_step_diff(lm, example).max() == 0


def test_t5_fp_whole_and_equal_to_pytorch():
    model, example = _t5()
    lm = lowering.lower(model, example, profile="FP")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes[:3]
    with torch.no_grad():
        expected = model(*example)
    assert torch.allclose(lm.run(*example)[0], expected, atol=1e-4, rtol=1e-4)
