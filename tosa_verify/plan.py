"""Execution plans: what running a block needs, worked out once per block instead of every run.

A :class:`BlockPlan` holds, for one :class:`~tosa_verify.graph.Block`:

* the initial environment: constant tensors, plus the values of *folded* operators (every input
  constant, a pure op), computed once with the ordinary op functions and every check they make;
* one :class:`Step` per remaining operator: its function (or the kernel its op's optional
  ``prepare`` returned, see :func:`tosa_verify.ops.registry.register_prepare`), its tensor
  declarations and working dtypes resolved, and the tensors whose last use it is (freed after it
  when nothing records the run);
* the checks that depend only on declarations (unknown op, undeclared tensor, a tensor used
  before it is produced, an output dimension < 1), done once here. A failing check does not
  raise here: it is kept on its step and raised when the run reaches that operator, so a run
  reports the same first error, at the same operator, as an operator-by-operator walk would.

Plans are cached on the block (see :func:`plan_for`); a block edited after its plan was built
(operators or constant data replaced) gets a new plan.

>>> plan = plan_for(load("model.tosa").main)     # doctest: +SKIP
>>> len(plan.steps) <= len(plan.block.operators)  # doctest: +SKIP
True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .dtypes import dtype_info
from .errors import TosaError, TosaUnsupportedError, TosaValidationError
from .graph import Block, Graph, Operator, Tensor, load
from .ops.registry import IMPURE, REGISTRY, OpCall, prepare_for

#: Operators a plan never folds even with constant inputs: they read or write run state
#: (variables, the running interpreter) or call sub-blocks. Op modules add theirs to
#: :data:`tosa_verify.ops.registry.IMPURE`.
_NEVER_FOLD = {"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "COND_IF", "WHILE_LOOP", "CUSTOM"}


@dataclass
class Step:
    """One operator of a plan, ready to call."""

    index: int
    operator: Operator
    fn: Callable[[OpCall], Sequence[np.ndarray]]
    inputs: list[str]
    input_decls: list[Tensor]
    output_decls: list[Tensor]
    #: (name, working dtype, declared shape) per output, checked after every call
    outputs: list[tuple[str, np.dtype, tuple[int, ...]]]
    #: a declaration-only error to raise before calling (unknown op, undeclared or unproduced
    #: input) or after a successful call (an output ERROR_IF)
    error_before: TosaError | None = None
    error_after: TosaError | None = None
    free: tuple[str, ...] = ()
    folded: bool = False


@dataclass
class BlockPlan:
    """Everything :meth:`Interpreter.run_block` needs for one block, computed once."""

    block: Block
    constants: dict[str, np.ndarray]
    #: variable tensors: (name, declaration), initialised per run from the carried state
    variables: list[tuple[str, Tensor]]
    steps: list[Step]  #: operators still to run (folded ones left out)
    all_steps: list[Step]  #: every operator, for the capture hook
    fingerprint: tuple = field(default=(), repr=False)


def _fingerprint(block: Block) -> tuple:
    """What a plan depends on that a caller could replace: operators, constants, op functions."""
    return (
        tuple(map(id, block.operators)),
        tuple(id(REGISTRY.get(op.op)) for op in block.operators),
        tuple(id(t.data) for t in block.tensors.values()),
        tuple(id(t.data) for t in block.shapes.values()),
        tuple(block.inputs),
    )


def plan_for(block: Block) -> BlockPlan:
    """The cached plan of ``block``, built on first use or when the block was edited since."""
    plan = block.__dict__.get("_plan")
    fingerprint = _fingerprint(block)
    if plan is None or plan.fingerprint != fingerprint:
        plan = build_plan(block)
        plan.fingerprint = fingerprint
        block.__dict__["_plan"] = plan
    return plan


def _validation_error(index: int, operator: Operator, message: str, names: Sequence[str],
                      condition: str = "") -> TosaValidationError:
    return TosaValidationError(f"operator {index} {operator.op}: {message}", op_index=index, op=operator.op,
                               tensors=tuple(names), **({"condition": condition} if condition else {}))


def build_plan(block: Block) -> BlockPlan:
    """Build the plan of ``block`` (see the module docstring); never raises for a bad graph."""
    decls: dict[str, Tensor] = {**block.shapes, **block.tensors}  # a tensor wins over a shape
    inputs = set(block.inputs)
    constants: dict[str, np.ndarray] = {}
    variables: list[tuple[str, Tensor]] = []
    for name, decl in {**block.shapes, **block.tensors}.items():
        if name in inputs:
            continue
        if decl.variable:
            variables.append((name, decl))
        elif decl.data is not None:
            constants[name] = decl.data
    available = set(constants) | inputs | {n for n, _ in variables}
    foldable = set(constants)  # names whose value is the same on every run
    steps: list[Step] = []
    for index, operator in enumerate(block.operators):
        step = _make_step(block, index, operator, decls, available, constants)
        steps.append(step)
        available.update(operator.outputs)
        if step.error_before is None and step.error_after is None and all(n in foldable for n in step.inputs) \
                and operator.op not in _NEVER_FOLD and operator.op not in IMPURE:
            values = _fold(step, constants)
            if values is not None:
                step.folded = True
                for (name, _, _), value in zip(step.outputs, values, strict=True):
                    constants[name] = value
                    foldable.add(name)
                continue
        # a produced value that is not constant overrides any constant of that name
        foldable.difference_update(operator.outputs)
        for name in operator.outputs:
            constants.pop(name, None)
    running = [s for s in steps if not s.folded]
    _set_frees(block, running)
    return BlockPlan(block, constants, variables, running, steps)


def _make_step(block: Block, index: int, operator: Operator, decls: dict[str, Tensor],
               available: set[str], constants: dict[str, np.ndarray]) -> Step:
    fn = REGISTRY.get(operator.op)
    missing = [n for n in (*operator.inputs, *operator.outputs) if n not in decls]
    input_decls = [decls[n] for n in operator.inputs if n in decls]
    output_decls = [decls[n] for n in operator.outputs if n in decls]
    step = Step(index, operator, fn, list(operator.inputs), input_decls, output_decls, [])
    if fn is None:
        step.error_before = TosaUnsupportedError(f"operator {index} {operator.op}: not supported by the interpreter")
        return step
    if missing:
        step.error_before = _validation_error(
            index, operator, f"tensor {missing[0]!r} is not declared in block {block.name!r}", missing[:1])
        return step
    unproduced = [n for n in operator.inputs if n not in available]
    if unproduced:
        step.error_before = _validation_error(
            index, operator, f"input tensor {unproduced[0]!r} is used before it is produced", unproduced[:1])
        return step
    for decl in output_decls:
        step.outputs.append((decl.name, dtype_info(decl.dtype).working, tuple(decl.shape)))
        if decl.dtype != "SHAPE" and any(d < 1 for d in decl.shape) and step.error_after is None:
            where = OpCall(index, operator, [], input_decls, output_decls)._where()
            condition = f"output {decl.name!r} has a dimension < 1 in {list(decl.shape)}"
            step.error_after = TosaValidationError(
                f"{where}: ERROR_IF({condition})", op_index=index, op=operator.op,
                tensors=tuple(t.name for t in (*input_decls, *output_decls)), condition=condition)
    prepare = prepare_for(operator.op)
    if prepare is not None:
        kernel = _prepared(step, prepare, constants)
        if kernel is not None:
            step.fn = kernel
    return step


def _prepared(step: Step, prepare, constants: dict[str, np.ndarray]):
    """The op's prepared kernel, or None (then the op function runs, checks and all, every time).

    ``prepare`` sees the constant inputs' values (None for the others: block inputs, even when
    declared with data, variables and computed tensors) and makes every check that depends on
    declarations, attributes and those constants; a failed check makes it decline, so the op
    function reports that error at run time, in order.
    """
    values = [constants.get(n) for n in step.inputs]
    call = OpCall(step.index, step.operator, values, step.input_decls, step.output_decls)
    try:
        return prepare(call)
    except TosaError:
        return None


def _fold(step: Step, constants: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """Run a step whose inputs are all constant; its outputs (read-only), or None if it fails."""
    call = OpCall(step.index, step.operator, [constants[n] for n in step.inputs], step.input_decls,
                  step.output_decls)
    try:
        results = list(step.fn(call))
    except Exception:  # noqa: BLE001  (the run raises it again, in order, with the usual wrapping)
        return None
    if len(results) != len(step.outputs):
        return None
    out = []
    for (_, working, shape), value in zip(step.outputs, results, strict=True):
        value = np.asarray(value)
        if value.dtype != working or value.shape != shape:
            return None
        if value.flags.writeable:
            value = value.view()
            value.flags.writeable = False  # shared by every run: nobody may change it in place
        out.append(value)
    return out


def _set_frees(block: Block, steps: list[Step]) -> None:
    """Give each step the tensors whose last use it is (block outputs are never freed)."""
    keep = set(block.outputs)
    last: dict[str, int] = {}
    for i, step in enumerate(steps):
        for name in step.inputs:
            last[name] = i
        for name in step.operator.outputs:
            last.setdefault(name, i)
            if last[name] < i:
                last[name] = i
    frees: dict[int, list[str]] = {}
    for name, i in last.items():
        if name not in keep:
            frees.setdefault(i, []).append(name)
    for i, step in enumerate(steps):
        step.free = tuple(frees.get(i, ()))


#: Graphs recently run from bytes, by those bytes (see :func:`cached_graph`).
_GRAPHS: OrderedDict[bytes, Graph] = OrderedDict()
_GRAPHS_LOCK = threading.Lock()
CACHE_GRAPHS = 8  #: at most this many graphs ...
CACHE_BYTES = 64 << 20  #: ... of at most this many flatbuffer bytes in all


def cached_graph(source) -> Graph:
    """``load(source)``, reusing the Graph (with its plans) of bytes that were run recently.

    For :func:`tosa_verify.run` only: the Graph never leaves the interpreter, so nobody can edit
    it, and the bytes are the key (equal bytes, equal graph). Paths and Graphs are not cached.

    >>> cached_graph(data) is cached_graph(bytes(data))   # doctest: +SKIP
    True
    """
    if not isinstance(source, (bytes, bytearray, memoryview)):
        return load(source)
    key = bytes(source)
    with _GRAPHS_LOCK:
        graph = _GRAPHS.get(key)
        if graph is not None:
            _GRAPHS.move_to_end(key)
            return graph
    graph = load(key)
    if len(key) <= CACHE_BYTES:
        with _GRAPHS_LOCK:
            _GRAPHS[key] = graph
            while len(_GRAPHS) > CACHE_GRAPHS or sum(map(len, _GRAPHS)) > CACHE_BYTES:
                _GRAPHS.popitem(last=False)
    return graph
