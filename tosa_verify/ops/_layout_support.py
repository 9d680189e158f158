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
    if rank < lo or rank > hi:  # (the message is formatted only for a failing check)
        call.fail(f"rank({what}) = {rank} not in [{lo}, {hi}]")


def shape_input(call: OpCall, i: int, length: int | None, what: str) -> list[int]:
    """Values of SHAPE operand ``i`` as Python ints; ERROR_IF it is not a SHAPE of ``length``."""
    if call.in_dtype(i) != "SHAPE":
        call.fail(f"{what} is {call.in_dtype(i)}, not a shape_t")
    values = np.asarray(call.inputs[i]).reshape(-1)
    if length is not None and values.size != length:
        call.fail(f"length({what}) = {values.size} != {length}")
    return values.tolist() if values.dtype.kind in "iu" else [int(v) for v in values]


def check_same_dtype(call: OpCall, allowed: tuple[str, ...], *inputs: int) -> str:
    """ERROR_IF the listed inputs and output 0 do not share one dtype from ``allowed``."""
    dtype = call.out_dtype()
    if dtype not in allowed:
        call.fail(f"in_out_t {dtype} not supported")
    decls = call.input_decls
    for i in inputs:
        if decls[i].dtype != dtype:
            call.fail(f"input {i} is {call.in_dtype(i)}, output is {dtype}")
    return dtype


