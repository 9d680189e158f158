"""Execution plans: what running a block needs, worked out once per block instead of every run.

A :class:`BlockPlan` holds, for one :class:`~tosa_verify.graph.Block`:

* the initial environment: the values of CONST and CONST_SHAPE operators (a declaration's data
  is available only once the operator writing it ran, as in the spec's graphs, where an input is
  a graph input or an operator's output), plus the values of *folded* operators (every input
  constant, a pure op), computed once with the ordinary op functions and every check they make;
* one :class:`Step` per remaining operator: its function (or the kernel its op's optional
  ``prepare`` returned, see :func:`tosa_verify.ops.registry.register_prepare`), its tensor
  declarations and working dtypes resolved, and the tensors whose last use it is (freed after it
  when nothing records the run);
* the checks that depend only on declarations (unknown op, undeclared tensor, a tensor used
  before it is produced or whose data no CONST produces, a tensor written by a second operator
  or a block input written, an output dimension < 1), done once here. A failing check does not
  raise here: it is kept on its step and raised when the run reaches that operator, so a run
  reports the same first error, at the same operator, as an operator-by-operator walk would.

Plans are cached on the block (see :func:`plan_for`); a block edited after its plan was built
(operators or constant data replaced) gets a new plan.

>>> plan = plan_for(load("model.tosa").main)     # doctest: +SKIP
>>> len(plan.steps) <= len(load("model.tosa").main.operators)  # doctest: +SKIP
True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, is_

import numpy as np

from . import _edits
from .budget import cached_graph_memory, check_need
from .dtypes import dtype_info
from .errors import TosaError, TosaUnsupportedError, TosaValidationError
from .graph import Block, Graph, Operator, Tensor, load
from .ops.registry import IMPURE, REGISTRY, OpCall, prepare_for

#: Operators a plan never folds even with constant inputs: they read or write run state
#: (variables, the running interpreter) or call sub-blocks. Op modules add theirs to
#: :data:`tosa_verify.ops.registry.IMPURE`.
_NEVER_FOLD = {"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "COND_IF", "WHILE_LOOP", "CUSTOM"}


@dataclass(slots=True)
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
    """Everything :meth:`Interpreter.run_block` needs for one block, computed once.

    The block holds its plan, so the plan does not refer back to the block: that cycle would
    keep a dropped graph alive until the cyclic garbage collector found it."""

    constants: dict[str, np.ndarray]
    #: variable tensors: (name, declaration), initialised per run from the carried state
    variables: list[tuple[str, Tensor]]
    steps: list[Step]  #: operators still to run (folded ones left out)
    #: every operator in order: a Step, or (index, operator, declaration) of a folded CONST,
    #: made a Step only when :attr:`all_steps` is asked for (the capture hook)
    entries: list = field(default_factory=list, repr=False)
    fingerprint: tuple = field(default=(), repr=False)
    version: tuple | None = None  #: the graph version the plan was built for (None: unknown)

    @property
    def all_steps(self) -> list[Step]:
        """Every operator's step, folded ones included, for the capture hook."""
        entries = self.entries
        for i, entry in enumerate(entries):
            if type(entry) is tuple:
                index, operator, decl = entry
                working = dtype_info(decl.dtype).working
                entries[i] = Step(index, operator, _STOCK_CONSTS[operator.op], [], [], [decl],
                                  [(decl.name, working, tuple(decl.shape))], folded=True)
        return entries


_OP, _DATA, _ATTRS, _SHAPE = attrgetter("op"), attrgetter("data"), attrgetter("attrs"), attrgetter("shape")


def _fingerprint(block: Block) -> tuple:
    """What a plan depends on that a caller could replace: operators, constants, op functions.

    Computed on every run, so only C-level ``map`` calls (no Python loop per operator).
    """
    ops = block.operators
    return (
        *map(id, ops),
        None,
        *map(id, map(REGISTRY.get, map(_OP, ops))),
        None,
        *map(id, map(_DATA, block.tensors.values())),
        None,
        *map(id, map(_DATA, block.shapes.values())),
        None,
        *block.inputs,
    )


def plan_for(block: Block, graph: Graph | None = None) -> BlockPlan:
    """The cached plan of ``block``, built on first use or when the block was edited since.

    ``graph`` (the graph holding ``block``) tells prepares and folds the TOSA version, for the
    types the 1.1 draft adds; without it a cached plan is taken whatever version it was built
    for, and a new one is built as for TOSA 1.0 (prepares decline 1.1-only types, so those ops
    run unprepared, still checked at run time).
    """
    plan = block.__dict__.get("_plan")
    fingerprint = _fingerprint(block)
    version = None if graph is None else graph.version
    if plan is None or plan.fingerprint != fingerprint or (graph is not None and plan.version != version):
        plan = build_plan(block, graph)
        plan.fingerprint = fingerprint
        block.__dict__["_plan"] = plan
    return plan


def current_plan(block: Block, graph: Graph) -> BlockPlan:
    """:func:`plan_for` for a block whose id :func:`current_blocks` gave: its cached plan, else
    a new one. A block of a :func:`cached_graph` graph (never edited) gets its plan without the
    fingerprint: the graph's own check in :func:`current_blocks` stands in for it (and a
    :func:`plan_for` call, finding none, would build a new plan).

    >>> current_plan(graph.main, graph) is graph.main.__dict__["_plan"]   # doctest: +SKIP
    True
    """
    plan = block.__dict__.get("_plan")
    if plan is not None:
        return plan
    if not graph.__dict__.get("_sealed", False):
        return plan_for(block, graph)
    plan = block.__dict__["_plan"] = build_plan(block, graph)
    return plan


class _PlanRuntime:
    """The ``call.runtime`` a prepare or fold sees while a plan is built: only the graph, whose
    version :func:`tosa_verify.ops._version.is_tosa_11` reads (no run state: ops that need it are
    never prepared or folded); and the kernels prepares share within the plan, by a key each
    prepare makes from its own parameters (RESCALE's, see
    :func:`tosa_verify.ops.type_conversion.prepare_rescale`)."""

    __slots__ = ("graph", "kernels")

    def __init__(self, graph: Graph | None) -> None:
        self.graph = graph
        self.kernels: dict[tuple, Callable] = {}


def _graph_snapshot(graph: Graph) -> tuple[list[tuple], tuple[str, ...], tuple]:
    """What a graph's plans and memory bound depend on that a caller could replace: per block,
    the block, its operators (their op names and attributes), tensor declarations (their data
    and shapes) and interface; and the op function of every op name used. The objects
    themselves are kept: :func:`_unchanged` compares them by identity (op names and shapes by
    value); it runs on every run of a caller's Graph, so with list comprehensions and C-level
    ``map``, no Python call per object."""
    blocks = []
    for region in graph.regions:
        for block in region.blocks:
            ops = block.operators
            decls = [*block.tensors.values(), *block.shapes.values()]
            objects = [*ops, *[o.attrs for o in ops], *decls, *[d.data for d in decls]]
            blocks.append((block, ops, [o.op for o in ops], [d.shape for d in decls], objects,
                           block.inputs[:], block.outputs[:]))
    names = tuple({name: None for b in blocks for name in b[2]})
    return blocks, names, tuple(map(REGISTRY.get, names))


def _unchanged(graph: Graph, snapshot: tuple[list[tuple], tuple[str, ...], tuple]) -> bool:
    """Whether every object of ``snapshot`` (see :func:`_graph_snapshot`) is still in place."""
    was_blocks, names, fns = snapshot
    blocks = [b for r in graph.regions for b in r.blocks]
    if len(blocks) != len(was_blocks) or not all(map(is_, map(REGISTRY.get, names), fns)):
        return False
    for block, (was, ops, op_names, shapes, objects, inputs, outputs) in zip(blocks, was_blocks, strict=True):
        if block is not was or block.operators is not ops or len(ops) != len(op_names) \
                or block.inputs != inputs or block.outputs != outputs:
            return False
        decls = [*block.tensors.values(), *block.shapes.values()]
        # op names and shapes compare by value (list ==, identical items cost no call): an equal
        # name finds the same op function, an equal shape tuple is the same shape; the rest by
        # identity, in one pass: operators, their attributes, declarations, their data
        if len(decls) != len(shapes) or [o.op for o in ops] != op_names or [d.shape for d in decls] != shapes \
                or not all(map(is_, [*ops, *[o.attrs for o in ops], *decls, *[d.data for d in decls]], objects)):
            return False
    return True


def current_blocks(graph: Graph) -> frozenset[int]:
    """The ids of ``graph``'s blocks, whose cached plans are current (see :func:`verify_graph`,
    which also checks the memory budget).

    >>> current_blocks(load("model.tosa"))   # doctest: +SKIP
    frozenset({140230...})
    """
    state = graph.__dict__.get("_verified")
    sealed = graph.__dict__.get("_sealed", False)
    if state is None or not _still_valid(graph, state, sealed):
        tick = _edits.TICK  # (read before the snapshot: an edit from now on changes it)
        blocks = [b for r in graph.regions for b in r.blocks]
        for block in blocks:
            block.__dict__.pop("_plan", None)
        graph.__dict__.pop("_memory", None)
        if sealed:  # never edited: only the op functions are compared
            names = tuple({o.op: None for b in blocks for o in b.operators})
            snapshot = ([], names, tuple(map(REGISTRY.get, names)))
        else:
            snapshot = _graph_snapshot(graph)
        state = (snapshot, frozenset(map(id, blocks)), graph.version, {}, [_checked_at(graph, tick, sealed)])
        graph.__dict__["_verified"] = state
    return state[1]


def _checked_at(graph: Graph, tick: int, sealed: bool) -> tuple | None:
    """What stands in for the comparison of ``graph`` with its snapshot while :data:`_edits.TICK`
    stays at ``tick`` (no op function replaced, nothing watched edited): ``(tick, operators,
    declarations, their values)``, just ``(tick,)`` for a sealed graph; None when the graph
    holds a container that is not watched (see :func:`_edits.watched`).

    Blocks, regions, the graph and their containers move the tick when edited; operators and
    declarations (many, built by the loader at full speed) do not: their op names and shapes,
    attributes and data are compared on each run, with C-level ``map`` only."""
    if sealed:
        return (tick,)
    if not _edits.watched(graph):
        return None
    blocks = [b for r in graph.regions for b in r.blocks]
    ops = [o for b in blocks for o in b.operators]
    decls = [d for b in blocks for d in (*b.tensors.values(), *b.shapes.values())]
    return tick, ops, decls, _leaf_values(ops, decls), _leaf_objects(ops, decls)


def _leaf_values(ops: list[Operator], decls: list[Tensor]) -> list:
    return [*map(_OP, ops), *map(_SHAPE, decls)]


def _leaf_objects(ops: list[Operator], decls: list[Tensor]) -> list:
    return [*map(_ATTRS, ops), *map(_DATA, decls)]


def _leaves_unchanged(checked: tuple) -> bool:
    """Whether the operators and declarations of ``checked`` (see :func:`_checked_at`) still
    hold their op names and shapes (equal values), attributes and data (the same objects)."""
    _, ops, decls, values, objects = checked
    return _leaf_values(ops, decls) == values and all(map(is_, _leaf_objects(ops, decls), objects))


def _still_valid(graph: Graph, state: tuple, sealed: bool) -> bool:
    """Whether the plans of ``state`` still hold: built for this version (plans of another
    accept other types, see :func:`plan_for`) and nothing replaced since, for a sealed graph
    (never leaves the interpreter) no op function (a test's or caller's wrapper).

    While :data:`_edits.TICK` stays where it was when the graph was last found unchanged, no op
    function was replaced and no block, region, graph or container of theirs edited: only the
    operators and declarations of a graph the caller holds are compared then (see
    :func:`_checked_at`); else the whole snapshot, and a graph holding a container that is not
    watched on every run."""
    if state[2] != graph.version:
        return False
    holder = state[4]
    checked = holder[0]
    if checked is not None and checked[0] == _edits.TICK:
        return sealed or _leaves_unchanged(checked)
    tick = _edits.TICK
    snapshot = state[0]
    if not all(map(is_, map(REGISTRY.get, snapshot[1]), snapshot[2])):
        return False
    if not sealed and not _unchanged(graph, snapshot):
        return False
    holder[0] = _checked_at(graph, tick, sealed)
    return True


def run_cache(graph: Graph) -> dict:
    """Scratch space for what a run derives from ``graph`` alone (e.g. the interpreter's input
    binding), emptied with the plans when the graph is edited. Call after :func:`current_blocks`.

    >>> current_blocks(g); run_cache(g)["io"] = ...   # doctest: +SKIP
    """
    return graph.__dict__["_verified"][3]


def verify_graph(graph: Graph) -> frozenset[int]:
    """Before a run: refuse ``graph`` over the memory budget now in force, and return the ids
    of its blocks, whose cached plans are current.

    The memory need and the plans are kept on the graph and dropped when the graph was edited
    since (an object of its snapshot was replaced, see :func:`_unchanged`). A graph of
    :func:`cached_graph` never leaves the interpreter, so only its op functions are compared.

    >>> verify_graph(load("model.tosa"))   # doctest: +SKIP
    frozenset({140230...})
    """
    current = current_blocks(graph)
    check_need(*cached_graph_memory(graph))
    return current


def _validation_error(index: int, operator: Operator, message: str, names: Sequence[str],
                      condition: str = "") -> TosaValidationError:
    return TosaValidationError(f"operator {index} {operator.op}: {message}", op_index=index, op=operator.op,
                               tensors=tuple(names), **({"condition": condition} if condition else {}))


def build_plan(block: Block, graph: Graph | None = None) -> BlockPlan:
    """Build the plan of ``block`` (see the module docstring); never raises for a bad graph.

    ``graph``: the graph holding ``block``, for its TOSA version (see :func:`plan_for`).
    """
    runtime = _PlanRuntime(graph)
    decls: dict[str, Tensor] = {**block.shapes, **block.tensors}  # a tensor wins over a shape
    inputs = set(block.inputs)
    # (comprehensions: one pass each at C speed, where a loop with branches costs twice as much)
    variables: list[tuple[str, Tensor]] = [(name, decl) for name, decl in decls.items() if decl.variable
                                           and name not in inputs]
    # a declaration's data is the value of the CONST or CONST_SHAPE operator writing it (the
    # spec's graphs have no other constants: an input is a graph input or an operator's output),
    # so it is available once that operator ran, not before
    constants: dict[str, np.ndarray] = {}
    available = inputs | {n for n, _ in variables}
    foldable: set[str] = set()  # names whose value is the same on every run
    clashes = _write_clashes(block, inputs)
    entries: list = []
    stock = {op for op, fn in _STOCK_CONSTS.items() if fn is not None and REGISTRY.get(op) is fn}
    for index, operator in enumerate(block.operators):
        op = operator.op
        if op in stock and index not in clashes:
            # a well-formed CONST (see _STOCK_CONSTS; inline: most operators of a lowered graph
            # take this branch): folded, no step
            outputs = operator.outputs
            if not operator.inputs and len(outputs) == 1 and (decl := decls.get(outputs[0])) is not None \
                    and (value := decl.data) is not None:
                dtype, shape = decl.dtype, decl.shape
                working = _WORKING.get(dtype) or _working(dtype)  # (a call only on a dtype's first CONST)
                if type(shape) is not tuple:
                    shape = tuple(shape)
                if value.dtype == working and value.shape == shape \
                        and (dtype == "SHAPE" or (op == "CONST" and 0 not in shape)):
                    entries.append((index, operator, decl))
                    if value.flags.writeable:  # (as _fold leaves it: shared by every run, read-only)
                        value = value.view()
                        value.flags.writeable = False
                    name = decl.name
                    available.add(name)
                    constants[name] = value
                    foldable.add(name)
                    continue
        step = _make_step(block, index, operator, decls, available, constants, runtime)
        if clashes and step.error_before is None and index in clashes:
            step.error_before = clashes[index]
        entries.append(step)
        available.update(operator.outputs)
        if step.error_before is None and step.error_after is None and foldable.issuperset(step.inputs) \
                and operator.op not in _NEVER_FOLD and operator.op not in IMPURE:
            values = _fold(step, constants, runtime)
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
    running = [s for s in entries if type(s) is not tuple and not s.folded]
    # (with two steps or fewer, frees save next to nothing: what the last step uses is dropped when
    # the run ends anyway)
    if len(running) > 2:
        _set_frees(block, running, constants)
    return BlockPlan(constants, variables, running, entries,
                     version=None if graph is None else graph.version)


_OUTPUTS = attrgetter("outputs")


def _write_clashes(block: Block, inputs: set[str]) -> dict[int, TosaValidationError]:
    """The operators of ``block`` that break single assignment, by index: each writes a tensor
    an earlier operator (or itself) wrote, or a block input; with the error to raise before it.

    One set-size comparison for a well-formed block (every output name distinct, none an input);
    the operators are walked only when that fails."""
    written = list(chain.from_iterable(map(_OUTPUTS, block.operators)))
    if len(set(written)) == len(written) and inputs.isdisjoint(written):
        return {}
    # variable tensors are state, written by every VARIABLE_WRITE (or the IDENTITY it lowers to)
    variables = {name for name, decl in (*block.shapes.items(), *block.tensors.items()) if decl.variable}
    clashes: dict[int, TosaValidationError] = {}
    writers: dict[str, tuple[int, str]] = {}
    for index, operator in enumerate(block.operators):
        for name in operator.outputs:
            if name in variables:
                continue
            if name in inputs:
                message = f"tensor {name!r} is an input of block {block.name!r}, written by operator {index} {operator.op}"
            elif name in writers:
                first, op = writers[name]
                message = f"tensor {name!r} is written by operators {first} {op} and {index} {operator.op}"
            else:
                writers[name] = (index, operator.op)
                continue
            clashes[index] = _validation_error(index, operator, message, (name,))
            break  # (one error per operator: its first clashing output)
    return clashes


#: The stock CONST and CONST_SHAPE functions: a well-formed one (no input, one output declared
#: with data of its working dtype and shape, non-empty unless a SHAPE; CONST_SHAPE declaring a
#: SHAPE) is folded directly by :func:`build_plan`, without its op or :func:`_make_step`, only
#: while its op's function is in the registry.
_STOCK_CONSTS = {op: REGISTRY.get(op) for op in ("CONST", "CONST_SHAPE")}


#: TOSA dtype name -> working numpy dtype (a dict hit on the plan's hottest path)
_WORKING: dict[str, np.dtype] = {}


def _working(dtype: str) -> np.dtype:
    """``dtype_info(dtype).working``, memoized in :data:`_WORKING`."""
    working = _WORKING.get(dtype)
    if working is None:
        working = _WORKING[dtype] = dtype_info(dtype).working
    return working


def _make_step(block: Block, index: int, operator: Operator, decls: dict[str, Tensor],
               available: set[str], constants: dict[str, np.ndarray], runtime: _PlanRuntime) -> Step:
    """The step of a non-CONST operator: its declarations, working output dtypes, a declaration
    error if any, and its prepared kernel, or None (then the op function runs, checks and all,
    every time).

    The prepare's ``call.inputs`` holds the constant inputs' values (None for the others: block
    inputs, even when declared with data, variables and computed tensors); it makes every check
    that depends on declarations, attributes and those constants; a failed check makes it
    decline, so the op function reports that error at run time, in order."""
    op = operator.op
    fn = REGISTRY.get(op)
    ins, outs = operator.inputs, operator.outputs
    try:  # (the common case in one pass: every tensor declared, the op known, inputs available)
        input_decls, output_decls = list(map(decls.__getitem__, ins)), list(map(decls.__getitem__, outs))
    except KeyError:
        return _bad_step(block, index, operator, fn, decls, available)
    if fn is None or not available.issuperset(ins):
        return _bad_step(block, index, operator, fn, decls, available)
    outputs, error_after = [], None
    for decl in output_decls:
        dtype, shape = decl.dtype, decl.shape
        if type(shape) is not tuple:
            shape = tuple(shape)
        outputs.append((decl.name, _WORKING.get(dtype) or _working(dtype), shape))
        if shape and dtype != "SHAPE" and min(shape) < 1 and error_after is None:
            error_after = _dimension_error(index, operator, decl, input_decls, output_decls)
    step = Step(index, operator, fn, list(ins), input_decls, output_decls, outputs, None, error_after)
    prepare = prepare_for(op)
    if prepare is not None:
        call = OpCall(index, operator, list(map(constants.get, ins)), input_decls, output_decls, runtime)
        try:  # (a failed check makes the prepare decline: the op function reports it at run time, in order)
            kernel = prepare(call)
        except TosaError:
            kernel = None
        if kernel is not None:
            step.fn = kernel
    return step


def _bad_step(block: Block, index: int, operator: Operator, fn, decls: dict[str, Tensor],
              available: set[str]) -> Step:
    """The step of an operator with a declaration error (unknown op, undeclared tensor, input
    used before it is produced), raised when a run reaches it, in that order of precedence."""
    ins, outs = operator.inputs, operator.outputs
    missing = [n for n in (*ins, *outs) if n not in decls]
    input_decls = [decls[n] for n in ins if n in decls]
    output_decls = [decls[n] for n in outs if n in decls]
    step = Step(index, operator, fn, list(ins), input_decls, output_decls, [])
    if fn is None:
        step.error_before = TosaUnsupportedError(f"operator {index} {operator.op}: not supported by the interpreter")
    elif missing:
        step.error_before = _validation_error(
            index, operator, f"tensor {missing[0]!r} is not declared in block {block.name!r}", missing[:1])
    else:
        name = next(n for n in ins if n not in available)
        if decls[name].data is not None and not any(name in o.outputs for o in block.operators):
            message = f"input tensor {name!r} holds constant data that no CONST or CONST_SHAPE operator produces"
        else:
            message = f"input tensor {name!r} is used before it is produced"
        step.error_before = _validation_error(index, operator, message, (name,))
    return step


def _dimension_error(index: int, operator: Operator, decl: Tensor, input_decls: list[Tensor],
                     output_decls: list[Tensor]) -> TosaValidationError:
    """The ERROR_IF of an output declared with a dimension < 1 (raised after the op's call)."""
    where = OpCall(index, operator, [], input_decls, output_decls)._where()
    condition = f"output {decl.name!r} has a dimension < 1 in {list(decl.shape)}"
    return TosaValidationError(
        f"{where}: ERROR_IF({condition})", op_index=index, op=operator.op,
        tensors=tuple(t.name for t in (*input_decls, *output_decls)), condition=condition)


def _fold(step: Step, constants: dict[str, np.ndarray],
          runtime: _PlanRuntime) -> list[np.ndarray] | None:
    """Run a step whose inputs are all constant; its outputs (read-only), or None if it fails."""
    call = OpCall(step.index, step.operator, [constants[n] for n in step.inputs], step.input_decls,
                  step.output_decls, runtime)
    try:
        with np.errstate(all="ignore"):  # as in a run
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


def _set_frees(block: Block, steps: list[Step], constants: dict[str, np.ndarray]) -> None:
    """Give each step the tensors whose last use it is (block outputs are never freed, nor
    constants: the plan holds them for every run anyway, so dropping them frees nothing)."""
    keep = set(block.outputs) | constants.keys()
    # the last step using each tensor (as input or output; later steps overwrite earlier ones),
    # in order of first use
    last = {name: i for i, step in enumerate(steps) for name in (*step.inputs, *step.operator.outputs)}
    frees: dict[int, list[str]] = {}
    for name, i in last.items():
        if name not in keep:
            frees.setdefault(i, []).append(name)
    for i, names in frees.items():
        steps[i].free = tuple(names)


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
    graph.__dict__["_sealed"] = True  # see verify_graph
    if len(key) <= CACHE_BYTES:
        with _GRAPHS_LOCK:
            _GRAPHS[key] = graph
            while len(_GRAPHS) > CACHE_GRAPHS or sum(map(len, _GRAPHS)) > CACHE_BYTES:
                _GRAPHS.popitem(last=False)
    return graph
