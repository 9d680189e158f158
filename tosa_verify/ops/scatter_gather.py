"""Scatter/gather operators (spec chapter "Scatter/Gather"): GATHER, SCATTER.

N is the batch count, K the range of an index, W the number of indices per batch and C the
number of channels moved per index. Indices are INT32 and must lie in [0, K) (a REQUIRE).
"""

from __future__ import annotations

import numpy as np

from ._layout_support import check_rank
from .registry import OpCall, register

#: in_out_t of TOSA 1.0.2 plus BOOL: BOOL arrives with TOSA 1.1, but tosa_reference_model and the
#: tosa-tools conformance generator already accept it in 1.0 graphs; the op only moves values.
GATHER_TYPES = ("INT8", "INT16", "INT32", "FP8E4M3", "FP8E5M2", "FP16", "BF16", "FP32", "BOOL")


def _indices(call: OpCall, i: int, n: int, k: int) -> np.ndarray:
    """The [N, W] index operand as int64, after the REQUIRE 0 <= k < K."""
    call.error_if(call.in_dtype(i) != "INT32", f"index_t {call.in_dtype(i)} != INT32")
    idx = call.inputs[i].astype(np.int64)
    call.require(idx.size == 0 or (idx.min() >= 0 and idx.max() < k), "0 <= k && k < K")
    return idx


@register("GATHER")
def gather(call: OpCall) -> list[np.ndarray]:
    """GATHER: ``output[n, w, c] = values[n, indices[n, w], c]``."""
    call.check_arity(2, 1)
    dtype = call.out_dtype()
    call.error_if(dtype not in GATHER_TYPES, f"in_out_t {dtype} not supported")
    call.error_if(call.in_dtype(0) != dtype, "values and output types differ")
    values_shape = tuple(call.input_decls[0].shape)
    indices_shape = tuple(call.input_decls[1].shape)
    out_shape = tuple(call.out_shape())
    check_rank(call, len(values_shape), 3, 3, "values")
    check_rank(call, len(indices_shape), 2, 2, "indices")
    check_rank(call, len(out_shape), 3, 3, "output")
    n, k, c = values_shape
    w = indices_shape[1]
    call.error_if(indices_shape[0] != n, "shape(indices)[0] != N")
    call.error_if(
        out_shape != (n, w, c), f"shape(output) {list(out_shape)} != [N, W, C] = {[n, w, c]}"
    )
    idx = _indices(call, 1, n, k)
    # Vectorized row gather: the index broadcasts over channels.
    return [np.take_along_axis(call.inputs[0], idx[:, :, None], axis=1)]


@register("SCATTER")
def scatter(call: OpCall) -> list[np.ndarray]:
    """SCATTER: ``values_in`` with rows ``indices[n, w]`` replaced by ``input[n, w, :]``.

    Each output row may be written at most once (REQUIRE), so no two indices of a batch repeat.
    """
    call.check_arity(3, 1)
    dtype = call.out_dtype()
    call.error_if(dtype not in GATHER_TYPES, f"in_out_t {dtype} not supported")
    call.error_if(
        call.in_dtype(0) != dtype or call.in_dtype(2) != dtype,
        "values_in, input and values_out types differ",
    )
    values_shape = tuple(call.input_decls[0].shape)
    indices_shape = tuple(call.input_decls[1].shape)
    input_shape = tuple(call.input_decls[2].shape)
    out_shape = tuple(call.out_shape())
    check_rank(call, len(values_shape), 3, 3, "values_in")
    check_rank(call, len(indices_shape), 2, 2, "indices")
    check_rank(call, len(input_shape), 3, 3, "input")
    check_rank(call, len(out_shape), 3, 3, "values_out")
    n, k, c = values_shape
    w = indices_shape[1]
    call.error_if(indices_shape[0] != n, "shape(indices)[0] != N")
    call.error_if(
        input_shape != (n, w, c), f"shape(input) {list(input_shape)} != [N, W, C] = {[n, w, c]}"
    )
    call.error_if(
        out_shape != (n, k, c), f"shape(values_out) {list(out_shape)} != [N, K, C] = {[n, k, c]}"
    )
    idx = _indices(call, 1, n, k)
    if w > 1 and c > 0:
        ordered = np.sort(idx, axis=1)
        call.require(
            not np.any(ordered[:, 1:] == ordered[:, :-1]), "output_modified[n,k,c] == false"
        )
    out = call.inputs[0].copy()
    out[np.arange(n)[:, None], idx] = call.inputs[2]
    return [out]
