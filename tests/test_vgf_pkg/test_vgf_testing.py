"""``vgf.testing``: a test that needs VGF skips on a machine without it, and fails where VGF is required."""

from __future__ import annotations

import pytest

import vgf
from vgf import testing


@pytest.mark.parametrize("env", [{"TOSA_VERIFY_REQUIRE_VGF": "1"}, {"CI": "true"}])
def test_missing_device_fails_where_vgf_is_required(monkeypatch, env):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(testing.REQUIRE_ENV, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(vgf, "available", lambda: (False, "no Vulkan loader (libvulkan.so.1)"))
    with pytest.raises(pytest.fail.Exception, match="VGF is required here .*no Vulkan loader"):
        testing.require_vgf()


def test_missing_device_skips_with_the_reason_elsewhere(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv(testing.REQUIRE_ENV, "0")
    monkeypatch.setattr(vgf, "available", lambda: (False, "no Vulkan loader (libvulkan.so.1)"))
    with pytest.raises(pytest.skip.Exception, match="VGF not available: no Vulkan loader"):
        testing.require_vgf()


def test_available_device_passes_the_gate(monkeypatch):
    monkeypatch.setenv(testing.REQUIRE_ENV, "1")
    monkeypatch.setattr(vgf, "available", lambda: (True, "ok"))
    assert testing.require_vgf() is None
