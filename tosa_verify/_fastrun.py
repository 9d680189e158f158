"""The short way through :func:`tosa_verify.run` for the common call: no capture, no variables.

On a graph of a few operators, what a run does besides the kernels (the layers from ``run`` down
to the hot loop: binding, the memory check, an interpreter, the block's set-up) is most of the
call. For a main block whose plan needs no run state (no variables, no control flow: nothing
that calls back into the interpreter), :class:`Runner` keeps all that a run derives from the
graph, once per verified graph (in :func:`tosa_verify.plan.run_cache`, dropped with the plans
on any edit), and does per run only what depends on the inputs and the budget in force:

* the inputs taken as they are when each is already a working array of the declared dtype and
  shape (:func:`~tosa_verify._runpath.bind_fast`); anything else returns None, and the general
  path converts them or refuses them with its errors;
* the memory budget check (:func:`~tosa_verify.budget.check_need`, the same error);
* the interpreter's hot loop over the plan's compiled steps, every kernel with its checks;
* the outputs in the caller's form.

>>> fast_run(graph, inputs, Interpreter)   # doctest: +SKIP
[array(...)]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._runpath import bind_fast, compiled_steps, quiet, run_io
from .budget import cached_graph_memory, check_need
from .graph import Graph
from .ops.registry import IMPURE
from .plan import _NEVER_FOLD, current_plan, run_cache


class Runner:
    """Everything a run of one verified graph's main block derives from the graph (see the
    module docstring); ``runner(inputs)`` gives the caller's outputs, or None when the inputs
    need the general binding."""

    __slots__ = ("io", "need", "constants", "names", "outputs", "compiled", "current", "interpreter_class",
                 "caller_outputs")

    def __init__(self, graph: Graph, plan, current: frozenset[int], interpreter_class: type,
                 caller_outputs: Callable) -> None:
        self.io = run_io(graph)
        self.need = cached_graph_memory(graph)
        self.constants = plan.constants
        self.names = graph.main.inputs
        self.outputs = graph.main.outputs
        self.compiled = compiled_steps(plan)
        # (the graph's run cache holds the runner: an interpreter kept here would refer back to
        # the graph, a cycle that keeps a dropped graph alive until the cyclic collector runs;
        # so each run makes its own, which costs a few attribute stores)
        self.current = current
        self.interpreter_class = interpreter_class
        self.caller_outputs = caller_outputs

    def __call__(self, graph: Graph, inputs) -> list[np.ndarray] | None:
        """The outputs of ``graph`` (the one this runner was made for) on ``inputs``."""
        io = self.io
        values = bind_fast(io, inputs)
        if values is None:
            return None
        check_need(*self.need)
        env = dict(self.constants)
        env.update(zip(self.names, values))  # noqa: B905 - bind_fast checked the count
        compiled = self.compiled
        interpreter = self.interpreter_class._verified(graph, self.current, None)
        interpreter.depth = 1  # (no variable, no control flow: only a main block runs)
        restore = quiet()  # as Interpreter.run_block: kernels run without floating-point warnings
        try:
            shared = compiled.lock.acquire(blocking=False)
            try:
                interpreter._run_compiled(compiled.entries, env, True, shared)
            finally:
                if shared:
                    compiled.lock.release()
        finally:
            restore()
        return self.caller_outputs([env[n] for n in self.outputs], io[2])


def fast_run(graph: Graph, current: frozenset[int], inputs, interpreter_class: type,
             caller_outputs: Callable) -> list[np.ndarray] | None:
    """The outputs of ``graph`` run on ``inputs`` by its :class:`Runner` (made on first use;
    ``current``: the graph's current blocks, from :func:`~tosa_verify.plan.current_blocks`); None
    when the graph or the inputs need the general path of :func:`tosa_verify.run`."""
    cache = run_cache(graph)
    runner = cache.get("runner", False)
    if runner is False:
        runner = cache["runner"] = _runner(graph, current, interpreter_class, caller_outputs)
    return None if runner is None else runner(graph, inputs)


def _runner(graph: Graph, current: frozenset[int], interpreter_class: type, caller_outputs: Callable) -> Runner | None:
    """The graph's :class:`Runner`, or None when its main block's plan needs run state or may
    not produce an output (the general path raises that error)."""
    block = graph.main
    plan = current_plan(block, graph)
    if plan.variables:
        return None
    stateful = _NEVER_FOLD | IMPURE
    produced = set(plan.constants) | set(block.inputs)
    for step in plan.steps:
        if step.operator.op in stateful:
            return None
        produced.update(step.operator.outputs)
    if not produced.issuperset(block.outputs):
        return None
    return Runner(graph, plan, current, interpreter_class, caller_outputs)
