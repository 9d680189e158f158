"""Op coverage: the supported-op sets, per profile, against ExecuTorch's Arm backend.

ExecuTorch lists the edge ops its TOSA backend takes per profile
(``TOSA_PRO_INT_SupportList``, ``TOSA_PRO_FP_SupportList``). Both sides are compared by
normalized name ``aten.<name>.<overload>``: edge ops unwrap to their aten overload; its
``X_copy`` names need no mapping because ``lowering.SUPPORTED_OPS`` lists ``X_copy`` itself
wherever it lowers (RemoveNoOps makes it ``X``); getitem and the quantize / dequantize ops
(not aten operators) are left out of both sides.
"""

from __future__ import annotations

import torch
from executorch.backends.arm.operator_support.tosa_profile_supported_op_lists import (
    TOSA_PRO_FP_SupportList,
    TOSA_PRO_INT_SupportList,
)
from test_lowering_ops import (
    CASES,
    DISCRETE_RESULT_CASES,
    FP_ONLY_CASES,
    INT_ONLY_INPUT_CASES,
    INTEGER_CASES,
)

import lowering
from lowering.graph_utils import op_name
from lowering.ops import REGISTRY
from lowering.passes.rewrites import copy_variant_base
from lowering.support import support_table


def normalized(ops) -> set[str]:
    """``aten.<name>.<overload>`` of the aten entries of an ExecuTorch support list."""
    names = set()
    for entry in ops:
        op = entry if isinstance(entry, torch._ops.OpOverload) else getattr(entry, "_op", None)
        if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten":
            names.add(op_name(op))
    return names


def _compare(ours: frozenset, theirs: set, profile: str) -> None:
    lacking = sorted(theirs - ours)
    message = (f"{profile}: ours {len(ours)} aten overloads, ExecuTorch's {len(theirs)}; "
               f"they have and we lack ({len(lacking)}): {lacking}")
    print(message)
    assert len(ours) > len(theirs), message


def test_more_int_ops_than_executorch():
    _compare(lowering.SUPPORTED_OPS_INT, normalized(TOSA_PRO_INT_SupportList), "INT")


def test_more_fp_ops_than_executorch():
    _compare(lowering.SUPPORTED_OPS_FP, normalized(TOSA_PRO_FP_SupportList), "FP")


def test_profile_sets_come_from_the_handlers():
    table = support_table()
    assert lowering.SUPPORTED_OPS == lowering.SUPPORTED_OPS_INT | lowering.SUPPORTED_OPS_FP
    assert set(table) == set(lowering.SUPPORTED_OPS)
    for name, support in table.items():
        for profile, ops in (("INT", lowering.SUPPORTED_OPS_INT), ("FP", lowering.SUPPORTED_OPS_FP)):
            served = any(profile in h.profiles for h in support.handlers)
            assert (name in ops) == served, (name, profile, support.handlers)


def test_copy_variants_lower_as_their_base_op():
    for name in lowering.SUPPORTED_OPS:
        _, op_base, overload = name.split(".")
        if not op_base.endswith("_copy"):
            continue
        op = getattr(getattr(torch.ops.aten, op_base), overload)
        assert op in REGISTRY or copy_variant_base(op) is not None or op_base in (
            "lift_fresh_copy", "_to_copy"), name


def _exercised_targets() -> set[str]:
    """aten overloads in the exported graphs of the per-op tests (tests/lowering/test_lowering_ops)."""
    seen = set()
    for cases in (CASES, DISCRETE_RESULT_CASES, FP_ONLY_CASES, INTEGER_CASES, INT_ONLY_INPUT_CASES):
        for model, inputs in cases.values():
            graph = torch.export.export(model.eval(), inputs).graph
            seen |= {op_name(n.target) for n in graph.nodes if n.op == "call_function"
                     and isinstance(n.target, torch._ops.OpOverload)}
    return seen


def test_every_op_counted_against_executorch_is_tested():
    """Each op both lists share appears in a per-op test that runs the TOSA graph."""
    theirs = normalized(TOSA_PRO_INT_SupportList) | normalized(TOSA_PRO_FP_SupportList)
    untested = sorted((theirs & lowering.SUPPORTED_OPS) - _exercised_targets())
    assert not untested, f"ops counted against ExecuTorch without a per-op test: {untested}"
