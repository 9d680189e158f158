"""RESCALE's static range proofs: from a RESCALE's constant multipliers, shifts and zero
points, the input values for which every data REQUIRE of apply_scale holds and the int64
arithmetic of the fast kernel is exact (made once per operator when the plan is built; see
:func:`tosa_verify.ops.type_conversion.prepare_rescale`).

>>> _by_shift([3, 9, 4, 1], [30, 30, 31, 30], 1, 9, 30, 31)
[(30, 1, 9), (31, 4, 4)]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..dtypes import dtype_info
from ..numerics import int_range

_INT32_RANGE = int_range("INT32")


class _Channels(NamedTuple):
    """A RESCALE's multipliers and shifts as lists of ints, :func:`_by_shift` of them, and their
    extremes (each taken once: the proofs below read them several times, and a per-channel
    RESCALE has up to hundreds of channels)."""

    ms: list[int]
    ss: list[int]
    by_shift: list[tuple[int, int, int]]
    m_lo: int
    m_hi: int
    s_lo: int
    s_hi: int


def _make_channels(ms: list[int], ss: list[int], extremes: tuple[int, int, int, int] | None = None) -> _Channels:
    """:class:`_Channels` of multipliers ``ms`` and shifts ``ss`` (at least one channel);
    ``extremes``: their (min, max, min, max) if known.

    >>> _make_channels([3, 9, 4], [30, 30, 31]).by_shift
    [(30, 3, 9), (31, 4, 4)]
    """
    m_lo, m_hi, s_lo, s_hi = extremes or (min(ms), max(ms), min(ss), max(ss))
    return _Channels(ms, ss, _by_shift(ms, ss, m_lo, m_hi, s_lo, s_hi), m_lo, m_hi, s_lo, s_hi)


def _channel_lists(m, s, lists: _Channels | None) -> _Channels:
    """``lists``, or the setup's multiplier ``m`` and shift ``s`` as :class:`_Channels`."""
    if lists is not None:
        return lists
    return _make_channels(_channels(m), _channels(s))


def _safe_inputs(params: tuple, lists: _Channels | None = None):
    """(lo, hi, fast parameters) such that every input value in [lo, hi] passes RESCALE's data
    REQUIREs and the int64 arithmetic of :func:`.type_conversion._fast_rescale` is exact; None when the common
    case does not apply (unsigned, double rounding with a shift > 31) or no such value exists.

    Per channel, the scaled value ``(v * m + round) >> s`` is monotonic in ``v``, so each REQUIRE
    bounds ``v`` from below and above; the window is the intersection over channels. ``lists``:
    as for :func:`_proven_in_range`.
    """
    (in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned, input_zp, output_zp,
     m, s, bounds) = params
    lists = _channel_lists(m, s, lists)
    ms, s_hi = lists.ms, lists.s_hi
    if input_unsigned or output_unsigned or (rounding_mode == "DOUBLE_ROUND" and s_hi > 31):
        return None
    lo32, hi32 = _INT32_RANGE
    # results and results + output_zp within int32
    r_lo, r_hi = max(lo32, lo32 - output_zp), min(hi32, hi32 - output_zp)
    lo_v, hi_v = int_range(in_t)
    lo_v, hi_v = lo_v - input_zp, hi_v - input_zp
    limit = ((1 << 62) - ((abs(output_zp) + 1) << s_hi)) // max(lists.m_hi, 1)  # int64 headroom
    lo_v, hi_v = max(lo_v, -limit), min(hi_v, limit)
    if 0 in ms and not r_lo <= 0 <= r_hi:  # a zero multiplier scales every value to 0
        return None
    for sc, mc in _largest_multipliers(lists):
        half = 1 << (sc - 1)
        if scale32:
            lo_v, hi_v = max(lo_v, -half), min(hi_v, half - 1)
        if mc == 0:
            continue
        # r_lo < 0 < r_hi (int32's range moved by an int8/int16 zero point): of the channels
        # with this shift, the largest multiplier gives the tightest bound on both sides
        lo_v = max(lo_v, -((half - (r_lo << sc)) // mc))  # ceil(((r_lo << s) - half) / m)
        hi_v = min(hi_v, (((r_hi + 1) << sc) - half - 1) // mc)
    if lo_v > hi_v:
        return None
    fast = _proven_in_range(params, (lo_v + input_zp, hi_v + input_zp), lists)
    return None if fast is None else (lo_v + input_zp, hi_v + input_zp, fast)


def _largest_multipliers(lists: _Channels) -> list[tuple[int, int]]:
    """(shift, largest multiplier with that shift) for each distinct shift of the channels.

    >>> _largest_multipliers(_make_channels([3, 9, 4], [30, 30, 31]))
    [(30, 9), (31, 4)]
    """
    ms, ss = lists.ms, lists.ss
    if len(ms) == 1 or lists.m_lo < 0 or lists.m_hi >= 1 << 31 or lists.s_lo < 2 or lists.s_hi > 62:
        return list(zip(ss, ms, strict=True))  # (an empty tensor's unchecked scales: each channel)
    return [(shift, high) for shift, _, high in lists.by_shift]


def _by_shift(ms: list[int], ss: list[int], m_lo: int, m_hi: int, s_lo: int,
              s_hi: int) -> list[tuple[int, int, int]]:
    """(shift, smallest multiplier, largest multiplier) of the channels of each distinct shift,
    by shift; ``m_lo``..``s_hi``: the extremes of ``ms`` and ``ss``.

    >>> _by_shift([3, 9, 4, 1], [30, 30, 31, 30], 1, 9, 30, 31)
    [(30, 1, 9), (31, 4, 4)]
    """
    if s_lo == s_hi:
        return [(s_lo, m_lo, m_hi)]
    # one pass over the channels, each shift's [smallest, largest] updated in place (a list per
    # shift and a min/max over it cost about twice as much on the 32-128 channels of a layer)
    groups: dict[int, list[int]] = {}
    for m, shift in zip(ms, ss, strict=True):
        group = groups.get(shift)
        if group is None:
            groups[shift] = [m, m]
        elif m < group[0]:
            group[0] = m
        elif m > group[1]:
            group[1] = m
    return [(shift, *groups[shift]) for shift in sorted(groups)]


def _channels(value) -> list[int]:
    """A multiplier or shift (an int64 scalar or per-channel array) as a list of ints."""
    return [int(value)] if not _ndim(value) else value.tolist()


def _proven_in_range(params: tuple, data: tuple[int, int] | None = None,
                     lists: _Channels | None = None):
    """Parameters of a RESCALE whose data REQUIREs hold for *every* input value (or every value
    in ``data``, an inclusive range of the input), else None.

    The scaled value is monotonic in the input (multiplier >= 0), so the extremes of the input
    type bound every intermediate: when they pass the REQUIREs (value within the shift's range,
    results within int32), no input can fail them, and a run skips the checks. Kept to the
    common case: signed output, single rounding (or double rounding with every shift <= 31,
    where it is the same), no int64 overflow in the product. ``lists``: the multipliers and
    shifts as :class:`_Channels`, else taken from ``params``.
    """
    (in_t, out_t, scale32, rounding_mode, input_unsigned, output_unsigned, input_zp, output_zp,
     m, s, bounds) = params
    ms, ss, by_shift, _, m_hi, s_lo, s_hi = _channel_lists(m, s, lists)
    if output_unsigned or (rounding_mode == "DOUBLE_ROUND" and s_hi > 31):
        return None
    if s_lo < 1:  # (an empty tensor's unchecked shifts: no proof, the general kernel runs)
        return None
    lo_in, hi_in = int_range(in_t, unsigned=input_unsigned) if data is None else data
    vmin, vmax = lo_in - input_zp, hi_in - input_zp
    # every int64 intermediate of the kernel below, bounded
    if max(abs(vmin), abs(vmax)) * m_hi + (abs(output_zp) + 1 << s_hi) >= 1 << 62:
        return None
    lo32, hi32 = _INT32_RANGE
    if scale32 and not (-(1 << (s_lo - 1)) <= vmin and vmax < (1 << (s_lo - 1))):
        return None
    # per channel, exact in int64 after the bound above (in Python's integers: for a given v and
    # shift, (v * m + round) >> s is monotonic in m, so over the channels of one shift its
    # extremes are at the smallest and largest multiplier)
    if len(ms) == 1:  # one channel: each bound's scaled value is its own extreme
        half = 1 << (ss[0] - 1)
        ranges = [((vmin * ms[0] + half) >> ss[0],) * 2, ((vmax * ms[0] + half) >> ss[0],) * 2]
    else:
        ranges = [_scaled_range(v, by_shift) for v in (vmin, vmax)]
    for low, high in ranges:
        if not (lo32 <= low and high <= hi32 and lo32 <= low + output_zp and high + output_zp <= hi32):
            return None
    # (v * m + round) >> s, then + output_zp: folded into the rounding term, exact because the
    # zero point is an integer: ((v*m + round) >> s) + zp == (v*m + round + (zp << s)) >> s.
    if len(ms) == 1 and not _ndim(s):  # per tensor: the same integers, from Python's (exact) ones
        # as int64 scalars, made once per kernel: a run's ufuncs take them faster than Python's
        # ints (|rounding| < 2**62, bounded above)
        shift, mult = np.int64(ss[0]), np.int64(ms[0])
        rounding = np.int64((1 << (ss[0] - 1)) + (output_zp << ss[0]))
    elif len(by_shift) == 1:  # per channel, one shift: as a scalar it broadcasts to the same values
        mult = m if not _ndim(m) else np.asarray(m, np.int64)
        shift, rounding = np.int64(s_lo), np.int64((1 << (s_lo - 1)) + (output_zp << s_lo))
    else:  # per channel: each shift's rounding term, looked up by shift (few distinct shifts)
        shift = s if not _ndim(s) else np.asarray(s, np.int64)
        mult = m if not _ndim(m) else np.asarray(m, np.int64)
        terms = np.array([(1 << (x - 1)) + (output_zp << x) for x in range(s_lo, s_hi + 1)], np.int64)
        rounding = terms[shift - s_lo]
    mask = (1 << dtype_info(in_t).bits) - 1 if input_unsigned else 0
    return (mult, shift, rounding, input_zp, mask, *_output_clip(out_t))


def _scaled_range(v: int, by_shift: list[tuple[int, int, int]]) -> tuple[int, int]:
    """Smallest and largest ``(v * m + round) >> s`` over the channels of :func:`_by_shift`'s
    groups (for a given ``v`` and shift, monotonic in ``m``: each group's extreme multipliers).

    >>> _scaled_range(-3, [(2, 1, 5)])
    (-4, -1)
    """
    low = high = None
    for sc, low_m, high_m in by_shift:  # (a loop, no list: one or two groups, per RESCALE)
        half = 1 << (sc - 1)
        first, second = (v * low_m + half) >> sc, (v * high_m + half) >> sc
        if first > second:  # (v < 0: decreasing in m)
            first, second = second, first
        if low is None or first < low:
            low = first
        if high is None or second > high:
            high = second
    return low, high


#: out_t -> (int64 lo, int64 hi, working dtype): schema-level facts a prepare looks up per
#: RESCALE, made once
_CLIPS: dict[str, tuple] = {}


def _output_clip(out_t: str) -> tuple:
    """(lo, hi) of ``out_t`` as int64 scalars and its working dtype, memoized in :data:`_CLIPS`."""
    found = _CLIPS.get(out_t)
    if found is None:
        lo, hi = int_range(out_t)
        found = _CLIPS[out_t] = (np.int64(lo), np.int64(hi), dtype_info(out_t).working)
    return found


def _ndim(value) -> int:
    """``np.ndim`` of a multiplier or shift (a numpy scalar or array, or an int), without its
    dispatch cost."""
    return getattr(value, "ndim", 0)


# --- per tensor, in Python's ints: the common case of lowered graphs (see prepare_rescale) ---------

#: the full range of each signed integer input type
_SIGNED_RANGES = {t: int_range(t) for t in ("INT8", "INT16", "INT32")}


def proven_per_tensor(out_t: str, input_zp: int, output_zp: int, m: int, s: int, lo_in: int, hi_in: int):
    """:func:`_proven_in_range` of a per-tensor, signed, scale32 RESCALE with single rounding, for
    inputs in ``[lo_in, hi_in]``: the same values (or None), from the same bounds, without the
    channel lists (one channel: its multiplier ``m`` and shift ``s``, ``2 <= s <= 62``), the
    multiplier, shift and rounding term as Python's ints (see :func:`as_int64`).

    >>> proven_per_tensor("INT8", 0, 0, 1 << 30, 30, -128, 127)[:3]
    (1073741824, 30, 536870912)
    """
    vmin, vmax = lo_in - input_zp, hi_in - input_zp
    # every int64 intermediate of the kernel bounded, the value-range REQUIRE of scale32 met
    half = 1 << (s - 1)
    if max(abs(vmin), abs(vmax)) * m + ((abs(output_zp) + 1) << s) >= 1 << 62 or not -half <= vmin \
            or not vmax < half:
        return None
    lo32, hi32 = _INT32_RANGE
    # monotonic in v (m >= 0): the extremes' scaled values bound every input's
    low, high = (vmin * m + half) >> s, (vmax * m + half) >> s
    if not (lo32 <= low and high <= hi32 and lo32 <= low + output_zp and high + output_zp <= hi32):
        return None
    return (m, s, half + (output_zp << s), input_zp, 0, *_output_clip(out_t))


def as_int64(fast: tuple) -> tuple:
    """:func:`proven_per_tensor`'s parameters with the multiplier, shift and rounding term as
    int64 scalars, for a kernel that keeps them: a run's ufuncs take those faster than Python's
    ints (|rounding| < 2**62, bounded by the proof).

    >>> as_int64((3, 2, 1, 0, 0, -128, 127, None))[:3]
    (np.int64(3), np.int64(2), np.int64(1))
    """
    m, s, rounding, *rest = fast
    # (one array unpacked into its three scalars: cheaper than three np.int64 calls)
    return (*np.array((m, s, rounding), np.int64), *rest)


def window_per_tensor(in_t: str, out_t: str, input_zp: int, output_zp: int, m: int, s: int):
    """:func:`_safe_inputs` of the RESCALE of :func:`proven_per_tensor` (input type ``in_t``):
    ``(lo, hi, fast parameters)`` (those as :func:`as_int64`) or None, from the same bounds.

    >>> window_per_tensor("INT32", "INT8", 0, 0, 1 << 30, 30)[:2]
    (-536870912, 536870911)
    """
    lo32, hi32 = _INT32_RANGE
    r_lo, r_hi = max(lo32, lo32 - output_zp), min(hi32, hi32 - output_zp)
    lo_v, hi_v = _SIGNED_RANGES[in_t]
    limit = ((1 << 62) - ((abs(output_zp) + 1) << s)) // max(m, 1)  # int64 headroom
    half = 1 << (s - 1)
    lo_v, hi_v = max(lo_v - input_zp, -limit, -half), min(hi_v - input_zp, limit, half - 1)
    if m:
        lo_v = max(lo_v, -((half - (r_lo << s)) // m))  # ceil(((r_lo << s) - half) / m)
        hi_v = min(hi_v, (((r_hi + 1) << s) - half - 1) // m)
    elif not r_lo <= 0 <= r_hi:  # a zero multiplier scales every value to 0
        return None
    if lo_v > hi_v:
        return None
    lo_x, hi_x = lo_v + input_zp, hi_v + input_zp
    fast = proven_per_tensor(out_t, input_zp, output_zp, m, s, lo_x, hi_x)
    return None if fast is None else (lo_x, hi_x, as_int64(fast))
