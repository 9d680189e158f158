"""Run a TOSA graph with the official reference model (``tosa_reference_model`` from tosa-tools).

:func:`run` has the same contract as :func:`tosa_verify.run` (inputs as a list or a dict by name,
outputs in graph order in the numpy dtypes the reference model uses), so the two executors are
interchangeable in tests, diffs and fuzzing.

Two back ends drive the reference model:

``"cli"`` (the default, ``backend="auto"``)
    the bundled ``tosa_reference_model`` executable, with a ``desc.json`` and ``.npy`` files in a
    temporary directory. It handles every dtype (INT4/INT48 inputs and outputs), precise (FP64)
    mode, bounds files for dot-product compliance, and ``--terminate_early`` so that a failed
    REQUIRE cannot go on to crash the process. One run costs a few milliseconds.
``"python"``
    ``tosa_reference_model.run`` in process. It cannot take or return INT4/INT48 tensors (an
    INT48 output comes back as an empty float64 array with status VALID), mis-sizes FP64 outputs
    in precise mode, and a failed REQUIRE can continue into undefined behaviour (an INTDIV by
    zero raises SIGFPE and kills the Python process). It is used only when asked for, and even
    then such graphs fall back to the CLI.

Capture (``capture=True``) rewrites the graph so every tensor an operator of the entry block
produces is also a block output, re-serializes it with :mod:`tosa_verify.writer`, and reads all
values back; graph inputs and constants are filled in from the inputs and the declarations.

Status mapping: reference ``ERROR`` -> :class:`~tosa_verify.errors.TosaValidationError`,
``UNPREDICTABLE`` (a REQUIRE failed) -> :class:`~tosa_verify.errors.TosaRequireError`.

>>> import numpy as np
>>> from tosa_verify import reference
>>> outs = reference.run("add.tosa", [np.ones((1, 4), np.int32)] * 2)   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from .dtypes import dtype_info, reference_shape, to_reference_form
from .errors import TosaError, TosaRequireError, TosaUnsupportedError, TosaValidationError
from .graph import Block, Graph, Tensor, load
from .interpreter import Inputs, RunResult, Source, bind_inputs
from .writer import to_flatbuffer

__all__ = [
    "ReferenceResult",
    "capture_graph",
    "reference_binary",
    "run",
]

#: How the reference model's npy files spell dtypes the numpy default writer cannot express.
_NPY_DESCR = {"BF16": "<V2", "FP8E4M3": "<V1", "FP8E5M2": "|u1", "FP8UE8M0": "<V1"}
#: Dtypes ``tosa_reference_model.run`` cannot exchange.
_PYTHON_UNSUPPORTED = {"INT4", "INT48", "SHAPE"}
#: Lines a gdb backtrace leaves in the log (when TOSA_MODEL_NO_BACKTRACE is not honoured).
_GDB_NOISE = ("thread", "Thread", "gdb", "Undefined command", "wait4", "Convenience variable", "Inferior")
#: Ops whose outputs are not captured through extra block outputs (their values are known).
_CONST_OPS = {"CONST", "CONST_SHAPE"}


@dataclass
class ReferenceResult(RunResult):
    """A reference run: outputs, captured tensors (capture mode) and, if asked, bounds.

    ``bounds`` maps output (or, with capture, tensor) names to the reference model's
    dot-product bounds values (precise mode with absolute inputs), used by the compliance
    verifier for DOT_PRODUCT and ABS_ERROR modes.
    """

    bounds: dict[str, np.ndarray] = field(default_factory=dict)
    log: str = ""


@cache
def reference_binary() -> str:
    """Path of the native ``tosa_reference_model`` executable shipped with tosa-tools.

    >>> Path(reference_binary()).name
    'tosa_reference_model'
    """
    candidates: list[Path] = []
    override = os.environ.get("TOSA_REFERENCE_MODEL")
    if override:
        candidates.append(Path(override))
    try:
        from importlib import metadata

        dist = metadata.distribution("tosa-tools")
        candidates.append(Path(str(dist.locate_file("bin/tosa_reference_model"))))
    except Exception:  # noqa: BLE001 - metadata missing: try the other places
        pass
    candidates.append(Path(sys.executable).parent / "tosa_reference_model")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    import shutil

    found = shutil.which("tosa_reference_model")
    if found:
        return found
    raise TosaUnsupportedError("tosa_reference_model executable not found (install tosa-tools)")


def _decl(block: Block, name: str) -> Tensor:
    decl = block.tensors.get(name) or block.shapes.get(name)
    if decl is None:
        raise TosaValidationError(f"tensor {name!r} is not declared in block {block.name!r}")
    return decl


def capture_graph(graph: Graph) -> tuple[Graph, list[str]]:
    """Return a copy of ``graph`` whose entry block also outputs every produced tensor.

    The second value lists the block outputs of the rewritten graph in order (the original
    outputs first). SHAPE values and outputs of CONST/CONST_SHAPE are left out (their values are
    in the declarations).

    >>> g2, outs = capture_graph(load("model.tosa"))   # doctest: +SKIP
    """
    block = graph.main
    outputs = list(block.outputs)
    seen = set(outputs) | set(block.inputs)
    for op in block.operators:
        if op.op in _CONST_OPS:
            continue
        for name in op.outputs:
            if name in seen or name in block.shapes:
                continue
            decl = block.tensors.get(name)
            if decl is None or decl.dtype == "SHAPE":
                continue
            seen.add(name)
            outputs.append(name)
    new_block = Block(
        name=block.name,
        operators=block.operators,
        tensors=block.tensors,
        inputs=block.inputs,
        outputs=outputs,
        shapes=block.shapes,
    )
    regions = list(graph.regions)
    first = regions[0]
    regions[0] = type(first)(name=first.name, blocks=[new_block, *first.blocks[1:]])
    return Graph(version=graph.version, regions=regions), outputs


def _write_npy(path: Path, value: np.ndarray, dtype: str) -> None:
    """Write ``value`` as the reference model expects ``dtype`` (custom descr for BF16/FP8)."""
    descr = _NPY_DESCR.get(dtype)
    if descr is None:
        np.save(path, np.ascontiguousarray(value))
        return
    arr = np.ascontiguousarray(value)
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(arr.shape)!r}, }}"
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00")
        fh.write(len(header).to_bytes(2, "little"))
        fh.write(header.encode("latin1"))
        fh.write(arr.tobytes())


def _write_input(path: Path, value: np.ndarray, dtype: str) -> None:
    """Write an input file; a block-scaled input's scales go to ``<stem>_scale.npy`` beside it,
    where the CLI looks for them."""
    info = dtype_info(dtype)
    if not info.block:
        _write_npy(path, to_reference_form(value, dtype), dtype)
        return
    values, scales = to_reference_form(value, dtype)
    _write_npy(path, values, info.value)
    _write_npy(path.with_name(f"{path.stem}_scale.npy"), scales, info.scale)


def _read_output(path: Path, dtype: str, precise: bool):
    """An output file in the in-process API's form; a block-scaled one is the pair (values,
    scales), its scales read from ``<stem>_scale.npy``."""
    info = dtype_info(dtype)
    if not info.block:
        return _from_cli(np.load(path), dtype, precise)
    scales = np.load(path.with_name(f"{path.stem}_scale.npy"))
    return _from_cli(np.load(path), info.value, precise), _from_cli(scales, info.scale, precise)


def _from_cli(value: np.ndarray, dtype: str, precise: bool) -> np.ndarray:
    """Normalize an output read from the CLI to the in-process API's numpy form."""
    info = dtype_info(dtype)
    if precise and info.is_float:
        return value  # FP64
    if info.name == "MXINT8" and value.dtype == np.float64:
        # precise mode writes MXINT8 decoded (q / 64); give back the int8 bits as uint8
        return np.round(value * 64.0).astype(np.int8).view(np.uint8)
    if info.name == "FP8E5M2" and value.dtype == np.uint8:
        return value.view("V1")
    if info.name == "BF16" and value.dtype.kind == "V":
        return value.view("V2")
    if info.name in ("FP8E4M3", "FP8UE8M0") and value.dtype.kind == "V":
        return value.view("V1")
    return value


def _status_error(status: str, log: str, graph_name: str) -> TosaError:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    keep = [
        ln for ln in lines
        if not ln.startswith(("#", "[", "WARNING: Different", "WARNING AT", "Graph result"))
        and not any(noise in ln for noise in _GDB_NOISE)
    ]
    detail = "; ".join(keep[-4:])[-600:] or "no diagnostic"
    if status == "UNPREDICTABLE":
        return TosaRequireError(
            f"reference model: a REQUIRE failed in {graph_name}, the result is unpredictable ({detail})",
            condition=detail,
        )
    return TosaValidationError(
        f"reference model rejected {graph_name} as invalid (ERROR status): {detail}", condition=detail
    )


def _run_cli(
    data: bytes,
    block: Block,
    values: list[np.ndarray],
    outputs: list[str],
    *,
    precise: bool,
    bounds: bool,
) -> tuple[list[np.ndarray], dict[str, np.ndarray], str]:
    with tempfile.TemporaryDirectory(prefix="tosa-ref-") as tmp:
        work = Path(tmp)
        (work / "out").mkdir()
        (work / "graph.tosa").write_bytes(data)
        ifm_files = []
        for i, (name, value) in enumerate(zip(block.inputs, values, strict=True)):
            fname = f"in-{i}.npy"
            _write_input(work / fname, value, _decl(block, name).dtype)
            ifm_files.append(fname)
        ofm_files = [f"out-{i}.npy" for i in range(len(outputs))]
        desc: dict[str, object] = {
            "tosa_file": "graph.tosa",
            "ifm_name": list(block.inputs),
            "ifm_file": ifm_files,
            "ofm_name": outputs,
            "ofm_file": ofm_files,
            "expected_failure": False,
        }
        if bounds:
            desc["test_requirements"] = {"bounds_file_required": True}
        (work / "desc.json").write_text(json.dumps(desc))
        cmd = [
            reference_binary(),
            "--test_desc", str(work / "desc.json"),
            "--flatbuffer_dir", str(work),
            "--output_dir", str(work / "out"),
            f"--precise_mode={1 if (precise or bounds) else 0}",
            "--terminate_early",
        ]
        env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")  # no gdb backtrace on errors (~1 s)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, check=False, env=env)
        log = proc.stdout + proc.stderr
        if proc.returncode == 1:
            raise _status_error("UNPREDICTABLE", log, "the graph")
        if proc.returncode == 2:
            raise _status_error("ERROR", log, "the graph")
        if proc.returncode != 0:
            raise TosaError(
                f"reference model exited with code {proc.returncode}: {log.strip()[-600:] or 'no output'}"
            )
        results = []
        bnd: dict[str, np.ndarray] = {}
        for name, fname in zip(outputs, ofm_files, strict=True):
            path = work / "out" / fname
            if not path.exists():
                raise TosaError(f"reference model wrote no file for output {name!r}: {log.strip()[-400:]}")
            results.append(_read_output(path, _decl(block, name).dtype, precise or bounds))
            bpath = work / "out" / f"bounds_{fname}"
            if bpath.exists():
                bnd[name] = np.load(bpath)
        return results, bnd, log


@contextlib.contextmanager
def _redirect_native_output() -> Iterator[list[str]]:
    """Capture what native code writes to fds 1 and 2 (the reference model logs there)."""
    sink: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield sink
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            sink.append(tmp.read().decode("utf8", "replace"))


@contextlib.contextmanager
def no_gdb_backtrace() -> Iterator[None]:
    """The reference model attaches gdb to its own process to print a backtrace when a graph
    fails an ERROR_IF, unless ``TOSA_MODEL_NO_BACKTRACE`` is set: seconds of CPU (gdb reads the
    symbols of every library loaded, torch's included) for a status we already get. Set for the
    call only, so the caller's environment is left as it was.

    Example:
        >>> import os
        >>> with no_gdb_backtrace():
        ...     os.environ["TOSA_MODEL_NO_BACKTRACE"]
        '1'
    """
    before = os.environ.get("TOSA_MODEL_NO_BACKTRACE")
    os.environ["TOSA_MODEL_NO_BACKTRACE"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOSA_MODEL_NO_BACKTRACE"]
        else:
            os.environ["TOSA_MODEL_NO_BACKTRACE"] = before


def survives_in_process(graph: Graph) -> bool:
    """Whether ``tosa_reference_model.run`` (in this process) can be given ``graph`` safely: a
    graph whose run fails an ERROR_IF after loading (a tensor with a zero dimension fails when
    the reference model allocates it) ends the calling process with a segmentation fault, where
    the executable (:func:`run`'s ``"cli"`` backend) reports the error like any other.

    Example:
        >>> from tosa_verify.graph import Block, Graph, Region, Tensor
        >>> block = Block("main", [], {"x": Tensor("x", (2, 0), "INT8")}, ["x"], ["x"])
        >>> survives_in_process(Graph((1, 0, 0, False), [Region("main", [block])]))
        False
    """
    return not any(decl.dtype != "SHAPE" and 0 in tuple(decl.shape)
                   for region in graph.regions for block in region.blocks for decl in block.tensors.values())


def _run_python(
    data: bytes, block: Block, values: list[np.ndarray], outputs: list[str]
) -> tuple[list[np.ndarray], str]:
    import tosa_reference_model as trm

    ref_inputs = [to_reference_form(v, _decl(block, n).dtype) for n, v in zip(block.inputs, values, strict=True)]
    with _redirect_native_output() as sink, no_gdb_backtrace():
        try:
            results, status = trm.run(data, ref_inputs)
        except ValueError as exc:
            results, status = None, exc
    log = sink[0] if sink else ""
    if isinstance(status, ValueError):
        raise TosaValidationError(f"reference model could not load or run the graph: {status}; {log.strip()[-400:]}")
    name = getattr(status, "name", str(status))
    if name.endswith("UNPREDICTABLE"):
        raise _status_error("UNPREDICTABLE", log, "the graph")
    if name.endswith("ERROR"):
        raise _status_error("ERROR", log, "the graph")
    return list(results), log


def run(
    source: Source,
    inputs: Inputs,
    *,
    capture: bool = False,
    precise: bool = False,
    bounds: bool = False,
    backend: str = "auto",
) -> list[np.ndarray] | ReferenceResult:
    """Run a TOSA graph with the reference model; same contract as :func:`tosa_verify.run`.

    ``precise=True`` computes floating point in FP64 (float outputs come back as float64);
    ``bounds=True`` (implies precise) also returns the dot-product bounds values in
    ``ReferenceResult.bounds``; a :class:`ReferenceResult` is then returned even without capture.
    ``backend`` is ``"auto"``/``"cli"`` (the executable) or ``"python"`` (in process, where the
    dtypes allow it). Raises :class:`TosaValidationError` on reference status ERROR and
    :class:`TosaRequireError` on UNPREDICTABLE.

    >>> import numpy as np
    >>> from tosa_verify import reference
    >>> reference.run("add.tosa", {"a": np.ones(4, np.int32), "b": np.ones(4, np.int32)})  # doctest: +SKIP
    [array([2, 2, 2, 2], dtype=int32)]
    """
    if backend not in ("auto", "cli", "python"):
        raise ValueError(f"backend must be 'auto', 'cli' or 'python', not {backend!r}")
    graph = load(source)
    block = graph.main
    values = bind_inputs(block, inputs)
    n_outputs = len(block.outputs)
    if capture:
        run_graph, outputs = capture_graph(graph)
        data = to_flatbuffer(run_graph)
    else:
        outputs = list(block.outputs)
        # a Graph object may have been edited after parsing: its raw bytes are not trusted
        data = graph.raw if graph.raw and not isinstance(source, Graph) else to_flatbuffer(graph)
    dtypes = {_decl(block, n).dtype for n in [*outputs, *block.inputs]}
    use_python = (
        backend == "python" and not precise and not bounds and not (dtypes & _PYTHON_UNSUPPORTED)
        and not any(dtype_info(d).block for d in dtypes)  # its bindings refuse block-scaled inputs
        and survives_in_process(graph)
    )
    bnd: dict[str, np.ndarray] = {}
    if use_python:
        results, log = _run_python(data, block, values, outputs)
    else:
        results, bnd, log = _run_cli(data, block, values, outputs, precise=precise, bounds=bounds)
    for name, value in zip(outputs, results, strict=True):
        decl = _decl(block, name)
        # packed FP4/FP6 outputs come back with a shorter innermost dimension (not in precise mode)
        if isinstance(value, tuple):  # block scaled: (values, scales)
            value, decl = value[0], Tensor(name, decl.shape, dtype_info(decl.dtype).value)
        shapes = {tuple(decl.shape), tuple(reference_shape(decl.shape, decl.dtype))}
        if tuple(value.shape) not in shapes and not (value.size == 0 and decl.size == 0):
            raise TosaError(
                f"reference model returned shape {list(value.shape)} for {decl.dtype} tensor {name!r}, "
                f"declared {list(decl.shape)}"
            )
    main_outputs = results[:n_outputs]
    if not capture and not bounds:
        return main_outputs
    tensors: dict[str, np.ndarray] = {}
    if capture:
        for name, value in zip(block.inputs, values, strict=True):
            tensors[name] = _input_form(value, _decl(block, name).dtype, precise or bounds)
        for name, decl in {**block.shapes, **block.tensors}.items():
            if decl.data is not None and name not in tensors:
                tensors[name] = _input_form(decl.data, decl.dtype, precise or bounds)
        for name, value in zip(outputs, results, strict=True):
            tensors[name] = value
    return ReferenceResult(outputs=main_outputs, tensors=tensors, bounds=bnd, log=log)


def _input_form(value: np.ndarray, dtype: str, precise: bool) -> np.ndarray:
    """A known (input or constant) value in the form the reference model would output it."""
    info = dtype_info(dtype)
    if precise and info.is_float:
        return np.asarray(value).astype(np.float64)
    return to_reference_form(np.asarray(value), dtype)
