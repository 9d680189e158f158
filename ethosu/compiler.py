"""Compile a TOSA graph for an Arm Ethos-U NPU with Vela, in-process, and read back the result.

:func:`compile_tosa` validates the target/system config/memory mode first (see
:mod:`ethosu.config`), then calls Vela's own entry point ``ethosu.vela.vela.main`` with an
argument list (no subprocess, no shell) in a temporary directory, capturing everything Vela
prints. Vela writes, and we read back:

* ``<net>_vela.npz`` (``--output-format=raw``): command stream, weights, scratch sizes, I/O;
* ``<net>_summary_<system_config>.csv``: network totals -> :class:`~ethosu.performance.Performance`;
* ``<net>_per-layer.csv`` (``--verbose-performance``): per-operation estimates -> layers;
* ``<net>_debug.xml`` (``--enable-debug-db``): links each operation to its TOSA operator.

Nothing is parsed from Vela's console output; the temporary directory is removed afterwards
(:meth:`NpuProgram.save` writes the same files where you want them).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ethosu._capture import capture_output
from ethosu._vela_zygote import VELA_MAIN, VelaZygote, ZygoteUnavailable
from ethosu.config import (
    FAMILY_DEFAULTS,
    TARGETS,
    ResolvedConfig,
    memory_modes_for,
    resolve_config,
    system_configs_for,
)
from ethosu.errors import EthosUConfigError, EthosUError, VelaCompileError
from ethosu.performance import (
    LayerPerformance,
    Performance,
    attach_sources,
    parse_debug_database,
    parse_per_layer_csv,
    parse_summary_csv,
)
from ethosu.support import SupportReport, UnsupportedOperator, check_support
from tosa_verify.errors import TosaFormatError

__all__ = [
    "FAMILY_DEFAULTS",
    "TARGETS",
    "EthosUConfigError",
    "EthosUError",
    "NpuProgram",
    "NpuTensor",
    "SupportReport",
    "UnsupportedOperator",
    "VelaCompileError",
    "check_support",
    "compile_tosa",
    "format_performance_table",
    "memory_modes_for",
    "resolve_config",
    "system_configs_for",
]

#: Vela options compile_tosa sets itself, and options that make Vela do something else.
_RESERVED_FLAGS = (
    "--accelerator-config", "--system-config", "--memory-mode", "--config", "--output-dir",
    "--output-format", "--supported-ops-report", "--list-config-files", "--list-configs",
    "--version", "--api-version", "--help", "-h",
)
_STRUCTURAL_OPS = {"CONST", "CONST_SHAPE"}
_TMP = "$TMP"

# Vela keeps process-wide state (stdout, recursion limit, cwd-free but not re-entrant).
_vela_lock = threading.Lock()
#: How an isolated compile starts Vela without the zygote: a fresh interpreter running Vela's
#: own ``__main__``.
_VELA_COMMAND = (sys.executable, "-m", "ethosu.vela")
#: What the zygote's forked child runs (Vela's main on the argument list).
_VELA_CHILD_CODE = VELA_MAIN
_zygote = VelaZygote()
#: Seconds an isolated Vela compile may take before it is killed (compile_tosa's ``timeout``).
DEFAULT_TIMEOUT = 600.0


@dataclass(frozen=True)
class NpuTensor:
    """An input or output of the compiled network as Vela lays it out (6-D shape).

    Example:
        >>> NpuTensor((1, 1, 1, 16, 16, 3), 1, 1, 768).to_dict()["offset"]
        768
    """

    shape: tuple[int, ...]
    element_size: int
    region: int
    offset: int

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "shape": list(self.shape),
            "element_size": self.element_size,
            "region": self.region,
            "offset": self.offset,
        }


def _digest(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@dataclass(frozen=True, eq=False)
class NpuProgram:
    """A TOSA graph compiled by Vela for one Ethos-U configuration.

    ``command_stream`` and ``weights`` are Vela's raw output (``cmd_data`` and ``weight_data``
    of its ``.npz``); ``performance`` and ``layers`` come from Vela's CSV files;
    ``tosa_ops_on_npu`` counts the TOSA operators (by name) Vela compiled into the command
    stream; ``messages`` are Vela's warnings and notes, ``vela_log`` all it printed.
    ``artifacts`` holds Vela's output files by name (see :meth:`save`).

    Example:
        >>> program = compile_tosa("graph.tosa", "ethos-u85-256")   # doctest: +SKIP
        >>> program.performance.total_cycles > 0                   # doctest: +SKIP
        True
    """

    network: str
    target: str
    system_config: str
    memory_mode: str
    config_files: tuple[str, ...]
    vela_version: str
    vela_args: tuple[str, ...]
    command_stream: bytes
    weights: bytes
    weight_region: int
    scratch_size: int
    scratch_region: int
    scratch_fast_size: int
    scratch_fast_region: int
    inputs: tuple[NpuTensor, ...]
    outputs: tuple[NpuTensor, ...]
    performance: Performance
    layers: tuple[LayerPerformance, ...]
    tosa_ops_on_npu: dict[str, int]
    messages: tuple[str, ...]
    vela_log: str = field(repr=False)
    artifacts: dict[str, bytes] = field(repr=False)
    compile_seconds: float = 0.0

    @property
    def cycles(self) -> int:
        """Total cycles per inference (``performance.total_cycles``)."""
        return self.performance.total_cycles

    def to_dict(self, layers: bool = True) -> dict:
        """A JSON-ready dict; binary data appears as size and SHA-256.

        Example:
            >>> sorted(program.to_dict())[:3]   # doctest: +SKIP
            ['command_stream', 'compile_seconds', 'config_files']
        """
        data = {
            "network": self.network,
            "target": self.target,
            "system_config": self.system_config,
            "memory_mode": self.memory_mode,
            "config_files": list(self.config_files),
            "vela_version": self.vela_version,
            "vela_args": list(self.vela_args),
            "command_stream": _digest(self.command_stream),
            "weights": {**_digest(self.weights), "region": self.weight_region},
            "scratch": {"bytes": self.scratch_size, "region": self.scratch_region},
            "scratch_fast": {"bytes": self.scratch_fast_size, "region": self.scratch_fast_region},
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "performance": self.performance.to_dict(),
            "tosa_ops_on_npu": dict(self.tosa_ops_on_npu),
            "messages": list(self.messages),
            "compile_seconds": self.compile_seconds,
        }
        if layers:
            data["layers"] = [layer.to_dict() for layer in self.layers]
        return data

    def to_json(self, layers: bool = True, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text (NaN written as ``null``).

        Example:
            >>> json.loads(program.to_json())["target"]   # doctest: +SKIP
            'ethos-u85-256'
        """
        return json.dumps(_json_safe(self.to_dict(layers=layers)), indent=indent)

    def save(self, directory: str | os.PathLike) -> list[Path]:
        """Write Vela's output files, the command stream and ``<network>_program.json``.

        Example:
            >>> [p.name for p in program.save("out")]   # doctest: +SKIP
            ['net_vela.npz', 'net_summary_Ethos_U85_SYS_DRAM_Mid.csv', ..., 'net_program.json']
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        files = dict(self.artifacts)
        files[f"{self.network}_command_stream.bin"] = self.command_stream
        files[f"{self.network}_program.json"] = self.to_json().encode("utf-8")
        for name, content in files.items():
            path = out / name
            path.write_bytes(content)
            written.append(path)
        return written


def _json_safe(value):
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _check_extra_flags(extra_flags: Sequence[str]) -> list[str]:
    if isinstance(extra_flags, str):
        extra_flags = extra_flags.split()
    flags = [str(f) for f in extra_flags]
    expects_value = False
    for flag in flags:
        if not flag.startswith("-"):
            if expects_value:  # the value of "--option value"
                expects_value = False
                continue
            raise EthosUConfigError(
                f"extra Vela flag {flag!r} is not an option (must start with '-')",
                option="extra_flags",
                value=flag,
            )
        name = flag.split("=", 1)[0]
        # argparse accepts unambiguous prefixes, so "--accel" would reach --accelerator-config
        if name in _RESERVED_FLAGS or (
            name.startswith("--") and len(name) > 2 and any(r.startswith(name) for r in _RESERVED_FLAGS)
        ):
            raise EthosUConfigError(
                f"extra Vela flag {flag!r} is set by compile_tosa itself; use its arguments "
                "(target, system_config, memory_mode, config_ini) instead",
                option="extra_flags",
                value=flag,
            )
        expects_value = "=" not in flag
    return flags


def _vela_config_arg(path: Path) -> str:
    """How Vela wants to be told about a .ini: files inside its config_files directory as
    ``<folder>/<file>.ini`` (as ExecuTorch passes ``Arm/vela.ini``), others by absolute path."""
    from ethosu.vela.architecture_features import CONFIG_FILES_PATH

    base = Path(CONFIG_FILES_PATH).resolve()
    resolved = Path(path).resolve()
    if resolved.parent.parent == base:
        return f"{resolved.parent.name}/{resolved.name}"
    return str(resolved)


def _read_tosa(tosa) -> tuple[bytes, str]:
    raw = getattr(tosa, "raw", None)  # a tosa_verify Graph
    if isinstance(raw, (bytes, bytearray)) and raw:
        data, name = bytes(raw), "network"
    elif isinstance(tosa, (bytes, bytearray, memoryview)):
        data, name = bytes(tosa), "network"
    else:
        path = Path(tosa)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TosaFormatError(f"cannot read TOSA file {str(path)!r}: {exc.strerror or exc}") from None
        name = path.stem
    if len(data) < 8 or data[4:8] != b"TOSA":
        raise TosaFormatError(
            f"not a TOSA flatbuffer: file identifier is not 'TOSA' ({len(data)} bytes)"
        )
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "network"
    return data, name


def _tosa_op_names(data: bytes) -> list[str] | None:
    """Operator names of the main block (first block of the first region), read with the
    flatbuffer module ``tosa`` from tosa-tools without decoding any constant data."""
    try:
        import tosa.Op as op_enum
        import tosa.TosaGraph as tosa_graph

        names = {v: k for k, v in vars(op_enum.Op).items() if not k.startswith("_")}
        block = tosa_graph.TosaGraph.GetRootAs(data, 0).Regions(0).Blocks(0)
        return [names.get(block.Operators(i).Op(), "UNKNOWN") for i in range(block.OperatorsLength())]
    except Exception:  # unreadable graph: fall back to Vela's operator names
        return None


def _vela_version() -> str:
    from ethosu.vela._version import __version__

    return __version__


def _run_vela(argv: list[str]) -> tuple[int | None, str, Exception | SystemExit | None]:
    """Run ``vela.main(argv)``; return (status, everything printed, exception raised)."""
    from ethosu.vela import vela

    recursion_limit = sys.getrecursionlimit()  # Vela's main() resets it
    status: int | None = None
    error: Exception | SystemExit | None = None
    try:
        with capture_output() as captured:
            try:
                status = vela.main(argv)
            except (Exception, SystemExit) as exc:
                error = exc
    finally:
        sys.setrecursionlimit(recursion_limit)
    return status, captured.text, error


def _run_vela_isolated(argv: list[str], timeout: float | None = None) -> tuple[int | None, str, Exception | SystemExit | None]:
    """Run Vela in a child process, same contract as :func:`_run_vela`.

    A crash in Vela's native core (a segfault, an abort) ends the child, not the caller:
    it comes back as an error naming the signal. A child still running after ``timeout``
    seconds is killed and reported the same way. The child is forked from a process that has
    imported Vela already (:mod:`ethosu._vela_zygote`, ~0.5 s of CPU less per compile); with
    ``TOSA_VERIFY_VELA_ZYGOTE=0``, or when that process cannot run, a fresh interpreter
    (``_VELA_COMMAND``) is started instead.
    """
    if os.environ.get("TOSA_VERIFY_VELA_ZYGOTE", "1") != "0":
        try:
            returncode, log = _zygote.run(argv, timeout, code=_VELA_CHILD_CODE)
        except ZygoteUnavailable:
            pass  # start Vela the slow way below
        else:
            return _child_outcome(returncode, log, timeout)
    try:
        proc = subprocess.run([*_VELA_COMMAND, *argv], capture_output=True, text=True, check=False,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed the child
        log = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                      for x in (exc.stdout, exc.stderr))
        return _child_outcome(None, log, timeout)
    return _child_outcome(proc.returncode, proc.stdout + proc.stderr, timeout)


def _child_outcome(returncode: int | None, log: str, timeout: float | None) -> tuple[int | None, str, Exception | SystemExit | None]:
    """What an isolated Vela run's exit status means (None: killed after ``timeout``)."""
    if returncode is None:
        return None, log, RuntimeError(f"Vela did not finish within {timeout:g} s; the child process was killed "
                                       "(compile_tosa(timeout=...) sets the limit)")
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return None, log, RuntimeError(f"Vela crashed ({name}); the compile ran in a child process, "
                                       "so only that process was lost")
    if returncode == 2 and "usage:" in log:  # argparse refused an option
        return None, log, SystemExit(2)
    if returncode != 0 and "Traceback" in log:
        return None, log, RuntimeError(_last_line(log))
    return returncode, log, None


def _messages(log: str) -> tuple[str, ...]:
    keep = ("warning", "info", "error")
    return tuple(
        line.strip() for line in log.splitlines() if line.strip().lower().startswith(keep)
    )


def _one(directory: Path, pattern: str, required: bool = True) -> Path | None:
    found = sorted(directory.glob(pattern))
    if not found:
        if required:
            raise VelaCompileError(f"Vela did not write {pattern} in its output directory")
        return None
    return found[0]


def _tensors(npz, prefix: str) -> tuple[NpuTensor, ...]:
    shapes = npz[f"{prefix}_shape"]
    return tuple(
        NpuTensor(
            shape=tuple(int(d) for d in shapes[i]),
            element_size=int(npz[f"{prefix}_elem_size"][i]),
            region=int(npz[f"{prefix}_region"][i]),
            offset=int(npz[f"{prefix}_offset"][i]),
        )
        for i in range(len(shapes))
    )


def _ops_on_npu(database: dict, tosa_ops: list[str] | None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in database.get("source", []):
        key = row.get("ext_key", "")
        name = row.get("operator", "")
        if tosa_ops is not None and key.isdigit() and int(key) < len(tosa_ops):
            name = tosa_ops[int(key)]
        if name.upper() in _STRUCTURAL_OPS:
            continue
        counts[name] = counts.get(name, 0) + 1
    return counts


def compile_tosa(
    tosa,
    target: str,
    *,
    system_config: str | None = None,
    memory_mode: str | None = None,
    extra_flags: Sequence[str] = (),
    config_ini: str | os.PathLike | None = None,
    layers: bool = True,
    isolate: bool = True,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> NpuProgram:
    """Compile a TOSA 1.0 graph (bytes or a path) with Vela for an Ethos-U target.

    ``target`` is one of :data:`TARGETS`; ``system_config``/``memory_mode`` default per
    family (U55: Ethos_U55_High_End_Embedded + Shared_Sram, U65: Ethos_U65_High_End +
    Dedicated_Sram_384KB, U85: Ethos_U85_SYS_DRAM_Mid + Sram_Only) and may name any section
    of Vela's vela.ini or of ``config_ini``. ``extra_flags`` are passed to Vela as they are
    (e.g. ``["--optimise=Size", "--arena-cache-size=262144"]``). ``layers=False`` skips
    Vela's per-layer CSV and debug database (a faster compile; ``program.layers`` is empty
    and ``tosa_ops_on_npu`` is counted from the graph). By default (``isolate=True``) Vela runs
    in a child process (about a second more): a crash in Vela's native code raises
    :class:`VelaCompileError` instead of ending the calling process, and a compile running
    longer than ``timeout`` seconds (``None``: no limit) is killed and raised the same way.
    ``isolate=False`` runs Vela in this process (faster; trusted graphs only; no timeout).

    Raises :class:`EthosUConfigError` (listing the valid choices) before Vela runs when the
    configuration is invalid, :class:`tosa_verify.errors.TosaFormatError` for input that is
    not TOSA, and :class:`VelaCompileError` when Vela refuses the network.

    Example:
        >>> program = compile_tosa("mobilenet_int8.tosa", "ethos-u55-128")   # doctest: +SKIP
        >>> program.performance.total_cycles, len(program.command_stream)   # doctest: +SKIP
        (6532, 1312)
    """
    config: ResolvedConfig = resolve_config(target, system_config, memory_mode, config_ini)
    flags = _check_extra_flags(extra_flags)
    data, name = _read_tosa(tosa)
    tosa_ops = _tosa_op_names(data)

    with _vela_lock, tempfile.TemporaryDirectory(prefix="ethosu-vela-") as tmp:
        tmpdir = Path(tmp)
        network = tmpdir / f"{name}.tosa"
        network.write_bytes(data)
        outdir = tmpdir / "output"
        argv = [
            *flags,
            f"--accelerator-config={config.target}",
            *[f"--config={_vela_config_arg(p)}" for p in config.config_files],
            "--output-format=raw",
            f"--system-config={config.system_config}",
            f"--memory-mode={config.memory_mode}",
            *(["--verbose-performance", "--enable-debug-db"] if layers else []),
            f"--output-dir={outdir}",
            str(network),
        ]
        start = time.perf_counter()
        rc, log, error = _run_vela_isolated(argv, timeout) if isolate else _run_vela(argv)
        elapsed = time.perf_counter() - start
        if isinstance(error, SystemExit):  # argparse refused an extra flag
            raise EthosUConfigError(
                f"Vela refused the extra flags {flags}: {_last_line(log)}",
                option="extra_flags",
                value=flags,
            )
        if error is not None:
            detail = getattr(error, "error_msg", None) or str(error)
            raise VelaCompileError(
                f"Vela could not compile {name} for {config.target} "
                f"({config.system_config}, {config.memory_mode}): {detail}"
                + _hint(data, config.target),
                vela_messages=log,
            )
        if rc != 0:
            raise VelaCompileError(
                f"Vela exited with status {rc} compiling {name} for {config.target}: "
                f"{_last_line(log)}",
                vela_messages=log,
            )
        program = _read_outputs(outdir, name, config, argv, log, tosa_ops, tmp, elapsed)
    return program


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no message)"


def _hint(data: bytes, target: str) -> str:
    try:
        report = check_support(data, target)
    except Exception:  # the hint is best effort; the Vela error is the message
        return ""
    if report.ok:
        return ""
    return " | check_support: " + "; ".join(str(issue) for issue in report.unsupported[:5])


def _read_outputs(
    outdir: Path,
    name: str,
    config: ResolvedConfig,
    argv: list[str],
    log: str,
    tosa_ops: list[str] | None,
    tmp: str,
    elapsed: float,
) -> NpuProgram:
    npz_path = _one(outdir, "*_vela.npz")
    summary_path = _one(outdir, "*_summary_*.csv")
    per_layer_path = _one(outdir, "*_per-layer.csv", required=False)
    debug_path = _one(outdir, "*_debug.xml", required=False)
    artifacts = {
        p.name: p.read_bytes()
        for p in (npz_path, summary_path, per_layer_path, debug_path)
        if p is not None
    }
    with np.load(io.BytesIO(artifacts[npz_path.name]), allow_pickle=False) as npz:
        command_stream = npz["cmd_data"].tobytes()
        weights = npz["weight_data"].tobytes()
        weight_region = int(npz["weight_region"])
        scratch_size = int(npz["scratch_size"])
        scratch_region = int(npz["scratch_region"])
        scratch_fast_size = int(npz["scratch_fast_size"])
        scratch_fast_region = int(npz["scratch_fast_region"])
        inputs = _tensors(npz, "input")
        outputs = _tensors(npz, "output")
    performance = parse_summary_csv(artifacts[summary_path.name].decode("utf-8"))
    layers = (
        parse_per_layer_csv(artifacts[per_layer_path.name].decode("utf-8"))
        if per_layer_path is not None
        else []
    )
    database = (
        parse_debug_database(artifacts[debug_path.name].decode("utf-8"))
        if debug_path is not None
        else {}
    )
    layers = attach_sources(layers, database, tosa_ops)
    if database:
        on_npu = _ops_on_npu(database, tosa_ops)
    else:  # compiled at all means every operator is on the NPU (TOSA has no CPU fallback)
        on_npu = {}
        for op in tosa_ops or []:
            if op not in _STRUCTURAL_OPS:
                on_npu[op] = on_npu.get(op, 0) + 1
    return NpuProgram(
        network=name,
        target=config.target,
        system_config=config.system_config,
        memory_mode=config.memory_mode,
        config_files=tuple(str(p) for p in config.config_files),
        vela_version=_vela_version(),
        vela_args=tuple(a.replace(tmp, _TMP) for a in argv),
        command_stream=command_stream,
        weights=weights,
        weight_region=weight_region,
        scratch_size=scratch_size,
        scratch_region=scratch_region,
        scratch_fast_size=scratch_fast_size,
        scratch_fast_region=scratch_fast_region,
        inputs=inputs,
        outputs=outputs,
        performance=performance,
        layers=tuple(layers),
        tosa_ops_on_npu=on_npu,
        messages=_messages(log),
        vela_log=log,
        artifacts=artifacts,
        compile_seconds=elapsed,
    )


def _kib(value: float) -> str:
    return f"{value:,.2f} KiB"


def format_performance_table(program: NpuProgram, layers: bool = False) -> str:
    """A plain-text report of a compiled program (what ``tosa-verify compile`` prints).

    Example:
        >>> print(format_performance_table(program))   # doctest: +SKIP
        ethos-u55-128 | Ethos_U55_High_End_Embedded | Shared_Sram | Vela 5.2.0
          total cycles              6,532 ...
    """
    perf = program.performance
    lines = [
        f"{program.network}: {program.target} | {program.system_config} | {program.memory_mode} "
        f"| Vela {program.vela_version}",
        f"  {'clock':<26}{perf.core_clock_hz / 1e6:,.0f} MHz",
        f"  {'total cycles':<26}{perf.total_cycles:,}",
        f"  {'NPU cycles':<26}{perf.npu_cycles:,}",
        f"  {'inference time':<26}{perf.inference_time_ms:,.4f} ms "
        f"({perf.inferences_per_second:,.1f} inferences/s)",
        f"  {'MACs':<26}{perf.macs:,}",
        f"  {'SRAM used':<26}{_kib(perf.sram_used_kib)}",
        f"  {'off-chip memory used':<26}{_kib(perf.off_chip_used_kib)}",
        f"  {'command stream':<26}{len(program.command_stream):,} B",
        f"  {'weights (NPU encoded)':<26}{perf.total_npu_encoded_weights_bytes:,} B "
        f"(original {perf.total_original_weights_bytes:,} B)",
        f"  {'scratch':<26}{program.scratch_size:,} B",
        "",
        f"  {'memory area':<16}{'used KiB':>10}{'read B':>10}{'write B':>10}{'total B':>10}"
        f"{'access cyc':>12}{'peak GB/s':>11}{'avg GB/s':>10}",
    ]
    for area in perf.memory_areas:
        if not (area.used_kib or area.total_bytes or area.access_cycles):
            continue
        read = area.feature_map_read_bytes + area.weight_read_bytes
        write = area.feature_map_write_bytes + area.weight_write_bytes
        lines.append(
            f"  {area.name:<16}{area.used_kib:>10.2f}{read:>10,}{write:>10,}{area.total_bytes:>10,}"
            f"{area.access_cycles:>12,}{area.peak_bandwidth_gb_s:>11.2f}"
            f"{perf.average_bandwidth_gb_s(area.name):>10.2f}"
        )
    ops = ", ".join(f"{op} x{n}" for op, n in program.tosa_ops_on_npu.items())
    lines += ["", f"  TOSA ops on NPU: {ops or '-'}"]
    if layers and program.layers:
        lines += [
            "",
            f"  {'#':>3} {'TOSA op':<18}{'Vela op':<16}{'cycles':>10}{'cyc %':>7}{'MACs':>10}"
            f"{'util %':>8}  {'memory':<8}{'output tensor'}",
        ]
        for i, layer in enumerate(program.layers):
            tosa_op = (
                f"{layer.tosa_op}#{layer.tosa_op_index}" if layer.tosa_op_index is not None else "-"
            )
            lines.append(
                f"  {i:>3} {tosa_op:<18}{layer.original_operator:<16}{layer.cycles:>10,}"
                f"{layer.network_cycles_pct:>7.1f}{layer.macs:>10,}{layer.mac_utilisation_pct:>8.1f}"
                f"  {layer.memory_area or '-':<8}{layer.name}"
            )
        total = sum(layer.cycles for layer in program.layers)
        lines.append(f"  {'':>3} {'sum of layers':<34}{total:>10,}")
    if program.messages:
        lines += ["", *[f"  vela: {m}" for m in program.messages]]
    return "\n".join(lines)
