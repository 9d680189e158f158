"""``torch.cond`` -> COND_IF, ``torch.while_loop`` -> WHILE_LOOP, their ``getitem`` results.

The operator names its sub-graphs by region; each region is written after the main block
(:meth:`lowering.emitter.Emitter.emit`) by an emitter of its own over the sub-graph, with a
:class:`Boundary` saying in which quantization its inputs arrive and its outputs must leave.

INT: a value crossing a region boundary keeps one integer representation on both sides (the
parent's); the region rescales it to the sub-graph's own quantization on entry and back on
exit, as the fake-quant model dequantizes in one graph and quantizes again in the other. A
WHILE_LOOP value is carried in the quantization of the body's result (what the next
iteration receives), so the loop itself adds no rounding.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.fx as fx

from ..control_flow import COND, WHILE_LOOP, operands, subgraph_nodes, submodule
from ..errors import LoweringError
from ..graph_utils import get_constant, output_nodes, val
from ..qparams import QParams
from ..serialize import INT_OF, TORCH_TO_TOSA
from .common import requantize
from .registry import register


def _same(a: QParams | None, b: QParams | None) -> bool:
    return a is None or b is None or (a.s == b.s and a.zp == b.zp and a.dtype == b.dtype)


@dataclass
class Boundary:
    """How a sub-graph's block meets its parent's operator (INT quantization per position).

    ``in_q[i]``: quantization of the operator's i-th input (the block's i-th input);
    ``out_q[j]``: quantization the operator expects of the block's j-th output;
    ``extra_outputs``: placeholders returned unchanged after the sub-graph's own outputs
    (a WHILE_LOOP body passes its additional inputs on: TOSA carries every input).
    """

    in_q: list
    out_q: list
    extra_outputs: list = field(default_factory=list)
    raw: dict = field(default_factory=dict)

    def block_input(self, em, node: fx.Node, i: int) -> None:
        """Declare the block's ``i``-th input for placeholder ``node`` and bind it."""
        q = self.in_q[i] if em.is_int and i < len(self.in_q) else None
        own = em.qout(node)
        if q is not None and own is None:
            node.meta["qout"] = own = q  # read by nothing quantized, or passed on as it is
        dtype = INT_OF[q.dtype] if q is not None else em.dtype(node)
        name = em.writer.input(node.name, em.shape(node), dtype)
        em._prov(name, node)
        self.raw[node.name] = name
        if not _same(q, own):
            name = requantize(em, name, q, own, "rq_in")
        em.env.setdefault(node.name, {})[None] = name
        if own is not None:
            em.quant_params[name] = own.to_json()

    def block_output(self, em, o: fx.Node, j: int) -> str:
        """The tensor to return as the block's ``j``-th output (value ``o``)."""
        if o.name in self.raw and any(o is x for x in self.extra_outputs):
            return self.raw[o.name]  # a passed-on input leaves exactly as it came
        q = self.out_q[j] if em.is_int and j < len(self.out_q) else None
        value = get_constant(em.gm, o)
        if q is not None and em.qout(o) is None and value is not None and value.is_floating_point():
            # a float constant the sub-graph returns (a branch returning zeros): quantized
            # as the parent reads it
            ints = torch.ops.quantized_decomposed.quantize_per_tensor(
                value.float(), q.s, q.zp, q.qmin, q.qmax, q.dtype).numpy()
            return em.const("q", ints, INT_OF[q.dtype], list(ints.shape) or [1], node=o)
        src = em.tensor(o, None)
        own = em.qout(o)
        if not _same(own, q):
            src = requantize(em, src, own, q, f"rq_out{j}")
        return src


def _operand(em, node: fx.Node, o, q_to: QParams | None, i: int) -> str:
    """Input ``o`` of control-flow ``node``, in quantization ``q_to`` (INT)."""
    if not isinstance(o, fx.Node):
        raise LoweringError(f"control-flow operand {o!r} is not a tensor", node=node.name)
    name = em.tensor(o, None)
    own = em.qout(o)
    if em.is_int and not _same(own, q_to):
        name = requantize(em, name, own, q_to, f"rq{i}")
    return name


def _results(em, node: fx.Node, out_q: list, shapes: list) -> list[str]:
    """Declare the operator's result tensors (named ``<node>_<i>``)."""
    outs = []
    for i, (shape, q) in enumerate(zip(shapes, out_q, strict=True)):
        dtype = INT_OF[q.dtype] if q is not None else TORCH_TO_TOSA.get(shape.dtype)
        if dtype is None:
            raise LoweringError(f"result {i} has unsupported dtype {shape.dtype}", node=node.name)
        outs.append(em.new(str(i), list(shape.shape), dtype))
    return outs


def _getitem_q(em, node: fx.Node, i: int) -> QParams | None:
    for u in node.users:
        if u.target is operator.getitem and u.args[1] == i:
            return em.qout(u)
    return None


def _queue(em, node: fx.Node, boundaries: list[Boundary]) -> list[str]:
    """Reserve a region per sub-graph of ``node`` and queue its emission."""
    regions = []
    for attr, boundary in zip(subgraph_nodes(node), boundaries, strict=True):
        region = em.writer.reserve(f"{node.name}_{attr.target}")
        em.pending.append((region, type(em)(submodule(em.gm, attr), em.profile, parent=em),
                           boundary))
        regions.append(region)
    return regions


@register(COND)
def _cond(em, node):
    pred = node.args[0]
    ops = operands(node)
    then_gm, else_gm = (submodule(em.gm, a) for a in subgraph_nodes(node))
    in_q = [em.qin(node, o) if em.is_int else None for o in ops]
    results = node.meta["val"]
    then_outs = output_nodes(then_gm)
    out_q = []
    for i, r in enumerate(results):
        if em.is_int and r.is_floating_point():
            out_q.append(_getitem_q(em, node, i) or em.qout(then_outs[i]))
        else:
            out_q.append(None)
    cond = em.tensor(pred, None)
    if em.writer.dtypes[cond] != "BOOL" or int(np.prod(em.writer.shapes[cond])) != 1:
        raise LoweringError("torch.cond predicate must be one boolean", node=node.name)
    ins = [cond] + [_operand(em, node, o, q, i) for i, (o, q) in enumerate(zip(ops, in_q, strict=True))]
    outs = _results(em, node, out_q, list(results))
    then_r, else_r = _queue(em, node, [Boundary(in_q, out_q), Boundary(in_q, out_q)])
    em.writer.op("COND_IF", ins, outs, then_graph=then_r, else_graph=else_r)
    em.multi_out[node.name] = list(zip(outs, out_q, strict=True))


def _range(q: QParams) -> tuple[float, float]:
    return q.s * (q.qmin - q.zp), q.s * (q.qmax - q.zp)


def _loop_quantization(em, node, o, i: int, n_carried: int, body_gm, body_outs) -> QParams | None:
    """The quantization a WHILE_LOOP carries value ``i`` in.

    Every view of the value (entering the loop, the body's input and result, leaving the
    loop) was observed on its own: the carried one must hold them all, or a value beyond it
    saturates (a loop that doubles until a bound would never stop). The body's result
    quantization is preferred when it covers them (the next iteration then reads it without
    a second rounding); otherwise the widest range.
    """
    body_in = [n for n in body_gm.graph.nodes if n.op == "placeholder"][i]
    views = [em.qout(body_outs[i]) if i < n_carried else None, em.qin(node, o),
             em.qout(body_in), _getitem_q(em, node, i) if i < n_carried else None]
    views = [q for q in views if q is not None and q.axis is None]
    if not views:
        return None
    lo = min(_range(q)[0] for q in views)
    hi = max(_range(q)[1] for q in views)
    for q in views:
        a, b = _range(q)
        if a <= lo + 1e-12 and b >= hi - 1e-12:
            return q
    return max(views, key=lambda q: _range(q)[1] - _range(q)[0])


@register(WHILE_LOOP)
def _while_loop(em, node):
    carried = list(node.args[2])
    ops = operands(node)
    cond_gm, body_gm = (submodule(em.gm, a) for a in subgraph_nodes(node))
    body_outs = output_nodes(body_gm)
    loop_q = []
    for i, o in enumerate(ops):
        v = val(o)
        quantized = v is not None and (v.is_floating_point() or em.qout(o) is not None)
        if not em.is_int or not quantized:  # (a quantized constant already holds integers)
            loop_q.append(None)
            continue
        loop_q.append(_loop_quantization(em, node, o, i, len(carried), body_gm, body_outs))
    ins = [_operand(em, node, o, q, i) for i, (o, q) in enumerate(zip(ops, loop_q, strict=True))]
    outs = _results(em, node, loop_q, [val(o) for o in ops])
    extra = [n for n in body_gm.graph.nodes if n.op == "placeholder"][len(carried):]
    cond_r, body_r = _queue(em, node, [Boundary(loop_q, [None]),
                                       Boundary(loop_q, loop_q, extra)])
    em.writer.op("WHILE_LOOP", ins, outs, cond_graph=cond_r, body_graph=body_r)
    em.multi_out[node.name] = list(zip(outs, loop_q, strict=True))[:len(carried)]


@register(operator.getitem)
def _getitem(em, node):
    src, i = node.args
    if src.name not in em.multi_out:
        raise LoweringError("getitem of a node without several results", node=node.name)
    name, q = em.multi_out[src.name][i]
    own = em.qout(node)
    if em.is_int and not _same(q, own):
        name = requantize(em, name, q, own, "rq")
    em.bind(node, name, None)
