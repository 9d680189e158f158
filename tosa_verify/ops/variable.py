"""Variable operators (spec chapter "Variable Operators"): VARIABLE, VARIABLE_WRITE, VARIABLE_READ.

How variables look in a TOSA 1.0 flatbuffer
-------------------------------------------
The flatbuffer attributes of the three ops are empty tables, so the spec's ``name``, ``var_shape``,
``type`` and ``initial_value`` travel on a *variable tensor*: a block tensor with
``variable = true``, ``variable_name`` (the spec's ``name``; the tensor name when empty), its
declared shape and dtype, and its ``data`` as the initial value (absent = no initial value).

The official MLIR serializer (``tosa-opt --tosa-serialize``) never emits the three ops: it keeps
the variable tensor, drops VARIABLE, and lowers VARIABLE_READ / VARIABLE_WRITE to IDENTITY from /
to the variable tensor. ``tosa_reference_model`` (tosa-tools 2026.8.0) runs that form (a variable
tensor without data starts as zeros) and rejects the three op codes as unsupported. The
interpreter runs the lowered form through IDENTITY and :meth:`Interpreter.run_block`; this module
implements the op codes themselves, per the spec pseudocode, with the operand layout that mirrors
the lowering:

================  =======================  ====================
op                inputs                   outputs
================  =======================  ====================
VARIABLE          ``[]`` or ``[var]``      ``[var]`` or ``[]``
VARIABLE_WRITE    ``[value]``              ``[var]``
                  or ``[var, value]``      or ``[]``
                  (either order)
VARIABLE_READ     ``[var]``                ``[value]``
================  =======================  ====================

``var`` is the variable tensor (the operand declared ``variable = true``). Variable state lives in
``call.runtime.variables`` (name -> value) and ``call.runtime.variable_decls`` (name ->
:class:`VariableState`, the spec's ``is_written``/``seen`` flags), both per interpreter run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import dtype_info, to_working
from ..errors import TosaInputError
from ..graph import Tensor
from .registry import OpCall, register

#: in_t / out_t of the three ops (tosa.xml v1.0.2: signed 8, fp16, fp32).
VARIABLE_TYPES = ("INT8", "FP16", "FP32")


@dataclass
class VariableState:
    """The spec's variable tensor record, without its data (kept in ``runtime.variables``)."""

    shape: tuple[int, ...]
    dtype: str
    is_written: bool = False
    seen: bool = False


def _name(decl: Tensor) -> str:
    """The spec's ``name`` of a variable tensor: its variable_name, else its tensor name."""
    return decl.variable_name or decl.name


def _variable_operand(call: OpCall, candidates: list[Tensor]) -> Tensor:
    """The variable tensor among ``candidates``: the one declared variable, else the only one."""
    marked = [d for d in candidates if d.variable]
    if len(marked) == 1:
        return marked[0]
    if len(marked) > 1:
        call.fail(f"{len(marked)} operands are variable tensors, expected one")
    call.error_if(len(candidates) != 1, "no operand is a variable tensor (TosaTensor.variable)")
    return candidates[0]


def _check_type(call: OpCall, dtype: str, what: str) -> None:
    """ERROR_IF the variable element type is not one the spec supports."""
    if dtype not in VARIABLE_TYPES:
        call.fail(f"{what} {dtype} not in {list(VARIABLE_TYPES)}")



def carried_value(value: np.ndarray, decl: Tensor, name: str) -> np.ndarray:
    """A copy of the caller's saved state ``value`` for variable ``name`` in its working dtype.

    Saved state comes from outside (``run(variables=...)``, ``tosa-verify run --variables``), so
    a wrong dtype or shape is the caller's input error, named after the variable.

    >>> from tosa_verify.graph import Tensor
    >>> carried_value(np.zeros(2, np.int8), Tensor("v", (2,), "INT8"), "v").dtype
    dtype('int8')
    """
    what = f"saved state of variable {name!r}"
    arr = np.array(to_working(np.asarray(value), decl.dtype, what=what), copy=True)
    if tuple(arr.shape) != tuple(decl.shape):
        raise TosaInputError(f"{what}: shape {list(arr.shape)} does not match the declared {list(decl.shape)}")
    return arr

@register("VARIABLE", extensions=("EXT-VARIABLE",))
def variable(call: OpCall) -> list[np.ndarray]:
    """VARIABLE: declare (allocate and maybe initialise) a variable tensor once per run."""
    call.error_if(len(call.inputs) + len(call.output_decls) != 1, "VARIABLE takes exactly one variable tensor operand")
    decl = _variable_operand(call, [*call.input_decls, *call.output_decls])
    _check_type(call, decl.dtype, "var_t")
    name = _name(decl)
    state = call.runtime.variable_decls.get(name)
    if state is None:
        state = VariableState(shape=tuple(decl.shape), dtype=decl.dtype)
        # Spec: uninitialised variable data is undefined; zeros keep our runs reproducible, and
        # VARIABLE_READ REQUIREs is_written anyway.
        value = np.zeros(decl.shape, dtype=dtype_info(decl.dtype).working)
        carried = getattr(call.runtime, "state", {})
        if name in carried:  # state carried in from an earlier run (tosa_verify.run(variables=...))
            value = carried_value(carried[name], decl, name)
            state.is_written = True
        elif decl.data is not None:
            # initial_value shares the declaration, so REQUIRE(var_t == in_t) and
            # REQUIRE(var_shape == shape) hold by construction.
            value = np.array(decl.data, copy=True)
            state.is_written = True
        call.runtime.variables[name] = value
        call.runtime.variable_decls[name] = state
    else:
        call.require(not state.seen, f"variable {name!r} is declared only once per graph execution")
    state.seen = True
    # With the output layout the variable tensor is also an ordinary block value.
    return [call.runtime.variables[name]] if call.output_decls else []


@register("VARIABLE_WRITE", extensions=("EXT-VARIABLE",))
def variable_write(call: OpCall) -> list[np.ndarray]:
    """VARIABLE_WRITE: store the input tensor into the named variable."""
    call.error_if(
        len(call.inputs) + len(call.output_decls) != 2,
        "VARIABLE_WRITE takes one input value and one variable tensor operand",
    )
    if call.output_decls:
        decl, value_index = _variable_operand(call, call.output_decls), 0
        call.error_if(len(call.inputs) != 1, "VARIABLE_WRITE with a variable output takes one input")
    else:
        # Both operands are inputs: the variable is the flagged one, the value the other.
        decl = _variable_operand(call, call.input_decls)
        value_index = 1 if call.input_decls[0] is decl else 0
    value_decl = call.input_decls[value_index]
    _check_type(call, value_decl.dtype, "in_t")
    name = _name(decl)
    state = _lookup(call, name)
    call.require(state.seen, f"variable {name!r} is declared by VARIABLE before it is written")
    call.require(state.shape == tuple(value_decl.shape), f"variable {name!r} shape {list(state.shape)} == input shape {list(value_decl.shape)}")
    call.require(state.dtype == value_decl.dtype, f"variable {name!r} type {state.dtype} == in_t {value_decl.dtype}")
    value = np.array(call.inputs[value_index], copy=True)
    call.runtime.variables[name] = value
    state.is_written = True
    # Output layout: the variable tensor also carries the new value for later IDENTITY readers.
    return [value] if call.output_decls else []


@register("VARIABLE_READ", extensions=("EXT-VARIABLE",))
def variable_read(call: OpCall) -> list[np.ndarray]:
    """VARIABLE_READ: the current value of the named variable."""
    call.check_arity(1, 1)
    decl = _variable_operand(call, call.input_decls)
    out = call.output_decls[0]
    _check_type(call, out.dtype, "out_t")
    name = _name(decl)
    state = _lookup(call, name)
    call.require(state.is_written, f"variable {name!r} has been written (initial value or VARIABLE_WRITE)")
    call.require(state.shape == tuple(out.shape), f"variable {name!r} shape {list(state.shape)} == output shape {list(out.shape)}")
    call.require(state.dtype == out.dtype, f"variable {name!r} type {state.dtype} == out_t {out.dtype}")
    return [np.array(call.runtime.variables[name], copy=True)]


def _lookup(call: OpCall, name: str) -> VariableState:
    """variable_tensor_lookup(name), with REQUIRE(variable_tensor != NULL)."""
    state = call.runtime.variable_decls.get(name)
    call.require(state is not None, f"variable {name!r} is declared by a VARIABLE operator")
    return state
