"""A float64 kernel for prepared RESCALEs (constant scales) of signed values with scale32.

The int64 formula of ``apply_scale_32``, ``clip(((v * m + 2**(s-1)) >> s) + output_zp, lo, hi)``
with ``v = x - input_zp``, costs about ten passes over the tensor in numpy (widening, a 64-bit
multiply numpy does not vectorise, per-channel shifts). This module computes the same integers in
float64 in five cache-sized passes, where a bound proves every intermediate exact
(see :func:`_exact`), and hands the call to the interpreter's own kernel where it cannot:

* ``y = x * (m * 2**-s) + c`` with ``c = (2**(s-1) + output_zp * 2**s - input_zp * m - off * 2**s)
  * 2**-s``: the scale is m times a power of two (exact); ``x * m`` and the numerator of ``c``
  are integers below 2**53, so the product, the constant and their sum are exact multiples of
  ``2**-s``, and ``y = ((v * m + 2**(s-1)) + (output_zp - off) * 2**s) * 2**-s`` exactly;
* ``floor(y) = ((v * m + 2**(s-1)) >> s) + output_zp - off``. For INT8/INT16 outputs ``off`` is
  the type's ``lo``: clipping ``y`` to ``[0, hi - lo]`` before the floor gives the same integer
  (floor is monotonic, the bounds are integers), a truncating cast of a value >= 0 to the
  unsigned type *is* floor, and adding ``lo = -2**(bits-1)`` modulo ``2**bits`` is flipping the
  sign bit (an XOR on the unsigned bits, then a view as the signed type). INT32 outputs
  (``off = 0``) never leave their range (a REQUIRE, checked): floor and a cast.
* When ``(output_zp - off) * 2**s`` would make ``c`` too large to be exact (large shifts), it is
  left out of ``c`` and added after the floor instead, where it is an integer added to an
  integer (one more pass, see :func:`_constant`).

The REQUIREs of RESCALE are checked on the input's extremes, which stand for every element: with
``m >= 0`` the scaled value is non-decreasing in ``v``, so the value-range REQUIRE and the int32
result REQUIRE hold for every element iff they hold at the extremes. INT8/INT16 inputs use their
type's extremes (checked once, when prepared); INT32 inputs the data's (two cheap passes). When a
REQUIRE may fail, the interpreter's kernel runs and reports it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..numerics import clip_ufunc, int_range
from .registry import OpCall

#: Elements per block: the block's float64 buffer (512 KiB) stays in the 1 MiB L2 cache.
_BLOCK = 1 << 16
_EXACT = 1 << 53
_INT32 = int_range("INT32")
_UNSIGNED = {"INT8": np.uint8, "INT16": np.uint16}
_WORKING = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}


def fast_rescale(params: tuple, fallback: Callable) -> Callable:
    """The float64 kernel of a prepared RESCALE, or ``fallback`` (the interpreter's kernel) for
    the cases it does not cover; ``params`` come from ``type_conversion._rescale_setup``.

    >>> kernel = fast_rescale(_rescale_setup(call), int64_kernel)  # doctest: +SKIP
    >>> [y] = kernel(call)                                         # doctest: +SKIP
    """
    (in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned, input_zp, output_zp,
     m, s, _) = params
    m = np.atleast_1d(np.asarray(m, np.int64))
    s = np.atleast_1d(np.asarray(s, np.int64))
    # DOUBLE_ROUND adds its second rounding term only when shift > 31
    rounding_ok = rounding_mode != "DOUBLE_ROUND" or int(s.max()) <= 31
    if (not scale32 or not rounding_ok or input_unsigned or output_unsigned or in_t not in _WORKING
            or out_t not in _WORKING or m.size == 0 or int(m.min()) < 0):
        return fallback
    folds = _constant(m, s, input_zp, output_zp, out_t)
    if folds is None:
        return fallback
    c_num, post = folds
    scale = m.astype(np.float64) * np.ldexp(1.0, -s)
    const = c_num.astype(np.float64) * np.ldexp(1.0, -s)  # exact: |c_num| < 2**53
    static = int_range(in_t) if in_t != "INT32" else None
    if static is not None and not _exact(*static, input_zp, output_zp, m, s, c_num):
        return fallback
    lo_out, hi_out = int_range(out_t)
    per_channel = np.ndim(params[8]) > 0

    def kernel(run: OpCall) -> list[np.ndarray]:
        x = run.inputs[0]
        if static is None and x.size and not _exact(int(x.min()), int(x.max()), input_zp, output_zp,
                                                     m, s, c_num):
            return fallback(run)
        return [_blocks(x, scale, const, post, per_channel, hi_out - lo_out, out_t)]

    return kernel


def _constant(m: np.ndarray, s: np.ndarray, input_zp: int, output_zp: int, out_t: str):
    """``(c_num, post)``: the numerator of the constant ``c`` (units of ``2**-s``) and the integer
    added after the floor (None when folded into ``c``), or None when ``c`` is not exact.

    Folding ``(output_zp - off) * 2**s`` into ``c`` saves a pass but needs ``s`` small enough;
    else that integer is added after the floor (where it is exact), ``c`` keeping only the
    rounding term and ``input_zp``'s.
    """
    off = 0 if out_t == "INT32" else int_range(out_t)[0]
    s_max, m_max = int(s.max()), int(m.max())
    base = (1 << (s_max - 1)) + abs(input_zp) * m_max  # bounds |2**(s-1) - input_zp * m|
    if base >= _EXACT:
        return None
    half = (np.int64(1) << (s - 1)) - np.int64(input_zp) * m  # |.| < 2**53: no int64 wrap
    if base + (abs(output_zp - off) << s_max) < _EXACT:
        return half + np.int64(output_zp - off) * (np.int64(1) << s), None
    return half, output_zp - off


def _exact(x_lo: int, x_hi: int, input_zp: int, output_zp: int, m: np.ndarray, s: np.ndarray,
           c_num: np.ndarray) -> bool:
    """Both REQUIREs hold for every x in [x_lo, x_hi] and every float64 intermediate is exact.

    int64 here cannot overflow: ``2 <= s <= 62`` and ``0 <= m < 2**31`` (checked when the RESCALE
    was set up), ``|v| < 2**31`` (tested before any product), so ``|v * m| + 2**61 < 2**63``.
    """
    v_lo, v_hi = x_lo - input_zp, x_hi - input_zp
    half = np.int64(1) << (s - 1)
    if not bool(np.all((v_lo >= -half) & (v_hi < half))):
        return False  # value-range REQUIRE may fail: the interpreter's kernel reports it
    if max(abs(v_lo), abs(v_hi)) >= 1 << 31:
        return False  # (x = -2**31 with input_zp > 0: leave it to int64)
    results = [((v * m + half) >> s) + output_zp for v in (v_lo, v_hi)]
    if not all(bool(np.all((r >= _INT32[0]) & (r <= _INT32[1]))) for r in results):
        return False  # result REQUIRE may fail
    # |x * m| and |c_num| below 2**53, and so their sum (v * m + 2**(s-1), plus (zp - off) * 2**s
    # when folded): the product, the constant and the sum are exact
    x_max = max(abs(x_lo), abs(x_hi))
    return bool(np.all(x_max * m + np.abs(c_num) < _EXACT))


def _blocks(x: np.ndarray, scale: np.ndarray, const: np.ndarray, post: int | None, per_channel: bool,
            span: int, out_t: str) -> np.ndarray:
    """The passes of the module docstring, block of whole pixels by block."""
    channels = x.shape[-1] if per_channel and x.ndim else 1
    flat = x.reshape(-1)
    block = min(flat.size, max(channels, _BLOCK // channels * channels))
    if per_channel:
        scale, const = np.tile(scale, block // channels), np.tile(const, block // channels)
    else:
        scale, const = scale[0], const[0]
    buf = np.empty(block, np.float64)
    out = np.empty(flat.size, _WORKING[out_t])
    unsigned = _UNSIGNED.get(out_t)
    target = out.view(unsigned) if unsigned is not None else out
    sign = unsigned(1 << (8 * out.itemsize - 1)) if unsigned is not None else None
    for start in range(0, flat.size, block):
        part = flat[start:start + block]
        n = part.size
        y = buf[:n]
        np.multiply(part, scale[:n] if per_channel else scale, out=y, dtype=np.float64)
        y += const[:n] if per_channel else const
        if post is not None or unsigned is None:
            np.floor(y, out=y)
            if post:
                y += post  # an integer added to an integer below 2**53: exact
        dest = target[start:start + n]
        if unsigned is not None:
            clip_ufunc(y, 0.0, float(span), out=y)
            np.copyto(dest, y, casting="unsafe")  # truncation of a value >= 0: floor
            dest ^= sign  # + lo (mod 2**bits): the sign bit
        else:
            np.copyto(dest, y, casting="unsafe")  # an integer in int32's range (a REQUIRE)
    return out.reshape(x.shape)
