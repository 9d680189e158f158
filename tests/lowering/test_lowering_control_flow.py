"""``torch.cond`` / ``torch.while_loop`` lowered to COND_IF / WHILE_LOOP with their sub-graphs
as TOSA regions: every branch and several trip counts checked against PyTorch (FP) and the
fake-quant model (INT) on the reference model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lowering_checks import max_step_error

import lowering
import tosa_verify
from lowering.serialize import read_tosa_ops


class CondConvs(torch.nn.Module):
    """Branches with their own weights (constants of the sub-graphs) and a nested cond."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Conv1d(2, 3, 3, padding=1)
        self.b = torch.nn.Conv1d(2, 3, 3, padding=1)

    def forward(self, x):
        def then_(x):
            return torch.cond(x.mean() > 0.5, lambda y: self.a(y).sigmoid(),
                              lambda y: self.a(y) * 2.0, (x,))

        def else_(x):
            return self.b(x) - x.sum()

        return torch.cond(x.sum() > 0, then_, else_, (x,)), x + 1.0


class DoubleUntil(torch.nn.Module):
    """Doubles ``x`` and counts the iterations until ``x.sum()`` reaches ``limit``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("limit", torch.tensor([40.0]))

    def forward(self, x):
        def cond_fn(v, n, limit):
            return (v.sum() < limit).squeeze()

        def body_fn(v, n, limit):
            return v * 2.0, n + 1.0

        v, n = torch.ops.higher_order.while_loop(cond_fn, body_fn, (x, torch.zeros(1) + x.mean()),
                                                 (self.limit,))
        return v, n


#: inputs taking each branch of CondConvs: inner then, inner else, outer else
COND_INPUTS = [torch.full((1, 2, 6), 0.9), torch.full((1, 2, 6), 0.1),
               -torch.linspace(0.1, 1.0, 12).reshape(1, 2, 6)]
#: inputs looping 1, 2 and 0 times... and 5 times
LOOP_INPUTS = [torch.full((2, 4), 3.0), torch.full((2, 4), 1.5), torch.full((2, 4), 6.0),
               torch.full((2, 4), 0.3)]


def _regions(buf: bytes) -> int:
    from tosa.TosaGraph import TosaGraph

    return TosaGraph.GetRootAsTosaGraph(buf, 0).RegionsLength()


def _fp_matches_torch(m, inputs):
    """Lower ``m`` (FP) on the first input; every input's outputs match PyTorch's."""
    m = m.eval()
    lm = lowering.lower(m, (inputs[0],), profile="FP")
    assert lm.cpu_nodes == []
    for x in inputs:
        with torch.no_grad():
            expected = m(x)
        for e, g in zip(expected, lm.run(x), strict=True):
            torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    return lm


@pytest.mark.slow
def test_cond_fp_every_branch():
    lm = _fp_matches_torch(CondConvs(), COND_INPUTS)
    assert read_tosa_ops(lm.tosa).count("COND_IF") == 2
    assert _regions(lm.tosa) == 5  # main, then, else, inner then, inner else


@pytest.mark.slow
def test_cond_int_every_branch():
    m = CondConvs().eval()
    lm = lowering.lower(m, (COND_INPUTS[0],), profile="INT",
                        calibration=[(x,) for x in COND_INPUTS])
    assert lm.cpu_nodes == [] and "COND_IF" in lm.op_counts
    for x in COND_INPUTS:
        assert max_step_error(lm, (x,)) <= 1
    _interpreter_agrees(lm, COND_INPUTS)
    # the fake-quant model follows the float model (each branch was calibrated)
    for x in COND_INPUTS:
        with torch.no_grad():
            q, f = lm.quantized_model(x)[0], m(x)[0]
        assert float((q - f).abs().max()) < 0.05 * float(f.abs().max()) + 0.05


def _interpreter_agrees(lm, inputs):
    """Our interpreter runs the lowered control flow exactly as the reference model does."""
    for x in inputs:
        raw = lm.quantize_inputs(x)
        ours = tosa_verify.run(lm.tosa, raw)
        for o, r in zip(ours, lm.run_raw(raw), strict=True):
            assert o.shape == np.asarray(r).shape and np.array_equal(o, np.asarray(r)), (o, r)


def test_while_fp_trip_counts():
    lm = _fp_matches_torch(DoubleUntil(), LOOP_INPUTS)
    assert lm.op_counts.get("WHILE_LOOP") == 1
    _interpreter_agrees(lm, LOOP_INPUTS)


@pytest.mark.slow
def test_while_int_trip_counts():
    m = DoubleUntil().eval()
    lm = lowering.lower(m, (LOOP_INPUTS[0],), profile="INT",
                        calibration=[(x,) for x in LOOP_INPUTS])
    assert lm.cpu_nodes == [] and lm.op_counts.get("WHILE_LOOP") == 1
    for x in LOOP_INPUTS:
        assert max_step_error(lm, (x,)) <= 1
        with torch.no_grad():
            count = m(x)[1] - x.mean()
        got = lm.run(x)[1] - x.mean()  # the trip count survives quantization
        assert abs(float(got) - float(count)) < 0.5
    _interpreter_agrees(lm, LOOP_INPUTS)


def test_unsupported_op_in_a_branch_names_it():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda y: torch.special.bessel_j0(y),
                              lambda y: y - 1.0, (x,))

    lm = lowering.lower(M(), (torch.ones(3),), profile="FP")
    assert lm.tosa is None
    reasons = {c.node: c.reason for c in lm.cpu_nodes}
    assert "cond" in reasons and "bessel_j0" in reasons["cond"], reasons
    assert "getitem" in reasons


@pytest.mark.parametrize("profile", ["FP", "INT"])
def test_branch_returning_a_constant(profile):
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda: torch.zeros(4), lambda: torch.full((4,), 2.5), ())

    xs = [torch.ones(4), -torch.ones(4)]
    lm = lowering.lower(M(), (xs[0],), profile=profile, calibration=[(x,) for x in xs])
    for x in xs:
        expected = M()(x)
        got = lm.run(x)[0]
        torch.testing.assert_close(got, expected, atol=2.5 / 255 + 1e-6, rtol=0)
    _interpreter_agrees(lm, xs)
