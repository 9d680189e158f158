"""Seeded random inputs for a graph (the ``diff`` CLI's default inputs, tests, benchmarks)."""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info, join_block_scaled, to_reference_form
from ..errors import TosaInputError
from ..graph import load
from ..interpreter import Source
from ._common import _decl

#: Ranges of :func:`random_inputs` for integer dtypes (inclusive).
INT_RANGES = {
    "BOOL": (0, 1),
    "INT4": (-7, 7),  # the spec's int4_t range (-8 excluded)
    "INT8": (-128, 127),
    "INT16": (-32768, 32767),
    "INT32": (-(1 << 16), 1 << 16),
    "INT48": (-(1 << 24), 1 << 24),
    "INT64": (-(1 << 24), 1 << 24),
    "SHAPE": (1, 4),
}


def random_inputs(graph: Source, seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for every input of ``graph``'s entry block, by name, in the reference form.

    Integers are uniform over the dtype's range (INT8/INT16 full range, INT4 [-7, 7]; INT32 and wider
    within +-2**16 / +-2**24 so sums and products stay representable); floats are standard
    normal, rounded to the input format.

    >>> from tosa_verify.graph import Block, Graph, Region, Tensor
    >>> g = Graph((1, 0, 0, False), [Region("main", [Block("main", [], {"x": Tensor("x", (2,), "INT8")}, ["x"], ["x"])])])
    >>> random_inputs(g, seed=1)["x"].dtype
    dtype('int8')
    """
    graph = load(graph)
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name in graph.main.inputs:
        decl = _decl(graph.main, name)
        if decl is None:
            raise TosaInputError(f"graph input {name!r} is not declared")
        info = dtype_info(decl.dtype)
        if info.block:  # block scaled: random values and scales, joined
            scales_shape = (*decl.shape[:-1], decl.shape[-1] // info.block) if decl.shape else ()
            value = join_block_scaled(_random_value(rng, dtype_info(info.value), decl.shape),
                                      _random_value(rng, dtype_info(info.scale), scales_shape), info.name)
        else:
            value = _random_value(rng, info, decl.shape)
        out[name] = to_reference_form(np.asarray(value), decl.dtype)
    return out


def _random_value(rng: np.random.Generator, info, shape: tuple[int, ...]) -> np.ndarray:
    if info.name == "FP8UE8M0":
        # block scales: powers of two near 1 (a normal sample would be mostly NaN codes)
        return np.exp2(rng.integers(-4, 5, shape)).astype(info.working)
    if info.is_float:
        return rng.standard_normal(shape).astype(info.working)
    if info.name == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    lo, hi = INT_RANGES.get(info.name, (info.min, info.max))
    return rng.integers(lo, hi, shape, endpoint=True).astype(info.working)
