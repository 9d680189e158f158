"""``with torch.no_grad():`` / ``torch.enable_grad()`` inside a model's forward: torch.export
keeps the block as one ``wrap_with_set_grad_enabled`` call, which stayed on the CPU whole as an
unknown operator. Its ops are now inlined (lowering.passes.grad_regions): the model lowers
whole, FP equal to PyTorch, INT equal to its fake-quant model."""

from __future__ import annotations

import pytest
import torch
from lowering_checks import check_fp, check_int

import lowering
from lowering.passes.grad_regions import SET_GRAD_ENABLED


class NoGradLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(6, 6)

    def forward(self, x):
        with torch.no_grad():
            y = self.linear(x).relu()
        return y.detach() + x


class NestedRegions(torch.nn.Module):
    """A no_grad block holding an enable_grad block; two outputs from the outer one."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 6)
        self.b = torch.nn.Linear(6, 6)

    def forward(self, x):
        with torch.no_grad():
            h = self.a(x)
            with torch.enable_grad():
                k = torch.sigmoid(self.b(h))
            g = h * k
        return g - k, h.sum(-1)


class RegionConstant(torch.nn.Module):
    """A tensor built inside the block (a constant of the region's submodule)."""

    def forward(self, x):
        with torch.no_grad():
            w = torch.tensor([0.5, -1.0, 2.0, 0.25, 1.5, -0.75])
            y = x * w
        return y + 1


MODELS = {"no_grad linear": NoGradLinear, "nested regions": NestedRegions, "constant inside": RegionConstant}
X = torch.randn(3, 6, generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize("name", list(MODELS))
def test_grad_regions_lower_whole_fp(name):
    torch.manual_seed(0)
    lm = check_fp(MODELS[name](), (X,), atol=1e-6, rtol=1e-6)
    assert lm.cpu_nodes == []


@pytest.mark.parametrize("name", list(MODELS))
def test_grad_regions_lower_whole_int(name):
    torch.manual_seed(0)
    lm = check_int(MODELS[name](), (X,), max_steps=0)
    assert lm.cpu_nodes == []


def test_the_region_call_is_gone_from_the_exported_graph():
    torch.manual_seed(0)
    gm = lowering.export_module(NestedRegions().eval(), (X,))
    assert not [n for n in gm.graph.nodes if n.target is SET_GRAD_ENABLED]
    # the regions' submodules are dropped too (the model's own a and b hold its parameters)
    assert sorted(name for name, _ in gm.named_children()) == ["a", "b"]
