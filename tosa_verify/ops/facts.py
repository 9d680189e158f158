"""What the rest of the package needs to know about an operator, declared where it is registered.

tosa-tools keeps every fact about an op in one table (``TOSA_OP_LIST``); here each op module
passes its facts to :func:`tosa_verify.ops.registry.register` next to the implementation, and the
readers look them up in :data:`FACTS`:

=================  =========================================================================
``operands``       names of the operator's inputs as the spec lists them (``diff`` names the
                   parameter inputs of a diverging op with them)
``compliance``     how the TOSA compliance chapter judges a *float* result
                   (:func:`tosa_verify.compare.compliance_config`); None: EXACT
``kernel_size``    ``(operator, block) -> int | None``: the number of products per output
                   (KS of DOT_PRODUCT, ``n`` of REDUCE_PRODUCT)
``extensions``     TOSA extensions any graph using the op needs (:mod:`tosa_verify.profiles`)
``int16``          the op needs EXT-INT16 when the graph holds INT16 tensors
=================  =========================================================================

This module is a leaf (it imports nothing of the package), so the registry, ``compare`` and
``profiles`` can all read it.

>>> FACTS["ADD"].compliance.info_for("BF16")            # doctest: +SKIP
{'ulp': 1.0}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The float formats the compliance chapter's error modes apply to (TOSA 1.1 MX element types
#: excepted: they are judged with block-scaled rules, see ``dtypes`` of :class:`Compliance`).
FLOAT_DTYPES = frozenset({"FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2"})
#: TOSA 1.1 draft MX element types.
MX_DTYPES = frozenset({"FP6E2M3", "FP6E3M2", "FP4E2M1", "FP8UE8M0"})

KernelSize = Callable[[Any, Any], "int | None"]


@dataclass(frozen=True)
class Compliance:
    """The compliance mode of an op's float output and the mode's parameters.

    ``info`` is the mode's info dictionary (``ulp_info``, ``abs_error_info``, ...);
    ``by_dtype`` overrides entries of it for one output dtype; ``dtypes`` are the output dtypes
    the mode applies to (other dtypes are EXACT).

    >>> Compliance("ULP", {"ulp": 0.5}, {"BF16": {"ulp": 1.0}}).info_for("BF16")
    {'ulp': 1.0}
    >>> Compliance("ULP", {"ulp": 0.5}).applies_to("INT8")
    False
    """

    mode: str
    info: Mapping[str, Any] = field(default_factory=dict)
    by_dtype: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dtypes: frozenset[str] | None = FLOAT_DTYPES

    def info_for(self, dtype: str) -> dict[str, Any]:
        """The info dictionary for an output of ``dtype``."""
        return {**self.info, **self.by_dtype.get(dtype, {})}

    def applies_to(self, dtype: str) -> bool:
        """Whether an output of ``dtype`` is judged by this mode (else EXACT); ``dtypes=None``: any."""
        return self.dtypes is None or dtype in self.dtypes


#: A function of the operator's attributes that gives its compliance (None: EXACT); for ops whose
#: mode depends on an attribute (RESCALE's rounding mode).
ComplianceRule = Callable[[Mapping[str, Any]], "Compliance | None"]


@dataclass(frozen=True)
class OpFacts:
    """Everything but the implementation, for one TOSA op (see the module docstring)."""

    operands: tuple[str, ...] = ()
    compliance: Compliance | ComplianceRule | None = None
    kernel_size: KernelSize | None = None
    extensions: tuple[str, ...] = ()
    int16: bool = False

    def compliance_for(self, attrs: Mapping[str, Any]) -> Compliance | None:
        """The op's compliance for an operator with ``attrs``."""
        if self.compliance is None or isinstance(self.compliance, Compliance):
            return self.compliance
        return self.compliance(attrs)


#: TOSA op name -> its facts. Filled by :func:`tosa_verify.ops.registry.register`.
FACTS: dict[str, OpFacts] = {}
_NO_FACTS = OpFacts()


def facts_of(op_name: str) -> OpFacts:
    """The facts of ``op_name`` (empty facts for an op nobody registered).

    >>> facts_of("NOT_AN_OP").operands
    ()
    """
    return FACTS.get(op_name.upper(), _NO_FACTS)


def ops_with_extension(extension: str) -> frozenset[str]:
    """The registered ops that declare ``extension``."""
    return frozenset(name for name, f in FACTS.items() if extension in f.extensions)


class OperandNames(Mapping):
    """Read-only view ``op name -> operand names`` of the ops that declare them."""

    def __getitem__(self, op_name: str) -> tuple[str, ...]:
        names = facts_of(op_name).operands
        if not names:
            raise KeyError(op_name)
        return names

    def __iter__(self) -> Iterator[str]:
        return (name for name, f in FACTS.items() if f.operands)

    def __len__(self) -> int:
        return sum(1 for f in FACTS.values() if f.operands)


# --------------------------------------------------------------------------- constructors


def ulp(bound: float, **by_dtype: float) -> Compliance:
    """ULP mode with ``bound`` ULPs (``BF16=1.0`` gives another bound for one dtype)."""
    return Compliance("ULP", {"ulp": bound}, {d: {"ulp": b} for d, b in by_dtype.items()})


def abs_error(info: Mapping[str, Any] | None = None, **by_dtype: Mapping[str, Any]) -> Compliance:
    """ABS_ERROR mode with its ``abs_error_info`` (and overrides by output dtype)."""
    return Compliance("ABS_ERROR", dict(info or {}), by_dtype)


DOT_PRODUCT = Compliance("DOT_PRODUCT")
REDUCE_PRODUCT = Compliance("REDUCE_PRODUCT")
PRECOMPUTED = Compliance("PRECOMPUTED")


def _input_shape(op: Any, block: Any, i: int) -> tuple[int, ...] | None:
    if op is None or block is None or i >= len(op.inputs):
        return None
    decl = block.tensors.get(op.inputs[i])
    return decl.shape if decl is not None else None


def input_dims(i: int, dims: tuple[int, ...], rank: int, factor: int = 1) -> KernelSize:
    """Kernel size = ``factor`` x the product of dimensions ``dims`` of input ``i`` (of ``rank``).

    >>> class Op: inputs = ["x", "w"]
    >>> class T: shape = (8, 3, 3, 4)
    >>> class B: tensors = {"w": T()}
    >>> input_dims(1, (1, 2, 3), 4)(Op(), B())
    36
    """

    def kernel_size(op: Any, block: Any) -> int | None:
        shape = _input_shape(op, block, i)
        if shape is None or len(shape) != rank:
            return None
        return int(factor * np.prod([shape[d] for d in dims], dtype=np.int64))

    return kernel_size


def attr_product(name: str) -> KernelSize:
    """Kernel size = the product of the list attribute ``name`` (AVG_POOL2D's ``kernel``)."""

    def kernel_size(op: Any, block: Any) -> int | None:
        values = (op.attrs.get(name) or []) if op is not None else []
        return int(np.prod(values)) if values else None

    return kernel_size


def shape_input_product(i: int) -> KernelSize:
    """Kernel size = the product of the values of shape input ``i`` (a CONST_SHAPE)."""

    def kernel_size(op: Any, block: Any) -> int | None:
        if op is None or block is None or i >= len(op.inputs):
            return None
        decl = block.shapes.get(op.inputs[i]) or block.tensors.get(op.inputs[i])
        return int(np.prod(decl.data)) if decl is not None and decl.data is not None else None

    return kernel_size


def axis_dim(op: Any, block: Any) -> int | None:
    """Kernel size = input 0's dimension along the ``axis`` attribute (reductions)."""
    shape = _input_shape(op, block, 0)
    if shape is None:
        return None
    axis = int(op.attrs.get("axis", 0))
    return int(shape[axis]) if 0 <= axis < len(shape) else None


def rescale_inexact(attrs: Mapping[str, Any]) -> Compliance | None:
    """RESCALE's compliance: RESCALE_INEXACT (any dtype) for ``rounding_mode=INEXACT_ROUND``.

    >>> rescale_inexact({"rounding_mode": "INEXACT_ROUND"}).info_for("INT8")
    {'unsigned_data': False}
    """
    if attrs.get("rounding_mode") != "INEXACT_ROUND":
        return None
    return Compliance("RESCALE_INEXACT", {"unsigned_data": bool(attrs.get("output_unsigned", False))}, dtypes=None)
