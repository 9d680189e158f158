"""aten op -> emitter function registry."""

from __future__ import annotations

from collections.abc import Callable

REGISTRY: dict = {}


def register(*targets) -> Callable:
    """Register an emitter ``fn(emitter, node)`` for one or more aten overloads.

    Example:
        >>> import torch
        >>> @register(torch.ops.aten.special_entr.default)
        ... def _entr(em, node):
        ...     pass
        >>> torch.ops.aten.special_entr.default in REGISTRY
        True
        >>> del REGISTRY[torch.ops.aten.special_entr.default]
    """

    def deco(fn):
        for t in targets:
            REGISTRY[t] = fn
        return fn

    return deco
