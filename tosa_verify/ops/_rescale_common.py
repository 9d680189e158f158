"""The common RESCALE of lowered graphs, recognised in one pass of Python's comparisons.

Most RESCALEs of a quantized graph are per tensor, signed, ``scale32`` with single (or inexact)
rounding, with constant parameters that pass every check. :func:`common_rescale` tells such a
RESCALE from the rest by testing, with plain comparisons and without formatting anything, the
conditions under which each ERROR_IF and scale REQUIRE of ``type_conversion._setup`` passes; every
other RESCALE (anything unusual, and any that fails a check) goes the general way, which makes
the checks in the spec's order and reports the first failure with its own message.

>>> common_rescale(call)     # doctest: +SKIP
('INT8', 'INT32', 'SINGLE_ROUND', 17, 0, 1073741824, 30)
"""

from __future__ import annotations

import numpy as np

from ._levels import MAX_RANK
from .registry import OpCall

_SIGNED = frozenset(("INT8", "INT16", "INT32"))
_ONE = (1,)
#: the attributes of the common RESCALE (a dict compared by value: ``1 == True`` as ``bool(1)``)
_SINGLE = {"input_unsigned": False, "output_unsigned": False, "per_channel": False,
           "rounding_mode": "SINGLE_ROUND", "scale32": True}
_INEXACT = {**_SINGLE, "rounding_mode": "INEXACT_ROUND"}


def common_rescale(call: OpCall) -> tuple | None:
    """``(in_t, out_t, rounding_mode, input_zp, output_zp, multiplier, shift)`` of a RESCALE
    (constant parameters in ``call.inputs[1:]``) that passes every check of the general prepare
    and is per tensor, signed, scale32, single or inexact rounding, with a non-empty input; None
    for any other (the general prepare decides, with its messages).
    """
    outs = call.output_decls
    attrs = call.operator.attrs
    # (one C-level comparison each: the attributes as the loader gives them, the declarations'
    # types and shapes of the four parameters)
    if len(outs) != 1 or len(call.input_decls) != 5 or (attrs != _SINGLE and attrs != _INEXACT):
        return None
    x, mul, shift, izp, ozp = call.input_decls
    in_t, out_t, shape = x.dtype, outs[0].dtype, x.shape
    # (shapes compared as tuples: a list, as a caller may build, goes the general way)
    if in_t not in _SIGNED or out_t not in _SIGNED or type(shape) is not tuple or len(shape) > MAX_RANK \
            or outs[0].shape != shape or 0 in shape \
            or (mul.dtype, shift.dtype, izp.dtype, ozp.dtype, mul.shape, shift.shape, izp.shape, ozp.shape) \
            != ("INT32", "INT8", in_t, out_t, _ONE, _ONE, _ONE, _ONE):
        return None
    values = call.inputs
    for value in values[1:]:
        if type(value) is not np.ndarray or value.size != 1:
            return None
    input_zp, output_zp = int(values[3].item(0)), int(values[4].item(0))
    m, s = int(values[1].item(0)), int(values[2].item(0))
    # zero points only where the type allows one; the REQUIREs on the scale factors
    if (input_zp and in_t != "INT8") or (output_zp and out_t != "INT8") or m < 0 or not 2 <= s <= 62:
        return None
    return in_t, out_t, attrs["rounding_mode"], input_zp, output_zp, m, s
