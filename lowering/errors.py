"""Errors raised by the lowering package."""

from __future__ import annotations


class LoweringError(Exception):
    """A model (or one node of it) cannot be lowered to TOSA.

    ``node`` names the FX node (or ``None`` when the failure happens before a
    graph exists, e.g. in ``torch.export``) and ``reason`` says why.

    Example:
        >>> err = LoweringError("unsupported dtype torch.float64", node="add_1")
        >>> str(err)
        "node 'add_1': unsupported dtype torch.float64"
    """

    def __init__(self, reason: str, node: str | None = None, target: str | None = None):
        self.reason = reason
        self.node = node
        self.target = target
        where = f"node '{node}'" if node else "model"
        if target:
            where += f" ({target})"
        super().__init__(f"{where}: {reason}")
