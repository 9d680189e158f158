"""Helpers shared by the tensor operators (:mod:`.tensor_ops`, :mod:`.pooling`): attribute
decoding, zero points, exact integer accumulation and the tap/patch geometry of windows.

Integer dot products are exact: zero points are subtracted in int64, then the products are summed
in the cheapest numpy dtype that a bound proves exact (see :func:`_exact_dtype`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Sequence

import numpy as np

from ..dtypes import dtype_info
from ..numerics import int_range, saturate, wrap
from .registry import OpCall

INT64 = np.int64
F64 = np.float64


def _quiet(fn):
    """Run ``fn`` with numpy floating-point warnings off: inf/NaN data is legitimate input."""

    @functools.wraps(fn)
    def wrapper(call: OpCall, *args) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return fn(call, *args)

    return wrapper


def _level(call: OpCall, values: Sequence[int], limit: int, what: str) -> None:
    """Level 8K LEVEL_CHECK(value <= limit) for each of ``values``."""
    if values and max(values) > limit:  # (any value over the limit)
        call.fail(f"level 8K: {what} > {limit}")


#: GEMMs below this many multiply-adds run on one BLAS thread (see :func:`_gemm`).
SMALL_GEMM = 1 << 26
#: ... and below this many OpenBLAS uses one thread by itself (its SMP threshold, 65536 times
#: GEMM_MULTITHREAD_THRESHOLD 4), so limiting its threads would only cost time.
TINY_GEMM = 1 << 18
_BLAS_CONTROLLER: list = []  # lazily created threadpoolctl.ThreadpoolController (or None)


def _blas_controller():
    if not _BLAS_CONTROLLER:
        try:
            import threadpoolctl

            _BLAS_CONTROLLER.append(threadpoolctl.ThreadpoolController())
        except Exception:  # noqa: BLE001 - optional: without it BLAS keeps its own threading
            _BLAS_CONTROLLER.append(None)
    return _BLAS_CONTROLLER[0]


def _gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``; small products run on a single BLAS thread.

    Network layers are many small GEMMs (MobileNetV2's largest is ~20M multiply-adds), where
    OpenBLAS threads gain little and, on a busy machine, spin-wait so badly that a layer can run
    ten times slower. Big products keep BLAS's default threading.
    """
    macs = a.size * b.shape[-1]  # multiply-adds of a @ b
    if a.dtype.kind != "f" or macs >= SMALL_GEMM:
        return np.matmul(a, b)
    with _one_blas_thread(macs):
        return np.matmul(a, b)


def _one_blas_thread(macs: int):
    """A context running BLAS on one thread, for a product of ``macs`` multiply-adds below
    :data:`SMALL_GEMM`; nothing to do (and no threadpoolctl call, which costs more than a small
    product) below :data:`TINY_GEMM`."""
    controller = _blas_controller() if macs >= TINY_GEMM else None
    return contextlib.nullcontext() if controller is None else controller.limit(limits=1, user_api="blas")


def _is_float(dtype: str) -> bool:
    return dtype_info(dtype).is_float


def _ints(call: OpCall, name: str, length: int) -> list[int]:
    """An integer-list attribute of exactly ``length`` entries (ERROR_IF otherwise)."""
    value = call.attrs.get(name)
    if value is None:
        call.fail(f"missing attribute {name}")
    value = [int(v) for v in value]
    if len(value) != length:
        call.fail(f"length({name}) != {length}")
    return value


def _check_rank(call: OpCall, shape: Sequence[int], rank: int, what: str) -> None:
    if len(shape) != rank:
        call.fail(f"rank({what}) != {rank}")


def _zero_point(call: OpCall, i: int, dtype: str, what: str) -> int | float:
    """The scalar value of zero-point input ``i`` (shape [1], element type ``dtype``)."""
    decl = call.input_decls[i]
    if decl.dtype != dtype:
        call.fail(f"{what} element type {decl.dtype} != {dtype}")
    shape = decl.shape
    if shape != (1,) and tuple(shape) != (1,):  # (a tuple compared as it is, a list converted)
        call.fail(f"shape({what}) != [1]")
    value = call.inputs[i]
    value = value.item(0) if type(value) is np.ndarray else value.reshape(-1)[0]  # (one numpy call)
    return float(value) if _is_float(dtype) else int(value)


def _check_zero_point(call: OpCall, zp: int | float, dtype: str, what: str) -> None:
    """Spec: ``ERROR_IF(!is_same<t, i8_t>() && zp != 0)`` (a NaN zero point is also not 0)."""
    if dtype != "INT8" and not zp == 0:
        call.fail(f"!is_same<{dtype}, i8_t>() && {what} != 0")


def _exact_dtype(terms: int, max_a: int, max_b: int) -> tuple[type, int]:
    """The numpy dtype in which a sum of ``terms`` integer products is computed exactly, and the
    bound on |sum| that justifies it.

    Every partial sum of ``sum_k a_k * b_k`` (in any order, with or without FMA) is bounded by
    ``sum_k |a_k| |b_k| <= terms * max|a| * max|b|`` (callers that know the weights pass
    ``terms=1, max_b=max_n sum_k |b_kn|``, the tighter ``max|a| * sum_k |b_k|``, see
    :func:`_l1_max`). When that bound is below 2**24 every
    partial sum is an integer exactly representable in float32, below 2**53 in float64, so BLAS
    returns the exact integer result whatever its blocking and summation order. Otherwise we fall
    back to int64, which holds every intermediate the spec allows (int16 x int16 products times
    any realistic kernel size stay far below 2**63).
    """
    bound = terms * max_a * max_b
    if bound < 1 << 24:
        return np.float32, bound
    if bound < 1 << 53:
        return F64, bound
    return INT64, bound


def _l1_max(shifted_w: np.ndarray, axis: int) -> int:
    """max over output channels of ``sum |w|`` over the products one output sums (every axis
    but ``axis``, the output channel's): with ``max|x|`` it bounds every partial sum of a
    convolution output, ``|sum_k x_k w_k| <= max|x| * sum_k |w_k|`` (see :func:`_exact_dtype`)."""
    if shifted_w.size == 0:
        return 0
    magnitudes = np.abs(shifted_w, dtype=INT64)  # (an int8 weight widened inside the ufunc: |-128|)
    moved = magnitudes if axis == 0 else np.moveaxis(magnitudes, axis, 0)
    # (the ufuncs' reduce: .sum/.max add a Python wrapper each, per prepared convolution)
    return int(np.maximum.reduce(np.add.reduce(moved.reshape(moved.shape[0], -1), axis=1, dtype=INT64)))


def _finish_int(acc: np.ndarray, bias: np.ndarray, out_dtype: str, bound: int) -> np.ndarray:
    """``out = static_cast<out_t>(acc); out = apply_add_s<out_t>(out, bias)`` for INT32/INT48.

    ``acc`` holds exact integers with ``|acc| <= bound``. Overflow is a REQUIRE in the spec; the
    reference model wraps INT32 and saturates INT48, and we do the same so our outputs stay
    bit-exact with it.
    """
    working = dtype_info(out_dtype).working
    lo, hi = int_range(out_dtype)
    if _one_pass_finish(bias, out_dtype, bound, acc.dtype):
        # acc + bias is exact in acc's dtype and cannot leave out_t's range: no int64 detour,
        # and one pass (the sum is cast to out_t as it is written; the value is an integer, so
        # the cast is exact)
        return np.add(acc, bias.astype(acc.dtype), out=np.empty(acc.shape, working), casting="unsafe")
    out = acc.astype(INT64)
    out += bias.astype(INT64)
    if out.size and (int(out.min()) < lo or int(out.max()) > hi):
        out = wrap(out, out_dtype) if out_dtype == "INT32" else saturate(out, out_dtype)
    return out.astype(working)


def _one_pass_finish(bias: np.ndarray, out_dtype: str, bound: int, dt) -> bool:
    """``acc + bias`` (``|acc| <= bound``) is exact in ``dt`` and within out_t's range."""
    if bias.size:  # (the ufuncs' reduce: no Python wrapper per call)
        total = bound + max(abs(int(np.maximum.reduce(bias, axis=None))), abs(int(np.minimum.reduce(bias, axis=None))))
    else:
        total = bound
    exact = _EXACT_BELOW.get(dt)
    if exact is None:
        exact = _EXACT_BELOW.get(np.dtype(dt), 1 << 62)
    return total < exact and total <= int_range(out_dtype)[1]


#: the integers a float dtype holds exactly are those below this magnitude (keyed by dtype and
#: by scalar type: callers pass either)
_EXACT_BELOW = {np.dtype(np.float32): 1 << 24, np.dtype(F64): 1 << 53, np.float32: 1 << 24, F64: 1 << 53}

#: Bytes of float sums per chunk of :func:`_gemm_int` (the chunk stays in the L2 cache).
_CHUNK_BYTES = 1 << 19


def _gemm_int(a: np.ndarray, b: np.ndarray, bias: np.ndarray, out_dtype: str, bound: int):
    """``a @ b + bias`` as out_t's working dtype for exact integer operands (``a``, ``b`` in a
    float dtype that :func:`_exact_dtype` proved exact for ``|sum| <= bound``), or None when
    :func:`_finish_int` would need its int64 detour.

    Chunk of rows by chunk: each chunk's sums are added to the bias and cast into the output
    while in cache, instead of the whole float result written to memory and read back. Each
    output element is still one dot product over all of K, exact whatever BLAS's blocking.
    """
    if a.dtype.kind != "f" or not _one_pass_finish(bias, out_dtype, bound, a.dtype):
        return None
    rows, oc = a.shape[0], b.shape[1]
    out = np.empty((rows, oc), dtype_info(out_dtype).working)
    step = max(1, _CHUNK_BYTES // max(1, oc * a.itemsize))
    buf = np.empty((min(step, rows), oc), a.dtype)
    bias = bias.astype(a.dtype)
    with _one_blas_thread(a.size * oc):
        for start in range(0, rows, step):  # small GEMMs: one BLAS thread (see _gemm)
            part = buf[: min(rows, start + step) - start]
            np.matmul(a[start : start + part.shape[0]], b, out=part)
            np.add(part, bias, out=out[start : start + part.shape[0]], casting="unsafe")  # exact
    return out


def _finish_float(acc: np.ndarray, bias: np.ndarray, out_dtype: str) -> np.ndarray:
    """Add the bias in float64 and round once to the output dtype."""
    return (acc + bias.astype(F64)).astype(dtype_info(out_dtype).working)


def _out_size(call: OpCall, out: int, numerator: int, stride: int, what: str) -> None:
    """``ERROR_IF(out != idiv_check(numerator, stride) + 1)``, idiv_check included."""
    if numerator % stride != 0:
        call.fail(f"idiv_check: ({what} numerator {numerator}) % stride {stride} != 0")
    if out != numerator // stride + 1:
        call.fail(f"O{what} != idiv_check(..., stride) + 1")


def _tap_ranges(
    tap: int, dilation: int, stride: int, pad_before: int, in_size: int, out_size: int
) -> tuple[slice, slice] | None:
    """For one kernel tap along one axis: (output slice, input slice) of in-range positions.

    Output position ``o`` reads input ``i = o * stride - pad_before + tap * dilation``; only
    ``0 <= i < in_size`` contributes (the spec skips multiplies in the padding area).
    """
    offset = tap * dilation - pad_before
    # lo: the smallest o with i >= 0; hi: one past the largest o with i < in_size
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    hi = min(out_size, (in_size - 1 - offset) // stride + 1)
    if hi <= lo:
        return None
    start = lo * stride + offset
    return slice(lo, hi), slice(start, start + (hi - lo - 1) * stride + 1, stride)


def _conv_taps(
    x: np.ndarray,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    pad_before: Sequence[int],
    out_spatial: Sequence[int],
    acc: np.ndarray,
    contribute,
) -> np.ndarray:
    """Accumulate a direct convolution one kernel tap at a time into ``acc``.

    ``x`` is ``[N, *spatial, C]``; for each tap ``contribute(x_region, tap)`` returns the
    products for the output region whose reads are in range, which is added to
    ``acc[N, *region, ...]``. Padding positions are simply not visited.
    """
    in_spatial = x.shape[1:-1]
    for tap in itertools.product(*(range(k) for k in kernel)):
        ranges = [
            _tap_ranges(t, d, s, p, i, o)
            for t, d, s, p, i, o in zip(
                tap, dilation, stride, pad_before, in_spatial, out_spatial, strict=True
            )
        ]
        if any(r is None for r in ranges):
            continue
        out_idx = (slice(None), *(r[0] for r in ranges))
        in_idx = (slice(None), *(r[1] for r in ranges))
        acc[out_idx] += contribute(x[in_idx], tap)
    return acc


def _shifted(values: np.ndarray, zp: int) -> tuple[np.ndarray, int]:
    """``values - zp`` as int64 (apply_sub_s<acc_t> cannot overflow: |v - zp| <= 2**16) and its
    max |.|, found from the extremes of ``values`` without a pass over the shifted copy."""
    shifted = values.astype(INT64)
    if zp:
        shifted -= zp
    if values.size == 0:
        return shifted, 0
    return shifted, max(abs(int(values.max()) - zp), abs(int(values.min()) - zp))


def _conv_operands(call: OpCall, in_dtype: str, w_dtype: str, weight: np.ndarray, terms: int,
                   weight_cache: dict | None = None):
    """Zero-point-shifted input and weight in a compute dtype that keeps the sums exact.

    ``weight_cache`` (a constant weight's): its zero point, extremes and shifted copies, kept
    across calls (a dict, filled here)."""
    x = call.inputs[0]
    cache = {} if weight_cache is None else weight_cache
    if _is_float(in_dtype):
        shifted = cache.get(F64)
        if shifted is None:
            shifted = cache[F64] = weight.astype(F64)
        return x.astype(F64), shifted, F64, 0
    x_zp = _zero_point(call, 3, in_dtype, "input_zp")
    if "w_max" not in cache:
        cache["w_zp"] = _zero_point(call, 4, w_dtype, "weight_zp")
        cache["w_max"] = _shifted_max(weight, cache["w_zp"])
    dt, bound = _exact_dtype(terms, _shifted_max(x, x_zp), cache["w_max"])
    shifted = cache.get(dt)
    if shifted is None:
        shifted = cache[dt] = _shift_to(weight, cache["w_zp"], dt)
    return _shift_to(x, x_zp, dt), shifted, dt, bound


def _shifted_max(values: np.ndarray, zp: int) -> int:
    """max |values - zp|, from the extremes of ``values`` (no pass over a shifted copy)."""
    if values.size == 0:
        return 0
    return max(abs(int(values.max()) - zp), abs(int(values.min()) - zp))


def _shift_to(values: np.ndarray, zp: int, dt: type) -> np.ndarray:
    """``values - zp`` in ``dt``: one conversion, then the subtraction in place. Exact: the
    operands are int8/int16 (or int4) values and zero points, so |v - zp| <= 2**16, which
    float32, float64 and int64 all hold."""
    if not zp:
        return values.astype(dt)
    return np.subtract(values, dt(zp), dtype=dt)  # one pass; computed in dt, so no int8 wrap


#: Integer convolutions with at most this many products per output (taps * IC) and at most
#: _IM2COL_MAX patch elements run as one GEMM over gathered patches (see :func:`_patches`).
_IM2COL_MAX_K = 256
_IM2COL_MAX = 1 << 26
#: Output elements per block of :func:`_depthwise_blocked` (its working set stays in cache).
_DEPTHWISE_BLOCK = 1 << 16


def _zero_padded(x: np.ndarray, pad: Sequence[int]) -> np.ndarray:
    """``x`` ([N, *spatial, C], zero point already subtracted) with explicit zero padding.

    Integer paths only: the spec skips padded positions, and a zero-point-shifted zero
    contributes an exact 0 to an integer sum, so the results agree. (In floating point a
    skipped position and ``0 * w`` differ when w is infinite or NaN.)
    """
    if not any(pad):
        return x
    widths = [(0, 0), *zip(pad[0::2], pad[1::2], strict=True), (0, 0)]
    return np.pad(x, widths)


def _tap_slice(
    tap: int, dilation: int, stride: int, out: int, start: int = 0, stop: int | None = None
) -> slice:
    """Input positions read by kernel tap ``tap`` for outputs ``start .. stop`` (padded input)."""
    stop = out if stop is None else stop
    first = start * stride + tap * dilation
    return slice(first, first + (stop - start - 1) * stride + 1, stride)


def _patches(
    xp: np.ndarray,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    out_spatial: Sequence[int],
) -> np.ndarray:
    """im2col: ``[N, *out, taps * C]`` with taps in ``itertools.product`` order, C fastest."""
    n, c = xp.shape[0], xp.shape[-1]
    taps = list(itertools.product(*(range(k) for k in kernel)))
    out = np.empty((n, *out_spatial, len(taps), c), dtype=xp.dtype)
    for i, tap in enumerate(taps):
        idx = (
            slice(None),
            *(
                _tap_slice(t, d, s, o)
                for t, d, s, o in zip(tap, dilation, stride, out_spatial, strict=True)
            ),
        )
        out[..., i, :] = xp[idx]
    return out.reshape(n, *out_spatial, len(taps) * c)


def _padded_phases(x: np.ndarray, zp: int, pad: Sequence[int], sx: int, dt: type) -> list[np.ndarray]:
    """``x - zp`` ([N, H, W, C]) in ``dt``, zero-padded (exact for integer sums, see
    :func:`_zero_padded`) and split into ``sx`` column phases: phase ``p`` holds padded columns
    ``p, p + sx, ...`` contiguously. The shifted input is written straight into the phases (one
    pass over the input; no padded copy to split afterwards); ``sx == 1`` gives the padded input.
    """
    n, ih, iw, c = x.shape
    pt, pb, pl, pr = pad
    width = iw + pl + pr
    phases = []
    for p in range(sx):
        phase = np.zeros((n, ih + pt + pb, len(range(p, width, sx)), c), dtype=dt)
        first = (p - pl) % sx  # the first input column i with (i + pl) % sx == p
        cols = len(range(first, iw, sx))
        if cols:
            start = (first + pl) // sx
            region = phase[:, pt : pt + ih, start : start + cols]
            np.subtract(x[:, :, first::sx], dt(zp), out=region, dtype=dt)  # computed in dt: no wrap
        phases.append(phase)
    return phases


def _depthwise_blocked(
    x: np.ndarray,
    zp: int,
    pad: Sequence[int],
    w: np.ndarray,
    stride: Sequence[int],
    dilation: Sequence[int],
    out_hw: Sequence[int],
    dt: type,
    plus_zero: bool = False,
) -> np.ndarray:
    """Integer DEPTHWISE_CONV2D sums ``[N, OH, OW, C, M]`` in ``dt`` (exact, see
    :func:`_exact_dtype`) of the input ``x`` shifted by ``zp`` and zero-padded (padding as zeros
    is exact for integer sums, see :func:`_zero_padded`), block of output rows by block: every
    tap's multiply and add for a block run while the block is in cache, instead of one pass over
    the whole output per tap.

    The input is split into ``stride_x`` column phases (see :func:`_padded_phases`), so that each
    tap reads whole output rows as one contiguous run of ``OW * C`` values; multiplied by the
    tap's weights tiled along the row, numpy's inner loops then span a row, not one pixel's C
    values.

    Floating-point sums (``plus_zero``, finite weights, ``M == 1``): the spec's accumulator starts
    at +0 and skips padded taps. Here a padded tap adds ``0 * w = +-0``, which leaves a nonzero
    sum unchanged and a +0 sum +0 (round to nearest: ``+0 + -0 = +0``); starting from the first
    product plus +0 (never -0, like the spec's) keeps every partial sum equal to the spec's.
    """
    n, c = x.shape[0], x.shape[-1]
    kh, kw, _, m = w.shape
    oh, ow = out_hw
    sy, sx = stride
    dy, dx = dilation
    if m != 1:
        [xp] = _padded_phases(x, zp, pad, 1, dt)
        acc = np.empty((n, oh, ow, c, m), dtype=dt)
        for ky, kx in itertools.product(range(kh), range(kw)):
            region = (
                xp[:, _tap_slice(ky, dy, sy, oh), _tap_slice(kx, dx, sx, ow), :, None] * w[ky, kx]
            )
            if ky == 0 and kx == 0:
                acc[...] = region
            else:
                acc += region
        return acc
    phases = _padded_phases(x, zp, pad, sx, dt)
    # tap kx reads padded column ox * sx + kx * dx: phase (kx * dx) % sx, offset (kx * dx) // sx
    where = [((kx * dx) % sx, (kx * dx) // sx) for kx in range(kw)]
    tiled = np.tile(w[:, :, :, 0], (1, 1, ow))  # [KH, KW, OW * C]
    row = ow * c
    acc = np.empty((n, oh, row), dtype=dt)
    rows = max(1, _DEPTHWISE_BLOCK // row)
    scratch = np.empty((min(rows, oh), row), dtype=dt)
    for b in range(n):
        for y0 in range(0, oh, rows):
            y1 = min(oh, y0 + rows)
            block, tmp = acc[b, y0:y1], scratch[: y1 - y0]
            for ky in range(kh):
                ys = _tap_slice(ky, dy, sy, oh, y0, y1)
                for kx in range(kw):
                    phase, offset = where[kx]
                    region = phases[phase][b, ys, offset : offset + ow].reshape(y1 - y0, row)
                    if ky == 0 and kx == 0:
                        np.multiply(region, tiled[0, 0], out=block)
                        if plus_zero:
                            block += 0.0  # -0 -> +0: the spec's accumulator starts at +0
                    else:
                        np.multiply(region, tiled[ky, kx], out=tmp)
                        block += tmp
    return acc.reshape(n, oh, ow, c, 1)


def _check_bias(call: OpCall, channels: int, index: int = 2) -> np.ndarray:
    """``ERROR_IF(BC != OC && BC != 1)``; returns bias input ``index`` broadcast to ``channels``."""
    bc = call.input_decls[index].shape[0]
    if bc != channels and bc != 1:
        call.fail(f"BC != OC && BC != 1 (BC={bc}, OC={channels})")
    bias = call.inputs[index].reshape(-1)
    if bias.shape == (channels,) and not bias.flags.writeable:
        return bias  # (a read-only constant of the right size: what broadcast_to would give)
    return np.broadcast_to(bias, (channels,))
