"""ExecuTorch backends of our delegates: a partition's payload as TOSA, Vela stream or VGF.

:class:`DelegateSpec` says what a delegate is compiled for; the three ``BackendDetails``
classes turn a partition (the edge program ExecuTorch hands them) into the payload; the TOSA
a :class:`lowering.partitioner.TosaPartitioner` trial lowered for the same graph is reused
(:func:`_lower_partition`, :func:`_partition_tosa`). :func:`delegate_payloads` reads the
payloads back; ``target_executorch_*_runtime`` retarget them to ExecuTorch's device runtimes.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.fx as fx
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .api import extract_subgraph, lower_graph_module
from .delegate_graphs import _BOUNDARY_DTYPES, to_aten_module
from .emitter import Emitter
from .graph_utils import get_constant

#: Backend id (the BackendDetails class name) of delegates whose payload is TOSA.
BACKEND_ID = "TosaVerifyBackend"
#: Backend id of delegates whose payload is a Vela binary stream.
ETHOSU_BACKEND_ID = "TosaVerifyEthosUBackend"
#: Backend id of delegates whose payload is a VGF (ML SDK model converter output).
VGF_BACKEND_ID = "TosaVerifyVgfBackend"


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
