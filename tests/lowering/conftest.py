"""Fixtures for the lowering tests; their shared checks are in lowering_checks.py."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def rng():
    return torch.Generator().manual_seed(0)
