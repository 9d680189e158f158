"""Each step of a plan of three steps or more drops the tensors whose last use it is (a run
without capture); shorter plans keep everything to the end of the run. Outputs are the same."""

from __future__ import annotations

import numpy as np

import tosa_verify
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.plan import build_plan


def _chain(length: int) -> Graph:
    tensors = {f"t{i}": Tensor(f"t{i}", (2, 3), "FP32") for i in range(length + 1)}
    ops = [Operator("ABS" if i % 2 else "NEGATE", {}, [f"t{i}"], [f"t{i + 1}"]) for i in range(length)]
    for i in range(length):
        if ops[i].op == "NEGATE":  # (NEGATE takes its zero points as inputs)
            for zp in (f"zi{i}", f"zo{i}"):
                tensors[zp] = Tensor(zp, (1,), "FP32", np.zeros(1, np.float32))
            ops[i].inputs += [f"zi{i}", f"zo{i}"]
    # (each zero point from its CONST: folded into the plan's constants, no step)
    consts = [Operator("CONST", {}, [], [name]) for name in tensors if name[0] == "z"]
    block = Block("main", consts + ops, tensors, ["t0"], [f"t{length}"])
    return Graph((1, 0, 0, False), [Region("main", [block])])


def test_long_plans_free_each_tensor_after_its_last_use_short_ones_do_not() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    for length in (1, 2, 3, 5):
        graph = _chain(length)
        plan = build_plan(graph.main)
        frees = [step.free for step in plan.steps]
        if length <= 2:
            assert frees == [()] * length
        else:  # t0 (the input) after step 0, each intermediate after the step reading it
            assert frees == [("t0",)] + [(f"t{i}",) for i in range(1, length)][:-1] + [(f"t{length - 1}",)]
        [y] = tosa_verify.run(graph, [x])
        # NEGATE, ABS, NEGATE, ...: -x, then |x| after an even count, -|x| after an odd one
        np.testing.assert_array_equal(y, -x if length == 1 else np.abs(x) if length % 2 == 0 else -np.abs(x))
