"""aten op -> emitter function registry, with the TOSA profiles each emitter handles."""

from __future__ import annotations

from collections.abc import Callable

#: Both TOSA profiles the lowering targets.
ALL_PROFILES = frozenset({"INT", "FP"})

REGISTRY: dict = {}
#: Ops lowered as one TABLE in INT (filled by :func:`lowering.ops.activation.unary_function`);
#: here, in the leaf module, so the layout pass and the quantizer need no visitor module.
TABLE_OPS: set = set()
#: Ops whose value jumps (floor, round, sign...): a TABLE must hold every input value, which
#: the int8 TABLE does and the interpolating int16 TABLE (513 samples) does not (int16: a
#: GATHER from all 65536 levels, :func:`lowering.ops.activation.lookup`).
STEP_FUNCTIONS: set = set()
#: aten op -> the profiles its emitter lowers it in (an op outside them stays on the CPU).
PROFILES: dict = {}


def register(*targets, profiles=ALL_PROFILES) -> Callable:
    """Register an emitter ``fn(emitter, node)`` for one or more aten overloads.

    ``profiles`` names the TOSA profiles the emitter can lower the ops in (default: both);
    e.g. REDUCE_PRODUCT exists only for floats, so ``prod`` registers ``profiles={"FP"}``.

    Example:
        >>> import torch
        >>> @register(torch.ops.aten.special_entr.default, profiles={"FP"})
        ... def _entr(em, node):
        ...     pass
        >>> torch.ops.aten.special_entr.default in REGISTRY
        True
        >>> sorted(PROFILES[torch.ops.aten.special_entr.default])
        ['FP']
        >>> register(torch.ops.aten.special_entr.default)(_entr)
        Traceback (most recent call last):
        ...
        ValueError: aten.special_entr.default already has the emitter lowering.ops.registry._entr; cannot register _entr
        >>> del REGISTRY[torch.ops.aten.special_entr.default]
        >>> del PROFILES[torch.ops.aten.special_entr.default]
    """
    profiles = frozenset(profiles)
    unknown = profiles - ALL_PROFILES
    if unknown:
        raise ValueError(f"unknown profiles {sorted(unknown)}")

    def deco(fn):
        for t in targets:
            if t in REGISTRY:  # a second emitter would silently win by import order
                raise ValueError(f"{t} already has the emitter {REGISTRY[t].__module__}."
                                 f"{REGISTRY[t].__name__}; cannot register {fn.__name__}")
            REGISTRY[t] = fn
            PROFILES[t] = profiles
        return fn

    return deco


def table_ops() -> frozenset:
    """The ops lowered as one TABLE in INT (every ``unary_function``).

    Example:
        >>> import torch, lowering
        >>> torch.ops.aten.tanh.default in table_ops()
        True
    """
    return frozenset(TABLE_OPS)
