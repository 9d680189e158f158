"""What the diff's modules share: constants, the :class:`Executor` protocol, small helpers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from ..graph import Block, Tensor
from ..interpreter import Inputs, Source
from ..ops.facts import OperandNames

_CONST_OPS = {"CONST", "CONST_SHAPE"}
#: ``against`` values that run the same graph, and how reports name them.
_SAME_GRAPH = {"reference": "reference model", "interpreter": "interpreter"}
#: Operators not re-run for local checks (state lives outside the operator).
_NO_LOCAL_OPS = {"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "CUSTOM"}
#: Suffix of the renamed outputs in the batched local-check graph.
_LOCAL_SUFFIX = "__tv_local"
_FLOAT_DTYPES = {"FP64", "FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2", "FP6E2M3", "FP6E3M2", "FP4E2M1", "FP8UE8M0"}
INHERITED = "inherited"
_STATUS_ORDER = ["mismatch", "missing", INHERITED, "within_compliance", "exact", "unmatched"]

#: Names of the operands of operators whose extra inputs are parameters (declared with each op's
#: registration, see :mod:`tosa_verify.ops.facts`).
OPERAND_NAMES: Mapping[str, tuple[str, ...]] = OperandNames()


@runtime_checkable
class Executor(Protocol):
    """Another implementation of TOSA that :func:`diff` can compare (``engine=``).

    ``name`` labels it in reports; ``capture`` runs a graph and returns every tensor of its
    entry block by name, in the numpy form :func:`tosa_verify.run` uses (a
    :class:`~tosa_verify.errors.TosaError` when it cannot); ``run`` returns the outputs only
    (used to re-run a one-operator repro). ``vgf.VgfExecutor`` is one.

    >>> class Numpy:
    ...     name = "numpy"
    ...     def capture(self, graph, inputs): ...
    ...     def run(self, graph, inputs): ...
    >>> isinstance(Numpy(), Executor)
    True
    """

    name: str

    def capture(self, graph: Source, inputs: Inputs) -> Mapping[str, np.ndarray]:
        """Every tensor by name."""

    def run(self, graph: Source, inputs: Inputs) -> list[np.ndarray]:
        """The outputs in graph order."""


def _num(x: float) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return f"{x:.4g}"


def _short(value: object, limit: int = 16) -> str:
    if isinstance(value, list) and len(value) > limit:
        return "[" + ", ".join(str(v) for v in value[:limit]) + f", ... ({len(value)} values)]"
    return str(value)


def _jsonable(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decl(block: Block, name: str) -> Tensor | None:
    return block.tensors.get(name) or block.shapes.get(name)


def _same_graph_key(against: str) -> str:
    return next((k for k, v in _SAME_GRAPH.items() if v == against), "reference")
