"""Short differential fuzzing run: the interpreter and the reference model must agree.

Integer results must be bit-exact, float results within the producing op's compliance mode, and
invalid / unpredictable graphs must be rejected the same way by both. The long run (10,000
graphs, exploring new seeds) is ``python benchmarks/fuzz_long.py``; this suite is derandomized
so CI stays reproducible.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import tosa_verify
from tosa_verify.diff import diff

from .builder import RandomDraw
from .differential import run_case
from .strategies import INT_BUILDERS, fp_cases, multi_op_cases, single_op_cases
from .strategies_11 import V11_BUILDERS, build_v11, v11_cases

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check(case) -> None:
    outcome = run_case(case)
    assert outcome.ok, f"{case!r}: {outcome.detail}"


def _each(strategy, examples: int) -> None:
    """Check ``examples`` cases drawn from ``strategy``."""

    @settings(FUZZ, max_examples=examples)
    @given(strategy)
    def inner(case):
        _check(case)

    inner()


@pytest.mark.parametrize("kind", sorted(INT_BUILDERS))
def test_every_int_op_kind(kind):
    _each(single_op_cases([kind]), 4)


@pytest.mark.parametrize("kind", sorted(V11_BUILDERS))
def test_every_v11_kind(kind):
    """The TOSA 1.1 draft operators (shape ops, MATMUL_T, ROW_GATHER, adaptive pools, MX)."""
    _each(v11_cases([kind]), 6)


def test_block_scaled_matmul_t_cases():
    """MATMUL_T with block-scaled operands (graph inputs as (values, scales) pairs): the first
    eight such graphs of the seeded MATMUL_T builder agree with the reference model."""
    checked = 0
    for seed in range(200):
        case = build_v11(RandomDraw(seed), seed, "MATMUL_T")
        if any(isinstance(v, tuple) for v in case.inputs.values()):
            _check(case)
            checked += 1
            if checked == 8:
                return
    raise AssertionError(f"only {checked} block-scaled MATMUL_T graphs in 200 seeds")


@settings(FUZZ, max_examples=80)
@given(single_op_cases())
def test_single_int_ops(case):
    _check(case)


@settings(FUZZ, max_examples=50)
@given(fp_cases())
def test_single_fp_ops(case):
    _check(case)


@settings(FUZZ, max_examples=40)
@given(multi_op_cases())
def test_small_quantized_networks(case):
    _check(case)


@settings(FUZZ, max_examples=12)
@given(multi_op_cases())
def test_capture_diff_agrees_on_every_tensor(case):
    """Capture mode on both sides (graph rewrite + re-serialization) agrees tensor by tensor."""
    report = diff(case.data, case.inputs)
    if report.error:  # both rejected the graph (e.g. a REQUIRE failed): nothing to compare
        with pytest.raises(tosa_verify.TosaError):
            tosa_verify.run(case.data, case.inputs)
        return
    assert report.ok, report.format_table(all_ops=False)
