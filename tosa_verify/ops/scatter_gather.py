"""Scatter/gather operators (spec chapter "Scatter/Gather"): GATHER, SCATTER, and from the TOSA
1.1 draft ROW_GATHER and ROW_GATHER_BLOCK_SCALED.

N is the batch count, K the range of an index, W the number of indices per batch and C the
number of channels moved per index. Indices are INT32 and must lie in [0, K) (a REQUIRE).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import BLOCK_SCALED, dtype_info
from ._int64 import int64_if_11
from ._layout_support import check_rank
from ._mx import MX_ELEMENT_TYPES, SCALE_TYPE, block_size, scale_shape
from .registry import OpCall, register, register_prepare

#: in_out_t of TOSA 1.0.2 plus BOOL: BOOL arrives with TOSA 1.1, but tosa_reference_model and the
#: tosa-tools conformance generator already accept it in 1.0 graphs; the op only moves values.
GATHER_TYPES = ("INT8", "INT16", "INT32", "FP8E4M3", "FP8E5M2", "FP16", "BF16", "FP32", "BOOL")


def _indices(call: OpCall, i: int, n: int, k: int) -> np.ndarray:
    """The [N, W] index operand as int64, after the REQUIRE 0 <= k < K."""
    # TOSA 1.1 (EXT-INT64): i64_t indices, and i64_t values (with i64_t indices only)
    index_types = ("INT32", *int64_if_11(call)) if call.out_dtype() != "INT64" else ("INT64",)
    if call.in_dtype(i) not in index_types:
        call.fail(f"index_t {call.in_dtype(i)} not in {index_types}")
    idx = call.inputs[i].astype(np.int64)
    call.require(idx.size == 0 or (idx.min() >= 0 and idx.max() < k), "0 <= k && k < K")
    return idx


@register("GATHER", operands=("values", "indices"))
def gather(call: OpCall) -> list[np.ndarray]:
    """GATHER: ``output[n, w, c] = values[n, indices[n, w], c]``."""
    n, k, _ = _gather_checks(call)
    idx = _indices(call, 1, n, k)
    # Vectorized row gather: the index broadcasts over channels.
    return [np.take_along_axis(call.inputs[0], idx[:, :, None], axis=1)]


@register_prepare("GATHER")
def prepare_gather(call: OpCall):
    """GATHER with its declaration checks made once; constant indices (an embedding table's
    look-up of fixed rows) are checked once too and become one row ``take`` per run."""
    n, k, c = _gather_checks(call)
    if call.inputs[1] is None:
        def gather_kernel(run: OpCall) -> list[np.ndarray]:
            idx = _indices(run, 1, n, k)
            return [np.take_along_axis(run.inputs[0], idx[:, :, None], axis=1)]

        return gather_kernel
    idx = _indices(call, 1, n, k)
    w = idx.shape[1]
    # row (b, idx[b, j]) of the [N*K, C] view of values, for every output row (b, j)
    rows = (np.arange(n, dtype=np.int64)[:, None] * k + idx).reshape(-1)
    return lambda run: [run.inputs[0].reshape(n * k, c).take(rows, axis=0).reshape(n, w, c)]


def _gather_checks(call: OpCall) -> tuple[int, int, int]:
    """The declaration ERROR_IFs of GATHER; returns (N, K, C)."""
    call.check_arity(2, 1)
    dtype = call.out_dtype()
    if dtype not in (*GATHER_TYPES, *int64_if_11(call)):
        call.fail(f"in_out_t {dtype} not supported")
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
    if out_shape != (n, w, c):
        call.fail(f"shape(output) {list(out_shape)} != [N, W, C] = {[n, w, c]}")
    return n, k, c


@register("SCATTER", operands=("values_in", "indices", "input"))
def scatter(call: OpCall) -> list[np.ndarray]:
    """SCATTER: ``values_in`` with rows ``indices[n, w]`` replaced by ``input[n, w, :]``.

    Each output row may be written at most once (REQUIRE), so no two indices of a batch repeat.
    """
    call.check_arity(3, 1)
    dtype = call.out_dtype()
    if dtype not in (*GATHER_TYPES, *int64_if_11(call)):
        call.fail(f"in_out_t {dtype} not supported")
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
    if input_shape != (n, w, c):
        call.fail(f"shape(input) {list(input_shape)} != [N, W, C] = {[n, w, c]}")
    if out_shape != (n, k, c):
        call.fail(f"shape(values_out) {list(out_shape)} != [N, K, C] = {[n, k, c]}")
    idx = _indices(call, 1, n, k)
    if w > 1 and c > 0:
        ordered = np.sort(idx, axis=1)
        call.require(
            not np.any(ordered[:, 1:] == ordered[:, :-1]), "output_modified[n,k,c] == false"
        )
    out = call.inputs[0].copy()
    out[np.arange(n)[:, None], idx] = call.inputs[2]
    return [out]


#: in_out_t of ROW_GATHER (TOSA 1.1): GATHER's types, INT64 and the block-scaled types (a plain
#: FP4/FP6/MXINT8 tensor is not one: the reference model rejects it too).
ROW_GATHER_TYPES = (*GATHER_TYPES, "INT64", *BLOCK_SCALED)


def _row_count(call: OpCall, i: int) -> int:
    """The i32_t [1] ``row_count`` operand; ERROR_IF(row_count < 1)."""
    if call.in_dtype(i) != "INT32":
        call.fail(f"row_count is {call.in_dtype(i)}, not i32_t")
    call.error_if(call.inputs[i].size != 1, "shape(row_count) != [1]")
    count = int(call.inputs[i].reshape(-1)[0])
    call.error_if(count < 1, "row_count < 1")
    return count


def _row_indices(call: OpCall, i: int, n: int, k: int, rows: int) -> np.ndarray:
    """The [N, W] index operand (i32_t or i64_t) after REQUIRE(0 <= k && k + row_count <= K)."""
    if call.in_dtype(i) not in ("INT32", "INT64"):
        call.fail(f"index_t {call.in_dtype(i)} not i32_t/i64_t")
    shape = tuple(call.input_decls[i].shape)
    check_rank(call, len(shape), 2, 2, "indices")
    call.error_if(shape[0] != n, "shape(indices)[0] != N")
    idx = call.inputs[i].astype(np.int64)
    call.require(idx.size == 0 or (idx.min() >= 0 and idx.max() + rows <= k), "0 <= k && (k+row_count) <= K")
    return idx


def _gather_rows(values: np.ndarray, idx: np.ndarray, rows: int) -> np.ndarray:
    """``out[n, w * rows + r, :] = values[n, idx[n, w] + r, :]``."""
    n, w = idx.shape
    taken = (idx[:, :, None] + np.arange(rows)).reshape(n, w * rows)
    return np.take_along_axis(values, taken[:, :, None], axis=1)


def _check_row_gather_shapes(call: OpCall, values: int, output: int, rows: int, w: int) -> tuple[int, int, int]:
    """Rank-3 [N, K, C] values and [N, W * row_count, C] output; returns (N, K, C)."""
    values_shape = tuple(call.input_decls[values].shape)
    out_shape = tuple(call.out_shape(output))
    check_rank(call, len(values_shape), 3, 3, "values")
    check_rank(call, len(out_shape), 3, 3, "output")
    n, k, c = values_shape
    if out_shape != (n, w * rows, c):
        call.fail(f"shape(output) {list(out_shape)} != [N, W*row_count, C] = {[n, w * rows, c]}")
    return n, k, c


@register("ROW_GATHER", operands=("values", "indices", "row_count"))
def row_gather(call: OpCall) -> list[np.ndarray]:
    """ROW_GATHER (TOSA 1.1): ``row_count`` consecutive rows from each index.

    ``output[n, w*row_count + r, c] = values[n, indices[n, w] + r, c]``; a block-scaled element
    moves with its scale (the working array carries both).
    """
    call.check_arity(3, 1)
    dtype = call.out_dtype()
    if dtype not in ROW_GATHER_TYPES:
        call.fail(f"in_out_t {dtype} not supported")
    call.error_if(call.in_dtype(0) != dtype, "values and output types differ")
    rows = _row_count(call, 2)
    w = call.input_decls[1].shape[-1] if call.input_decls[1].shape else 0
    n, k, c = _check_row_gather_shapes(call, 0, 0, rows, w)
    block = dtype_info(dtype).block
    if block > 0 and c % block != 0:
        call.fail(f"is_block_scale<in_out_t>() && C % {block} != 0")
    idx = _row_indices(call, 1, n, k, rows)
    return [_gather_rows(call.inputs[0], idx, rows)]


@register("ROW_GATHER_BLOCK_SCALED", extensions=("EXT-MX-COMMON",))
def row_gather_block_scaled(call: OpCall) -> list[np.ndarray]:
    """ROW_GATHER_BLOCK_SCALED (TOSA 1.1): ROW_GATHER of a tensor list (data, optional scales).

    Inputs ``values[0], [values[1],] indices, row_count``; with block_size 32 the scales
    [N, K, C/32] are gathered alongside the data, with block_size 1 there is no scale tensor.
    """
    values_len = len(call.inputs) - 2
    call.error_if(values_len not in (1, 2), "values_len != 1 && values_len != 2")
    call.check_arity(values_len + 2, values_len)
    size = block_size(call)
    call.error_if(values_len == 1 and size != 1, "(values_len == 1) && (block_size != 1)")
    call.error_if(values_len == 2 and size == 1, "(values_len == 2) && (block_size == 1)")
    dtype = call.out_dtype(0)
    allowed = MX_ELEMENT_TYPES if values_len == 2 else (*GATHER_TYPES, "INT64")
    if dtype not in allowed:
        call.fail(f"in_out_t {dtype} not supported")
    call.error_if(call.in_dtype(0) != dtype, "values[0] and output[0] types differ")
    rows = _row_count(call, values_len + 1)
    w = call.input_decls[values_len].shape[-1] if call.input_decls[values_len].shape else 0
    n, k, c = _check_row_gather_shapes(call, 0, 0, rows, w)
    call.error_if(c % size != 0, "C % block_size != 0")
    idx = _row_indices(call, values_len, n, k, rows)
    results = [_gather_rows(call.inputs[0], idx, rows)]
    if values_len == 2:
        for i, what in ((1, "values[1]"), (None, "output[1]")):
            dt = call.in_dtype(i) if i is not None else call.out_dtype(1)
            if dt != SCALE_TYPE:
                call.fail(f"{what} is {dt}, not {SCALE_TYPE}")
        call.error_if(
            tuple(call.input_decls[1].shape) != scale_shape((n, k, c), size),
            "shape(values[1]) != [N, K, C/block_size]",
        )
        call.error_if(
            tuple(call.out_shape(1)) != scale_shape((n, w * rows, c), size),
            "shape(output[1]) != [N, W*row_count, C/block_size]",
        )
        results.append(_gather_rows(call.inputs[1], idx, rows))
    return results
