"""The lowering's accuracy table over the zoo (what tests/lowering/test_lowering_zoo.py asserts).

Per model: INT TOSA (run by the reference model) vs the PT2E fake-quant model in quantization
steps of the output (max, share of elements within one step), the same against the fake-quant
graph evaluated in float64, SQNR vs the float model; FP TOSA vs PyTorch (max abs, max rel error).

    python benchmarks/zoo_accuracy.py [model ...]
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import lowering
import tosa_verify
from lowering import zoo
from lowering.reference import fake_quant_float64


def _steps(lm: lowering.LoweredModel, reference: torch.Tensor, tosa_out: np.ndarray) -> np.ndarray:
    qp = lm.output_qparams[0]
    q = torch.ops.quantized_decomposed.quantize_per_tensor(
        reference.detach().float(), qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype).numpy().astype(np.int64)
    return np.abs(q - tosa_out.astype(np.int64))


def _sqnr(ref: torch.Tensor, out: torch.Tensor) -> float:
    ref, out = ref.double().flatten(), out.double().flatten()
    noise = float((ref - out).pow(2).sum())
    return float("inf") if noise == 0 else 10 * np.log10(float(ref.pow(2).sum()) / noise)


def main(names: list[str]) -> None:
    print("model              elements  INT steps max  within 1  vs float64 max  SQNR dB"
          "   FP max abs  FP max rel")
    for name in names:
        model, example, calibration = zoo.MODELS[name]()
        int_lm = lowering.lower(model, example, profile="INT", calibration=calibration)
        raw = tosa_verify.reference.run(int_lm.tosa, int_lm.quantize_inputs(*example))[0]
        d32 = _steps(int_lm, int_lm.quantized_model(*example), raw)
        d64 = _steps(int_lm, fake_quant_float64(int_lm.quantized_model, *example), raw)
        qp = int_lm.output_qparams[0]
        with torch.no_grad():
            ref = model(*example)
        dequant = torch.from_numpy((raw.astype(np.float64) - qp.zp) * qp.s).reshape(ref.shape)
        fp_lm = lowering.lower(model, example, profile="FP")
        fp_out = torch.from_numpy(np.asarray(tosa_verify.reference.run(
            fp_lm.tosa, [x.numpy() for x in example])[0])).reshape(ref.shape)
        err = (fp_out.double() - ref.double()).abs()
        rel = float((err / ref.double().abs().clamp(min=1e-3)).max())
        print(f"{name:18s} {d32.size:8d} {d32.max():14d} {(d32 <= 1).mean():8.1%} {d64.max():15d} "
              f"{_sqnr(ref, dequant):8.1f} {float(err.max()):12.2e} {rel:11.2e}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(zoo.MODELS))
