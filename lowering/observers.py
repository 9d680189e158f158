"""Activation observers of our quantizer: torchao's ``HistogramObserver`` with the same result,
computed faster.

torchao's ``HistogramObserver._non_linear_param_search`` walks the quantile bounds in steps of
1e-5 (up to 10^5 steps), and every step compares tensor elements one by one in Python: seconds
of CPU per observer, most of a small model's INT lowering. :func:`quantile_bounds_search` takes
exactly the same walk, with every per-step quantity precomputed in numpy:

* the bounds ``alpha``/``beta`` are the same sequentially rounded sums (``np.add.accumulate``
  adds in order, as the loop does), so every threshold ``next_alpha * total`` is the same double;
* torch compares a float32 tensor element with a Python float in float32 (the scalar is rounded
  to float32 first), so the thresholds are rounded to float32 before the comparisons;
* the cumulative histogram is non-decreasing, so the loops that move ``l`` and ``r`` one bin at
  a time stop where ``searchsorted`` says, clamped to the same ``[start_bin, end_bin]``;
* the quantization error of each candidate range comes from torchao's own
  ``_compute_quantization_error``, so the stopping rule sees the same numbers.

A test checks the chosen ranges against torchao's search on many histograms.
"""

from __future__ import annotations

import bisect
import functools

import numpy as np
import torch
from torchao.quantization.pt2e.observer import (
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
)

_STEP = 1e-5  # torchao's granularity of the quantile walk
_MAX_STEPS = 100_002  # alpha + beta steps before alpha >= beta, with room for rounding


@functools.cache
def _walk() -> tuple[list[float], list[float], np.ndarray]:
    """Every value ``alpha`` and ``beta`` take in torchao's loop, in order (``alpha += 1e-5`` and
    ``beta -= 1e-5`` in float64, rounded after each step), and the betas as an array."""
    alphas = np.add.accumulate(np.concatenate(([0.0], np.full(_MAX_STEPS, _STEP))))
    betas = np.subtract.accumulate(np.concatenate(([1.0], np.full(_MAX_STEPS, _STEP))))
    return alphas.tolist(), betas.tolist(), betas


def _first_below(descending: np.ndarray, value: float, start: int) -> int:
    """The first index ``k >= start`` with ``descending[k] < value`` (``len`` if none), for a
    non-increasing array."""
    return start + int(np.searchsorted(-descending[start:], -value, side="right"))


def quantile_bounds_search(observer: HistogramObserver) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(new_min, new_max)`` torchao's ``_non_linear_param_search`` returns for ``observer``.

    Example:
        >>> obs = HistogramObserver(); _ = obs(torch.randn(1000, generator=torch.Generator().manual_seed(0)))
        >>> [float(v) for v in quantile_bounds_search(obs)] == [float(v) for v in obs._non_linear_param_search()]
        True
    """
    bins = observer.bins
    assert observer.histogram.size()[0] == bins, "bins mismatch"
    bin_width = (observer.max_val - observer.min_val) / bins
    total = torch.sum(observer.histogram).item()
    csum_t = torch.cumsum(observer.histogram, dim=0)
    as_element = np.dtype(str(csum_t.dtype).removeprefix("torch.")).type  # float32: compare as torch does
    csum = csum_t.tolist()
    alphas, betas, beta_array = _walk()
    # thresholds of r's search at step j (beta_{j+1} * total, compared in the histogram's dtype);
    # non-increasing in j, which lets a run of steps that change nothing be skipped at once
    beta_thresholds = (beta_array[1:] * total).astype(as_element)

    i = j = 0  # steps taken by alpha and by beta
    start_bin, end_bin = 0, bins - 1
    norm_min = float("inf")
    while alphas[i] < betas[j]:
        # l: the first bin from start_bin whose cumulative count reaches next_alpha * total
        first = bisect.bisect_left(csum, float(as_element(alphas[i + 1] * total)))
        left = min(max(first, start_bin), end_bin)
        # r: the last bin down to start_bin whose cumulative count stays within next_beta * total
        last = bisect.bisect_right(csum, float(as_element(betas[j + 1] * total))) - 1
        right = max(min(last, end_bin), start_bin)
        next_start_bin, next_end_bin = start_bin, end_bin
        if left - start_bin > end_bin - right:
            next_start_bin = left
            i += 1
        else:
            next_end_bin = right
            j += 1
        if next_start_bin == start_bin and next_end_bin == end_bin:
            # Only beta moved, and r stayed at end_bin: l cannot change until alpha moves, and
            # alpha moves only once r leaves end_bin (its threshold drops below csum[end_bin])
            # or the loop ends (beta <= alpha). Jump to that step; the steps between change nothing.
            loop_end = _first_below(beta_array, np.nextafter(alphas[i], np.inf), j)
            if start_bin == end_bin:
                j = loop_end
            else:
                j = min(_first_below(beta_thresholds, csum[end_bin], j), loop_end)
            continue
        norm = observer._compute_quantization_error(next_start_bin, next_end_bin)
        if norm > norm_min:
            break
        norm_min = norm
        start_bin, end_bin = next_start_bin, next_end_bin
    new_min = observer.min_val + bin_width * start_bin
    new_max = observer.min_val + bin_width * (end_bin + 1)
    return new_min, new_max


class SpikeAwareHistogramObserver(HistogramObserver):
    """HistogramObserver that keeps the observed min/max when the values fill at most two
    histogram bins (a constant input, a 0/1 mask): there is no outlier to clip, and the L2
    search would step through 10^5 quantiles to find the same range. Its search otherwise is
    torchao's, computed by :func:`quantile_bounds_search`.

    Example:
        >>> obs = SpikeAwareHistogramObserver(); _ = obs(torch.ones(8))
        >>> [round(float(v), 6) for v in obs.calculate_qparams()]
        [0.003922, 0.0]
    """

    def calculate_qparams(self):
        if self.min_val.numel() and bool(torch.isfinite(self.min_val)) and \
                int((self.histogram > 0).sum()) <= 2:
            return self._calculate_qparams(self.min_val, self.max_val)
        return super().calculate_qparams()

    def _non_linear_param_search(self) -> tuple[torch.Tensor, torch.Tensor]:
        return quantile_bounds_search(self)


class _ZeroChannelScale:
    """Weight observers: an all-zero weight channel (or tensor) gets the largest scale of the
    other channels (1.0 if none), not torch's ``eps`` floor.

    Its weights quantize to 0 at any scale, but a convolution's or linear layer's bias is
    quantized at ``input scale * weight scale`` of its channel: at the floor (2**-30) a bias
    of 0.5 is about 10**9 int32 steps, past the int32 range, and clamped (a channel zeroed by
    pruning, or a BN folded into zero weights, lost its bias: 5-19 dB against float).

    >>> obs = ZeroSafePerChannelMinMaxObserver(ch_axis=0, dtype=torch.int8, qscheme=torch.per_channel_symmetric,
    ...                                        quant_min=-127, quant_max=127, eps=2**-30)
    >>> _ = obs(torch.tensor([[0.0, 0.0], [1.27, -0.5]]))
    >>> [round(float(s), 4) for s in obs.calculate_qparams()[0]]
    [0.01, 0.01]
    """

    def _calculate_qparams(self, min_val: torch.Tensor, max_val: torch.Tensor):
        scale, zero_point = super()._calculate_qparams(min_val, max_val)
        zero = (min_val == 0) & (max_val == 0)
        if bool(zero.any()):
            others = scale[~zero] if scale.dim() else scale.new_empty(0)
            fill = float(others.max()) if others.numel() else 1.0
            scale = torch.where(zero, torch.full_like(scale, fill), scale)
        return scale, zero_point


class ZeroSafePerChannelMinMaxObserver(_ZeroChannelScale, PerChannelMinMaxObserver):
    """``PerChannelMinMaxObserver`` for weights (see :class:`_ZeroChannelScale`)."""


class ZeroSafeMinMaxObserver(_ZeroChannelScale, MinMaxObserver):
    """``MinMaxObserver`` for per-tensor weights (see :class:`_ZeroChannelScale`)."""


class ZeroSafeMovingAveragePerChannelMinMaxObserver(_ZeroChannelScale, MovingAveragePerChannelMinMaxObserver):
    """QAT's per-channel weight observer (see :class:`_ZeroChannelScale`)."""


class ZeroSafeMovingAverageMinMaxObserver(_ZeroChannelScale, MovingAverageMinMaxObserver):
    """QAT's per-tensor weight observer (see :class:`_ZeroChannelScale`)."""
