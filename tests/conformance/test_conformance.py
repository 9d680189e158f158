"""Every TOSA 1.0 operator against cases from the official generator and the reference model.

Cases are generated at test time (tosa-tools ``tosa_verif_build_tests``), so nothing here is an
expected value of ours: positives compare with ``tosa_reference_model`` (integers exactly, floats
through the tosa-tools verifier library), negatives must be rejected with TosaValidationError.
"""

from __future__ import annotations

import pytest

import tosa_verify

from .harness import SPEC_OPS, check_op

#: Ops the generator produces no standalone cases for; each is covered by hand-made graphs
#: checked against the reference model in tests/ops (the test file is named beside it).
HAND_MADE = {
    "CUSTOM": "tests/ops/test_control_flow_variables.py",
    # tosa-tools' generator has no variable tests, and its reference model rejects these op
    # codes; the hand-made tests compare them with the reference on the serializer's lowering.
    "VARIABLE": "tests/ops/test_control_flow_variables.py",
    "VARIABLE_READ": "tests/ops/test_control_flow_variables.py",
    "VARIABLE_WRITE": "tests/ops/test_control_flow_variables.py",
}


@pytest.mark.parametrize("op", [op for op in SPEC_OPS if op not in HAND_MADE])
def test_generated_cases(op: str, tmp_path) -> None:
    positives, negatives, failures = check_op(op, tmp_path)
    assert positives > 0, f"the generator produced no positive cases for {op}"
    assert not failures, f"{len(failures)} of {positives + negatives} cases fail:\n" + "\n".join(failures[:25])


def test_every_spec_op_is_registered() -> None:
    missing = sorted(set(SPEC_OPS) - set(tosa_verify.SUPPORTED_OPS))
    assert not missing, f"ops of TOSA 1.0 without an implementation: {missing}"


@pytest.mark.sweep
@pytest.mark.parametrize("op", [op for op in SPEC_OPS if op not in HAND_MADE])
def test_generated_cases_sweep(op: str, tmp_path) -> None:
    """The larger sweep: more cases per dtype, every ERROR_IF kind three times, another seed."""
    positives, negatives, failures = check_op(op, tmp_path, maximum=12, num_errorifs=3, seed=7)
    assert positives > 0, f"the generator produced no positive cases for {op}"
    assert not failures, f"{len(failures)} of {positives + negatives} cases fail:\n" + "\n".join(failures[:25])
