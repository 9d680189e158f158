"""Shape operators (spec chapter "Shape Operators"): CONST_SHAPE.

A TOSA 1.0 flatbuffer stores a shape value in the block's ``shapes`` list (``TosaShape``: name,
rank, data as little-endian int64); the CONST_SHAPE operator names it as its output, the same way
CONST names a data tensor. Shape values are ``int64`` arrays of shape ``(rank,)`` in the
interpreter (working dtype of SHAPE).
"""

from __future__ import annotations

import numpy as np

from .registry import OpCall, register


@register("CONST_SHAPE")
def const_shape(call: OpCall) -> list[np.ndarray]:
    """CONST_SHAPE: ``output = values``, the data stored on the output shape declaration."""
    call.check_arity(0, 1)
    decl = call.output_decls[0]
    call.error_if(decl.dtype != "SHAPE", f"CONST_SHAPE output {decl.name!r} is {decl.dtype}, not shape_t")
    call.error_if(decl.data is None, f"CONST_SHAPE output {decl.name!r} has no values")
    values = np.asarray(decl.data, dtype=np.int64)
    call.error_if(
        values.shape != tuple(decl.shape),
        f"CONST_SHAPE values have {values.size} elements, the shape declares rank {list(decl.shape)}",
    )
    return [values]
