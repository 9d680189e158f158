"""Operators model-converter 0.11.0 turns into a view of their input, and the fault that follows.

The converter compiles a RESHAPE, and an elementwise identity -- MUL by a constant of ones
(shift 0), ADD of a constant of zeros, SUB of a constant of zeros -- whose output has its input's
shape, as a view of the input's buffer. When both the input and the output of such an operator
are graph outputs, one of the two comes back unwritten (zeros); the other is right, and so is a
graph where only one of them is an output. Minimal case (``docs/vgf.md``)::

    t = MUL(x, y); u = MUL(t, ones(1, 1, 64)); outputs (t, u)  ->  t is all zeros on VGF

:func:`check_outputs` turns that into a :class:`~vgf.errors.VgfCompileError` naming the operator
before anything runs; :func:`aliases` lists those operators so a capture can leave their outputs
out and rebuild them (:func:`rebuild`), as it does for RESHAPE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tosa_verify.graph import Block, Operator

from .errors import VgfCompileError

__all__ = ["Alias", "aliases", "check_outputs", "rebuild", "sources_of_outputs"]

#: The converter these faults were seen with (docs/vgf.md, "Known converter faults").
CONVERTER = "model-converter 0.11.0"
_IDENTITY = {"MUL": 1, "ADD": 0, "SUB": 0}


@dataclass(frozen=True)
class Alias:
    """An operator compiled as a view: ``op`` computes ``op.outputs[0]`` equal to ``source``.

    Example:
        >>> Alias(Operator("MUL", {}, ["t", "w", "s"], ["u"]), "t", "multiplies by ones").source
        't'
    """

    op: Operator
    source: str
    what: str


def _constant(block: Block, name: str) -> np.ndarray | None:
    decl = block.tensors.get(name) or block.shapes.get(name)
    return None if decl is None or decl.data is None else np.asarray(decl.data)


def _shape(block: Block, name: str) -> tuple[int, ...] | None:
    decl = block.tensors.get(name) or block.shapes.get(name)
    return None if decl is None else tuple(decl.shape)


def _identity_source(block: Block, op: Operator) -> str | None:
    """The input an elementwise identity passes through unchanged, or None."""
    neutral = _IDENTITY.get(op.op)
    if neutral is None or len(op.inputs) < 2:
        return None
    if op.op == "MUL" and len(op.inputs) > 2:
        shift = _constant(block, op.inputs[2])
        if shift is None or np.any(shift != 0):
            return None
    candidates = [(op.inputs[0], op.inputs[1])] + ([(op.inputs[1], op.inputs[0])] if op.op != "SUB" else [])
    for source, other in candidates:
        value = _constant(block, other)
        if value is not None and value.size and np.all(value == neutral) \
                and _shape(block, source) == _shape(block, op.outputs[0]):
            return source
    return None


def aliases(block: Block) -> list[Alias]:
    """The operators of ``block`` the converter compiles as a view of one of their inputs.

    Example:
        >>> [a.op.op for a in aliases(graph.main)]    # doctest: +SKIP
        ['MUL', 'RESHAPE']
    """
    found = []
    for op in block.operators:
        if op.op == "RESHAPE":
            found.append(Alias(op, op.inputs[0], "reshapes"))
            continue
        source = _identity_source(block, op)
        if source is not None:
            what = {"MUL": "multiplies by ones", "ADD": "adds zeros", "SUB": "subtracts zeros"}[op.op]
            found.append(Alias(op, source, what))
    return found


def _root(name: str, by_output: dict[str, Alias]) -> str:
    while name in by_output:
        name = by_output[name].source
    return name


def check_outputs(block: Block) -> None:
    """Raise :class:`VgfCompileError` when two graph outputs are views of one buffer.

    That is, one output is the other passed through elementwise identities (MUL by ones, ADD or
    SUB of zeros), possibly a chain of them.

    Example:
        >>> check_outputs(graph.main)    # doctest: +SKIP
    """
    # RESHAPE is left out here: only a chain of two with all three tensors outputs was seen to fail
    by_output = {a.op.outputs[0]: a for a in aliases(block) if a.op.op != "RESHAPE"}
    seen: dict[str, str] = {}
    for out in block.outputs:
        root = _root(out, by_output)
        other = seen.setdefault(root, out)
        if other == out:
            continue
        view = by_output.get(out) or by_output[other]
        raise VgfCompileError(
            f"model-converter: {view.op.op} {view.op.outputs[0]!r} {view.what} and is compiled as a view of "
            f"{view.source!r}; with {other!r} and {out!r} both graph outputs {CONVERTER} leaves one unwritten "
            "(zeros): make only one of them an output (known converter fault, docs/vgf.md)",
            step="model-converter")


def sources_of_outputs(block: Block, names: list[str]) -> list[tuple[str, str]]:
    """``(tensor, view of it)`` for every tensor some output in ``names`` is a view of, nearest first.

    A capture leaves those tensors out (they share the output's buffer) and fills them in from
    the output's value afterwards.
    """
    by_output = {a.op.outputs[0]: a for a in aliases(block)}
    known = set(block.inputs) | {n for n, d in {**block.tensors, **block.shapes}.items() if d.data is not None}
    pairs = []
    for out in names:
        current = out
        while current in by_output and by_output[current].source not in known:
            pairs.append((by_output[current].source, current))
            current = by_output[current].source
    return pairs


def rebuild(alias: Alias, source_value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The output of a view operator from its input's value (exact: x*1, x+0, x-0, a reshape).

    Example:
        >>> rebuild(Alias(Operator("ADD", {}, ["t", "z"], ["u"]), "t", "adds zeros"),
        ...         np.array([-0.0, 2.0], np.float32), (2,)).tolist()
        [0.0, 2.0]
    """
    if alias.op.op == "RESHAPE":
        return np.reshape(source_value, shape)
    value = np.asarray(source_value)
    zero = np.zeros((), value.dtype)
    # x + 0 turns -0.0 into +0.0 (IEEE); x * 1 and x - 0 keep every value
    return (value + zero if alias.op.op == "ADD" else value.copy()).reshape(shape)
