"""FP32 SIGMOID/TANH kernels against the fp64 reference under the tosa-tools compliance verifier.

The prepared FP32 TANH evaluates in float32 (see ``tosa_verify.ops.activation``): its error must
stay within the spec's ABS_ERROR bound on the inputs where float32 evaluation is hardest (around
zero, where the bound's 0.5 floor applies; subnormals; the range where tanh saturates; the
infinities). SIGMOID keeps its float64 evaluation and must equal it bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import tosa_reference_model as reference_model
import tosa_serializer as ts

import tosa_verify
from tosa_verify import reference
from tosa_verify.compare import compare, verifier_available


def _edge_values() -> np.ndarray:
    """Float32 inputs covering every binade from subnormal to overflow, both signs, plus a
    dense sweep of [-10, 10] and the special values."""
    rng = np.random.default_rng(17)
    binades = np.ldexp(1.0 + rng.random(2 * 276), np.repeat(np.arange(-149, 127), 2))
    dense = np.linspace(-10.0, 10.0, 4001)
    near_zero = np.linspace(-1e-3, 1e-3, 801)
    special = [0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38, 9.0, 9.01, 8.9]
    values = np.concatenate([binades, -binades, dense, near_zero, special]).astype(np.float32)
    return values.reshape(1, -1)


def _graph(op: str, shape: list[int]) -> bytes:
    graph = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    graph.addInputTensor(ts.TosaSerializerTensor("x", shape, ts.DType.FP32, data=None))
    out = graph.addIntermediate(shape, ts.DType.FP32)
    attr = ts.TosaSerializerAttribute()
    getattr(attr, f"{op.capitalize()}Attribute")()
    graph.addOperator(getattr(ts.Op, op), ["x"], [out.name], attr)
    graph.addOutputTensor(out)
    return bytes(graph.serialize())


@pytest.mark.parametrize("op", ["TANH", "SIGMOID"])
def test_fp32_activation_within_compliance_on_edge_values(op: str) -> None:
    assert verifier_available()
    x = _edge_values()
    data = _graph(op, list(x.shape))
    (ours,) = tosa_verify.run(data, [x])
    precise = reference.run(data, [x], bounds=True)  # the reference model in fp64, with bounds
    (exact,), (bounds,) = precise.outputs, precise.bounds.values()
    verdict = compare(exact, ours, op=op, bounds=bounds)
    assert verdict.status in ("exact", "within_compliance"), verdict
    assert verdict.method in ("exact", "verifier")
    # the specified special values (activation chapter tables), sign of zero included
    at = {float(v): i for i, v in enumerate(x[0])}
    if op == "TANH":
        assert ours[0, at[np.inf]] == 1.0 and ours[0, at[-np.inf]] == -1.0
        assert np.signbit(ours[0, at[-0.0]]) and ours[0, at[-0.0]] == 0.0
    else:
        assert ours[0, at[np.inf]] == 1.0 and ours[0, at[-np.inf]] == 0.0 and ours[0, at[0.0]] == 0.5
        np.testing.assert_array_equal(ours, exact.astype(np.float32))  # float64, rounded once
    expected, status = reference_model.run(data, [x])
    assert status == reference_model.GraphStatus.TOSA_VALID
    assert compare(exact, expected[0], op=op, bounds=bounds).status in ("exact", "within_compliance")


def test_fp32_tanh_nan_propagates() -> None:
    x = np.array([[np.nan, -np.nan, 1.0]], np.float32)
    (ours,) = tosa_verify.run(_graph("TANH", [1, 3]), [x])
    assert np.isnan(ours[0, :2]).all() and ours[0, 2] == np.float32(np.tanh(1.0))
