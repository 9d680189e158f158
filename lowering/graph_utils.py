"""Small FX helpers shared by the quantizer, the passes and the emitter."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
import torch.fx as fx

from .errors import LoweringError

aten = torch.ops.aten

Q_OPS = set()
DQ_OPS = set()
try:  # quantized_decomposed ops are registered by torchao / torch.ao
    import torchao.quantization.pt2e  # noqa: F401

    _qd = torch.ops.quantized_decomposed
    Q_OPS = {_qd.quantize_per_tensor.default, _qd.quantize_per_channel.default,
             _qd.quantize_per_tensor.tensor}
    DQ_OPS = {_qd.dequantize_per_tensor.default, _qd.dequantize_per_channel.default,
              _qd.dequantize_per_tensor.tensor}
except Exception:  # pragma: no cover
    pass

COPY_META_KEYS = ("nn_module_stack", "stack_trace", "source_fn_stack", "from_node", "torch_fn")


def op_name(op) -> str:
    """Normalized name ``aten.<name>.<overload>`` of an aten overload (``str(op)`` otherwise).

    Example:
        >>> op_name(torch.ops.aten.add.Tensor), op_name(torch.ops.aten.relu.default)
        ('aten.add.Tensor', 'aten.relu.default')
    """
    if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten":
        return f"aten.{op._schema.name.split('::')[-1]}.{op._overloadname}"
    return str(op)


def target_name(node: fx.Node) -> str:
    """Readable name of a node's target, e.g. ``aten.conv2d.default``.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x")
        >>> target_name(g.call_function(torch.ops.aten.relu.default, (x,)))
        'aten.relu.default'
    """
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return op_name(t)
    if t is operator.getitem:
        return "getitem"
    return getattr(t, "__name__", str(t))


def copy_meta(dst: fx.Node, src: fx.Node) -> None:
    """Copy provenance metadata (module stack, source line) from ``src`` to ``dst``."""
    for k in COPY_META_KEYS:
        if k in src.meta and k not in dst.meta:
            dst.meta[k] = src.meta[k]
    dst.meta.setdefault("orig_node", src.meta.get("orig_node", src.name))


class Builder:
    """Insert new call_function nodes before an anchor node, copying its provenance.

    ``profile`` ("INT", "FP" or None) tells a graph rewrite which TOSA profile it builds for.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x"); r = g.call_function(aten.relu.default, (x,))
        >>> b = Builder(g, r); n = b(aten.neg.default, x); n.meta["orig_node"]
        'relu_default'
    """

    def __init__(self, graph: fx.Graph, anchor: fx.Node, profile: str | None = None):
        self.graph = graph
        self.anchor = anchor
        self.profile = profile

    def __call__(self, target, *args, **kwargs) -> fx.Node:
        with self.graph.inserting_before(self.anchor):
            n = self.graph.call_function(target, tuple(args), kwargs)
        copy_meta(n, self.anchor)
        value = _evaluate(n)
        if value is not None:
            n.meta["tv_val"] = value  # a later rewrite in the same pass reads its shape/dtype
        return n

    def const(self, gm: fx.GraphModule, value: torch.Tensor, hint: str = "const") -> fx.Node:
        return add_constant(gm, value, hint, before=self.anchor)


def _evaluate(n: fx.Node) -> torch.Tensor | None:
    """``n``'s value from its inputs' real values (``tv_val``), or None when one is unknown
    or the op cannot run on them."""
    missing = [a for a in n.all_input_nodes if not isinstance(a.meta.get("tv_val"), torch.Tensor)]
    schema = getattr(n.target, "_schema", None)
    if missing or not callable(n.target) or (schema is not None and schema.is_mutable):
        return None  # an in-place op would write into the stored values of its inputs
    args = fx.node.map_arg(n.args, lambda a: a.meta["tv_val"])
    kwargs = fx.node.map_arg(n.kwargs, lambda a: a.meta["tv_val"])
    try:
        with torch.no_grad():
            out = n.target(*args, **kwargs)
    except Exception:  # noqa: BLE001 - no value is what a failed evaluation means here
        return None
    return out if isinstance(out, torch.Tensor) else None


def add_constant(gm: fx.GraphModule, value: torch.Tensor, hint: str = "const",
                 before: fx.Node | None = None) -> fx.Node:
    """Register ``value`` as a buffer of ``gm`` and return a get_attr node for it."""
    i = 0
    base = f"_tv_{hint}".replace(".", "_")
    while hasattr(gm, f"{base}_{i}"):
        i += 1
    name = f"{base}_{i}"
    gm.register_buffer(name, value.detach().clone(), persistent=False)
    first = before
    if first is None:
        first = next(iter(gm.graph.nodes))
    # get_attr nodes go right before the first user to keep topological order
    with gm.graph.inserting_before(first):
        n = gm.graph.get_attr(name)
    n.meta["tv_val"] = getattr(gm, name)
    if before is not None:
        copy_meta(n, before)
    return n


def get_constant(gm: fx.GraphModule, node) -> torch.Tensor | None:
    """Tensor value of a get_attr node (None for anything else)."""
    if isinstance(node, fx.Node) and node.op == "get_attr":
        obj = gm
        for part in str(node.target).split("."):
            obj = getattr(obj, part)
        return obj if isinstance(obj, torch.Tensor) else None
    return None


class _ValueProp(fx.Interpreter):
    """Stores real values in ``meta['tv_val']`` and makes sure ``meta['val']`` is a
    FakeTensor (PT2E's prepare only observes nodes whose ``val`` is fake)."""

    def __init__(self, gm):
        super().__init__(gm)
        from torch._subclasses.fake_tensor import FakeTensorMode

        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    def _fake(self, t):
        from torch._subclasses.fake_tensor import FakeTensor

        if isinstance(t, FakeTensor):
            return t
        try:
            return self.fake_mode.from_tensor(t)
        except Exception:  # noqa: BLE001
            return t

    def run_node(self, n):
        try:
            result = super().run_node(n)
        except LoweringError:
            raise
        except Exception as e:  # noqa: BLE001 - the model itself fails on its example inputs
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise LoweringError(f"the graph fails on the example inputs: {type(e).__name__}: {first}",
                                node=n.name, target=target_name(n) if n.op == "call_function" else n.op) from e
        from torch._subclasses.fake_tensor import FakeTensor

        if isinstance(result, torch.Tensor):
            n.meta["tv_val"] = result.detach()
            if has_dynamic_shape(n.meta.get("val")):
                pass  # a data-dependent shape (nonzero): comparing it with a size would guard on it
            elif not isinstance(n.meta.get("val"), FakeTensor) or \
                    tuple(n.meta["val"].shape) != tuple(result.shape) or \
                    n.meta["val"].dtype != result.dtype:
                n.meta["val"] = self._fake(result.detach())
        elif isinstance(result, (list, tuple)) and all(isinstance(r, torch.Tensor) for r in result):
            n.meta["tv_val"] = type(result)(r.detach() for r in result)
            if "val" not in n.meta:
                n.meta["val"] = type(result)(self._fake(r.detach()) for r in result)
        else:
            n.meta["tv_val"] = result
        return result


def propagate_values(gm: fx.GraphModule, example_inputs: Sequence) -> None:
    """Run ``gm`` on real example inputs and store each node's value in ``meta['val']``.

    Example:
        >>> gm = fx.symbolic_trace(torch.nn.ReLU())
        >>> propagate_values(gm, (torch.ones(2),))
        >>> [tuple(n.meta["tv_val"].shape) for n in gm.graph.nodes if n.op != "output"]
        [(2,), (2,)]
    """
    with torch.no_grad():
        _ValueProp(gm).run(*example_inputs)


def tensor_args(node: fx.Node) -> list[fx.Node]:
    """FX nodes among a node's positional args (flattening lists)."""
    out: list[fx.Node] = []
    for a in node.args:
        if isinstance(a, fx.Node):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, fx.Node))
    return out


def tensor_values(node: fx.Node) -> list[torch.Tensor]:
    """The tensor(s) ``node`` produces, from its value metadata (empty when unknown)."""
    v = val(node)
    if v is not None:
        return [v]
    vals = node.meta.get("val")
    return [x for x in vals if isinstance(x, torch.Tensor)] if isinstance(vals, (list, tuple)) else []


def touched_tensors(node: fx.Node, *, reads: bool = True) -> list[torch.Tensor]:
    """The tensors ``node`` produces, then (with ``reads``) those its input nodes produce, from
    value metadata: what the per-node dtype and shape checks look at.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x"); x.meta["val"] = torch.zeros(2)
        >>> r = g.call_function(aten.relu.default, (x,)); r.meta["val"] = torch.zeros(2)
        >>> len(touched_tensors(r)), len(touched_tensors(r, reads=False))
        (2, 1)
    """
    made = tensor_values(node)
    if not reads:
        return made
    return [*made, *(t for n in node.all_input_nodes for t in tensor_values(n))]


def untyped_dtype(node: fx.Node) -> torch.dtype | None:
    """A dtype TOSA has no type for (float64, complex...) among the tensors ``node`` produces
    or reads, or None. Such nodes stay on the CPU; passes leave them alone.

    Example:
        >>> g = fx.Graph(); x = g.placeholder("x"); x.meta["val"] = torch.zeros(2, dtype=torch.float64)
        >>> untyped_dtype(g.call_function(aten.relu.default, (x,)))
        torch.float64
    """
    from .serialize import TORCH_TO_TOSA

    return next((t.dtype for t in touched_tensors(node) if t.dtype not in TORCH_TO_TOSA), None)


def has_dynamic_shape(value) -> bool:
    """True when a tensor's shape has symbolic (data-dependent) sizes, which TOSA 1.0 cannot hold.

    Example:
        >>> has_dynamic_shape(torch.zeros(2, 3))
        False
    """
    return isinstance(value, torch.Tensor) and any(not isinstance(s, int) for s in value.shape)


def val(node) -> torch.Tensor | None:
    """``meta['val']`` of a node if it is a tensor."""
    if isinstance(node, fx.Node):
        v = node.meta.get("tv_val", node.meta.get("val"))
        return v if isinstance(v, torch.Tensor) else None
    return None


def user_inputs(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def output_nodes(gm: fx.GraphModule) -> list:
    out = gm.graph.output_node()
    args = out.args[0]
    if isinstance(args, (list, tuple)):
        return list(args)
    return [args]


#: The NCHW -> NHWC permutation, the layout TOSA's spatial operators use.
NHWC = (0, 2, 3, 1)


def inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def permute_shape(shape, perm):
    return [shape[p] for p in perm] if perm else list(shape)
