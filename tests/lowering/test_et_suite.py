"""ExecuTorch's own Arm op tests, lowered by us: the modules and inputs from the installed wheel.

``benchmarks/_et_suite.py`` imports ``executorch/backends/arm/test/ops/test_*.py``, records the
module and inputs each TOSA INT/FP test hands its pipeline, and judges our lowering as
ExecuTorch judges its own: fully lowered, and the reference model's output within ``qtol``
quantization steps of the fake-quant model (INT) or within atol/rtol of PyTorch (FP).

The default run takes the first case of every INT/FP test function of :data:`DEFAULT_FILES`
(in-place ops, python-number inputs, integer inputs, casts, views: what user code brings);
``-m et_suite`` runs every case of every op test. Cases ExecuTorch itself marks as expected
failures are not our yardstick and are left out; the cases ExecuTorch passes and we do not are
listed in :data:`KNOWN_GAPS` with the reason, as strict expected failures (fixing one makes
the run say so). ``benchmarks/bench_et_suite.py`` runs ExecuTorch's own flow beside ours.
"""

from __future__ import annotations

from pathlib import Path

import _et_suite  # benchmarks/, on sys.path through pyproject (missing: an error, not a skip)
import pytest
import torch

#: The usable case ids of the default files, so that collecting this module imports none of
#: ExecuTorch (seconds of CPU in every xdist worker); each test body collects its own file. A
#: file whose bytes or executorch version changed is collected live instead
#: (``_et_suite.usable_ids``); rewrite with ``python benchmarks/_et_suite.py --listing <this>``.
LISTING = Path(__file__).with_name("et_cases.json")

#: ExecuTorch test files whose first case per INT/FP test runs by default.
DEFAULT_FILES = (
    "test_scalars.py", "test_hardswish.py", "test_relu.py", "test_bitwise.py", "test_to_copy.py",
    "test_prelu.py", "test_gather.py", "test_conv3d.py", "test_index_put.py", "test_cond.py",
    "test_while.py", "test_zeros.py",
    # (the int16 flow: 16-bit activations, 8-bit weights; also in test_conv3d and test_to_copy)
    "test_neg.py", "test_tanh.py", "test_linear.py",
)

#: case id -> why we do not pass a case ExecuTorch passes. Empty: ``bench_et_suite.py --all``
#: over every op-test file (3186 INT/FP cases, 2026-11-25) leaves only ExecuTorch's own xfails.
KNOWN_GAPS: dict[str, str] = {}


def _params(files, first_only: bool, kind: str = "ops"):
    ids = _et_suite.usable_ids(files, kind, LISTING)
    if first_only:
        ids = _first_per_function(ids)
    params = []
    for cid in ids:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[cid])] \
            if cid in KNOWN_GAPS else []
        params.append(pytest.param((kind, cid), id=cid, marks=marks))
    return params


def _first_per_function(ids):
    seen, out = set(), []
    for cid in ids:
        fn = cid.split("[")[0]
        if fn not in seen:
            seen.add(fn)
            out.append(cid)
    return out


def _check(case):
    """``case`` is ``(kind, case id)``: the module and inputs are collected here, not at collection."""
    torch.manual_seed(0)
    case = _et_suite.find_case(case[1], case[0])
    verdict = _et_suite.judge_ours(case)
    assert verdict.status == "pass", f"{case.id}: {verdict.status}: {verdict.detail}"


@pytest.mark.parametrize("case", _params(DEFAULT_FILES, first_only=True))
def test_executorch_op_case(case):
    _check(case)


def test_int16_cases_are_collected_as_executorchs_int16_flow():
    """ExecuTorch's a16w8/16a8w TOSA tests are INT cases of the int16 flow, not left out."""
    cases = [c for c in _et_suite.collected("test_neg.py") if _et_suite.usable(c)]
    int16 = [c for c in cases if c.int16]
    assert int16 and all(c.profile == "INT" and c.label == "INT16" for c in int16)
    assert {c.id.split("[")[0] for c in int16} == {"test_neg.py::test_neg_tosa_INT_a16w8"}
    assert not any(c.int16 for c in cases if c.profile == "FP")


def test_default_subset_is_not_empty():
    """The collector finds ExecuTorch's test modules (an import change must not empty the run)."""
    cases = _et_suite.collect(["test_add.py"])
    assert {c.profile for c in cases} == {"INT", "FP"}
    assert all(isinstance(c.module, torch.nn.Module) for c in cases)
    assert len(cases) >= 10


def test_case_listing_is_current():
    """The listing serves every default file (a stale one makes every worker collect live), and
    its ids are what the live collector finds."""
    import json

    listed = json.loads(LISTING.read_text())
    assert set(listed["ops"]) == set(DEFAULT_FILES) and set(listed["models"]) == set(MODEL_FILES_FAST)
    stale = [f for kind, files in listed.items() for f, e in files.items() if e["key"] != _et_suite.file_key(f, kind)]
    assert not stale, f"{stale}: changed since listed; run python benchmarks/_et_suite.py --listing {LISTING}"
    live = [c.id for c in _et_suite.collect(["test_prelu.py"]) if _et_suite.usable(c)]
    assert listed["ops"]["test_prelu.py"]["ids"] == live


def _asked_for(metafunc, marker: str) -> bool:
    return marker in (metafunc.config.option.markexpr or "").replace(f"not {marker}", "")


def pytest_generate_tests(metafunc):
    """Collect the whole op suite (20 s of imports) only when ``-m et_suite`` asks for it, and
    the slow model cases (the model files' imports: seconds in every xdist worker) only with
    ``-m slow``."""
    if metafunc.function is test_executorch_op_suite:
        metafunc.parametrize("case", _params(None, first_only=False) if _asked_for(metafunc, "et_suite") else [])
    elif metafunc.function is test_executorch_model_case_slow:
        cases = (_model_params(MODEL_FILES_FAST, slow=True) + _model_params(MODEL_FILES_SLOW, slow=True)
                 if _asked_for(metafunc, "slow") else [])
        metafunc.parametrize("case", cases)


@pytest.mark.et_suite
def test_executorch_op_suite(case):
    _check(case)


# ----------------------------------------------------------------------------- models suite
#: ExecuTorch's whole-model tests (``.../test/models``) that build without downloads and lower
#: in a second or two: every INT/FP case of these files runs by default, but :data:`SLOW_MODELS`
#: and :data:`MODEL_GAPS`.
MODEL_FILES_FAST = ("test_nn_functional.py", "test_nn_modules.py", "test_torch_functions.py",
                    "test_residual_conv_block.py")
#: Cases of those files that take 3-35 s: ``-m slow``.
SLOW_MODELS = ("[GRUModule]", "[TransformerModule]")
#: The model tests that take longer: ``-m slow`` (Swin2SR needs ``transformers``, a test extra).
MODEL_FILES_SLOW = ("test_ds_cnn.py", "test_deep_autoencoder.py", "test_resnet8.py",
                    "test_lstm_arm.py", "test_mobilenet_v1_025.py", "test_swin2sr_arm.py")
#: case id -> why we do not pass it (``bench_et_suite.py --kind models --all``); strict
#: expected failures, so a fix makes the run say so. Ops ExecuTorch's Arm backend delegates
#: that our lowering leaves on the CPU, or numbers off:
MODEL_GAPS: dict[str, str] = {
    "test_nn_functional.py::test_nn_functional_tosa_INT[grid_sample]":
        "aten.grid_sampler not lowered in INT (the sampling coordinates are indices int8 "
        "cannot hold; it stays on the CPU with that reason). ExecuTorch delegates nothing "
        "either, in INT or FP: its test accepts 'never ran TOSABackend delegate'",
    **{f"test_torch_functions.py::test_torch_functions_tosa_{p}[nonzero]":
       "nonzero: data-dependent output shape, kept on the CPU with that reason (ExecuTorch "
       "delegates nothing either: its test accepts 'never ran TOSABackend delegate')"
       for p in ("INT", "FP")},
}


def _model_params(files, slow: bool):
    """The default run takes the first passing case of each INT/FP test of ``files``; ``slow``
    every other case (the known gaps as strict expected failures)."""
    ids = _et_suite.usable_ids(files, "models", LISTING)
    quick = [cid for cid in ids if cid not in MODEL_GAPS and not any(s in cid for s in SLOW_MODELS)]
    default_ids = set(_first_per_function(quick)) if files is MODEL_FILES_FAST else set()
    params = []
    for cid in ids:
        if slow == (cid in default_ids):
            continue
        marks = [pytest.mark.xfail(strict=True, reason=MODEL_GAPS[cid])] if cid in MODEL_GAPS else []
        params.append(pytest.param(("models", cid), id=cid, marks=marks))
    return params


@pytest.mark.parametrize("case", _model_params(MODEL_FILES_FAST, slow=False))
def test_executorch_model_case(case):
    _check(case)


@pytest.mark.slow
def test_executorch_model_case_slow(case):
    _check(case)


@pytest.mark.slow
def test_every_model_file_collects():
    """A model test file whose import fails (a missing package) must not vanish from the run."""
    for f in (*MODEL_FILES_FAST, *MODEL_FILES_SLOW):
        assert _et_suite.collect([f], kind="models"), f"{f}: no INT/FP case collected"


def test_int_judge_still_fails_a_graph_off_by_two_steps(monkeypatch):
    """The float64 fake-quant fallback of the INT judge forgives float32 rounding of the
    reference, not a wrong TOSA graph: outputs moved by two steps fail against both."""
    import lowering

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Sigmoid()).eval()
    case = _et_suite.EtCase(id="linear", profile="INT", module=module, inputs=(torch.randn(3, 8),))
    lm = lowering.lower(module, case.inputs, profile="INT", calibration=[case.inputs])
    assert _et_suite._compare(case, lm, module) is None
    run_raw = lm.run_raw
    monkeypatch.setattr(lm, "run_raw", lambda q: [r.astype("int64") + 2 for r in run_raw(q)])
    detail = _et_suite._compare(case, lm, module)
    assert detail == ("output 0: 2 quantization steps from fake-quant (float64 fake-quant: "
                      "output 0: 2 quantization steps from fake-quant)")


def test_int16_judge_takes_executorchs_tolerance(monkeypatch):
    """An int16 case passes within ExecuTorch's atol (1e-3) + qtol steps + rtol of the fake-quant
    value, as ExecuTorch's pipeline compares, and fails beyond it."""
    import lowering
    from lowering.quantizer import QuantConfig

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Sigmoid()).eval()
    case = _et_suite.EtCase(id="linear", profile="INT", module=module, inputs=(torch.randn(3, 8),), int16=True)
    lm = lowering.lower(module, case.inputs, quantization=QuantConfig.int16(), calibration=[case.inputs])
    assert lm.output_qparams[0].dtype == torch.int16
    assert _et_suite._compare(case, lm, module) is None
    run_raw = lm.run_raw
    step = float(lm.output_qparams[0].scale[0])
    for shift, passes in ((3, True), (round(3e-3 / step), False)):
        monkeypatch.setattr(lm, "run_raw", lambda q, shift=shift: [r.astype("int64") + shift for r in run_raw(q)])
        detail = _et_suite._compare(case, lm, module)
        assert (detail is None) == passes, (shift, detail)
