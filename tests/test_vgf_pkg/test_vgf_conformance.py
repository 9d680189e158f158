"""Conformance cases (generated at test time by tosa-tools) run on VGF agree with the reference model.

For each positive case the generator wrote, VGF runs the graph on the case's inputs. Integer
outputs must equal ``tosa_reference_model``'s (and so the interpreter's) exactly; float outputs
are judged by the tosa-tools verifier under the case's compliance mode with the reference
model's precise (FP64) result and bounds -- the same judgement the interpreter gets
(``conformance.harness.judge_outputs``). A case the model converter refuses (a dtype or an
operator form VGF does not take, e.g. INT48 or BF16) is counted, not failed, but every op here
must have cases VGF accepts. Nothing here knows an expected value.
"""

from __future__ import annotations

import pytest

import vgf
from tosa_verify.errors import TosaError

pytestmark = pytest.mark.usefixtures("vgf_device")

#: Ops with few generated cases, in the default run (one VGF run per case).
DEFAULT_OPS = ["ADD", "CLAMP", "MAX_POOL2D"]
#: More operators (CONV2D, RESCALE and MATMUL have 35-45 cases each), with -m slow.
SLOW_OPS = ["CONV2D", "RESCALE", "MATMUL", "DEPTHWISE_CONV2D", "AVG_POOL2D", "MUL", "TABLE", "TRANSPOSE", "CONCAT", "PAD", "SIGMOID",
            "TANH", "REDUCE_SUM", "RESHAPE", "SLICE", "EXP", "RSQRT", "SUB", "MAXIMUM",
            # surveyed for docs/vgf.md; GATHER and SCATTER of BOOL values are refused by the converter
            "TRANSPOSE_CONV2D", "ERF", "LOG", "RECIPROCAL", "TILE", "GATHER", "SCATTER", "SELECT",
            "REDUCE_MAX", "ARGMAX"]


def _check_op_on_vgf(op: str, workdir) -> tuple[int, list[str], list[str]]:
    from conformance.harness import (  # tests/conformance
        find_cases,
        generate,
        judge_outputs,
        run_reference_cli,
    )

    root = generate(op, maximum=1, num_errorifs=1)
    agreed, refused, failures = 0, [], []
    for case in find_cases(root):
        if case.negative:
            continue
        ref = run_reference_cli(case, workdir / case.name)
        if ref.status != "VALID":
            continue  # a REQUIRE failed in the reference: any result conforms
        graph_file = case.path / case.desc["tosa_file"]
        try:
            ours = vgf.run(graph_file, case.inputs())
        except vgf.VgfCompileError as exc:
            refused.append(f"{case.name}: {exc}")
            continue
        except TosaError as exc:
            failures.append(f"{case.name}: {type(exc).__name__}: {exc}")
            continue
        reason = judge_outputs(case, ours, ref, workdir)
        if reason:
            failures.append(reason)
        else:
            agreed += 1
    return agreed, refused, failures


def _assert_conforms(op: str, tmp_path) -> None:
    agreed, refused, failures = _check_op_on_vgf(op, tmp_path)
    assert not failures, f"{len(failures)} {op} cases disagree on VGF:\n" + "\n".join(failures[:20])
    assert agreed > 0, f"VGF ran no {op} case; refused: " + "\n".join(refused[:10])


@pytest.mark.parametrize("op", DEFAULT_OPS)
def test_conformance_cases_agree_on_vgf(op, tmp_path):
    _assert_conforms(op, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("op", SLOW_OPS)
def test_more_conformance_cases_agree_on_vgf(op, tmp_path):
    _assert_conforms(op, tmp_path)
