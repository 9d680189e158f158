"""ExecuTorch delegation: our lowering as a ``Partitioner`` plus ``BackendDetails``.

``to_edge_transform_and_lower(ep, partitioner=[TosaPartitioner("INT")])`` tags the nodes our
lowering can run, ExecuTorch cuts them out as partitions, and :class:`TosaVerifyBackend`
turns each partition into the delegate payload: the TOSA 1.0 flatbuffer written by
:mod:`lowering.emitter`. With ``ethosu_target`` the payload is instead the Vela command
stream in the block layout ExecuTorch's Ethos-U runtime reads (:mod:`ethosu.payload`),
written by :class:`TosaVerifyEthosUBackend`. With ``vgf=True`` it is the VGF the ML SDK model
converter makes of the partition's TOSA (:mod:`vgf`), byte for byte what ExecuTorch's own
``VgfBackend`` stores, written by :class:`TosaVerifyVgfBackend`.

How a node is decided (the same analysis runs on the ATen program, to tell ExecuTorch which
ops to keep whole, and on the edge program, to tag partitions):

1. user filters (op type, module path, node name) put nodes on the CPU;
2. the pass pipeline runs over a copy of the whole graph (the probe); what it leaves
   unsupported (no visitor, or float left unquantized in the INT profile) stays on the CPU;
3. the rest is grouped into cycle-free partitions; a node whose tensor would cross a
   partition boundary in a dtype the delegate cannot carry faithfully (float in the INT
   profile, int64, uint8, a tuple, a non-contiguous tensor) stays on the CPU -- in INT this
   leaves the boundary quantize/dequantize nodes outside, so a delegate takes and returns
   integers;
4. each partition is lowered for real; a node whose visitor fails (or, for Ethos-U, an
   operator Vela refuses) moves to the CPU and the partitions are formed again.

So an unsupported op never fails a lowering: it is reported in
:attr:`TosaPartitioner.cpu_nodes` with the reason.

The pass pipeline (the costly part: it runs the graph to know every value) runs over the
whole graph once, for the probe, and once per delegated partition. The probe's lowered graph
serves the ATen-stage trials: each partition is cut out of it and only emitted, as
:func:`lowering.lower` emits its partitions. At the edge stage each partition is lowered on
its own, exactly as the backend will lower it, and the TOSA is kept by graph identity
(:func:`_lower_partition`), so the backend's ``preprocess``, handed the same graph again,
reuses those bytes. (After ``to_edge()`` the trials see stand-in weights, so there the
backend lowers each partition once more, with the real ones.)

The ATen-stage decision is recorded on every node (``node.meta["custom"]``, which ExecuTorch
carries through its decompositions), and the edge stage keeps those CPU decisions: the ops
ExecuTorch kept whole for us (:meth:`TosaPartitioner.ops_to_not_decompose`) are exactly the
ones delegated. ExecuTorch shows ``partition()`` a copy whose weights are FakeTensors; the
trial lowering uses the real weights seen at the ATen stage. With ``to_edge()`` followed by
``to_backend()`` there is no ATen stage: ops such as ``aten.linear`` arrive decomposed
(``addmm`` in the INT profile stays on the CPU) and the trial uses stand-in weights of ones.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

import executorch.kernels.quantized  # noqa: F401 - out-variants of the CPU-side quantize ops
import torch
import torch.fx as fx
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.export import ExportedProgram

from .api import (
    SUPPORTED_DTYPES,
    _unsupported,
    extract_subgraph,
    lower_graph_module,
    prepare_graph_module,
    supported_groups,
)
from .emitter import Emitter, module_path
from .errors import LoweringError
from .graph_utils import get_constant, has_dynamic_shape
from .lowered import CpuNode
from .ops import REGISTRY
from .passes.decompose import DECOMPOSITIONS

aten = torch.ops.aten

__all__ = [
    "BACKEND_ID",
    "ETHOSU_BACKEND_ID",
    "VGF_BACKEND_ID",
    "DelegateSpec",
    "TosaPartitioner",
    "TosaVerifyBackend",
    "TosaVerifyEthosUBackend",
    "TosaVerifyVgfBackend",
    "aten_target",
    "delegate_payloads",
    "target_executorch_ethosu_runtime",
    "target_executorch_vgf_runtime",
    "to_aten_module",
]

#: Backend id (the BackendDetails class name) of delegates whose payload is TOSA.
BACKEND_ID = "TosaVerifyBackend"
#: Backend id of delegates whose payload is a Vela binary stream.
ETHOSU_BACKEND_ID = "TosaVerifyEthosUBackend"
#: Backend id of delegates whose payload is a VGF (ML SDK model converter output).
VGF_BACKEND_ID = "TosaVerifyVgfBackend"

#: Where the ATen-stage decision is kept on a node (``node.meta["custom"]`` survives
#: ExecuTorch's decompositions and is inherited by the nodes a decomposition creates).
_META_KEY = "tosa_verify_delegate"

#: Dtypes a delegate input/output may have: the value means the same on both sides.
_BOUNDARY_DTYPES = {
    "INT": {torch.int8, torch.int16, torch.int32, torch.bool},
    "FP": {torch.float32, torch.int8, torch.int16, torch.int32, torch.bool},
}
#: TOSA operators that move data without computing; a partition of only these is pointless.
_NO_COMPUTE = {"IDENTITY", "RESHAPE", "CONST", "CONST_SHAPE"}
#: Ops our registry lowers that ExecuTorch would decompose; conv1d/conv2d/conv_transpose2d
#: are left out on purpose: they decompose to aten.convolution, which we lower as well.
_DECOMPOSE_IS_FINE = {
    aten.conv1d.default, aten.conv1d.padding, aten.conv2d.default, aten.conv2d.padding,
    aten.conv_transpose2d.input,
}
_NOOP_BASES = {aten.alias.default, aten.detach.default}
#: Lowered alike; as reshape, the graph still runs eagerly once the pipeline drops a clone
#: that made a view's input contiguous.
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.view_copy.default}
_INSTANCES = itertools.count()


# --------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class DelegateSpec:
    """What a delegate is compiled for: a TOSA profile, optionally an Ethos-U target.

    ``ethosu_target`` (e.g. ``"ethos-u55-128"``) makes the payload a Vela binary stream;
    it needs the INT profile. ``system_config``/``memory_mode``/``vela_flags`` are passed
    to :func:`ethosu.compiler.compile_tosa` (defaults per target family). ``vgf=True`` makes
    the payload a VGF (:func:`vgf.compile_tosa`; INT or FP), as ExecuTorch's ``VgfBackend``
    writes it.

    Example:
        >>> spec = DelegateSpec("int", ethosu_target="ethos-u55-128")
        >>> spec.profile, spec.backend_id
        ('INT', 'TosaVerifyEthosUBackend')
        >>> DelegateSpec.from_compile_specs(spec.to_compile_specs()) == spec
        True
    """

    profile: str = "INT"
    ethosu_target: str | None = None
    system_config: str | None = None
    memory_mode: str | None = None
    vela_flags: tuple[str, ...] = ()
    vgf: bool = False

    def __post_init__(self) -> None:
        profile = str(self.profile).upper()
        if profile not in _BOUNDARY_DTYPES:
            raise ValueError(f"profile must be 'INT' or 'FP', got {self.profile!r}")
        object.__setattr__(self, "profile", profile)
        flags = self.vela_flags.split() if isinstance(self.vela_flags, str) else self.vela_flags
        object.__setattr__(self, "vela_flags", tuple(str(f) for f in flags))
        object.__setattr__(self, "vgf", bool(self.vgf))
        if self.vgf and self.ethosu_target is not None:
            raise ValueError("a delegate is compiled for VGF or for an Ethos-U target, not both")
        if self.ethosu_target is None:
            if self.system_config or self.memory_mode or self.vela_flags:
                raise ValueError("system_config, memory_mode and vela_flags need an ethosu_target")
            return
        if profile != "INT":
            raise ValueError("Ethos-U compilation needs the INT profile (Vela compiles integer TOSA)")
        from ethosu.config import resolve_config

        resolve_config(self.ethosu_target, self.system_config, self.memory_mode)

    @property
    def backend_id(self) -> str:
        """The BackendDetails class that turns a partition into this spec's payload.

        Example:
            >>> DelegateSpec("INT").backend_id
            'TosaVerifyBackend'
        """
        return ETHOSU_BACKEND_ID if self.ethosu_target else (VGF_BACKEND_ID if self.vgf else BACKEND_ID)

    def to_compile_specs(self) -> list[CompileSpec]:
        """The spec as ExecuTorch compile specs (stored in the ``.pte`` with the delegate).

        Example:
            >>> [(c.key, c.value) for c in DelegateSpec("FP").to_compile_specs()]
            [('profile', b'FP')]
        """
        fields = {"profile": self.profile, "ethosu_target": self.ethosu_target,
                  "system_config": self.system_config, "memory_mode": self.memory_mode,
                  "vela_flags": json.dumps(list(self.vela_flags)) if self.vela_flags else None,
                  "vgf": "1" if self.vgf else None}
        return [CompileSpec(k, v.encode()) for k, v in fields.items() if v is not None]

    @classmethod
    def from_compile_specs(cls, specs: Iterable[CompileSpec]) -> DelegateSpec:
        """Inverse of :meth:`to_compile_specs` (unknown keys are ignored).

        Example:
            >>> DelegateSpec.from_compile_specs([CompileSpec("profile", b"FP")]).profile
            'FP'
        """
        values = {s.key: bytes(s.value).decode() for s in specs}
        flags = tuple(json.loads(values["vela_flags"])) if "vela_flags" in values else ()
        return cls(values.get("profile", "INT"), values.get("ethosu_target"),
                   values.get("system_config"), values.get("memory_mode"), flags,
                   values.get("vgf") == "1")


# --------------------------------------------------------------------------- graphs
def aten_target(target):
    """The aten op our registry knows for an edge-dialect or ATen node target.

    Edge ops unwrap to their aten op; ``X_copy`` (edge's functional view ops) becomes
    ``X`` when we lower ``X``; view ops become ``reshape``; ExecuTorch's dim-order copies
    become ``_to_copy``/``clone``.

    Example:
        >>> aten_target(torch.ops.aten.permute_copy.default)
        <OpOverload(op='aten.permute', overload='default')>
        >>> aten_target(torch.ops.aten.relu.default)
        <OpOverload(op='aten.relu', overload='default')>
    """
    op = _overload(target)
    if op in _RESHAPES:
        return aten.reshape.default
    if not isinstance(op, torch._ops.OpOverload) or op in REGISTRY:
        return op
    name = op._schema.name.split("::")[-1]
    if op.namespace == "dim_order_ops":
        return {"_to_dim_order_copy": aten._to_copy.default,
                "_clone_dim_order": aten.clone.default}.get(name, op)
    if op.namespace == "aten" and name.endswith("_copy"):
        packet = getattr(torch.ops.aten, name[: -len("_copy")], None)
        if packet is not None and op._overloadname in packet.overloads():
            base = getattr(packet, op._overloadname)
            if base in REGISTRY or base in _NOOP_BASES or base in DECOMPOSITIONS:
                return base
    return op


def _overload(target):
    """The OpOverload behind an ATen or edge-dialect target (other targets unchanged)."""
    return target if isinstance(target, torch._ops.OpOverload) else getattr(target, "_op", target)


def _is_dim_order_op(target) -> bool:
    op = _overload(target)
    return isinstance(op, torch._ops.OpOverload) and op.namespace == "dim_order_ops"


def to_aten_module(ep: ExportedProgram, stand_in=None) -> fx.GraphModule:
    """A plain GraphModule of ``ep`` our pipeline can lower: aten targets, lifted constants
    (parameters, buffers, tensor constants) as ``get_attr``, node names and metadata kept.

    A constant holding no data (a FakeTensor, as in the program ExecuTorch hands a
    partitioner) is replaced by ``stand_in(name, fake)``; without ``stand_in`` that is an
    error, so a payload is never built from made-up weights.

    Example:
        >>> ep = torch.export.export(torch.nn.Linear(2, 2), (torch.ones(1, 2),))
        >>> [n.op for n in to_aten_module(ep).graph.nodes]
        ['get_attr', 'get_attr', 'placeholder', 'call_function', 'output']
    """
    from torch._subclasses.fake_tensor import FakeTensor

    sig = ep.graph_signature
    lifted = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
              **sig.inputs_to_lifted_tensor_constants}
    root = torch.nn.Module()
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in lifted:
            key = lifted[node.name]
            value = ep.state_dict[key] if key in ep.state_dict else ep.constants[key]
            if isinstance(value, FakeTensor):
                if stand_in is None:
                    raise LoweringError(f"constant {key!r} holds no data (a FakeTensor)",
                                        node=node.name)
                value = stand_in(key, value)
            attr = re.sub(r"\W", "_", node.name)
            root.register_buffer(attr, value.detach(), persistent=False)
            new = graph.create_node("get_attr", attr, name=node.name)
            new.meta = dict(node.meta)
        else:
            new = graph.node_copy(node, env.__getitem__)
            if node.op == "call_function":
                new.target = aten_target(node.target)
                if _is_dim_order_op(node.target):
                    new.kwargs = {k: v for k, v in new.kwargs.items() if k != "dim_order"}
        env[node] = new
    return fx.GraphModule(root, graph)


def _origins(node: fx.Node) -> tuple[set[str], set[str]]:
    """Names and op names of ``node`` and of the nodes it was made from (``from_node``)."""
    names, targets = {node.name}, set()
    if node.op == "call_function":
        targets |= {_op_name(node.target), _op_name(aten_target(node.target))}
    stack, seen = list(node.meta.get("from_node") or []), set()
    while stack:
        src = stack.pop()
        if id(src) in seen:
            continue
        seen.add(id(src))
        names.add(getattr(src, "name", ""))
        targets.add(str(getattr(src, "target", "")))
        stack.extend(getattr(src, "from_node", None) or [])
    return names, targets


def _op_name(target) -> str:
    """``aten.<op>.<overload>`` of an ATen or edge target (``str`` of anything else)."""
    op = _overload(target)
    if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten":
        return f"aten.{op._schema.name.split('::')[-1]}.{op._overloadname}"
    return str(op)


def _op_pattern(op) -> str:
    if isinstance(op, torch._ops.OpOverload):
        return _op_name(op)
    if isinstance(op, torch._ops.OpOverloadPacket):
        return str(op)
    text = str(op)
    return text if "." in text else f"aten.{text}"


def _named(node: fx.Node) -> str:
    """A node for a message: its name, and its op when it computes (names alone differ
    between the ATen program, where decisions are made, and the edge program)."""
    return f"{node.name} ({_op_name(node.target)})" if node.op == "call_function" else node.name


def _boundary_problem(node: fx.Node, profile: str) -> str | None:
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor):
        return "is not a single tensor"
    if v.dtype not in _BOUNDARY_DTYPES[profile]:
        return f"is {str(v.dtype).replace('torch.', '')}"
    if v.dim() > 1 and not v.is_contiguous():
        return "is not contiguous"
    return None


# --------------------------------------------------------------------------- partition TOSA
#: TOSA of the partitions lowered by the last :meth:`TosaPartitioner.partition`, by
#: :func:`_partition_key`, until the backend takes it: one model's worth at most.
_PARTITION_TOSA: dict[str, bytes] = {}


def _inputs_first(gm: fx.GraphModule) -> fx.GraphModule:
    """Move the constants (``get_attr`` nodes, sorted by name) and then the placeholders (in
    their order, which is the partition's input order) to the start of ``gm``.

    A partition reaches us twice: cut from the edge program by :func:`extract_subgraph`
    (inputs at their first use) and as the program ExecuTorch hands the backend (inputs
    first, constants in its own order). In this one order both are the same graph.
    """
    inputs = sorted((n for n in gm.graph.nodes if n.op == "get_attr"), key=lambda n: n.name)
    inputs += [n for n in gm.graph.nodes if n.op == "placeholder"]
    first_other = next(n for n in gm.graph.nodes if n.op not in ("get_attr", "placeholder"))
    for node in inputs:
        first_other.prepend(node)
    gm.recompile()
    return gm


def _value_summary(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)}:{value.dtype}:{value.stride()}"
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(_value_summary(v) for v in value) + ")"
    return type(value).__name__


def _partition_key(gm: fx.GraphModule, profile: str) -> str:
    """Identity of a partition graph: everything its lowering reads.

    That is the graph text (node names, which name the TOSA tensors, ops, arguments, node
    order), the shape, dtype and strides of every value, and the bytes of every constant.
    """
    digest = hashlib.sha256(f"{profile}\n{gm.graph}".encode())
    for node in gm.graph.nodes:
        digest.update(f"{node.name}={_value_summary(node.meta.get('val'))}".encode())
        constant = get_constant(gm, node)
        if constant is not None:
            raw = constant.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            digest.update(f"{node.name}:{tuple(constant.shape)}:{constant.dtype}".encode())
            digest.update(raw.numpy())
    return digest.hexdigest()


def _lower_partition(gm: fx.GraphModule, profile: str) -> tuple[bytes, Emitter]:
    """:func:`lower_graph_module` for a partition graph (in place), keeping the TOSA for
    :func:`_partition_tosa`; raises as :func:`lower_graph_module` does."""
    key = _partition_key(_inputs_first(gm), profile)
    tosa, em = lower_graph_module(gm, profile)
    _PARTITION_TOSA[key] = tosa
    return tosa, em


def _emit(gm: fx.GraphModule, profile: str) -> tuple[bytes, Emitter]:
    """Emit a graph the pass pipeline has prepared already (cut from a prepared graph)."""
    em = Emitter(gm, profile)
    return em.emit(), em


def _cut_out(prepared: fx.GraphModule, group: list[str]) -> fx.GraphModule:
    """The nodes named in ``group``, and those the pass pipeline made from them, cut out of
    ``prepared`` (a graph the pipeline ran over) by :func:`extract_subgraph`."""
    members = set(group)
    names = [n.name for n in prepared.graph.nodes
             if n.op == "call_function" and n.meta.get("orig_node", n.name) in members]
    return extract_subgraph(prepared, names)


def _partition_tosa(gm: fx.GraphModule, profile: str) -> bytes:
    """The TOSA of a partition graph: the bytes :func:`_lower_partition` produced for the same
    graph (taken: the backend asks once per partition), else lowered now."""
    kept = _PARTITION_TOSA.pop(_partition_key(_inputs_first(gm), profile), None)
    return kept if kept is not None else lower_graph_module(gm, profile)[0]


# --------------------------------------------------------------------------- Vela
_VELA_CACHE: OrderedDict[tuple, bytes] = OrderedDict()
_VELA_CACHE_SIZE = 16


def _vela_payload(tosa: bytes, spec: DelegateSpec) -> bytes:
    """Compile ``tosa`` for ``spec.ethosu_target``; the Vela binary stream (memoized)."""
    from ethosu.compiler import compile_tosa
    from ethosu.payload import write_vela_bin_stream

    key = (hashlib.sha256(tosa).hexdigest(), spec.ethosu_target, spec.system_config,
           spec.memory_mode, spec.vela_flags)
    if key not in _VELA_CACHE:
        program = compile_tosa(tosa, spec.ethosu_target, system_config=spec.system_config,
                               memory_mode=spec.memory_mode, extra_flags=spec.vela_flags,
                               layers=False)
        _VELA_CACHE[key] = write_vela_bin_stream(program)
        while len(_VELA_CACHE) > _VELA_CACHE_SIZE:
            _VELA_CACHE.popitem(last=False)
    _VELA_CACHE.move_to_end(key)
    return _VELA_CACHE[key]


# --------------------------------------------------------------------------- backends
def _preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> bytes:
    spec = DelegateSpec.from_compile_specs(compile_specs)
    tosa = _partition_tosa(to_aten_module(edge_program), spec.profile)
    if spec.vgf:
        from vgf import compile_tosa as vgf_compile

        return vgf_compile(tosa).vgf  # memoized by the TOSA bytes
    return _vela_payload(tosa, spec) if spec.ethosu_target else tosa


class TosaVerifyBackend(BackendDetails):
    """Delegate payload = the partition lowered to a TOSA 1.0 flatbuffer by :mod:`lowering`.

    Delegate inputs and outputs are the partition's, in PyTorch dimension order; in the INT
    profile they are the quantized integers (quantize/dequantize stay on the CPU).

    Example:
        >>> from executorch.exir import to_edge_transform_and_lower             # doctest: +SKIP
        >>> edge = to_edge_transform_and_lower(ep, partitioner=[TosaPartitioner("INT")])  # doctest: +SKIP
        >>> [backend for backend, _ in delegate_payloads(edge)]                   # doctest: +SKIP
        ['TosaVerifyBackend']
    """

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Lower one partition (an edge-dialect program) to the payload bytes."""
        return PreprocessResult(processed_bytes=_preprocess(edge_program, compile_specs))


class TosaVerifyEthosUBackend(BackendDetails):
    """Delegate payload = the partition's TOSA compiled by Vela, as a Vela binary stream.

    The layout is the one ExecuTorch's Ethos-U runtime reads (see :mod:`ethosu.payload`).

    Example:
        >>> part = TosaPartitioner("INT", ethosu_target="ethos-u55-128")           # doctest: +SKIP
        >>> edge = to_edge_transform_and_lower(ep, partitioner=[part])           # doctest: +SKIP
        >>> from ethosu.payload import read_vela_bin_stream                       # doctest: +SKIP
        >>> list(read_vela_bin_stream(delegate_payloads(edge)[0][1]))[:2]         # doctest: +SKIP
        ['vela_bin_stream', 'cmd_data']
    """

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Lower one partition to TOSA and compile it with Vela."""
        return PreprocessResult(processed_bytes=_preprocess(edge_program, compile_specs))


class TosaVerifyVgfBackend(BackendDetails):
    """Delegate payload = the partition's TOSA compiled to VGF by the ML SDK model converter.

    The payload is the converter's ``.vgf`` file as it is, which is what ExecuTorch's own
    ``VgfBackend`` stores (it calls ``model-converter`` on the TOSA with no flags);
    :func:`target_executorch_vgf_runtime` gives the delegates that backend's id.

    Example:
        >>> part = TosaPartitioner(DelegateSpec("FP", vgf=True))                 # doctest: +SKIP
        >>> edge = to_edge_transform_and_lower(ep, partitioner=[part])           # doctest: +SKIP
        >>> delegate_payloads(edge)[0][0]                                        # doctest: +SKIP
        'TosaVerifyVgfBackend'
    """

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Lower one partition to TOSA and convert it to VGF."""
        return PreprocessResult(processed_bytes=_preprocess(edge_program, compile_specs))


# --------------------------------------------------------------------------- partitioner
@dataclass
class _Plan:
    groups: list[list[str]] = field(default_factory=list)
    cpu: dict[str, str] = field(default_factory=dict)


class TosaPartitioner(Partitioner):
    """ExecuTorch partitioner delegating what :mod:`lowering` supports to TOSA (or Ethos-U).

    ``spec`` is a :class:`DelegateSpec` or a profile name (``"INT"``/``"FP"``); keyword
    arguments ``ethosu_target``, ``system_config``, ``memory_mode`` and ``vela_flags`` make
    or adjust the spec. In the INT profile the exported program must be quantized (a
    ``convert_pt2e`` graph, e.g. with :class:`lowering.TosaQuantizer`).

    Keep nodes on the CPU with ``exclude_ops`` (op names such as ``"aten.linear.default"``,
    ``"aten.linear"`` or ``"linear"``, or the op objects), ``exclude_modules`` (module paths
    such as ``"fc"`` or ``"features.3"``; their submodules too) and ``exclude_nodes`` (node
    names of the exported or edge program). After lowering, :attr:`cpu_nodes` lists every
    compute node left on the CPU and why, and :attr:`partitions` the delegated node names.

    Example:
        >>> from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        >>> from executorch.exir import to_edge_transform_and_lower
        >>> import lowering
        >>> m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
        >>> x = (torch.randn(1, 3, 8, 8),)
        >>> gm = torch.export.export(m, x).module()
        >>> q = prepare_pt2e(gm, lowering.TosaQuantizer(example_inputs=x)); _ = q(*x)
        >>> ep = torch.export.export(convert_pt2e(q), x)
        >>> edge = to_edge_transform_and_lower(ep, partitioner=[TosaPartitioner("INT")])
        >>> backend, payload = delegate_payloads(edge)[0]
        >>> backend, payload[4:8]
        ('TosaVerifyBackend', b'TOSA')
    """

    def __init__(
        self,
        spec: DelegateSpec | str = "INT",
        *,
        ethosu_target: str | None = None,
        system_config: str | None = None,
        memory_mode: str | None = None,
        vela_flags: Iterable[str] = (),
        exclude_ops: Iterable = (),
        exclude_modules: Iterable[str] = (),
        exclude_nodes: Iterable[str] = (),
    ) -> None:
        if not isinstance(spec, DelegateSpec):
            spec = DelegateSpec(spec)
        overrides = {k: v for k, v in (("ethosu_target", ethosu_target),
                                       ("system_config", system_config),
                                       ("memory_mode", memory_mode)) if v is not None}
        vela_flags = tuple(vela_flags) if not isinstance(vela_flags, str) else vela_flags
        if vela_flags:
            overrides["vela_flags"] = vela_flags
        if overrides:
            spec = DelegateSpec(**{**spec.__dict__, **overrides})
        super().__init__({"profile": spec.profile, "ethosu_target": spec.ethosu_target})
        #: The :class:`DelegateSpec` every partition is compiled for.
        self.delegate_spec = spec
        self.delegation_spec = DelegationSpec(spec.backend_id, spec.to_compile_specs())
        self.exclude_ops = tuple(_op_pattern(o) for o in exclude_ops)
        self.exclude_modules = tuple(str(m).strip(".") for m in exclude_modules)
        self.exclude_nodes = frozenset(str(n) for n in exclude_nodes)
        #: Compute nodes left on the CPU by the last :meth:`partition`, with reasons.
        self.cpu_nodes: list[CpuNode] = []
        #: Node names of each delegated partition of the last :meth:`partition`.
        self.partitions: list[list[str]] = []
        self._key = f"{type(self).__name__}#{next(_INSTANCES)}"
        self._real_values: dict[str, torch.Tensor] = {}

    # -- ExecuTorch hooks ----------------------------------------------------------------
    def ops_to_not_decompose(self, ep: ExportedProgram):
        """Ops our lowering handles whole (e.g. ``aten.linear``), kept for delegated nodes.

        The filter decides per node with the full analysis of ``ep`` and records the
        decision on the node, so the edge-stage :meth:`partition` agrees with it.
        """
        from torch._subclasses.fake_tensor import FakeTensor

        preserve = _preserved_ops()
        state: dict[str, bool] = {}
        # ExecuTorch shows partition() a copy whose weights are FakeTensors: keep the real
        # ones (references, no copy) so the edge-stage trial lowering sees the same values.
        for key, value in [*ep.state_dict.items(), *ep.constants.items()]:
            if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
                self._real_values[key] = value

        def keep(node: fx.Node) -> bool:
            if node.op != "call_function" or aten_target(node.target) not in preserve:
                return False
            decision = self._decision(node)
            if decision is None and not state:
                state["analysed"] = True
                self._annotate(ep)
                decision = self._decision(node)
            return bool(decision and decision["delegate"])

        return list(preserve), keep

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag the delegated nodes of an edge program, one tag per partition."""
        _PARTITION_TOSA.clear()  # what the backend has not taken belongs to an older program
        plan = self._analyse(exported_program, payloads=True)
        nodes = {n.name: n for n in exported_program.graph.nodes}
        tags = {}
        for i, names in enumerate(plan.groups):
            tag = f"tosa_verify_{i}"
            for name in names:
                nodes[name].meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        self.partitions = [list(g) for g in plan.groups]
        self.cpu_nodes = [CpuNode(name, _op_name(nodes[name].target), reason)
                          for name, reason in plan.cpu.items()
                          if name in nodes and nodes[name].op == "call_function"
                          and not _is_qdq(nodes[name].target)]
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    # -- analysis ------------------------------------------------------------------------
    def _decision(self, node: fx.Node) -> dict | None:
        d = (node.meta.get("custom") or {}).get(_META_KEY)
        return d if isinstance(d, dict) and d.get("owner") == self._key else None

    def _annotate(self, ep: ExportedProgram) -> None:
        plan = self._analyse(ep, payloads=False)
        delegated = {name for g in plan.groups for name in g}
        for n in ep.graph.nodes:
            if n.op == "call_function":
                # a new dict: meta["custom"] may be shared with the program ExecuTorch copied
                n.meta["custom"] = {**(n.meta.get("custom") or {}), _META_KEY: {
                    "owner": self._key, "delegate": n.name in delegated,
                    "reason": plan.cpu.get(n.name, "")}}

    def _stand_in(self, key: str, fake: torch.Tensor) -> torch.Tensor:
        real = self._real_values.get(key)
        if real is not None and real.shape == fake.shape and real.dtype == fake.dtype:
            return real
        # Not seen before (to_edge() + to_backend()): ones keep shapes, dtypes and scales
        # valid; only value-dependent lowering choices could differ from the real weights.
        return torch.ones(tuple(fake.shape), dtype=fake.dtype)

    def _exclusion(self, node: fx.Node) -> str | None:
        decision = self._decision(node)
        if decision is not None and not decision["delegate"]:
            return decision["reason"] or "kept on the CPU when the ATen program was analysed"
        if _is_qdq(node.target):  # placed by the boundary rules, not by user filters
            return None
        names, targets = _origins(node)
        hit = sorted(names & self.exclude_nodes)
        if hit:
            return f"excluded by node name {hit[0]!r}"
        path = module_path(node)
        for m in self.exclude_modules:
            if path == m or path.startswith(m + "."):
                return f"excluded by module path {m!r}"
        for pattern in self.exclude_ops:
            if any(t == pattern or t.startswith(pattern + ".") for t in targets):
                return f"excluded by op type {pattern!r}"
        return None

    def _analyse(self, ep: ExportedProgram, *, payloads: bool) -> _Plan:
        """Decide every node of ``ep``. With ``payloads`` (the edge stage) each partition is
        lowered on its own, as the backend will lower it, and its TOSA kept for the backend;
        otherwise partitions are only emitted from the probe's lowered graph."""
        try:
            work = to_aten_module(ep, self._stand_in)
        except Exception as e:  # noqa: BLE001 - never fail a lowering on analysis
            calls = [n.name for n in ep.graph.nodes if n.op == "call_function"]
            return _Plan([], {n: f"graph not analysable: {type(e).__name__}: {e}" for n in calls})
        calls = [n for n in work.graph.nodes if n.op == "call_function"]
        cpu: dict[str, str] = {}
        for n in calls:
            reason = self._exclusion(n)
            if reason:
                cpu[n.name] = reason
        probed = None
        if not all(self._decision(n) is not None for n in calls):
            probed = self._probe(work, calls, cpu)  # else: probed already, on the ATen program
        return self._converge(work, calls, cpu, None if payloads else probed)

    def _probe(self, work: fx.GraphModule, calls: list[fx.Node],
               cpu: dict[str, str]) -> fx.GraphModule | None:
        """Run the pipeline over the whole graph; what it leaves unsupported stays on the CPU.

        Returns the lowered graph (``None`` when the pipeline fails: then nothing is delegated).
        """
        names = {n.name for n in calls}
        for n in calls:
            v = n.meta.get("val")
            if isinstance(v, torch.Tensor) and (v.dtype not in SUPPORTED_DTYPES or has_dynamic_shape(v)):
                cpu.setdefault(n.name, f"{str(v.dtype).replace('torch.', '')} tensor or dynamic "
                                       "shape (not in TOSA 1.0)")
        try:
            probe = extract_subgraph(work, [n.name for n in calls])
            prepare_graph_module(probe, self.delegate_spec.profile)
        except Exception as e:  # noqa: BLE001
            for n in calls:
                cpu.setdefault(n.name, f"pass pipeline failed: {type(e).__name__}: {e}")
            return None
        for c in _unsupported(probe, self.delegate_spec.profile):
            node = next((m for m in probe.graph.nodes if m.name == c.node), None)
            origin = node.meta.get("orig_node", c.node) if node is not None else c.node
            cpu.setdefault(origin if origin in names else c.node, c.reason)
        return probe

    def _converge(self, work: fx.GraphModule, calls: list[fx.Node], cpu: dict[str, str],
                  probed: fx.GraphModule | None) -> _Plan:
        by_name = {n.name: n for n in work.graph.nodes}
        tried: dict[tuple[str, ...], dict[str, str]] = {}
        for _ in range(len(calls) + 1):
            # first between delegated and CPU nodes, then between partitions
            self._fix_boundaries(calls, cpu, None)
            groups = supported_groups(work, cpu)
            if self._fix_boundaries(calls, cpu, groups):
                continue
            changed = False
            for g in groups:
                key = tuple(g)
                if key not in tried:
                    tried[key] = self._trial(work, by_name, g, probed)
                if tried[key]:
                    cpu.update(tried[key])
                    changed = True
            if not changed:
                return _Plan(groups, cpu)
        return _Plan([], cpu)  # pragma: no cover - every round moves a node to the CPU

    def _fix_boundaries(self, calls: list[fx.Node], cpu: dict[str, str], groups) -> bool:
        """Move to the CPU every delegated node one of whose tensors would cross into
        another delegate or the CPU in a dtype that would change meaning (to a fixpoint).
        With ``groups=None`` all delegated nodes count as one delegate."""
        group_of = {name: i for i, g in enumerate(groups or ()) for name in g}

        def delegate(n: fx.Node):
            if n.op != "call_function" or n.name in cpu:
                return None
            return 0 if groups is None else group_of.get(n.name)

        def together(a: fx.Node, b: fx.Node) -> bool:
            return delegate(a) is not None and delegate(a) == delegate(b)

        profile = self.delegate_spec.profile
        changed_any = False
        changed = True
        while changed:
            changed = False
            for node in calls:
                if node.name in cpu:
                    continue
                problem = None
                for a in node.all_input_nodes:
                    if a.op != "get_attr" and not together(a, node):
                        why = _boundary_problem(a, profile)
                        if why:
                            problem = f"input {_named(a)} {why} at the delegate boundary ({profile})"
                            break
                readers = [u for u in node.users if not together(node, u)]
                if problem is None and readers:
                    why = _boundary_problem(node, profile)
                    if why:
                        problem = (f"output {why} at the delegate boundary ({profile}), "
                                   f"read by {_named(readers[0])}")
                if problem:
                    cpu[node.name] = problem
                    changed = changed_any = True
        return changed_any

    def _trial(self, work: fx.GraphModule, by_name, group: list[str],
               probed: fx.GraphModule | None) -> dict[str, str]:
        """Lower ``group`` for real; the nodes to move to the CPU (empty when it works).

        With ``probed`` (the whole graph after the pass pipeline) the group's nodes, and the
        ones the pipeline made from them, are cut out of it and emitted; without, the group
        is lowered on its own and its TOSA kept for the backend.
        """
        if probed is None:
            sub, lower = extract_subgraph(work, group), _lower_partition
        else:
            sub, lower = _cut_out(probed, group), _emit
        try:
            tosa, em = lower(sub, self.delegate_spec.profile)
        except LoweringError as e:
            return self._blame(sub, by_name, group, e.node, f"lowering failed: {e.reason}")
        except Exception as e:  # noqa: BLE001
            return dict.fromkeys(group, f"lowering failed: {type(e).__name__}: {e}")
        if not set(em.writer.op_counts) - _NO_COMPUTE:
            return dict.fromkeys(group, "partition would compute nothing")
        if not self.delegate_spec.ethosu_target:
            return {}
        from ethosu.compiler import check_support
        from ethosu.errors import EthosUError
        from tosa_verify.graph import load

        report = check_support(tosa, self.delegate_spec.ethosu_target)
        if not report.ok:
            ops = load(tosa).main.operators
            moved: dict[str, str] = {}
            for issue in report.unsupported:
                outputs = ops[issue.index].outputs if issue.index < len(ops) else []
                fx_node = em.provenance.get(outputs[0], {}).get("fx_node") if outputs else None
                reason = issue.reason if issue.op in issue.reason else f"TOSA {issue.op}: {issue.reason}"
                moved.update(self._blame(sub, by_name, group, fx_node, f"Vela: {reason}"))
            return moved
        try:
            _vela_payload(tosa, self.delegate_spec)
        except EthosUError as e:
            return dict.fromkeys(group, f"Vela could not compile the partition: {e}")
        return {}

    @staticmethod
    def _blame(sub: fx.GraphModule, by_name, group: list[str], node_name: str | None,
               reason: str) -> dict[str, str]:
        members = set(group)
        node = next((n for n in sub.graph.nodes if n.name == node_name), None)
        origin = node.meta.get("orig_node", node_name) if node is not None else node_name
        for name in (origin, node_name):
            if name in members:
                return {name: reason}
            if name in by_name:  # a value from outside: blame its consumers in the group
                users = [u.name for u in by_name[name].users if u.name in members]
                if users:
                    return dict.fromkeys(users, reason)
        return dict.fromkeys(group, reason)


def _is_qdq(target) -> bool:
    op = _overload(target)
    return isinstance(op, torch._ops.OpOverload) and op.namespace == "quantized_decomposed"


def _preserved_ops() -> set:
    """Ops we lower (a visitor, or a decomposition of our pipeline such as layer_norm) that
    ExecuTorch would decompose and can keep whole (functional, not aliasing)."""
    # ExecuTorch asks several times per lowering, and torch builds its decomposition table
    # anew on every call (50-100 ms): remember the answer while our registries stay the same.
    return set(_preserved_ops_for(frozenset(REGISTRY), frozenset(DECOMPOSITIONS)))


@functools.lru_cache(maxsize=4)
def _preserved_ops_for(lowered: frozenset, decomposed: frozenset) -> frozenset:
    table = torch.export.default_decompositions()
    keep = set()
    for op in lowered | decomposed:
        if not isinstance(op, torch._ops.OpOverload) or op in _DECOMPOSE_IS_FINE:
            continue
        schema = op._schema
        if op not in table or schema.is_mutable or any(r.alias_info for r in schema.returns):
            continue
        keep.add(op)
    return frozenset(keep)


# --------------------------------------------------------------------------- payloads
#: The backend id ExecuTorch's Ethos-U device runtime registers (backends/arm/runtime).
EXECUTORCH_ETHOSU_RUNTIME_ID = "EthosUBackend"


#: The backend id ExecuTorch's VGF runtime registers (backends/arm/vgf).
EXECUTORCH_VGF_RUNTIME_ID = "VgfBackend"


def _retarget(edge, ours: str, theirs: str) -> int:
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    renamed = 0
    for method in edge.methods:
        gm = edge.exported_program(method).graph_module
        for module in gm.modules():
            if isinstance(module, LoweredBackendModule) and module.backend_id == ours:
                module._backend_id = theirs  # no public setter
                renamed += 1
    return renamed


def target_executorch_vgf_runtime(edge) -> int:
    """Let ExecuTorch's VGF runtime run our VGF delegates; returns how many were renamed.

    Our VGF delegates carry :class:`TosaVerifyVgfBackend`'s id; their payload is what
    ExecuTorch's ``VgfBackend`` writes, so after lowering this renames them to ``VgfBackend``
    for ``.to_executorch()``, as :func:`target_executorch_ethosu_runtime` does for Ethos-U.

    Example:
        >>> target_executorch_vgf_runtime(edge)                                    # doctest: +SKIP
        1
    """
    return _retarget(edge, VGF_BACKEND_ID, EXECUTORCH_VGF_RUNTIME_ID)


def target_executorch_ethosu_runtime(edge) -> int:
    """Let ExecuTorch's Ethos-U device runtime run our Ethos-U delegates; returns how many.

    Our Ethos-U delegates are compiled by :class:`TosaVerifyEthosUBackend` and carry its id,
    which no device runtime registers. Their payload is the Vela bin stream that ExecuTorch's
    own Ethos-U runtime reads (``ethosu.payload``, byte-compatible with ExecuTorch's
    ``vela_compile`` output), so after lowering this renames their backend id to
    ``EthosUBackend`` for ``.to_executorch()``. Call it on the ``EdgeProgramManager`` returned
    by ``to_edge_transform_and_lower``. Not run on a device here: there is no Ethos-U runtime
    on this machine.

    Example:
        >>> edge = to_edge_transform_and_lower(ep, partitioner=[TosaPartitioner(   # doctest: +SKIP
        ...     "INT", ethosu_target="ethos-u55-128")])
        >>> target_executorch_ethosu_runtime(edge)                                 # doctest: +SKIP
        1
        >>> open("model.pte", "wb").write(edge.to_executorch().buffer)             # doctest: +SKIP
    """
    return _retarget(edge, ETHOSU_BACKEND_ID, EXECUTORCH_ETHOSU_RUNTIME_ID)


def delegate_payloads(program) -> list[tuple[str, bytes]]:
    """``(backend id, payload)`` of every delegate, in execution order.

    ``program`` is a ``.pte`` (bytes or path), an ``ExecutorchProgramManager``, an
    ``EdgeProgramManager`` or an ``ExportedProgram`` after lowering.

    Example:
        >>> pte = edge.to_executorch().buffer                # doctest: +SKIP
        >>> delegate_payloads(pte)[0][1][4:8]                 # doctest: +SKIP
        b'TOSA'
    """
    from pathlib import Path

    from executorch.exir.lowered_backend_module import LoweredBackendModule

    if isinstance(program, (str, Path)):
        program = Path(program).read_bytes()
    if hasattr(program, "buffer") and not isinstance(program, (bytes, bytearray)):
        program = program.buffer
    if isinstance(program, (bytes, bytearray, memoryview)):
        from executorch.exir._serialize._program import deserialize_pte_binary

        prog = deserialize_pte_binary(bytes(program)).program
        return [(d.id, bytes(prog.backend_delegate_data[d.processed.index].data))
                for plan in prog.execution_plan for d in plan.delegates]
    if hasattr(program, "exported_program"):
        program = program.exported_program()
    gm = program.graph_module
    found = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and "executorch_call_delegate" in str(node.target):
            module = getattr(gm, node.args[0].target)
            if isinstance(module, LoweredBackendModule):
                found.append((module.backend_id, bytes(module.processed_bytes)))
    return found
