"""The ``vgf_device`` fixture: skip outside CI / fail in CI when VGF cannot run here."""

from __future__ import annotations

import pytest

from .helpers import require_vgf


@pytest.fixture
def vgf_device() -> None:
    """A test that runs VGF programs."""
    require_vgf()
