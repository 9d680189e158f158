"""CONST and CONST_SHAPE operators in a plan: a well-formed one is folded directly (no step, no
op call), anything else becomes a step whose op function makes its checks at run time."""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
from tosa_verify.errors import TosaError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.plan import build_plan

_I8 = np.arange(6, dtype=np.int8).reshape(2, 3)


def _block(op: str = "CONST", decl: Tensor | None = None, inputs=(), outputs=("c",)) -> Block:
    decl = decl if decl is not None else Tensor("c", (2, 3), "INT8", _I8)
    tensors = {"c": decl, "x": Tensor("x", (2, 3), "INT8")}
    return Block("main", [Operator(op, {}, list(inputs), list(outputs))], tensors, [], ["c"])


_READ_ONLY = _I8.copy()
_READ_ONLY.flags.writeable = False


@pytest.mark.parametrize(("block", "direct"), [
    (_block(), True),
    (_block(decl=Tensor("c", (2, 3), "INT8", _READ_ONLY)), True),
    (_block("CONST_SHAPE", Tensor("c", (2,), "SHAPE", np.array([2, 3], np.int64))), True),
    (_block("CONST", Tensor("c", (0,), "SHAPE", np.zeros(0, np.int64))), True),  # an empty SHAPE
    (_block("CONST_SHAPE", Tensor("c", (2, 3), "INT8", _I8)), False),  # CONST_SHAPE of a tensor
    (_block(decl=Tensor("c", (2, 3), "INT16", _I8)), None),  # data of another dtype
    (_block(decl=Tensor("c", (3, 2), "INT8", _I8)), False),  # data of another shape
    (_block(decl=Tensor("c", [2, 3], "INT8", _I8)), True),  # (a list shape, as a caller may build)
    (_block(decl=Tensor("c", (2, 0), "INT8", np.zeros((2, 0), np.int8))), False),  # an empty tensor
    (_block(decl=Tensor("c", (2, 3), "INT8")), False),  # no data
    (_block(inputs=("x",)), False),
    (_block(outputs=("c", "x")), False),
    (_block(outputs=("nowhere",)), False),
])
def test_only_a_well_formed_const_is_folded_directly(block: Block, direct: bool | None) -> None:
    """``direct`` None: not folded directly, and refused by the CONST op function at run time
    (data of another dtype than the declaration's: the loader never makes one, code may)."""
    plan = build_plan(block)
    assert (type(plan.entries[0]) is tuple) is bool(direct)
    if direct is None:
        assert [s.operator.op for s in plan.steps] == ["CONST"]
        graph = Graph((1, 0, 0, False), [Region("main", [block])])
        with pytest.raises(TosaError, match=r"operator 0 CONST .*'c' holds int8 data; a INT16 tensor's values are int16"):
            tosa_verify.run(graph, [])
        return
    value = plan.constants.get("c")
    if direct:
        assert plan.steps == [] and not value.flags.writeable
        np.testing.assert_array_equal(value, block.tensors["c"].data)
        # the hook's view of it: a folded step with the declaration's working dtype and shape
        [step] = plan.all_steps
        assert step.folded and step.outputs == [("c", value.dtype, value.shape)]
    else:
        graph = Graph((1, 0, 0, False), [Region("main", [block])])
        try:  # the op function's own checks decide: a value as declared, or its error
            [out] = tosa_verify.run(graph, [])
        except TosaError as exc:
            assert "operator 0" in str(exc) or "never produced" in str(exc)
        else:
            decl = block.tensors["c"]
            assert out.shape == tuple(decl.shape)
