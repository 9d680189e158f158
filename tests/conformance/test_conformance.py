"""Every TOSA 1.0 operator against cases from the official generator and the reference model.

Cases are generated at test time (tosa-tools ``tosa_verif_build_tests``), so nothing here is an
expected value of ours: positives compare with ``tosa_reference_model`` (integers exactly, floats
through the tosa-tools verifier library), negatives must be rejected with TosaValidationError.
"""

from __future__ import annotations

import pytest

import tosa_verify

from .harness import OTHER_CONFIGS_11, SPEC_OPS, SPEC_OPS_11, check_op

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


#: Ops of the generated ``tosa.Op`` enum that tosa-tools' reference model rejects (it runs the
#: serializer's lowering of variables instead); we implement them from the spec all the same.
REFERENCE_REJECTS = {"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE"}


def _enum_ops() -> set[str]:
    import tosa.Op as op_enum

    return {k for k in vars(op_enum.Op) if not k.startswith("_")} - {"UNKNOWN"}


def test_supported_ops_are_the_op_enum() -> None:
    """SUPPORTED_OPS is every op of the tosa.Op enum: all the reference model runs, plus the
    variable ops it rejects (checked against the reference in tests/ops)."""
    enum_ops = _enum_ops()
    runs = enum_ops - REFERENCE_REJECTS
    supported = set(tosa_verify.SUPPORTED_OPS)
    assert not runs - supported, f"reference-model ops we do not implement: {sorted(runs - supported)}"
    assert supported == enum_ops, (
        f"not in SUPPORTED_OPS: {sorted(enum_ops - supported)}; not in tosa.Op: {sorted(supported - enum_ops)}"
    )
    assert REFERENCE_REJECTS <= set(HAND_MADE)
    # every enum op has a conformance test here (generated, or hand-made beside it)
    assert set(SPEC_OPS) | set(SPEC_OPS_11) == enum_ops, sorted(enum_ops ^ (set(SPEC_OPS) | set(SPEC_OPS_11)))


#: TOSA 1.1 ops whose generated cases take longest; the default run covers them in the sweep and
#: through one cheaper relative each (MATMUL_T, CAST_FROM_BLOCK_SCALED).
SLOW_11 = {"CONV2D_BLOCK_SCALED", "MATMUL_T_BLOCK_SCALED"}


@pytest.mark.parametrize("op", [op for op in SPEC_OPS_11 if op not in SLOW_11])
def test_generated_cases_11(op: str, tmp_path) -> None:
    """The TOSA 1.1 draft operators against the 1.1 cases the generator makes."""
    positives, negatives, failures = check_op(op, tmp_path)
    assert positives > 0, f"the generator produced no positive cases for {op}"
    assert negatives > 0, f"the generator produced no ERROR_IF cases for {op}"
    assert not failures, f"{len(failures)} of {positives + negatives} cases fail:\n" + "\n".join(failures[:25])


@pytest.mark.sweep
@pytest.mark.parametrize("op", SPEC_OPS_11)
def test_generated_cases_11_sweep(op: str, tmp_path) -> None:
    """The 1.1 sweep: every 1.1 op, more cases per dtype, every ERROR_IF kind three times, seed 7."""
    positives, negatives, failures = check_op(op, tmp_path, maximum=12, num_errorifs=3, seed=7)
    assert positives > 0, f"the generator produced no positive cases for {op}"
    assert not failures, f"{len(failures)} of {positives + negatives} cases fail:\n" + "\n".join(failures[:25])


@pytest.mark.sweep
@pytest.mark.parametrize("config", sorted(OTHER_CONFIGS_11))
@pytest.mark.parametrize("op", SPEC_OPS_11)
def test_generated_cases_11_other_seeds(op: str, config: str, tmp_path) -> None:
    """The 1.1 operators on cases generated with other seeds and parameters (harness.OTHER_CONFIGS_11)."""
    positives, negatives, failures = check_op(op, tmp_path, **OTHER_CONFIGS_11[config])
    # dims1-12 leaves MATMUL_T_BLOCK_SCALED only ERROR_IF cases (the generator drops dot products
    # under 1000 multiply-adds); its positives come from the other configs
    assert positives + negatives > 0, f"the generator produced no cases for {op} ({config})"
    assert not failures, f"{len(failures)} of {positives + negatives} cases fail ({config}):\n" + "\n".join(failures[:25])


#: TOSA 1.0 operators the 1.1 draft gives i64_t rows (EXT-INT64) that tosa-tools generates and
#: its reference model runs (the data-layout ops, CONST and IDENTITY move int64 values untouched).
INT64_OPS = (
    "ABS ADD ARGMAX ARITHMETIC_RIGHT_SHIFT BITWISE_AND BITWISE_NOT BITWISE_OR BITWISE_XOR CAST CLZ CONCAT CONST "
    "EQUAL GATHER GREATER GREATER_EQUAL IDENTITY INTDIV LOGICAL_LEFT_SHIFT LOGICAL_RIGHT_SHIFT MAXIMUM MINIMUM MUL "
    "NEGATE PAD REDUCE_MAX REDUCE_MIN REDUCE_SUM RESHAPE REVERSE SCATTER SELECT SLICE SUB TILE TRANSPOSE"
).split()


@pytest.mark.sweep
@pytest.mark.parametrize("op", INT64_OPS)
def test_generated_int64_cases(op: str, tmp_path) -> None:
    """The EXT-INT64 rows of 1.0 operators: the generator's i64 cases of a TOSA 1.1 graph."""
    positives, negatives, failures = check_op(op, tmp_path, tosa11=True, extra_args=("--target-dtype", "int64"),
                                              maximum=4)
    assert positives > 0, f"the generator produced no int64 cases for {op}"
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
