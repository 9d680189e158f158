"""The result of :func:`lowering.lower`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.fx as fx

from tosa_verify import load as load_tosa
from tosa_verify.reference import no_gdb_backtrace, survives_in_process
from tosa_verify.reference import run as run_reference

from .qparams import QParams
from .reference import TorchReference
from .whole_run import (
    WholeRunError,
    forward_leaves,
    run_whole,
    source_model,
    source_node,
    tensor_inputs,
)

#: TOSA dtype of an unquantized graph input -> the numpy dtype the graph reads
_NUMPY_OF = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "BOOL": np.bool_,
             "FP16": np.float16, "FP32": np.float32}


@dataclass
class Partition:
    """One TOSA graph and the FX nodes it covers.

    ``inputs``/``outputs`` name the graph's TOSA tensors; ``input_qparams``/``output_qparams``
    (INT profile) give their quantization, ``None`` for tensors that are not quantized.
    """

    name: str
    tosa: bytes | None = field(repr=False)
    nodes: list[str]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    input_qparams: list[QParams | None] = field(default_factory=list)
    output_qparams: list[QParams | None] = field(default_factory=list)


@dataclass
class CpuNode:
    """A node left on the CPU and why."""

    node: str
    target: str
    reason: str


@dataclass
class LoweredModel:
    """A model lowered to TOSA.

    Example:
        >>> import lowering
        >>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()).eval()
        >>> lm = lowering.lower(m, (torch.randn(1, 4),), profile="FP")
        >>> lm.tosa is not None and lm.cpu_nodes == []
        True
        >>> bool(torch.allclose(lm.run(torch.ones(1, 4))[0], m(torch.ones(1, 4)), atol=1e-5))
        True
    """

    profile: str
    tosa: bytes | None
    partitions: list[Partition]
    cpu_nodes: list[CpuNode]
    provenance: dict[str, dict]
    quant_params: dict[str, dict]
    float_model: fx.GraphModule | None
    quantized_model: fx.GraphModule | None
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    input_qparams: list[QParams | None] = field(default_factory=list)
    output_qparams: list[QParams | None] = field(default_factory=list)
    input_dtypes: list[str] = field(default_factory=list)
    output_torch_dtypes: list = field(default_factory=list)
    op_counts: dict[str, int] = field(default_factory=dict)
    pass_log: list[str] = field(default_factory=list)
    graph_module: fx.GraphModule | None = None
    model_name: str = ""

    def __repr__(self) -> str:
        """A summary, not the flatbuffer: model, profile, graphs, operators, inputs/outputs.

        Example:
            >>> import lowering
            >>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()).eval()
            >>> print(lowering.lower(m, (torch.randn(1, 4),), profile="FP"))
            LoweredModel(Sequential, FP, 1 TOSA graph, 4 operators (CLAMP 1, CONV2D 1, RESHAPE 2), inputs input_1 FP32, outputs relu)
        """
        ops = sum(self.op_counts.values())
        hist = ", ".join(f"{op} {n}" for op, n in sorted(self.op_counts.items()))
        dtypes = self.input_dtypes + [""] * (len(self.input_names) - len(self.input_dtypes))
        ins = ", ".join(f"{n} {d}".strip() for n, d in zip(self.input_names, dtypes, strict=True))
        outs = ", ".join(self.output_names)
        if self.tosa is None:
            where = (f"{len(self.partitions)} TOSA partitions, {len(self.cpu_nodes)} nodes on the CPU "
                     f"({', '.join(c.node for c in self.cpu_nodes[:5])}"
                     f"{', ...' if len(self.cpu_nodes) > 5 else ''})")
        else:
            where = "1 TOSA graph"
        io = f", inputs {ins or '-'}, outputs {outs or '-'}" if self.tosa is not None else ""
        return f"LoweredModel({self.model_name or '?'}, {self.profile}, {where}, {ops} operators ({hist}){io})"

    # ------------------------------------------------------------------ run
    def quantize_inputs(self, *inputs) -> list[np.ndarray]:
        """Torch inputs -> numpy arrays as the TOSA graph expects (quantized in INT).

        ``inputs`` are the model's forward arguments: nested lists/tuples/dicts are flattened
        as ``torch.export`` flattens them, and python numbers (``dim``, ``alpha``...) are left
        out: export made them constants of the graph.
        """
        arrs = []
        for i, x in enumerate(tensor_inputs(inputs)):
            x = x.detach().cpu() if isinstance(x, torch.Tensor) else torch.as_tensor(x)
            qp = self.input_qparams[i] if i < len(self.input_qparams) else None
            dt = self.input_dtypes[i] if i < len(self.input_dtypes) else "FP32"
            if qp is not None:
                q = torch.ops.quantized_decomposed.quantize_per_tensor(
                    x.float(), qp.s, qp.zp, qp.qmin, qp.qmax, qp.dtype)
                arrs.append(q.numpy())
            else:
                arrs.append(x.numpy().astype(_NUMPY_OF.get(dt, np.float32)))
        return arrs

    def run_raw(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Run the single TOSA graph on raw numpy arrays with ``tosa_reference_model``."""
        import tosa_reference_model as trm

        if self.tosa is None:
            raise RuntimeError("model is split into several partitions; run them one by one")
        if not self._survives_in_process():
            # (the executable reports the graph's error where the in-process call would crash)
            return run_reference(self.tosa, arrays, backend="cli")
        with no_gdb_backtrace():
            outs, status = trm.run(self.tosa, [np.ascontiguousarray(a) for a in arrays])
        if "VALID" not in str(status):
            raise RuntimeError(f"tosa_reference_model status {status}")
        return list(outs)

    def _survives_in_process(self) -> bool:
        """:func:`~tosa_verify.reference.survives_in_process` of :attr:`tosa`, worked out once
        per flatbuffer (kept with the bytes it was worked out for)."""
        known = self.__dict__.get("_in_process")
        if known is None or known[0] is not self.tosa:
            known = self.__dict__["_in_process"] = (self.tosa, survives_in_process(load_tosa(self.tosa)))
        return known[1]

    def run(self, *inputs) -> list[torch.Tensor]:
        """Run on torch inputs; INT outputs are dequantized to float.

        Returns a list with one tensor per model output. A model lowered in several partitions
        runs whole: its partitions on the reference model, its CPU nodes in PyTorch
        (:func:`lowering.whole_run.run_whole`).
        """
        if self.tosa is None:
            return run_whole(self, *inputs)
        return self.outputs_to_torch(self.run_raw(self.quantize_inputs(*inputs)), self.output_torch_dtypes)

    def outputs_to_torch(self, raw: list[np.ndarray], torch_dtypes: list) -> list[torch.Tensor]:
        """The TOSA graph's raw outputs as torch tensors: quantized ones dequantized (by
        :attr:`output_qparams`), the others in ``torch_dtypes`` (None: as they are).

        Example:
            >>> lm.outputs_to_torch([np.zeros(2, np.int32)], [torch.int64])[0].dtype   # doctest: +SKIP
            torch.int64
        """
        res = []
        for i, r in enumerate(raw):
            qp = self.output_qparams[i] if i < len(self.output_qparams) else None
            if qp is not None:
                # a 0-d output (``x.mean()``) dequantizes to a numpy scalar, not an array
                res.append(torch.from_numpy(np.asarray(qp.dequantize(np.asarray(r)), dtype=np.float32)))
            else:
                t = torch.from_numpy(np.array(r))
                tdt = torch_dtypes[i] if i < len(torch_dtypes) else None
                if tdt is not None and tdt != t.dtype:
                    t = t.to(tdt)
                res.append(t)
        return res

    def torch_reference(self) -> TorchReference:
        """The float and fake-quant models as references (the float64 fake-quant evaluator).

        Example:
            >>> import lowering
            >>> m = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
            >>> lm = lowering.lower(m, (torch.randn(2, 4),))
            >>> sorted(lm.torch_reference().capture((torch.ones(2, 4),), fake_quant=False).values)
            ['input_1', 'linear']
        """
        return TorchReference(self.float_model, self.quantized_model, self.graph_module)

    # ------------------------------------------------------------------ partitions
    def partition_models(self) -> list[LoweredModel]:
        """Each TOSA partition of a partly lowered model as a one-graph :class:`LoweredModel`.

        They take the whole model's inputs: :meth:`quantize_inputs` runs the fake-quant (INT) or
        float (FP) PyTorch model up to the partition and quantizes the values that enter it, so
        drift analysis and goldens work per partition. A model lowered whole gives ``[self]``.

        Example:
            >>> import lowering
            >>> class M(torch.nn.Module):
            ...     def forward(self, x):
            ...         return torch.nextafter(x + 1, x) * 2   # nextafter stays on the CPU
            >>> lm = lowering.lower(M(), (torch.randn(2, 3),), profile="FP")
            >>> [(p.tosa is not None, p.input_names) for p in lm.partition_models()]
            [(True, ['x']), (True, ['nextafter'])]
        """
        if self.tosa is not None:
            return [self]
        return [_PartitionModel.of(self, p) for p in self.partitions if p.tosa is not None]

    # ------------------------------------------------------------------ save
    def save(self, directory) -> Path:
        """Write ``model.tosa`` (or one file per partition), ``provenance.json``,
        ``quant_params.json`` and ``manifest.json`` into ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        files = []
        if self.tosa is not None:
            (d / "model.tosa").write_bytes(self.tosa)
            files.append("model.tosa")
        else:
            for p in self.partitions:
                if p.tosa is not None:
                    (d / f"{p.name}.tosa").write_bytes(p.tosa)
                    files.append(f"{p.name}.tosa")
        (d / "provenance.json").write_text(json.dumps(self.provenance, indent=1))
        (d / "quant_params.json").write_text(json.dumps(self.quant_params, indent=1))
        manifest = {
            "profile": self.profile,
            "tosa_version": "1.0.0",
            "graphs": files,
            "inputs": self.input_names,
            "outputs": self.output_names,
            "input_qparams": [q.to_json() if q else None for q in self.input_qparams],
            "output_qparams": [q.to_json() if q else None for q in self.output_qparams],
            "partitions": [{"name": p.name, "nodes": p.nodes, "inputs": p.inputs,
                            "outputs": p.outputs,
                            "input_qparams": [q.to_json() if q else None for q in p.input_qparams],
                            "output_qparams": [q.to_json() if q else None
                                               for q in p.output_qparams]}
                           for p in self.partitions],
            "cpu_nodes": [vars(c) for c in self.cpu_nodes],
            "op_counts": self.op_counts,
            "passes": self.pass_log,
        }
        (d / "manifest.json").write_text(json.dumps(manifest, indent=1))
        return d


@dataclass(repr=False)
class _PartitionModel(LoweredModel):
    """One partition of a partly lowered model; its inputs are the whole model's inputs."""

    whole: LoweredModel | None = None
    partition: str = ""

    @classmethod
    def of(cls, whole: LoweredModel, p: Partition) -> _PartitionModel:
        from tosa_verify.graph import load
        from tosa_verify.profiles import op_histogram

        block = load(p.tosa).main
        counts = {op: n for op, n in op_histogram(load(p.tosa)).items() if op not in ("CONST", "CONST_SHAPE")}
        names = set(block.inputs) | set(block.outputs) | {o for op in block.operators for o in op.outputs}
        return cls(profile=whole.profile, tosa=p.tosa, partitions=[p], cpu_nodes=[],
                   provenance={k: v for k, v in whole.provenance.items() if k in names},
                   quant_params={k: v for k, v in whole.quant_params.items() if k in names},
                   float_model=whole.float_model, quantized_model=whole.quantized_model,
                   input_names=list(p.inputs), output_names=list(p.outputs),
                   input_qparams=list(p.input_qparams), output_qparams=list(p.output_qparams),
                   input_dtypes=[block.tensors[n].dtype for n in block.inputs],
                   op_counts=counts, pass_log=whole.pass_log, graph_module=whole.graph_module,
                   model_name=f"{whole.model_name or '?'}[{p.name}]", whole=whole, partition=p.name)

    @property
    def nodes_elsewhere(self) -> set[str]:
        """FX nodes computed outside this partition (CPU nodes, other partitions' nodes)."""
        whole = self.whole
        if whole is None:
            return set()
        mine = set(self.partitions[0].nodes)
        other = {str(v.get("fx_node", "")) for v in whole.provenance.values()}
        return ({c.node for c in whole.cpu_nodes} | other | {n for p in whole.partitions for n in p.nodes}) - mine

    def quantize_inputs(self, *inputs) -> list[np.ndarray]:
        """The whole model's inputs -> this partition's TOSA inputs (run up to it in PyTorch)."""
        whole = self.whole if self.whole is not None else self
        try:
            source = source_model(whole)
        except WholeRunError:
            source = None
        values = _node_values(source, forward_leaves(source, inputs)) if source is not None else {}
        nodes = {n.name: n for n in source.graph.nodes} if source is not None else {}
        found = []
        for name in self.input_names:
            try:
                node = source_node(whole, name, nodes).name
            except WholeRunError:
                node = name
            value = values.get(node)
            if value is None:
                raise ValueError(f"partition {self.partition}: input {name!r} has no value in the "
                                 f"PyTorch model")
            found.append(value)
        return self.quantize_boundary(*found)

    def quantize_boundary(self, *values) -> list[np.ndarray]:
        """This partition's own input values (one per :attr:`input_names`, as PyTorch computes
        them) -> its TOSA inputs, quantized with the partition's input parameters."""
        return LoweredModel.quantize_inputs(self, *values)


def _node_values(gm: fx.GraphModule, inputs: list) -> dict[str, torch.Tensor]:
    """Every node's value when ``gm`` runs on ``inputs`` (its placeholders' values, see
    :func:`forward_leaves`)."""
    values: dict[str, torch.Tensor] = {}

    class _Capture(fx.Interpreter):
        def run_node(self, n: fx.Node):
            out = super().run_node(n)
            if isinstance(out, torch.Tensor):
                values[n.name] = out
            return out

    with torch.no_grad():
        _Capture(gm).run(*inputs)
    return values
