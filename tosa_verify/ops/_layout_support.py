"""Helpers shared by the reduction, data-layout, scatter/gather, image and type-conversion ops.

* Level 8K limits (the level the conformance suite and ``tosa_reference_model`` default to) and
  the argument-rank checks that use them.
* Reading SHAPE-typed operands (int64 arrays from CONST_SHAPE) as Python ints.
* Correctly rounded conversion of float64 values to any TOSA floating-point dtype.
"""

from __future__ import annotations

import numpy as np

from .registry import OpCall


#: TOSA float dtype -> (significand bits incl. the implicit one, minimum normal exponent,
#: largest finite value, has an infinity). FP8E4M3 has no infinity: overflow gives NaN (OCP
#: non-saturating mode), as do the spec's "outside the representable range" rules.
def check_rank(call: OpCall, rank: int, lo: int, hi: int, what: str) -> None:
    """ERROR_IF the rank of an argument is outside its spec range (``hi`` is MAX_RANK or fixed)."""
    call.error_if(rank < lo or rank > hi, f"rank({what}) = {rank} not in [{lo}, {hi}]")


def shape_input(call: OpCall, i: int, length: int | None, what: str) -> list[int]:
    """Values of SHAPE operand ``i`` as Python ints; ERROR_IF it is not a SHAPE of ``length``."""
    call.error_if(call.in_dtype(i) != "SHAPE", f"{what} is {call.in_dtype(i)}, not a shape_t")
    values = np.asarray(call.inputs[i]).reshape(-1)
    if length is not None:
        call.error_if(values.size != length, f"length({what}) = {values.size} != {length}")
    return [int(v) for v in values]


def check_same_dtype(call: OpCall, allowed: tuple[str, ...], *inputs: int) -> str:
    """ERROR_IF the listed inputs and output 0 do not share one dtype from ``allowed``."""
    dtype = call.out_dtype()
    call.error_if(dtype not in allowed, f"in_out_t {dtype} not supported")
    for i in inputs:
        call.error_if(
            call.in_dtype(i) != dtype, f"input {i} is {call.in_dtype(i)}, output is {dtype}"
        )
    return dtype


