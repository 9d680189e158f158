"""Data nodes (spec chapter "Data Nodes"): CONST, IDENTITY."""

from __future__ import annotations

import numpy as np

from .registry import OpCall, register


@register("CONST")
def const(call: OpCall) -> list[np.ndarray]:
    """CONST: the output tensor's serialized data.

    >>> # a CONST op's value is the data stored on its output tensor declaration
    """
    call.check_arity(0, 1)
    decl = call.output_decls[0]
    call.error_if(decl.data is None, f"CONST output {decl.name!r} has no data")
    return [decl.data]


@register("IDENTITY")
def identity(call: OpCall) -> list[np.ndarray]:
    """IDENTITY: returns its input unchanged (same shape and dtype)."""
    call.check_arity(1, 1)
    call.error_if(call.in_dtype() != call.out_dtype(), "in_t != out_t")
    call.error_if(call.input_decls[0].shape != call.out_shape(), "shape(input1) != shape(output)")
    return [call.inputs[0]]
