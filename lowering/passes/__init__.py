"""Ordered, named graph passes used by :mod:`lowering.pipeline`.

Every pass is a callable ``pass(gm, ctx) -> None`` mutating the FX graph module in place.
"""

from .decompose import DecomposeForTosa, ScalarsToTensors
from .fold_batch_norm import FoldBatchNorm
from .fold_constants import FoldConstants
from .fold_qdq import FoldQDQ, QuantizeUnusedInputs
from .functionalize import FunctionalizeInPlace
from .int64 import (
    ConvertInt64ConstOpsToInt32,
    ConvertInt64OutputOpsToInt32,
    InsertInt32CastsAfterInt64Placeholders,
)
from .layout import AssignNHWCLayout
from .noops import RemoveNoOps

__all__ = [
    "DecomposeForTosa",
    "ScalarsToTensors",
    "FoldBatchNorm",
    "FoldConstants",
    "FoldQDQ",
    "FunctionalizeInPlace",
    "QuantizeUnusedInputs",
    "ConvertInt64ConstOpsToInt32",
    "ConvertInt64OutputOpsToInt32",
    "InsertInt32CastsAfterInt64Placeholders",
    "AssignNHWCLayout",
    "RemoveNoOps",
]
