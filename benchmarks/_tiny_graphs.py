"""Tiny ExecuTorch-lowered TOSA graphs (1-10 operators): the interpreter's fixed cost per call.

One-op reproducers from ``diff``, the differential fuzzer, conformance sweeps and operator
tests all run graphs this small, where what a call costs besides the kernels (loading, the
plan, binding, checks) is most of the time. Each model is one common torch op (or two) on a
small input, built in code with seeded weights and lowered by the peer, ExecuTorch's Arm TOSA
backend, exactly as :mod:`_small_graphs` lowers its models (its :func:`~_small_graphs.lower_model`
and on-disk cache are reused), for TOSA-1.0+INT (int8) and/or TOSA-1.0+FP.

Used by ``benchmarks/bench_interpreter.py --tiny``.

    >>> sorted(tiny_graphs(Path("/tmp/tiny")))[:2]          # doctest: +SKIP
    ['abs_FP', 'abs_INT']
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from _small_graphs import cached_graphs
from torch import nn


class Fn(nn.Module):
    """A module computing ``fn(x)`` (no weights)."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


class WithConstant(nn.Module):
    """``fn(x, c)`` for a seeded random constant ``c`` of ``shape`` (a binary op's second operand)."""

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], shape: tuple[int, ...]) -> None:
        super().__init__()
        self.fn = fn
        self.register_buffer("c", torch.randn(*shape, generator=torch.Generator().manual_seed(3)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, self.c)


def _fn(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], nn.Module]:
    return lambda: Fn(fn)


def _const(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], shape: tuple[int, ...]) -> Callable[[], nn.Module]:
    return lambda: WithConstant(fn, shape)


_BOTH, _INT, _FP = ("INT", "FP"), ("INT",), ("FP",)
_NCHW = (1, 4, 8, 8)

#: name -> (model factory, example input shape, profiles)
TINY_MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], tuple[str, ...]]] = {
    "abs": (_fn(torch.abs), (1, 16, 16), _BOTH),
    "add": (_const(torch.add, (1, 16, 16)), (1, 16, 16), _BOTH),
    "mul": (_const(torch.mul, (1, 16, 16)), (1, 16, 16), _BOTH),
    "sub": (_const(torch.sub, (1, 16)), (1, 8, 16), _INT),
    "relu": (_fn(torch.relu), _NCHW, _INT),
    "clamp": (_fn(lambda x: torch.clamp(x, -0.5, 0.5)), _NCHW, _FP),
    "sigmoid": (_fn(torch.sigmoid), _NCHW, _BOTH),
    "conv2d": (lambda: nn.Conv2d(4, 8, 3, padding=1), _NCHW, _BOTH),
    "linear": (lambda: nn.Linear(32, 16), (1, 32), _BOTH),
    "bmm": (_fn(lambda x: torch.bmm(x, x.transpose(1, 2))), (1, 8, 16), _BOTH),
    "view": (_fn(lambda x: torch.relu(x.view(1, 4, 64))), _NCHW, _INT),
    "permute": (_fn(lambda x: x.permute(0, 2, 3, 1)), _NCHW, _INT),
    "cat": (_fn(lambda x: torch.cat([x, x], dim=1)), _NCHW, _FP),
    "avg_pool": (lambda: nn.AvgPool2d(2), _NCHW, _INT),
    "max_pool": (lambda: nn.MaxPool2d(2), _NCHW, _INT),
    "mean": (_fn(lambda x: x.mean(dim=(2, 3), keepdim=True)), _NCHW, _INT),
    "sum": (_fn(lambda x: x.sum(dim=-1, keepdim=True)), (1, 8, 16), _FP),
    "softmax": (_fn(lambda x: torch.softmax(x, dim=-1)), (1, 4, 8), _FP),
    "rsqrt": (_fn(lambda x: torch.rsqrt(torch.abs(x) + 1.0)), (1, 16, 16), _FP),
    "exp": (_fn(torch.exp), (1, 16, 16), _FP),
    "where": (_fn(lambda x: torch.where(x > 0, x, x * 0.5)), (1, 16, 16), _FP),
    "slice": (_fn(lambda x: x[:, :, 2:6]), (1, 8, 8), _INT),
    "pad": (_fn(lambda x: nn.functional.pad(x, (1, 1, 1, 1))), _NCHW, _FP),
    # ops whose kernels came later (NEGATE, RESIZE, TRANSPOSE_CONV2D, TILE, REVERSE, POW,
    # REDUCE_PRODUCT, GATHER)
    "neg": (_fn(torch.neg), (1, 16, 16), _BOTH),
    "upsample_nearest": (lambda: nn.Upsample(scale_factor=2, mode="nearest"), _NCHW, _BOTH),
    "upsample_bilinear": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), _NCHW, _BOTH),
    "conv_transpose": (lambda: nn.ConvTranspose2d(4, 4, 2, stride=2), _NCHW, _BOTH),
    "repeat": (_fn(lambda x: x.repeat(1, 2, 1, 1)), _NCHW, _BOTH),
    "flip": (_fn(lambda x: torch.flip(x, [-1])), _NCHW, _BOTH),
    "pow": (_fn(lambda x: torch.pow(x.abs() + 1, 1.5)), (1, 16, 16), _FP),
    "prod": (_fn(lambda x: torch.prod(x, dim=-1)), (1, 8, 16), _FP),
    "index_select": (_fn(lambda x: torch.index_select(x, 1, torch.tensor([0, 2, 4]))), (1, 8, 16), _INT),
    "floordiv": (_fn(lambda x: torch.floor_divide(x, 3.0)), (1, 16, 16), _FP),
}


def tiny_graphs(cache: Path, progress: Callable[[str], None] | None = None,
                lower_missing: bool = True) -> dict[str, bytes]:
    """Every (model, profile) of :data:`TINY_MODELS` as TOSA bytes, by ``"<model>_<profile>"``
    (cached in ``cache``; see :func:`_small_graphs.cached_graphs` for what is left out).

    >>> tiny_graphs(Path("/tmp/tiny"))["abs_INT"][4:8]     # doctest: +SKIP
    b'TOSA'
    """
    wanted = {f"{name}_{profile}": (name, factory, shape, profile)
              for name, (factory, shape, profiles) in TINY_MODELS.items() for profile in profiles}
    return cached_graphs(wanted, cache, progress, lower_missing)
