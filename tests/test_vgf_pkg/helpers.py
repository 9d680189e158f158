"""Shared pieces of the VGF tests: the device gate and lowered zoo graphs.

Outside CI a machine without the Vulkan pieces skips these tests with the reason
``vgf.available()`` gives; in CI (``CI`` or ``TOSA_VERIFY_REQUIRE_VGF`` set; ``.ci/run`` sets the
latter after installing the Vulkan driver) a missing device fails them instead.
"""

from __future__ import annotations

import os

import pytest

import vgf


def require_vgf() -> None:
    """Skip (outside CI) or fail (in CI) when TOSA cannot be compiled to VGF and run here."""
    ok, reason = vgf.available()
    if ok:
        return
    if os.environ.get("CI") or os.environ.get("TOSA_VERIFY_REQUIRE_VGF"):
        pytest.fail(f"VGF is not available in CI: {reason}")
    pytest.skip(f"VGF not available: {reason}")


_LOWERED: dict[tuple[str, str], bytes] = {}


def zoo_tosa(name: str, profile: str) -> bytes:
    """TOSA of a ``lowering.zoo`` model lowered by us (INT with its calibration), memoized."""
    key = (name, profile)
    if key not in _LOWERED:
        import torch

        import lowering
        from lowering import zoo

        torch.set_num_threads(1)
        model, example, calibration = zoo.MODELS[name]()
        lowered = lowering.lower(model.eval(), example, profile=profile,
                                 calibration=calibration if profile == "INT" else None)
        _LOWERED[key] = lowered.tosa
    return _LOWERED[key]
