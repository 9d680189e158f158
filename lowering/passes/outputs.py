"""Graph outputs that are not computed tensors: python numbers and constant tensors.

A model may return a python number (``return logits, x.shape[0]``) or a constant tensor
(SSD's anchor boxes, ``torch.ones(3)``). TOSA outputs are tensors, and in the INT profile a
float tensor has to be quantized, which PT2E does only where an annotated op writes one; both
made the whole lowering fail ("non-tensor graph output", "unquantized float constant").
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ..errors import LoweringError
from ..graph_utils import add_constant, get_constant
from .base import GraphPass, PassContext
from .fold_qdq import graph_activation_dtype, range_qparams


def _outputs(gm: fx.GraphModule) -> tuple[fx.Node, list]:
    out = gm.graph.output_node()
    values = out.args[0]
    return out, list(values) if isinstance(values, (list, tuple)) else [values]


def _set_outputs(out: fx.Node, values: list) -> None:
    original = out.args[0]
    out.args = (type(original)(values) if isinstance(original, (list, tuple)) else values[0],)


class ScalarOutputsToConstants(GraphPass):
    """A python number the graph returns becomes a 0-d constant tensor of its type (int64 for an
    int, float32 for a float, bool): the lowered model returns ``tensor(2)`` where the model
    returned ``2``. A ``None`` it returns is left out: the lowered model's outputs are the
    tensors among the model's, in order (``tree_leaves`` of its output without the Nones).

    Example:
        >>> gm = torch.export.export(torch.nn.Flatten(), (torch.ones(2, 3),)).module(check_guards=False)
        >>> out = gm.graph.output_node(); out.args = ((out.args[0][0], 2),)
        >>> ScalarOutputsToConstants()(gm, PassContext())
        >>> [type(v).__name__ for v in gm.graph.output_node().args[0]]
        ['Node', 'Node']
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        out, values = _outputs(gm)
        if all(isinstance(v, fx.Node) for v in values):
            return
        new = []
        for v in values:
            if v is None:
                continue
            if isinstance(v, (bool, int, float)):
                dtype = torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int) else torch.float32
                node = add_constant(gm, torch.tensor(v, dtype=dtype), "output_number", before=out)
                node.meta["val"] = node.meta["tv_val"]
                node.meta["torch_dtype"] = dtype  # (an int64 constant travels as INT32)
                new.append(node)
            else:
                new.append(v)
        if not new:
            raise LoweringError("the model returns no tensor (only None)", node="output")
        _set_outputs(out, new)


class QuantizeConstantOutputs(GraphPass):
    """INT: a float constant the graph returns is stored quantized (the graph's activation
    dtype, a range covering its values and 0), so it is an INT tensor like every other output;
    the lowered model dequantizes it, within half a step of the float constant.

    Example:
        >>> gm = torch.fx.symbolic_trace(torch.nn.Identity())
        >>> out = gm.graph.output_node()
        >>> c = add_constant(gm, torch.tensor([0.5, -1.0, 2.0]), "anchors", before=out); out.args = (c,)
        >>> QuantizeConstantOutputs()(gm, PassContext(profile="INT"))
        >>> q = gm.graph.output_node().args[0]
        >>> get_constant(gm, q).dtype, q.meta["qout"].dequantize(get_constant(gm, q).numpy()).round(2).tolist()
        (torch.int8, [0.49, -1.0, 2.0])
    """

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        if ctx.profile != "INT":
            return
        out, values = _outputs(gm)
        dtype = graph_activation_dtype(gm)
        new = []
        for v in values:
            t = get_constant(gm, v) if isinstance(v, fx.Node) else None
            if t is None or not t.is_floating_point() or "qout" in v.meta:
                new.append(v)
                continue
            real = t.float()
            qp = range_qparams(real, dtype)
            stored = torch.as_tensor(qp.quantize(real.numpy())).to(dtype)  # (clipped to dtype's range)
            node = add_constant(gm, stored, f"{v.name}_q", before=out)
            node.meta["qout"] = qp
            node.meta["val"] = t
            new.append(node)
        _set_outputs(out, new)
