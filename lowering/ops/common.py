"""Helpers shared by the visitors: RESCALE, zero points, scalar constants, CLAMP."""

from __future__ import annotations

import numpy as np

from ..errors import LoweringError
from ..qparams import QParams, quantize_scales
from ..serialize import INT_OF, clamp_bytes

FP_MAX = float(np.finfo(np.float32).max)


def rescale(em, src: str, out_dtype: str, scales, in_zp: int, out_zp: int, suffix: str,
            out_name: str | None = None, per_channel: bool = False, input_unsigned: bool = False) -> str:
    """Emit RESCALE ``src`` -> new tensor of ``out_dtype``; ``scales`` real multiplier(s);
    ``input_unsigned``: read ``src``'s INT8 / INT16 bits as unsigned (a uint8 tensor)."""
    in_dtype = em.writer.dtypes[src]
    shape = em.writer.shapes[src]
    if in_dtype == "INT48":
        # INT48 only takes 16-bit multipliers: first an exact power-of-two RESCALE to
        # INT32 (keeping >= 8 fractional bits of an output step), then a 32-bit one.
        sc = np.atleast_1d(np.asarray(scales, dtype=np.float64))
        k = int48_prescale_shift(sc)
        mid = int48_to_int32(em, src, k, suffix)
        return rescale(em, mid, out_dtype, sc * (1 << k), 0, out_zp, suffix, out_name, per_channel)
    for dtype, zp, side in ((in_dtype, in_zp, "input"), (out_dtype, out_zp, "output")):
        if zp and dtype != "INT8":  # TOSA ERROR_IF (signed RESCALE): the graph would not run
            raise LoweringError(f"RESCALE with {side} zero point {int(zp)} on {dtype}: TOSA allows "
                                "a non-zero zero point only on int8 (quantize int16 symmetrically)")
    scale32 = True
    mults, shifts = quantize_scales(np.atleast_1d(np.asarray(scales, dtype=np.float64)), scale32)
    n = len(mults)
    m = em.const(f"{suffix}_mult", np.array(mults), "INT32" if scale32 else "INT16", [n])
    s = em.const(f"{suffix}_shift", np.array(shifts), "INT8", [n])
    izp_dtype = in_dtype if in_dtype in ("INT8", "INT16") else ("INT32" if in_dtype != "INT48" else "INT48")
    izp = em.const(f"{suffix}_izp", [in_zp], izp_dtype, [1])
    ozp = em.const(f"{suffix}_ozp", [out_zp], out_dtype, [1])
    out, final = result_tensor(em, out_name, shape, out_dtype, suffix)
    em.writer.op("RESCALE", [src, m, s, izp, ozp], out, scale32=scale32,
                 rounding_mode="SINGLE_ROUND", per_channel=per_channel or n > 1,
                 input_unsigned=input_unsigned, output_unsigned=False)
    return out if final is None else reshape_into(em, out, final, suffix)


def ties_possible(scale: float) -> bool:
    """Whether RESCALE by ``scale`` meets exact .5 ties: its 32-bit multiplier is exact and
    ``scale`` is not an integer (e.g. a mean of 4 with equal in/out quantization: 0.25).

    Example:
        >>> ties_possible(0.25), ties_possible(1 / 3), ties_possible(2.0)
        (True, False, False)
    """
    m, sh = quantize_scales([scale])
    return m[0] * 2.0 ** -sh[0] == scale and scale != int(scale)


def rescale_ties_even(em, src: str, out_dtype: str, scale: float, out_zp: int, suffix: str,
                      out_name: str | None = None) -> str:
    """RESCALE INT32 ``src`` by ``scale`` to ``out_dtype`` (+ ``out_zp``, saturating) with
    ties to even, as the fake-quant quantize (torch.round) does, where RESCALE alone rounds
    them up (see :func:`_tie_correction`); a plain RESCALE when no tie can occur."""
    d = integer_divisor(scale)
    if d is not None:
        even = _divide_ties_even(em, src, d, suffix)
        return rescale(em, even, out_dtype, 1.0, 0, out_zp, suffix, out_name=out_name)
    if not ties_possible(scale):
        return rescale(em, src, out_dtype, scale, 0, out_zp, suffix, out_name=out_name)
    up = rescale(em, src, "INT32", scale, 0, 0, suffix + "_up")
    even = fp_binary(em, "SUB", up, _tie_correction(em, src, up, scale, suffix), suffix + "_even")
    return rescale(em, even, out_dtype, 1.0, 0, out_zp, suffix, out_name=out_name)


def integer_divisor(scale: float) -> int | None:
    """``d`` when ``scale`` is ``1/d`` for an integer ``d`` > 1 that is not a power of two
    (a mean over 6 or 9 elements with equal in/out quantization): its RESCALE multiplier is
    inexact, yet ``src / d`` meets exact .5 ties whenever ``d`` is even. Else None.

    Example:
        >>> integer_divisor(1 / 6), integer_divisor(0.25), integer_divisor(0.3)
        (6, None, None)
    """
    d = round(1.0 / scale)
    if d < 3 or d & (d - 1) == 0 or d % 2 or abs(d * scale - 1.0) > 1e-12:
        return None
    return d


def _divide_ties_even(em, src: str, d: int, suffix: str) -> str:
    """INT32 ``round_half_even(src / d)``. RESCALEs (round half up) by the multipliers just
    below and just above ``1/d`` agree except on an exact tie k + .5 (for |src| below
    2**(shift - 1) / d, far beyond any window sum), where one gives k and the other k + 1:
    ``up`` = their maximum, ``down`` their minimum. As in :func:`_tie_correction`, with
    ``h = ceil(up / 2)``: ``tie & odd(up) = RESCALE(2h - down - 1, 0.5)``, subtracted."""
    from ..qparams import quantize_scale

    _, sh = quantize_scale(1.0 / d, True)
    m_lo = (1 << sh) // d
    a = rescale(em, src, "INT32", m_lo * 2.0 ** -sh, 0, 0, suffix + "_lo")
    b = rescale(em, src, "INT32", (m_lo + 1) * 2.0 ** -sh, 0, 0, suffix + "_hi")
    up = fp_binary(em, "MAXIMUM", a, b, suffix + "_up")
    down = fp_binary(em, "MINIMUM", a, b, suffix + "_down")
    one = em.const(suffix + "_one", [1], "INT32", [1] * len(em.writer.shapes[src]))
    h = rescale(em, up, "INT32", 0.5, 0, 0, suffix + "_half")
    y = fp_binary(em, "SUB", fp_binary(em, "ADD", h, h, suffix + "_2h"), down, suffix + "_2hd")
    corr = rescale(em, fp_binary(em, "SUB", y, one, suffix + "_y"), "INT32", 0.5, 0, 0,
                   suffix + "_corr")
    return fp_binary(em, "SUB", up, corr, suffix + "_even")


def _tie_correction(em, src: str, up: str, scale: float, suffix: str) -> str:
    """1 where ``src * scale`` is a .5 tie and its half-up rounding ``up`` is odd, else 0.

    ``-RESCALE(-src)`` rounds half down, so ``tie = up + RESCALE(-src)`` (0 or 1);
    ``h = RESCALE(up, 0.5) = ceil(up / 2)`` gives ``odd = 2h - up``; then
    ``tie & odd = floor((tie + odd) / 2) = RESCALE(tie + odd - 1, 0.5)`` and
    ``tie + odd - 1 = RESCALE(-src) + 2h - 1``: only ops Ethos-U55 runs (no BITWISE_AND)."""
    shape = [1] * len(em.writer.shapes[src])
    zero = em.const(suffix + "_zero", [0], "INT32", shape)
    one = em.const(suffix + "_one", [1], "INT32", shape)
    neg_down = rescale(em, fp_binary(em, "SUB", zero, src, suffix + "_neg"), "INT32", scale, 0, 0,
                       suffix + "_negdn")
    h = rescale(em, up, "INT32", 0.5, 0, 0, suffix + "_half")
    y = fp_binary(em, "ADD", fp_binary(em, "ADD", neg_down, h, suffix + "_nh"), h, suffix + "_nhh")
    return rescale(em, fp_binary(em, "SUB", y, one, suffix + "_y"), "INT32", 0.5, 0, 0,
                   suffix + "_corr")


def int48_prescale_shift(scales) -> int:
    """The power-of-two step ``k`` of an INT48 -> INT32 pre-RESCALE for ``scales``: the
    largest that keeps >= 8 fractional bits of an output step (at most 40)."""
    sc = np.atleast_1d(np.asarray(scales, dtype=np.float64))
    return min(int(max(0, np.floor(np.log2(1.0 / (float(sc.max()) * 256.0))))), 40)


def int48_to_int32(em, src: str, k: int, suffix: str) -> str:
    """RESCALE INT48 ``src`` to INT32, dividing by ``2**k`` with round-half-up."""
    m16 = em.const(f"{suffix}_pre_mult", [1 << 14], "INT16", [1])
    s16 = em.const(f"{suffix}_pre_shift", [14 + k], "INT8", [1])
    z48 = em.const(f"{suffix}_pre_izp", [0], "INT48", [1])
    z32 = em.const(f"{suffix}_pre_ozp", [0], "INT32", [1])
    mid = em.new(f"{suffix}_pre", em.writer.shapes[src], "INT32")
    em.writer.op("RESCALE", [src, m16, s16, z48, z32], mid, scale32=False,
                 rounding_mode="SINGLE_ROUND", per_channel=False, input_unsigned=False,
                 output_unsigned=False)
    return mid


def result_tensor(em, out: str | None, shape: list[int], dtype: str, suffix: str) -> tuple[str, str | None]:
    """(the tensor an op of result ``shape`` writes, the tensor to :func:`reshape_into` after
    it or None): ``out`` itself (a new tensor when None), unless ``out`` is 0-d and ``shape``
    is not (a 0-d result computed on operands read as [1]), then a new full-rank tensor."""
    if out is not None and len(em.writer.shapes[out]) != len(shape):
        return em.new(suffix + "_full", shape, dtype), out
    return out or em.new(suffix, shape, dtype), None


def reshape_into(em, src: str, dst: str, suffix: str) -> str:
    """RESHAPE ``src`` into the existing tensor ``dst`` (a 0-d result computed at rank 1)."""
    em.writer.op("RESHAPE", [src, em.const_shape(suffix + "_0d", em.writer.shapes[dst])], dst)
    return dst


def to_int32(em, src: str, qp: QParams, suffix: str, scale: float = 1.0) -> str:
    """int8/int16 -> int32 with the zero point removed (optionally scaled)."""
    return rescale(em, src, "INT32", scale, qp.zp, 0, suffix)


def requantize(em, src: str, q_from: QParams, q_to: QParams, suffix: str,
               out_name: str | None = None) -> str:
    """Rescale between two per-tensor quantizations (no-op when equal)."""
    if q_from.s == q_to.s and q_from.zp == q_to.zp and q_from.dtype == q_to.dtype and out_name is None:
        return src

    return rescale(em, src, INT_OF[q_to.dtype], q_from.s / q_to.s, q_from.zp, q_to.zp, suffix,
                   out_name=out_name)


def cast_to(em, src: str, dtype: str, suffix: str) -> str:
    """CAST ``src`` to ``dtype`` into a new tensor (integer narrowing wraps, as in PyTorch)."""
    out = em.new(suffix, em.writer.shapes[src], dtype)
    em.writer.op("CAST", [src], out)
    return out


def zp_const(em, dtype: str, value, suffix: str) -> str:
    return em.const(suffix, [value], dtype, [1])


def fp_scalar(em, value: float, rank: int, suffix: str, dtype: str = "FP32") -> str:
    """A constant holding ``value`` with ``rank`` dims of size 1 (0-d for rank 0: a [1]
    constant would make ``log1p`` of a 0-d tensor a [1] tensor where the graph declares [])."""
    return em.const(suffix, np.array([value]).reshape([1] * rank), dtype, [1] * rank)


def clamp(em, src: str, lo, hi, out: str) -> None:
    dtype = em.writer.dtypes[src]
    if dtype in ("FP32", "FP16"):
        top = FP_MAX if dtype == "FP32" else float(np.finfo(np.float16).max)
        lo = -top if lo is None else float(lo)
        hi = top if hi is None else float(hi)
    em.writer.op("CLAMP", [src], out, min_val=clamp_bytes(lo, dtype),
                 max_val=clamp_bytes(hi, dtype), nan_mode="PROPAGATE")


def quantize_value(qp: QParams, v: float) -> int:
    q = np.round(np.float32(v) * np.float32(1.0 / qp.s)) + qp.zp
    return int(np.clip(q, qp.qmin, qp.qmax))


def fp_binary(em, op: str, a: str, b: str, suffix: str, out: str | None = None,
              dtype: str | None = None) -> str:
    """Element-wise binary op on unquantized tensors with rank-equalised broadcasting.

    The result has ``a``'s dtype unless ``dtype`` says otherwise (BOOL for comparisons).
    """
    ra, rb = len(em.writer.shapes[a]), len(em.writer.shapes[b])
    r = max(ra, rb)
    a = em.broadcast_to_rank(a, r, suffix + "_ra")
    b = em.broadcast_to_rank(b, r, suffix + "_rb")
    shape = [max(x, y) for x, y in zip(em.writer.shapes[a], em.writer.shapes[b], strict=True)]
    out, final = result_tensor(em, out, shape, dtype or em.writer.dtypes[a], suffix)
    inputs = [a, b]
    if op == "MUL":
        inputs.append(em.const(suffix + "_mulshift", [0], "INT8", [1]))
    attrs = {}
    if op in ("MAXIMUM", "MINIMUM"):
        attrs["nan_mode"] = "PROPAGATE"
    elif op == "ARITHMETIC_RIGHT_SHIFT":
        attrs["round"] = False  # PyTorch's >> rounds toward minus infinity
    em.writer.op(op, inputs, out, **attrs)
    return out if final is None else reshape_into(em, out, final, suffix)


def compare(em, op: str, a: str, b: str, suffix: str, out: str | None = None) -> str:
    """EQUAL / GREATER / GREATER_EQUAL of ``a`` and ``b`` (broadcast), a BOOL tensor."""
    return fp_binary(em, op, a, b, suffix, out=out, dtype="BOOL")


def select(em, cond: str, a: str, b: str, suffix: str, out: str | None = None) -> str:
    """``a`` where ``cond`` else ``b`` (SELECT, broadcasting size-1 dims; equal ranks)."""
    shapes = [em.writer.shapes[t] for t in (cond, a, b)]
    shape = [max(d) for d in zip(*shapes, strict=True)]
    out, final = result_tensor(em, out, shape, em.writer.dtypes[a], suffix)
    em.writer.op("SELECT", [cond, a, b], out)
    return out if final is None else reshape_into(em, out, final, suffix)


def fp_unary(em, op: str, a: str, suffix: str, out: str | None = None) -> str:
    """Element-wise unary TOSA op on an unquantized tensor (FP32, or INT32 for ABS/NEGATE)."""
    dtype = em.writer.dtypes[a]
    out = out or em.new(suffix, em.writer.shapes[a], dtype)
    if op == "NEGATE":
        z1 = em.const(suffix + "_izp", [0], dtype, [1])
        z2 = em.const(suffix + "_ozp", [0], dtype, [1])
        em.writer.op("NEGATE", [a, z1, z2], out)
    else:
        em.writer.op(op, [a], out)
    return out


def fp_sqrt(em, a: str, suffix: str, out: str | None = None) -> str:
    """sqrt(a) = 1 / rsqrt(a): TOSA has RSQRT and RECIPROCAL but no SQRT."""
    return fp_unary(em, "RECIPROCAL", fp_unary(em, "RSQRT", a, suffix + "_rsqrt"), suffix, out=out)


def scalar_arg(node, i, default=None):
    if len(node.args) > i:
        return node.args[i]
    return default
