"""Walk a prepared FX graph and emit TOSA through :class:`lowering.serialize.TosaWriter`.

The emitter owns three things the per-op visitors share: value lookup in a requested
physical layout (inserting TRANSPOSE only when needed), dtypes / quantization params
per node, and provenance (every TOSA tensor name -> the FX node it came from).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.fx as fx

from .errors import LoweringError
from .graph_utils import get_constant, inverse, permute_shape, target_name, val
from .ops import REGISTRY
from .qparams import QParams
from .serialize import INT_OF, TORCH_TO_TOSA, TosaWriter


def module_path(node: fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    last = list(stack.values())[-1]
    path = last[0] if isinstance(last, tuple) else str(last)
    # normalise "L['self'].features.0" style paths
    return path.replace("L['self'].", "").replace("L['self']", "")


def source_line(node: fx.Node) -> str:
    st = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in st.strip().splitlines() if ln.strip()]
    frames = [i for i, ln in enumerate(lines) if ln.startswith("File ")]
    user = [i for i in frames if "/site-packages/torch/" not in lines[i]] or frames
    if user:
        i = user[-1]
        return lines[i] + (" | " + lines[i + 1] if i + 1 < len(lines) else "")
    return lines[-1] if lines else ""


def not_a_tensor_input(node: fx.Node) -> bool:
    """Whether placeholder ``node`` is a python number, string or None forward argument
    (``dim``, ``alpha``, ``rounding_mode``...), which ``torch.export`` specialises into the
    graph as a constant.

    Example:
        >>> g = fx.Graph(); d = g.placeholder("dim"); d.meta["val"] = 1
        >>> not_a_tensor_input(d)
        True
    """
    if node.op != "placeholder":
        return False
    v = node.meta.get("tv_val", node.meta.get("val"))
    return v is None or isinstance(v, (int, float, bool, str, torch.SymInt, torch.SymFloat))


class Emitter:
    """State for emitting one FX graph as one TOSA graph.

    Example:
        >>> from lowering.api import export_module
        >>> gm = export_module(torch.nn.ReLU(), (torch.ones(2),))
        >>> from lowering.graph_utils import propagate_values
        >>> propagate_values(gm, (torch.ones(2),))
        >>> em = Emitter(gm, "FP"); _ = em.emit(); sorted(em.writer.op_counts)
        ['CLAMP']
    """

    def __init__(self, gm: fx.GraphModule, profile: str, input_names: dict | None = None,
                 parent: Emitter | None = None):
        self.gm = gm
        self.profile = profile
        # a control-flow sub-graph writes into its parent's flatbuffer (its own region)
        self.writer = parent.writer if parent else TosaWriter()
        self.env: dict[str, dict[tuple | None, str]] = {}
        self.provenance: dict[str, dict] = parent.provenance if parent else {}
        self.quant_params: dict[str, dict] = parent.quant_params if parent else {}
        #: sub-graphs (regions) still to write: (region, emitter, block boundary) -- after
        #: the main block, as the serializer writes one region after the other
        self.pending: list = parent.pending if parent else []
        #: results of multi-output nodes (COND_IF / WHILE_LOOP): name -> [(tensor, QParams)]
        self.multi_out: dict[str, list] = {}
        self.current: fx.Node | None = None
        self.input_names = input_names or {}
        self.io_qparams: dict[str, QParams | None] = {}
        self.debug_outputs = False
        self.debug_map: list[tuple[str, str, tuple | None]] = []

    # ------------------------------------------------------------------ info
    @property
    def is_int(self) -> bool:
        return self.profile == "INT"

    def qout(self, node: fx.Node) -> QParams | None:
        return node.meta.get("qout") if isinstance(node, fx.Node) else None

    def qin(self, node: fx.Node, arg: fx.Node) -> QParams | None:
        qp = node.meta.get("qin", {}).get(arg.name)
        return qp if qp is not None else self.qout(arg)

    def dtype(self, node: fx.Node) -> str:
        """TOSA dtype name of a node's output."""
        if "tosa_dtype" in node.meta:
            return node.meta["tosa_dtype"]
        q = self.qout(node)
        if self.is_int and q is not None:
            return INT_OF[q.dtype]
        v = val(node)
        if v is None:
            raise LoweringError("no value metadata", node=node.name, target=target_name(node))
        if v.is_floating_point():
            if self.is_int:
                raise LoweringError(
                    "float tensor without quantization parameters in the INT profile "
                    "(op not annotated by the quantizer?)", node=node.name, target=target_name(node))
            if v.dtype not in (torch.float32, torch.float16):
                raise LoweringError(f"unsupported dtype {v.dtype}", node=node.name,
                                    target=target_name(node))
            return TORCH_TO_TOSA[v.dtype]
        if v.dtype not in TORCH_TO_TOSA:
            raise LoweringError(f"unsupported dtype {v.dtype}", node=node.name, target=target_name(node))
        return TORCH_TO_TOSA[v.dtype]

    def shape(self, node: fx.Node, layout=None) -> list[int]:
        v = val(node)
        if v is None:
            raise LoweringError("no shape metadata", node=node.name, target=target_name(node))
        return permute_shape([int(s) for s in v.shape], layout)

    def layout(self, node: fx.Node):
        return node.meta.get("layout")

    def const_value(self, node) -> torch.Tensor | None:
        return get_constant(self.gm, node)

    # ------------------------------------------------------------ provenance
    def _prov(self, name: str, node: fx.Node | None) -> None:
        node = node or self.current
        if node is None:
            return
        self.provenance[name] = {
            "fx_node": node.meta.get("orig_node", node.name) if node.op == "get_attr" else node.name,
            "target": target_name(node) if node.op == "call_function" else node.op,
            "nn_module_stack": module_path(node),
            "source": source_line(node),
        }
        if node.meta.get("orig_node") and node.meta.get("orig_node") != node.name:
            self.provenance[name]["decomposed_from"] = node.meta["orig_node"]

    def new(self, suffix: str, shape, dtype: str, node: fx.Node | None = None) -> str:
        """Declare an intermediate tensor named ``<node>__<suffix>``."""
        node = node or self.current
        name = self.writer.tensor(f"{node.name}__{suffix}" if suffix else node.name, shape, dtype)
        self._prov(name, node)
        return name

    def const(self, suffix: str, values, dtype: str, shape=None, node: fx.Node | None = None) -> str:
        node = node or self.current
        name = self.writer.const(f"{node.name}__{suffix}", values, dtype, shape)
        self._prov(name, node)
        return name

    def const_shape(self, suffix: str, values, node: fx.Node | None = None) -> str:
        node = node or self.current
        name = self.writer.const_shape(f"{node.name}__{suffix}", values)
        self._prov(name, node)
        return name

    def out(self, node: fx.Node, layout=None, dtype: str | None = None) -> str:
        """Declare the tensor holding ``node``'s result (named after the node)."""
        name = self.writer.tensor(node.name, self.shape(node, layout), dtype or self.dtype(node))
        self._prov(name, node)
        return name

    def bind(self, node: fx.Node, name: str, layout=None) -> None:
        self.env.setdefault(node.name, {})[layout] = name
        q = self.qout(node)
        if q is not None:
            self.quant_params[name] = q.to_json()

    # ------------------------------------------------------------------ values
    def has_layouts(self, node: fx.Node) -> dict:
        return self.env.get(node.name, {})

    def tensor(self, node, layout=None) -> str:
        """Name of a TOSA tensor holding ``node`` in physical ``layout`` (None = PyTorch order)."""
        if not isinstance(node, fx.Node):
            raise LoweringError(f"expected a tensor operand, got {node!r}",
                                node=self.current.name if self.current else None)
        avail = self.env.get(node.name, {})
        if layout in avail:
            return avail[layout]
        if node.op == "get_attr":
            return self._emit_constant(node, layout)
        if not avail:
            raise LoweringError("operand was not emitted", node=node.name)
        src_layout, src = next(iter(avail.items()))
        logical = self.shape(node)
        src_shape = permute_shape(logical, src_layout)
        # perm from src physical to requested physical
        src_perm = src_layout or tuple(range(len(logical)))
        dst_perm = layout or tuple(range(len(logical)))
        inv_src = inverse(src_perm)
        perm = [inv_src[d] for d in dst_perm]
        dst_shape = permute_shape(logical, layout)
        dtype = self.writer.dtypes[src]
        name = self.writer.tensor(f"{node.name}__{'nhwc' if layout else 'nchw'}", dst_shape, dtype)
        self._prov(name, node)
        nonunit = [p for p in perm if src_shape[p] != 1]
        if nonunit == sorted(nonunit):
            self.writer.op("RESHAPE", [src, self.writer.const_shape(name + "_shape", dst_shape)], name)
        else:
            self.writer.op("TRANSPOSE", [src], name, perms=perm)
        self.env[node.name][layout] = name
        return name

    def _emit_constant(self, node: fx.Node, layout) -> str:
        t = self.const_value(node)
        if t is None:
            raise LoweringError("unknown constant", node=node.name)
        arr = t.detach().cpu()
        if "tosa_dtype" in node.meta:
            dtype = node.meta["tosa_dtype"]
        elif arr.dtype in INT_OF or (self.is_int and self.qout(node) is not None):
            dtype = INT_OF.get(arr.dtype, "INT8")
        elif arr.dtype == torch.bool:
            dtype = "BOOL"
        elif arr.dtype == torch.int64:
            dtype = "INT32"
        elif arr.is_floating_point():
            if self.is_int:
                raise LoweringError("unquantized float constant in the INT profile", node=node.name)
            dtype = "FP16" if arr.dtype == torch.float16 else "FP32"
        else:
            raise LoweringError(f"unsupported constant dtype {arr.dtype}", node=node.name)
        np_arr = arr.numpy()  # a 0-d constant stays 0-d: the ops reading it have 0-d results
        if layout:
            np_arr = np.transpose(np_arr, layout)
        name = self.writer.const(node.name if layout is None else f"{node.name}__nhwc",
                                 np_arr, dtype, list(np_arr.shape))
        self._prov(name, node)
        self.env.setdefault(node.name, {})[layout] = name
        return name

    def broadcast_to_rank(self, name: str, rank: int, suffix: str) -> str:
        """RESHAPE ``name`` to ``rank`` dims by prepending ones (TOSA needs equal ranks)."""
        shape = self.writer.shapes[name]
        if len(shape) == rank:
            return name
        new_shape = [1] * (rank - len(shape)) + list(shape)
        out = self.new(suffix, new_shape, self.writer.dtypes[name])
        self.writer.op("RESHAPE", [name, self.const_shape(suffix + "_shape", new_shape)], out)
        return out

    def operand(self, node, layout, rank: int, suffix: str) -> str:
        """A tensor operand in ``layout`` (for lower-rank constants, align then permute)."""
        v = val(node)
        if v is not None and v.dim() < rank and node.op == "get_attr":
            t = self.const_value(node).detach().cpu()
            arr = t.numpy().reshape([1] * (rank - t.dim()) + list(t.shape))
            if layout:
                arr = np.transpose(arr, layout)
            key = ("rank", rank, layout)
            avail = self.env.setdefault(node.name, {})
            if key in avail:
                return avail[key]
            dtype = self.dtype_of_const(node, t)
            name = self.writer.const(f"{node.name}__r{rank}", arr, dtype, list(arr.shape))
            self._prov(name, node)
            avail[key] = name
            return name
        if v is not None and v.dim() < rank:
            base = self.tensor(node, None)
            full = self.broadcast_to_rank(base, rank, suffix)
            if layout:
                shape = self.writer.shapes[full]
                out = self.new(suffix + "_t", permute_shape(shape, layout), self.writer.dtypes[full])
                self.writer.op("TRANSPOSE", [full], out, perms=list(layout))
                return out
            return full
        return self.tensor(node, layout)

    def dtype_of_const(self, node, t) -> str:
        if "tosa_dtype" in node.meta:
            return node.meta["tosa_dtype"]
        if t.dtype in INT_OF:
            return INT_OF[t.dtype]
        if t.dtype == torch.bool:
            return "BOOL"
        if t.dtype == torch.int64:
            return "INT32"
        if self.is_int:
            raise LoweringError("unquantized float constant in the INT profile", node=node.name)
        return "FP16" if t.dtype == torch.float16 else "FP32"

    def _add_debug_outputs(self) -> None:
        """Expose every node's tensor as an extra graph output (for op-by-op diffing)."""
        for n in self.gm.graph.nodes:
            if n.op != "call_function" or n.name not in self.env:
                continue
            layout, name = next(iter(self.env[n.name].items()))
            if name in self.writer.block_outputs or name in self.writer.block_inputs:
                continue
            self.writer.output(name)
            self.debug_map.append((n.name, name, layout))

    # ------------------------------------------------------------------ driver
    def emit(self) -> bytes:
        """Emit the graph as the main block, then every control-flow sub-graph as a region;
        return the serialized flatbuffer."""
        self.emit_block()
        while self.pending:
            region, sub, boundary = self.pending.pop(0)
            self.writer.start_block(region)
            sub.emit_block(boundary)
        return self.writer.serialize()

    def emit_block(self, boundary=None) -> None:
        """Emit the graph into the current block. ``boundary`` (a sub-graph's) gives the
        quantization its inputs arrive in and its outputs must leave in
        (:class:`lowering.ops.control_flow.Boundary`); the block rescales between those and
        the sub-graph's own."""

        placeholders = 0
        for node in self.gm.graph.nodes:
            self.current = node
            if node.op == "placeholder":
                if not_a_tensor_input(node):
                    if node.users:
                        raise LoweringError("reads a python number known only at run time "
                                            "(a forward argument export kept, or .item() on the "
                                            "CPU): TOSA graph inputs are tensors", node=node.name)
                    continue  # a python number export specialised: not a TOSA input
                if boundary is not None:
                    boundary.block_input(self, node, placeholders)
                    placeholders += 1
                    continue
                dtype = self.dtype(node)
                name = self.writer.input(self.input_names.get(node.name, node.name),
                                         self.shape(node), dtype)
                self._prov(name, node)
                self.bind(node, name, None)
                self.io_qparams[name] = self.qout(node) if self.is_int else None
            elif node.op == "get_attr":
                continue
            elif node.op == "call_function":
                fn = REGISTRY.get(node.target)
                if fn is None:
                    raise LoweringError("operator not supported by the TOSA lowering",
                                        node=node.name, target=target_name(node))
                try:
                    fn(self, node)
                except LoweringError as e:
                    if e.node is None:  # raised by a shared helper: name the node it was emitting
                        raise LoweringError(e.reason, node=node.name, target=target_name(node)) from e
                    raise
                except Exception as e:  # noqa: BLE001
                    raise LoweringError(f"{type(e).__name__}: {e}", node=node.name,
                                        target=target_name(node)) from e
                if node.name not in self.env and not isinstance(node.meta.get("val"), (list, tuple)):
                    raise LoweringError("visitor produced no output", node=node.name)
            elif node.op == "output":
                if self.debug_outputs:
                    self._add_debug_outputs()
                outs = node.args[0]
                outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                if boundary is not None:
                    outs += boundary.extra_outputs
                for i, o in enumerate(outs):
                    if not isinstance(o, fx.Node):
                        raise LoweringError("non-tensor graph output", node="output")
                    self.current = o
                    src = boundary.block_output(self, o, i) if boundary is not None \
                        else self.tensor(o, None)
                    if src in self.writer.block_inputs or src in self.writer.block_outputs or \
                            o.op == "get_attr":
                        dst = self.new(f"out{i}", self.writer.shapes[src], self.writer.dtypes[src], o)
                        self.writer.op("IDENTITY", [src], dst)
                        src = dst
                    self.writer.output(src)
                    self.io_qparams[src] = self.qout(o) if self.is_int else None
            else:
                raise LoweringError(f"unexpected node kind {node.op}", node=node.name)
