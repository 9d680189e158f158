"""The small-tensor integer MATMUL kernel (``ops._conv_small.small_matmul``) against the
official reference model, bit for bit, with operands at their types' extremes (the static
exactness bound's edge) and zero points."""

from __future__ import annotations

import numpy as np
import pytest

import tosa_verify
from tosa_verify import reference
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor
from tosa_verify.plan import plan_for
from tosa_verify.writer import to_flatbuffer

_NP = {"INT8": np.int8, "INT16": np.int16}


@pytest.mark.parametrize(("dt", "shapes", "a_zp", "b_zp"), [
    ("INT8", ((2, 5, 40), (2, 40, 3)), -128, 127),
    ("INT8", ((1, 4, 7), (1, 7, 6)), 0, 0),
    ("INT16", ((2, 3, 33), (2, 33, 4)), 0, 0),
])
def test_small_integer_matmul_matches_the_reference_model(dt, shapes, a_zp, b_zp) -> None:
    rng = np.random.default_rng(shapes[0][2])
    info = np.iinfo(_NP[dt])
    a = rng.integers(info.min, int(info.max) + 1, shapes[0]).astype(_NP[dt])
    b = rng.integers(info.min, int(info.max) + 1, shapes[1]).astype(_NP[dt])
    a[0, 0, :] = info.max if a_zp < 0 else info.min  # the largest |a - a_zp| along a whole row ...
    b[0, :, 0] = info.min if b_zp > 0 else info.max  # ... times the largest |b - b_zp|
    out_t = "INT32" if dt == "INT8" else "INT48"
    n, h, _ = shapes[0]
    tensors = {"a": Tensor("a", a.shape, dt), "b": Tensor("b", b.shape, dt),
               "azp": Tensor("azp", (1,), dt, np.array([a_zp], _NP[dt])),
               "bzp": Tensor("bzp", (1,), dt, np.array([b_zp], _NP[dt])),
               "y": Tensor("y", (n, h, shapes[1][2]), out_t)}
    ops = [Operator("CONST", {}, [], ["azp"]), Operator("CONST", {}, [], ["bzp"]),
           Operator("MATMUL", {}, ["a", "b", "azp", "bzp"], ["y"])]
    data = to_flatbuffer(Graph((1, 0, 0, False), [Region("main", [Block("main", ops, tensors, ["a", "b"], ["y"])])]))
    graph = tosa_verify.load(data)
    assert plan_for(graph.main).steps[-1].fn.__name__ == "small_matmul"
    np.testing.assert_array_equal(tosa_verify.run(graph, [a, b])[0], reference.run(data, [a, b])[0])
