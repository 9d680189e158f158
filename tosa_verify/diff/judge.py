"""The judge: both executions, the verdicts (global and local), and :func:`diff` itself."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from .. import reference
from ..budget import check_graph_memory
from ..compare import EXACT, MISMATCH, compare
from ..dtypes import dtype_info, to_reference_form, to_working
from ..errors import TosaError, TosaInputError
from ..graph import Block, Graph, Operator, Tensor, load
from ..interpreter import Inputs, Interpreter, Source, bind_inputs
from ._common import (
    _CONST_OPS,
    _FLOAT_DTYPES,
    _LOCAL_SUFFIX,
    _NO_LOCAL_OPS,
    _SAME_GRAPH,
    Executor,
    _decl,
    _short,
)
from .report import DiffReport, OpDiff, TensorDiff
from .repro import _extract_operators, _input_value, _other_op_index, _readable, describe_operator


def _capture_interpreter(graph: Graph, inputs: Inputs) -> tuple[dict[str, np.ndarray], int | None, str]:
    """Run with the interpreter, recording every tensor; stop at the first failing operator."""
    block = graph.main
    values = bind_inputs(block, inputs)
    record: dict[str, np.ndarray] = {}
    for name, value in zip(block.inputs, values, strict=True):
        record[name] = value
    for name, decl in {**block.shapes, **block.tensors}.items():
        if decl.data is not None:
            record[name] = decl.data
    done: list[int] = []

    def hook(index: int, operator: Operator, _ins, outs) -> None:
        done.append(index)
        for name, value in zip(operator.outputs, outs, strict=False):
            record[name] = value

    error_index: int | None = None
    error = ""
    try:
        Interpreter(graph, hook).run_block(block, values, record=record)
    except TosaError as exc:
        error_index = (done[-1] + 1) if done else 0
        op_index = getattr(exc, "op_index", None)
        if isinstance(op_index, int):
            error_index = op_index
        error = f"{type(exc).__name__}: {exc}"
    out = {}
    for name, value in record.items():
        decl = _decl(block, name)
        out[name] = to_reference_form(value, decl.dtype) if decl is not None else value
    return out, error_index, error


def _execute(graph: Graph, inputs: Inputs, engine: str | Executor, *, precise: bool) -> tuple[dict, dict, int | None, str]:
    """Capture all tensors with ``engine``: (values, bounds, failing op index, error text)."""
    check_graph_memory(graph)  # before either engine allocates anything
    if engine == "interpreter":
        values, idx, err = _capture_interpreter(graph, inputs)
        return values, {}, idx, err
    if not isinstance(engine, str):  # an Executor: one run, every tensor captured
        try:
            return dict(engine.capture(graph, inputs)), {}, None, ""
        except TosaError as exc:
            return {}, {}, None, f"{type(exc).__name__}: {exc}"
    try:
        res = reference.run(graph, inputs, capture=True, bounds=precise)
    except TosaError as exc:
        return {}, {}, None, f"{type(exc).__name__}: {exc}"
    return res.tensors, getattr(res, "bounds", {}), None, ""


def _run_local(
    graph: Graph, indices: Sequence[int], values: Mapping[str, np.ndarray], *, precise: bool
) -> tuple[dict, dict]:
    """Re-run operators ``indices`` of ``graph`` alone on ``values`` with the reference model.

    All of them go into one graph (:func:`_extract_operators`) run once (``precise``: in FP64
    with bounds); when that run fails, the group is halved until the failing operators are
    isolated.
    Returns ``(results, failures)``: ``results[index][output name] = (value, bounds or None)``
    and ``failures[index]`` the error text of an operator that could not be re-run.
    """
    results: dict[int, dict[str, tuple[np.ndarray, np.ndarray | None]]] = {}
    failures: dict[int, str] = {}
    block = graph.main

    def attempt(group: Sequence[int]) -> None:
        try:
            batch = _extract_operators(graph, group, values, suffix=_LOCAL_SUFFIX)
            feed = {n: _input_value(values, n, batch.main.tensors[n]) for n in batch.main.inputs}
            res = reference.run(batch, feed, precise=precise, bounds=precise, capture=True)
        except (TosaError, ValueError) as exc:
            if len(group) > 1:
                half = len(group) // 2
                attempt(group[:half])
                attempt(group[half:])
            else:
                failures[group[0]] = f"{type(exc).__name__}: {exc}"[:400]
            return
        assert isinstance(res, reference.ReferenceResult)
        by_name = dict(zip(batch.main.outputs, res.outputs, strict=True))
        for index in group:
            results[index] = {
                name: (by_name[name + _LOCAL_SUFFIX], res.bounds.get(name + _LOCAL_SUFFIX))
                for name in block.operators[index].outputs
            }

    if indices:
        try:
            reference.reference_binary()
        except TosaError as exc:
            failures.update(dict.fromkeys(indices, f"{type(exc).__name__}: {exc}"))
            return results, failures
        attempt(list(indices))
    return results, failures


def _judge_locally(
    graph: Graph,
    other: Graph | None,
    ops: Sequence[OpDiff],
    verdict_of: Mapping[str, TensorDiff],
    actual: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Give the outputs that need one a local verdict (:attr:`TensorDiff.local`).

    An output needs one when it is a float that is not bit-identical to the other execution, or
    an integer that mismatches although some computed input of its operator already differed.
    The operator (against another graph: that graph's matching operator) is re-run alone by the
    reference model (precise with bounds when it has a float output) on this execution's input
    values, and this execution's
    output is compared with that under the operator's compliance mode. All operators go in one
    batch. Returns the local reference results and bounds (by source tensor name) and the values
    fed to the other graph's operators (by other tensor name).
    """
    block = graph.main
    job_graph = graph if other is None else other
    job_block = job_graph.main
    if other is None:
        values: dict[str, np.ndarray] = dict(actual)
    else:  # the other graph's tensors, valued as this execution computed them
        values = {n: expected[n] for n in job_block.inputs if n in expected}
        for td in verdict_of.values():
            if td.other is not None and td.tensor in actual:
                values[td.other] = actual[td.tensor]

    wanted = _wanted_local(block, job_block, other is None, ops, verdict_of, actual, values)

    # float results against the precise reference with bounds; operators without a float output
    # in normal mode (their results do not depend on it, and the reference model's precise mode
    # rejects integer convolutions and pools)
    jobs = sorted({j for _, j, _ in wanted})
    has_float = {j: any((_decl(job_block, n) or Tensor(n, (), "?")).dtype in _FLOAT_DTYPES
                        for n in job_block.operators[j].outputs) for j in jobs}
    results, failures = _run_local(job_graph, [j for j in jobs if has_float[j]], values, precise=True)
    int_results, int_failures = _run_local(job_graph, [j for j in jobs if not has_float[j]], values, precise=False)
    results.update(int_results)
    failures.update(int_failures)
    local_expected, local_bounds = _local_verdicts(job_block, wanted, results, failures, values, actual)
    return local_expected, local_bounds, (values if other is not None else {})


def _wanted_local(block: Block, job_block: Block, same_graph: bool, ops: Sequence[OpDiff],
                  verdict_of: Mapping[str, TensorDiff], actual: Mapping[str, np.ndarray],
                  values: Mapping[str, np.ndarray]) -> list[tuple[TensorDiff, int, str]]:
    """The outputs that need a local verdict: (output, job operator index, job output name).

    Outputs that cannot have one get a ``local_note`` saying why.
    """
    def identical(name: str) -> bool:
        decl = _decl(block, name)
        if (decl is not None and decl.data is not None) or name in block.inputs:
            return True  # constants are the operator's own; graph inputs are fed alike
        td = verdict_of.get(name)
        return td is not None and td.verdict is not None and td.verdict.status == EXACT

    producer = {name: i for i, op in enumerate(job_block.operators) for name in op.outputs}
    wanted: list[tuple[TensorDiff, int, str]] = []  # (output, job operator index, job output name)
    for entry in ops:
        if entry.error:
            continue
        same = all(identical(n) for n in entry.inputs)
        for td in entry.outputs:
            td.inputs_identical = same
            v = td.verdict
            if v is None or v.status == EXACT or td.tensor not in actual:
                continue
            if not td.is_float and (same or v.status != MISMATCH):
                continue
            job_name = td.tensor if same_graph else td.other
            job_index = entry.index if same_graph else producer.get(job_name or "")
            if job_index is None or job_name is None:
                td.local_note = "no operator of the other graph produces the matching tensor"
                continue
            job_op = job_block.operators[job_index]
            if job_op.op in _NO_LOCAL_OPS:
                td.local_note = f"{job_op.op} is not re-run on its own"
                continue
            missing = [n for n in job_op.inputs if n not in values and (_decl(job_block, n) is None
                                                                       or _decl(job_block, n).data is None)]
            if missing:
                td.local_note = f"no value of this execution for input {missing[0]!r} of the operator"
                continue
            wanted.append((td, job_index, job_name))
    return wanted


def _local_verdicts(job_block: Block, wanted: Sequence[tuple[TensorDiff, int, str]], results: Mapping,
                    failures: Mapping[int, str], values: Mapping[str, np.ndarray],
                    actual: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Compare each wanted output with its local re-run; the local results and bounds by tensor."""
    local_expected: dict[str, np.ndarray] = {}
    local_bounds: dict[str, np.ndarray] = {}
    for td, job_index, job_name in wanted:
        if job_index not in results:
            td.local_note = "the reference model could not re-run the operator: " + failures.get(job_index, "?")
            continue
        ref, bnd = results[job_index][job_name]
        job_op = job_block.operators[job_index]
        max_abs = None
        if job_op.op == "RESIZE" and job_op.inputs and job_op.inputs[0] in values:
            first = np.asarray(values[job_op.inputs[0]])
            decl = _decl(job_block, job_op.inputs[0])
            if decl is not None and first.size:
                max_abs = float(np.max(np.abs(to_working(first, decl.dtype).astype(np.float64))))
        td.local = compare(ref, actual[td.tensor], op=job_op, block=job_block, dtype=td.dtype,
                           bounds=bnd, max_abs_input=max_abs)
        local_expected[td.tensor] = ref
        if bnd is not None:
            local_bounds[td.tensor] = bnd
    return local_expected, local_bounds


def _match_inputs(source: Block, other: Block, inputs: Inputs, provenance: Mapping[str, str]) -> Inputs:
    if not isinstance(inputs, Mapping):
        return inputs
    mapped: dict[str, np.ndarray] = {}
    for name in other.inputs:
        if name in inputs:
            mapped[name] = inputs[name]
            continue
        src = next((s for s, o in provenance.items() if o == name and s in inputs), None)
        if src is None:
            raise TosaInputError(f"no input value for {name!r} of the other graph (match by name or provenance)")
        mapped[name] = inputs[src]
    return mapped


def _match_tensor(name: str, op: Operator, other: Graph | None, provenance: Mapping[str, str],
                  other_values: Mapping[str, np.ndarray], location_map: Mapping[str, list[Operator]]) -> tuple[str | None, str]:
    if other is None:
        return (name, "name") if name in other_values else (None, "")
    if name in provenance:
        return provenance[name], "provenance"
    if _decl(other.main, name) is not None:
        return name, "name"
    if op.location and op.location in location_map:
        candidates = location_map[op.location]
        k = op.outputs.index(name)
        for cand in candidates:
            if cand.op == op.op and k < len(cand.outputs):
                return cand.outputs[k], "location"
        cand = candidates[-1]
        if k < len(cand.outputs):
            return cand.outputs[k], "location"
    return None, ""


def diff(
    source: Source,
    inputs: Inputs,
    *,
    against: str | Source = "reference",
    provenance: Mapping[str, str] | None = None,
    precise: bool = False,
    engine: str | Executor = "interpreter",
) -> DiffReport:
    """Run ``source`` and ``against`` with every tensor captured and compare operator by operator.

    ``against="reference"`` runs the reference model on the same graph, ``against="interpreter"``
    the interpreter on the same graph; any other value is a second graph (path, bytes or
    :class:`~tosa_verify.Graph`) run with ``engine``. ``engine`` runs ``source``: ``"interpreter"``,
    ``"reference"`` or an :class:`Executor` (another implementation of TOSA, e.g.
    ``vgf.VgfExecutor()``: ``diff(g, x, engine=VgfExecutor(), against="interpreter")`` compares
    the VGF execution with the interpreter and judges VGF's outputs locally).
    ``provenance`` maps source tensor names to other-graph tensor names (after that, tensors
    match by name, then by operator ``location``). ``precise=True`` runs the reference model in
    FP64 with bounds so the global float verdicts come from the tosa-tools verifier (compliance
    modes); by default they use the ULP fallback of :func:`~tosa_verify.compare.compare`.

    Either way, a float output that is not bit-identical to the other execution (and an integer
    output that mismatches although its inputs already differed) is judged locally: its operator
    is re-run alone by the reference model (precise with bounds for float outputs) on this
    execution's input values, and the verifier decides under the operator's compliance mode.
    :attr:`DiffReport.first_divergence` is the first operator whose local verdict is a mismatch
    (or, without a local check, whose output differs while its inputs were identical); float
    differences that only propagate are reported as ``inherited``. See the module docstring.

    >>> report = diff("model.tosa", [x])          # doctest: +SKIP
    >>> report.first_divergence.op                # doctest: +SKIP
    'RESCALE'
    """
    if isinstance(engine, str) and engine not in ("interpreter", "reference"):
        raise ValueError(f"engine must be 'interpreter', 'reference' or an Executor, not {engine!r}")
    if not isinstance(engine, str) and not callable(getattr(engine, "capture", None)):
        raise ValueError(f"engine {engine!r} has no capture(graph, inputs) method")
    engine_name = engine if isinstance(engine, str) else str(getattr(engine, "name", type(engine).__name__))
    graph = load(source)
    provenance = dict(provenance or {})
    same_graph = isinstance(against, str) and against in _SAME_GRAPH
    other = None if same_graph else load(against)  # type: ignore[arg-type]
    source_name = _name_of(source)
    against_name = _SAME_GRAPH[against] if same_graph else _name_of(against)  # type: ignore[index]

    # Precise (FP64) mode only means something for float tensors, and the reference model's
    # precise mode rejects integer CONV2D/DEPTHWISE_CONV2D/AVG_POOL2D: integer graphs run normally.
    precise = precise and any(
        dtype_info(t.dtype).is_float for r in graph.regions for b in r.blocks for t in b.tensors.values()
    )
    actual, _, err_index, err_text = _execute(graph, inputs, engine, precise=False)
    if same_graph:
        expected, bounds, _, ref_err = _execute(graph, inputs, against, precise=precise)  # type: ignore[arg-type]
    else:
        other_inputs = _match_inputs(graph.main, other.main, inputs, provenance)
        expected, bounds, other_idx, ref_err = _execute(other, other_inputs, engine, precise=False)
        if ref_err and other_idx is not None:
            ref_err = f"other graph, operator {other_idx}: {ref_err}"
    block = graph.main
    ops, verdict_of = _walk(block, other, provenance, actual, expected, bounds, err_index, err_text)

    local_expected, local_bounds, local_inputs = _judge_locally(graph, other, ops, verdict_of, actual, expected)
    report = DiffReport(
        source=source_name, against=against_name, ops=ops, outputs=[], graph=graph, other_graph=other,
        actual=actual, expected=expected, bounds=bounds, precise=precise, engine=engine_name,
        local_expected=local_expected, local_bounds=local_bounds, local_inputs=local_inputs,
        executor=None if isinstance(engine, str) else engine,
    )
    if ref_err:
        report.error = f"{against_name}: {ref_err}"
    elif err_text and err_index is None:
        report.error = f"{engine_name}: {err_text}"
    report.outputs = _output_verdicts(block, other, provenance, actual, expected, verdict_of)
    if other is not None:
        report.constant_differences = _constant_differences(graph, other, provenance)
    _describe_first_divergence(report, graph, other, actual, expected)
    return report


def _walk(block: Block, other: Graph | None, provenance: Mapping[str, str], actual: Mapping[str, np.ndarray],
          expected: Mapping[str, np.ndarray], bounds: Mapping[str, np.ndarray], err_index: int | None,
          err_text: str) -> tuple[list[OpDiff], dict[str, TensorDiff]]:
    """The global verdicts: every operator's outputs matched with the other execution and compared."""
    location_map: dict[str, list[Operator]] = {}
    if other is not None:
        for op in other.main.operators:
            if op.location:
                location_map.setdefault(op.location, []).append(op)

    ops: list[OpDiff] = []
    verdict_of: dict[str, TensorDiff] = {}
    for index, op in enumerate(block.operators):
        if op.op in _CONST_OPS:
            continue
        if err_index is not None and index > err_index:
            break
        outs: list[TensorDiff] = []
        for name in op.outputs:
            decl = _decl(block, name)
            td = TensorDiff(name, decl.dtype if decl else "?", tuple(decl.shape) if decl else ())
            other_name, how = _match_tensor(name, op, other, provenance, expected, location_map)
            td.other, td.matched_by = other_name, how
            if other_name is not None and name in actual and other_name in expected:
                td.verdict = compare(
                    expected[other_name], actual[name], op=op, block=block,
                    dtype=td.dtype if td.dtype != "?" else None, bounds=bounds.get(other_name),
                )
            elif other_name is not None:
                td.note = "value not captured on " + ("both sides" if name not in actual else "the other side")
            outs.append(td)
            verdict_of[name] = td
        entry = OpDiff(index, op.op, op.location, list(op.inputs), outs)
        if err_index == index:
            entry.error = err_text
        ops.append(entry)
    return ops, verdict_of


def _output_verdicts(block: Block, other: Graph | None, provenance: Mapping[str, str],
                     actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                     verdict_of: Mapping[str, TensorDiff]) -> list[TensorDiff]:
    """The graph outputs' verdicts (an output no operator computes is compared here)."""
    outputs: list[TensorDiff] = []
    for name in block.outputs:
        if name in verdict_of:
            outputs.append(verdict_of[name])
        else:
            decl = _decl(block, name)
            td = TensorDiff(name, decl.dtype if decl else "?", tuple(decl.shape) if decl else ())
            other_name, how = _match_tensor(name, Operator("", {}, [], [name]), other, provenance, expected, {})
            td.other, td.matched_by = other_name, how
            if other_name is not None and name in actual and other_name in expected:
                td.verdict = compare(expected[other_name], actual[name], dtype=td.dtype)
            outputs.append(td)
    return outputs


def _describe_first_divergence(report: DiffReport, graph: Graph, other: Graph | None,
                               actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]) -> None:
    """The first diverging operator's attributes (and, against another graph, what differs there)."""
    first = report.first_divergence
    if first is not None:
        first.attributes = describe_operator(graph, first.index, actual)
        if other is not None:
            other_index = _other_op_index(report, first)
            if other_index is not None:
                theirs = describe_operator(other, other_index, expected)
                changed = {k: v for k, v in theirs.items() if first.attributes.get(k) != v}
                if changed:
                    first.attributes["against"] = changed


def _constant_differences(graph: Graph, other: Graph, provenance: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    mine, theirs = graph.main, other.main
    for name, decl in {**mine.tensors, **mine.shapes}.items():
        if decl.data is None:
            continue
        other_decl = _decl(theirs, provenance.get(name, name))
        if other_decl is None or other_decl.data is None:
            continue
        a, b = np.asarray(decl.data), np.asarray(other_decl.data)
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            out[name] = f"{_short(_readable(a, decl.dtype, 16))} vs {_short(_readable(b, other_decl.dtype, 16))}"
    return out


def _name_of(source: object) -> str:
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    if isinstance(source, Graph):
        return "<graph>"
    return "<bytes>"
