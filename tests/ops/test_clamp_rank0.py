"""CLAMP of integer tensors of every rank, rank 0 included (its max/min yield numpy scalars, which
the prepared kernel must turn back into a 0-d array), against the official reference model."""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
from tosa_verify import reference
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.writer import to_flatbuffer

_NP = {"INT8": np.int8, "INT16": np.int16}


def _clamp_graph(shape: tuple[int, ...], dt: str, lo: int, hi: int) -> bytes:
    tensors = {"x": Tensor("x", shape, dt), "y": Tensor("y", shape, dt)}
    # (the bounds are serialized as the bytes of the input type)
    attrs = {"min_val": np.array([lo], _NP[dt]).tobytes(), "max_val": np.array([hi], _NP[dt]).tobytes(),
             "nan_mode": "PROPAGATE"}
    block = Block("main", [Operator("CLAMP", attrs, ["x"], ["y"])], tensors, ["x"], ["y"])
    return to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [block])]))


@pytest.mark.parametrize("dt", ["INT8", "INT16"])
@pytest.mark.parametrize("shape", [(), (1,), (2, 3)])
def test_integer_clamp_matches_the_reference_model(dt: str, shape: tuple[int, ...]) -> None:
    info = np.iinfo(_NP[dt])
    data = _clamp_graph(shape, dt, -20, 30)
    for value in (info.min, -21, -20, 0, 30, 31, info.max):
        x = np.full(shape, value, _NP[dt])
        ours = tosa_verify.run(data, [x])[0]
        expected = reference.run(data, [x])[0]
        assert ours.shape == expected.shape == shape and ours.dtype == expected.dtype
        np.testing.assert_array_equal(ours, expected)
