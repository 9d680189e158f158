"""Compare two results of one TOSA tensor and say how far apart they are.

:func:`compare` returns a :class:`Verdict`: ``exact`` (bit-for-bit equal), ``within_compliance``
(different, but allowed by the TOSA compliance mode of the producing operator) or ``mismatch``,
plus statistics: max absolute error, count and first index of differing elements, max error in
quantization steps (LSB: ULPs of the expected value in the output format for floats, the absolute
difference for integers), SQNR in dB and cosine similarity.

Compliance modes
----------------

Integer and bool tensors are compared exactly (mode ``EXACT``), except RESCALE with
``INEXACT_ROUND`` (mode ``RESCALE_INEXACT``: the verifier library with the reference model's bounds
tensor, otherwise at most 1 LSB of difference). For floating-point
tensors :func:`compliance_config` derives the mode of the TOSA 1.0 compliance chapter from the
producing op and dtype, with the parameters tosa-tools' conformance generator uses:

==========================================  =====================================================
op                                          mode
==========================================  =====================================================
ADD, SUB, MUL                               ULP 0.5 (BF16: 1.0)
CAST (float result)                         ULP 0.5, lower 1.0
CEIL, FLOOR / RECIPROCAL / RSQRT / ERF      ULP 0.5 / 1.0 / 2.0 / 5.0
EXP, LOG, SIN, COS, TANH, SIGMOID           ABS_ERROR (per-op bounds; SIN/COS need bounds)
CONV2D, CONV3D, DEPTHWISE_CONV2D,           DOT_PRODUCT (test set -1, ``ksb`` from the kernel
TRANSPOSE_CONV2D, MATMUL, AVG_POOL2D,       size and accumulator; needs the reference bounds
REDUCE_SUM, FFT2D, RFFT2D                   tensor)
REDUCE_PRODUCT                              REDUCE_PRODUCT (n = reduced axis size)
RESIZE                                      MAX_RELATIVE (needs the input's max magnitude)
POW                                         PRECOMPUTED (not checkable here: ULP fallback)
everything else (data movement, min/max,    EXACT
compare, clamp, pooling max, ...)
==========================================  =====================================================

How a float tensor is checked:

* **verifier** - when ``expected`` is FP64 (the reference model in precise mode) and the mode's
  inputs are available (bounds for DOT_PRODUCT / SIN / COS, the max magnitude for MAX_RELATIVE),
  the tosa-tools verifier library (``libtosa_reference_verify_lib.so``) decides.
* **ulp-fallback** - otherwise (e.g. both results in FP32), the error of every element is measured
  in ULPs of the expected value in the output format and must not exceed a per-mode allowance:
  EXACT 0; ULP ``ulp`` (+0.5 when ``expected`` is itself rounded to the output format);
  DOT_PRODUCT ``abs_bound`` ULPs of the tensor's largest expected magnitude (or of the bounds
  value when given); REDUCE_PRODUCT ``n`` ULPs; ABS_ERROR ``base_bound + 1`` ULPs of
  ``max(|expected|, floor)`` with floor = ``lower_bound`` (TANH, LOG 0.5), 1.0 for SIN/COS, 0.5
  for SIGMOID and 0 for EXP (relative); MAX_RELATIVE/PRECOMPUTED/FP_SPECIAL 2 ULPs. NaN must meet NaN and infinities must
  match exactly. Pass ``ulp=`` to override the allowance.

>>> import numpy as np
>>> v = compare(np.array([1, 2, 3], np.int8), np.array([1, 2, 4], np.int8))
>>> v.status, v.mismatched, v.first_mismatch, v.max_lsb_error
('mismatch', 1, (2,), 1.0)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np

from .dtypes import DTYPES, dtype_info, to_working
from .errors import TosaInputError
from .graph import Block, Operator
from .ops import REGISTRY as _REGISTRY  # noqa: F401 - importing the ops declares their facts
from .ops.facts import MX_DTYPES as _MX_TYPES
from .ops.facts import facts_of

__all__ = [
    "Verdict",
    "compare",
    "compliance_config",
    "verifier_available",
]

EXACT = "exact"
WITHIN = "within_compliance"
MISMATCH = "mismatch"

_MANTISSA = {"FP32": 23, "FP16": 10, "BF16": 7, "FP8E4M3": 3, "FP8E5M2": 2,
             # TOSA 1.1 MX types: the verifier library's Python front end cannot pass them, so
             # they are always judged by the ULP fallback (see _MX_TYPES)
             "FP6E2M3": 3, "FP6E3M2": 2, "FP4E2M1": 1, "FP8UE8M0": 0}
#: the info dictionary of each compliance mode in a desc.json entry
_INFO_KEY = {
    "ULP": "ulp_info", "ABS_ERROR": "abs_error_info", "DOT_PRODUCT": "dot_product_info",
    "REDUCE_PRODUCT": "reduce_product_info", "MAX_RELATIVE": "max_relative_info",
    "RESCALE_INEXACT": "rescale_inexact_info",
}


def compliance_config(
    op: Operator | str | None,
    dtype: str,
    shape: tuple[int, ...] | list[int] = (),
    *,
    block: Block | None = None,
    max_abs_input: float | None = None,
) -> dict[str, object]:
    """The compliance entry (one tensor of a desc.json's ``meta.compliance``) for an op's output.

    ``op`` is the producing :class:`Operator` (or just its name); ``block`` lets the dot-product
    rule read the input shapes to compute ``ksb``. ``max_abs_input`` feeds MAX_RELATIVE (RESIZE).

    >>> compliance_config("ADD", "FP32", (2, 3))["ulp_info"]
    {'ulp': 0.5}
    >>> compliance_config("ADD", "INT8", (2,))["mode"]
    'EXACT'
    """
    op_obj = op if isinstance(op, Operator) else None
    op_name = (op.op if isinstance(op, Operator) else (op or "")).upper()
    entry: dict[str, object] = {"mode": "EXACT", "data_type": dtype, "shape": [int(d) for d in shape]}
    attrs = op_obj.attrs if op_obj is not None else {}
    facts = facts_of(op_name)
    rule = facts.compliance_for(attrs)
    if "block_size" in attrs and op_name.endswith("BLOCK_SCALED"):
        entry["block_size"] = int(attrs["block_size"])  # type: ignore[arg-type]
    if rule is None or not rule.applies_to(dtype):
        return entry
    entry["mode"] = rule.mode
    info = rule.info_for(dtype)
    # the modes whose bound depends on the operator's shapes (the op's declared kernel size)
    ks = facts.kernel_size(op_obj, block) if facts.kernel_size and op_obj is not None and block is not None else None
    if rule.mode == "DOT_PRODUCT":
        info = _dot_product_info(op_obj, block, dtype, str(attrs.get("acc_type", dtype)), ks or 1)
    elif rule.mode == "REDUCE_PRODUCT":
        info = {"n": ks or 1}
    elif rule.mode == "MAX_RELATIVE":
        info = {"max": float(max_abs_input) if max_abs_input is not None else -1.0, **info}
    if info:
        entry[_INFO_KEY[rule.mode]] = info
    return entry


def _dot_product_info(op_obj: Operator | None, block: Block | None, dtype: str, acc: str, ks: int) -> dict:
    """The DOT_PRODUCT bounds of a dot product of ``ks`` terms (TOSA 1.0 compliance chapter)."""
    acc_frac = _MANTISSA.get(acc, _MANTISSA[dtype])
    ksb = math.ceil(ks / 2.0 ** ((acc_frac - _MANTISSA[dtype]) / 2))
    in_types = []
    if op_obj is not None and block is not None:
        in_types = [block.tensors[n].dtype for n in op_obj.inputs[:2] if n in block.tensors]
    factor = 3 if in_types and all(t == "FP32" for t in in_types) else 1
    return {
        "s": -1,
        "ksb": int(ksb),
        "abs_bound": int(2 * factor * ksb),
        "variance_error_bound": 4 * 0.4 * ksb,
    }


@dataclass
class Verdict:
    """The outcome of :func:`compare` on one tensor.

    ``status`` is ``"exact"``, ``"within_compliance"`` or ``"mismatch"``; ``ok`` is true unless it
    is a mismatch. ``method`` tells who decided: ``"exact"`` (integer/bitwise), ``"verifier"``
    (tosa-tools verifier library), ``"ulp-fallback"`` or ``"shape"`` (shapes differ).
    Errors are measured on finite elements; ``max_lsb_error`` is in ULPs of the expected value in
    the output format for floats and the absolute difference for integers.
    """

    status: str
    mode: str
    method: str
    dtype: str
    shape: tuple[int, ...]
    size: int
    mismatched: int
    first_mismatch: tuple[int, ...] | None
    max_abs_error: float
    max_lsb_error: float
    worst_index: tuple[int, ...] | None
    expected_at_worst: float | None
    actual_at_worst: float | None
    sqnr_db: float
    cosine: float
    out_of_tolerance: int | None = None
    tolerance: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        """True for ``exact`` and ``within_compliance``."""
        return self.status != MISMATCH

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (infinities as strings)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = str(value)
            elif isinstance(value, tuple):
                out[key] = list(value)
        return out

    def summary(self) -> str:
        """One line: status, counts and the worst element.

        >>> compare(np.array([1.0], np.float32), np.array([1.0], np.float32)).summary()
        'exact (ULP): 0/1 differ'
        """
        text = f"{self.status} ({self.mode}): {self.mismatched}/{self.size} differ"
        if self.mismatched:
            text += (
                f", first at {list(self.first_mismatch or ())}, max abs err {self.max_abs_error:.6g}"
                f" ({self.max_lsb_error:.6g} LSB) at {list(self.worst_index or ())}:"
                f" expected {self.expected_at_worst!r} got {self.actual_at_worst!r}"
            )
        if self.message and self.status == MISMATCH:
            text += f" - {self.message}"
        return text


# --------------------------------------------------------------------------- numeric helpers


def _tosa_dtype_of(arr: np.ndarray, hint: str | None) -> str:
    if hint:
        return dtype_info(hint).name
    kind, size = arr.dtype.kind, arr.dtype.itemsize
    if arr.dtype == ml_dtypes.bfloat16 or (kind == "V" and size == 2):
        return "BF16"
    if arr.dtype == ml_dtypes.float8_e4m3fn or (kind == "V" and size == 1):
        return "FP8E4M3"
    if arr.dtype == ml_dtypes.float8_e5m2:
        return "FP8E5M2"
    if kind == "b":
        return "BOOL"
    if kind == "f":
        return {2: "FP16", 4: "FP32", 8: "FP64"}[size]
    if kind in "iu":
        return {1: "INT8", 2: "INT16", 4: "INT32", 8: "INT64"}[size]
    raise TypeError(f"cannot compare arrays of dtype {arr.dtype}")


def _as_float64(arr: np.ndarray, tosa: str) -> np.ndarray:
    """Values as float64 (raw BF16/FP8 views reinterpreted through ``tosa``)."""
    a = np.asarray(arr)
    if tosa in _MX_TYPES and a.dtype != np.float64:
        return to_working(a, tosa).astype(np.float64)  # packed FP4/FP6, raw E8M0
    if a.dtype.kind == "V" or (tosa.startswith(("FP8", "BF16")) and a.dtype.kind == "u"):
        a = np.ascontiguousarray(a).view(DTYPES[tosa].working)
    return a.astype(np.float64)


def _ulp(x: np.ndarray, tosa: str) -> np.ndarray:
    """Spacing of the ``tosa`` float format at |x| (the smallest subnormal at 0)."""
    info = ml_dtypes.finfo(DTYPES[tosa].working)
    nmant, emin = int(info.nmant), int(info.minexp)
    ax = np.abs(x)
    ax = np.where(np.isfinite(ax), ax, float(info.max))
    with np.errstate(divide="ignore", invalid="ignore"):
        exp = np.floor(np.log2(np.where(ax > 0, ax, 1.0)))
    exp = np.where(ax > 0, np.maximum(exp, emin), emin)
    return np.ldexp(1.0, (exp - nmant).astype(np.int64))


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _stats(exp: np.ndarray, act: np.ndarray) -> tuple[float, float]:
    """SQNR (dB) and cosine similarity over elements finite in both."""
    finite = np.isfinite(exp) & np.isfinite(act)
    e, a = exp[finite], act[finite]
    if e.size == 0:
        return float("nan"), float("nan")
    noise = float(np.sum((e - a) ** 2))
    signal = float(np.sum(e**2))
    if noise == 0.0:
        sqnr = math.inf
    elif signal == 0.0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(signal / noise)
    ne, na = float(np.linalg.norm(e)), float(np.linalg.norm(a))
    if ne == 0.0 and na == 0.0:
        cosine = 1.0
    elif ne == 0.0 or na == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(e, a) / (ne * na))
    return sqnr, cosine


# --------------------------------------------------------------------------- verifier library


@cache
def _verifier():
    import tosa_reference_model
    from checker.verifier import VerifierLibrary

    lib = Path(tosa_reference_model.__file__).parent / "libtosa_reference_verify_lib.so"
    return VerifierLibrary(lib)


def verifier_available() -> bool:
    """Whether the tosa-tools verifier library can be loaded.

    >>> isinstance(verifier_available(), bool)
    True
    """
    try:
        _verifier()
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False
    return True


@contextlib.contextmanager
def _native_stderr() -> Iterator[list[str]]:
    sink: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            yield sink
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode("utf8", "replace"))


def _verifier_form(arr: np.ndarray, tosa: str) -> np.ndarray:
    a = np.ascontiguousarray(arr)
    if tosa == "BF16":
        return a.view("V2") if a.dtype.kind != "V" else a
    if tosa == "FP8E4M3":
        return a.view("V1") if a.dtype.kind != "V" else a
    if tosa == "FP8E5M2":
        return a.view(np.uint8)
    if tosa == "INT4":
        return a.astype(np.int8)
    if tosa == "INT48":
        return a.astype(np.int64)
    if tosa in ("INT32",) and a.dtype != np.int32:
        return a.astype(np.int32)
    return a


#: Compliance configs (shape values aside) that passed tosa-tools' schema validation.
_VALIDATED_CONFIGS: set[str] = set()


def _verify(config: dict[str, object], imp: np.ndarray, ref: np.ndarray, bnd: np.ndarray | None) -> bool:
    """``VerifierLibrary.verify_data``, validating each config layout against the schema once.

    ``verify_data`` re-checks the JSON schema on every call, which costs far more than the check
    itself; a config that differs from a validated one only in its shape values is valid too, so
    it goes straight to the library's ``tvf_verify_data``.
    """
    lib = _verifier()
    entry = config["tensors"]["output"]  # type: ignore[index]
    key = json.dumps({**entry, "shape": len(entry.get("shape", []))}, sort_keys=True, default=str)  # type: ignore[union-attr]
    direct = key in _VALIDATED_CONFIGS and hasattr(lib, "tvf_verify_data") and hasattr(lib, "_get_tensor_data")
    if not direct:
        ok = bool(lib.verify_data("output", config, imp, ref, bnd))
        _VALIDATED_CONFIGS.add(key)  # verify_data raises on a config the schema rejects
        return ok
    data_type = entry["data_type"]  # type: ignore[index]
    tensors = [lib._get_tensor_data("output", a, data_type) if a is not None else None for a in (ref, bnd, imp)]
    return bool(lib.tvf_verify_data(*tensors, ctypes.c_char_p(json.dumps(config).encode("utf8"))))


def _run_verifier(
    entry: dict[str, object], expected: np.ndarray, actual: np.ndarray, bounds: np.ndarray | None, tosa: str
) -> tuple[bool, str]:
    config = {"version": "1.0", "tensors": {"output": entry}}
    ref = np.ascontiguousarray(expected)
    imp = _verifier_form(actual, tosa)
    bnd = None if bounds is None else np.ascontiguousarray(np.asarray(bounds, dtype=np.float64))
    with _native_stderr() as sink:
        ok = _verify(config, imp, ref, bnd)
    log = sink[0] if sink else ""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith("WARNING AT")]
    return ok, " ".join(lines)[-500:]


# --------------------------------------------------------------------------- compare


def _allowance(entry: Mapping[str, object], rounded: bool) -> tuple[float, str]:
    """ULP allowance of the fallback check and a description of it."""
    mode = str(entry.get("mode", "EXACT"))
    half = 0.5 if rounded else 0.0
    if mode == "EXACT":
        return 0.0, "bit-exact"
    if mode == "ULP":
        info = entry.get("ulp_info") or {}
        ulp = float(max(info.get("ulp", 0.5), info.get("ulp_lower", 0.0)))  # type: ignore[union-attr]
        return ulp + half, f"<= {ulp + half:g} ULP of expected"
    if mode == "DOT_PRODUCT":
        info = entry.get("dot_product_info") or {}
        bound = float(info.get("abs_bound", 2 * int(info.get("ksb", 1))))  # type: ignore[union-attr]
        return bound + half, f"<= {bound + half:g} ULP of the dot-product bound"
    if mode == "REDUCE_PRODUCT":
        n = float((entry.get("reduce_product_info") or {}).get("n", 1))  # type: ignore[union-attr]
        return n + half, f"<= {n + half:g} ULP of expected"
    if mode == "ABS_ERROR":
        info = entry.get("abs_error_info") or {}
        base = float(info.get("base_bound", 1.0))  # type: ignore[union-attr]
        floor = _abs_error_floor(entry)
        where = f"max(|expected|, {floor:g})" if floor else "expected"
        return base + 1.0, f"<= {base + 1.0:g} ULP of {where}"
    return 2.0, "<= 2 ULP of expected"


def _entry_for(
    mode: str | Mapping[str, object] | None, op: Operator | str | None, tosa: str, shape, block,
    max_abs_input: float | None = None,
) -> dict:
    if isinstance(mode, Mapping):
        if "tensors" in mode:  # a whole compliance config: take its single entry
            tensors = mode["tensors"]  # type: ignore[index]
            if len(tensors) != 1:
                raise ValueError("a compliance config with several tensors is ambiguous: pass one entry")
            entry = dict(next(iter(tensors.values())))
        else:
            entry = dict(mode)
        entry.setdefault("data_type", tosa)
        entry.setdefault("shape", [int(d) for d in shape])
        return entry
    if isinstance(mode, str):
        entry = compliance_config(op, tosa, shape, block=block, max_abs_input=max_abs_input)
        if entry["mode"] != mode.upper():
            entry = {"mode": mode.upper(), "data_type": tosa, "shape": [int(d) for d in shape]}
            if mode.upper() == "ULP":
                entry["ulp_info"] = {"ulp": 0.5}
        return entry
    if op is None and tosa in _MANTISSA:
        return {"mode": "ULP", "data_type": tosa, "shape": [int(d) for d in shape], "ulp_info": {"ulp": 0.5}}
    return compliance_config(op, tosa, shape, block=block, max_abs_input=max_abs_input)


def _compare_block_scaled(expected, actual, dtype: str | None) -> Verdict:
    """A block-scaled tensor, the pair (values, scales) on both sides: values, then scales, each
    exactly (the 1.1 operators move block-scaled data, they do not compute it)."""
    if not (isinstance(expected, tuple) and isinstance(actual, tuple)):
        raise TosaInputError(f"block-scaled {dtype or 'tensor'}: compare needs (values, scales) on both sides")
    info = dtype_info(dtype) if dtype else None
    if info is None or not info.block:
        raise TosaInputError(f"comparing (values, scales) pairs needs a block-scaled dtype, got {dtype!r}")
    values = compare(expected[0], actual[0], mode="EXACT", dtype=info.value)
    scales = compare(expected[1], actual[1], mode="EXACT", dtype=info.scale)
    return values if values.ok == scales.ok or not values.ok else scales


def compare(
    expected: np.ndarray,
    actual: np.ndarray,
    *,
    mode: str | Mapping[str, object] | None = None,
    op: Operator | str | None = None,
    block: Block | None = None,
    dtype: str | None = None,
    bounds: np.ndarray | None = None,
    ulp: float | None = None,
    max_abs_input: float | None = None,
) -> Verdict:
    """Compare ``actual`` against ``expected`` (the reference) for one tensor.

    ``mode`` is a compliance mode name (``"EXACT"``, ``"ULP"``, ``"DOT_PRODUCT"``, ...), a
    compliance entry dict (as in a desc.json's ``meta.compliance.tensors``) or ``None`` to derive
    it from ``op`` (the producing :class:`Operator` or op name, with ``block`` for input shapes)
    via :func:`compliance_config`; with neither, floats default to ULP 0.5 and integers to EXACT.
    ``dtype`` is the TOSA dtype of ``actual`` (needed to read raw FP8 views; inferred otherwise).
    ``bounds`` is the reference model's bounds tensor (DOT_PRODUCT, SIN/COS); ``ulp`` overrides
    the fallback allowance; ``max_abs_input`` (the largest input magnitude) lets the verifier
    check MAX_RELATIVE (RESIZE). See the module docstring for what each mode checks.

    >>> import numpy as np
    >>> e = np.array([1.0, 2.0], np.float32)
    >>> compare(e, np.nextafter(e, np.float32(3)), op="ADD").status
    'within_compliance'
    >>> compare(e, e + np.float32(0.5), op="ADD").status
    'mismatch'
    """
    if isinstance(expected, tuple) or isinstance(actual, tuple):
        return _compare_block_scaled(expected, actual, dtype)
    exp_arr, act_arr, tosa, exp_tosa = _normalise(expected, actual, dtype)
    shape = tuple(int(d) for d in act_arr.shape)
    is_float = tosa in _MANTISSA or tosa == "FP64"
    entry = _entry_for(mode, op, tosa, shape, block, max_abs_input)
    mode_name = str(entry["mode"])

    if tuple(exp_arr.shape) != shape:
        return Verdict(
            status=MISMATCH, mode=mode_name, method="shape", dtype=tosa, shape=shape, size=int(act_arr.size),
            mismatched=int(act_arr.size), first_mismatch=None, max_abs_error=math.inf, max_lsb_error=math.inf,
            worst_index=None, expected_at_worst=None, actual_at_worst=None, sqnr_db=-math.inf, cosine=0.0,
            message=f"shape {list(shape)} differs from expected {list(exp_arr.shape)}",
        )

    ef, af, differ, diff, base = _differences(exp_arr, act_arr, tosa, exp_tosa, mode_name, is_float)

    precise_ref = exp_arr.dtype == np.float64 and tosa in _MANTISSA and tosa not in _MX_TYPES
    mismatched = base["mismatched"]
    if mismatched == 0:
        return Verdict(status=EXACT, method="exact", tolerance="bit-exact", **base)

    verifier_ok = (mode_name == "RESCALE_INEXACT" and bounds is not None) or (
        precise_ref and _verifier_applies(entry, bounds)
    )
    if verifier_ok:
        if verifier_available():
            ok, log = _run_verifier(entry, exp_arr, act_arr, bounds, tosa)
            return Verdict(
                status=WITHIN if ok else MISMATCH, method="verifier", tolerance=f"tosa-tools verifier, {mode_name}",
                message=log if not ok else "", **base,
            )

    if not is_float and mode_name == "RESCALE_INEXACT":
        n_bad = int(np.count_nonzero(diff > 1))
        return Verdict(
            status=MISMATCH if n_bad else WITHIN, method="ulp-fallback", tolerance="<= 1 LSB (inexact rounding)",
            out_of_tolerance=n_bad, message=f"{n_bad} element(s) differ by more than 1 LSB" if n_bad else "", **base,
        )
    if not is_float:
        return Verdict(status=MISMATCH, method="exact", tolerance="bit-exact", out_of_tolerance=mismatched, **base)

    return _ulp_fallback(entry, ef, af, differ, diff, bounds, tosa, ulp, precise_ref, base)


def _normalise(expected: np.ndarray, actual: np.ndarray, dtype: str | None) -> tuple[np.ndarray, np.ndarray, str, str]:
    """The two arrays as :func:`compare` reads them and their TOSA dtypes (MX types as float64)."""
    exp_arr = np.asarray(expected)
    act_arr = np.asarray(actual)
    tosa = _tosa_dtype_of(act_arr, dtype)
    exp_tosa = _tosa_dtype_of(exp_arr, None) if exp_arr.dtype.kind in "fbiu" else tosa
    if exp_arr.dtype.kind == "V" or exp_arr.dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        exp_tosa = tosa
    if tosa == "FP8E5M2" and exp_arr.dtype == np.uint8:
        exp_tosa = tosa
    if tosa in _MX_TYPES:
        # packed FP4/FP6 (and raw E8M0) as values, so shapes match the precise reference's
        act_arr = _as_float64(act_arr, tosa)
        if exp_arr.dtype != np.float64:
            exp_arr, exp_tosa = _as_float64(exp_arr, tosa), "FP64"
    return exp_arr, act_arr, tosa, exp_tosa


def _differences(exp_arr: np.ndarray, act_arr: np.ndarray, tosa: str, exp_tosa: str, mode_name: str,
                 is_float: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
    """Flattened values, the differing elements, |difference|, and the Verdict's measured fields."""
    shape = tuple(int(d) for d in act_arr.shape)
    if is_float:
        e = _as_float64(exp_arr, exp_tosa if exp_tosa != "FP64" else tosa)
        a = _as_float64(act_arr, tosa)
    else:
        e = exp_arr.astype(np.int64)
        a = act_arr.astype(np.int64)

    ef, af = np.ravel(e), np.ravel(a)
    with np.errstate(invalid="ignore", over="ignore"):
        if is_float:
            both_nan = np.isnan(ef) & np.isnan(af)
            differ = ~((ef == af) | both_nan)
        else:
            differ = ef != af
        diff = np.abs(ef.astype(np.float64) - af.astype(np.float64))
    if is_float:
        diff = np.where(differ, diff, 0.0)
        diff = np.where(np.isnan(diff), math.inf, diff)
        lsb = np.where(differ, diff / _ulp(ef, tosa), 0.0) if tosa in _MANTISSA else diff
    else:
        lsb = diff
    mismatched = int(np.count_nonzero(differ))
    first = _index(int(np.flatnonzero(differ)[0]), shape) if mismatched else None
    if mismatched:
        worst_flat = int(np.argmax(lsb))
        worst = _index(worst_flat, shape)
        exp_w, act_w = ef[worst_flat].item(), af[worst_flat].item()
    else:
        worst, exp_w, act_w = None, None, None
    max_abs = float(diff.max()) if diff.size else 0.0
    max_lsb = float(lsb.max()) if lsb.size else 0.0
    sqnr, cosine = _stats(np.ravel(e).astype(np.float64), np.ravel(a).astype(np.float64))
    base = dict(
        mode=mode_name, dtype=tosa, shape=shape, size=int(act_arr.size), mismatched=mismatched,
        first_mismatch=first, max_abs_error=max_abs, max_lsb_error=max_lsb, worst_index=worst,
        expected_at_worst=exp_w, actual_at_worst=act_w, sqnr_db=sqnr, cosine=cosine,
    )
    return ef, af, differ, diff, base


def _ulp_fallback(entry: Mapping[str, object], ef: np.ndarray, af: np.ndarray, differ: np.ndarray,
                  diff: np.ndarray, bounds: np.ndarray | None, tosa: str, ulp: float | None,
                  precise_ref: bool, base: dict) -> Verdict:
    """A float verdict without the verifier: each differing element within the mode's allowance
    in ULPs of its scale (the expected value; DOT_PRODUCT: the bounds or the largest value)."""
    mode_name = str(entry["mode"])
    allowed, text = _allowance(entry, rounded=not precise_ref)
    if ulp is not None:
        allowed, text = float(ulp), f"<= {float(ulp):g} ULP of expected (override)"
    if mode_name == "EXACT":
        bad = differ
    else:
        scale = np.abs(ef)
        if mode_name == "DOT_PRODUCT":
            if bounds is not None:
                scale = np.abs(np.ravel(np.asarray(bounds, dtype=np.float64)))
            else:
                finite = ef[np.isfinite(ef)]
                scale = np.full_like(ef, float(np.abs(finite).max()) if finite.size else 0.0)
        elif mode_name == "ABS_ERROR":
            scale = np.maximum(scale, _abs_error_floor(entry))
        step = _ulp(scale, tosa)
        with np.errstate(invalid="ignore"):
            special = ~np.isfinite(ef) | ~np.isfinite(af)
            bad = differ & (special | (diff > allowed * step))
    n_bad = int(np.count_nonzero(bad))
    return Verdict(
        status=MISMATCH if n_bad else WITHIN, method="ulp-fallback", tolerance=text, out_of_tolerance=n_bad,
        message=f"{n_bad} element(s) outside {text}" if n_bad else "", **base,
    )


def _abs_error_floor(entry: Mapping[str, object]) -> float:
    """Magnitude below which an ABS_ERROR op's error is absolute rather than relative."""
    info = entry.get("abs_error_info") or {}
    if "lower_bound" in info:  # type: ignore[operator]
        return float(info["lower_bound"])  # type: ignore[index]
    if info.get("bound_as_magnitude"):  # type: ignore[union-attr]
        return 1.0  # SIN, COS
    return 0.0 if "base_bound" in info else 0.5  # EXP is relative; SIGMOID absolute  # type: ignore[operator]


def _verifier_applies(entry: Mapping[str, object], bounds: np.ndarray | None) -> bool:
    mode = entry.get("mode")
    if mode in ("ULP", "REDUCE_PRODUCT", "FP_SPECIAL", "EXACT"):
        return True
    if mode == "DOT_PRODUCT":
        return bounds is not None
    if mode == "ABS_ERROR":
        info = entry.get("abs_error_info") or {}
        return bounds is not None or not info.get("bound_as_magnitude")  # type: ignore[union-attr]
    if mode == "MAX_RELATIVE":
        return float((entry.get("max_relative_info") or {}).get("max", -1)) >= 0  # type: ignore[union-attr]
    return False


def config_json(entries: Mapping[str, Mapping[str, object]]) -> str:
    """A desc.json ``meta.compliance`` block for several named tensors (for repro files).

    >>> json.loads(config_json({"out": compliance_config("ADD", "INT8", (1,))}))["version"]
    '1.0'
    """
    return json.dumps({"version": "1.0", "tensors": {k: dict(v) for k, v in entries.items()}})
