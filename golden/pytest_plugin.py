"""pytest plugin: the ``tosa_golden`` fixture and the ``--tosa-golden-update`` option.

Registered through the ``pytest11`` entry point, so installing tosa-verify makes it available::

    def test_my_model(tosa_golden):
        model, example_inputs = build_model()
        tosa_golden.check(model, example_inputs, name="my_model")

The first run fails with "no golden recorded" until it is run once with ``--tosa-golden-update``;
afterwards a change is reported with the golden diff report. Goldens live in ``--tosa-golden-dir``
(default ``tests/goldens`` beside the rootdir).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .diff import Thresholds, diff
from .store import GoldenMissingError, GoldenStore


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tosa-golden")
    group.addoption("--tosa-golden-update", action="store_true", default=False,
                    help="record or replace tosa-verify goldens instead of comparing against them")
    group.addoption("--tosa-golden-dir", default=None,
                    help="directory of tosa-verify goldens (default: <rootdir>/tests/goldens)")


class GoldenChecker:
    """What the ``tosa_golden`` fixture returns."""

    def __init__(self, store: GoldenStore, update: bool, thresholds: Thresholds) -> None:
        self.store = store
        self.update = update
        self.thresholds = thresholds

    def check(self, model: Any, example_inputs: tuple, *, name: str, profile: str = "INT",
              calibration: Any = None, targets: tuple[str, ...] = (), seed: int = 0) -> None:
        """Record ``model`` (quantize, lower, run, statistics) and compare with its golden.

        Fails the test with the diff report on a regression; with ``--tosa-golden-update``
        writes the golden instead (atomically).
        """
        from .record import record_model

        case = f"{name}/{profile}"
        new = record_model(model, example_inputs, profile=profile, calibration=calibration,
                           targets=targets, seed=seed)
        if self.update:
            self.store.write(case, new, update=True)
            return
        try:
            old = self.store.read(case)
        except GoldenMissingError:
            pytest.fail(f"no golden recorded for {case!r} in {self.store.root}; "
                        f"run pytest with --tosa-golden-update to record it", pytrace=False)
        report = diff(old, new, self.thresholds, case=case)
        if report.failed:
            pytest.fail("golden regression:\n" + report.format(), pytrace=False)


@pytest.fixture
def tosa_golden(request: pytest.FixtureRequest) -> GoldenChecker:
    """Compare a model against its recorded golden (see module docstring)."""
    config = request.config
    root = config.getoption("--tosa-golden-dir") or Path(str(config.rootpath)) / "tests" / "goldens"
    return GoldenChecker(GoldenStore(root), bool(config.getoption("--tosa-golden-update")), Thresholds.from_options())
