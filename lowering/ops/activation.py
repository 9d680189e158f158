"""Activations: relu/relu6/hardtanh/clamp -> CLAMP; smooth functions -> TABLE in INT
(256 int8 entries / 513 int16 entries; with ``QuantConfig.exact_int16_lookups``, an exact
GATHER from all 65536 levels where that int16 TABLE cannot follow fn within two steps) and
native or composite FP ops."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..errors import LoweringError
from ..qparams import dequantize_f32, quantize_f64
from ..serialize import INT_OF
from .common import (
    clamp,
    compare,
    fp_binary,
    fp_scalar,
    fp_sqrt,
    fp_unary,
    quantize_value,
    requantize,
    rescale,
    rescale_ties_even,
    select,
    to_int32,
)
from .registry import STEP_FUNCTIONS, TABLE_OPS, register

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed


def _bounds(node):
    t = node.target
    if t in (aten.relu.default, aten.relu_.default):
        return 0.0, None
    if t == aten.relu6.default:
        return 0.0, 6.0
    if t in (aten.hardtanh.default, aten.hardtanh_.default):
        lo = node.args[1] if len(node.args) > 1 else -1.0
        hi = node.args[2] if len(node.args) > 2 else 1.0
        return lo, hi
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    return lo, hi


@register(aten.relu.default, aten.relu_.default, aten.relu6.default, aten.hardtanh.default,
          aten.hardtanh_.default, aten.clamp.default)
def clamp_like(em, node):
    x_node = node.args[0]
    layout = em.layout(node)
    x = em.tensor(x_node, layout)
    lo, hi = _bounds(node)
    if em.is_int and em.qout(node) is not None:
        qi, qo = em.qin(node, x_node), em.qout(node)
        x = requantize(em, x, qi, qo, "rq")
        qlo = qo.qmin if lo is None else max(qo.qmin, quantize_value(qo, lo))
        qhi = qo.qmax if hi is None else min(qo.qmax, quantize_value(qo, hi))
        if qlo <= qo.qmin and qhi >= qo.qmax:
            # bounds coincide with the integer range: RESCALE saturation already clamps
            em.bind(node, x, layout)
            return
        out = em.out(node, layout)
        clamp(em, x, qlo, qhi, out)
    else:
        bits = {"INT8": 8, "INT16": 16, "INT32": 32}.get(em.dtype(node))
        if bits:  # plain integer tensors (either profile): bounds in the tensor's range
            lo = -(2 ** (bits - 1)) if lo is None else max(int(lo), -(2 ** (bits - 1)))
            hi = 2 ** (bits - 1) - 1 if hi is None else min(int(hi), 2 ** (bits - 1) - 1)
        out = em.out(node, layout)
        if bits == 32:  # CLAMP takes no INT32: MAXIMUM then MINIMUM with constant bounds
            rank = len(em.writer.shapes[x])
            lo_c = em.const("lo", np.array([lo]), "INT32", [1] * max(rank, 1))
            hi_c = em.const("hi", np.array([hi]), "INT32", [1] * max(rank, 1))
            fp_binary(em, "MINIMUM", fp_binary(em, "MAXIMUM", x, lo_c, "max"), hi_c, "", out=out)
        else:
            clamp(em, x, lo, hi, out)
    em.bind(node, out, layout)


# ----------------------------------------------------------------------------- TABLE
def _reference_fn(node):
    """The float function a TABLE must reproduce (the aten op with the node's args)."""
    t = node.target
    extra = list(node.args[1:])
    kwargs = dict(node.kwargs)

    def f(x):
        return t(x, *extra, **kwargs)

    return f


def _table_entries(fn, q: torch.Tensor, qi, qo) -> torch.Tensor:
    """quantize(fn(dequantize(q))) as :mod:`lowering.reference` evaluates the fake-quant graph.

    The dequantized inputs are torch's float32 values (acos(1.0) = 0 where the real product
    1.0000000591 has none); fn and the quantization run in float64: in float32, 1/x
    (softmax's reciprocal) landed on the other side of a rounding tie for a few entries, and
    swin_t's output drifted up to 6 steps from those flips.
    """
    x = dequantize_f32(q, qi.s, qi.zp)
    y = torch.as_tensor(fn(x)).double()
    # torch's cast, as quantize_per_tensor casts: a NaN entry (acos outside [-1, 1]) becomes 0
    return quantize_f64(y, qo.s, qo.zp, qo.qmin, qo.qmax, qo.dtype)


def int8_table(fn, qi, qo) -> np.ndarray:
    """256-entry table: quantize(fn(dequantize(q))) exactly as the fake-quant graph computes it.

    Example:
        >>> from lowering.qparams import QParams
        >>> q = QParams(np.array([0.1]), np.array([0]), torch.int8, -128, 127)
        >>> int(int8_table(torch.relu, q, q)[:130].max())
        1
    """
    q = torch.arange(-128, 128, dtype=torch.int8)
    return _table_entries(fn, q, qi, qo).to(torch.int8).numpy()


def int16_table(fn, qi, qo) -> np.ndarray:
    """513-entry int16 table sampled every 128 input steps (TOSA interpolates between).

    Sample ``k`` stands for the input level ``q = 128 k - 32768`` (``k = 512``: the virtual
    level 32768); the entries stay in the output's ``[qmin, qmax]``.

    Example:
        >>> from lowering.qparams import QParams
        >>> q = QParams(np.array([2.0 ** -8]), np.array([0]), torch.int16, -32768, 32767)
        >>> int16_table(torch.relu, q, q)[[0, 256, 512]].tolist()
        [0, 0, 32767]
        >>> qi = QParams(np.array([1 / 32767]), np.array([0]), torch.int16, -32767, 32767)
        >>> int16_table(torch.acos, qi, q)[[0, 512]].tolist()  # pi and 0, no NaN at -32768
        [804, 0]
    """
    return _int16_table_fit(fn, qi, qo)[0]


def _int16_table_fit(fn, qi, qo) -> tuple[np.ndarray, int]:
    """(:func:`int16_table`, the lowered TABLE's largest error): the TABLE's output (TOSA's
    interpolation, then the RESCALE by 1/128) against the fake-quant value (float64) at every
    int16 level in the input's ``[qmin, qmax]`` where fn is a number, in output steps."""
    # A sample only steers the interpolation of the levels beside it. At a level the quantizer
    # never produces (outside [qmin, qmax]; the virtual 32768) it takes fn at the nearest
    # level in range, as before. Where fn is NaN (outside its domain: acos at -1 - 1/32767,
    # log(-0.5)) it extends its valid neighbour's segment through fn at the nearest level in
    # range that has a value (_edge_samples). Before, acos's NaN at -1 - 1/32767 became 0 and
    # acos(-1) interpolated to 249 instead of 32767. ExecuTorch clamps the levels to
    # [qmin, qmax] too but quantizes a NaN as it comes.
    levels = torch.arange(-32768, 32769, dtype=torch.int32)
    y = torch.as_tensor(fn(dequantize_f32(levels, qi.s, qi.zp))).double().numpy()
    nan = np.isnan(y)
    in_range = (levels >= qi.qmin).numpy() & (levels <= qi.qmax).numpy()
    want = np.arange(513) * 128  # the samples' levels, as indices into y
    pick = _nearest(~nan & in_range, want)
    qmin, qmax = max(qo.qmin, -32768), min(qo.qmax, 32767)
    edge = _edge_samples(y, want, pick, nan[want])
    tab = quantize_f64(torch.from_numpy(edge), qo.s, qo.zp, qmin, qmax, torch.int64)
    tab = _fit_slopes(tab.numpy(), want, pick)
    # every level's fake-quant value, which the interpolation should meet (the fake-quant's
    # float64 evaluation: y as _table_entries makes it); where fn is steep the samples move off
    # fn's own values to share the interpolation's error between their segments (_minimax_knots)
    target = quantize_f64(torch.from_numpy(y[:-1]), qo.s, qo.zp, qmin, qmax, torch.int64).numpy()
    valid = in_range[:-1] & ~nan[:-1]
    tab = _minimax_knots(tab, target, valid, _movable_knots(valid, want, pick), qmin, qmax)
    return tab.astype(np.int16), _worst_error(tab, target, valid)


def _worst_error(tab: np.ndarray, target: np.ndarray, valid: np.ndarray) -> int:
    """max |TABLE(level) - target[level]| over the ``valid`` levels (0: none is)."""
    if not valid.any():
        return 0
    got = _segment(tab[:-1].astype(np.int64), tab[1:].astype(np.int64)).reshape(-1)
    return int(np.abs(got - target)[valid].max())


def _movable_knots(valid: np.ndarray, want: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """The samples :func:`_minimax_knots` may move: those at a level of their own where fn has
    a value (``pick == want``) whose two segments hold only such levels, away from the ends of
    the levels fn is valid on: a saturated input (qmin, qmax) or the edge of fn's domain (acos
    at 1) keeps the value fn's own samples give it there."""
    segment_ok = valid.reshape(512, 128).all(axis=1)
    movable = pick == want
    movable[[0, -1]] = False
    movable[1:-1] &= segment_ok[:-1] & segment_ok[1:]
    first, last = np.flatnonzero(valid)[[0, -1]] if valid.any() else (0, 0)
    ends = [first >> 7, (first >> 7) + 1, last >> 7, (last >> 7) + 1]  # the knots of the end segments
    movable[np.clip(ends, 0, 512)] = False
    return movable


#: the 128 fractions of one int16 TABLE segment
_FRACTIONS = np.arange(128, dtype=np.int64)


def _segment(base: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """The lowered int16 TABLE's outputs at the 128 levels of segments from ``base`` to ``nxt``
    (broadcast, fractions last): TOSA's ``(base << 7) + (next - base) * fraction``, then the
    RESCALE by 1/128 that :func:`table` emits (round half up)."""
    return ((base[..., None] << 7) + (nxt - base)[..., None] * _FRACTIONS + 64) >> 7


def _minimax_knots(tab: np.ndarray, target: np.ndarray, valid: np.ndarray, movable: np.ndarray,
                   lo: int, hi: int, sweeps: int = 6, reach: int = 3) -> np.ndarray:
    """The 513 samples ``tab`` with each ``movable`` one set to the value that brings the
    interpolated outputs of its two segments closest to ``target`` (each level's value, 65536;
    only the ``valid`` levels count): the smallest largest error, then the smallest total.

    Sampling fn at the knots leaves the whole interpolation error on one side where fn curves
    (a chord lies above a convex fn); moving a knot by part of that error shares it between
    the sides, as a minimax line does. Knots move in sweeps, the even ones then the odd ones
    (two knots of one parity share no segment), each to the best of its current value (so no
    segment's largest error or total error, nor the table's, ever grows) and the values around
    the one that centres its segments' errors; only knots beside a segment 2 or more steps off
    move. Entries stay in ``[lo, hi]`` and slopes within int16 (TABLE REQUIREs it).

    Example:
        >>> levels = np.arange(65536) - 32768
        >>> target = (1 << 24) // (np.abs(levels) + 1024)    # steep and convex: a reciprocal
        >>> knots = np.arange(513) * 128 - 32768
        >>> tab = (1 << 24) // (np.abs(knots) + 1024)        # fn at the knots
        >>> moved = np.ones(513, bool); moved[[0, -1]] = False
        >>> def worst(t):
        ...     return int(np.abs(_segment(t[:-1], t[1:]).reshape(-1) - target).max())
        >>> worst(tab), worst(_minimax_knots(tab, target, np.ones(65536, bool), moved, -32768, 32767))
        (54, 30)
    """
    tab = tab.astype(np.int64)
    goal, counted = target.reshape(512, 128), valid.reshape(512, 128)
    knots = np.arange(513)
    for _ in range(sweeps):
        changed = False
        for parity in (0, 1):
            ks = np.flatnonzero(movable & (knots % 2 == parity))
            left = np.where(counted[ks - 1], _segment(tab[ks - 1], tab[ks]) - goal[ks - 1], 0)
            right = np.where(counted[ks], _segment(tab[ks], tab[ks + 1]) - goal[ks], 0)
            busy = np.maximum(np.abs(left).max(axis=1, initial=0), np.abs(right).max(axis=1, initial=0)) >= 2
            if not busy.any():
                continue
            ks, errors = ks[busy], np.concatenate([left[busy], right[busy]], axis=1)
            before, now, after = tab[ks - 1], tab[ks], tab[ks + 1]
            centre = -np.round((errors.max(axis=1) + errors.min(axis=1)) / 2).astype(np.int64)
            steps = np.concatenate([np.zeros((len(ks), 1), np.int64), centre[:, None] + np.arange(-reach, reach + 1)],
                                   axis=1)
            candidates = now[:, None] + steps
            allowed = (candidates >= lo) & (candidates <= hi) & (np.abs(candidates - before[:, None]) <= 32767) \
                & (np.abs(after[:, None] - candidates) <= 32767)
            left = np.where(counted[ks - 1][:, None], np.abs(_segment(before[:, None], candidates) - goal[ks - 1][:, None]),
                            0)
            right = np.where(counted[ks][:, None], np.abs(_segment(candidates, after[:, None]) - goal[ks][:, None]), 0)
            # (largest error < 2**16, then total < 2**24, then the smallest move < 2**17: one int64 key)
            score = (np.maximum(left.max(axis=2), right.max(axis=2)) << 41) \
                + ((left.sum(axis=2) + right.sum(axis=2)) << 17) + np.abs(steps)
            score[~allowed] = np.iinfo(np.int64).max
            best = candidates[np.arange(len(ks)), score.argmin(axis=1)]
            changed |= bool((best != now).any())
            tab[ks] = best
        if not changed:
            break
    return tab


def _nearest(mask: np.ndarray, want: np.ndarray) -> np.ndarray:
    """For each index in ``want``, the nearest index where ``mask`` holds (all: none does)."""
    ok = np.flatnonzero(mask)
    ok = ok if ok.size else np.arange(len(mask))  # fn NaN everywhere: torch's cast of NaN
    j = np.searchsorted(ok, want)
    lo, hi = ok[np.maximum(j - 1, 0)], ok[np.minimum(j, ok.size - 1)]
    return np.where(np.abs(hi - want) <= np.abs(want - lo), hi, lo)


def _edge_samples(y: np.ndarray, want: np.ndarray, pick: np.ndarray,
                  nan: np.ndarray) -> np.ndarray:
    """fn at the samples: ``y[pick]``, except that a sample where fn is NaN (``nan``) next to
    a valid one (``pick == want``) with the nearest valid level between them takes the value
    on the line through the valid sample and that level: the valid levels of that segment get
    the chord of fn (exact at the edge: acosh(1) = 0), not a line through the edge's value
    drawn from a level the TABLE never sees (acosh on [1, 10], int16: 383 steps off at most,
    not 1075)."""
    v = y[pick].copy()
    valid = pick == want
    for k in np.flatnonzero(nan):
        n = k + (1 if pick[k] > want[k] else -1)  # the neighbour on the valid side
        d = abs(want[n] - pick[k]) if 0 <= n < len(want) and valid[n] else 0
        if 0 < d < 128:
            with np.errstate(invalid="ignore"):  # inf - inf: keep the edge's value
                line = v[n] + (y[pick[k]] - v[n]) * 128 / d
            v[k] = v[k] if np.isnan(line) else line
    return v


def _fit_slopes(tab: np.ndarray, want: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """Bring each sample whose level no input has (``anchor``: the nearest level in range
    where fn has a value) within an int16 slope (TABLE REQUIREs it) of its neighbour towards
    the anchor, nearest first; the others are fn's own values."""
    free = np.flatnonzero(anchor != want)
    for k in free[np.argsort(np.abs(want - anchor)[free], kind="stable")]:
        n = k + (1 if anchor[k] > want[k] else -1)
        if 0 <= n < len(tab):
            tab[k] = min(max(tab[k], tab[n] - 32768), tab[n] + 32767)
    return tab


#: With ``QuantConfig.exact_int16_lookups``, the largest error, in output steps, of an int16
#: TABLE the lowering emits: a function whose TABLE would be further off the fake-quant model
#: at any input level in range is looked up exactly instead (:func:`_int16_lookup`). Smooth functions over their usual ranges (sigmoid,
#: tanh, gelu, silu, erf, softplus, elu...) keep their TABLE (1-2 steps: the rounding of the
#: interpolation and of the RESCALE by 1/128 that follows it, each up to half a step, on top of
#: the sampled entries' own rounding); steep ones (1/x, rsqrt, sqrt and log near 0: hundreds to
#: thousands of steps) and kinks or saturation inside a 128-level segment are not. TABLE stays
#: the default because it is native on every Ethos-U; GATHER compiles on Ethos-U85 only (Vela
#: 5.2 refuses the whole graph on Ethos-U55/U65, TOSA having no CPU fallback there).
INT16_TABLE_MAX_STEPS: float = 2
#: ``GraphModule.meta`` key: whether ``QuantConfig.exact_int16_lookups`` asked for the exact
#: lookup above :data:`INT16_TABLE_MAX_STEPS` (else every int16 function is a TABLE)
EXACT_INT16_LOOKUPS = "tv_exact_int16_lookups"


def table(em, node, fn, x_node, layout, out=None):
    """One TABLE of ``fn`` for an int8 input (256 entries); for an int16 one the interpolating
    513-entry TABLE, or, when the graph asks for exact lookups (:data:`EXACT_INT16_LOOKUPS`)
    and that TABLE is more than :data:`INT16_TABLE_MAX_STEPS` off anywhere in range, the
    exact 65536-entry lookup (:func:`_int16_lookup`)."""
    x = em.tensor(x_node, layout)
    qi, qo = em.qin(node, x_node), em.qout(node)
    if qi is None or qo is None:
        raise LoweringError("TABLE op needs quantized input and output", node=node.name)
    out = out or em.out(node, layout)
    if qi.dtype == torch.int8:
        tab = em.const("table", int8_table(fn, qi, qo), "INT8", [256])
        em.writer.op("TABLE", [x, tab], out)
    elif qi.dtype == torch.int16:
        entries, worst = _int16_table_fit(fn, qi, qo)
        if worst > INT16_TABLE_MAX_STEPS and em.gm.meta.get(EXACT_INT16_LOOKUPS, False):
            # steep (1/x, sqrt, log near 0) or kinked within a segment: exact instead
            return _int16_lookup(em, fn, x, qi, qo, out, "lookup")
        tab = em.const("table", entries, "INT16", [513])
        raw = em.new("table_i32", em.writer.shapes[x], "INT32")
        em.writer.op("TABLE", [x, tab], raw)
        # the entries already hold the output zero point (int16_table quantizes with it): the
        # RESCALE only drops TABLE's 7 fraction bits (TOSA also refuses an int16 output_zp)
        rescale(em, raw, INT_OF[qo.dtype], 1.0 / 128.0, 0, 0, "table_rs", out_name=out)
    else:
        raise LoweringError(f"TABLE for {qi.dtype} not supported", node=node.name)
    return out


#: aten op -> FP builder ``fn(em, node, x, out)``: writes ``out`` from the tensor ``x``
#: (FP32, or an integer type for the ops that keep it: abs, neg, rounding). In INT each of
#: these ops is one TABLE (:func:`table`) of the op itself.
FP_BUILDERS: dict = {}


def unary_function(*targets, step: bool = False, profiles=frozenset({"INT", "FP"})):
    """Register element-wise functions of one tensor: a TABLE in INT, ``fn`` in FP.

    ``fn(em, node, x, out)`` emits the FP graph; ``step`` marks functions with jumps
    (int8 TABLE only). The emitter registered for ``targets`` carries ``fn``'s name, module
    and docstring, so the supported-op table names the FP builder. ``profiles={"INT"}``
    registers the TABLE alone (the op's FP form is a decomposition, or it stays on the CPU):
    ``fn`` is then never called.

    Example:
        >>> from lowering.ops import REGISTRY
        >>> REGISTRY[aten.sigmoid.default].__name__, aten.sigmoid.default in FP_BUILDERS
        ('sigmoid', True)
    """

    def deco(fn):
        @functools.wraps(fn)
        def emit(em, node):
            _emit_unary(em, node, fn)

        for t in targets:
            if "FP" in profiles:
                FP_BUILDERS[t] = fn
            TABLE_OPS.add(t)
            if step:
                STEP_FUNCTIONS.add(t)
        register(*targets, profiles=profiles)(emit)
        return fn

    return deco


#: aten op -> the TOSA op computing it exactly on int32: its int16 form, in place of a TABLE
_EXACT_ON_INT32 = {aten.neg.default: "NEGATE", aten.abs.default: "ABS"}


def _exact_int16(em, node, x_node, layout, tosa_op: str, qi, qo) -> str:
    """neg / abs of an int16 tensor: ``tosa_op`` on int32, then one RESCALE to the output's
    scale (ties to even, as the fake-quant rounds). The int16 TABLE interpolates between
    samples 128 levels apart, which cannot follow the output's saturation where its range is a
    little narrower than fn's: neg was 24 steps off there (ExecuTorch's a16w8 neg test)."""
    x = em.tensor(x_node, layout)
    suffix = tosa_op.lower()
    wide = to_int32(em, x, qi, f"{suffix}_i32")  # (exact: an int16 zero point is 0)
    y = fp_unary(em, tosa_op, wide, f"{suffix}_acc")
    out = em.out(node, layout)
    rescale_ties_even(em, y, INT_OF[qo.dtype], float(qi.s) / float(qo.s), int(qo.zp), f"{suffix}_rs", out_name=out)
    return out


def lookup(em, index: str, entries: np.ndarray, dtype: str, out: str, suffix: str) -> str:
    """``out = entries[index]``: one GATHER from the constant ``entries`` (a table of every
    input level, or pair of levels) at the int32 tensor ``index``, reshaped to ``out``'s shape.
    Exact for any function of the levels, where TABLE's 513 int16 samples interpolate."""
    count = int(np.prod(em.writer.shapes[index], dtype=np.int64))
    flat = em.new(f"{suffix}_index_flat", [1, count], "INT32")
    em.writer.op("RESHAPE", [index, em.const_shape(f"{suffix}_index_shape", [1, count])], flat)
    table = em.const(f"{suffix}_table", entries, dtype, [1, len(entries), 1])
    gathered = em.new(f"{suffix}_gathered", [1, count, 1], dtype)
    em.writer.op("GATHER", [table, flat], gathered)
    em.writer.op("RESHAPE", [gathered, em.const_shape(f"{suffix}_out_shape", em.writer.shapes[out])], out)
    return out


def _int16_lookup(em, fn, x: str, qi, qo, out: str, suffix: str = "step") -> str:
    """``fn`` of the int16 tensor ``x`` looked up (:func:`lookup`) in a 65536-entry table of
    ``quantize(fn(dequantize(q)))`` for every input level, at ``q + 32768``: the fake-quant
    model's value exactly. For a step function (sign, floor, round, hardshrink...), whose jumps
    the int16 TABLE's interpolation between samples 128 levels apart would smear over those
    levels, and for any function that TABLE cannot follow within :data:`INT16_TABLE_MAX_STEPS`."""
    # the raw level, whatever the zero point (the entries are indexed by it)
    wide = rescale(em, x, "INT32", 1.0, 0, 0, f"{suffix}_i32")
    index = fp_binary(em, "ADD", wide, em.const(f"{suffix}_offset", [32768], "INT32",
                                                [1] * max(len(em.writer.shapes[wide]), 1)), f"{suffix}_index")
    entries = _table_entries(fn, torch.arange(-32768, 32768, dtype=torch.int16), qi, qo)
    return lookup(em, index, entries.to(torch.int16).numpy(), INT_OF[qo.dtype], out, suffix)


def _emit_unary(em, node, fp_builder):
    x_node = node.args[0]
    layout = em.layout(node)
    if em.is_int and em.qout(node) is not None:
        qi, qo = em.qin(node, x_node), em.qout(node)
        if node.target in STEP_FUNCTIONS and qi is not None and qi.dtype == torch.int16:
            out = _int16_lookup(em, _reference_fn(node), em.tensor(x_node, layout), qi, qo, em.out(node, layout))
        elif node.target in STEP_FUNCTIONS and qi is not None and qi.dtype != torch.int8:
            raise LoweringError("a step function needs a TABLE entry per input value: "
                                f"int8 or int16 inputs, not {qi.dtype}", node=node.name)
        elif node.target in _EXACT_ON_INT32 and qi is not None and qi.dtype == torch.int16 == qo.dtype:
            out = _exact_int16(em, node, x_node, layout, _EXACT_ON_INT32[node.target], qi, qo)
        else:
            out = table(em, node, _reference_fn(node), x_node, layout)
    else:
        x = em.tensor(x_node, layout)
        if em.writer.dtypes[x] != em.dtype(node):
            raise LoweringError(f"{em.writer.dtypes[x]} input with a {em.dtype(node)} result "
                                "(integer inputs of a float function)", node=node.name)
        out = em.out(node, layout)
        fp_builder(em, node, x, out)
    em.bind(node, out, layout)


def _native(tosa_op: str):
    def build(em, node, x, out):
        fp_unary(em, tosa_op, x, "fp", out=out)

    build.__name__ = build.__qualname__ = tosa_op.lower()
    build.__doc__ = f"One TOSA {tosa_op}."
    return build


for _target, _tosa_op in {aten.sigmoid.default: "SIGMOID", aten.tanh.default: "TANH",
                          aten.exp.default: "EXP", aten.log.default: "LOG",
                          aten.rsqrt.default: "RSQRT", aten.reciprocal.default: "RECIPROCAL",
                          aten.erf.default: "ERF", aten.sin.default: "SIN",
                          aten.cos.default: "COS", aten.abs.default: "ABS",
                          aten.neg.default: "NEGATE"}.items():
    unary_function(_target)(_native(_tosa_op))


def fp_const(em, node, value: float, suffix: str, dtype: str = "FP32") -> str:
    """A one-element constant of rank ``node``'s output (so that it broadcasts against it).

    Example:
        >>> from lowering.api import export_module
        >>> from lowering.emitter import Emitter
        >>> from lowering.graph_utils import propagate_values
        >>> gm = export_module(torch.nn.Tanh(), (torch.ones(2, 3),))
        >>> propagate_values(gm, (torch.ones(2, 3),))
        >>> em = Emitter(gm, "FP"); em.current = next(iter(gm.graph.nodes))
        >>> em.writer.shapes[fp_const(em, em.current, 0.5, "half")]
        [1, 1]
    """
    return fp_scalar(em, value, len(em.shape(node)), suffix, dtype)


@unary_function(aten.sqrt.default)
def sqrt(em, node, x, out):
    """1 / rsqrt(x)."""
    fp_sqrt(em, x, "fp", out=out)


@unary_function(aten.gelu.default)
def gelu(em, node, x, out):
    """x/2 * (1 + erf(x/sqrt 2)), or the tanh approximation when ``approximate="tanh"``."""
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    if approx == "tanh":
        x3 = fp_binary(em, "MUL", fp_binary(em, "MUL", x, x, "x2"), x, "x3")
        inner = fp_binary(em, "ADD", x, fp_binary(em, "MUL", x3, fp_const(em, node, 0.044715, "k1"),
                                                  "kx3"), "in")
        th = fp_unary(em, "TANH", fp_binary(em, "MUL", inner,
                                            fp_const(em, node, math.sqrt(2 / math.pi), "k2"), "sc"),
                      "th")
    else:
        th = fp_unary(em, "ERF", fp_binary(em, "MUL", x, fp_const(em, node, 1 / math.sqrt(2), "k1"),
                                           "sc"), "erf")
    one = fp_binary(em, "ADD", th, fp_const(em, node, 1.0, "one"), "p1")
    hx = fp_binary(em, "MUL", x, fp_const(em, node, 0.5, "half"), "hx")
    fp_binary(em, "MUL", hx, one, "fp", out=out)


@unary_function(aten.silu.default)
def silu(em, node, x, out):
    """x * sigmoid(x)."""
    fp_binary(em, "MUL", x, fp_unary(em, "SIGMOID", x, "sig"), "fp", out=out)


@unary_function(aten.hardswish.default, aten.hardsigmoid.default)
def hard_sigmoid(em, node, x, out):
    """hardsigmoid = clamp(x + 3, 0, 6) / 6; hardswish = x * hardsigmoid(x)."""
    p3 = fp_binary(em, "ADD", x, fp_const(em, node, 3.0, "three"), "p3")
    cl = em.new("cl", em.writer.shapes[p3], "FP32")
    clamp(em, p3, 0.0, 6.0, cl)
    if node.target == aten.hardsigmoid.default:
        fp_binary(em, "MUL", cl, fp_const(em, node, 1.0 / 6.0, "sixth"), "fp", out=out)
        return
    hs = fp_binary(em, "MUL", cl, fp_const(em, node, 1.0 / 6.0, "sixth"), "hs")
    fp_binary(em, "MUL", x, hs, "fp", out=out)


@unary_function(aten.leaky_relu.default)
def leaky_relu(em, node, x, out):
    """max(x, slope * x) (min for a slope above 1)."""
    slope = node.args[1] if len(node.args) > 1 else 0.01
    xs = fp_binary(em, "MUL", x, fp_const(em, node, slope, "slope"), "xs")
    fp_binary(em, "MAXIMUM" if slope <= 1 else "MINIMUM", x, xs, "fp", out=out)


def elu_like(em, node, x, out, alpha: float, scale: float = 1.0, input_scale: float = 1.0):
    """``scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1))``, the form elu, celu
    and selu share."""
    xs = x if input_scale == 1.0 else fp_binary(em, "MUL", x, fp_const(em, node, input_scale,
                                                                    "input_scale"), "xs")
    em1 = fp_binary(em, "SUB", fp_unary(em, "EXP", xs, "exp"), fp_const(em, node, 1.0, "one"), "em1")
    neg = fp_binary(em, "MUL", em1, fp_const(em, node, alpha, "alpha"), "neg")
    pos = compare(em, "GREATER", x, fp_const(em, node, 0.0, "zero"), "pos")
    if scale == 1.0:
        select(em, pos, x, neg, "fp", out=out)
        return
    unscaled = select(em, pos, x, neg, "unscaled")
    fp_binary(em, "MUL", unscaled, fp_const(em, node, scale, "scale"), "fp", out=out)


@unary_function(aten.elu.default)
def elu(em, node, x, out):
    """elu(x, alpha, scale, input_scale)."""
    args = list(node.args[1:4]) + [1.0] * (3 - len(node.args[1:4]))
    elu_like(em, node, x, out, *(float(a) for a in args))


@unary_function(aten.softplus.default)
def softplus(em, node, x, out):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x exceeds ``threshold``."""
    beta = node.args[1] if len(node.args) > 1 else 1.0
    thr = node.args[2] if len(node.args) > 2 else 20.0
    bx = fp_binary(em, "MUL", x, fp_const(em, node, beta, "beta"), "bx")
    sp = fp_unary(em, "LOG", fp_binary(em, "ADD", fp_unary(em, "EXP", bx, "exp"),
                                       fp_const(em, node, 1.0, "one"), "p1"), "log")
    sp = fp_binary(em, "MUL", sp, fp_const(em, node, 1.0 / beta, "ibeta"), "sp")
    big = compare(em, "GREATER", bx, fp_const(em, node, thr, "thr"), "big")
    select(em, big, x, sp, "fp", out=out)


@unary_function(aten.pow.Tensor_Scalar)
def pow_scalar(em, node, x, out):
    """POW with a constant exponent."""
    em.writer.op("POW", [x, fp_const(em, node, float(node.args[1]), "exp")], out)


@unary_function(aten.log1p.default)
def log1p(em, node, x, out):
    """log(1 + x)."""
    fp_unary(em, "LOG", fp_binary(em, "ADD", x, fp_const(em, node, 1.0, "one"), "p1"), "fp", out=out)


@unary_function(aten.expm1.default)
def expm1(em, node, x, out):
    """exp(x) - 1."""
    fp_binary(em, "SUB", fp_unary(em, "EXP", x, "exp"), fp_const(em, node, 1.0, "one"), "fp", out=out)


@unary_function(aten.mish.default)
def mish(em, node, x, out):
    """x * tanh(log(1 + exp(x)))."""
    sp = fp_unary(em, "LOG", fp_binary(em, "ADD", fp_unary(em, "EXP", x, "exp"),
                                       fp_const(em, node, 1.0, "one"), "p1"), "sp")
    fp_binary(em, "MUL", x, fp_unary(em, "TANH", sp, "th"), "fp", out=out)
