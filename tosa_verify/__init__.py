"""tosa-verify: a bit-exact TOSA 1.0 interpreter and the tools to trust a PyTorch -> Ethos-U flow.

>>> import tosa_verify
>>> "CONV2D" in tosa_verify.SUPPORTED_OPS   # doctest: +SKIP
True
"""

from __future__ import annotations

from . import reference
from .batch import run_batch
from .compare import Verdict, compare
from .diff import DiffReport, diff
from .drift import DriftReport, drift
from .errors import (
    TosaError,
    TosaFormatError,
    TosaInputError,
    TosaRequireError,
    TosaSizeError,
    TosaUnsupportedError,
    TosaValidationError,
)
from .evaluate import EvalReport, evaluate
from .graph import Block, Graph, Operator, Region, Tensor, load
from .interpreter import Interpreter, RunResult, run
from .ops.registry import REGISTRY as _REGISTRY

#: Every TOSA operator the interpreter implements (derived from the registry).
SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(_REGISTRY))

__version__ = "0.1.0"

__all__ = [
    "SUPPORTED_OPS",
    "Block",
    "DiffReport",
    "DriftReport",
    "EvalReport",
    "Graph",
    "Interpreter",
    "Operator",
    "Region",
    "RunResult",
    "Tensor",
    "TosaError",
    "TosaFormatError",
    "TosaInputError",
    "TosaRequireError",
    "TosaSizeError",
    "TosaUnsupportedError",
    "TosaValidationError",
    "Verdict",
    "compare",
    "diff",
    "drift",
    "evaluate",
    "load",
    "reference",
    "run",
    "run_batch",
]
