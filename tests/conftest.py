"""Session-wide test settings.

torch runs one intra-op thread per test process: ``python -m pytest -n auto`` starts one worker
per core, and a second torch thread per worker only spins against the other worker (lowering
MobileNetV2 on 2 busy cores: about 3x slower with 2 threads than with 1,
``benchmarks/bench_threads.py``). The same reason sets ``TOSA_VERIFY_THREADS`` for the
subprocesses tests start.
"""

from __future__ import annotations

import os

import pytest
import torch

# the VGF device gate for any test: skips without Vulkan, fails in CI (vgf/testing.py)
from vgf.testing import vgf_device  # noqa: F401

os.environ.setdefault("TOSA_VERIFY_THREADS", "1")
# Tests call tosa_reference_model.run directly on graphs that fail an ERROR_IF; without this it
# attaches gdb to the worker to print a backtrace (seconds of CPU each, for a known status).
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")
torch.set_num_threads(1)


@pytest.hookimpl(trylast=True)  # after ``-m`` deselection: the chunks xdist sends are counted on what runs
def pytest_collection_modifyitems(config, items):
    """Each xdist worker starts with its share of the known slow tests (tests/_schedule.py)."""
    from _schedule import order_items

    order_items(config, items)


_LOWERED: dict = {}


def lowered_zoo_model(name: str, profile: str = "INT"):
    """``(model, example, calibration, lowered)`` of a ``lowering.zoo`` model, lowered once per
    test process (xdist worker) and shared by every test that asks: a lowered model is read,
    never changed, by the tests (they copy it with ``dataclasses.replace`` to edit a graph).

    >>> model, example, calibration, lowered = lowered_zoo_model("mlp")   # doctest: +SKIP
    """
    key = (name, profile)
    if key not in _LOWERED:
        import lowering
        from lowering import zoo

        model, example, calibration = zoo.MODELS[name]()
        _LOWERED[key] = (model, example, calibration,
                         lowering.lower(model, example, profile=profile, calibration=calibration))
    return _LOWERED[key]


@pytest.fixture(scope="session")
def zoo_lowered():
    """The :func:`lowered_zoo_model` cache as a fixture: ``zoo_lowered("mlp")``."""
    return lowered_zoo_model
