"""Run a VGF program with the ML SDK scenario runner on a Vulkan device under the ML emulation layer.

:func:`run` fills the program's scenario template with ``.npy`` files of the inputs (graph order)
and file names for the outputs, runs ``scenario-runner --scenario S --output DIR`` in a
temporary directory with the private environment of :func:`vgf._runtime.runtime_env` (Graph
and Tensor emulation layers on whatever Vulkan device the loader finds; on a machine without
a GPU, Mesa's CPU driver lavapipe), and reads the outputs back in the numpy form
:func:`tosa_verify.run` returns. :func:`capture` does the same on a copy of the graph whose
every computed tensor is also a graph output (as :mod:`tosa_verify.reference` does for the
reference model), so :func:`tosa_verify.diff` can compare VGF with the interpreter operator
by operator (:class:`VgfExecutor`).
"""

from __future__ import annotations

import copy
import json
import tempfile
import threading
from functools import cache
from pathlib import Path

import numpy as np

from tosa_verify.dtypes import dtype_info, to_reference_form, to_working
from tosa_verify.errors import TosaError
from tosa_verify.graph import Block, Graph, Operator, Region, Tensor, load
from tosa_verify.interpreter import Inputs, RunResult, Source, bind_inputs
from tosa_verify.reference import capture_graph
from tosa_verify.writer import to_flatbuffer

from ._runtime import APT_PACKAGES, PIP_PACKAGES, run_tool, runtime_env, tool_path, vulkan_loader
from .aliases import Alias, aliases, rebuild, sources_of_outputs
from .compiler import INPUT_PLACEHOLDER, OUTPUT_PLACEHOLDER, VgfProgram, compile_tosa
from .errors import VgfError, VgfRuntimeError, VgfUnavailableError

__all__ = ["VgfExecutor", "available", "capture", "run"]

_probe_lock = threading.Lock()


def _filled_scenario(program: VgfProgram, work: Path, n_in: int, n_out: int) -> dict:
    """The program's scenario template with the graph and tensor files of ``work`` filled in."""
    scenario = copy.deepcopy(program.scenario_template)
    names = {INPUT_PLACEHOLDER.format(k): f"in-{k}.npy" for k in range(n_in)}
    names.update({OUTPUT_PLACEHOLDER.format(k): f"out-{k}.npy" for k in range(n_out)})
    for resource in scenario.get("resources", []):
        if "graph" in resource:
            resource["graph"]["src"] = "graph.vgf"
        tensor = resource.get("tensor")
        if tensor:
            for key in ("src", "dst"):
                if tensor.get(key) in names:
                    tensor[key] = names[tensor[key]]
    return scenario


def _npy_form(value: np.ndarray, dtype: str) -> np.ndarray:
    """The array the scenario runner reads for a tensor of TOSA ``dtype``."""
    arr = np.ascontiguousarray(value)
    info = dtype_info(dtype)
    if info.name == "BOOL":
        return arr.astype(np.uint8)  # VK_FORMAT_R8_BOOL_ARM: one byte per element
    if info.name in ("BF16", "FP8E4M3", "FP8E5M2"):
        return arr.view(np.uint16 if info.name == "BF16" else np.uint8)
    return arr


def _from_npy(value: np.ndarray, dtype: str, shape: tuple[int, ...], name: str) -> np.ndarray:
    """An output file's array in the form :func:`tosa_verify.run` returns for ``dtype``."""
    info = dtype_info(dtype)
    arr = np.asarray(value)
    if arr.size != int(np.prod(shape, dtype=np.int64)):
        raise VgfRuntimeError(f"scenario-runner: output {name!r} has {arr.size} elements, "
                              f"the graph declares {list(shape)}", step="scenario-runner")
    arr = arr.reshape(shape)
    if info.name == "BOOL":
        return arr.astype(bool)
    want = info.working
    if arr.dtype != want:
        if arr.dtype.itemsize != want.itemsize:
            raise VgfRuntimeError(f"scenario-runner: output {name!r} came back as {arr.dtype}, "
                                  f"expected {info.name} ({want})", step="scenario-runner")
        arr = arr.view(want)
    return to_reference_form(to_working(arr, dtype, what=f"output {name!r}"), dtype)


def _program(source: VgfProgram | Source) -> VgfProgram:
    return source if isinstance(source, VgfProgram) else compile_tosa(source)


def run(program: VgfProgram | Source, inputs: Inputs, *, timeout: float = 900.0) -> list[np.ndarray]:
    """Run a VGF program (or a TOSA graph, compiled first) on ``inputs``; outputs in graph order.

    Same contract as :func:`tosa_verify.run`: ``inputs`` is a list in graph input order or a dict
    by tensor name, outputs come back in the numpy dtypes the interpreter returns. Raises
    :class:`~vgf.errors.VgfRuntimeError` (step ``scenario-runner`` and the runner's message) when
    the run fails, crashes or takes longer than ``timeout`` seconds, and
    :class:`~vgf.errors.VgfUnavailableError` when the tool chain or the Vulkan loader is missing.

    Example:
        >>> import numpy as np, vgf
        >>> outs = vgf.run("model.tosa", [np.zeros((1, 8, 8, 1), np.int8)])   # doctest: +SKIP
    """
    program = _program(program)
    block = program.graph.main
    values = bind_inputs(block, inputs)
    runner = tool_path("scenario-runner")
    if vulkan_loader() is None:
        raise VgfUnavailableError(f"no Vulkan loader (libvulkan.so.1): apt-get install {APT_PACKAGES}",
                                  step="setup")
    env = runtime_env()
    with tempfile.TemporaryDirectory(prefix="tosa-verify-vgfr-") as tmp:
        work = Path(tmp)
        (work / "out").mkdir()
        (work / "graph.vgf").write_bytes(program.vgf)
        for k, (tensor, value) in enumerate(zip(program.inputs, values, strict=True)):
            np.save(work / f"in-{k}.npy", _npy_form(to_reference_form(value, tensor.dtype), tensor.dtype))
        scenario = _filled_scenario(program, work, len(program.inputs), len(program.outputs))
        (work / "scenario.json").write_text(json.dumps(scenario, indent=1))
        log = run_tool("scenario-runner", [runner, "--scenario", "scenario.json", "--output", "out"],
                       error=VgfRuntimeError, timeout=timeout, env=env, cwd=work)
        results = []
        for k, tensor in enumerate(program.outputs):
            path = work / "out" / f"out-{k}.npy"
            if not path.is_file():
                path = work / f"out-{k}.npy"
            if not path.is_file():
                raise VgfRuntimeError(f"scenario-runner: wrote no file for output {tensor.name!r} "
                                      f"({log.strip().splitlines()[-1] if log.strip() else 'no output'})",
                                      step="scenario-runner", tool_output=log)
            results.append(_from_npy(np.load(path, allow_pickle=False), tensor.dtype, tensor.shape, tensor.name))
    return results


def _capture_graph(graph: Graph) -> tuple[Graph, list[str], list[Alias], list[tuple[str, str]]]:
    """The graph with every computed tensor but the outputs of view operators as extra outputs.

    Returns the rewritten graph, its outputs in order and the view operators whose outputs are
    left out. Why: model-converter 0.11.0 compiles a RESHAPE and an elementwise identity (MUL by
    ones, ADD or SUB of zeros) as a view of the input, and when the input and the output are both
    graph outputs one of them comes back unwritten (zeros) -- :mod:`vgf.aliases`, docs/vgf.md.
    Such an operator moves no values, so its output is rebuilt from its captured input; a wrong
    value on VGF still shows at the first consumer. When a graph output is itself such a view,
    the tensors it is a view of are left out instead and copied from it (the fourth value).
    """
    captured, names = capture_graph(graph)
    block = captured.main
    keep = set(graph.main.outputs)
    views = [a for a in aliases(block) if a.op.outputs[0] not in keep]
    backward = sources_of_outputs(block, list(graph.main.outputs))
    skipped = {a.op.outputs[0] for a in views} | {name for name, _ in backward}
    names = [n for n in names if n not in skipped]
    new_block = Block(block.name, block.operators, block.tensors, block.inputs, names, block.shapes)
    regions = [Region(captured.regions[0].name, [new_block, *captured.regions[0].blocks[1:]]),
               *captured.regions[1:]]
    return Graph(version=captured.version, regions=regions), names, views, backward


def capture(source: Source, inputs: Inputs, *, timeout: float = 900.0) -> RunResult:
    """Run ``source`` on VGF with every tensor an operator of the entry block computes captured.

    The graph is rewritten so those tensors are also graph outputs (as
    :func:`tosa_verify.reference.capture_graph` does), compiled and run once; ``tensors`` also
    holds the inputs and constants (their values are known). Outputs of RESHAPEs inside the
    graph and of elementwise identities are not made outputs (see :func:`_capture_graph`):
    their values are rebuilt from their inputs'. The rewritten graph may compile to a different VGF than the original (the
    converter cannot fuse an operator whose output is a graph output), so use :func:`run` for
    the outputs of the deployed program.

    Example:
        >>> result = capture("model.tosa", [x])                    # doctest: +SKIP
        >>> sorted(result.tensors)[:2]                             # doctest: +SKIP
        ['conv2d', 'input']
    """
    graph = load(source)
    block = graph.main
    values = bind_inputs(block, inputs)
    captured, names, views, backward = _capture_graph(graph)
    outputs = run(compile_tosa(to_flatbuffer(captured)), values, timeout=timeout)
    tensors: dict[str, np.ndarray] = {}
    for name, value in zip(block.inputs, values, strict=True):
        tensors[name] = to_reference_form(value, (block.tensors.get(name) or block.shapes[name]).dtype)
    for name, decl in {**block.shapes, **block.tensors}.items():
        if decl.data is not None and name not in tensors:
            tensors[name] = to_reference_form(np.asarray(decl.data), decl.dtype)
    tensors.update(zip(names, outputs, strict=True))
    for name, view_of_it in backward:  # nearest first: each fills the next one up the chain
        tensors[name] = np.reshape(tensors[view_of_it], block.tensors[name].shape)
    for view in views:  # in graph order: a view of a view finds its input filled in
        source_value, decl = tensors.get(view.source), block.tensors.get(view.op.outputs[0])
        if source_value is not None and decl is not None:
            tensors[view.op.outputs[0]] = rebuild(view, source_value, tuple(decl.shape))
    return RunResult(outputs=outputs[:len(block.outputs)], tensors=tensors)


class VgfExecutor:
    """The VGF execution as an engine of :func:`tosa_verify.diff` (``engine=VgfExecutor()``).

    ``capture(graph, inputs)`` returns every tensor by name (see :func:`capture`).

    Example:
        >>> import tosa_verify
        >>> report = tosa_verify.diff("model.tosa", inputs, engine=VgfExecutor(),
        ...                           against="interpreter")              # doctest: +SKIP
        >>> report.ok                                                     # doctest: +SKIP
        True
    """

    name = "VGF"

    def __init__(self, timeout: float = 900.0) -> None:
        self.timeout = timeout

    def capture(self, graph: Source, inputs: Inputs) -> dict[str, np.ndarray]:
        """Every tensor of ``graph``'s entry block on VGF, by name (reference numpy form)."""
        return capture(graph, inputs, timeout=self.timeout).tensors

    def run(self, graph: Source, inputs: Inputs) -> list[np.ndarray]:
        """The outputs of ``graph`` on VGF, in graph order."""
        return run(graph, inputs, timeout=self.timeout)


def _probe_graph() -> Graph:
    """A one-operator INT32 ADD graph: the smallest thing that exercises the whole chain."""
    tensors = {n: Tensor(n, (1, 4), "INT32") for n in ("a", "b", "c")}
    block = Block("main", [Operator("ADD", {}, ["a", "b"], ["c"])], tensors, ["a", "b"], ["c"])
    return Graph((1, 0, 0, False), [Region("main", [block])])


@cache
def _probe() -> tuple[bool, str]:
    try:
        for tool in ("model-converter", "vgf_dump", "scenario-runner"):
            tool_path(tool)
        runtime_env()
        if vulkan_loader() is None:
            return False, f"no Vulkan loader (libvulkan.so.1): apt-get install {APT_PACKAGES}"
        a = np.arange(4, dtype=np.int32).reshape(1, 4)
        out = run(to_flatbuffer(_probe_graph()), [a, a * 10], timeout=120)[0]
    except VgfUnavailableError as exc:
        return False, str(exc)
    except VgfError as exc:
        hint = (f"; install a Vulkan driver (apt-get install {APT_PACKAGES})"
                if "device" in str(exc).lower() or "vulkan" in str(exc).lower() else "")
        return False, f"the VGF probe failed: {exc}{hint}"
    except TosaError as exc:
        return False, f"the VGF probe failed: {exc}"
    if not np.array_equal(out, a * 11):
        return False, f"the VGF probe computed {out.tolist()} for 11 * {a.tolist()}"
    return True, "ok"


def available() -> tuple[bool, str]:
    """Whether TOSA can be compiled to VGF and run here, and if not, what to install.

    Checks the ML SDK executables and the emulation layer (``pip install`` the test extra), the
    Vulkan loader, then compiles and runs a one-operator graph on the Vulkan device (the
    answer is kept for the process; the first call takes a second or two).

    Example:
        >>> ok, reason = available()
        >>> isinstance(ok, bool) and isinstance(reason, str)
        True
    """
    with _probe_lock:
        return _probe()


#: What to install (for messages elsewhere).
INSTALL_HINT = f"pip install {PIP_PACKAGES}; apt-get install {APT_PACKAGES}"
