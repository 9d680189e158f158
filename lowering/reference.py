"""The PyTorch side of a lowered model as references: the one float64 fake-quant evaluator.

PyTorch evaluates the fake-quant (``convert_pt2e``) graph in float32; accumulation rounding flips a
handful of values across a rounding boundary, and in deep nets those one-step flips grow layer by
layer. Evaluating the very same graph in float64 removes that noise, which is what an integer
(TOSA) implementation should be compared against. Semantics (the one definition, used by
:func:`fake_quant_float64`, the lowering tests and :func:`tosa_verify.drift` through
:meth:`lowering.LoweredModel.torch_reference`):

* every floating tensor (graph inputs, parameters, op arguments) is taken to float64;
* ``quantize_per_*`` is ``clamp(round_half_even(x / scale) + zp, qmin, qmax)`` and
  ``dequantize_per_*`` is ``(q - zp) * scale``, both in float64 (per-channel along ``axis``;
  :mod:`lowering.qparams`), so integer arithmetic's .5 ties stay ties;
* except that an element-wise function of one tensor (``lowering.ops.registry.table_ops``: a
  TABLE in INT) sees PyTorch's own float32 dequantized value (``dequantize_f32``), as the
  table builder does: acos(1.0) = 0 where the real 1.0000000591 (q = 127, scale
  float32(1/255), zero point -128) is outside acos's domain;
* a quantize applied directly to a graph input stays in float32, exactly as
  :meth:`LoweredModel.quantize_inputs` (the deployment) quantizes its inputs.

:class:`TorchReference` also answers the other questions the drift analysis asks of the PyTorch
models (captured values of every node, folded-node chains, recorded layouts, a node evaluated on
given samples), so that ``tosa_verify``'s analysis never imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx as fx

from .ops.registry import table_ops
from .qparams import dequantize_exact, dequantize_f32, quantize_f64

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_RECORDED = ("placeholder", "call_function", "call_module", "call_method")


def qdq_kind(target: Any) -> str:
    """``"q"`` for a quantized_decomposed quantize, ``"dq"`` for a dequantize, else ``""``.

    Example:
        >>> qdq_kind("quantized_decomposed.dequantize_per_tensor.default"), qdq_kind(torch.add)
        ('dq', '')
    """
    name = str(target)
    if "quantized_decomposed" not in name:
        return ""
    if "dequantize_per" in name:
        return "dq"
    if "quantize_per" in name:
        return "q"
    return ""


def _up(a: Any) -> Any:
    """Floating tensors (also inside lists and tuples) to float64."""
    if isinstance(a, torch.Tensor) and a.dtype in _FLOATS:
        return a.double()
    if isinstance(a, (list, tuple)):
        return type(a)(_up(b) for b in a)
    return a


def _qdq_f64(kind: str, name: str, args: Sequence[Any], like_torch: bool = False) -> torch.Tensor:
    """quantize (``kind="q"``) or dequantize: the real value, or torch's float32 one."""
    if "per_channel" in name:
        x, scale, zp, axis, qmin, qmax, dtype = list(args[:7])
    else:
        x, scale, zp, qmin, qmax, dtype = list(args[:6])
        axis = None
    if kind == "q":
        return quantize_f64(x, scale, zp, qmin, qmax, dtype, axis)
    return (dequantize_f32 if like_torch else dequantize_exact)(x, scale, zp, axis)


@dataclass
class Capture:
    """Every tensor-valued node's value of one run (quantize/dequantize nodes left out).

    ``own_quantization`` maps a node that a per-tensor quantize consumes to the model's own
    quantized value of it (int64) and the ``(scale, zero_point)`` it used.
    """

    values: dict[str, np.ndarray] = field(default_factory=dict)
    own_quantization: dict[str, tuple[np.ndarray, float, int]] = field(default_factory=dict)


class _Run(fx.Interpreter):
    """The evaluator: float64 (``wide``) or the graph's own precision, optionally recording."""

    def __init__(self, module: fx.GraphModule, wide: bool, record: Capture | None = None) -> None:
        super().__init__(module)
        self.wide = wide
        self.record = record
        self.node: fx.Node | None = None
        self.tables = table_ops()
        #: dequantize node -> [torch's float32 value of it, element-wise function users left]
        self.torch_values: dict[fx.Node, list] = {}

    def run_node(self, n: fx.Node) -> Any:
        self.node = n
        out = super().run_node(n)
        if self.record is not None and n.op in _RECORDED and isinstance(out, torch.Tensor):
            self._record(n, out)
        return out

    def _record(self, n: fx.Node, out: torch.Tensor) -> None:
        kind = qdq_kind(n.target) if n.op == "call_function" else ""
        if not kind:
            # A copy either way: a later in-place op of the graph (``add_``, ``relu_``) writes
            # into this very tensor, and ``.double()`` of a float64 one is the tensor itself.
            arr = out.detach()
            self.record.values[n.name] = (arr.double() if arr.is_floating_point() else arr).numpy().copy()
        elif kind == "q" and "per_tensor" in str(n.target) and n.args and hasattr(n.args[0], "name"):
            self.record.own_quantization[n.args[0].name] = (
                out.detach().numpy().astype(np.int64), float(n.args[1]), int(n.args[2]))

    def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
        v = super().get_attr(target, args, kwargs)
        users = self.node.users if self.node is not None else ()
        if users and all(u.op == "call_function" and qdq_kind(u.target) for u in users):
            # quantization parameters (per-channel scales) keep their dtype: torch's
            # dequantize computes in it (lowering.qparams.dequantize_f32)
            return v
        return _up(v) if self.wide else v

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if not self.wide:
            return target(*args, **kwargs)
        kind = qdq_kind(target)
        if kind:
            src = self.node.args[0] if self.node is not None and self.node.args else None
            if kind == "q" and getattr(src, "op", "") == "placeholder":
                # graph inputs are quantized exactly like LoweredModel.quantize_inputs (float32)
                return target(args[0].float(), *args[1:], **kwargs)
            if kind == "dq":
                self._keep_torch_value(args)
            return _qdq_f64(kind, str(target), args)
        if target in self.tables:
            args = self._torch_input(args)
        return target(*_up(tuple(args)), **{k: _up(v) for k, v in kwargs.items()})

    def _keep_torch_value(self, args: Sequence[Any]) -> None:
        """Keep torch's float32 value of this dequantize for its element-wise function users."""
        users = sum(u.op == "call_function" and u.target in self.tables for u in self.node.users)
        if users:
            self.torch_values[self.node] = [
                _qdq_f64("dq", str(self.node.target), args, like_torch=True), users]

    def _torch_input(self, args: tuple) -> tuple:
        """An element-wise function's dequantized input as torch's float32 value.

        Such a function is a TABLE in INT, built at those very values (``int8_table``): acos
        of torch's 1.0 is 0 where the real 1.0000000591 has none. Arithmetic keeps the real
        values, which integer ops compute with exactly (their .5 ties stay ties).
        """
        src = self.node.args[0] if self.node.args else None
        kept = self.torch_values.get(src) if isinstance(src, fx.Node) else None
        if kept is None:
            return args
        kept[1] -= 1
        if not kept[1]:
            del self.torch_values[src]
        return (kept[0], *args[1:])


def _renames(float_model: fx.GraphModule | None, quantized_model: fx.GraphModule | None) -> dict[str, str]:
    """See :meth:`TorchReference.float_renames`."""
    if float_model is None or quantized_model is None:
        return {}

    def key(n: fx.Node) -> tuple:
        return n.target, n.meta.get("orig_node", n.name)

    float_nodes = [n for n in float_model.graph.nodes if n.op == "call_function"]
    fq_nodes = [n for n in quantized_model.graph.nodes if n.op == "call_function" and not qdq_kind(n.target)]
    float_names = {n.name for n in float_model.graph.nodes}
    fq_names = {n.name for n in quantized_model.graph.nodes}
    unclaimed: dict[tuple, list[str]] = {}
    for n in fq_nodes:
        if n.name not in float_names:
            unclaimed.setdefault(key(n), []).append(n.name)
    renames = {}
    for n in float_nodes:
        if n.name not in fq_names:
            names = unclaimed.get(key(n))
            if names:
                renames[n.name] = names.pop(0)
    return renames


def _as_tensors(inputs: Iterable[Any]) -> list[Any]:
    return [x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x)) for x in inputs]


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
        out = _Run(quantized_model, True).run(*[_up(x) for x in inputs])
    # any output structure (a dict, nested tuples and lists): every float leaf back to float32
    return torch.utils._pytree.tree_map(
        lambda o: o.float() if isinstance(o, torch.Tensor) and o.is_floating_point() else o, out)


def steps_from(raw: np.ndarray, expected: torch.Tensor, qp) -> np.ndarray:
    """How many quantization steps each element of a quantized TOSA output ``raw`` is from the
    reference value ``expected`` (float), quantized as the output is (``qp``): the one
    comparison behind "INT is exact" in the tests and benchmarks.

    Example:
        >>> from lowering.qparams import QParams
        >>> qp = QParams(np.array([0.5]), np.array([0]), torch.int8, -128, 127)
        >>> steps_from(np.array([2, 3], np.int8), torch.tensor([1.0, 2.0]), qp).tolist()
        [0, 1]
    """
    q = torch.ops.quantized_decomposed.quantize_per_tensor(
        expected.detach().float(), qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)
    return np.abs(q.numpy().astype(np.int64) - np.asarray(raw).astype(np.int64))


def capture(gm: fx.GraphModule, inputs: Sequence[Any], *, f64: bool) -> Capture:
    """Run an FX graph and record every tensor-valued node (see :class:`Capture`).

    With ``f64`` the graph runs as :func:`fake_quant_float64` runs it, so a fake-quant graph lands
    on the ideal integer grid; it falls back to the graph's own precision if a node refuses
    float64.

    Example:
        >>> gm = fx.symbolic_trace(torch.nn.Linear(2, 2))
        >>> sorted(capture(gm, [torch.ones(1, 2)], f64=True).values)
        ['input_1', 'linear']
    """
    tensors = _as_tensors(inputs)
    with torch.no_grad():
        if f64:
            record = Capture()
            try:
                _Run(gm, True, record).run(*[_up(x) for x in tensors])
                return record
            except Exception:  # noqa: BLE001 - a node that refuses float64: run as exported
                pass
        record = Capture()
        _Run(gm, False, record).run(*tensors)
    return record


class TorchReference:
    """The float and fake-quant models of a lowered model, as the drift analysis reads them.

    Example:
        >>> import lowering
        >>> m = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
        >>> lm = lowering.lower(m, (torch.randn(2, 4),))
        >>> ref = lm.torch_reference()
        >>> "linear" in ref.capture((torch.randn(2, 4),), fake_quant=True).values
        True
    """

    def __init__(self, float_model: fx.GraphModule | None, quantized_model: fx.GraphModule | None,
                 graph_module: fx.GraphModule | None = None) -> None:
        self.float_model = float_model
        self.quantized_model = quantized_model
        self.graph_module = graph_module

    def _model(self, fake_quant: bool) -> fx.GraphModule | None:
        return self.quantized_model if fake_quant else self.float_model

    def float_renames(self) -> dict[str, str]:
        """Float-model node name -> the fake-quant model's name of the same node, where the two differ.

        Quantization rebuilds some nodes under new names (an ``add_`` with a Python number,
        functionalized to ``add_tensor`` in the float model, comes out of ``prepare_pt2e`` as
        ``add_tensor_1`` with its number made a constant). Every answer about the float model
        uses the fake-quant model's names, which the TOSA provenance uses too: a node that
        exists under one name only is paired with the unclaimed node of the other model that
        has the same target and the same source node (``meta["orig_node"]``), in graph order.

        Example:
            >>> import lowering
            >>> m = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
            >>> lowering.lower(m, (torch.randn(2, 4),)).torch_reference().float_renames()
            {}
        """
        renames = self.__dict__.get("_renames")
        if renames is None:
            renames = self.__dict__["_renames"] = _renames(self.float_model, self.quantized_model)
        return renames

    def capture(self, inputs: Sequence[Any], *, fake_quant: bool) -> Capture:
        """Node values of the fake-quant model (in float64) or the float model (as exported; its
        nodes by their fake-quant names, see :meth:`float_renames`)."""
        gm = self._model(fake_quant)
        if gm is None:
            return Capture()
        record = capture(gm, inputs, f64=fake_quant)
        renames = {} if fake_quant else self.float_renames()
        if renames:
            record.values = {renames.get(k, k): v for k, v in record.values.items()}
        return record

    def output_nodes(self, *, fake_quant: bool = False) -> list[str]:
        """Names of the nodes the model returns, in output order (fake-quant names)."""
        gm = self._model(fake_quant)
        if gm is None:
            return []
        out = gm.graph.output_node().args[0]
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        renames = {} if fake_quant else self.float_renames()
        return [renames.get(name, name) for name in (getattr(n, "name", "") for n in out)]

    def folded_chains(self, owners: set[str], *, fake_quant: bool) -> dict[str, str]:
        """Node name -> the node whose value the node's TOSA tensor holds.

        Follows a node's single user while that user owns no TOSA tensor (it was folded away by
        the lowering) and keeps the shape; stops at quantize/dequantize nodes.
        """
        gm = self._model(fake_quant)
        renames = {} if fake_quant else self.float_renames()

        def name(n: fx.Node) -> str:
            return renames.get(n.name, n.name)

        out: dict[str, str] = {}
        for node in gm.graph.nodes if gm is not None else ():
            cur = node
            for _ in range(8):
                users = list(cur.users)
                if len(users) != 1 or name(users[0]) in owners or users[0].op != "call_function" \
                        or qdq_kind(users[0].target):
                    break
                nxt = users[0]
                a, b = cur.meta.get("val"), nxt.meta.get("val")
                if getattr(a, "shape", None) is None or getattr(a, "shape", None) != getattr(b, "shape", None):
                    break
                cur = nxt
            if cur is not node:
                out[name(node)] = name(cur)
        return out

    def layouts(self) -> dict[str, Any]:
        """Node name -> the NCHW->NHWC permutation the lowering recorded (``node.meta["layout"]``)."""
        if self.graph_module is None:
            return {}
        return {n.name: n.meta.get("layout") for n in self.graph_module.graph.nodes}

    def evaluate_node(self, name: str, x: np.ndarray) -> np.ndarray | None:
        """The fake-quant model's function node ``name`` applied to ``x`` alone, in float64.

        ``x`` holds dequantized input levels: the function sees their float32 values, as it
        does in the evaluator (torch's dequantize returns float32). None when there is no
        such node; raises what the node raises when it is not an element-wise function of
        one tensor.
        """
        gm = self.quantized_model
        node = None if gm is None else next(
            (n for n in gm.graph.nodes if n.name == name and n.op == "call_function"), None)
        if node is None:
            return None
        with torch.no_grad():
            levels = torch.tensor(x, dtype=torch.float32).double()
            return node.target(levels, *node.args[1:], **node.kwargs).double().numpy()

