"""The histogram observer's fast quantile search chooses exactly the range torchao's own
``HistogramObserver._non_linear_param_search`` chooses (the independent reference)."""

from __future__ import annotations

import time

import pytest
import torch
from torchao.quantization.pt2e.observer import HistogramObserver

from lowering.observers import SpikeAwareHistogramObserver, quantile_bounds_search


def _observed(batches: list[torch.Tensor]) -> HistogramObserver:
    observer = HistogramObserver()
    for batch in batches:
        observer(batch)
    return observer


def _distributions(seed: int) -> list[list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    normal = torch.randn(4096, generator=gen)
    heavy = torch.distributions.StudentT(2.0).sample((4096,))
    relu = torch.relu(torch.randn(2000, generator=gen))
    outliers = torch.cat([torch.randn(3000, generator=gen) * 0.1, torch.tensor([40.0, -25.0])])
    skewed = torch.rand(5000, generator=gen) ** 4 * 7 - 1
    few = torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 3.0, 250.0])
    spread_calibration = [torch.randn(512, generator=gen) * (k + 1) for k in range(5)]
    # few distinct values (a quantized input, class ids): torchao's walk takes ~10^5 steps
    levels = torch.randint(0, 5, (5000,), generator=gen).float()
    return [[normal], [heavy], [relu], [outliers], [skewed], [few], spread_calibration, [levels]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_search_equals_torchaos_search(seed: int) -> None:
    for batches in _distributions(seed):
        observer = _observed(batches)
        ours = [float(v) for v in quantile_bounds_search(observer)]
        theirs = [float(v) for v in observer._non_linear_param_search()]
        assert ours == theirs
        assert ours[0] >= float(observer.min_val) and ours[1] <= float(observer.max_val) + 1e-6


def test_observer_qparams_equal_torchaos_and_search_is_faster() -> None:
    quantile_bounds_search(_observed([torch.ones(3)]))  # builds the cached walk outside the timing
    gen = torch.Generator().manual_seed(7)
    batches = [torch.randint(0, 5, (5000,), generator=gen).float(), torch.randn(2048, generator=gen)]
    ours, theirs = SpikeAwareHistogramObserver(), HistogramObserver()
    for batch in batches:
        ours(batch)
        theirs(batch)
    scale_ours, zp_ours = ours.calculate_qparams()
    scale_theirs, zp_theirs = theirs.calculate_qparams()
    assert torch.equal(scale_ours, scale_theirs) and torch.equal(zp_ours, zp_theirs)
    started = time.process_time()
    quantile_bounds_search(theirs)
    fast = time.process_time() - started
    started = time.process_time()
    theirs._non_linear_param_search()
    slow = time.process_time() - started
    assert fast < slow
