"""Binary element-wise ops: add/sub/mul (tensor & scalar), maximum/minimum,
comparisons, logical/bitwise ops and shifts, integer division, pow and where.

Quantized operands (INT profile) compute in int32 between RESCALEs; unquantized ones (FP
tensors, or integer tensors in either profile) map to the TOSA op directly."""

from __future__ import annotations

import torch
import torch.fx as fx

from ..errors import LoweringError
from ..graph_utils import val
from ..serialize import INT_OF
from .common import (
    cast_to,
    fp_binary,
    quantize_value,
    requantize,
    rescale,
    rescale_ties_even,
    select,
    to_int32,
)
from .common import compare as compare_op
from .registry import register
from .unary import toward_zero

aten = torch.ops.aten


def _operands(em, node, args):
    layout = em.layout(node)
    rank = len(em.shape(node))
    names = []
    for i, a in enumerate(args):
        if not isinstance(a, fx.Node):
            raise LoweringError(f"scalar operand {a!r} should have been made a tensor",
                                node=node.name)
        names.append(em.operand(a, layout, rank, f"arg{i}"))
    # lower-rank dynamic operands were expanded in PyTorch order; fix up layout
    return names, layout, rank


def _quantized(em, node) -> bool:
    """Whether ``node`` computes on quantized values (INT profile, quantized output)."""
    return em.is_int and em.qout(node) is not None


def _int_inputs(em, node, args, names, scales):
    outs = []
    for i, (a, n) in enumerate(zip(args, names, strict=True)):
        qp = em.qin(node, a)
        if qp is None:
            raise LoweringError("operand not quantized", node=node.name)
        outs.append(to_int32(em, n, qp, f"in{i}_i32", scales[i]))
    return outs


def _binary(em, node, op: str, int_scales) -> None:
    """Emit ``op`` on the two operands of ``node``. Quantized: both to INT32, each multiplied
    by its scale, ``op`` in INT32, one RESCALE to the output; ``int_scales(qa, qb, qo)``
    returns ``([scale_a, scale_b], output_scale)``. Float: ``op`` directly."""
    a, b = node.args[0], node.args[1]
    (na, nb), layout, _ = _operands(em, node, [a, b])
    if _quantized(em, node):
        qa, qb, qo = em.qin(node, a), em.qin(node, b), em.qout(node)
        in_scales, out_scale = int_scales(qa, qb, qo)
        ia, ib = _int_inputs(em, node, [a, b], [na, nb], in_scales)
        acc = fp_binary(em, op, ia, ib, "acc")
        out = em.out(node, layout)
        # ties to even, as the fake-quant's quantize: where the output scale is a power of two
        # times the inputs' (clamped inputs: hardtanh(a) + hardtanh(b)), the sum meets exact .5
        # ties, which a plain RESCALE rounds up (10% of such an add's elements were a step off)
        rescale_ties_even(em, acc, INT_OF[qo.dtype], out_scale, qo.zp, "rs", out_name=out)
    elif em.writer.dtypes[na] in _NARROW_INTS and op in _INT32_ONLY:
        out = _narrow_int_binary(em, node, op, na, nb, layout)
    else:
        out = fp_binary(em, op, na, nb, "", out=em.out(node, layout))
    em.bind(node, out, layout)


#: integer types TOSA's ADD/SUB/MAXIMUM/MINIMUM do not take (they compute in INT32 only)
_NARROW_INTS = ("INT8", "INT16")
_INT32_ONLY = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM")


def _narrow_int_binary(em, node, op: str, na: str, nb: str, layout) -> str:
    """``op`` on plain (unquantized) int8/int16 tensors: CAST to INT32, ``op``, CAST back.

    The narrowing CAST wraps (two's complement), as PyTorch's int8/int16 arithmetic does;
    MAXIMUM/MINIMUM results fit unchanged."""
    wide = [cast_to(em, n, "INT32", f"in{i}_i32") for i, n in enumerate((na, nb))]
    acc = fp_binary(em, op, wide[0], wide[1], "i32")
    out = em.out(node, layout)
    em.writer.op("CAST", [acc], out)
    return out


def _add_sub_scales(qa, qb, qo):
    # both operands on a common scale (twice the larger input scale) with 22 (int8) or 14
    # (int16) fractional bits before the one output rounding. The smaller operand's multiplier
    # is rounded, so a sum within about 2**-bits of a .5 tie can round the other way: with
    # TFLite's 20 bits, torchvision's maxvit_t had one such code pair (52.50000032 came out 53,
    # not 54) in 6 of 100,352 elements, and 630 of its 1,000 logits a step or more off. 22 is
    # the most an int8 pair allows: each term is below 255 * 2**21 < 2**29, the sum below 2**30
    shift = 22 if qo.dtype == torch.int8 and qa.dtype == torch.int8 else 14
    twice_max = 2.0 * max(qa.s, qb.s)
    return [qa.s / twice_max * (1 << shift), qb.s / twice_max * (1 << shift)], twice_max / ((1 << shift) * qo.s)


@register(aten.add.Tensor, aten.sub.Tensor)
def add_sub(em, node):
    _binary(em, node, "ADD" if node.target == aten.add.Tensor else "SUB", _add_sub_scales)


@register(aten.mul.Tensor)
def mul(em, node):
    _binary(em, node, "MUL", lambda qa, qb, qo: ([1.0, 1.0], qa.s * qb.s / qo.s))


@register(aten.maximum.default, aten.minimum.default)
def max_min(em, node):
    op = "MAXIMUM" if node.target == aten.maximum.default else "MINIMUM"
    _binary(em, node, op, lambda qa, qb, qo: ([qa.s / qo.s, qb.s / qo.s], 1.0))


_CMP = {
    aten.eq.Tensor: ("EQUAL", False, False), aten.ne.Tensor: ("EQUAL", False, True),
    aten.gt.Tensor: ("GREATER", False, False), aten.ge.Tensor: ("GREATER_EQUAL", False, False),
    aten.lt.Tensor: ("GREATER", True, False), aten.le.Tensor: ("GREATER_EQUAL", True, False),
}


@register(*_CMP)
def compare(em, node):
    a, b = node.args[0], node.args[1]
    op, swap, negate = _CMP[node.target]
    (na, nb), layout, rank = _operands(em, node, [a, b])
    if em.is_int and em.qin(node, a) is not None:
        qa, qb = em.qin(node, a), em.qin(node, b)
        ratio = qb.s / qa.s
        na = to_int32(em, na, qa, "in0_i32", 1 << 8)
        nb = to_int32(em, nb, qb, "in1_i32", ratio * (1 << 8))
    if swap:
        na, nb = nb, na
    out = em.out(node, layout)
    if negate:
        em.writer.op("LOGICAL_NOT", [compare_op(em, op, na, nb, "eq")], out)
    else:
        compare_op(em, op, na, nb, "", out=out)
    em.bind(node, out, layout)


_LOGIC = {
    aten.logical_and.default: "LOGICAL_AND", aten.logical_or.default: "LOGICAL_OR",
    aten.logical_xor.default: "LOGICAL_XOR", aten.bitwise_and.Tensor: "BITWISE_AND",
    aten.bitwise_or.Tensor: "BITWISE_OR", aten.bitwise_xor.Tensor: "BITWISE_XOR",
}


@register(*_LOGIC)
def logical(em, node):
    a, b = node.args[0], node.args[1]
    (na, nb), layout, rank = _operands(em, node, [a, b])
    op = _LOGIC[node.target]
    if em.dtype(node) == "BOOL":
        op = op.replace("BITWISE", "LOGICAL")
    elif em.writer.dtypes[na] not in ("INT32", "INT16", "INT8"):
        raise LoweringError("bitwise ops need integer or bool operands", node=node.name)
    out = fp_binary(em, op, na, nb, "", out=em.out(node, layout))
    em.bind(node, out, layout)


@register(aten.logical_not.default, aten.bitwise_not.default)
def logical_not(em, node):
    layout = em.layout(node)
    x = em.tensor(node.args[0], layout)
    out = em.out(node, layout)
    em.writer.op("LOGICAL_NOT" if em.dtype(node) == "BOOL" else "BITWISE_NOT", [x], out)
    em.bind(node, out, layout)


@register(aten.where.self)
def where(em, node):
    c, a, b = node.args[:3]
    (nc, na, nb), layout, rank = _operands(em, node, [c, a, b])
    if _quantized(em, node):
        qo = em.qout(node)
        na = requantize(em, na, em.qin(node, a), qo, "rq_a")
        nb = requantize(em, nb, em.qin(node, b), qo, "rq_b")
    nc = em.broadcast_to_rank(nc, rank, "c_r")
    na = em.broadcast_to_rank(na, rank, "a_r")
    nb = em.broadcast_to_rank(nb, rank, "b_r")
    em.bind(node, select(em, nc, na, nb, "", out=em.out(node, layout)), layout)


@register(aten._to_copy.default, aten.to.dtype)
def cast(em, node):
    x_node = node.args[0]
    layout = em.layout(x_node) if len(em.shape(x_node)) == len(em.shape(node)) else None
    x = em.tensor(x_node, layout)
    out_dtype = em.dtype(node)
    if em.is_int and em.qout(x_node) is not None:
        raise LoweringError("dtype casts of quantized tensors are not supported", node=node.name)
    source_value = val(x_node)
    if source_value is not None and source_value.dtype == torch.uint8:
        # a uint8 tensor travels as its INT8 bits: their value, 0..255, widened to INT16 by an
        # unsigned RESCALE (TOSA allows an unsigned input to a 16-bit, not a 32-bit, output)
        x = rescale(em, x, "INT16", 1.0, 0, 0, "unsigned", input_unsigned=True)
    out = em.out(node, layout)
    if _quantized(em, node):
        # an integer or bool tensor becoming a quantized float: q = round(v / scale) + zp
        qo = em.qout(node)
        rank = len(em.shape(node))
        if em.writer.dtypes[x] == "BOOL":
            one, zero = (em.const(name, [quantize_value(qo, v)], INT_OF[qo.dtype], [1] * rank)
                         for name, v in (("q_one", 1.0), ("q_zero", 0.0)))
            select(em, x, one, zero, "", out=out)
        else:
            rescale(em, x, INT_OF[qo.dtype], 1.0 / qo.s, 0, qo.zp, "rs", out_name=out)
        em.bind(node, out, layout)
        return
    source = em.writer.dtypes[x]
    if out_dtype == source:
        em.writer.op("IDENTITY", [x], out)
    elif source in _FLOATS and out_dtype in _INTEGERS:
        # PyTorch truncates a float toward zero where TOSA's CAST rounds to nearest: truncate
        # first (in float32: an FP16/BF16 value widens exactly), then the CAST is exact; to a
        # narrower integer through INT32, whose narrowing CAST wraps as PyTorch's conversion
        # does (a float CAST would saturate)
        if source != "FP32":
            x = cast_to(em, x, "FP32", "wide")
        whole = toward_zero(em, node, x, "trunc")
        if out_dtype != "INT32":
            whole = cast_to(em, whole, "INT32", "i32")
        em.writer.op("CAST", [whole], out)
    else:
        em.writer.op("CAST", [x], out)
    em.bind(node, out, layout)


_FLOATS, _INTEGERS = ("FP32", "FP16", "BF16"), ("INT8", "INT16", "INT32")


_SHIFTS = {aten.bitwise_left_shift.Tensor: "LOGICAL_LEFT_SHIFT",
           aten.bitwise_right_shift.Tensor: "ARITHMETIC_RIGHT_SHIFT"}


@register(*_SHIFTS)
def shift(em, node):
    """Shifts of signed integer tensors (``<<``: LOGICAL_LEFT_SHIFT; ``>>``: the sign-filling
    ARITHMETIC_RIGHT_SHIFT, PyTorch's ``>>`` on signed types)."""
    a, b = node.args[0], node.args[1]
    if val(a) is None or val(a).is_floating_point() or not val(a).is_signed():
        raise LoweringError("shifts need signed integer tensors", node=node.name)
    (na, nb), layout, rank = _operands(em, node, [a, b])
    em.bind(node, fp_binary(em, _SHIFTS[node.target], na, nb, "", out=em.out(node, layout)), layout)


@register(aten.pow.Tensor_Tensor, profiles={"FP"})
def pow_(em, node):
    """POW of two float tensors (FP only: a quantized power of two variables has no TABLE)."""
    a, b = node.args[0], node.args[1]
    (na, nb), layout, rank = _operands(em, node, [a, b])
    if em.writer.dtypes[na] != "FP32":
        raise LoweringError("pow of non-float tensors is not supported", node=node.name)
    em.bind(node, fp_binary(em, "POW", na, nb, "", out=em.out(node, layout)), layout)


@register(aten.div.Tensor_mode)
def integer_division(em, node):
    """Division of integer tensors: INTDIV rounds toward zero ("trunc"); "floor" subtracts one
    where the remainder is non-zero and its sign differs from the divisor's. int8/int16
    operands divide in INT32 and the quotient is cast back to PyTorch's result type. Float divisions
    were decomposed (:mod:`lowering.passes.decompositions.arith`)."""
    a, b = node.args[0], node.args[1]
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    (na, nb), layout, rank = _operands(em, node, [a, b])
    out_dtype = em.dtype(node)
    if mode not in ("trunc", "floor") or out_dtype not in _DIVIDABLE or \
            not {em.writer.dtypes[na], em.writer.dtypes[nb]} <= set(_DIVIDABLE):
        raise LoweringError(f"division of this dtype (rounding_mode={mode!r}) is not supported",
                            node=node.name)
    # INTDIV takes INT32 only: int8/int16 operands widen exactly, the quotient narrows back
    # (wrapping, as PyTorch's -128 // -1 does in int8)
    na, nb = (n if em.writer.dtypes[n] == "INT32" else cast_to(em, n, "INT32", f"in{i}_i32")
              for i, n in enumerate((na, nb)))
    out = em.out(node, layout)
    q32 = _int32_quotient(em, mode, na, nb, rank, out if out_dtype == "INT32" else None)
    if out_dtype != "INT32":
        em.writer.op("CAST", [q32], out)
    em.bind(node, out, layout)


_DIVIDABLE = ("INT8", "INT16", "INT32")


def _int32_quotient(em, mode: str, na: str, nb: str, rank: int, out: str | None) -> str:
    """INTDIV of two INT32 tensors, rounded as ``mode`` says, into ``out`` (or a new tensor)."""
    if mode == "trunc":
        return fp_binary(em, "INTDIV", na, nb, "", out=out)
    q = fp_binary(em, "INTDIV", na, nb, "trunc")
    remainder = fp_binary(em, "SUB", na, fp_binary(em, "MUL", q, nb, "qb"), "rem")
    zero = em.const("zero", [0], "INT32", [1] * rank)
    inexact = em.new("inexact", em.writer.shapes[remainder], "BOOL")
    em.writer.op("LOGICAL_NOT", [compare_op(em, "EQUAL", remainder, zero, "exact")], inexact)
    signs_differ = fp_binary(em, "LOGICAL_XOR", compare_op(em, "GREATER", zero, remainder, "rem_neg"),
                             compare_op(em, "GREATER", zero, nb, "div_neg"), "signs_differ")
    fix = fp_binary(em, "LOGICAL_AND", inexact, signs_differ, "fix")
    lowered = fp_binary(em, "SUB", q, em.const("one", [1], "INT32", [1] * rank), "minus_one")
    return select(em, fix, lowered, q, "", out=out)
