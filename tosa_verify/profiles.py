"""Which TOSA 1.0 profiles and extensions a graph needs, inferred from its ops and dtypes."""

from __future__ import annotations

from collections import Counter

from .graph import Graph

_FLOAT = {"FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2"}
_INT = {"INT4", "INT8", "INT16", "INT32", "INT48"}


def profiles_and_extensions(graph: Graph) -> tuple[list[str], list[str]]:
    """Return (profiles, extensions) the graph uses, e.g. (["PRO-INT"], ["EXT-INT16"]).

    >>> profiles_and_extensions(load("int16_model.tosa"))   # doctest: +SKIP
    (['PRO-INT'], ['EXT-INT16'])
    """
    dtypes: set[str] = set()
    ops: set[str] = set()
    extensions: set[str] = set()
    for region in graph.regions:
        for block in region.blocks:
            dtypes |= {t.dtype for t in block.tensors.values()}
            for op in block.operators:
                ops.add(op.op)
                if op.op == "RESCALE" and op.attrs.get("rounding_mode") == "DOUBLE_ROUND":
                    extensions.add("EXT-DOUBLEROUND")
                if op.op == "RESCALE" and op.attrs.get("rounding_mode") == "INEXACT_ROUND":
                    extensions.add("EXT-INEXACTROUND")
    profiles = []
    if dtypes & _INT:
        profiles.append("PRO-INT")
    if dtypes & _FLOAT:
        profiles.append("PRO-FP")
    if "INT48" in dtypes or ("INT16" in dtypes and ops & {"CONV2D", "DEPTHWISE_CONV2D", "MATMUL", "TABLE"}):
        extensions.add("EXT-INT16")
    for dtype, ext in (("INT4", "EXT-INT4"), ("BF16", "EXT-BF16"), ("FP8E4M3", "EXT-FP8E4M3"), ("FP8E5M2", "EXT-FP8E5M2")):
        if dtype in dtypes:
            extensions.add(ext)
    if ops & {"FFT2D", "RFFT2D"}:
        extensions.add("EXT-FFT")
    if ops & {"COND_IF", "WHILE_LOOP"}:
        extensions.add("EXT-CONTROLFLOW")
    if ops & {"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE"}:
        extensions.add("EXT-VARIABLE")
    return profiles, sorted(extensions)


def op_histogram(graph: Graph) -> Counter:
    """Count operators by TOSA name over every block of the graph."""
    counts: Counter = Counter()
    for region in graph.regions:
        for block in region.blocks:
            counts.update(op.op for op in block.operators)
    return counts


#: operators that only declare data (no computation); counted apart so every verb's operator
#: count is the same number (``lower``, ``info``, ``check``, the diff's "N operators agree")
CONSTANT_OPS = frozenset({"CONST", "CONST_SHAPE"})


def operator_count_text(hist: Counter, noun: str = "") -> str:
    """``"12 (+30 CONST/CONST_SHAPE)"``: operators that compute, then the constant declarations.

    >>> operator_count_text(Counter({"CONV2D": 3, "RESCALE": 9, "CONST": 24, "CONST_SHAPE": 6}))
    '12 (+30 CONST/CONST_SHAPE)'
    >>> operator_count_text(Counter({"ADD": 1, "CONST": 1}), "TOSA operators")
    '1 TOSA operators (+1 CONST/CONST_SHAPE)'
    """
    consts = sum(n for op, n in hist.items() if op in CONSTANT_OPS)
    head = f"{sum(hist.values()) - consts}" + (f" {noun}" if noun else "")
    return f"{head} (+{consts} CONST/CONST_SHAPE)" if consts else head
