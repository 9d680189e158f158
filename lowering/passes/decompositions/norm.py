"""Normalizations: layer norm, group norm, instance norm and inference batch norm (every aten
form); vector norms."""

from __future__ import annotations

import math

import torch

from ...graph_utils import get_constant, val
from ._common import arg, const_like, decomposition, tuple_outputs

aten = torch.ops.aten


def _standardize(gm, b, x, dims, eps):
    """``(x - mean) * rsqrt(var + eps)`` over ``dims`` (kept); returns it, mean and rstd."""
    mean = b(aten.mean.dim, x, dims, True)
    centered = b(aten.sub.Tensor, x, mean)
    var = b(aten.mean.dim, b(aten.mul.Tensor, centered, centered), dims, True)
    rstd = b(aten.rsqrt.default, b(aten.add.Tensor, var, const_like(gm, b, float(eps), None, "eps")))
    return b(aten.mul.Tensor, centered, rstd), mean, rstd


def _affine(b, y, weight, bias):
    if weight is not None:
        y = b(aten.mul.Tensor, y, weight)
    if bias is not None:
        y = b(aten.add.Tensor, y, bias)
    return y


def _per_channel(gm, b, p, shape, hint):
    """A per-channel parameter ``[C]`` shaped to broadcast over ``[N, C, ...]``."""
    if p is None:
        return None
    t = get_constant(gm, p)
    return b.const(gm, t.reshape(shape), hint) if t is not None else b(aten.reshape.default, p, shape)


@decomposition(aten.layer_norm.default, aten.native_layer_norm.default)
def layer_norm(gm, n, b):
    """layer_norm(x, shape, w, b, eps); native_layer_norm also returns mean and rstd."""
    x, shape = n.args[0], n.args[1]
    rank = val(x).dim()
    y, mean, rstd = _standardize(gm, b, x, list(range(rank - len(shape), rank)),
                                 arg(n, 4, "eps", 1e-5))
    y = _affine(b, y, arg(n, 2, "weight"), arg(n, 3, "bias"))
    if n.target == aten.native_layer_norm.default:
        return tuple_outputs(n, [y, mean, rstd])
    return y


@decomposition(aten.group_norm.default, aten.native_group_norm.default)
def group_norm(gm, n, b):
    """group_norm(x, groups, w, b, eps); native_group_norm(x, w, b, N, C, HxW, groups, eps)
    also returns mean and rstd, shaped ``[N, groups]``."""
    native = n.target == aten.native_group_norm.default
    x = n.args[0]
    if native:
        weight, bias, groups, eps = n.args[1], n.args[2], n.args[6], n.args[7]
    else:
        groups, weight, bias = n.args[1], arg(n, 2, "weight"), arg(n, 3, "bias")
        eps = arg(n, 4, "eps", 1e-5)
    shape = list(val(x).shape)
    batch, channels = shape[0], shape[1]
    grouped = b(aten.reshape.default, x, [batch, groups, -1])
    y, mean, rstd = _standardize(gm, b, grouped, [2], eps)
    y = b(aten.reshape.default, y, shape)
    channel_shape = [channels] + [1] * (len(shape) - 2)
    y = _affine(b, y, _per_channel(gm, b, weight, channel_shape, "gn_w"),
                _per_channel(gm, b, bias, channel_shape, "gn_b"))
    if native:
        return tuple_outputs(n, [y, b(aten.reshape.default, mean, [batch, groups]),
                                 b(aten.reshape.default, rstd, [batch, groups])])
    return y


@decomposition(aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default)
def batch_norm(gm, n, b):
    """Inference batch norm with constant statistics: one multiply and one add per channel.

    ``batch_norm(x, w, b, mean, var, training, momentum, eps, cudnn)``;
    ``_native_batch_norm_legit_no_training(x, w, b, mean, var, momentum, eps)`` returns a
    tuple whose saved statistics are empty at inference (only the output is lowered).
    """
    native = n.target == aten._native_batch_norm_legit_no_training.default
    x, w, bias, mean, var = n.args[:5]
    eps = n.args[6] if native else arg(n, 7, "eps", 1e-5)
    y = _constant_statistics(gm, b, x, w, bias, mean, var, eps)
    if y is None:
        return None
    return tuple_outputs(n, [y, None, None]) if native else y


def _constant_statistics(gm, b, x, w, bias, mean, var, eps):
    """``(x - mean) / sqrt(var + eps) * w + bias`` per channel with constant statistics, as one
    multiply and one add; None when a statistic or parameter is not a constant."""
    mean_t, var_t = get_constant(gm, mean), get_constant(gm, var)
    if mean_t is None or var_t is None:
        return None
    channels = mean_t.numel()
    w_t = get_constant(gm, w) if w is not None else torch.ones(channels)
    b_t = get_constant(gm, bias) if bias is not None else torch.zeros(channels)
    if w_t is None or b_t is None:
        return None
    scale = w_t / torch.sqrt(var_t + eps)
    shift = b_t - mean_t * scale
    channel_shape = [channels] + [1] * (val(x).dim() - 2)
    y = b(aten.mul.Tensor, x, b.const(gm, scale.reshape(channel_shape), "bn_scale"))
    return b(aten.add.Tensor, y, b.const(gm, shift.reshape(channel_shape), "bn_shift"))


@decomposition(aten.instance_norm.default)
def instance_norm(gm, n, b):
    """``instance_norm(x, w, b, running_mean, running_var, use_input_stats, momentum, eps,
    cudnn)``: with ``use_input_stats`` each (sample, channel) is standardized over its own
    spatial positions (PyTorch computes this as a training-mode batch norm of the input viewed
    as ``[1, N*C, ...]``); without, the running statistics are constants, as in an inference
    batch norm."""
    x, weight, bias, mean, var = n.args[:5]
    use_input_stats, eps = arg(n, 5, "use_input_stats", True), arg(n, 7, "eps", 1e-5)
    v = val(x)
    if v is None:
        return None
    if not use_input_stats:
        return _constant_statistics(gm, b, x, weight, bias, mean, var, eps)
    # standardized over one flattened spatial axis: a mean over H,W of a 4-D tensor would be
    # a global average pool, whose shared scale puts sum/N on rounding ties in INT
    flat = b(aten.reshape.default, x, [v.shape[0], v.shape[1], -1])
    y, _, _ = _standardize(gm, b, flat, [2], eps)
    y = b(aten.reshape.default, y, list(v.shape))
    channel_shape = [v.shape[1]] + [1] * (v.dim() - 2)
    return _affine(b, y, _per_channel(gm, b, weight, channel_shape, "in_w"),
                   _per_channel(gm, b, bias, channel_shape, "in_b"))


@decomposition(aten.linalg_vector_norm.default)
def vector_norm(gm, n, b):
    """``linalg_vector_norm(x, ord, dim, keepdim)``: ord 2 is ``sqrt(sum(x * x))``, 1 is
    ``sum(|x|)``, +-inf is the max / min of ``|x|``, any other non-zero ord
    ``sum(|x| ** ord) ** (1 / ord)``. ord 0 (a count) and a ``dtype`` stay on the CPU."""
    x = n.args[0]
    order = float(arg(n, 1, "ord", 2))
    dims, keepdim = arg(n, 2, "dim"), bool(arg(n, 3, "keepdim", False))
    v = val(x)
    if v is None or not v.is_floating_point() or order == 0 or \
            n.kwargs.get("dtype") not in (None, v.dtype):
        return None
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(v.dim()))
    dims = [dims] if isinstance(dims, int) else list(dims)
    if order == 2:
        return b(aten.sqrt.default, b(aten.sum.dim_IntList, b(aten.mul.Tensor, x, x), dims, keepdim))
    magnitude = b(aten.abs.default, x)
    if math.isinf(order):
        return b(aten.amax.default if order > 0 else aten.amin.default, magnitude, dims, keepdim)
    if order == 1:
        return b(aten.sum.dim_IntList, magnitude, dims, keepdim)
    total = b(aten.sum.dim_IntList, b(aten.pow.Tensor_Scalar, magnitude, order), dims, keepdim)
    return b(aten.pow.Tensor_Scalar, total, 1.0 / order)


@decomposition(aten.rms_norm.default)
def rms_norm(gm, n, b):
    """rms_norm(x, shape, w, eps) (``nn.RMSNorm``): ``x * rsqrt(mean(x * x) + eps) * w`` over
    the last ``len(shape)`` dims; eps defaults to the dtype's machine epsilon, as PyTorch's."""
    x, shape = n.args[0], n.args[1]
    v = val(x)
    if v is None or not v.is_floating_point():
        return None
    eps = arg(n, 3, "eps")
    eps = torch.finfo(v.dtype).eps if eps is None else eps
    dims = list(range(v.dim() - len(shape), v.dim()))
    mean_square = b(aten.mean.dim, b(aten.mul.Tensor, x, x), dims, True)
    rms = b(aten.rsqrt.default, b(aten.add.Tensor, mean_square,
                                  const_like(gm, b, float(eps), None, "eps")))
    return _affine(b, b(aten.mul.Tensor, x, rms), arg(n, 2, "weight"), None)
