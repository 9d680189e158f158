"""Compile a TOSA graph to VGF (Vulkan Graph Format) with the ML SDK model converter.

:func:`compile_tosa` writes the graph into a temporary directory, runs ``model-converter -i
graph.tosa -o graph.vgf`` (the same call, without flags, ExecuTorch's VGF backend makes) and
``vgf_dump --scenario-template`` (the scenario-runner description of the VGF's inputs and
outputs), and returns a :class:`VgfProgram`: the ``.vgf`` bytes, the converter's version and
messages, and the inputs and outputs with their Vulkan formats. Both tools run as child
processes, so a converter crash becomes a :class:`~vgf.errors.VgfCompileError` instead of
ending the caller.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tosa_verify.graph import Graph, load
from tosa_verify.interpreter import Source
from tosa_verify.writer import to_flatbuffer

from ._runtime import run_tool, tool_path
from .aliases import check_outputs
from .errors import VgfCompileError

__all__ = ["VgfProgram", "VgfTensor", "compile_tosa", "converter_version"]

#: Placeholders ``vgf_dump --scenario-template`` leaves for the tensor files.
INPUT_PLACEHOLDER = "TEMPLATE_PATH_TENSOR_INPUT_{}"
OUTPUT_PLACEHOLDER = "TEMPLATE_PATH_TENSOR_OUTPUT_{}"
_CACHE: OrderedDict[tuple, VgfProgram] = OrderedDict()
_CACHE_SIZE = 16


@dataclass(frozen=True)
class VgfTensor:
    """An input or output of a VGF program: its TOSA name, dtype and shape, its Vulkan format.

    Example:
        >>> VgfTensor("x", "INT8", (1, 8, 8, 1), "VK_FORMAT_R8_SINT").to_dict()["format"]
        'VK_FORMAT_R8_SINT'
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    format: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "format": self.format}


@dataclass(frozen=True, eq=False)
class VgfProgram:
    """A TOSA graph compiled to VGF by the ML SDK model converter.

    ``vgf`` is the converter's output file, byte for byte; ``tosa`` the flatbuffer it was made
    from; ``converter_version`` the converter's own version string; ``messages`` what it
    printed besides its success line; ``scenario_template`` the scenario ``vgf_dump`` wrote
    (tensor file names still placeholders); ``inputs``/``outputs`` in graph order.

    Example:
        >>> program = compile_tosa("model.tosa")          # doctest: +SKIP
        >>> program.vgf[:4], program.converter_version    # doctest: +SKIP
        (b'VGF1', '0.11.0')
    """

    vgf: bytes = field(repr=False)
    tosa: bytes = field(repr=False)
    converter_version: str
    messages: tuple[str, ...]
    inputs: tuple[VgfTensor, ...]
    outputs: tuple[VgfTensor, ...]
    scenario_template: dict[str, Any] = field(repr=False)
    compile_seconds: float = 0.0

    @property
    def graph(self) -> Graph:
        """The TOSA graph this program was compiled from."""
        return load(self.tosa)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the ``.vgf`` file (``path`` is a file, or a directory that gets ``model.vgf``).

        Example:
            >>> program.save("out/model.vgf")   # doctest: +SKIP
            PosixPath('out/model.vgf')
        """
        target = Path(path)
        if target.is_dir():
            target = target / "model.vgf"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(self.vgf)
        tmp.replace(target)
        return target

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the VGF itself as size and SHA-256).

        Example:
            >>> program.to_dict()["converter_version"]   # doctest: +SKIP
            '0.11.0'
        """
        return {
            "vgf": {"bytes": len(self.vgf), "sha256": hashlib.sha256(self.vgf).hexdigest()},
            "converter_version": self.converter_version,
            "messages": list(self.messages),
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "compile_seconds": self.compile_seconds,
        }


@cache
def converter_version() -> str:
    """The model converter's version (``model-converter --version``).

    Example:
        >>> converter_version()   # doctest: +SKIP
        '0.11.0'
    """
    out = run_tool("model-converter", [tool_path("model-converter"), "--version"], error=VgfCompileError,
                   timeout=60)
    try:
        return str(json.loads(out[out.index("{"):out.rindex("}") + 1])["version"])
    except (ValueError, KeyError):
        return out.strip().splitlines()[0] if out.strip() else "unknown"


def _tosa_bytes(source: Source) -> tuple[Graph, bytes]:
    graph = load(source)
    # a Graph object may have been edited after parsing: its raw bytes are not trusted
    data = graph.raw if graph.raw and not isinstance(source, Graph) else to_flatbuffer(graph)
    return graph, data


def _template_tensors(template: dict[str, Any], graph: Graph) -> tuple[tuple[VgfTensor, ...], tuple[VgfTensor, ...]]:
    """Match the template's tensor resources to the graph's inputs and outputs, in order."""
    block = graph.main
    found: dict[str, dict[str, Any]] = {}
    for resource in template.get("resources", []):
        tensor = resource.get("tensor")
        if tensor:
            found[str(tensor.get("src") or tensor.get("dst"))] = tensor
    groups = []
    for names, placeholder, what in ((block.inputs, INPUT_PLACEHOLDER, "input"),
                                     (block.outputs, OUTPUT_PLACEHOLDER, "output")):
        tensors = []
        for k, name in enumerate(names):
            entry = found.get(placeholder.format(k))
            decl = block.tensors.get(name) or block.shapes.get(name)
            if entry is None or decl is None:
                raise VgfCompileError(
                    f"vgf_dump: the VGF has no {what} {k} for graph {what} {name!r} "
                    f"({sum(1 for p in found if 'INPUT' in p)} inputs, "
                    f"{sum(1 for p in found if 'OUTPUT' in p)} outputs in the scenario template)",
                    step="vgf_dump")
            tensors.append(VgfTensor(name, decl.dtype, tuple(decl.shape), str(entry.get("format", ""))))
        extra = sum(1 for p in found if p.startswith(placeholder.format("")))
        if extra != len(names):
            raise VgfCompileError(f"vgf_dump: the VGF has {extra} {what}s, the graph {len(names)}", step="vgf_dump")
        groups.append(tuple(tensors))
    return groups[0], groups[1]


def compile_tosa(tosa: Source, *, flags: tuple[str, ...] = (), timeout: float = 600.0) -> VgfProgram:
    """Compile a TOSA graph (path, bytes or :class:`~tosa_verify.Graph`) to VGF.

    ``flags`` go to ``model-converter`` as they are (e.g. ``("--require-static-shape",)``).
    Raises :class:`~vgf.errors.VgfCompileError` naming the step (``model-converter`` or
    ``vgf_dump``) and the tool's message when the converter rejects the graph, crashes or takes
    longer than ``timeout`` seconds; :class:`~vgf.errors.VgfUnavailableError` when the ML SDK
    packages are not installed, and before converting when the graph hits a known converter
    fault (:func:`vgf.aliases.check_outputs`). Results are memoized by the graph's bytes and the flags.

    Example:
        >>> program = compile_tosa("model.tosa")     # doctest: +SKIP
        >>> program.save("model.vgf")                # doctest: +SKIP
        PosixPath('model.vgf')
    """
    graph, data = _tosa_bytes(tosa)
    flags = tuple(str(f) for f in flags)
    key = (hashlib.sha256(data).hexdigest(), flags)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    check_outputs(graph.main)
    converter, dump = tool_path("model-converter"), tool_path("vgf_dump")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tosa-verify-vgfc-") as tmp:
        work = Path(tmp)
        (work / "graph.tosa").write_bytes(data)
        log = run_tool("model-converter", [converter, *flags, "-i", "graph.tosa", "-o", "graph.vgf"],
                       error=VgfCompileError, timeout=timeout, cwd=work)
        if not (work / "graph.vgf").is_file():
            raise VgfCompileError(f"model-converter: wrote no VGF file ({log.strip()[-300:] or 'no output'})",
                                  step="model-converter", tool_output=log)
        vgf = (work / "graph.vgf").read_bytes()
        run_tool("vgf_dump", [dump, "-i", "graph.vgf", "--scenario-template", "-o", "scenario.json"],
                 error=VgfCompileError, timeout=timeout, cwd=work)
        try:
            template = json.loads((work / "scenario.json").read_text())
        except (OSError, ValueError) as exc:
            raise VgfCompileError(f"vgf_dump: unreadable scenario template: {exc}", step="vgf_dump") from None
    seconds = time.perf_counter() - start
    inputs, outputs = _template_tensors(template, graph)
    messages = tuple(ln.strip() for ln in log.splitlines()
                     if ln.strip() and not ln.startswith(("Successfully saved", "VGF [debug]")))
    program = VgfProgram(vgf=vgf, tosa=data, converter_version=converter_version(), messages=messages,
                         inputs=inputs, outputs=outputs, scenario_template=template, compile_seconds=seconds)
    _CACHE[key] = program
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return program
