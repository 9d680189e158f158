"""The supported-op table, derived from the two registries (never kept by hand).

An aten overload lowers when a TOSA emitter handles it (:data:`lowering.ops.REGISTRY`, one
visitor module per family), when a pass rewrites it into ops that lower
(:data:`lowering.passes.rewrites.REWRITES`: decompositions, scalar operands, no-ops), or when
it is the ``X_copy`` variant of such an op (RemoveNoOps makes it ``X``). Each handler names
the profiles it serves; an op's profiles are those of its handlers together.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .graph_utils import op_name

aten = torch.ops.aten


@dataclass(frozen=True)
class Handler:
    """One way an op is lowered: a visitor family or a pass, the function (and the module
    defining it), the profiles it serves."""

    family: str
    function: str
    module: str
    profiles: frozenset


@dataclass(frozen=True)
class OpSupport:
    """An aten overload the lowering handles, and how."""

    name: str
    handlers: tuple[Handler, ...]

    @property
    def profiles(self) -> frozenset:
        return frozenset().union(*(h.profiles for h in self.handlers))

    @property
    def family(self) -> str:
        """The first handler's family: the visitor module when there is an emitter."""
        return self.handlers[0].family


def _copy_variants(ops) -> dict:
    """``X_copy`` overload -> ``X`` for every ``X`` in ``ops`` that has one."""
    variants = {}
    for op in ops:
        name = op._schema.name.split("::")[-1]
        packet = getattr(aten, f"{name}_copy", None) if op.namespace == "aten" else None
        if packet is not None and op._overloadname in packet.overloads():
            variants[getattr(packet, op._overloadname)] = op
    return variants


def support_table() -> dict[str, OpSupport]:
    """``{"aten.<name>.<overload>": OpSupport}`` for every aten overload that lowers.

    Example:
        >>> t = support_table()
        >>> t["aten.softmax.int"].handlers[0].family, sorted(t["aten.softmax.int"].profiles)
        ('DecomposeForTosa', ['FP', 'INT'])
        >>> sorted(t["aten.prod.dim_int"].profiles), t["aten.permute_copy.default"].family
        (['FP'], 'RemoveNoOps')
    """
    from .ops import PROFILES, REGISTRY
    from .passes.noops import RemoveNoOps
    from .passes.rewrites import REWRITES

    handlers: dict = {}
    for op, fn in REGISTRY.items():
        handlers.setdefault(op, []).append(
            Handler(fn.__module__.rsplit(".", 1)[-1], fn.__name__, fn.__module__, PROFILES[op]))
    for pass_name, table in REWRITES.items():
        for op, rw in table.items():
            handlers.setdefault(op, []).append(
                Handler(pass_name, rw.fn.__name__, rw.fn.__module__, rw.profiles))
    # aten overloads only (not the higher-order control-flow ops, not operator.getitem)
    aten_handlers = [op for op in handlers if isinstance(op, torch._ops.OpOverload)]
    for variant, base in _copy_variants(aten_handlers).items():
        if variant not in handlers:
            profiles = frozenset().union(*(h.profiles for h in handlers[base]))
            handlers[variant] = [Handler(RemoveNoOps.__name__, f"as {op_name(base)}",
                                         RemoveNoOps.__module__, profiles)]
    aten_ops = {op: hs for op, hs in handlers.items()
                if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten"}
    return {op_name(op): OpSupport(op_name(op), tuple(hs)) for op, hs in aten_ops.items()}


def supported_ops(profile: str | None = None) -> frozenset[str]:
    """Names of the aten overloads that lower in ``profile`` ("INT", "FP"; None: either).

    Example:
        >>> "aten.prod.dim_int" in supported_ops("FP"), "aten.prod.dim_int" in supported_ops("INT")
        (True, False)
    """
    return frozenset(name for name, s in support_table().items()
                     if profile is None or profile.upper() in s.profiles)
