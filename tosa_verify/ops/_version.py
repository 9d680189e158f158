"""Which TOSA version a running graph declares, for the few checks the 1.1 draft relaxes."""

from __future__ import annotations

from .registry import OpCall


def is_tosa_11(call: OpCall) -> bool:
    """True when the graph being run declares TOSA 1.1 (the draft tosa-tools writes).

    Types the 1.1 draft adds to 1.0 operators (EXT-INT64 on the data-layout ops, for one) are
    accepted only then, so 1.0 graphs keep the 1.0 ERROR_IFs.

    Example: while running a graph whose version is 1.1.0d, ``is_tosa_11(call)`` is True.
    """
    graph = getattr(call.runtime, "graph", None)
    return graph is not None and tuple(graph.version[:2]) >= (1, 1)
