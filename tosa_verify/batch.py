"""Batched execution: run N samples through one graph whose batch dimension is N times larger.

:func:`batch_graph` rewrites a :class:`~tosa_verify.graph.Graph` so that every tensor that depends
on the graph inputs holds ``B`` samples folded into its axis 0: a per-sample tensor of shape
``[d0, d1, ...]`` becomes ``[B * d0, d1, ...]``, whose row-major memory is exactly that of the
stacked ``[B, d0, d1, ...]``. The rewrite is proven legal operator by operator:

* ops that treat axis 0 as independent rows (CONV*, pooling, RESIZE, FFT, MATMUL, GATHER,
  SCATTER, elementwise ops, reductions/ARGMAX/REVERSE/CONCAT over another axis, TRANSPOSE that
  keeps axis 0 first, SLICE/PAD/TILE that leave axis 0 alone) keep their meaning per sample;
* RESHAPE is always legal in this representation (``[B, in...] -> [B, out...]`` is a row-major
  reshape of each sample), its shape operand gets ``B * shape[0]``; SLICE's size likewise;
* an operand that does not depend on the inputs (weights, constants and what is computed from
  them) is used as is where axis-0 broadcasting already applies it to every sample, and is
  replicated with an inserted TILE ``[B, 1, ...]`` where the op pairs rows (MATMUL's B, GATHER's
  values, a CONCAT part, an elementwise operand whose axis 0 is not 1).

Everything else refuses with :class:`BatchRefused` naming the operator: an op that mixes samples
(a reduction, ARGMAX, REVERSE or CONCAT along axis 0, a TRANSPOSE moving axis 0, a SLICE/PAD/TILE
acting on axis 0, an elementwise operand broadcast along axis 0), control flow and variables on
sample data, rank-0 sample tensors, CUSTOM. :func:`run_batch` then runs the samples one at a time,
so callers never see the difference except in speed.

Bit-identity with per-sample runs: every batched op computes each output element from the same
operands with the same kernel as the per-sample op; integer dot products are exact whatever the
BLAS blocking (see ``ops.tensor_ops._exact_dtype``), floating-point dot products are float64 GEMMs
whose per-row summation order does not depend on the number of rows. The tests compare batched
and per-sample outputs bit for bit on every zoo model and on the conformance graphs.

>>> import numpy as np, tosa_verify                                    # doctest: +SKIP
>>> xs = np.stack([x0, x1, x2])            # 3 samples of the graph's one input
>>> ys = tosa_verify.run_batch("model.tosa", [xs], batch_size=2)       # doctest: +SKIP
>>> ys[0].shape[0]
3
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import TosaError, TosaInputError, TosaUnsupportedError
from .graph import Block, Graph, Operator, Region, Tensor, load
from .interpreter import Inputs, Source, run

__all__ = ["BatchRefused", "BatchedGraph", "batch_graph", "run_batch"]


class BatchRefused(TosaUnsupportedError):
    """The graph has an operator that mixes samples (or cannot be proven not to)."""


#: Ops whose operands at these positions are per-sample data combined elementwise with numpy
#: broadcasting (equal ranks; a size-1 axis 0 of a constant operand broadcasts to every sample).
#: Every other operand (zero points, shifts, tables, multipliers) must not depend on the samples.
_ELEMENTWISE: dict[str, tuple[int, ...]] = {
    **{op: (0,) for op in (
        "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR", "LOG", "LOGICAL_NOT",
        "RECIPROCAL", "RSQRT", "SIN", "ERF", "SIGMOID", "TANH", "CLAMP", "CAST", "IDENTITY",
        "NEGATE", "RESCALE", "TABLE")},
    **{op: (0, 1) for op in (
        "ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "POW", "INTDIV", "ARITHMETIC_RIGHT_SHIFT",
        "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR",
        "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "EQUAL", "GREATER", "GREATER_EQUAL")},
    "SELECT": (0, 1, 2),
}

#: Ops whose axis 0 is a batch of independent rows: the operands at these positions are paired
#: row by row (a sample-independent one is tiled), the others must not depend on the samples.
_ROWWISE: dict[str, tuple[int, ...]] = {
    **{op: (0,) for op in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D",
                           "AVG_POOL2D", "MAX_POOL2D", "RESIZE", "RFFT2D")},
    "MATMUL": (0, 1),
    "GATHER": (0, 1),
    "SCATTER": (0, 1, 2),
    "FFT2D": (0, 1),
}

#: Ops with an ``axis`` attribute: legal unless the axis is 0.
_AXIS_OPS = frozenset({"ARGMAX", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN",
                       "REDUCE_PRODUCT", "REDUCE_SUM", "REVERSE"})


@dataclass
class BatchedGraph:
    """A graph rewritten for ``batch`` samples, or why it cannot be.

    ``graph`` is None when the rewrite was refused; ``reason`` then names the operator.
    ``batched_outputs[i]`` is False for a graph output that does not depend on the inputs (the
    batched run produces it once; :func:`run_batch` repeats it per sample).
    """

    batch: int
    graph: Graph | None
    reason: str = ""
    batched_outputs: tuple[bool, ...] = ()


class _Rewriter:
    """Walks the main block once, building the batched block (see the module docstring)."""

    def __init__(self, block: Block, batch: int) -> None:
        self.src = block
        self.b = batch
        self.tensors: dict[str, Tensor] = dict(block.tensors)
        self.shapes: dict[str, Tensor] = dict(block.shapes)
        self.ops: list[Operator] = []
        self.batched: set[str] = set()
        self.tiled: dict[str, str] = {}
        self.shape_values: dict[str, np.ndarray] = {
            name: np.asarray(t.data, dtype=np.int64) for name, t in block.shapes.items() if t.data is not None
        }

    # ------------------------------------------------------------------ helpers
    def _fresh(self, base: str) -> str:
        name, k = f"{base}@b{self.b}", 0
        while name in self.tensors or name in self.shapes:
            k += 1
            name = f"{base}@b{self.b}.{k}"
        return name

    def _decl(self, name: str) -> Tensor:
        decl = self.src.tensors.get(name) or self.src.shapes.get(name)
        if decl is None:
            raise BatchRefused(f"tensor {name!r} is not declared in the main block")
        return decl

    def _mark_batched(self, where: str, name: str) -> None:
        decl = self._decl(name)
        if not decl.shape or decl.dtype == "SHAPE":
            raise BatchRefused(f"{where}: per-sample tensor {name!r} has rank 0 (no axis to batch)")
        self.tensors[name] = dataclasses.replace(decl, shape=(decl.shape[0] * self.b, *decl.shape[1:]))
        self.batched.add(name)

    def _const_shape(self, base: str, values: Sequence[int]) -> str:
        """A new shape tensor holding ``values``, produced by a CONST_SHAPE op emitted here."""
        name = self._fresh(base)
        data = np.asarray(values, dtype=np.int64)
        self.shapes[name] = Tensor(name=name, shape=(len(data),), dtype="SHAPE", data=data)
        self.shape_values[name] = data
        self.ops.append(Operator("CONST_SHAPE", {}, [], [name]))
        return name

    def _shape_operand(self, where: str, op: Operator, i: int) -> np.ndarray:
        name = op.inputs[i] if i < len(op.inputs) else None
        if name is None or name not in self.shape_values:
            raise BatchRefused(f"{where}: shape operand {i} ({name!r}) is not a constant shape")
        return self.shape_values[name]

    def _tile(self, name: str) -> str:
        """``name`` (sample-independent) replicated for every sample: a TILE [B, 1, ...]."""
        if name not in self.tiled:
            decl = self._decl(name)
            mult = self._const_shape(f"{name}.multiples", [self.b] + [1] * (len(decl.shape) - 1))
            out = self._fresh(name)
            self.tensors[out] = Tensor(name=out, shape=(decl.shape[0] * self.b, *decl.shape[1:]), dtype=decl.dtype)
            self.ops.append(Operator("TILE", {}, [name, mult], [out]))
            self.tiled[name] = out
            self.batched.add(out)
        return self.tiled[name]

    def _require_fixed(self, where: str, op: Operator, data: tuple[int, ...]) -> None:
        for i, name in enumerate(op.inputs):
            if i not in data and name in self.batched:
                raise BatchRefused(f"{where}: operand {i} ({name!r}) depends on the sample")

    # ------------------------------------------------------------------ the walk
    def rewrite(self) -> tuple[Block, tuple[bool, ...]]:
        for name in self.src.inputs:
            self._mark_batched("graph input", name)
        for index, op in enumerate(self.src.operators):
            where = f"operator {index} {op.op}"
            if not any(n in self.batched for n in op.inputs):
                self.ops.append(op)  # does not depend on the samples: runs once, unchanged
                continue
            self.ops.append(self._rewrite_op(where, op))
            for name in op.outputs:
                self._mark_batched(where, name)
        block = Block(name=self.src.name, operators=self.ops, tensors=self.tensors,
                      inputs=list(self.src.inputs), outputs=list(self.src.outputs), shapes=self.shapes)
        return block, tuple(n in self.batched for n in self.src.outputs)

    def _rewrite_op(self, where: str, op: Operator) -> Operator:
        kind = op.op
        inputs = list(op.inputs)
        if kind in _ELEMENTWISE:
            data = _ELEMENTWISE[kind]
            self._require_fixed(where, op, data)
            out0 = self._decl(op.outputs[0]).shape
            if kind == "RESCALE" and op.attrs.get("per_channel") and len(out0) == 1:
                raise BatchRefused(f"{where}: per-channel RESCALE of a rank-1 tensor scales along axis 0")
            for i in data:
                shape = self._decl(inputs[i]).shape
                if inputs[i] in self.batched:
                    if shape[0] != out0[0]:
                        raise BatchRefused(f"{where}: operand {i} broadcasts along axis 0 "
                                           f"({shape[0]} -> {out0[0]})")
                elif shape and shape[0] != 1:
                    inputs[i] = self._tile(inputs[i])
            return Operator(kind, op.attrs, inputs, list(op.outputs), op.location)
        if kind in _ROWWISE:
            data = _ROWWISE[kind]
            self._require_fixed(where, op, data)
            for i in data:
                if inputs[i] not in self.batched:
                    inputs[i] = self._tile(inputs[i])
            return Operator(kind, op.attrs, inputs, list(op.outputs), op.location)
        if kind in _AXIS_OPS or kind == "CONCAT":
            if int(op.attrs.get("axis", 0)) == 0:
                raise BatchRefused(f"{where}: acts along axis 0, across samples")
            if kind == "CONCAT":
                inputs = [n if n in self.batched else self._tile(n) for n in inputs]
            return Operator(kind, op.attrs, inputs, list(op.outputs), op.location)
        if kind == "TRANSPOSE":
            perms = list(op.attrs.get("perms", []))
            if not perms or perms[0] != 0:
                raise BatchRefused(f"{where}: perms {perms} move axis 0, across samples")
            return op
        if kind == "RESHAPE":
            self._require_fixed(where, op, (0,))
            shape = self._shape_operand(where, op, 1)
            if shape.size == 0:
                raise BatchRefused(f"{where}: reshapes a sample to rank 0")
            new = self._const_shape(f"{inputs[1]}.batched", [int(shape[0]) * self.b, *shape[1:].tolist()])
            return Operator(kind, op.attrs, [inputs[0], new], list(op.outputs), op.location)
        if kind == "SLICE":
            self._require_fixed(where, op, (0,))
            start, size = self._shape_operand(where, op, 1), self._shape_operand(where, op, 2)
            d0 = self._decl(inputs[0]).shape[0]
            if start.size == 0 or int(start[0]) != 0 or int(size[0]) != d0:
                raise BatchRefused(f"{where}: slices axis 0 (start {start.tolist()}, size {size.tolist()})")
            new = self._const_shape(f"{inputs[2]}.batched", [d0 * self.b, *size[1:].tolist()])
            return Operator(kind, op.attrs, [inputs[0], inputs[1], new], list(op.outputs), op.location)
        if kind == "PAD":
            self._require_fixed(where, op, (0,))
            padding = self._shape_operand(where, op, 1)
            if padding.size < 2 or int(padding[0]) != 0 or int(padding[1]) != 0:
                raise BatchRefused(f"{where}: pads axis 0 ({padding.tolist()})")
            return op
        if kind == "TILE":
            self._require_fixed(where, op, (0,))
            multiples = self._shape_operand(where, op, 1)
            if multiples.size == 0 or int(multiples[0]) != 1:
                raise BatchRefused(f"{where}: tiles axis 0 ({multiples.tolist()})")
            return op
        raise BatchRefused(f"{where}: {kind} on per-sample data cannot be batched")


def batch_graph(source: Source, batch: int) -> BatchedGraph:
    """Rewrite ``source`` to run ``batch`` samples at once (see the module docstring).

    Never raises for a graph that cannot be batched: the result's ``graph`` is None and
    ``reason`` says which operator prevents it.

    >>> bg = batch_graph("model.tosa", 8)                     # doctest: +SKIP
    >>> bg.graph.main.tensors[bg.graph.main.inputs[0]].shape  # doctest: +SKIP
    (8, 224, 224, 3)
    """
    graph = load(source)
    if batch < 1:
        raise TosaInputError(f"batch size must be at least 1, got {batch}")
    try:
        block, batched_outputs = _Rewriter(graph.main, batch).rewrite()
    except BatchRefused as exc:
        return BatchedGraph(batch, None, str(exc))
    first = graph.regions[0]
    regions = [Region(first.name, [block, *first.blocks[1:]]), *graph.regions[1:]]
    return BatchedGraph(batch, Graph(version=graph.version, regions=regions), "", batched_outputs)


def _stacked_inputs(graph: Graph, inputs: Inputs) -> tuple[list[np.ndarray], int]:
    """The per-input stacked arrays in graph input order and the sample count N."""
    names = graph.main.inputs
    if not names:
        raise TosaInputError("the graph has no inputs: there is nothing to stack samples on")
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise TosaInputError(f"input names do not match the graph: missing {missing}, unknown {unknown}")
        arrays = [np.asarray(inputs[n]) for n in names]
    else:
        arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(names):
            raise TosaInputError(f"graph takes {len(names)} input(s) {names}, got {len(arrays)} stacked arrays")
    counts = set()
    for name, arr in zip(names, arrays, strict=True):
        decl = graph.main.tensors.get(name)
        shape = tuple(decl.shape) if decl is not None else ()
        if arr.ndim != len(shape) + 1 or tuple(arr.shape[1:]) != shape:
            raise TosaInputError(f"input {name!r}: stacked shape {list(arr.shape)} is not [N, *{list(shape)}]")
        counts.add(arr.shape[0])
    if len(counts) != 1:
        raise TosaInputError(f"stacked inputs disagree on the sample count: {sorted(counts)}")
    return arrays, counts.pop()


def run_batch(source: Source, inputs: Inputs, *, batch_size: int = 32,
              plans: dict[int, BatchedGraph] | None = None) -> list[np.ndarray]:
    """Run N samples; each input is stacked on a new leading axis: ``[N, *declared shape]``.

    Returns the outputs in graph output order, each ``[N, *declared shape]``, bit-identical to
    ``np.stack`` of N calls of :func:`tosa_verify.run`. Samples run ``batch_size`` at a time in
    one batched graph (:func:`batch_graph`); a graph that cannot be batched, or a batch whose run
    fails (a data-dependent REQUIRE, say), runs one sample at a time, so errors are exactly those
    of :func:`tosa_verify.run`. ``plans`` caches the rewritten graphs by batch size across calls.

    >>> import numpy as np, tosa_verify                                     # doctest: +SKIP
    >>> xs = np.random.default_rng(0).integers(-128, 128, (100, 1, 8, 8, 1), dtype=np.int8)
    >>> [y] = tosa_verify.run_batch("digits.tosa", [xs], batch_size=32)     # doctest: +SKIP
    >>> y.shape                                                            # doctest: +SKIP
    (100, 1, 10)
    """
    graph = load(source)
    if batch_size < 1:
        raise TosaInputError(f"batch_size must be at least 1, got {batch_size}")
    arrays, n = _stacked_inputs(graph, inputs)
    plans = {} if plans is None else plans
    chunks: list[list[np.ndarray]] = []
    for start in range(0, n, batch_size):
        b = min(batch_size, n - start)
        part = [a[start:start + b] for a in arrays]
        chunks.append(_run_chunk(graph, part, b, plans))
    if not chunks:
        decls = [graph.main.tensors[o] for o in graph.main.outputs]
        return [np.zeros((0, *d.shape)) for d in decls]
    return [np.concatenate(parts) for parts in zip(*chunks, strict=True)]


def _run_chunk(graph: Graph, part: list[np.ndarray], b: int, plans: dict[int, BatchedGraph]) -> list[np.ndarray]:
    plan = plans.get(b) if b > 1 else None
    if plan is None and b > 1:
        plan = plans[b] = batch_graph(graph, b)
    if plan is not None and plan.graph is not None:
        folded = [a.reshape(b * a.shape[1], *a.shape[2:]) for a in part]
        try:
            outs = run(plan.graph, folded)
        except TosaError:
            pass  # rerun sample by sample: the error (if any) is then exactly run()'s
        else:
            return [o.reshape(b, -1, *o.shape[1:]) if batched else np.broadcast_to(o, (b, *o.shape)).copy()
                    for o, batched in zip(outs, plan.batched_outputs, strict=True)]
    per_sample = [run(graph, [a[i] for a in part]) for i in range(b)]
    return [np.stack(outs) for outs in zip(*per_sample, strict=True)]
