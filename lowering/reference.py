"""Evaluate the fake-quant (``convert_pt2e``) graph with float64 arithmetic.

PyTorch evaluates the fake-quant graph in float32; accumulation rounding flips a
handful of values across a rounding boundary, and in deep nets those one-step flips
grow layer by layer. Evaluating the very same graph in float64 removes that noise,
which is what an integer (TOSA) implementation should be compared against.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .graph_utils import DQ_OPS, Q_OPS

_qd = torch.ops.quantized_decomposed


def _quantize(x, scale, zp, qmin, qmax, dtype, axis=None):
    x = x.double()
    if axis is not None:
        shape = [1] * x.dim()
        shape[axis] = -1
        scale = scale.double().reshape(shape)
        zp = zp.double().reshape(shape)
    q = torch.round(x / scale) + zp
    return q.clamp(qmin, qmax).to(dtype)


def _dequantize(q, scale, zp, axis=None):
    if axis is not None:
        shape = [1] * q.dim()
        shape[axis] = -1
        scale = scale.double().reshape(shape)
        zp = zp.double().reshape(shape)
    return (q.double() - zp) * scale


class _F64(fx.Interpreter):
    def run_node(self, n):
        if n.op == "call_function" and n.target in Q_OPS and isinstance(n.args[0], fx.Node) \
                and n.args[0].op == "placeholder":
            # graph inputs are quantized exactly like LoweredModel.quantize_inputs (float32)
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            return n.target(args[0].float(), *args[1:], **kwargs)
        return super().run_node(n)

    def call_function(self, target, args, kwargs):
        if target in Q_OPS or target in DQ_OPS:
            per_ch = "per_channel" in str(target)
            if per_ch:
                x, s, zp, axis, qmin, qmax, dtype = args[:7]
            else:
                x, s, zp, qmin, qmax, dtype = args[:6]
                axis = None
                s = torch.tensor(float(s), dtype=torch.float64) if not isinstance(s, torch.Tensor) else s
                zp = torch.tensor(int(zp)) if not isinstance(zp, torch.Tensor) else zp
            if target in Q_OPS:
                return _quantize(x, s, zp, qmin, qmax, dtype, axis)
            return _dequantize(x, s, zp, axis)

        def up(a):
            if isinstance(a, torch.Tensor) and a.dtype == torch.float32:
                return a.double()
            return a

        args = tuple(up(a) if not isinstance(a, (list, tuple)) else type(a)(up(b) for b in a)
                     for a in args)
        kwargs = {k: up(v) for k, v in kwargs.items()}
        return target(*args, **kwargs)

    def get_attr(self, target, args, kwargs):
        v = super().get_attr(target, args, kwargs)
        return v.double() if isinstance(v, torch.Tensor) and v.dtype == torch.float32 else v


def fake_quant_float64(quantized_model: fx.GraphModule, *inputs):
    """Run a ``convert_pt2e`` graph in float64 (outputs cast back to float32).

    Example:
        >>> import lowering
        >>> m = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
        >>> lm = lowering.lower(m, (torch.randn(2, 4),))
        >>> x = torch.randn(2, 4)
        >>> bool((fake_quant_float64(lm.quantized_model, x) - lm.quantized_model(x)).abs().max() < 1e-2)
        True
    """
    with torch.no_grad():
        out = _F64(quantized_model).run(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point()
                                          else x for x in inputs])
    if isinstance(out, (list, tuple)):
        return type(out)(o.float() if isinstance(o, torch.Tensor) and o.is_floating_point() else o
                         for o in out)
    return out.float() if out.is_floating_point() else out
