"""Hostile TOSA graphs for the fault tests, built with tosa_serializer (as an attacker would).

* :func:`nested_loops`: a WHILE_LOOP whose body runs a WHILE_LOOP, both conditions always true:
  each loop alone stops at the per-loop iteration cap, together they run cap**2 iterations.
* :func:`tile_chain`: INT8 TILEs each multiplying the size by ``factor``, ``count`` of them
  chained: a kilobyte flatbuffer that declares gigabytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tosa_serializer as ts

# the graph-building helpers of the control-flow tests: one way to write a tensor or an operator
from tests.ops.test_control_flow_variables import GraphBuilder
from tests.ops.test_control_flow_variables import op as _op
from tests.ops.test_control_flow_variables import tensor as _tensor

INT8, INT32, BOOL = ts.DType.INT8, ts.DType.INT32, ts.DType.BOOL


def _forever(block) -> None:
    """A condition graph on (x: INT32[1]) that always yields true."""
    _tensor(block, "x", (1,), INT32, role="in")
    _tensor(block, "go", (), BOOL, role="out")
    _tensor(block, "yes", (), BOOL, np.array(True))
    _op(block, ts.Op.CONST, [], ["yes"], "ConstAttribute")
    _op(block, ts.Op.IDENTITY, ["yes"], ["go"], "IdentityAttribute")


def nested_loops() -> bytes:
    """y = WHILE(true) { WHILE(true) { x + 1 } } on x: INT32[1] (never ends without a budget)."""
    g = GraphBuilder()
    main = g.main
    _tensor(main, "x", (1,), INT32, role="in")
    _tensor(main, "y", (1,), INT32, role="out")
    _op(main, ts.Op.WHILE_LOOP, ["x"], ["y"], "WhileLoopAttribute", "OUTER_COND", "OUTER_BODY")
    _forever(g.block("OUTER_COND"))
    outer = g.block("OUTER_BODY")
    _tensor(outer, "x", (1,), INT32, role="in")
    _tensor(outer, "y", (1,), INT32, role="out")
    _op(outer, ts.Op.WHILE_LOOP, ["x"], ["y"], "WhileLoopAttribute", "INNER_COND", "INNER_BODY")
    _forever(g.block("INNER_COND"))
    inner = g.block("INNER_BODY")
    _tensor(inner, "x", (1,), INT32, role="in")
    _tensor(inner, "one", (1,), INT32, np.array([1], np.int32))
    _tensor(inner, "y", (1,), INT32, role="out")
    _op(inner, ts.Op.CONST, [], ["one"], "ConstAttribute")
    _op(inner, ts.Op.ADD, ["x", "one"], ["y"], "AddAttribute")
    return g.to_bytes()


def tile_chain(factors: Sequence[int], start: int = 1024) -> bytes:
    """x: INT8[start] through one TILE per entry of ``factors`` (each multiplies the size)."""
    g = GraphBuilder()
    main = g.main
    _tensor(main, "t0", (start,), INT8, role="in")
    size = start
    count = len(factors)
    for k, factor in enumerate(factors, 1):
        size *= factor
        multiples = f"m{k}"
        _tensor(main, multiples, (1,), ts.DType.SHAPE, np.array([factor], np.int64))
        _op(main, ts.Op.CONST_SHAPE, [], [multiples], "ConstShapeAttribute")
        _tensor(main, f"t{k}", (size,), INT8, role="out" if k == count else "")
        _op(main, ts.Op.TILE, [f"t{k - 1}", multiples], [f"t{k}"], "TileAttribute")
    return g.to_bytes()


def add() -> bytes:
    """y = a + b on INT32[2, 3] (a valid graph to aim bad arguments at)."""
    g = GraphBuilder()
    main = g.main
    for name, role in (("a", "in"), ("b", "in"), ("y", "out")):
        _tensor(main, name, (2, 3), INT32, role=role)
    _op(main, ts.Op.ADD, ["a", "b"], ["y"], "AddAttribute")
    return g.to_bytes()
