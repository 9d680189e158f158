"""torchvision classifiers nobody here wrote: lowered whole, exact, compiled by Vela, checked.

Random weights (nothing is downloaded), eval mode, 96x96 inputs (more architectures at 64x64 or
the smallest size they take, INT and FP only; see ``tv_models.py``). Each
model must lower as one TOSA graph in INT and FP; the INT graph must equal its fake-quant model
evaluated in float64 bit for bit, the FP graph PyTorch within float32 rounding; Vela must put
every operator on the NPU of an Ethos-U55-128 and an Ethos-U85-256; ``tosa-verify check`` with
both targets must exit 0. Random-weight deep nets are chaotic: they are not damped here, the
numbers are what torchvision's initialisation gives. Slow: ``python -m pytest -m slow``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import tv_models

import lowering
from ethosu.compiler import compile_tosa
from lowering.reference import fake_quant_float64

pytestmark = pytest.mark.slow

TARGETS = ("ethos-u55-128", "ethos-u85-256")
_LOWERED: dict = {}


def _lowered(name: str, profile: str):
    """``(model, example, LoweredModel)``, lowered once per test process."""
    if (name, profile) not in _LOWERED:
        torch.set_num_threads(1)  # two cores shared with the other xdist worker
        model, example, calibration = tv_models.build(name)
        lm = lowering.lower(model, example, profile=profile, calibration=calibration)
        _LOWERED[name, profile] = (model, example, lm)
    return _LOWERED[name, profile]


@pytest.mark.parametrize("name", (*tv_models.MODELS, *tv_models.MORE_MODELS))
def test_int_lowers_whole_and_equals_float64_fake_quant(name):
    _, example, lm = _lowered(name, "INT")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes[:3]
    qp = lm.output_qparams[0]
    raw = lm.run_raw(lm.quantize_inputs(*example))[0].astype(np.int64)
    ref = torch.ops.quantized_decomposed.quantize_per_tensor(
        fake_quant_float64(lm.quantized_model, *example).float(), qp.s, qp.zp, qp.qmin,
        qp.qmax, qp.dtype).numpy().astype(np.int64)
    diff = np.abs(ref - raw)
    assert diff.max() == 0, f"{name}: {(diff > 0).sum()} of {diff.size} outputs differ"


@pytest.mark.parametrize("name", (*tv_models.MODELS, *tv_models.MORE_MODELS))
def test_fp_lowers_whole_and_matches_pytorch(name):
    model, example, lm = _lowered(name, "FP")
    assert lm.tosa is not None and lm.cpu_nodes == [], lm.cpu_nodes[:3]
    with torch.no_grad():
        expected = model(*example)
    got = lm.run(*example)[0]
    scale = float(expected.abs().max())
    torch.testing.assert_close(got, expected, atol=1e-4 * scale, rtol=1e-3)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", tv_models.MODELS)
def test_vela_puts_everything_on_the_npu(name, target):
    _, _, lm = _lowered(name, "INT")
    program = compile_tosa(lm.tosa, target, layers=False, isolate=True)
    cpu = re.search(r"^CPU operators = (\d+)", program.vela_log, re.MULTILINE)
    assert cpu and int(cpu.group(1)) == 0, f"{name} on {target}: {cpu and cpu.group(0)}"
    assert program.cycles > 0


@pytest.mark.parametrize("name", tv_models.MODELS)
def test_check_passes_with_both_targets(name, tmp_path):
    models = Path(tv_models.__file__)
    cmd = [sys.executable, "-m", "tosa_verify.cli", "check", f"{models}:{name}",
           *[a for t in TARGETS for a in ("--target", t)], "--json", str(tmp_path / "r.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "RESULT: PASS" in done.stdout
