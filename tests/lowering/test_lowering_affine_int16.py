"""int16 activations with a non-zero zero point: another quantizer's ``convert_pt2e`` graph
(ours quantizes int16 symmetrically), lowered as it is.

TOSA allows a non-zero zero point on a signed RESCALE's input or output only for int8, so such
a graph lowers where no RESCALE needs one (an int16 TABLE: the zero points live in its entries)
and leaves the other nodes on the CPU with that reason, instead of emitting a graph that breaks
an ERROR_IF.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers quantized_decomposed
from torchao.quantization.pt2e.observer import MinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationSpec

import lowering
from lowering.quantizer import QuantConfig, TosaQuantizer

qd = torch.ops.quantized_decomposed


class AffineInt16(QuantConfig):
    """Our quantizer with affine int16 activations over the full [-32768, 32767]."""

    def act_spec(self) -> QuantizationSpec:
        return QuantizationSpec(dtype=torch.int16, quant_min=-32768, quant_max=32767,
                                qscheme=torch.per_tensor_affine,
                                observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-20))


def _affine_int16(model: torch.nn.Module, x: torch.Tensor) -> torch.fx.GraphModule:
    gm = torch.export.export(model.eval(), (x,)).module(check_guards=False)
    prepared = prepare_pt2e(gm, TosaQuantizer(AffineInt16(activation_dtype=torch.int16), (x,)))
    prepared(x)
    return convert_pt2e(prepared)


def test_int16_table_with_a_nonzero_output_zero_point():
    """The TABLE's entries already hold the output zero point: the RESCALE after it must not
    add it again (it did, and TOSA refuses an int16 output zero point anyway)."""
    x = (torch.arange(64, dtype=torch.float32) / 16).reshape(1, 64)  # [0, 4): sigmoid in [0.5, 0.98)
    lm = lowering.lower(_affine_int16(torch.nn.Sigmoid(), x), (x,), profile="INT")
    qi, qo = lm.input_qparams[0], lm.output_qparams[0]
    assert lm.tosa is not None and not lm.cpu_nodes
    assert qo.dtype == torch.int16 and int(qo.zp) < -30000 and int(qi.zp) == -32768  # affine indeed
    # the yardstick: PyTorch's own float32 fake-quant of sigmoid at the input levels
    levels = qd.quantize_per_tensor(x, qi.s, qi.zp, qi.qmin, qi.qmax, torch.int16)
    fake = torch.sigmoid(qd.dequantize_per_tensor(levels, qi.s, qi.zp, qi.qmin, qi.qmax, torch.int16))
    want = qd.quantize_per_tensor(fake, qo.s, qo.zp, qo.qmin, qo.qmax, torch.int16).numpy().astype(np.int64)
    got = np.asarray(lm.run_raw([levels.numpy()])[0]).astype(np.int64)
    assert np.abs(got - want).max() <= 2  # the int16 TABLE's interpolation


def test_a_rescale_needing_an_int16_zero_point_stays_on_the_cpu():
    class AddConv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 3, 3)

        def forward(self, x):
            return self.conv(x + 1.0)

    x = torch.rand(1, 2, 6, 6)
    lm = lowering.lower(_affine_int16(AddConv(), x), (x,), profile="INT")
    reasons = {c.node: c.reason for c in lm.cpu_nodes}
    assert set(reasons) == {"add_tensor", "conv2d"}
    assert all("zero point" in r and "INT16" in r for r in reasons.values())
