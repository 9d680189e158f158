"""Activation functions (spec chapter "Activation Functions"): CLAMP, ERF, SIGMOID, TANH.

ERF, SIGMOID and TANH are float-only (integer networks use TABLE); they evaluate in float64
and round once to the output type, well inside their ULP/ABS_ERROR bounds (prepared FP32 TANH
evaluates in float32, whose error is still far inside its bound).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype_info
from ..numerics import round_to_float
from ._broadcast import (
    FP_TYPES,
    apply_max,
    apply_min,
    check_same_shape,
    float_rounder,
    nan_mode,
    to_f64,
)
from .facts import abs_error, ulp
from .registry import OpCall, register, register_prepare

_FP = tuple((t, t) for t in FP_TYPES)
_CLAMP_TYPES = (("INT8", "INT8"), ("INT16", "INT16")) + _FP


def _clamp_bound(call: OpCall, name: str, dtype: str):
    """Decode the ``min_val``/``max_val`` attribute: little-endian bytes of the input type.

    The flatbuffer vector may be padded (it is 8 bytes for every type in generated tests), so
    only the first ``itemsize`` bytes are the value.
    """
    raw = call.attrs.get(name, b"")
    working = dtype_info(dtype).working
    if len(raw) < working.itemsize:
        call.fail(f"{name} has {len(raw)} bytes, {dtype} needs {working.itemsize}")
    value = np.frombuffer(bytes(raw[: working.itemsize]), dtype=working.newbyteorder("<"))
    return value.astype(working)[0]


@register("CLAMP")
def clamp(call: OpCall) -> list[np.ndarray]:
    """CLAMP: ``apply_clip_s(value, min_val, max_val, nan_mode)`` elementwise.

    ERROR_IF ``max_val < min_val`` or either bound is NaN. A NaN input gives NaN in PROPAGATE
    mode and ``min_val`` in IGNORE mode (max with min_val drops the NaN first).
    """
    return [_clamp(call.inputs[0], *_clamp_checks(call))]


@register_prepare("CLAMP")
def prepare_clamp(call: OpCall):
    """CLAMP with its (static: attributes and declarations) checks made once."""
    lo, hi, mode, is_float = _clamp_checks(call)
    if mode == "PROPAGATE" or not is_float:
        # apply_max_s then apply_min_s, with compare_nan's PROPAGATE folded into the
        # comparisons: ``x < lo`` and ``v >= hi`` are false for NaN, which stays. For numbers
        # these are the negations of the pseudocode's ``x >= lo`` and ``v < hi``, so every
        # value, signed zeros included, takes the same branch.
        if not is_float:
            # integers have no NaN or signed zero: max then min is the pseudocode exactly, and
            # two ufunc calls cost a quarter of the two wheres (small tensors are overhead-bound)
            return lambda run: [_clip_int(run.inputs[0], lo, hi)]
        return lambda run: [_clip_propagate(run.inputs[0], lo, hi)]
    return lambda run: [_clamp(run.inputs[0], lo, hi, mode, is_float)]


def _clip_propagate(x: np.ndarray, lo, hi) -> np.ndarray:
    value = np.where(x < lo, lo, x)
    return np.where(value >= hi, hi, value).astype(x.dtype, copy=False)


def _clip_int(x: np.ndarray, lo, hi) -> np.ndarray:
    value = np.maximum(x, lo)  # (lo, hi: scalars of x's dtype, so value is x's dtype)
    if type(value) is not np.ndarray:  # (a rank-0 input gives a numpy scalar: no out= for it)
        return np.asarray(np.minimum(value, hi))
    return np.minimum(value, hi, out=value)


def _clamp_checks(call: OpCall) -> tuple:
    """The ERROR_IFs of CLAMP; returns (min_val, max_val, nan_mode, is_float)."""
    call.check_arity(1, 1)
    call.check_types(_CLAMP_TYPES)
    check_same_shape(call)
    dt = call.in_dtype(0)
    mode = nan_mode(call)
    lo, hi = _clamp_bound(call, "min_val", dt), _clamp_bound(call, "max_val", dt)
    is_float = dt in FP_TYPES
    if is_float:
        call.error_if(bool(np.isnan(lo) or np.isnan(hi)), "isNaN(min_val) || isNaN(max_val)")
    if bool(hi < lo):
        call.fail(f"max_val < min_val ({hi} < {lo})")
    return lo, hi, mode, is_float


def _clamp(x: np.ndarray, lo, hi, mode: str, is_float: bool) -> np.ndarray:
    x = np.asarray(x)
    value = apply_max(x, lo, mode, is_float)
    value = apply_min(value, hi, mode, is_float)
    return value.astype(x.dtype, copy=False)


def _fp_activation(call: OpCall, fn) -> list[np.ndarray]:
    _activation_checks(call)
    with np.errstate(all="ignore"):  # exp overflow to inf is part of the specified results
        return [round_to_float(fn(to_f64(call.inputs[0])), call.in_dtype(0))]


def _activation_checks(call: OpCall) -> None:
    call.check_arity(1, 1)
    call.check_types(_FP)
    check_same_shape(call)


@register("ERF", compliance=ulp(5.0))
def erf(call: OpCall) -> list[np.ndarray]:
    """ERF: the error function ``2/sqrt(pi) * integral_0^x exp(-t*t) dt``."""
    return _fp_activation(call, _erf)


def _erf(x: np.ndarray) -> np.ndarray:
    # scipy.special is imported on first use: it is most of the import time of tosa_verify
    from scipy import special

    return special.erf(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + exp(-x)): -inf -> 1 / inf = 0, +inf -> 1, ±0 -> 0.5, NaN -> NaN
    return 1.0 / (1.0 + np.exp(-x))


@register("SIGMOID", compliance=abs_error())
def sigmoid(call: OpCall) -> list[np.ndarray]:
    """SIGMOID: ``1 / (1 + exp(-x))``."""
    return _fp_activation(call, _sigmoid)


@register("TANH", compliance=abs_error({"lower_bound": 0.5, "base_bound": 4.0}, FP32={"base_bound": 12.0}))
def tanh(call: OpCall) -> list[np.ndarray]:
    """TANH: hyperbolic tangent (``±inf -> ±1``, keeps the sign of zero)."""
    return _fp_activation(call, np.tanh)


_ACTIVATIONS = {"ERF": _erf, "SIGMOID": _sigmoid, "TANH": np.tanh}


def _sigmoid_f64(x: np.ndarray) -> np.ndarray:
    """:func:`_sigmoid` of ``x`` widened to float64, in place in one scratch array (the same
    operations, so the same float64 values, with one allocation instead of four)."""
    e = x.astype(np.float64)
    np.negative(e, out=e)
    np.exp(e, out=e)
    e += 1.0
    return np.reciprocal(e, out=e)


def _tanh_fp32(run: OpCall) -> list[np.ndarray]:
    # FP32 TANH in float32 (a third of the float64 time): the spec's bound is at least
    # 2**-23 * max(12 * |out_ref|, 0.5), i.e. >= 12 ULP of the result (exp_err_base 3), and
    # libm's/numpy's float32 tanh is within a few ULP. tests/ops/test_activation_fp.py checks
    # it against the fp64 reference with the tosa-tools compliance verifier on edge cases.
    return [np.tanh(run.inputs[0])]


@register_prepare(*_ACTIVATIONS)
def prepare_fp_activation(call: OpCall):
    """ERF/SIGMOID/TANH with their (static) checks made once.

    >>> prepare_fp_activation(call)(call)   # doctest: +SKIP
    [array([0.7615942], dtype=float32)]
    """
    _activation_checks(call)
    dtype = call.in_dtype(0)
    if call.op == "TANH" and dtype == "FP32":
        return _tanh_fp32
    rounded = float_rounder(dtype)
    if call.op == "SIGMOID":
        return lambda run: [rounded(_sigmoid_f64(run.inputs[0]))]
    fn = _ACTIVATIONS[call.op]
    return lambda run: [rounded(fn(run.inputs[0].astype(np.float64)))]
