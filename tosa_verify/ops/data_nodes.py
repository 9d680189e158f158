"""Data nodes (spec chapter "Data Nodes"): CONST, IDENTITY; and CUSTOM (chapter "Custom Operators")."""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from ..errors import TosaUnsupportedError
from .registry import OpCall, register


@register("CONST")
def const(call: OpCall) -> list[np.ndarray]:
    """CONST: the output tensor's serialized data.

    >>> # a CONST op's value is the data stored on its output tensor declaration
    """
    call.check_arity(0, 1)
    decl = call.output_decls[0]
    data = decl.data
    if data is None:
        call.fail(f"CONST output {decl.name!r} has no data")
    # (the loader decodes data to the working dtype; a Graph built or edited in code may not)
    working = dtype_info(decl.dtype).working
    if data.dtype != working:
        call.fail(f"CONST output {decl.name!r} holds {data.dtype} data; a {decl.dtype} tensor's values are {working}")
    return [data]


@register("IDENTITY")
def identity(call: OpCall) -> list[np.ndarray]:
    """IDENTITY: returns its input unchanged (same shape and dtype)."""
    call.check_arity(1, 1)
    call.error_if(call.in_dtype() != call.out_dtype(), "in_t != out_t")
    call.error_if(call.input_decls[0].shape != call.out_shape(), "shape(input1) != shape(output)")
    return [call.inputs[0]]


@register("CUSTOM")
def custom(call: OpCall) -> list[np.ndarray]:
    """CUSTOM: implementation defined, so never runnable here.

    The spec leaves a custom operator's meaning to the implementation named by ``domain_name``;
    an implementation that does not know the (domain, operator) pair cannot run the graph. The
    interpreter knows none, so it reports which one the graph needs.
    """
    operator_name = call.attrs.get("operator_name", "")
    domain_name = call.attrs.get("domain_name", "")
    raise TosaUnsupportedError(
        f"{call._where()}: CUSTOM operator {operator_name!r} of domain {domain_name!r} is "
        f"implementation defined; the interpreter implements no custom operators"
    )
