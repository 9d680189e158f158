"""torchvision's transformer classifiers (ViT, Swin v1/v2, MaxViT) at test size: lowered whole,
INT equal to the fake-quant model evaluated in float64 bit for bit, FP equal to PyTorch within
float32 rounding. The same architecture classes as vit_b_16 / swin_t / swin_v2_t / maxvit_t
with fewer layers and narrower dims (``xformer_models.py``); random weights, nothing downloaded.
Slow (a minute or more per model on a loaded machine): ``python -m pytest -m slow``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xformer_models

import lowering
from lowering.reference import fake_quant_float64

pytestmark = pytest.mark.slow


def _lower(name: str, profile: str):
    torch.set_num_threads(1)
    model, example, calibration = xformer_models.build(name)
    lm = lowering.lower(model, example, profile=profile, calibration=calibration)
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes[:3]
    return model, example, lm


@pytest.mark.parametrize("name", xformer_models.SIZES)
def test_int_lowers_whole_and_equals_float64_fake_quant(name):
    _, example, lm = _lower(name, "INT")
    qp = lm.output_qparams[0]
    raw = lm.run_raw(lm.quantize_inputs(*example))[0].astype(np.int64)
    ref = torch.ops.quantized_decomposed.quantize_per_tensor(
        fake_quant_float64(lm.quantized_model, *example).float(), qp.s, qp.zp, qp.qmin,
        qp.qmax, qp.dtype).numpy().astype(np.int64)
    assert np.unique(ref).size > 2, f"{name}: a degenerate output proves nothing"
    diff = np.abs(ref - raw)
    assert diff.max() == 0, f"{name}: {(diff > 0).sum()} of {diff.size} outputs differ"


@pytest.mark.parametrize("name", xformer_models.SIZES)
def test_fp_lowers_whole_and_matches_pytorch(name):
    model, example, lm = _lower(name, "FP")
    with torch.no_grad():
        expected = model(*example)
    scale = float(expected.abs().max())
    assert scale > 0, f"{name}: an all-zero output proves nothing"
    torch.testing.assert_close(lm.run(*example)[0], expected, atol=1e-4 * scale, rtol=1e-3)
