"""Our ExecuTorch delegate with ``DelegateSpec(..., vgf=True)`` stores the VGF that ExecuTorch's own
``VgfBackend`` makes of the same TOSA (the peer is used here only, as the expectation), and the
``.pte`` round-trips it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tosa_verify
import vgf
from tosa_verify.diff import random_inputs

pytestmark = pytest.mark.usefixtures("vgf_device")


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _program(profile: str):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    import lowering

    torch.manual_seed(0)
    model = _Net().eval()
    x = (torch.randn(1, 3, 6, 6),)
    if profile == "INT":
        prepared = prepare_pt2e(torch.export.export(model, x).module(), lowering.TosaQuantizer(example_inputs=x))
        prepared(*x)
        model = convert_pt2e(prepared)
    return torch.export.export(model, x)


def _payloads(profile: str, spec) -> list[tuple[str, bytes]]:
    from executorch.exir import to_edge_transform_and_lower

    from lowering import TosaPartitioner, delegate_payloads

    edge = to_edge_transform_and_lower(_program(profile), partitioner=[TosaPartitioner(spec)])
    return delegate_payloads(edge), edge


@pytest.mark.parametrize("profile", ["INT", "FP"])
def test_vgf_payload_is_what_executorchs_vgf_backend_writes(profile):
    from executorch.backends.arm.vgf.backend import vgf_compile  # the peer, as the expectation

    from lowering import DelegateSpec, target_executorch_vgf_runtime

    tosa_payloads, _ = _payloads(profile, DelegateSpec(profile))
    vgf_payloads, edge = _payloads(profile, DelegateSpec(profile, vgf=True))
    assert [b for b, _ in tosa_payloads] == ["TosaVerifyBackend"]
    assert [b for b, _ in vgf_payloads] == ["TosaVerifyVgfBackend"]
    tosa, ours = tosa_payloads[0][1], vgf_payloads[0][1]
    theirs = vgf_compile(tosa, [])
    assert ours == theirs
    # the payload runs: the VGF of the partition computes what the interpreter computes on its TOSA
    graph = tosa_verify.load(tosa)
    inputs = random_inputs(graph, 0)
    program = vgf.compile_tosa(tosa)
    assert program.vgf == ours
    for a, b in zip(vgf.run(program, inputs), tosa_verify.run(graph, inputs), strict=True):
        if profile == "INT":
            np.testing.assert_array_equal(a, b)
        else:
            assert tosa_verify.compare(b, a, op="FULLY_CONNECTED").sqnr_db > 100
    # renamed for ExecuTorch's VGF runtime, and kept in the .pte as it is
    assert target_executorch_vgf_runtime(edge) == 1
    from lowering import delegate_payloads

    assert delegate_payloads(edge.to_executorch().buffer) == [("VgfBackend", ours)]


def test_delegate_spec_round_trips_and_rejects_two_targets():
    from lowering import DelegateSpec

    spec = DelegateSpec("FP", vgf=True)
    assert spec.backend_id == "TosaVerifyVgfBackend"
    assert DelegateSpec.from_compile_specs(spec.to_compile_specs()) == spec
    with pytest.raises(ValueError, match="VGF or for an Ethos-U target"):
        DelegateSpec("INT", ethosu_target="ethos-u55-128", vgf=True)
