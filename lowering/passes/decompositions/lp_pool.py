"""PyTorch's lp_pool1d / lp_pool2d, traced as ``(sign(a) * relu(|a|)) * k ** 2`` of the
average pool ``a = avg_pool(x ** p)``, then ``** (1 / p)``: the two products rewritten so
that the window sum is one op. ``sign(a) * relu(|a|)`` is ``a``, and an average pool times
a number is a window sum (``avg_pool2d(..., divisor_override=d)``, whose INT output has its
own range, see :mod:`lowering.quantizer`).

In INT the traced form quantized the average with the range of ``x ** p`` (a pool shares
its input's quantization): far coarser than the average needs, and its ``sum / k ** 2``
lands on rounding ties that a float32 reference rounds either way; the product by ``k ** 2``
and ``** (1 / p)`` (steep near zero) then made one step of the average several of the
output. The window sum is quantized once, with its own range."""

from __future__ import annotations

import numpy as np
import torch
import torch.fx as fx

from ...graph_utils import val
from ...ops.pool import window_counts
from ._common import arg, decomposition, int_list

aten = torch.ops.aten


def _avg_divisors(size: int, k: int, s: int, p: int, n_out: int, include_pad: bool) -> list[int]:
    """PyTorch's avg_pool divisor of each of ``n_out`` windows along one axis: the window
    clipped to the padded input (``include_pad``) or to the input itself.

    Example:
        >>> _avg_divisors(8, 3, 2, 0, 4, True)  # ceil_mode: the last window overhangs
        [3, 3, 3, 2]
    """
    # (counting the padding: the windows of the padded axis, which has no padding of its own)
    return window_counts(size + 2 * p, 0, k, s, n_out) if include_pad else window_counts(size, p, k, s, n_out)


#: shape-only ops a 1-D or batchless pool is wrapped in (:mod:`.spatial`'s ``_around_4d``)
_POOL_WRAPPERS = {aten.squeeze.dims, aten.squeeze.dim, aten.unsqueeze.default, aten.view.default,
                  aten.reshape.default}


def _sign_times_magnitude(x, y):
    """``a`` when ``x * y`` is ``sign(a) * relu(|a|)`` (either order), else None."""
    for s, m in ((x, y), (y, x)):
        if isinstance(s, fx.Node) and s.target == aten.sign.default and isinstance(m, fx.Node) \
                and m.target == aten.relu.default and isinstance(m.args[0], fx.Node) \
                and m.args[0].target == aten.abs.default and m.args[0].args[0] is s.args[0]:
            return s.args[0]
    return None


def _scaled_avg_pool(gm, b, x, c):
    """``avg_pool2d(y) * c`` (through the shape-only ops of a 1-D or batchless pool) as one
    window sum: ``avg_pool2d(y, divisor_override=d)`` when every window has the divisor
    ``D`` and ``d = D / c`` is a positive integer, else the window sums
    (``divisor_override=1``) times ``c / D`` (a number, or where the divisors differ - a
    ceil_mode window overhanging the input, padding not counted - a constant of each
    window's). None when ``x`` is no such pool, or a window sum already (``d`` no integer:
    its product by a number stays)."""
    wrappers = []
    while isinstance(x, fx.Node) and x.target in _POOL_WRAPPERS and len(x.users) == 1:
        wrappers.append(x)
        x = x.args[0]
    if not (isinstance(x, fx.Node) and x.target == aten.avg_pool2d.default and len(x.users) == 1):
        return None
    v, src = val(x), val(x.args[0])
    if v is None or src is None or v.dim() != 4 or not v.is_floating_point():
        return None
    kernel = int_list(arg(x, 1, "kernel_size"), 2)
    stride = int_list(arg(x, 2, "stride", None) or kernel, 2)
    padding = int_list(arg(x, 3, "padding", 0), 2)
    ceil, include = bool(arg(x, 4, "ceil_mode", False)), bool(arg(x, 5, "count_include_pad", True))
    override = arg(x, 6, "divisor_override", None)
    if override is not None:
        divisors = np.full(tuple(v.shape[-2:]), float(override))
    else:
        rows, cols = (_avg_divisors(int(src.shape[2 + i]), kernel[i], stride[i], padding[i],
                                    int(v.shape[2 + i]), include) for i in range(2))
        divisors = np.outer(rows, cols).astype(np.float64)
    base = float(divisors.flat[0])
    uniform = bool((divisors == base).all())
    if uniform and base / c >= 1 and (base / c).is_integer():
        y = b(aten.avg_pool2d.default, x.args[0], kernel, stride, padding, ceil, include, int(base / c))
    elif override is not None:
        return None  # a window sum already, times a number (this rewrite's own product too)
    else:
        y = b(aten.avg_pool2d.default, x.args[0], kernel, stride, padding, ceil, include, 1)
        weight = c / base if uniform else b.const(gm, torch.tensor(c / divisors, dtype=v.dtype),
                                                  "window_weight")
        y = b(aten.mul.Tensor, y, weight)
    for w in reversed(wrappers):
        y = b(w.target, y, *w.args[1:], **w.kwargs)
    return y


@decomposition(aten.mul.Tensor)
def lp_pool_products(gm, n, b):
    """``sign(a) * relu(|a|)`` -> ``a`` (equal but for the sign of a zero), and an average
    pool times a positive number -> one window sum (:func:`_scaled_avg_pool`)."""
    x, y = n.args[0], n.args[1]
    a = _sign_times_magnitude(x, y)
    if a is not None:
        return a
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        x, y = y, x
    if not isinstance(y, (int, float)) or isinstance(y, bool) or not 0 < float(y) < float("inf"):
        return None
    return _scaled_avg_pool(gm, b, x, float(y))
