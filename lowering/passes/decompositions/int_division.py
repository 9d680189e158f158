"""Integer ``torch.fmod`` in terms of ops with a TOSA visitor: ``x - trunc(x / y) * y``, the
truncated quotient by the elementwise visitor's INTDIV (``div.Tensor_mode(rounding_mode="trunc")``,
:func:`lowering.ops.elementwise.integer_division`).

Called by :func:`.arith.fmod`, which claims ``aten.fmod.Tensor`` / ``aten.fmod.Scalar`` and
keeps the float path. Integer ``torch.remainder`` (the sign of the divisor) lowers through
:func:`.arith.remainder` (``x - floor_div(x, y) * y``).

Claims (both profiles: integer tensors are not quantized in INT, so the arithmetic is the
same exact int32 arithmetic in FP and INT):
- int8 / int16 / int32 / int64 (carried as int32, values within int32) tensors, a tensor or
  integer python divisor: exact, with C's sign rule (the result takes the dividend's sign;
  INTDIV rounds toward zero, so ``x - q * y`` is ``x``'s remainder, ``|r| < |y|``).
- Not covered: a float divisor of an integer tensor (PyTorch divides in float: the float path
  after promotion), division by zero (PyTorch raises), ``int32.min`` by ``-1`` (INTDIV's
  quotient overflows int32 where PyTorch's fmod gives 0).
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ...graph_utils import val
from ._common import number_const

aten = torch.ops.aten

_INTEGER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


def integer_fmod(gm, n: fx.Node, b) -> fx.Node | None:
    """``fmod(x, y)`` of an integer tensor ``x`` by an integer tensor or python int ``y``:
    ``x - div(x, y, rounding_mode="trunc") * y`` in PyTorch's promoted integer dtype; None for
    anything else (a float operand: not integer arithmetic).

    Example:
        >>> from lowering.graph_utils import Builder
        >>> g = fx.Graph(); x = g.placeholder("x"); x.meta["tv_val"] = torch.tensor([7, -7])
        >>> n = g.call_function(aten.fmod.Scalar, (x, 3)); gm = fx.GraphModule(torch.nn.Module(), g)
        >>> str(integer_fmod(gm, n, Builder(g, n)).target)
        'aten.sub.Tensor'
    """
    x, y = n.args[0], n.args[1]
    vx = val(x)
    if vx is None or vx.dtype not in _INTEGER_DTYPES:
        return None
    if isinstance(y, fx.Node):
        vy = val(y)
        if vy is None or vy.dtype not in _INTEGER_DTYPES:
            return None
        dtype = torch.result_type(vx, vy)
        x, y = (t if val(t).dtype == dtype else b(aten._to_copy.default, t, dtype=dtype) for t in (x, y))
    elif isinstance(y, int) and not isinstance(y, bool):
        y = number_const(gm, b, y, vx.dtype, x, "divisor")
    else:
        return None
    quotient = b(aten.div.Tensor_mode, x, y, rounding_mode="trunc")
    return b(aten.sub.Tensor, x, b(aten.mul.Tensor, quotient, y))
