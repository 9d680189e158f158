"""The tosa_golden fixture end to end, in pytest runs of their own.

The first three runs are in-process. pytester restores ``sys.modules`` after each run, and a
module imported inside one run would be imported a second time into this interpreter by the next
(torch's export refuses that), so the model is recorded once first (a module-scoped fixture,
before pytester's snapshot), which imports all that the runs use. The last is a real subprocess, the way a
user's pytest finds the plugin (its ``pytest11`` entry point) in a fresh interpreter. Each
subprocess pays a torch and lowering import (~6 s of CPU).
"""

from __future__ import annotations

import pytest

import golden.pytest_plugin  # noqa: F401 - imported before the in-process runs (see above)
from golden import GoldenStore
from golden.record import record_model

pytest_plugins = ["pytester"]
#: The in-process runs do not read our pyproject's addopts: pytest-benchmark (when installed)
#: would warn in each that xdist disables it.
NO_BENCHMARK = ("-p", "no:benchmark")

TEST_FILE = """
import torch

def build(bias_shift=0.0):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    with torch.no_grad():
        m[2].bias += bias_shift
    return m, (torch.randn(2, 8, generator=torch.Generator().manual_seed(1)),)

def test_model(tosa_golden):
    import os
    model, example = build(float(os.environ.get("BIAS_SHIFT", "0")))
    tosa_golden.check(model, example, name="mlp")
"""


@pytest.fixture(scope="module")
def warm_imports() -> None:
    """The test file's model recorded once, which imports all that the in-process runs use.

    Module-scoped, so it runs before the ``pytester`` fixture takes its ``sys.modules``
    snapshot: pytester drops every module imported after that snapshot when the test ends,
    and torch refuses a second import of its own (a later test in this worker failed with
    "Artifact of type=autotune already registered")."""
    namespace: dict = {}
    exec(TEST_FILE, namespace)
    record_model(*namespace["build"]())


def test_record_then_compare_then_catch_a_regression(warm_imports, pytester, monkeypatch):
    pytester.makepyfile(test_golden_model=TEST_FILE)
    golden_dir = pytester.path / "goldens"

    first = pytester.runpytest_inprocess(f"--tosa-golden-dir={golden_dir}", *NO_BENCHMARK)
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(["*no golden recorded for 'mlp/INT'*--tosa-golden-update*"])

    record = pytester.runpytest_inprocess(f"--tosa-golden-dir={golden_dir}", "--tosa-golden-update", *NO_BENCHMARK)
    record.assert_outcomes(passed=1)
    assert (GoldenStore(golden_dir).live_dir("mlp/INT") / "manifest.json").exists()

    again = pytester.runpytest_inprocess(f"--tosa-golden-dir={golden_dir}", *NO_BENCHMARK)
    again.assert_outcomes(passed=1)

    monkeypatch.setenv("BIAS_SHIFT", "0.5")
    changed = pytester.runpytest_subprocess(f"--tosa-golden-dir={golden_dir}")
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*golden regression*", "*mlp/INT: NUMERICAL-REGRESSION*"])
