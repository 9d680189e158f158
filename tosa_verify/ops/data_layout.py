"""Data layout operators (spec chapter "Data Layout"): CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE,
TRANSPOSE, and from the TOSA 1.1 draft RESHAPE_BLOCK_SCALED.

These ops move values without converting them, so results are exact for every dtype. PAD's
padding, RESHAPE's shape, SLICE's start/size and TILE's multiples are SHAPE operands (int64
arrays produced by CONST_SHAPE).
"""

from __future__ import annotations

import math

import numpy as np

from ._layout_support import check_rank, check_same_dtype, shape_input
from ._levels import MAX_RANK, MAX_TENSOR_LIST_SIZE
from ._mx import MX_ELEMENT_TYPES, SCALE_TYPE, block_size, scale_shape
from ._version import is_tosa_11
from .registry import OpCall, register, register_prepare

#: in_out_t of every data layout op in TOSA 1.0 (PRO-INT, PRO-FP, EXT-INT16, EXT-BF16, EXT-FP8*).
LAYOUT_TYPES = ("BOOL", "INT8", "INT16", "INT32", "FP8E4M3", "FP8E5M2", "FP16", "BF16", "FP32")


def _layout_types(call: OpCall) -> tuple[str, ...]:
    """LAYOUT_TYPES, plus INT64 (EXT-INT64) in a TOSA 1.1 graph."""
    return LAYOUT_TYPES + ("INT64",) if is_tosa_11(call) else LAYOUT_TYPES


@register("CONCAT")
def concat(call: OpCall) -> list[np.ndarray]:
    """CONCAT: join a list of tensors of equal rank along ``axis``."""
    return [np.concatenate(call.inputs, axis=_concat_checks(call))]


@register_prepare("CONCAT")
def prepare_concat(call: OpCall):
    """CONCAT with its (static) checks made once."""
    axis = _concat_checks(call)
    return lambda run: [np.concatenate(run.inputs, axis=axis)]


def _concat_checks(call: OpCall) -> int:
    """The ERROR_IFs of CONCAT (declarations and attributes); returns ``axis``."""
    n = len(call.inputs)
    call.error_if(n == 0, "input1 == []")
    if len(call.output_decls) != 1:
        call.fail(f"output count {len(call.output_decls)} != 1")
    if n > MAX_TENSOR_LIST_SIZE:
        call.fail(f"tensor_list_shape(input1) = {n} > MAX_TENSOR_LIST_SIZE")
    check_same_dtype(call, _layout_types(call), *range(n))
    shapes = [tuple(d.shape) for d in call.input_decls]
    out_shape = tuple(call.out_shape())
    rank = len(shapes[0])
    check_rank(call, rank, 1, MAX_RANK, "input1[0]")
    check_rank(call, len(out_shape), 1, MAX_RANK, "output")
    axis = int(call.attrs.get("axis", 0))
    call.error_if(axis < 0 or axis >= max(1, rank), "axis < 0 || axis >= max(1, rank(shapes1[0]))")
    axis_sum = 0
    for shape in shapes:
        call.error_if(len(shape) != rank, "rank(shapes1[shape_index]) != rank(shapes1[0])")
        for i, dim in enumerate(shape):
            if i == axis:
                axis_sum += dim
            else:
                call.error_if(
                    dim != shapes[0][i],
                    "shapes1[shape_index][axis_index] != shapes1[0][axis_index]",
                )
    call.error_if(len(out_shape) != rank, "rank(shape) != rank(shapes1[0])")
    call.error_if(axis_sum != out_shape[axis], "axis_sum != shape[axis]")
    return axis


@register("PAD", operands=("input1", "padding", "pad_const"))
def pad(call: OpCall) -> list[np.ndarray]:
    """PAD: surround ``input1`` with ``pad_const``; ``padding`` is [start0, end0, start1, ...]."""
    out_shape, inner = _pad_checks(call)
    return [_padded(call.inputs[0], np.asarray(call.inputs[2]).reshape(-1)[0], out_shape, inner)]


@register_prepare("PAD")
def prepare_pad(call: OpCall):
    """PAD with constant ``padding`` and ``pad_const``: every check once; a run only pads."""
    if len(call.inputs) != 3 or call.inputs[1] is None or call.inputs[2] is None:
        return None
    out_shape, inner = _pad_checks(call)
    pad_value = np.asarray(call.inputs[2]).reshape(-1)[0]
    return lambda run: [_padded(run.inputs[0], pad_value, out_shape, inner)]


def _padded(x: np.ndarray, pad_value, out_shape: tuple[int, ...], inner: tuple[slice, ...]) -> np.ndarray:
    out = np.full(out_shape, pad_value, dtype=x.dtype)
    out[inner] = x
    return out


def _pad_checks(call: OpCall) -> tuple[tuple[int, ...], tuple[slice, ...]]:
    """The ERROR_IFs of PAD (declarations and the padding operand); returns the output shape and
    where ``input1`` goes in it."""
    call.check_arity(3, 1)
    check_same_dtype(call, _layout_types(call), 0, 2)
    in_shape = tuple(call.input_decls[0].shape)
    out_shape = tuple(call.out_shape())
    check_rank(call, len(in_shape), 1, MAX_RANK, "input1")
    check_rank(call, len(out_shape), 1, MAX_RANK, "output")
    call.error_if(len(out_shape) != len(in_shape), "rank(shape) != rank(shape1)")
    padding = shape_input(call, 1, 2 * len(in_shape), "padding")
    call.error_if(tuple(call.input_decls[2].shape) != (1,), "shape(pad_const) != [1]")
    for i in range(len(out_shape)):
        before, after = padding[2 * i], padding[2 * i + 1]
        call.error_if(before < 0 or after < 0, "padding[i * 2] < 0 || padding[(i * 2) + 1] < 0")
        call.error_if(
            out_shape[i] != before + in_shape[i] + after,
            "shape[i] != padding[i * 2] + shape1[i] + padding[(i * 2) + 1]",
        )
    return out_shape, tuple(slice(padding[2 * i], padding[2 * i] + in_shape[i]) for i in range(len(in_shape)))


@register("RESHAPE", operands=("input1", "shape"))
def reshape(call: OpCall) -> list[np.ndarray]:
    """RESHAPE: same values in row-major order, new shape given by the ``shape`` operand."""
    return [np.reshape(call.inputs[0], _reshape_checks(call))]


@register_prepare("RESHAPE")
def prepare_reshape(call: OpCall):
    """RESHAPE with a constant shape operand: every check once; a run only reshapes."""
    shape = _checked_if_constant(call, _reshape_checks)
    return None if shape is None else lambda run: [run.inputs[0].reshape(shape)]  # (the method: no dispatch)


def _checked_if_constant(call: OpCall, checks) -> tuple | None:
    """``checks(call)`` as a tuple when the op's second (SHAPE) operand is a constant, the
    prepare of RESHAPE and TILE; None (keep the op function) when it is computed."""
    if len(call.inputs) != 2 or call.inputs[1] is None:
        return None
    return tuple(checks(call))


def _reshape_checks(call: OpCall) -> tuple[int, ...]:
    """The ERROR_IFs of RESHAPE (declarations and the shape operand); returns the new shape."""
    call.check_arity(2, 1)
    check_same_dtype(call, _layout_types(call), 0)
    in_decl = call.input_decls[0]
    out_shape = tuple(call.out_shape())
    check_rank(call, len(in_decl.shape), 0, MAX_RANK, "input1")
    check_rank(call, len(out_shape), 0, MAX_RANK, "output")
    new_shape = shape_input(call, 1, len(out_shape), "shape")
    # The shape operand is the output's shape: it must agree with the declared output.
    if tuple(new_shape) != out_shape:
        call.fail(f"shape operand {new_shape} != output shape {list(out_shape)}")
    out_size = math.prod(out_shape)
    call.error_if(in_decl.size != out_size, "tensor_size(shape1) != tensor_size(shape)")
    return out_shape


@register("REVERSE")
def reverse(call: OpCall) -> list[np.ndarray]:
    """REVERSE: reverse the order of elements along ``axis``."""
    return [np.ascontiguousarray(np.flip(call.inputs[0], axis=_reverse_checks(call)))]


@register_prepare("REVERSE")
def prepare_reverse(call: OpCall):
    """REVERSE with its (static) checks made once."""
    # np.flip's view as a slice made once (np.flip normalizes its axis on every call)
    backwards = (slice(None),) * _reverse_checks(call) + (slice(None, None, -1),)
    return lambda run: [run.inputs[0][backwards].copy()]  # a C-contiguous copy, as above


def _reverse_checks(call: OpCall) -> int:
    """The ERROR_IFs of REVERSE; returns ``axis``."""
    call.check_arity(1, 1)
    check_same_dtype(call, _layout_types(call), 0)
    shape = tuple(call.input_decls[0].shape)
    check_rank(call, len(shape), 1, MAX_RANK, "input1")
    call.error_if(tuple(call.out_shape()) != shape, "shape(output) != shape(input1)")
    axis = int(call.attrs.get("axis", 0))
    call.error_if(axis < 0 or axis >= len(shape), "axis < 0 || axis >= rank(shape)")
    return axis


@register("SLICE", operands=("input1", "start", "size"))
def slice_(call: OpCall) -> list[np.ndarray]:
    """SLICE: the block of ``input1`` starting at ``start`` with extent ``size``."""
    return [np.ascontiguousarray(call.inputs[0][_slice_checks(call)])]


@register_prepare("SLICE")
def prepare_slice(call: OpCall):
    """SLICE with constant ``start`` and ``size``: every check once; a run only slices."""
    if len(call.inputs) != 3 or call.inputs[1] is None or call.inputs[2] is None:
        return None
    window = _slice_checks(call)
    return lambda run: [np.ascontiguousarray(run.inputs[0][window])]


def _slice_checks(call: OpCall) -> tuple[slice, ...]:
    """The ERROR_IFs of SLICE (declarations and the start/size operands); returns the window."""
    call.check_arity(3, 1)
    check_same_dtype(call, _layout_types(call), 0)
    in_shape = tuple(call.input_decls[0].shape)
    out_shape = tuple(call.out_shape())
    rank = len(in_shape)
    check_rank(call, rank, 1, MAX_RANK, "input1")
    check_rank(call, len(out_shape), 1, MAX_RANK, "output")
    start = shape_input(call, 1, None, "start")
    size = shape_input(call, 2, None, "size")
    call.error_if(
        rank != len(start) or rank != len(size),
        "rank(shape1) != length(start) || rank(shape1) != length(size)",
    )
    call.error_if(rank != len(out_shape), "rank(shape1) != rank(shape)")
    for i in range(rank):
        call.error_if(start[i] < 0, "start[index] < 0")
        call.error_if(size[i] <= 0, "size[index] <= 0")
        call.error_if(
            start[i] + size[i] > in_shape[i], "start[index] + size[index] > shape1[index]"
        )
        call.error_if(out_shape[i] != size[i], "shape[index] != size[index]")
    return tuple(slice(s, s + n) for s, n in zip(start, size, strict=True))


@register("TILE", operands=("input1", "multiples"))
def tile(call: OpCall) -> list[np.ndarray]:
    """TILE: replicate ``input1`` ``multiples[i]`` times along each dimension i."""
    return [np.tile(call.inputs[0], _tile_checks(call))]


@register_prepare("TILE")
def prepare_tile(call: OpCall):
    """TILE with constant ``multiples``: every check once; a run only tiles."""
    multiples = _checked_if_constant(call, _tile_checks)
    return None if multiples is None else lambda run: [np.tile(run.inputs[0], multiples)]


def _tile_checks(call: OpCall):
    """The ERROR_IFs of TILE (declarations and the multiples operand); returns ``multiples``."""
    call.check_arity(2, 1)
    check_same_dtype(call, _layout_types(call), 0)
    in_shape = tuple(call.input_decls[0].shape)
    out_shape = tuple(call.out_shape())
    check_rank(call, len(in_shape), 1, MAX_RANK, "input1")
    check_rank(call, len(out_shape), 1, MAX_RANK, "output")
    call.error_if(len(in_shape) != len(out_shape), "rank(shape1) != rank(shape)")
    multiples = shape_input(call, 1, len(in_shape), "multiples")
    for i in range(len(in_shape)):
        call.error_if(
            in_shape[i] * multiples[i] != out_shape[i], "shape1[i] * multiples[i] != shape[i]"
        )
    return multiples


@register("TRANSPOSE")
def transpose(call: OpCall) -> list[np.ndarray]:
    """TRANSPOSE: output dimension i is input dimension ``perms[i]``."""
    return [np.ascontiguousarray(np.transpose(call.inputs[0], _transpose_checks(call)))]


@register_prepare("TRANSPOSE")
def prepare_transpose(call: OpCall):
    """TRANSPOSE with its (static) checks made once."""
    perms = _transpose_checks(call)
    perms = tuple(perms)
    return lambda run: [run.inputs[0].transpose(perms).copy()]  # a C-contiguous copy, as before


def _transpose_checks(call: OpCall) -> list[int]:
    """The ERROR_IFs of TRANSPOSE; returns ``perms``."""
    call.check_arity(1, 1)
    check_same_dtype(call, _layout_types(call), 0)
    in_shape = tuple(call.input_decls[0].shape)
    out_shape = tuple(call.out_shape())
    rank = len(in_shape)
    check_rank(call, rank, 1, MAX_RANK, "input1")
    check_rank(call, len(out_shape), 1, MAX_RANK, "output")
    call.error_if(rank != len(out_shape), "rank(shape1) != rank(shape)")
    out_size = math.prod(out_shape)
    if not -(1 << 63) <= out_size < 1 << 63:  # (numpy's int64 product, as this check always was)
        out_size = int(np.prod(out_shape, dtype=np.int64))
    if call.input_decls[0].size != out_size:
        call.fail("tensor_size(shape1) != tensor_size(shape)")
    perms = [int(p) for p in call.attrs.get("perms", [])]
    if len(perms) != rank:
        call.fail(f"length(perms) = {len(perms)} != rank(shape1)")
    used = [False] * rank
    for p in perms:  # (each check an if in front of error_if: a call only for a failing one)
        if p >= rank:
            call.fail("index >= rank(shape1)")
        if p < 0:
            call.fail("index < 0")
        if used[p]:
            call.fail("indexes_used[index] == true")
        used[p] = True
    if [in_shape[p] for p in perms] != list(out_shape):
        call.fail("shape1[perms[i]] != shape[i]")
    return perms


@register("RESHAPE_BLOCK_SCALED", extensions=("EXT-MX-COMMON",))
def reshape_block_scaled(call: OpCall) -> list[np.ndarray]:
    """RESHAPE_BLOCK_SCALED (TOSA 1.1): RESHAPE of a tensor list (data, optional block scales).

    Inputs ``input[0], [input[1],] new_value_shape``; with block_size 32 the scales are reshaped
    to ``new_value_shape`` with the innermost dimension divided by 32.
    """
    input_len = len(call.inputs) - 1
    call.error_if(input_len not in (1, 2), "input_len != 1 && input_len != 2")
    call.error_if(len(call.output_decls) != input_len, "output_len != input_len")
    call.check_arity(input_len + 1, input_len)
    size = block_size(call)
    call.error_if(input_len == 1 and size != 1, "(input_len == 1) && (block_size != 1)")
    call.error_if(input_len == 2 and size == 1, "(input_len == 2) && (block_size == 1)")
    value_shape = tuple(call.input_decls[0].shape)
    out_shape = tuple(call.out_shape(0))
    new_shape = tuple(shape_input(call, input_len, len(out_shape), "new_value_shape"))
    if new_shape != out_shape:
        call.fail(f"new_value_shape {list(new_shape)} != shape(output[0]) {list(out_shape)}")
    check_rank(call, len(value_shape), 0, MAX_RANK, "input[0]")
    check_rank(call, len(out_shape), 0, MAX_RANK, "output[0]")
    in_size = int(np.prod(value_shape, dtype=np.int64))
    call.error_if(in_size != int(np.prod(new_shape, dtype=np.int64)), "tensor_size(value_shape1) != tensor_size(new_value_shape)")
    if input_len == 1:
        check_same_dtype(call, _layout_types(call), 0)
        return [np.reshape(call.inputs[0], out_shape)]
    dtype = call.out_dtype(0)
    if dtype not in MX_ELEMENT_TYPES or call.in_dtype(0) != dtype:
        call.fail(f"in_out_t {dtype} is not an MX element type")
    for dt, what in ((call.in_dtype(1), "input[1]"), (call.out_dtype(1), "output[1]")):
        if dt != SCALE_TYPE:
            call.fail(f"{what} is {dt}, not {SCALE_TYPE}")
    s_shape = tuple(call.input_decls[1].shape)
    call.error_if(len(value_shape) == 0 or len(new_shape) == 0, "rank(value_shape1) == 0 || rank(new_value_shape) == 0")
    call.error_if(len(value_shape) != len(s_shape), "rank(value_shape1) != rank(scale_shape1)")
    call.error_if(value_shape[-1] % size != 0, "(value_shape1_last % block_size) != 0")
    call.error_if(new_shape[-1] % size != 0, "(new_value_shape_last % block_size) != 0")
    call.error_if(s_shape[-1] != value_shape[-1] // size, "scale_shape1[-1] != (value_shape1_last / block_size)")
    new_scale_shape = scale_shape(new_shape, size)
    call.error_if(
        int(np.prod(s_shape, dtype=np.int64)) != int(np.prod(new_scale_shape, dtype=np.int64)),
        "tensor_size(scale_shape1) != tensor_size(new_scale_shape)",
    )
    call.error_if(tuple(call.out_shape(1)) != new_scale_shape, "shape(output[1]) != new_scale_shape")
    return [np.reshape(call.inputs[0], new_shape), np.reshape(call.inputs[1], new_scale_shape)]
