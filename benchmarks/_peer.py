"""The peer flow: INT TOSA graphs and Vela results from ExecuTorch's Arm Ethos-U backend.

Small CNNs are built in code with random weights (nothing is downloaded), quantized with
ExecuTorch's ``EthosUQuantizer`` (PT2E) and lowered with its ``EthosUPartitioner``. The
compile spec's intermediate-artifacts directory receives the exact TOSA flatbuffer
ExecuTorch hands to Vela (``out.tosa``) and Vela's own output (``output/out_summary_*.csv``),
so a test or benchmark can compile the *identical* TOSA with ``ethosu.compiler`` and compare.

Used by ``benchmarks/bench_ethosu.py`` and by ``tests/test_ethosu_pkg``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import inspect
import io
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

# re-exported: tests and benchmarks split ExecuTorch's payload with ``_peer.read_vela_bin_stream``
from ethosu.payload import read_vela_bin_stream  # noqa: F401

# ----------------------------------------------------------------------------- models


class TinyCNN(nn.Module):
    """conv3x3 -> relu -> conv3x3/2 -> relu -> global avg pool -> linear (1x3x16x16)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class DepthwiseSeparable(nn.Module):
    """MobileNet-style: conv3x3/2, two depthwise-separable blocks, pool, linear (1x3x32x32)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dw1 = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw1 = nn.Conv2d(16, 32, 1)
        self.dw2 = nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=32)
        self.pw2 = nn.Conv2d(32, 64, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.pw1(torch.relu(self.dw1(x))))
        x = torch.relu(self.pw2(torch.relu(self.dw2(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class ResidualCNN(nn.Module):
    """conv, a residual block (add), max pool, conv, pool, linear (1x8x24x24)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(8, 16, 3, padding=1)
        self.conv1 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv3 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv0(x))
        y = self.conv2(torch.relu(self.conv1(x)))
        x = torch.relu(x + y)
        x = nn.functional.max_pool2d(x, 2)
        x = torch.relu(self.conv3(x))
        return self.fc(torch.flatten(self.pool(x), 1))


#: name -> (model factory, example input shape)
MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "tiny_cnn": (TinyCNN, (1, 3, 16, 16)),
    "dw_separable": (DepthwiseSeparable, (1, 3, 32, 32)),
    "residual_cnn": (ResidualCNN, (1, 8, 24, 24)),
}


def source_key(*parts: object, length: int = 24) -> str:
    """A key of what decides the bytes of a peer lowering, for caches and shipped test data: the
    versions of torch, torchao, ExecuTorch and tosa-tools, the source of this module's ExecuTorch
    flow, and ``parts`` (functions and classes by their source, anything else by ``repr``).

    Example:
        >>> source_key("tiny_cnn") == source_key("tiny_cnn") != source_key("other")
        True
    """
    digest = hashlib.sha256()
    for dist in ("torch", "torchao", "executorch", "tosa-tools"):
        digest.update(f"{dist}={importlib.metadata.version(dist)};".encode())
    for part in (executorch_tosa, executorch_edge, _pt2e_quantize, *parts):
        source = inspect.isfunction(part) or inspect.isclass(part)
        digest.update((inspect.getsource(part) if source else repr(part)).encode())
    return digest.hexdigest()[:length]


def make_model(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A model of :data:`MODELS` with seeded random weights, and an example input."""
    factory, shape = MODELS[name]
    torch.manual_seed(seed)
    model = factory().eval()
    return model, (torch.randn(*shape),)


# ----------------------------------------------------------------------------- lowering


@dataclass
class PeerResult:
    """What ExecuTorch's Ethos-U flow produced for one model and target."""

    model: str
    target: str
    system_config: str
    memory_mode: str
    tosa: bytes
    vela_summary_csv: str
    quantize_seconds: float
    lower_seconds: float
    workdir: Path | None  #: the intermediate-artifacts directory, if the caller chose one


def _compile_spec(target: str, system_config: str | None, memory_mode: str | None):
    from executorch.backends.arm.ethosu import EthosUCompileSpec

    return EthosUCompileSpec(target, system_config=system_config, memory_mode=memory_mode)


def _flag(flags: list[str], name: str) -> str:
    for flag in flags:
        if flag.startswith(name + "="):
            return flag.split("=", 1)[1]
    raise KeyError(name)


def _pt2e_quantize(model: nn.Module, example: tuple[torch.Tensor, ...], quantizer,
                   calibration=None) -> nn.Module:
    """PT2E post-training quantization with one of ExecuTorch's Arm quantizers (symmetric int8)."""
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    graph = torch.export.export(model, example).module(check_guards=False)
    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for batch in calibration or [example]:
            prepared(*batch)
    return convert_pt2e(prepared)


def quantize(model: nn.Module, example: tuple[torch.Tensor, ...], spec) -> nn.Module:
    """PT2E post-training quantization with ExecuTorch's EthosUQuantizer (symmetric int8)."""
    from executorch.backends.arm.quantizer import EthosUQuantizer

    return _pt2e_quantize(model, example, EthosUQuantizer(spec))


@dataclass
class PeerTosa:
    """One model lowered by ExecuTorch's TOSA backend (``TOSAPartitioner``)."""

    tosa: bytes
    quantized: nn.Module | None  #: the converted PT2E model (INT), for the delegate's I/O qparams
    seconds: float  #: quantization (with calibration) plus lowering


def executorch_edge(model: nn.Module, example: tuple[torch.Tensor, ...], profile: str, calibration=None):
    """``(edge program, quantized model or None)``: ``model`` through ExecuTorch's Arm TOSA
    partitioner (INT: quantized first by its ``TOSAQuantizer`` on ``calibration``, default the
    example), whatever it delegates.

    Example:
        >>> edge, _ = executorch_edge(nn.Linear(4, 2).eval(), (torch.randn(1, 4),), "FP")  # doctest: +SKIP
    """
    from executorch.backends.arm.quantizer import TOSAQuantizer
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    spec = TosaCompileSpec(f"TOSA-1.0+{profile}")
    quantized = _pt2e_quantize(model, example, TOSAQuantizer(spec), calibration) if profile == "INT" else None
    program = torch.export.export(quantized if quantized is not None else model, example)
    return to_edge_transform_and_lower(program, partitioner=[TOSAPartitioner(spec)]), quantized


def executorch_tosa(model: nn.Module, example: tuple[torch.Tensor, ...], profile: str,
                    calibration=None) -> PeerTosa:
    """Lower ``model`` with ExecuTorch's Arm TOSA backend; it must become one delegated graph.

    INT quantizes with ExecuTorch's ``TOSAQuantizer`` (per-channel symmetric int8 weights,
    its default histogram-calibrated int8 activations) on ``calibration`` (default: the example).

    Example:
        >>> peer = executorch_tosa(nn.Linear(4, 2).eval(), (torch.randn(1, 4),), "FP")  # doctest: +SKIP
        >>> peer.tosa[4:8]                                                              # doctest: +SKIP
        b'TOSA'
    """
    start = time.perf_counter()
    edge, quantized = executorch_edge(model, example, profile, calibration)
    seconds = time.perf_counter() - start
    payloads = [m.processed_bytes for _, m in edge.exported_program().graph_module.named_modules()
                if hasattr(m, "processed_bytes")]
    if len(payloads) != 1:
        raise RuntimeError(f"expected one delegated TOSA graph from ExecuTorch, got {len(payloads)}")
    return PeerTosa(payloads[0], quantized, seconds)


def lower_with_executorch(
    name: str,
    target: str,
    *,
    system_config: str | None = None,
    memory_mode: str | None = None,
    workdir: str | Path | None = None,
    seed: int = 0,
) -> PeerResult:
    """Quantize ``MODELS[name]`` and lower it with EthosUPartitioner; keep TOSA and Vela CSV.

    Example:
        >>> peer = lower_with_executorch("tiny_cnn", "ethos-u55-128")   # doctest: +SKIP
        >>> peer.tosa[4:8]                                              # doctest: +SKIP
        b'TOSA'
    """
    if workdir is None:  # keep nothing on disk
        with tempfile.TemporaryDirectory(prefix=f"peer-{name}-") as tmp:
            result = _lower(name, target, system_config, memory_mode, Path(tmp), seed)
        result.workdir = None
        return result
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    return _lower(name, target, system_config, memory_mode, work, seed)


def _lower(name, target, system_config, memory_mode, work: Path, seed: int) -> PeerResult:
    from executorch.backends.arm.ethosu import EthosUPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model, example = make_model(name, seed)
    spec = _compile_spec(target, system_config, memory_mode)
    spec.dump_intermediate_artifacts_to(str(work))
    start = time.perf_counter()
    quantized = quantize(model, example, spec)
    exported = torch.export.export(quantized, example)
    quantize_seconds = time.perf_counter() - start
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        to_edge_transform_and_lower(exported, partitioner=[EthosUPartitioner(spec)])
    lower_seconds = time.perf_counter() - start
    dumps = sorted(work.glob("output_tag*.tosa"))
    if len(dumps) != 1:
        raise RuntimeError(f"expected one delegated TOSA partition for {name}, got {len(dumps)}")
    tosa = (work / "out.tosa").read_bytes()  # exactly what ExecuTorch passed to Vela
    summary = next((work / "output").glob("*_summary_*.csv")).read_text()
    return PeerResult(
        model=name,
        target=target,
        system_config=_flag(spec.compiler_flags, "--system-config"),
        memory_mode=_flag(spec.compiler_flags, "--memory-mode"),
        tosa=tosa,
        vela_summary_csv=summary,
        quantize_seconds=quantize_seconds,
        lower_seconds=lower_seconds,
        workdir=work,
    )


def executorch_vela_compile(
    tosa: bytes,
    target: str,
    *,
    system_config: str | None = None,
    memory_mode: str | None = None,
) -> tuple[bytes, str, float]:
    """Compile TOSA with ExecuTorch's own Vela wrapper (``arm_vela.vela_compile``).

    Returns (ExecuTorch's Ethos-U payload, Vela's summary CSV text, seconds).
    """
    from executorch.backends.arm.arm_vela import vela_compile

    spec = _compile_spec(target, system_config, memory_mode)
    with tempfile.TemporaryDirectory(prefix="peer-vela-") as tmp:
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            result = vela_compile(tosa, list(spec.compiler_flags), intermediate_path=tmp)
        seconds = time.perf_counter() - start
        summary = next(Path(tmp, "output").glob("*_summary_*.csv")).read_text()
    return result.processed_bytes, summary, seconds
