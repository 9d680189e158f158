"""conv1d / conv2d / conv3d (groups, depthwise, dilation, stride, padding), conv_transpose2d
and linear -> CONV2D / CONV3D / DEPTHWISE_CONV2D / TRANSPOSE_CONV2D (+ RESCALE in INT)."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import LoweringError
from ..graph_utils import NHWC
from ..serialize import INT_OF
from .common import int48_prescale_shift, int48_to_int32, rescale
from .registry import register

aten = torch.ops.aten


def _pair(v, n=2):
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def exact_pads(in_size, k, stride, dil, pad_lo, pad_hi):
    """Trim the trailing pad so TOSA's exact-division rule holds (PyTorch floors)."""
    span = in_size + pad_lo + pad_hi - dil * (k - 1) - 1
    rem = span % stride
    trim = min(rem, pad_hi)  # the trailing pad goes first, then the unread input rows
    return pad_lo, pad_hi - trim, rem - trim


def _weights(em, node, w_node):
    w = em.const_value(w_node)
    if w is None:
        raise LoweringError("convolution weights must be constant", node=node.name)
    return w.detach()


def _bias(em, node, b_node, out_ch, int_mode, acc):
    if b_node is None:
        return np.zeros(out_ch, np.int64 if int_mode else np.float32)
    b = em.const_value(b_node)
    if b is None:
        raise LoweringError("bias must be constant", node=node.name)
    b = b.detach().cpu().numpy()
    if int_mode and b.dtype.kind == "f":
        raise LoweringError("float bias in INT profile (not quantized)", node=node.name)
    return b.astype(np.int64 if int_mode else np.float32)


def _dilated_kernel(w, dilation: list[int]):
    """A transposed-conv weight ``[Cin, Cout/g, kh, kw]`` with ``dilation`` as the undilated
    kernel it equals: the taps ``dilation`` apart and zeros between (a zero tap adds exactly
    nothing), of size ``(k - 1) * d + 1``; TOSA's TRANSPOSE_CONV2D has no dilation.

    Example:
        >>> _dilated_kernel(torch.ones(1, 1, 1, 2), [1, 3])[0, 0].tolist()
        [[1.0, 0.0, 0.0, 1.0]]
    """
    if list(dilation) == [1, 1]:
        return w
    dh, dw = dilation
    cin, cout, kh, kw = w.shape
    out = torch.zeros((cin, cout, (kh - 1) * dh + 1, (kw - 1) * dw + 1), dtype=w.dtype)
    out[:, :, ::dh, ::dw] = w
    return out


def _block_diagonal(w_np: np.ndarray, groups: int) -> np.ndarray:
    """A grouped transposed-conv weight ``[Cin, Cout/g, kh, kw]`` as the equivalent ungrouped
    ``[Cin, Cout, kh, kw]``: group ``g``'s block on the diagonal, zeros elsewhere (a zero
    weight adds exactly nothing, in integers and in floats).

    Example:
        >>> _block_diagonal(np.ones((4, 1, 1, 1)), 2)[:, :, 0, 0].tolist()
        [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    """
    cin, og = w_np.shape[0], w_np.shape[1]
    cg = cin // groups
    full = np.zeros((cin, og * groups, *w_np.shape[2:]), w_np.dtype)
    for g in range(groups):
        full[g * cg:(g + 1) * cg, g * og:(g + 1) * og] = w_np[g * cg:(g + 1) * cg]
    return full


def conv_core(em, node, x, in_shape, w, bias, stride, pads, dil, groups, out_shape, x_node,
              w_node, transposed=False, out_pad=None, layout=NHWC):
    """Emit a 2-D conv on NHWC tensor ``x`` (3-D on NDHWC when ``layout`` is NDHWC); returns
    the output in ``layout`` (node dtype)."""
    OC = w.shape[0] if not transposed else w.shape[1] * groups
    rank = len(in_shape)
    conv_op = "CONV3D" if rank == 5 else "CONV2D"
    to_ohwi = (0, *range(2, rank), 1)
    int_mode = em.is_int
    if int_mode:
        qx = em.qin(node, x_node)
        qw = em.qin(node, w_node)
        qo = em.qout(node)
        in_dtype = INT_OF[qx.dtype]
        acc = "INT48" if in_dtype == "INT16" else "INT32"
        xzp = em.const("xzp", [qx.zp], in_dtype, [1])
        wzp = em.const("wzp", [0], "INT8", [1])
        np.broadcast_to(qw.scale, (OC,)) if qw.scale.size > 1 or True else qw.scale
        out_dtype_acc = acc
    else:
        in_dtype = "FP32"
        acc = "FP32"
        xzp = em.const("xzp", [0.0], "FP32", [1])
        wzp = em.const("wzp", [0.0], "FP32", [1])
        out_dtype_acc = "FP32"
    wdtype = "INT8" if int_mode else "FP32"
    bdtype = acc
    w_np = w.cpu().numpy()
    Cin = in_shape[-1]
    if transposed:
        # torch weight [Cin, Cout/g, kh, kw] -> TOSA [OC, KH, KW, IC] (no flip needed)
        if groups != 1:
            w_np = _block_diagonal(w_np, groups)
        wt = np.transpose(w_np, (1, 2, 3, 0))
        wc = em.const("weight", wt, wdtype, list(wt.shape), node=node)
        bc = em.const("bias", bias, bdtype, [OC])
        res = em.new("acc", out_shape, out_dtype_acc) if int_mode else em.out(node, NHWC)
        em.writer.op("TRANSPOSE_CONV2D", [x, wc, bc, xzp, wzp], res, out_pad=out_pad,
                     stride=stride, local_bound=False, acc_type=acc)
    elif groups == 1:
        wt = np.transpose(w_np, to_ohwi)  # OHWI / ODHWI
        wc = em.const("weight", wt, wdtype, list(wt.shape))
        bc = em.const("bias", bias, bdtype, [OC])
        res = em.new("acc", out_shape, out_dtype_acc) if int_mode else em.out(node, layout)
        em.writer.op(conv_op, [x, wc, bc, xzp, wzp], res, pad=pads, stride=stride, dilation=dil,
                     local_bound=False, acc_type=acc)
    elif groups == Cin and OC % Cin == 0 and rank == 4:
        M = OC // Cin
        kh, kw = w_np.shape[2], w_np.shape[3]
        wt = np.transpose(w_np.reshape(Cin, M, kh, kw), (2, 3, 0, 1))  # KH KW C M
        wc = em.const("weight", wt, wdtype, list(wt.shape))
        bc = em.const("bias", bias, bdtype, [OC])
        res = em.new("acc", out_shape, out_dtype_acc) if int_mode else em.out(node, NHWC)
        em.writer.op("DEPTHWISE_CONV2D", [x, wc, bc, xzp, wzp], res, pad=pads, stride=stride,
                     dilation=dil, local_bound=False, acc_type=acc)
    else:
        cg, og = Cin // groups, OC // groups
        if int_mode:
            # Each group is rescaled to the output type before the CONCAT (RESCALE is
            # per channel, so this equals rescaling the concatenation): a CONCAT of INT48
            # accumulators is not valid TOSA, and Vela 5.2 crashes on a CONCAT of INT32
            # accumulators for Ethos-U55 when N > 1 and H == 1 (grouped conv1d).
            scales = qx.s * np.broadcast_to(qw.scale.reshape(-1), (OC,)) / qo.s
            k48 = int48_prescale_shift(scales) if acc == "INT48" else None
        parts = []
        for g in range(groups):
            sl_shape = list(in_shape[:-1]) + [cg]
            xs = em.new(f"g{g}_in", sl_shape, in_dtype)
            em.writer.op("SLICE", [x, em.const_shape(f"g{g}_start", [0] * (rank - 1) + [g * cg]),
                                   em.const_shape(f"g{g}_size", sl_shape)], xs)
            wt = np.transpose(w_np[g * og:(g + 1) * og], to_ohwi)
            wc = em.const(f"g{g}_weight", wt, wdtype, list(wt.shape))
            bc = em.const(f"g{g}_bias", bias[g * og:(g + 1) * og], bdtype, [og])
            ps = list(out_shape[:-1]) + [og]
            r = em.new(f"g{g}_acc", ps, out_dtype_acc)
            em.writer.op(conv_op, [xs, wc, bc, xzp, wzp], r, pad=pads, stride=stride,
                         dilation=dil, local_bound=False, acc_type=acc)
            if int_mode:
                group_scales = scales[g * og:(g + 1) * og]
                if k48 is not None:  # the same power-of-two step for every group
                    r = int48_to_int32(em, r, k48, f"g{g}_rescale")
                    group_scales = group_scales * (1 << k48)
                r = rescale(em, r, INT_OF[qo.dtype], group_scales, 0, qo.zp, f"g{g}_rescale",
                            per_channel=True)
            parts.append(r)
        res = em.out(node, layout)
        em.writer.op("CONCAT", parts, res, axis=rank - 1)
        return res
    if not int_mode:
        return res
    scales = qx.s * np.broadcast_to(qw.scale.reshape(-1), (OC,)) / qo.s
    out = em.out(node, layout) if len(out_shape) == rank else None
    return rescale(em, res, INT_OF[qo.dtype], scales, 0, qo.zp, "rescale", out_name=out,
                   per_channel=True)


def _conv_args(node):
    a = list(node.args) + [None] * 7
    x, w, b = a[0], a[1], a[2]
    stride = a[3] if a[3] is not None else 1
    padding = a[4] if a[4] is not None else 0
    dilation = a[5] if a[5] is not None else 1
    groups = a[6] if a[6] is not None else 1
    return x, w, b, stride, padding, dilation, groups


@register(aten.conv2d.default, aten.conv2d.padding)
def conv2d(em, node):
    x_node, w_node, b_node, stride, padding, dilation, groups = _conv_args(node)
    w = _weights(em, node, w_node)
    kh, kw = w.shape[2], w.shape[3]
    stride, dil = _pair(stride), _pair(dilation)
    in_shape = em.shape(x_node, NHWC)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0, 0]
        else:  # same
            th, tw = dil[0] * (kh - 1), dil[1] * (kw - 1)
            padding = None
            pads = [th // 2, th - th // 2, tw // 2, tw - tw // 2]
    if padding is not None:
        p = _pair(padding)
        pads = [p[0], p[0], p[1], p[1]]
    t, b_, rem_h = exact_pads(in_shape[1], kh, stride[0], dil[0], pads[0], pads[1])
    left, r_, rem_w = exact_pads(in_shape[2], kw, stride[1], dil[1], pads[2], pads[3])
    x = em.tensor(x_node, NHWC)
    if rem_h or rem_w:
        x = _crop(em, x, in_shape, rem_h, rem_w)
        in_shape = em.writer.shapes[x]
    out_shape = em.shape(node, NHWC)
    OC = w.shape[0]
    bias = _bias(em, node, b_node, OC, em.is_int, None)
    res = conv_core(em, node, x, in_shape, w, bias, stride, [t, b_, left, r_], dil, groups,
                    out_shape, x_node, w_node)
    em.bind(node, res, NHWC)


def _crop(em, x, shape, rem_h, rem_w):
    new = [shape[0], shape[1] - rem_h, shape[2] - rem_w, shape[3]]
    out = em.new("crop", new, em.writer.dtypes[x])
    em.writer.op("SLICE", [x, em.const_shape("crop_start", [0, 0, 0, 0]),
                           em.const_shape("crop_size", new)], out)
    return out


NDHWC = (0, 2, 3, 4, 1)


def _crop_nd(em, x, rems):
    """SLICE away the last ``rems[i]`` elements of spatial dim ``i`` of NDHWC/NHWC ``x``."""
    shape = em.writer.shapes[x]
    if not any(rems):
        return x
    new = [shape[0]] + [s - r for s, r in zip(shape[1:-1], rems, strict=True)] + [shape[-1]]
    out = em.new("crop", new, em.writer.dtypes[x])
    em.writer.op("SLICE", [x, em.const_shape("crop_start", [0] * len(shape)),
                           em.const_shape("crop_size", new)], out)
    return out


def _same_pads(k, dil):
    """PyTorch's ``padding="same"``: the total padding, the odd element at the end."""
    tot = dil * (k - 1)
    return tot // 2, tot - tot // 2


@register(aten.conv3d.default, aten.conv3d.padding)
def conv3d(em, node):
    """conv3d -> CONV3D on NDHWC (grouped: one CONV3D per group + CONCAT)."""
    x_node, w_node, b_node, stride, padding, dilation, groups = _conv_args(node)
    w = _weights(em, node, w_node)
    ks = list(w.shape[2:])
    stride, dil = _pair(stride, 3), _pair(dilation, 3)
    in_shape = em.shape(x_node, NDHWC)
    if isinstance(padding, str):
        lohi = [(0, 0)] * 3 if padding == "valid" else [_same_pads(k, d)
                                                         for k, d in zip(ks, dil, strict=True)]
    else:
        lohi = [(p, p) for p in _pair(padding, 3)]
    pads, rems = [], []
    for i in range(3):
        lo, hi, rem = exact_pads(in_shape[1 + i], ks[i], stride[i], dil[i], *lohi[i])
        pads += [lo, hi]
        rems.append(rem)
    x = _crop_nd(em, em.tensor(x_node, NDHWC), rems)
    in_shape = em.writer.shapes[x]
    OC = w.shape[0]
    bias = _bias(em, node, b_node, OC, em.is_int, None)
    res = conv_core(em, node, x, in_shape, w, bias, stride, pads, dil, groups,
                    em.shape(node, NDHWC), x_node, w_node, layout=NDHWC)
    em.bind(node, res, NDHWC)


@register(aten.conv1d.default, aten.conv1d.padding)
def conv1d(em, node):
    x_node, w_node, b_node, stride, padding, dilation, groups = _conv_args(node)
    w = _weights(em, node, w_node).unsqueeze(2)  # [OC, I, 1, k]
    N, C, L = em.shape(x_node)
    x = em.tensor(x_node)
    xt = em.new("nlc", [N, L, C], em.writer.dtypes[x])
    em.writer.op("TRANSPOSE", [x], xt, perms=[0, 2, 1])
    x4 = em.new("nhwc_in", [N, 1, L, C], em.writer.dtypes[x])
    em.writer.op("RESHAPE", [xt, em.const_shape("nhwc_in_shape", [N, 1, L, C])], x4)
    stride, dil = _pair(stride, 1)[0], _pair(dilation, 1)[0]
    k = w.shape[3]
    if isinstance(padding, str):
        tot = dil * (k - 1)
        pl, pr = (0, 0) if padding == "valid" else (tot // 2, tot - tot // 2)
    else:
        pl = pr = _pair(padding, 1)[0]
    pl, pr, rem = exact_pads(L, k, stride, dil, pl, pr)
    in_shape = [N, 1, L, C]
    if rem:
        x4 = _crop(em, x4, in_shape, 0, rem)
        in_shape = em.writer.shapes[x4]
    N2, OC, L2 = em.shape(node)
    bias = _bias(em, node, b_node, OC, em.is_int, None)
    res = _conv_tmp(em, node, x4, in_shape, w, bias, [1, stride], [0, 0, pl, pr], [1, dil],
                    groups, [N, 1, L2, OC], x_node, w_node)
    r3 = em.new("nlc_out", [N, L2, OC], em.writer.dtypes[res])
    em.writer.op("RESHAPE", [res, em.const_shape("nlc_out_shape", [N, L2, OC])], r3)
    out = em.out(node)
    em.writer.op("TRANSPOSE", [r3], out, perms=[0, 2, 1])
    em.bind(node, out)


def _conv_tmp(em, node, x, in_shape, w, bias, stride, pads, dil, groups, out_shape, x_node,
              w_node):
    """conv_core but with the result in a scratch tensor instead of the node's name."""
    saved = em.out
    em.out = lambda n, layout=None, dtype=None: em.new("conv", out_shape, dtype or em.dtype(n))
    try:
        return conv_core(em, node, x, in_shape, w, bias, stride, pads, dil, groups, out_shape,
                         x_node, w_node)
    finally:
        em.out = saved


@register(aten.linear.default)
def linear(em, node):
    x_node, w_node = node.args[0], node.args[1]
    b_node = node.args[2] if len(node.args) > 2 else None
    w = _weights(em, node, w_node)  # [N, K]
    xs = em.shape(x_node)
    K = xs[-1]
    M = int(np.prod(xs[:-1])) if len(xs) > 1 else 1
    N = w.shape[0]
    x = em.tensor(x_node)
    x4 = em.new("in4", [M, 1, 1, K], em.writer.dtypes[x])
    em.writer.op("RESHAPE", [x, em.const_shape("in4_shape", [M, 1, 1, K])], x4)
    bias = _bias(em, node, b_node, N, em.is_int, None)
    res = _conv_tmp(em, node, x4, [M, 1, 1, K], w.reshape(N, K, 1, 1), bias, [1, 1],
                    [0, 0, 0, 0], [1, 1], 1, [M, 1, 1, N], x_node, w_node)
    out = em.out(node)
    em.writer.op("RESHAPE", [res, em.const_shape("out_shape", em.shape(node))], out)
    em.bind(node, out)


@register(aten.conv_transpose2d.input)
def conv_transpose2d(em, node):
    a = list(node.args) + [None] * 8
    x_node, w_node, b_node = a[0], a[1], a[2]
    stride = _pair(a[3] if a[3] is not None else 1)
    padding = _pair(a[4] if a[4] is not None else 0)
    output_padding = _pair(a[5] if a[5] is not None else 0)
    groups = a[6] if a[6] is not None else 1
    dilation = _pair(a[7] if a[7] is not None else 1)
    w = _dilated_kernel(_weights(em, node, w_node), dilation)  # [Cin, Cout/g, kh, kw]
    in_shape = em.shape(x_node, NHWC)
    out_shape = em.shape(node, NHWC)
    OC = w.shape[1] * groups
    bias = _bias(em, node, b_node, OC, em.is_int, None)
    # TOSA out_pad = [top, bottom, left, right] added to (in-1)*stride + k
    out_pad = [-padding[0], -padding[0] + output_padding[0], -padding[1],
               -padding[1] + output_padding[1]]
    x = em.tensor(x_node, NHWC)
    res = conv_core(em, node, x, in_shape, w, bias, stride, None, None, groups, out_shape,
                    x_node, w_node, transposed=True, out_pad=out_pad)
    em.bind(node, res, NHWC)


@register(aten.convolution.default)
def convolution(em, node):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = node.args[:9]
    if transposed:
        node.args = (x, w, b, stride, padding, output_padding, groups, dilation)
        return conv_transpose2d(em, node)
    if len(em.shape(x)) == 3:
        node.args = (x, w, b, stride, padding, dilation, groups)
        return conv1d(em, node)
    if len(em.shape(x)) == 5:
        node.args = (x, w, b, stride, padding, dilation, groups)
        return conv3d(em, node)
    node.args = (x, w, b, stride, padding, dilation, groups)
    return conv2d(em, node)
