"""Small ExecuTorch-lowered TOSA graphs: the typical Ethos-U workload, for interpreter speed.

Each model is built in code with seeded random weights (nothing is downloaded) and lowered by
ExecuTorch's Arm TOSA backend (``TOSAPartitioner``) as TOSA-1.0+INT (int8, ExecuTorch's
symmetric per-channel config), TOSA-1.0+INT+int16 (ExecuTorch's 16A8W config) and TOSA-1.0+FP.
Lowered graphs are cached on disk by name, so a second benchmark run skips ExecuTorch.

Used by ``benchmarks/bench_interpreter.py --small``.

    >>> graphs = small_graphs(Path("/tmp/cache"))         # doctest: +SKIP
    >>> sorted(graphs)[:2]                                # doctest: +SKIP
    ['depthwise_residual_FP', 'depthwise_residual_INT']
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn


class SmallCNN(nn.Module):
    """conv3x3 -> relu -> conv3x3/2 -> relu -> global avg pool -> linear (1x3x16x16)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(x.mean(dim=(2, 3)))


class MLP(nn.Module):
    """Three linear layers with ReLU (1x64 -> 10), a keyword-spotting style classifier head."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Softmax(nn.Module):
    """softmax over the last dimension (1x8x32)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class LayerNorm(nn.Module):
    """LayerNorm over the last dimension (1x16x32)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class SigmoidTanh(nn.Module):
    """sigmoid(x) * tanh(x) (1x4x16x16): TABLE lookups in INT."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x) * torch.tanh(x)


class ResidualBMM(nn.Module):
    """bmm(x, x^T) @ x + x (1x16x32)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(torch.bmm(x, x.transpose(1, 2)), x) + x


class PoolConcat(nn.Module):
    """max pool and avg pool of a conv, concatenated on channels (1x8x16x16)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        return torch.cat([nn.functional.max_pool2d(y, 2), nn.functional.avg_pool2d(y, 2)], dim=1)


class EncoderBlock(nn.Module):
    """One transformer encoder layer (d_model 32, 2 heads, feed-forward 64, 8 tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class DepthwiseResidual(nn.Module):
    """MobileNetV2-style inverted residual: pointwise, depthwise 3x3, pointwise, add (1x16x16x16)."""

    def __init__(self) -> None:
        super().__init__()
        self.expand = nn.Conv2d(16, 32, 1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.project = nn.Conv2d(32, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.dw(torch.relu(self.expand(x))))
        return x + self.project(y)


#: name -> (model factory, example input shape)
SMALL_MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "small_cnn": (SmallCNN, (1, 3, 16, 16)),
    "mlp": (MLP, (1, 64)),
    "softmax": (Softmax, (1, 8, 32)),
    "layer_norm": (LayerNorm, (1, 16, 32)),
    "sigmoid_tanh": (SigmoidTanh, (1, 4, 16, 16)),
    "residual_bmm": (ResidualBMM, (1, 16, 32)),
    "pool_concat": (PoolConcat, (1, 8, 16, 16)),
    "encoder_block": (EncoderBlock, (1, 8, 32)),
    "depthwise_residual": (DepthwiseResidual, (1, 16, 16, 16)),
}
PROFILES = ("INT", "INT16", "FP")


def lower(name: str, profile: str) -> bytes:
    """TOSA bytes of ``SMALL_MODELS[name]`` lowered by ExecuTorch's Arm backend for ``profile``."""
    factory, shape = SMALL_MODELS[name]
    return lower_model(name, factory, shape, profile)


def lower_model(name: str, factory: Callable[[], nn.Module], shape: tuple[int, ...], profile: str) -> bytes:
    """TOSA bytes of ``factory()`` (seeded weights) on an input of ``shape``, lowered by
    ExecuTorch's Arm backend for ``profile`` (``"INT"``, ``"INT16"`` or ``"FP"``); ``name`` for
    the error of a model not lowered as one TOSA graph.

    >>> lower_model("mlp", MLP, (1, 64), "FP")[4:8]        # doctest: +SKIP
    b'TOSA'
    """
    from executorch.backends.arm.quantizer import (
        TOSAQuantizer,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    model = factory().eval()
    example = (torch.randn(*shape, generator=torch.Generator().manual_seed(7)),)
    spec = TosaCompileSpec({"INT": "TOSA-1.0+INT", "INT16": "TOSA-1.0+INT+int16", "FP": "TOSA-1.0+FP"}[profile])
    if profile != "FP":
        quantizer = TOSAQuantizer(spec)
        quantizer.set_global(get_symmetric_a16w8_quantization_config() if profile == "INT16"
                             else get_symmetric_quantization_config(is_per_channel=True))
        graph = torch.export.export(model, example).module(check_guards=False)
        prepared = prepare_pt2e(graph, quantizer)
        with torch.no_grad():
            prepared(*example)
        model = convert_pt2e(prepared)
    edge = to_edge_transform_and_lower(torch.export.export(model, example), partitioner=[TOSAPartitioner(spec)])
    payloads = [m.processed_bytes for _, m in edge.exported_program().graph_module.named_modules()
                if hasattr(m, "processed_bytes")]
    if len(payloads) != 1:
        raise RuntimeError(f"{name} {profile}: expected one delegated TOSA graph, got {len(payloads)}")
    return payloads[0]


def small_graphs(cache: Path, progress: Callable[[str], None] | None = None,
                 lower_missing: bool = True) -> dict[str, bytes]:
    """Every (model, profile) of the suite as TOSA bytes, by ``"<model>_<profile>"``.

    A model ExecuTorch cannot lower fully for a profile is left out (reported to ``progress``);
    so is one not in ``cache`` when not ``lower_missing``.
    """
    wanted = {f"{name}_{profile}": (name, factory, shape, profile)
              for name, (factory, shape) in SMALL_MODELS.items() for profile in PROFILES}
    return cached_graphs(wanted, cache, progress, lower_missing)


def cached_graphs(wanted: dict[str, tuple[str, Callable[[], nn.Module], tuple[int, ...], str]], cache: Path,
                  progress: Callable[[str], None] | None = None, lower_missing: bool = True) -> dict[str, bytes]:
    """TOSA bytes by key for ``wanted`` (key -> ``(name, factory, shape, profile)``, see
    :func:`lower_model`), read from ``cache/<key>.tosa`` or lowered and written there.

    A model ExecuTorch cannot lower fully is left out (reported to ``progress``); so is one not
    in ``cache`` when not ``lower_missing``.

    >>> cached_graphs({"mlp_FP": ("mlp", MLP, (1, 64), "FP")}, Path("/tmp/c"))   # doctest: +SKIP
    {'mlp_FP': b'...'}
    """
    cache.mkdir(parents=True, exist_ok=True)
    graphs = {}
    for key, (name, factory, shape, profile) in wanted.items():
        path = cache / f"{key}.tosa"
        if not path.exists():
            if not lower_missing:
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    path.write_bytes(lower_model(name, factory, shape, profile))
            except Exception as exc:  # a gap in the peer's lowering: leave the graph out
                if progress:
                    progress(f"{key}: not lowered ({type(exc).__name__}: {str(exc)[:120]})")
                continue
        graphs[key] = path.read_bytes()
    return graphs


def random_inputs(graph, seed: int = 0) -> list[np.ndarray]:
    """Random inputs covering each graph input's declared dtype range (a loaded tosa_verify Graph)."""
    rng = np.random.default_rng(seed)
    inputs = []
    for name in graph.main.inputs:
        decl = graph.main.tensors[name]
        if decl.dtype in ("INT8", "INT16"):
            info = np.iinfo(np.int8 if decl.dtype == "INT8" else np.int16)
            inputs.append(rng.integers(info.min, info.max + 1, size=decl.shape).astype(info.dtype))
        elif decl.dtype == "INT32":
            inputs.append(rng.integers(-1000, 1000, size=decl.shape).astype(np.int32))
        else:
            inputs.append(rng.standard_normal(decl.shape).astype(np.float32))
    return inputs
