"""Run a TOSA graph with the numpy operator registry.

The interpreter walks a block's operators in order, feeds each one its input values, checks the
results against the declared output tensors and stores them by name. What does not change from
run to run (declarations, checks on them, constant folding, prepared kernels, when a tensor can
be freed) comes from the block's :mod:`~tosa_verify.plan`, built once. Control-flow ops call back
into :meth:`Interpreter.run_block`; variable ops use :attr:`Interpreter.variables`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from . import ops as _ops  # noqa: F401  (imports every op family so the registry is full)
from ._fastrun import fast_run
from ._runpath import bind_fast, compiled_steps, quiet, run_io
from .budget import cached_graph_memory, check_need
from .dtypes import dtype_info, to_reference_form, to_working
from .errors import (
    TosaError,
    TosaInputError,
    TosaSizeError,
    TosaValidationError,
)
from .graph import Block, Graph, Operator
from .ops.registry import OpCall
from .ops.variable import carried_value
from .plan import Step, cached_graph, current_blocks, current_plan, plan_for, verify_graph

#: Called after each operator: (op index, operator, input values, output values).
CaptureHook = Callable[[int, Operator, list[np.ndarray], list[np.ndarray]], None]

Source = str | os.PathLike | bytes | Graph
Inputs = Sequence[np.ndarray] | Mapping[str, np.ndarray]


@dataclass
class RunResult:
    """Outputs in graph output order plus every tensor's value by name (capture mode)."""

    outputs: list[np.ndarray]
    tensors: dict[str, np.ndarray]


class Interpreter:
    """Executes one graph. Holds variable state across blocks of one run.

    >>> Interpreter(load("model.tosa")).run([x])   # doctest: +SKIP
    """

    def __init__(self, graph: Graph, hook: CaptureHook | None = None,
                 state: Mapping[str, np.ndarray] | None = None) -> None:
        # refuse a graph over the memory budget before anything runs; blocks with current plans
        self._setup(graph, verify_graph(graph), hook, state)

    @classmethod
    def _verified(cls, graph: Graph, current: frozenset[int],
                  state: Mapping[str, np.ndarray] | None) -> Interpreter:
        """An interpreter for a graph :func:`run` has verified (``current``: its current blocks)."""
        interpreter = cls.__new__(cls)
        interpreter._setup(graph, current, None, state)
        return interpreter

    def _setup(self, graph: Graph, current: frozenset[int], hook: CaptureHook | None,
               state: Mapping[str, np.ndarray] | None) -> None:
        self._current = current
        self.graph = graph
        self.hook = hook
        #: variable values carried in from an earlier run, by the spec's variable name
        self.state: Mapping[str, np.ndarray] = state or {}
        self.variables: dict[str, np.ndarray] = {}
        self.variable_decls: dict[str, object] = {}
        self.depth = 0

    def run_block(
        self, block: Block, values: Sequence[np.ndarray], *, record: dict[str, np.ndarray] | None = None
    ) -> list[np.ndarray]:
        """Run ``block`` on working-dtype input ``values``; return its outputs (working dtypes)."""
        if len(values) != len(block.inputs):
            raise TosaValidationError(
                f"block {block.name!r} takes {len(block.inputs)} inputs, got {len(values)}"
            )
        self.depth += 1
        if self.depth > 64:
            raise TosaValidationError("control flow nests deeper than 64 levels")
        try:
            if id(block) in self._current:
                plan = current_plan(block, self.graph)
            else:
                plan = plan_for(block, self.graph)
            env: dict[str, np.ndarray] = dict(plan.constants)
            env.update(zip(block.inputs, values))  # noqa: B905 - lengths checked above
            for name, decl in plan.variables:
                if (decl.variable_name or name) in self.state:
                    env[name] = carried_value(self.state[decl.variable_name or name], decl, decl.variable_name or name)
                elif decl.data is not None:
                    env[name] = decl.data
                else:
                    # A variable tensor without an initial value starts as zeros, as in
                    # tosa_reference_model (variable tensors initialised from the flatbuffer).
                    env[name] = np.zeros(decl.shape, dtype=dtype_info(decl.dtype).working)
            hook = self.hook if self.depth == 1 else None
            # inf/NaN data is legitimate: kernels run without numpy's floating-point warnings
            # (one errstate per block, not one per operator)
            restore = quiet()
            try:
                if hook is not None:
                    for step in plan.all_steps:
                        self._run_operator(step, env, False)
                else:
                    # Nothing recording the run: each tensor is dropped after its last use.
                    compiled = compiled_steps(plan)
                    shared = compiled.lock.acquire(blocking=False)
                    try:
                        self._run_compiled(compiled.entries, env, record is None, shared)
                    finally:
                        if shared:
                            compiled.lock.release()
            finally:
                restore()
            try:
                outputs = [env[n] for n in block.outputs]
            except KeyError:
                missing = [n for n in block.outputs if n not in env]
                raise TosaValidationError(
                    f"block {block.name!r}: output tensor(s) {missing} are never produced"
                ) from None
            if record is not None:
                record.update(env)
            return outputs
        finally:
            self.depth -= 1

    def _run_compiled(self, compiled: list[tuple], env: dict[str, np.ndarray], free: bool, shared: bool) -> None:
        """The hot loop over :func:`~tosa_verify._runpath.compiled_steps`: call each step and
        store its output (the checks of :meth:`_store` run in full only when a cheap comparison
        says something is off, or the step has more than one output or an output ERROR_IF).

        ``shared``: this run holds the plan's lock, so it fills each step's own OpCall instead of
        making one per step; the call keeps none of the run's arrays after its step."""
        for fn, get, arity, single, names, call, step in compiled:
            inputs = [get(env)] if arity == 1 else [*get(env)] if arity else []
            if shared:
                call.inputs, call.runtime, call._extra = inputs, self, None
            else:
                call = OpCall(call.index, call.operator, inputs, call.input_decls, call.output_decls, self)
            try:
                results = fn(call)
            except TosaError:
                raise
            except _CAUGHT as exc:
                raise _op_failure(step, call, exc) from exc
            if type(results) is not list:
                results = list(results)
            if shared:
                call.inputs = call.runtime = None
            if single is None or len(results) != 1:
                self._store(step, call, results, env)
            else:
                name, working, shape = single
                value = results[0]
                if type(value) is not np.ndarray or value.dtype != working or value.shape != shape:
                    self._store(step, call, results, env)
                else:
                    env[name] = value
            if free:
                for name in names:
                    env.pop(name, None)

    def _run_operator(self, step: Step, env: dict[str, np.ndarray], free: bool) -> None:
        """One step with the capture hook (the hook sees folded steps too)."""
        index, operator = step.index, step.operator
        if step.folded:  # computed when the plan was built; only the hook wants to see it
            self.hook(index, operator, [env[n] for n in step.inputs], [env[n] for n, _, _ in step.outputs])
            return
        if step.error_before is not None:
            raise step.error_before
        inputs = [env[n] for n in step.inputs]
        call = OpCall(index, operator, inputs, step.input_decls, step.output_decls, self)
        try:
            results = step.fn(call)
            if type(results) is not list:
                results = list(results)
        except TosaError:
            raise
        except _CAUGHT as exc:
            raise _op_failure(step, call, exc) from exc
        self._store(step, call, results, env)
        # Only main-block operators are reported (the caller passes no hook for sub-blocks):
        # sub-block (COND_IF/WHILE_LOOP) operators have their own indices and tensor names.
        if self.hook is not None and self.depth == 1:
            self.hook(index, operator, inputs, [env[n] for n, _, _ in step.outputs])
        if free:
            for name in step.free:
                env.pop(name, None)

    @staticmethod
    def _store(step: Step, call: OpCall, results: list, env: dict[str, np.ndarray]) -> None:
        """Check an operator's results against its declared outputs and store them."""
        if len(results) != len(step.outputs):
            call.fail(f"produced {len(results)} outputs, declared {len(step.outputs)}")
        for (name, working, shape), value in zip(step.outputs, results, strict=True):
            if type(value) is not np.ndarray:
                value = np.asarray(value)
            if value.dtype != working:
                raise RuntimeError(
                    f"internal error: {call._where()} returned {value.dtype} for {working} tensor {name!r}"
                )
            if step.error_after is not None:
                raise step.error_after
            if value.shape != shape:
                call.fail(f"shape of output {name!r} is {list(value.shape)}, declared {list(shape)}")
            env[name] = value


#: Exceptions of an op function that mean a malformed graph (or too little memory), reported as
#: one clear error by :func:`_op_failure`.
_CAUGHT = (MemoryError, ValueError, IndexError, TypeError, OverflowError, ZeroDivisionError, KeyError)


def _op_failure(step: Step, call: OpCall, exc: Exception) -> TosaError:
    """The error to raise for a Python exception out of an operator's function."""
    if isinstance(exc, MemoryError):
        # Declared shapes pass the element limit at load time, yet an operator's working
        # arrays can still exceed the machine's memory: report it like any oversized tensor.
        return TosaSizeError(
            f"{call._where()}: out of memory while computing the operator "
            f"(outputs {[list(d.shape) for d in step.output_decls]})"
        )
    # A malformed graph that slipped past the ERROR_IF checks must still fail cleanly.
    detail = " ".join(str(exc).split())  # numpy messages can span lines; ours are one line
    operator = step.operator
    return TosaValidationError(
        f"{call._where()}: invalid operator ({type(exc).__name__}: {detail})",
        op_index=step.index,
        op=operator.op,
        tensors=tuple(operator.inputs + operator.outputs),
    )


def bind_inputs(block: Block, inputs: Inputs) -> list[np.ndarray]:
    """Match the caller's inputs to ``block.inputs`` and convert them to working dtypes.

    Raises :class:`TosaInputError` naming the tensor on a count, name, shape or dtype mismatch.
    """
    names = block.inputs
    if isinstance(inputs, np.ndarray):  # (iterating it would take its rows for the inputs)
        raise TosaInputError(
            f"inputs: a list/tuple/dict of arrays, not an ndarray (for a single input pass [x]; "
            f"the graph takes {len(names)} input(s) {names})"
        )
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise TosaInputError(f"input names do not match the graph: missing {missing}, unknown {unknown}")
        ordered = [inputs[n] for n in names]
    else:
        try:
            ordered = list(inputs)
        except TypeError:
            raise TosaInputError(
                f"inputs must be a list of arrays or a dict by tensor name, not {type(inputs).__name__}"
            ) from None
        if len(ordered) != len(names):
            raise TosaInputError(f"graph takes {len(names)} input(s) {names}, got {len(ordered)}")
    values = []
    for name, value in zip(names, ordered, strict=True):
        decl = block.tensors.get(name) or block.shapes.get(name)
        if decl is None:
            raise TosaInputError(f"graph input {name!r} is not declared")
        arr = to_working(value, decl.dtype, what=f"input {name!r}")  # a pair when block scaled
        if tuple(arr.shape) != tuple(decl.shape):
            raise TosaInputError(
                f"input {name!r}: shape {list(arr.shape)} does not match the declared {list(decl.shape)}"
            )
        values.append(arr)
    return values


def run(source: Source, inputs: Inputs, *, capture: bool = False,
        variables: dict[str, np.ndarray] | None = None) -> list[np.ndarray] | RunResult:
    """Run a TOSA graph on numpy inputs with the pure-numpy interpreter.

    ``inputs`` is a list (or tuple) in graph input order or a dict by tensor name, even for a
    graph of one input: a bare ndarray is refused with a :class:`TosaInputError` (pass ``[x]``),
    never taken row by row as a list of inputs. Returns the outputs in
    graph output order, in the numpy dtypes ``tosa_reference_model.run`` uses. With
    ``capture=True`` returns a :class:`RunResult` whose ``.tensors`` maps every tensor name to
    its value.

    Variable tensors start from their initial value (or zeros) on every run, as in
    ``tosa_reference_model.run``. To carry state from one run to the next, as a deployed
    stateful graph does, pass the same ``variables`` dict each time: variables named in it
    start from its values, and after the run it holds every variable's final value.

    >>> import numpy as np, tosa_verify
    >>> outs = tosa_verify.run("add.tosa", [np.ones((1, 4), np.int32)] * 2)   # doctest: +SKIP
    >>> state = {}
    >>> for frame in frames:                                # doctest: +SKIP
    ...     y = tosa_verify.run("streaming.tosa", [frame], variables=state)
    """
    graph = cached_graph(source)
    current = current_blocks(graph)  # (the graph-only work of a run is cached with its plans)
    if not capture and variables is None:
        outputs = fast_run(graph, current, inputs, Interpreter, _caller_outputs)
        if outputs is not None:
            return outputs
    block = graph.main
    io = run_io(graph)
    values = bind_fast(io, inputs) or bind_inputs(block, inputs)
    # refuse a graph over the memory budget before anything runs (after the inputs' checks)
    check_need(*cached_graph_memory(graph))
    record: dict[str, np.ndarray] | None = {} if capture or variables is not None else None
    interpreter = Interpreter._verified(graph, current, variables)
    outputs = interpreter.run_block(block, values, record=record)
    if variables is not None:
        _keep_variables(block, interpreter, record, variables)
    outputs = _caller_outputs(outputs, io[2])
    if not capture:
        return outputs
    tensors = {}
    for name, value in record.items():
        decl = block.tensors.get(name) or block.shapes.get(name)
        tensors[name] = to_reference_form(value, decl.dtype) if decl is not None else value
    return RunResult(outputs=outputs, tensors=tensors)


def _caller_outputs(outputs: list[np.ndarray], conversions: list[tuple]) -> list[np.ndarray]:
    """The outputs as the caller gets them (see :func:`~tosa_verify._runpath.run_io`): in their
    reference form, and a copy of any constant output, which is shared with the graph (and the
    next run). A plain loop: a generator and a comprehension cost more on a one-output graph.

    >>> _caller_outputs([np.zeros(2, np.int8)], [("y", "INT8", True)])[0].dtype
    dtype('int8')
    """
    result = []
    for value, (_, dtype, plain) in zip(outputs, conversions):  # noqa: B905 - one value per output
        if not value.flags.writeable:
            value = value.copy()
        result.append(value if plain else to_reference_form(value, dtype))
    return result


def _keep_variables(block: Block, interpreter: Interpreter, env: Mapping[str, np.ndarray],
                    variables: dict[str, np.ndarray]) -> None:
    """Store every variable's value at the end of a run into ``variables`` (by variable name).

    Variable-op graphs keep state in ``interpreter.variables``; graphs in the serializer's
    IDENTITY form keep it in the variable tensor itself.
    """
    for name, decl in block.tensors.items():
        if decl.variable and name in env:
            variables[decl.variable_name or name] = np.array(env[name], copy=True)
    for name, value in interpreter.variables.items():
        variables[name] = np.array(value, copy=True)
