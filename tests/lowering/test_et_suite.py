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

import pytest
import torch

_et_suite = pytest.importorskip("_et_suite")  # benchmarks/, on sys.path through pyproject

#: ExecuTorch test files whose first case per INT/FP test runs by default.
DEFAULT_FILES = (
    "test_scalars.py", "test_hardswish.py", "test_relu.py", "test_bitwise.py", "test_to_copy.py",
    "test_prelu.py", "test_gather.py", "test_conv3d.py", "test_index_put.py", "test_cond.py",
    "test_while.py",
)

#: case id -> why we do not pass a case ExecuTorch passes (from ``bench_et_suite.py
#: --per-function 2``; the cases beyond that sample were not all run).
KNOWN_GAPS: dict[str, str] = {}


def _params(files, first_only: bool):
    cases = [c for c in _et_suite.collect(files) if c.skip is None and c.et_xfail is None]
    if first_only:
        cases = _first_per_function(cases)
    params = []
    for c in cases:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[c.id])] \
            if c.id in KNOWN_GAPS else []
        params.append(pytest.param(c, id=c.id, marks=marks))
    return params


def _first_per_function(cases):
    seen, out = set(), []
    for c in cases:
        fn = c.id.split("[")[0]
        if fn not in seen:
            seen.add(fn)
            out.append(c)
    return out


def _check(case):
    torch.manual_seed(0)
    verdict = _et_suite.judge_ours(case)
    assert verdict.status == "pass", f"{case.id}: {verdict.status}: {verdict.detail}"


@pytest.mark.parametrize("case", _params(DEFAULT_FILES, first_only=True))
def test_executorch_op_case(case):
    _check(case)


def test_default_subset_is_not_empty():
    """The collector finds ExecuTorch's test modules (an import change must not empty the run)."""
    cases = _et_suite.collect(["test_add.py"])
    assert {c.profile for c in cases} == {"INT", "FP"}
    assert all(isinstance(c.module, torch.nn.Module) for c in cases)
    assert len(cases) >= 10


def pytest_generate_tests(metafunc):
    """Collect the whole suite (20 s of imports) only when ``-m et_suite`` asks for it."""
    if metafunc.function is not test_executorch_op_suite:
        return
    wanted = "et_suite" in (metafunc.config.option.markexpr or "").replace("not et_suite", "")
    metafunc.parametrize("case", _params(None, first_only=False) if wanted else [])


@pytest.mark.et_suite
def test_executorch_op_suite(case):
    _check(case)
