"""What the interpreter's per-run path derives once per graph or plan, for a run with few calls.

A run of a loaded graph repeats work that depends only on the graph: which inputs can be taken
as they are, which outputs need converting, each step's attributes. This module computes those
once (kept with the graph's verified state, see :func:`tosa_verify.plan.run_cache`, or on the
plan) so :func:`tosa_verify.interpreter.run` does only the per-run checks: the caller's arrays
against the declarations (anything off goes the general way, with its errors), the memory budget
and every kernel call.

>>> io = run_io(graph)                      # doctest: +SKIP
>>> values = bind_fast(io, [x]) or bind_inputs(graph.main, [x])   # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from operator import itemgetter

import numpy as np

from .dtypes import plain_working
from .graph import Graph
from .ops.registry import OpCall
from .plan import BlockPlan, Step, run_cache

try:  # numpy >= 2 keeps the floating-point error state in a context variable
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

    _IGNORE = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # another numpy: its public errstate
    _extobj_contextvar = None


def quiet() -> Callable[[], None]:
    """Turn numpy's floating-point warnings off until the returned function is called (what
    ``np.errstate(all="ignore")`` does, without building its state object on every run).

    >>> restore = quiet(); ...; restore()   # doctest: +SKIP
    """
    if _extobj_contextvar is None:
        context = np.errstate(all="ignore")
        context.__enter__()
        return lambda: context.__exit__(None, None, None)
    token = _extobj_contextvar.set(_IGNORE)
    return lambda: _extobj_contextvar.reset(token)


def run_io(graph: Graph) -> tuple:
    """For the graph's main block: ``(names, checks, outputs)``: input names; per input
    ``(working dtype, shape)`` or None (always the general binding); per output ``(name, dtype,
    plain)``. Kept in :func:`~tosa_verify.plan.run_cache` (call after
    :func:`~tosa_verify.plan.current_blocks`)."""
    cache = run_cache(graph)
    io = cache.get("io")
    if io is None:
        block = graph.main
        checks = []
        for name in block.inputs:
            decl = block.tensors.get(name) or block.shapes.get(name)
            working = None if decl is None else plain_working(decl.dtype)
            checks.append(None if working is None else (working, tuple(decl.shape)))
        outputs = []
        for name in block.outputs:
            decl = block.tensors.get(name) or block.shapes.get(name)
            # (an undeclared output is never produced: run_block raises before any conversion)
            outputs.append((name, None, True) if decl is None else
                           (name, decl.dtype, plain_working(decl.dtype) is not None))
        io = cache["io"] = (tuple(block.inputs), checks, outputs)
    return io


def bind_fast(io: tuple, inputs) -> list[np.ndarray] | None:
    """The inputs as working arrays when each is already one (an ndarray of the declared dtype
    and shape, in order or by name); None otherwise, for :func:`bind_inputs` to convert or
    refuse with its errors."""
    names, checks, _ = io
    if type(inputs) is dict:
        if len(inputs) != len(names):
            return None
        try:
            inputs = [inputs[n] for n in names]
        except KeyError:
            return None
    elif type(inputs) not in (list, tuple) or len(inputs) != len(names):
        return None
    for value, check in zip(inputs, checks):  # noqa: B905 - lengths checked
        if check is None or type(value) is not np.ndarray or value.dtype != check[0] or value.shape != check[1]:
            return None
    return inputs if type(inputs) is list else list(inputs)


class CompiledSteps:
    """A plan's steps as flat tuples for the interpreter's hot loop (see :func:`compiled_steps`),
    with one :class:`OpCall` per step that a run may fill in place of making a new one, when it
    holds :attr:`lock` (another thread running the same plan makes its own)."""

    __slots__ = ("entries", "lock")

    def __init__(self, entries: list[tuple]) -> None:
        self.entries = entries
        self.lock = threading.Lock()


def compiled_steps(plan: BlockPlan) -> CompiledSteps:
    """The plan's steps for the interpreter's hot loop, made on first use.

    Each entry: ``(fn, get, arity, single, free, call, step)``; ``get(env)`` gives the input
    value (arity 1) or values (arity 2: two or more); ``single`` is the ``(name, working dtype,
    shape)`` of a step's only output, or None when its results go through the interpreter's full
    checks (several outputs, an output ERROR_IF); ``call`` the step's reusable :class:`OpCall`
    (index, operator and declarations set). A step with a declaration error reads no input and
    raises that error when called.

    >>> [entry[6].index for entry in compiled_steps(plan).entries]   # doctest: +SKIP
    [0, 2, 3]
    """
    compiled = plan.__dict__.get("_compiled")
    if compiled is None:
        compiled = plan.__dict__["_compiled"] = CompiledSteps([_compiled(s) for s in plan.steps])
    return compiled


def _compiled(step: Step) -> tuple:
    call = OpCall(step.index, step.operator, [], step.input_decls, step.output_decls)
    if step.error_before is not None:
        return (_raiser(step.error_before), None, 0, None, step.free, call, step)
    single = step.outputs[0] if len(step.outputs) == 1 and step.error_after is None else None
    get = itemgetter(*step.inputs) if step.inputs else None
    return (step.fn, get, min(len(step.inputs), 2), single, step.free, call, step)


def _raiser(error: Exception) -> Callable:
    def raise_error(call: object) -> list:
        raise error

    return raise_error
