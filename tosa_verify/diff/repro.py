"""One-operator repros: an operator cut out of a graph with its input values, re-run by both
executors (:func:`write_repro`, :func:`run_repro`), and the operator described readably."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import reference
from ..compare import MISMATCH, Verdict, compare, compliance_config
from ..dtypes import decode_constant, dtype_info, to_reference_form, to_working
from ..errors import TosaError
from ..graph import Block, Graph, Operator, Region, Tensor, load
from ..interpreter import run as interp_run
from ..reference import _write_input, _write_npy
from ..writer import to_flatbuffer
from ._common import _SAME_GRAPH, OPERAND_NAMES, Executor, _decl, _jsonable, _same_graph_key


def _readable(value: np.ndarray, dtype: str, limit: int = 64) -> object:
    arr = np.asarray(value)
    if dtype in ("BF16", "FP8E4M3", "FP8E5M2") and arr.dtype.kind in "Vu":
        arr = arr.view(dtype_info(dtype).working)
    if arr.size <= limit:
        flat = arr.reshape(-1)
        if arr.dtype.kind == "f" or dtype in ("BF16", "FP8E4M3", "FP8E5M2", "FP16", "FP32"):
            items: list[object] = [float(v) for v in flat.astype(np.float64)]
        elif arr.dtype.kind == "b":
            items = [bool(v) for v in flat]
        else:
            items = [int(v) for v in flat]
        return items[0] if arr.ndim == 0 else items
    f64 = arr.astype(np.float64)
    return f"{dtype}{list(arr.shape)} min {f64.min():.6g} max {f64.max():.6g}"


def describe_operator(graph: Graph, index: int, values: Mapping[str, np.ndarray] | None = None) -> dict[str, object]:
    """The attributes of operator ``index`` of the entry block, made readable.

    Plain attributes are kept (``acc_type``, ``rounding_mode``, ``per_channel``, ...), CLAMP's
    byte-encoded bounds are decoded, and parameter operands that are constants in TOSA 1.0
    (RESCALE multiplier/shift/zero points, CONV/MATMUL zero points, MUL shift, PAD value, ...)
    are added by their spec names with their values (``values`` supplies non-constant ones).

    >>> describe_operator(load("model.tosa"), 3)["multiplier"]   # doctest: +SKIP
    [1518500250]
    """
    block = graph.main
    op = block.operators[index]
    out: dict[str, object] = {}
    for key, value in op.attrs.items():
        if key in ("min_val", "max_val") and isinstance(value, (bytes, bytearray)) and op.inputs:
            decl = _decl(block, op.inputs[0])
            if decl is not None:
                try:
                    value = _readable(decode_constant(bytes(value), decl.dtype, ()), decl.dtype)
                except TosaError:
                    value = list(value)
        out[key] = value
    names = OPERAND_NAMES.get(op.op, ())
    for i, name in enumerate(op.inputs):
        if i == 0 and op.op not in ("SELECT",):
            continue
        label = names[i] if i < len(names) else None
        decl = _decl(block, name)
        if decl is None:
            continue
        value = decl.data
        if value is None and values is not None and name in values and label is not None:
            value = values[name]
        if label is None:
            continue
        if value is None:
            out[label] = f"{decl.dtype}{list(decl.shape)} (runtime)"
        elif label in ("weight", "B", "values", "input", "input2", "input3", "table", "indices", "values_in"):
            out[label] = _readable(value, decl.dtype, limit=16)
        else:
            out[label] = _readable(value, decl.dtype)
    return out


def extract_operator(graph: Graph, index: int, values: Mapping[str, np.ndarray] | None = None) -> Graph:
    """A graph holding only operator ``index`` of ``graph``'s entry block.

    Constant inputs stay constants (with their CONST/CONST_SHAPE op); SHAPE inputs that are
    computed are frozen to their value from ``values``; every other input becomes a graph input.
    The operator's outputs are the graph's outputs. Other regions (control-flow bodies) are kept.

    >>> one = extract_operator(load("model.tosa"), 5)   # doctest: +SKIP
    """
    return _extract_operators(graph, [index], values)


def _extract_operators(
    graph: Graph, indices: Sequence[int], values: Mapping[str, np.ndarray] | None = None, suffix: str = ""
) -> Graph:
    """A graph of the operators ``indices`` of the entry block, each cut out on its own.

    As :func:`extract_operator`, for several operators at once: every non-constant input of any
    of them becomes one graph input, and every output is renamed ``name + suffix`` (so that an
    operator's output and a later operator's input of the same name stay apart: the later
    operator reads the graph input, not the earlier operator's result).
    """
    block = graph.main
    tensors: dict[str, Tensor] = {}
    shapes: dict[str, Tensor] = {}
    operators: list[Operator] = []
    inputs: list[str] = []
    outputs: list[str] = []
    for index in indices:
        op = block.operators[index]
        for name in op.inputs:
            if name in tensors or name in shapes:
                continue
            decl = _decl(block, name)
            if decl is None:
                raise TosaError(f"operator {index} {op.op}: input {name!r} is not declared")
            is_shape = name in block.shapes or decl.dtype == "SHAPE"
            data = decl.data
            if data is None and is_shape:
                if values is None or name not in values:
                    raise TosaError(f"operator {index} {op.op}: SHAPE input {name!r} has no known value")
                data = np.asarray(values[name], dtype=np.int64)
            if data is not None:
                copy = Tensor(decl.name, decl.shape, decl.dtype, data=np.asarray(data))
                (shapes if name in block.shapes else tensors)[name] = copy
                operators.append(Operator("CONST_SHAPE" if is_shape else "CONST", {}, [], [name]))
            else:
                tensors[name] = Tensor(decl.name, decl.shape, decl.dtype)
                inputs.append(name)
        renamed = []
        for name in op.outputs:
            decl = _decl(block, name)
            if decl is None:
                raise TosaError(f"operator {index} {op.op}: output {name!r} is not declared")
            new = name + suffix
            tensors[new] = Tensor(new, decl.shape, decl.dtype, variable=decl.variable,
                                  variable_name=decl.variable_name)
            renamed.append(new)
        operators.append(Operator(op.op, dict(op.attrs), list(op.inputs), renamed, op.location))
        outputs.extend(renamed)
    new_block = Block("main", operators, tensors, inputs, outputs, shapes)
    regions = [Region("main", [new_block, *graph.regions[0].blocks[1:]]), *graph.regions[1:]]
    return Graph(version=graph.version, regions=regions)


def _to_bytes(graph: Graph) -> bytes:
    return to_flatbuffer(graph)


def _save(path: Path, value: np.ndarray, dtype: str) -> None:
    if dtype == "FP64":
        np.save(path, np.asarray(value))
        return
    if dtype_info(dtype).block:  # (values, scales): the scales to <stem>_scale.npy, as the reference reads them
        if value[0].dtype == np.float64:  # the precise reference's decoded values
            np.save(path, value[0])
            np.save(path.with_name(f"{path.stem}_scale.npy"), value[1])
        else:
            _write_input(path, to_working(value, dtype, what=path.name), dtype)
        return
    _write_npy(path, to_reference_form(to_working(np.asarray(value), dtype, what=path.name), dtype), dtype)


def _write_inputs(out: Path, block: Block, values: Mapping[str, np.ndarray], prefix: str) -> list[dict[str, object]]:
    inputs: list[dict[str, object]] = []
    for i, name in enumerate(block.inputs):
        decl = block.tensors[name]
        fname = f"{prefix}-{i}.npy"
        _save(out / fname, _input_value(values, name, decl), decl.dtype)
        inputs.append({"name": name, "file": fname, "dtype": decl.dtype, "shape": list(decl.shape)})
    return inputs


def _input_value(values: Mapping[str, np.ndarray], name: str, decl: Tensor) -> np.ndarray:
    if name not in values:
        raise TosaError(f"no captured value for input {name!r} of the repro")
    info = dtype_info(decl.dtype)
    if info.block:
        return values[name]  # the (values, scales) pair
    value = np.asarray(values[name])
    if value.dtype == np.float64 and info.is_float:  # precise reference values: round to the format
        value = to_reference_form(value.astype(info.working), decl.dtype)
    return value


def _load_npy(path: Path) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """A saved input; with ``<stem>_scale.npy`` beside it, the block-scaled pair (values, scales)."""
    scales = path.with_name(f"{path.stem}_scale.npy")
    if scales.is_file():
        return np.load(path, allow_pickle=False), np.load(scales, allow_pickle=False)
    return np.load(path, allow_pickle=False)


def _execute_repro(directory: Path, manifest: Mapping[str, object],
                   executor: Executor | None = None) -> tuple[list[Verdict | None], list, list]:
    inputs = [_load_npy(directory / i["file"]) for i in manifest["inputs"]]  # type: ignore[index]
    other_inputs = [_load_npy(directory / i["file"]) for i in manifest.get("against_inputs") or []]  # type: ignore[index]
    graph = load(directory / str(manifest["tosa_file"]))
    engine = str(manifest.get("engine", "interpreter"))
    precise = bool(manifest.get("precise", False))

    bounds: dict[str, np.ndarray] = {}

    def execute(path: Path, how: str, values: list[np.ndarray]) -> list[np.ndarray | None]:
        try:
            if how == "reference":
                res = reference.run(path, values, bounds=precise)
                if isinstance(res, reference.ReferenceResult):
                    bounds.update(res.bounds)
                    return list(res.outputs)
                return list(res)
            if how == "interpreter":
                return list(interp_run(path, values))
            if executor is not None and how == executor.name:
                return list(executor.run(path, values))
            return [None] * len(graph.main.outputs)  # an executor this call was not given
        except TosaError:
            return [None] * len(graph.main.outputs)

    actual = execute(directory / str(manifest["tosa_file"]), engine, inputs)
    against_file = manifest.get("against_file")
    if against_file:
        expected = execute(directory / str(against_file), engine, other_inputs)
    else:
        same = str(manifest.get("against", "reference"))
        expected = execute(directory / str(manifest["tosa_file"]), same if same in _SAME_GRAPH else "reference", inputs)
    verdicts: list[Verdict | None] = []
    op = graph.main.operators[-1]
    for name, e, a in zip(graph.main.outputs, expected, actual, strict=True):
        if e is None or a is None:
            verdicts.append(None)
            continue
        decl = graph.main.tensors[name]
        verdicts.append(compare(e, a, op=op, block=graph.main, dtype=decl.dtype, bounds=bounds.get(name)))
    return verdicts, expected, actual


def run_repro(directory: str | os.PathLike, executor: Executor | None = None) -> list[Verdict | None]:
    """Re-run a repro written by :meth:`DiffReport.write_repro` with both executors and compare.

    Returns one verdict per output (``None`` when an executor failed). A repro of a diff whose
    engine was an :class:`Executor` needs that executor again (``executor=``).

    >>> [v.status for v in run_repro("repro")]   # doctest: +SKIP
    ['mismatch']
    """
    directory = Path(directory)
    manifest = json.loads((directory / "repro.json").read_text())
    verdicts, _, _ = _execute_repro(directory, manifest, executor)
    return verdicts


def _other_op_index(report: Any, target: Any) -> int | None:
    """The index of the other graph's operator that computes ``target`'s outputs (a ``DiffReport``
    against another graph), or None."""
    other = report.other_graph
    if other is None:
        return None
    wanted = {t.other for t in target.outputs if t.other}
    for i, op in enumerate(other.main.operators):
        if wanted & set(op.outputs):
            return i
    return None


def write_repro(report: Any, target: Any, directory: str | os.PathLike) -> Path:
    """Write the one-operator repro of ``target`` (an ``OpDiff`` of ``report``, a ``DiffReport``)
    into ``directory``; see :meth:`DiffReport.write_repro` for the files. Returns the directory."""
    self = report
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    source_op = self.graph.main.operators[target.index]
    # the operator's inputs as this execution computed them (where the local check was made);
    # the other graph's operator gets the same values where its tensors match ours
    values = {**self.expected, **self.actual} if self.other_graph is None else dict(self.actual)
    one = extract_operator(self.graph, target.index, values)
    (out / "repro.tosa").write_bytes(_to_bytes(one))
    inputs = _write_inputs(out, one.main, values, "input")
    other_inputs: list[dict[str, object]] = []
    other_one = None
    if self.other_graph is not None:
        other_index = _other_op_index(self, target)
        if other_index is not None:
            theirs = {**self.expected, **self.local_inputs}
            other_one = extract_operator(self.other_graph, other_index, theirs)
            (out / "against.tosa").write_bytes(_to_bytes(other_one))
            other_inputs = _write_inputs(out, other_one.main, theirs, "against-input")
    block = one.main
    manifest: dict[str, object] = {
        "op": source_op.op,
        "index": target.index,
        "location": source_op.location,
        "source": self.source,
        "against": _same_graph_key(self.against) if self.other_graph is None else self.against,
        "engine": self.engine,
        # a local verdict was made against the precise reference model: reproduce that
        "precise": self.precise or any(t.local is not None for t in target.outputs),
        "tosa_file": "repro.tosa",
        "against_file": "against.tosa" if other_one is not None else None,
        "inputs": inputs,
        "against_inputs": other_inputs,
        "outputs": [
            {"name": n, "dtype": block.tensors[n].dtype, "shape": list(block.tensors[n].shape)}
            for n in block.outputs
        ],
        "attributes": _jsonable(target.attributes),
        "diff_verdicts": [t.to_dict() for t in target.outputs],
    }
    compliance = {
        n: compliance_config(source_op, block.tensors[n].dtype, block.tensors[n].shape, block=block)
        for n in block.outputs
    }
    manifest["compliance"] = compliance
    (out / "repro.json").write_text(json.dumps(manifest, indent=2, default=str))
    verdicts, expected, actual = _execute_repro(out, manifest, self.executor)
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        dt = block.tensors[block.outputs[i]].dtype
        if e is not None:
            _save(out / f"expected-{i}.npy", e, dt if isinstance(e, tuple) or e.dtype != np.float64 else "FP64")
        if a is not None:
            _save(out / f"actual-{i}.npy", a, dt)
    manifest["repro_verdicts"] = [v.to_dict() if v is not None else None for v in verdicts]
    manifest["reproduces"] = any(v is not None and v.status == MISMATCH for v in verdicts)
    (out / "repro.json").write_text(json.dumps(manifest, indent=2, default=str))
    desc = {
        "tosa_file": "repro.tosa",
        "ifm_name": [i["name"] for i in inputs],
        "ifm_file": [i["file"] for i in inputs],
        "ofm_name": list(block.outputs),
        "ofm_file": [f"ref-result-{i}.npy" for i in range(len(block.outputs))],
        "expected_failure": False,
        "meta": {"compliance": {"version": "1.0", "tensors": compliance}},
    }
    (out / "desc.json").write_text(json.dumps(desc, indent=1))
    return out
