"""Small text helpers the terminal tables share (drift, diff, the check report).

>>> clip("a_very_long_tensor_name", 8), db(float("inf")), json_float(float("nan"))
('…or_name', 'inf', 'nan')
>>> one_line("exited with code -6:\n  assertion failed\n", 30)
'exited with code -6: assertio…'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, keeping its end (tensor names differ at the end)."""
    return text if len(text) <= width else "…" + text[-(width - 1):]


def one_line(text: str, width: int = 240) -> str:
    """``text`` (e.g. a crashed tool's output) on one line: its whitespace runs, newlines
    included, made one space, cut to ``width`` characters (keeping its start, which says what
    failed)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def db(x: float | None) -> str:
    """A decibel figure with one decimal; ``-`` for none/NaN, ``inf``/``-inf`` for infinities."""
    if x is None or math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.1f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """Aligned text table lines: header, rule, rows; columns in ``right`` right-aligned.

    >>> table(("a", "b"), [("x", "10")], right={1})
    ['a   b', '-  --', 'x  10']
    """
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'>' if i in right else '<'}{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header), "  ".join("-" * w for w in widths), *(fmt.format(*r) for r in rows)]
    return [line.rstrip() for line in lines]


def json_float(value: Any) -> Any:
    """Non-finite floats as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
