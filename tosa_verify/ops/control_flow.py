"""Control flow operators (spec chapter "Control Flow Operators"): COND_IF, WHILE_LOOP.

Both name their sub-graphs by attribute (``then_graph``/``else_graph``, ``cond_graph``/
``body_graph``); the name is a basic block or region of the same flatbuffer, found with
:meth:`tosa_verify.graph.Graph.block` and run with :meth:`Interpreter.run_block`.

Every ERROR_IF of the spec pseudocode is checked before anything runs, for both sub-graphs,
because the spec states them about the graph, not about the branch taken.
"""

from __future__ import annotations

import numpy as np

from ..budget import charge
from ..errors import TosaError, TosaFormatError, TosaUnsupportedError, TosaValidationError
from ..graph import Block, Tensor
from .registry import OpCall, register

#: MAX_NESTING of the TOSA level "none" (tosa.xml v1.0.2), the level tosa_reference_model.run uses
#: by default. The interpreter's own recursion guard (Interpreter.run_block) may stop earlier.
MAX_NESTING = 256

#: WHILE_LOOP iterations we run before giving up. The spec has no bound; a graph whose condition
#: never turns false would otherwise hang the caller, so we stop with a clear error instead. At
#: roughly 0.3 ms per iteration of a small body this is about half a minute; raise it (module
#: attribute) for graphs that really loop longer.
MAX_LOOP_ITERATIONS = 100_000

#: (shape, dtype) of each tensor of a list: what the spec's tensor_list_shape compares.
ListSignature = list[tuple[tuple[int, ...], str]]


def _signature(decls: list[Tensor]) -> ListSignature:
    """The (shape, dtype) list of tensor declarations.

    The spec compares shapes; dtypes are compared too because a sub-graph whose interface dtype
    differs from the operator's tensors cannot be run on them (the values would be misread).
    """
    return [(tuple(d.shape), d.dtype) for d in decls]


def _show(signature: ListSignature) -> str:
    """A short readable form of a list signature, e.g. ``[INT8[2, 3], BOOL[]]``."""
    return "[" + ", ".join(f"{dtype}{list(shape)}" for shape, dtype in signature) + "]"


def _sub_graph(call: OpCall, attr: str) -> Block:
    """The basic block named by attribute ``attr``; a missing one is an invalid graph."""
    name = call.attrs.get(attr, "")
    try:
        return call.runtime.graph.block(name)
    except TosaFormatError:
        call.fail(f"{attr} {name!r} names no basic block or region of the graph")
        raise AssertionError from None  # unreachable: error_if raised


def _interface(call: OpCall, block: Block, names: list[str], what: str) -> list[Tensor]:
    """Declarations of a sub-graph's inputs or outputs (``what``), each of which must exist."""
    decls = []
    for name in names:
        decl = block.tensors.get(name) or block.shapes.get(name)
        if decl is None:
            call.fail(f"{what} {name!r} of sub-graph {block.name!r} is not declared")
        decls.append(decl)
    return decls


def _check_lists_match(call: OpCall, mine: ListSignature, block: Block, theirs: ListSignature, condition: str) -> None:
    """ERROR_IF(condition) when the operator's tensor list and the sub-graph's interface differ."""
    if mine != theirs:
        call.fail(f"{condition}: {_show(mine)} vs {_show(theirs)} of sub-graph {block.name!r}")


def _check_nesting(call: OpCall) -> None:
    """ERROR_IF(tosa_nesting_depth >= MAX_NESTING).

    The interpreter counts the main block as depth 1, so the control-flow nesting depth of the
    operator being run is one less.
    """
    nesting = call.runtime.depth - 1
    if nesting >= MAX_NESTING:
        call.fail(f"tosa_nesting_depth {nesting} >= MAX_NESTING {MAX_NESTING}")


def _run_sub_graph(call: OpCall, block: Block, values: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``block``; an error inside it is re-raised as this operator's, naming the sub-graph.

    Callers (the op-by-op diff, the capture hook) index operators of the main block, so a
    failure deep inside a sub-graph must point at the control-flow operator that ran it. Nested
    sub-graphs add to one path (``'A' > 'B'``) rather than repeating every operator.
    """
    try:
        charge(call, block)  # the run's execution budget, shared by every nesting level
        return call.runtime.run_block(block, values)
    except TosaError as exc:
        path = (block.name, *getattr(exc, "sub_graph_path", ()))
        inner = getattr(exc, "inner_message", str(exc))
        message = f"{call._where()}: in sub-graph {' > '.join(map(repr, path))}: {inner}"
        if isinstance(exc, TosaValidationError):  # also TosaRequireError
            error = type(exc)(message, op_index=call.index, op=call.op, tensors=exc.tensors, condition=exc.condition)
        else:
            error = type(exc)(message)
        error.sub_graph_path, error.inner_message = path, inner
        raise error from exc


@register("COND_IF", extensions=("EXT-CONTROLFLOW",))
def cond_if(call: OpCall) -> list[np.ndarray]:
    """COND_IF: run ``then_graph`` when the single-element bool condition is true, else ``else_graph``."""
    call.error_if(len(call.inputs) < 1, "COND_IF has no condition input")
    _check_nesting(call)
    condition_decl = call.input_decls[0]
    if condition_decl.dtype != "BOOL":
        call.fail(f"condition is {condition_decl.dtype}, not bool_t")
    if condition_decl.size != 1:
        call.fail(f"tensor_size(shape) != 1 for condition shape {list(condition_decl.shape)}")

    then_graph = _sub_graph(call, "then_graph")
    else_graph = _sub_graph(call, "else_graph")
    inputs = _signature(call.input_decls[1:])
    outputs = _signature(call.output_decls)
    for block in (then_graph, else_graph):
        block_in = _signature(_interface(call, block, block.inputs, "input"))
        block_out = _signature(_interface(call, block, block.outputs, "output"))
        _check_lists_match(call, inputs, block, block_in, "tensor_list_shape(input_list) != tosa_input_shape(graph)")
        _check_lists_match(call, outputs, block, block_out, "tensor_list_shape(output_list) != tosa_output_shape(graph)")

    branch = then_graph if bool(np.asarray(call.inputs[0]).reshape(-1)[0]) else else_graph
    return _run_sub_graph(call, branch, call.inputs[1:])


def _check_while_interfaces(call: OpCall, cond_graph: Block, body_graph: Block) -> None:
    """Every ERROR_IF of WHILE_LOOP relating the operator's lists and its two sub-graphs."""
    inputs = _signature(call.input_decls)
    if inputs != _signature(call.output_decls):
        call.fail(f"tensor_list_shape(input_list) != tensor_list_shape(output_list): " f"{_show(inputs)} vs {_show(_signature(call.output_decls))}")
    cond_in = _signature(_interface(call, cond_graph, cond_graph.inputs, "input"))
    body_in = _signature(_interface(call, body_graph, body_graph.inputs, "input"))
    body_out = _signature(_interface(call, body_graph, body_graph.outputs, "output"))
    _check_lists_match(call, inputs, cond_graph, cond_in, "tensor_list_shape(input_list) != tosa_input_shape(cond_graph)")
    _check_lists_match(call, inputs, body_graph, body_in, "tensor_list_shape(input_list) != tosa_input_shape(body_graph)")
    _check_lists_match(call, inputs, body_graph, body_out, "tensor_list_shape(input_list) != tosa_output_shape(body_graph)")

    cond_out = _interface(call, cond_graph, cond_graph.outputs, "output")
    if len(cond_out) != 1:
        call.fail(f"cond_graph {cond_graph.name!r} has {len(cond_out)} outputs, not one condition")
    if cond_out[0].size != 1:
        call.fail(f"tensor_size(tosa_output_shape(cond_graph)) != 1: shape {list(cond_out[0].shape)}")
    if cond_out[0].dtype != "BOOL":
        call.fail(f"tosa_output_type(cond_graph) != bool_t: {cond_out[0].dtype}")


@register("WHILE_LOOP", extensions=("EXT-CONTROLFLOW",))
def while_loop(call: OpCall) -> list[np.ndarray]:
    """WHILE_LOOP: run ``body_graph`` on the tensor list while ``cond_graph`` yields true."""
    _check_nesting(call)
    cond_graph = _sub_graph(call, "cond_graph")
    body_graph = _sub_graph(call, "body_graph")
    _check_while_interfaces(call, cond_graph, body_graph)

    values = list(call.inputs)
    iterations = 0
    while _condition(call, cond_graph, values):
        if iterations >= MAX_LOOP_ITERATIONS:
            raise TosaUnsupportedError(
                f"{call._where()}: WHILE_LOOP still running after {MAX_LOOP_ITERATIONS} iterations "
                f"(interpreter limit tosa_verify.ops.control_flow.MAX_LOOP_ITERATIONS); "
                f"cond_graph {cond_graph.name!r} may never become false"
            )
        values = _run_sub_graph(call, body_graph, values)
        iterations += 1
    return values


def _condition(call: OpCall, cond_graph: Block, values: list[np.ndarray]) -> bool:
    """Run ``cond_graph`` on the current list and return its single bool value."""
    (result,) = _run_sub_graph(call, cond_graph, values)
    return bool(np.asarray(result).reshape(-1)[0])
