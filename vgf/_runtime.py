"""Where the ML SDK tools are, and the private environment they run in.

The four PyPI packages ship native executables and the ML emulation layer inside their wheels:

==================================  =========================================================
``ai-ml-sdk-model-converter``       ``model_converter/binaries/bin/model-converter``
``ai-ml-sdk-vgf-library``           ``vgf_lib/binaries/bin/vgf_dump``
``ai-ml-sdk-scenario-runner``       ``scenario_runner/binaries/bin/scenario-runner``
``ai-ml-emulation-layer-for-vulkan`` ``emulation_layer/deploy/{lib,share/vulkan/explicit_layer.d}``
==================================  =========================================================

The emulation layer is two Vulkan layers: the Graph layer (``VK_ARM_data_graph``) must sit
above the Tensor layer (``VK_ARM_tensors``) it needs. The Vulkan loader of Debian 12 (1.3.239)
ignores the order of ``VK_INSTANCE_LAYERS`` and stacks layers in the order it finds their
manifests, so with both manifests in the wheel's one directory the Graph layer can come out
below the Tensor layer and fails with "requires extension: VK_ARM_tensors". So each manifest
is copied, with an absolute ``library_path``, into its own directory of a private temporary
directory, and the Graph directory is listed first in ``VK_LAYER_PATH``. The environment is a
copy passed to the child processes; ``os.environ`` of the caller is never changed.
"""

from __future__ import annotations

import atexit
import ctypes.util
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from .errors import VgfError, VgfUnavailableError

#: What to install, for the messages of missing pieces.
PIP_PACKAGES = ("ai-ml-sdk-model-converter==0.11.0 ai-ml-sdk-vgf-library==0.11.0 "
                "ai-ml-sdk-scenario-runner==0.11.0 ai-ml-emulation-layer-for-vulkan==0.11.0")
APT_PACKAGES = "mesa-vulkan-drivers libvulkan1"
#: tool name -> (python package holding it, path inside the package, PyPI distribution)
_TOOLS = {
    "model-converter": ("model_converter", "binaries/bin/model-converter", "ai-ml-sdk-model-converter"),
    "vgf_dump": ("vgf_lib", "binaries/bin/vgf_dump", "ai-ml-sdk-vgf-library"),
    "scenario-runner": ("scenario_runner", "binaries/bin/scenario-runner", "ai-ml-sdk-scenario-runner"),
}
_LAYERS = (("VK_LAYER_ML_Graph_Emulation", "VkLayer_Graph"), ("VK_LAYER_ML_Tensor_Emulation", "VkLayer_Tensor"))
#: Scenario-runner log lines that carry no diagnosis.
_NOISE = ("INFO:", "is deprecated", "DEBUG")

_env_lock = threading.Lock()
_env_dir: list[str] = []


def _package_dir(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def tool_path(tool: str) -> str:
    """The absolute path of an ML SDK executable shipped in its wheel.

    Raises :class:`VgfUnavailableError` saying which package to install when it is missing.

    Example:
        >>> Path(tool_path("model-converter")).name     # doctest: +SKIP
        'model-converter'
    """
    package, inner, dist = _TOOLS[tool]
    base = _package_dir(package)
    path = base / inner if base is not None else None
    if path is None or not (path.is_file() and os.access(path, os.X_OK)):
        raise VgfUnavailableError(f"{tool} not found: pip install {dist} (see README, VGF)", step="setup")
    return str(path)


def emulation_layer_dir() -> Path:
    """The ``deploy`` directory of the ML emulation layer wheel (``lib/`` and the manifests).

    Example:
        >>> (emulation_layer_dir() / "lib" / "libVkLayer_Graph.so").is_file()   # doctest: +SKIP
        True
    """
    base = _package_dir("emulation_layer")
    deploy = base / "deploy" if base is not None else None
    if deploy is None or not all((deploy / "lib" / f"lib{stem}.so").is_file() for _, stem in _LAYERS):
        raise VgfUnavailableError(
            "the ML emulation layer for Vulkan is not installed: pip install "
            "ai-ml-emulation-layer-for-vulkan (see README, VGF)", step="setup")
    return deploy


def vulkan_loader() -> str | None:
    """The Vulkan loader library's name as the dynamic linker finds it, or None.

    Example:
        >>> vulkan_loader()   # doctest: +SKIP
        'libvulkan.so.1'
    """
    return ctypes.util.find_library("vulkan")


def _layer_dirs(root: Path, deploy: Path) -> list[Path]:
    """Write one manifest per directory under ``root`` (Graph first); return the directories."""
    dirs = []
    for _name, stem in _LAYERS:
        manifest = json.loads((deploy / "share" / "vulkan" / "explicit_layer.d" / f"{stem}.json").read_text())
        # a relative library_path is resolved against the manifest's directory: make it absolute
        manifest["layer"]["library_path"] = str(deploy / "lib" / f"lib{stem}.so")
        target = root / stem
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{stem}.json").write_text(json.dumps(manifest, indent=1))
        dirs.append(target)
    return dirs


def _remove_env_dir() -> None:
    for path in _env_dir:
        shutil.rmtree(path, ignore_errors=True)


def runtime_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the scenario runner: ``base`` (default ``os.environ``) plus the layers.

    The layer manifests live in a private temporary directory made once per process (removed at
    exit); the returned dict is a new mapping, nothing in ``os.environ`` changes.

    Example:
        >>> env = runtime_env()                                  # doctest: +SKIP
        >>> env["VK_INSTANCE_LAYERS"]                            # doctest: +SKIP
        'VK_LAYER_ML_Graph_Emulation:VK_LAYER_ML_Tensor_Emulation'
    """
    deploy = emulation_layer_dir()
    with _env_lock:
        if not _env_dir or not Path(_env_dir[0]).is_dir():
            root = tempfile.mkdtemp(prefix="tosa-verify-vgf-")
            if not _env_dir:
                atexit.register(_remove_env_dir)
            _env_dir[:] = [root]
            _layer_dirs(Path(root), deploy)
        root = Path(_env_dir[0])
    env = dict(os.environ if base is None else base)
    # only our manifests: a user's VK_LAYER_PATH could hold a second copy of the same layers
    env["VK_LAYER_PATH"] = os.pathsep.join(str(root / stem) for _, stem in _LAYERS)
    env["VK_INSTANCE_LAYERS"] = ":".join(name for name, _ in _LAYERS)
    lib = str(deploy / "lib")
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def tool_message(text: str, limit: int = 400) -> str:
    """The diagnosis in a tool's output, as one line: its error lines, else its last lines.

    Example:
        >>> tool_message("x INFO: fine\\nERROR: Failed to open file\\n")
        'ERROR: Failed to open file'
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not any(n in ln for n in _NOISE)]
    errors = [ln for ln in useful if "error" in ln.lower() or "fail" in ln.lower()
              or "requires" in ln.lower() or "unsupported" in ln.lower()]
    picked = errors[-3:] or useful[-3:] or lines[-2:]
    return "; ".join(picked)[-limit:] or "no output"


def run_tool(step: str, cmd: Sequence[str], *, error: type[VgfError], timeout: float,
             env: Mapping[str, str] | None = None, cwd: str | os.PathLike | None = None) -> str:
    """Run one ML SDK tool; return what it printed, or raise ``error`` naming ``step``.

    A non-zero exit, a crash (killed by a signal) and a timeout all become ``error`` with one line:
    the step and the tool's own message.

    Example:
        >>> run_tool("model-converter", [tool_path("model-converter"), "--version"],
        ...          error=VgfError, timeout=30)                                    # doctest: +SKIP
        '{"version": "0.11.0", ...}'
    """
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, errors="replace", check=False,
                              env=dict(env) if env is not None else None, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = _text(exc.stdout) + _text(exc.stderr)
        raise error(f"{step}: timed out after {timeout:g} s ({tool_message(out)})",
                    step=step, tool_output=out) from None
    except OSError as exc:
        raise error(f"{step}: cannot start {cmd[0]}: {exc}", step=step) from None
    out = proc.stdout + proc.stderr
    if proc.returncode < 0:
        number = -proc.returncode
        sig = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
        raise error(f"{step}: crashed ({sig}): {tool_message(out)}", step=step, tool_output=out)
    if proc.returncode != 0:
        raise error(f"{step}: exit code {proc.returncode}: {tool_message(out)}", step=step, tool_output=out)
    return out


def _text(data: object) -> str:
    if data is None:
        return ""
    return data.decode("utf8", "replace") if isinstance(data, bytes) else str(data)
