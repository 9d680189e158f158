"""Random valid TOSA graphs for differential fuzzing: the cases and the hypothesis strategies.

The pieces live by concern: :mod:`.builder` (draws, the ``tosa_serializer`` builder, shapes),
:mod:`.strategies_int` (INT-profile operators), :mod:`.strategies_fp` (floating-point operators)
and :mod:`.strategies_11` (the TOSA 1.1 draft operators). This module assembles them into cases:

* hypothesis strategies (:func:`single_op_cases`, :func:`multi_op_cases`, :func:`fp_cases`);
* the long run in ``benchmarks/fuzz_long.py``: ``case_from_seed(kind, seed)``, reproducible.

The names the other test modules import from here (``Builder``, ``RandomDraw``, the ``b_*``
builders) are re-exported.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from .builder import Builder, Draw, FuzzCase, HypothesisDraw, RandomDraw, nhwc_shape, small_shape
from .strategies_fp import FP_BUILDERS
from .strategies_int import INT_BUILDERS, b_conv, b_pool, b_rescale, reshape_to

#: Names other test modules import from here (they predate the split by concern).
__all__ = ["Builder", "FuzzCase", "RandomDraw", "b_conv", "b_pool", "b_rescale", "INT_BUILDERS",
           "build_single", "build_fp", "build_multi", "case_from_seed", "single_op_cases", "fp_cases",
           "multi_op_cases"]

# --------------------------------------------------------------------------- cases

#: Ops that can follow in a chain (shape-flexible, take any int tensor).
_CHAIN = ["RESCALE", "CLAMP", "TABLE", "CAST", "RESHAPE", "TRANSPOSE", "PAD", "ADD/SUB", "MUL",
          "REDUCE", "SLICE/TILE/REVERSE", "ELEMENTWISE", "UNARY", "CONCAT", "SELECT",
          "CONV2D", "DEPTHWISE_CONV2D", "MAX_POOL2D", "AVG_POOL2D", "MATMUL", "GATHER/SCATTER"]


def build_single(d: Draw, seed: int, kind: str | None = None) -> FuzzCase:
    """One INT-profile operator on fresh inputs."""
    kind = kind or d.choice(sorted(INT_BUILDERS))
    b = Builder(np.random.default_rng(seed))
    out = INT_BUILDERS[kind](d, b, None)
    return b.finish([out], label=f"single:{kind}:seed{seed}")


def build_fp(d: Draw, seed: int, kind: str | None = None) -> FuzzCase:
    """One floating-point operator."""
    kind = kind or d.choice(sorted(FP_BUILDERS))
    b = Builder(np.random.default_rng(seed))
    out = FP_BUILDERS[kind](d, b, None)
    return b.finish([out], label=f"fp:{kind}:seed{seed}")


def build_multi(d: Draw, seed: int) -> FuzzCase:
    """A small quantized network: an int8 input, 2-5 chained ops, then a RESCALE back to int8.

    Some intermediate tensors are also graph outputs.
    """
    b = Builder(np.random.default_rng(seed))
    x = b.input(nhwc_shape(d, 5, 3) if d.chance(60) else small_shape(d), "INT8")
    outputs = []
    for _ in range(d.int(2, 5)):
        kind = d.choice(_CHAIN)
        x = INT_BUILDERS[kind](d, b, x)
        if x.dtype == "INT48":  # only RESCALE consumes INT48
            x = b_rescale(d, b, x)
        if not x.shape:  # ARGMAX of a vector: rank 0; the builders want rank >= 1
            x = reshape_to(b, x, (1,))
        if int(np.prod(x.shape)) > 4096:  # keep graphs small: crop with a SLICE
            size = [min(s, 4) for s in x.shape]
            x = b.op("SLICE", [x, b.shape_const([0] * len(size)), b.shape_const(size)], tuple(size), x.dtype)
        if d.chance(20):
            outputs.append(x)
    if x.dtype in ("INT32", "INT48", "INT16") and d.chance(70):
        x = b_rescale(d, b, x, out_dtype="INT8")
    outputs.append(x)
    return b.finish(outputs, label=f"multi:seed{seed}")


@st.composite
def single_op_cases(draw, kinds: list[str] | None = None) -> FuzzCase:
    """Hypothesis strategy: one INT-profile operator graph."""
    d = HypothesisDraw(draw)
    kind = draw(st.sampled_from(sorted(kinds or INT_BUILDERS)))
    return build_single(d, draw(st.integers(0, 2**32 - 1)), kind)


@st.composite
def fp_cases(draw) -> FuzzCase:
    """Hypothesis strategy: one floating-point operator graph."""
    d = HypothesisDraw(draw)
    return build_fp(d, draw(st.integers(0, 2**32 - 1)))


@st.composite
def multi_op_cases(draw) -> FuzzCase:
    """Hypothesis strategy: a small multi-operator quantized graph."""
    d = HypothesisDraw(draw)
    return build_multi(d, draw(st.integers(0, 2**32 - 1)))


def case_from_seed(kind: str, seed: int) -> FuzzCase:
    """Reproducible case for the long run: ``kind`` is ``single``, ``multi``, ``fp``, ``v11`` or
    ``v11:<BUILDER>`` (one of :data:`fuzz.strategies_11.V11_BUILDERS`, e.g. ``v11:INT64``)."""
    d = RandomDraw(seed)
    if kind.startswith("v11"):
        from .strategies_11 import build_v11

        return build_v11(d, seed, kind.partition(":")[2] or None)
    if kind == "single":
        return build_single(d, seed)
    if kind == "fp":
        return build_fp(d, seed)
    return build_multi(d, seed)
