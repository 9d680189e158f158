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
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import executorch.kernels.quantized  # noqa: F401 - out-variants of the CPU-side quantize ops
import torch
import torch.fx as fx
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.export import ExportedProgram

from .api import (
    SUPPORTED_DTYPES,
    _unsupported,
    extract_subgraph,
    prepare_graph_module,
    supported_groups,
)

# the backends and graph helpers live in their own modules; served from here as before
from .delegate_backends import (  # noqa: F401 - re-exported
    _PARTITION_TOSA,
    BACKEND_ID,
    ETHOSU_BACKEND_ID,
    EXECUTORCH_ETHOSU_RUNTIME_ID,
    EXECUTORCH_VGF_RUNTIME_ID,
    VGF_BACKEND_ID,
    DelegateSpec,
    TosaVerifyBackend,
    TosaVerifyEthosUBackend,
    TosaVerifyVgfBackend,
    _cut_out,
    _emit,
    _lower_partition,
    _vela_payload,
    delegate_payloads,
    target_executorch_ethosu_runtime,
    target_executorch_vgf_runtime,
)
from .delegate_graphs import (  # noqa: F401 - re-exported
    _boundary_problem,
    _named,
    _op_name,
    _op_pattern,
    _origins,
    _overload,
    aten_target,
    to_aten_module,
)
from .emitter import module_path  # noqa: F401 - re-exported
from .errors import LoweringError
from .graph_utils import has_dynamic_shape
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


#: Where the ATen-stage decision is kept on a node (``node.meta["custom"]`` survives
#: ExecuTorch's decompositions and is inherited by the nodes a decomposition creates).
_META_KEY = "tosa_verify_delegate"

#: TOSA operators that move data without computing; a partition of only these is pointless.
_NO_COMPUTE = {"IDENTITY", "RESHAPE", "CONST", "CONST_SHAPE"}
#: Ops our registry lowers that ExecuTorch would decompose; conv1d/conv2d/conv_transpose2d
#: are left out on purpose: they decompose to aten.convolution, which we lower as well.
_DECOMPOSE_IS_FINE = {
    aten.conv1d.default, aten.conv1d.padding, aten.conv2d.default, aten.conv2d.padding,
    aten.conv_transpose2d.input,
}
_INSTANCES = itertools.count()


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
