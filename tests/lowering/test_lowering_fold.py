"""``F.fold`` (col2im) lowered as spread, padded and added patch blocks: FP against PyTorch,
INT bit-exact against the fake-quant model evaluated in float64; every case lowers whole."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lowering
from lowering.reference import fake_quant_float64

gen = torch.Generator().manual_seed(9)


class Fold(nn.Module):
    def __init__(self, output_size, kernel_size, **kwargs):
        super().__init__()
        self.output_size, self.kernel_size, self.kwargs = output_size, kernel_size, kwargs

    def forward(self, x):
        return F.fold(x, self.output_size, self.kernel_size, **self.kwargs)


#: name -> (module, input shape); L = number of patches for the geometry
CASES = {
    "executorch_case": (Fold((4, 5), (2, 2)), (1, 12, 12)),
    "stride_2_padding_1": (Fold((6, 7), (3, 3), stride=2, padding=1), (2, 18, 12)),
    "dilation_2": (Fold((6, 6), (2, 3), dilation=2), (1, 12, 8)),
    "unbatched_stride_3": (Fold((7, 5), (2, 2), stride=(3, 2)), (8, 4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fold_fp(name):
    model, shape = CASES[name]
    x = torch.randn(shape, generator=gen)
    lm = lowering.lower(model.eval(), (x,), profile="FP")
    assert not lm.cpu_nodes and lm.tosa is not None
    (got,) = lm.run(x)
    torch.testing.assert_close(got, model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fold_int_bit_exact(name):
    model, shape = CASES[name]
    x = torch.randn(shape, generator=gen)
    calibration = [(torch.randn(shape, generator=gen),) for _ in range(3)] + [(x,)]
    lm = lowering.lower(model.eval(), (x,), profile="INT", calibration=calibration)
    assert not lm.cpu_nodes and lm.tosa is not None
    qp = lm.output_qparams[0]
    expected = torch.ops.quantized_decomposed.quantize_per_tensor(
        fake_quant_float64(lm.quantized_model, x), qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)
    raw = np.asarray(lm.run_raw(lm.quantize_inputs(x))[0]).astype(np.int64)
    assert np.array_equal(raw, expected.numpy().astype(np.int64))
