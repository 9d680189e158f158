"""Which TOSA profiles and extensions a graph needs, inferred from its ops and dtypes.

TOSA 1.0 names plus the 1.1 draft's: EXT-SHAPE (shape operators), EXT-INT64, EXT-MX-COMMON with
one EXT-MX-<element type> per MX element type used (block-scaled ops and MX dtypes) and
EXT-MXFP-CONV (CONV2D_BLOCK_SCALED).
"""

from __future__ import annotations

from collections import Counter

from .dtypes import BLOCK_SCALED
from .graph import Graph
from .ops import REGISTRY as _REGISTRY  # noqa: F401 - importing the ops declares their facts
from .ops.facts import facts_of, ops_with_extension

_FLOAT = {"FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2", *BLOCK_SCALED}
_INT = {"INT4", "INT8", "INT16", "INT32", "INT48", "INT64"}
#: MX element dtype -> its 1.1 extension (each also needs EXT-MX-COMMON).
_MX_EXTENSIONS = {
    "FP4E2M1": "EXT-MX-FP4E2M1", "FP6E2M3": "EXT-MX-FP6E2M3", "FP6E3M2": "EXT-MX-FP6E3M2",
    "MXINT8": "EXT-MX-INT8",
}


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
    if "INT48" in dtypes or ("INT16" in dtypes and any(facts_of(op).int16 for op in ops)):
        extensions.add("EXT-INT16")
    for dtype, ext in (("INT4", "EXT-INT4"), ("BF16", "EXT-BF16"), ("FP8E4M3", "EXT-FP8E4M3"), ("FP8E5M2", "EXT-FP8E5M2")):
        if dtype in dtypes:
            extensions.add(ext)
    # the extensions the ops declare at registration (EXT-FFT, EXT-CONTROLFLOW, EXT-SHAPE, ...)
    for op in ops:
        extensions.update(facts_of(op).extensions)
    mx_ops = ops_with_extension("EXT-MX-COMMON")
    scaled_fp8 = _fp8_of(graph, lambda op: op in mx_ops)
    # FP8 met only as block-scaled data is EXT-MX-FP8*, not EXT-FP8*
    plain_fp8 = _fp8_of(graph, lambda op: op not in mx_ops and op != "CONST")
    extensions -= {f"EXT-{d}" for d in scaled_fp8 - plain_fp8}
    extensions |= _extensions_11(dtypes, scaled_fp8)
    return profiles, sorted(extensions)


def _fp8_of(graph: Graph, which) -> set[str]:
    """FP8 dtypes of the tensors operators ``which(op name)`` read or write."""
    return {
        d for region in graph.regions for b in region.blocks for op in b.operators if which(op.op)
        for d in (b.tensors[n].dtype for n in (*op.inputs, *op.outputs) if n in b.tensors)
        if d in ("FP8E4M3", "FP8E5M2")
    }


def _extensions_11(dtypes: set[str], scaled_fp8: set[str]) -> set[str]:
    """The TOSA 1.1 draft extensions of a graph's dtypes (``scaled_fp8``: FP8 dtypes
    used as block-scaled data, which need EXT-MX-FP8* rather than EXT-FP8*)."""
    found = set()
    if "INT64" in dtypes:
        found.add("EXT-INT64")
    mx = {ext for dtype, ext in _MX_EXTENSIONS.items() if dtype in dtypes}
    mx |= {f"EXT-MX-{d}" for d in scaled_fp8}
    # a block-scaled type needs EXT-MX-COMMON and its value type's EXT-MX-* (spec: Composite
    # Block-Scaled Type Mapping)
    mx |= {_MX_EXTENSIONS.get(v, f"EXT-MX-{v}") for v in (BLOCK_SCALED[d].value for d in dtypes & set(BLOCK_SCALED))}
    if mx or "FP8UE8M0" in dtypes:
        found |= mx | {"EXT-MX-COMMON"}
    return found


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
