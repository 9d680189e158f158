"""Fold inference batch norm into the preceding convolution."""

from __future__ import annotations

import torch
import torch.fx as fx

from ..graph_utils import add_constant, get_constant
from .base import GraphPass, PassContext

aten = torch.ops.aten
_CONVS = {aten.conv2d.default, aten.conv1d.default, aten.convolution.default,
          aten.conv_transpose2d.input, aten.conv_transpose1d.default}
_BNS = {aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default}


def transposed_groups(conv: fx.Node) -> int | None:
    """The group count of a transposed convolution, None for a forward one.

    Example:
        >>> g = fx.Graph(); x, w = g.placeholder("x"), g.placeholder("w")
        >>> transposed_groups(g.call_function(aten.conv_transpose2d.input,
        ...                                   (x, w, None, 1, 0, 0, 2)))
        2
    """
    if conv.target in (aten.conv_transpose2d.input, aten.conv_transpose1d.default):
        return conv.args[6] if len(conv.args) > 6 and conv.args[6] is not None else 1
    if conv.target == aten.convolution.default and conv.args[6]:
        return conv.args[8]
    return None


def _scale_output_channels(w: torch.Tensor, scale: torch.Tensor, groups: int | None):
    """``w`` with output channel ``o`` multiplied by ``scale[o]``: axis 0 of a forward
    conv's weight, and for a transposed conv (``[Cin, Cout/g, k...]``, output channel
    ``g * Cout/g + j``) axis 1 within each group."""
    if groups is None:
        return w * scale.reshape([-1] + [1] * (w.dim() - 1))
    cin, og = w.shape[0], w.shape[1]
    k = list(w.shape[2:])
    grouped = w.reshape(groups, cin // groups, og, *k)
    return (grouped * scale.reshape(groups, 1, og, *[1] * len(k))).reshape(w.shape)


def _linear_on_channels(node: fx.Node) -> bool:
    """A linear layer whose output features are the batch norm's channels: a 2-D input (with
    more dimensions, the layer maps the last one and the batch norm normalises dimension 1)."""
    x = node.args[0] if node.args else None
    value = x.meta.get("tv_val", x.meta.get("val")) if isinstance(x, fx.Node) else None
    return node.target == aten.linear.default and isinstance(value, torch.Tensor) and value.dim() == 2


def _own_copy(gm: fx.GraphModule, producer: fx.Node, bn: fx.Node) -> fx.Node:
    """``producer`` itself when ``bn`` is its only user, else a copy of it that feeds only
    ``bn``: its other users read the output without the batch norm. (PT2E's prepare folds a
    batch norm into the convolution or linear before it whatever else reads that, so leaving
    such a pair unfolded would not keep it apart either.)"""
    if len(producer.users) == 1:
        return producer
    with gm.graph.inserting_after(producer):
        copy = gm.graph.call_function(producer.target, producer.args, dict(producer.kwargs))
    copy.meta.update(producer.meta)
    bn.replace_input_with(producer, copy)
    return copy


class FoldBatchNorm(GraphPass):
    """``conv -> batch_norm`` or ``linear -> batch_norm`` (constant weights and statistics)
    becomes one conv or linear, transposed and grouped convolutions included. A conv or linear
    that something else reads too is copied for the batch norm's branch.

    Example:
        >>> m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.BatchNorm2d(2)).eval()
        >>> gm = torch.export.export(m, (torch.ones(1, 1, 2, 2),)).module(check_guards=False)
        >>> FoldBatchNorm()(gm, PassContext())
        >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        ['aten.conv2d.default']
    """

    restructures = True

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:
        for bn in list(gm.graph.nodes):
            if bn.op != "call_function" or bn.target not in _BNS:
                continue
            conv = bn.args[0]
            if not isinstance(conv, fx.Node) or not (conv.target in _CONVS or _linear_on_channels(conv)):
                continue
            groups = transposed_groups(conv)
            w = get_constant(gm, conv.args[1])
            b = get_constant(gm, conv.args[2]) if len(conv.args) > 2 and conv.args[2] is not None else None
            bw, bb, mean, var = (get_constant(gm, a) if a is not None else None for a in bn.args[1:5])
            if w is None or mean is None or var is None:
                continue
            if bn.target == aten._native_batch_norm_legit_no_training.default:
                eps = bn.args[6]
                users = list(bn.users)
                if any(u.target is not __import__("operator").getitem or u.args[1] != 0 for u in users):
                    continue
            else:
                eps = bn.args[7]
                users = None
            conv = _own_copy(gm, conv, bn)
            C = w.shape[0] if groups is None else w.shape[1] * groups
            bw = bw if bw is not None else torch.ones(C)
            bb = bb if bb is not None else torch.zeros(C)
            b = b if b is not None else torch.zeros(C)
            scale = bw / torch.sqrt(var + eps)
            new_w = _scale_output_channels(w, scale, groups)
            new_b = (b - mean) * scale + bb
            wn = add_constant(gm, new_w, "bnw", before=conv)
            bnode = add_constant(gm, new_b, "bnb", before=conv)
            args = list(conv.args)
            while len(args) < 3:
                args.append(None)
            args[1], args[2] = wn, bnode
            conv.args = tuple(args)
            if users is not None:
                for u in users:
                    u.replace_all_uses_with(conv)
                    gm.graph.erase_node(u)
            else:
                bn.replace_all_uses_with(conv)
            gm.graph.erase_node(bn)
