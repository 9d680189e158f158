"""The Vela binary stream (ethosu.payload) and TosaPartitioner's Ethos-U mode, checked against
the payload ExecuTorch's own Ethos-U flow writes for the same network."""

from __future__ import annotations

import doctest
import struct

import ethosu_tosa_graphs as graphs
import pytest
import torch

import ethosu.payload
from ethosu.compiler import compile_tosa
from ethosu.payload import BLOCK_ORDER, read_vela_bin_stream, read_vela_io, write_vela_bin_stream

TARGETS = ["ethos-u55-128", "ethos-u85-256"]


def test_docstring_examples():
    result = doctest.testmod(ethosu.payload, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_block_layout():
    program = compile_tosa(graphs.conv2d(), "ethos-u55-128", layers=False)
    payload = write_vela_bin_stream(program)
    assert len(payload) % 16 == 0
    pos, names = 0, []
    while pos < len(payload):  # walk the headers by hand: name, length, flag, reserved
        raw_name, length, external, reserved = struct.unpack_from("<16sIB11s", payload, pos)
        assert raw_name.endswith(b"\0") and external == 0 and reserved == bytes(11)
        names.append(raw_name.rstrip(b"\0").decode())
        data = payload[pos + 32 : pos + 32 + length]
        padding = payload[pos + 32 + length : pos + 32 + length + (-length % 16)]
        assert padding == bytes(len(padding))
        if names[-1] == "cmd_data":
            assert data == program.command_stream
        if names[-1] == "scratch_size":
            assert struct.unpack("<I", data) == (program.scratch_size,)
        pos += 32 + length + (-length % 16)
    assert tuple(names) == BLOCK_ORDER
    blocks = read_vela_bin_stream(payload)
    assert blocks["weight_data"] == program.weights
    assert read_vela_io(blocks["inputs"]) == list(program.inputs)
    assert read_vela_io(blocks["outputs"]) == list(program.outputs)
    assert all(len(t.shape) == 6 for t in read_vela_io(blocks["inputs"]))
    for cut in (40, 80, len(payload) - 32):
        with pytest.raises(ValueError, match="truncated"):
            read_vela_bin_stream(payload[:cut])


@pytest.mark.parametrize("target", TARGETS)
def test_payload_identical_to_executorch_for_same_tosa(peer_graphs, peer_module, target):
    peer = peer_graphs("tiny_cnn", target)
    ours = write_vela_bin_stream(compile_tosa(peer.tosa, target, layers=False))
    theirs, _, _ = peer_module.executorch_vela_compile(peer.tosa, target)
    assert ours == theirs


def _quantized_export(model, example):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    import lowering

    gm = torch.export.export(model, example).module()
    prepared = prepare_pt2e(gm, lowering.TosaQuantizer(example_inputs=example))
    prepared(*example)
    return torch.export.export(convert_pt2e(prepared), example)


@pytest.mark.parametrize("target", TARGETS)
def test_partitioner_payload_matches_executorch_layout(peer_graphs, peer_module, target):
    """Our flow (TosaQuantizer + TosaPartitioner in Ethos-U mode) and ExecuTorch's
    (EthosUQuantizer + EthosUPartitioner) on the same model: same blocks, same I/O layout."""
    from executorch.exir import to_edge_transform_and_lower

    from lowering.partitioner import ETHOSU_BACKEND_ID, TosaPartitioner, delegate_payloads

    model, example = peer_module.make_model("tiny_cnn")
    part = TosaPartitioner("INT", ethosu_target=target)
    edge = to_edge_transform_and_lower(_quantized_export(model, example), partitioner=[part])
    assert part.cpu_nodes == []
    (backend, ours), = delegate_payloads(edge)
    assert backend == ETHOSU_BACKEND_ID
    assert delegate_payloads(edge.to_executorch().buffer) == [(backend, ours)]

    theirs, _, _ = peer_module.executorch_vela_compile(peer_graphs("tiny_cnn", target).tosa, target)
    ours_blocks, their_blocks = read_vela_bin_stream(ours), read_vela_bin_stream(theirs)
    assert list(ours_blocks) == list(their_blocks) == list(BLOCK_ORDER)
    for io in ("inputs", "outputs"):
        mine, peer = read_vela_io(ours_blocks[io]), read_vela_io(their_blocks[io])
        assert [(t.shape, t.element_size, t.region) for t in mine] == \
            [(t.shape, t.element_size, t.region) for t in peer]
    assert ours_blocks["cmd_data"][:4] == their_blocks["cmd_data"][:4] == b"COP1"


class _Gather(torch.nn.Module):
    """conv -> mean -> index_select (TOSA GATHER, refused by Vela on Ethos-U55) -> linear."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)
        self.register_buffer("order", torch.tensor([3, 1, 0, 2, 5, 4, 7, 6]))

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean((2, 3))
        return self.fc(torch.index_select(y, 1, self.order))


class _Bilinear(torch.nn.Module):
    """conv -> bilinear x2 upsample (a RESIZE Vela refuses on Ethos-U55/U65) -> conv."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        y = torch.nn.functional.interpolate(torch.relu(self.conv1(x)), scale_factor=2, mode="bilinear")
        return self.conv2(y)


REFUSED_ON_U55 = {  # model -> (the aten op Vela refuses on Ethos-U55, a word of its reason)
    "gather": (_Gather, "aten.index_select.default", "GATHER"),
    "bilinear": (_Bilinear, "aten.upsample_bilinear2d.vec", "RESIZE"),
}


#: The Ethos-U85 cases (one delegate) are ``slow`` (an ExecuTorch lowering each, ~12 s): in the
#: default run Vela's U85 acceptance of these ops is held by test_ethosu_support's
#: test_prediction_matches_vela, whole-model U85 delegation by
#: test_partitioner_payload_matches_executorch_layout[ethos-u85-256].
TARGET_CASES = [("ethos-u55-128", 2), pytest.param("ethos-u85-256", 1, marks=pytest.mark.slow)]


@pytest.mark.parametrize("model", sorted(REFUSED_ON_U55))
@pytest.mark.parametrize("target, delegates", TARGET_CASES)
def test_operator_refused_by_vela_stays_on_cpu(model, target, delegates):
    """U55: the refused op stays on the CPU between two delegates; U85 takes the whole model."""
    from executorch.exir import to_edge_transform_and_lower

    from lowering.partitioner import TosaPartitioner, delegate_payloads

    builder, refused_op, reason_word = REFUSED_ON_U55[model]
    torch.manual_seed(0)
    ep = _quantized_export(builder().eval(), (torch.randn(1, 3, 8, 8),))
    part = TosaPartitioner("INT", ethosu_target=target)
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    payloads = delegate_payloads(edge)
    assert len(payloads) == delegates
    for _, payload in payloads:
        assert list(read_vela_bin_stream(payload)) == list(BLOCK_ORDER)
    if delegates == 2:
        (cpu,) = part.cpu_nodes
        assert cpu.target == refused_op and cpu.reason.startswith("Vela:") and reason_word in cpu.reason
    else:
        assert part.cpu_nodes == []


def test_delegates_can_carry_executorch_ethosu_runtime_id(peer_module):
    """Renamed to the id ExecuTorch's Ethos-U runtime registers; the payload is untouched."""
    from executorch.exir import to_edge_transform_and_lower

    from lowering.partitioner import (
        ETHOSU_BACKEND_ID,
        TosaPartitioner,
        delegate_payloads,
        target_executorch_ethosu_runtime,
    )

    model, example = peer_module.make_model("tiny_cnn")
    edge = to_edge_transform_and_lower(_quantized_export(model, example),
                                       partitioner=[TosaPartitioner("INT", ethosu_target="ethos-u55-128")])
    (backend, payload), = delegate_payloads(edge)
    assert backend == ETHOSU_BACKEND_ID
    assert target_executorch_ethosu_runtime(edge) == 1
    assert delegate_payloads(edge.to_executorch().buffer) == [("EthosUBackend", payload)]
    assert list(read_vela_bin_stream(payload)) == list(BLOCK_ORDER)
