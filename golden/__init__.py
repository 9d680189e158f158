"""Golden files: recorded outputs and per-layer statistics of models, and regression diffs.

>>> from golden import GoldenStore
>>> store = GoldenStore("goldens")                       # doctest: +SKIP
>>> store.write("digits_cnn/INT/ethos-u55-128", golden)  # doctest: +SKIP
"""

from __future__ import annotations

from .diff import CaseDiff, GoldenDiffReport, Thresholds, diff
from .store import (
    SCHEMA_VERSION,
    Golden,
    GoldenCorruptError,
    GoldenError,
    GoldenExistsError,
    GoldenMissingError,
    GoldenStore,
    TensorStats,
    tensor_stats,
)

__all__ = [
    "SCHEMA_VERSION",
    "CaseDiff",
    "Golden",
    "GoldenCorruptError",
    "GoldenDiffReport",
    "GoldenError",
    "GoldenExistsError",
    "GoldenMissingError",
    "GoldenStore",
    "TensorStats",
    "Thresholds",
    "diff",
    "tensor_stats",
]
