"""Running parts of a graph: operators on given values, re-propagation, and each layer alone.

The local errors (:attr:`DriftRow.local`, :attr:`DriftRow.local_lowering`) run each layer (the
operators from other nodes' tensors to the row's tensor) on ideal inputs: ``quantize(float)`` and
the fake-quant values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..dtypes import dtype_info
from ..graph import Block, Graph, Operator, Tensor
from ..interpreter import Interpreter, bind_inputs
from .metrics import _grid_stats, _Ref, _stats
from .report import DriftRow

_CONST_OPS = frozenset({"CONST", "CONST_SHAPE"})
_LOCAL_CHAIN_LIMIT = 64


def _is_const(block: Block, name: str) -> bool:
    decl = block.tensors.get(name) or block.shapes.get(name)
    return decl is not None and decl.data is not None


def run_operators(graph: Graph, operators: Iterable[Operator], values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``operators`` of ``graph``'s entry block in the given order on working-dtype ``values``.

    Every input is taken from ``values`` when present there (constants included, so a constant
    can be overridden), otherwise from its declared constant data. Returns the values of all
    outputs the operators produce.

    >>> g = load("model.tosa")                                          # doctest: +SKIP
    >>> run_operators(g, g.main.operators[5:7], captured)["conv2d"]     # doctest: +SKIP
    """
    main = graph.main
    interpreter = Interpreter(graph)
    produced: dict[str, np.ndarray] = {}
    for op in operators:
        names = list(dict.fromkeys(op.inputs))
        tensors: dict[str, Tensor] = {}
        shapes: dict[str, Tensor] = {}
        for n in names + list(op.outputs):
            if n in main.shapes:
                shapes[n] = main.shapes[n]
            elif n in main.tensors:
                tensors[n] = main.tensors[n]
        inputs = [n for n in names if n in produced or n in values]
        # the other inputs' declared data, each from its own CONST / CONST_SHAPE (a block's
        # constants come from those operators only, see tosa_verify.plan.build_plan)
        consts = [Operator("CONST_SHAPE" if n in shapes else "CONST", {}, [], [n]) for n in names
                  if n not in inputs and n not in op.outputs and _is_const(main, n)]
        block = Block(main.name, [*consts, op], tensors, inputs, list(op.outputs), shapes)
        outs = interpreter.run_block(block, [produced[n] if n in produced else values[n] for n in inputs])
        produced.update(zip(op.outputs, outs, strict=True))
    return produced


def _propagate(graph: Graph, env: Mapping[str, np.ndarray], replaced_ops: Mapping[int, Operator],
               replaced_values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Re-run from the first change on, only operators whose inputs changed; return changed tensors."""
    ops = graph.main.operators
    changed: dict[str, np.ndarray] = dict(replaced_values)
    starts = list(replaced_ops) + [i for i, op in enumerate(ops) if set(op.outputs) & set(replaced_values)]
    consumers = [i for i, op in enumerate(ops) if set(op.inputs) & set(replaced_values)]
    start = min(starts + consumers) if (starts or consumers) else len(ops)
    for i in range(start, len(ops)):
        op = ops[i]
        if op.op in _CONST_OPS:
            continue
        if i not in replaced_ops and not any(n in changed for n in op.inputs):
            continue
        view = _Overlay(changed, env)
        outs = run_operators(graph, [replaced_ops.get(i, op)], view)
        for name, value in outs.items():
            base = env.get(name)
            if base is None or base.shape != value.shape or not np.array_equal(base, value):
                changed[name] = value
            else:
                changed.pop(name, None)
    return changed


class _Overlay(Mapping):
    """``top`` over ``base`` without copying either."""

    def __init__(self, top: Mapping[str, np.ndarray], base: Mapping[str, np.ndarray]) -> None:
        self.top, self.base = top, base

    def __getitem__(self, key: str) -> np.ndarray:
        return self.top[key] if key in self.top else self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.top or key in self.base

    def __iter__(self):
        yield from self.top
        yield from (k for k in self.base if k not in self.top)

    def __len__(self) -> int:
        return len(set(self.top) | set(self.base))


def _capture_tosa(graph: Graph, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of the entry block in its working dtype (constants and inputs included)."""
    block = graph.main
    values = bind_inputs(block, list(inputs))
    env: dict[str, np.ndarray] = {}
    Interpreter(graph).run_block(block, values, record=env)
    return env


def _layer_chain(block: Block, target: str, producer: Mapping[str, int],
                 boundary: set[str]) -> tuple[list[int], list[str]] | None:
    """Operators (indices, in order) computing ``target`` from ``boundary`` tensors or graph
    inputs, and those inputs; None if the layer is larger than ``_LOCAL_CHAIN_LIMIT`` ops."""
    ops: set[int] = set()
    used: list[str] = []
    stack = [producer[target]]
    while stack:
        i = stack.pop()
        if i in ops:
            continue
        ops.add(i)
        if len(ops) > _LOCAL_CHAIN_LIMIT:
            return None
        for n in block.operators[i].inputs:
            if _is_const(block, n):
                continue
            if n in boundary or n not in producer:
                if n not in used:
                    used.append(n)
                continue
            stack.append(producer[n])
    return sorted(ops), used


def _local_errors(graph: Graph, env: Mapping[str, np.ndarray], rows: list[DriftRow],
                  refs: Mapping[str, _Ref], producer: Mapping[str, int], notes: list[str]) -> None:
    """Run each layer (the ops from other nodes' tensors to this row) on ideal inputs."""
    block = graph.main
    node = {r.tensor: r.torch_node for r in rows}
    has_ref = {n for n, r in refs.items() if r.float_value is not None or r.fq_value is not None}
    failed = 0
    for row in rows:
        ref = refs.get(row.tensor)
        if ref is None or row.alias_of is not None or row.tensor not in producer:
            continue
        boundary = {n for n in has_ref if node.get(n) != row.torch_node}
        chain = _layer_chain(block, row.tensor, producer, boundary)
        if chain is None:
            continue
        indices, used = chain
        ops = [block.operators[i] for i in indices]
        for which in ("float", "fq"):
            feed: dict[str, np.ndarray] = {}
            for n in used:
                r = refs.get(n)
                src = None if r is None else (r.float_value if which == "float" else r.fq_value)
                if src is None:
                    feed[n] = env[n]
                    continue
                working = dtype_info(block.tensors[n].dtype).working
                feed[n] = (r.q.quantize(src) if r.q is not None else np.asarray(src)).astype(working)
            try:
                out = run_operators(graph, ops, _Overlay(feed, env))[row.tensor]
            except Exception as exc:  # noqa: BLE001 - e.g. a REQUIRE on out-of-range inputs
                failed += 1
                row.note = (row.note + "; " if row.note else "") + f"local run failed: {type(exc).__name__}"
                break
            q = ref.q
            scale = q.scale if q else None
            actual = q.dequantize(out) if q else np.asarray(out, np.float64)
            if which == "float" and ref.float_value is not None:
                row.local = _stats(ref.float_value, actual, scale)
            elif which == "fq" and ref.fq_value is not None:
                grid = _grid_stats(ref.fq_int, out, q) if ref.fq_int is not None else None
                row.local_lowering = grid or _stats(ref.fq_value, actual, scale)
    if failed:
        notes.append(f"{failed} local layer runs failed (see the rows' notes)")
