"""Shared pieces of the VGF tests: graphs lowered by the peer (ExecuTorch's Arm TOSA backend).

The device gate is ``vgf.testing`` (the ``vgf_device`` fixture); the zoo models lowered by us come
from the suite's ``zoo_lowered`` fixture (tests/conftest.py, once per test process).

ExecuTorch's lowering of a model costs many CPU seconds (torch.export, PT2E calibration, its pass
pipeline: 60-95 for the full MobileNetV2) where our interpreter takes a fraction of a second. The
peer MobileNetV2 graphs are shipped as test data (:mod:`.peer_data`); the graphs of ExecuTorch's
own op tests are lowered once per machine: the TOSA bytes are kept under the zoo's cache
directory (``TOSA_VERIFY_CACHE``, default ``~/.cache/tosa-verify``), keyed by the versions of
torch, torchao and ExecuTorch and by the source of the peer flow, so any change there lowers again.
"""

from __future__ import annotations

import os

import numpy as np

import tosa_verify
import vgf
from tosa_verify.diff import random_inputs

_PEER: dict[str, bytes] = {}


def cached_peer_tosa(name: str, build, *key_parts: object) -> bytes:
    """TOSA bytes ``build()`` makes (a peer lowering), kept on disk under ``name`` and the peer key."""
    from _peer import source_key  # benchmarks/_peer.py, on sys.path through pyproject

    from lowering.zoo import CACHE_DIR

    path = CACHE_DIR / "peer-tosa" / f"{name}-{source_key(name, *key_parts)}.tosa"
    if path.name not in _PEER:
        if not path.is_file():
            import torch

            torch.set_num_threads(1)
            data = build()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)  # atomic: two test processes may lower the same graph
        _PEER[path.name] = path.read_bytes()
    return _PEER[path.name]


def peer_mobilenet_v2(profile: str, full: bool = True) -> bytes:
    """MobileNetV2 as ExecuTorch's Arm TOSA backend lowers it in ``profile``: the shipped TOSA bytes.

    ``full``: width 1.0 at 224x224; else the reduced network (FP only), see :mod:`.peer_data`.
    """
    from .peer_data import shipped_tosa

    return shipped_tosa(f"mobilenet_v2-{profile}-{'full' if full else 'reduced'}")


def et_op_cases(files: list[str], per_profile: int = 1) -> list[tuple[str, str, bytes, list | None]]:
    """``(case id, profile, TOSA, inputs)`` of ExecuTorch's own Arm op tests, lowered by ExecuTorch.

    The first ``per_profile`` INT and FP cases of each test file (``benchmarks/_et_suite.py``
    collects the module and inputs each test hands its pipeline), lowered with ExecuTorch's
    TOSA flow (``_peer.executorch_tosa``, quantized on the test's own inputs for INT). A case
    ExecuTorch itself cannot lower into one delegated graph is left out. ``inputs`` are the
    test's own inputs (float32, graph order) for an FP graph that takes them as they are -- an
    operator such as POW is only defined on the test's domain -- else None (random inputs).
    """
    import _et_suite
    from _peer import executorch_tosa

    out = []
    for file in files:
        taken: dict[str, int] = {}
        for case in _et_suite.collect([file]):
            if case.skip or case.et_xfail or taken.get(case.profile, 0) >= per_profile:
                continue

            def build(case=case) -> bytes:
                module = case.module.eval()
                return executorch_tosa(module, _et_suite._fresh(case.inputs), case.profile).tosa

            try:
                tosa = cached_peer_tosa("et-" + case.id.replace("/", "_").replace("::", "-"), build, case.profile)
            except Exception:  # noqa: BLE001 - ExecuTorch's own flow failed on its own case
                continue
            taken[case.profile] = taken.get(case.profile, 0) + 1
            out.append((case.id, case.profile, tosa, _own_inputs(tosa, case) if case.profile == "FP" else None))
    return out


def _own_inputs(tosa: bytes, case) -> list | None:
    """The case's tensors as the FP graph's inputs, when they match its input shapes one to one."""
    import torch

    block = tosa_verify.load(tosa).main
    values = [np.asarray(x.detach().float().numpy()) for x in case.inputs if isinstance(x, torch.Tensor)]
    shapes = [tuple((block.tensors.get(n) or block.shapes[n]).shape) for n in block.inputs]
    return values if [v.shape for v in values] == shapes else None


def _both_outputs(tosa: bytes | vgf.VgfProgram, seed: int) -> tuple[tosa_verify.Graph, list, list]:
    """``(graph, ours, theirs)``: the interpreter's and VGF's outputs on seeded random inputs."""
    program = tosa if isinstance(tosa, vgf.VgfProgram) else vgf.compile_tosa(tosa)
    graph = program.graph
    inputs = random_inputs(graph, seed)
    theirs = vgf.run(program, inputs)
    ours = tosa_verify.run(graph, inputs)
    assert len(theirs) == len(ours) == len(graph.main.outputs)
    for name, a, b in zip(graph.main.outputs, ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, name
    return graph, ours, theirs


def outputs_agree_bit_exact(tosa: bytes | vgf.VgfProgram, seed: int = 0) -> None:
    """Run ``tosa`` on VGF and in the interpreter on seeded random inputs: every output identical."""
    graph, ours, theirs = _both_outputs(tosa, seed)
    for name, a, b in zip(graph.main.outputs, ours, theirs, strict=True):
        np.testing.assert_array_equal(b, a, err_msg=name)


def fp_outputs_agree(tosa: bytes, seed: int = 0) -> str:
    """An FP graph on VGF against the interpreter: outputs identical, else every operator compliant.

    One VGF run of the deployed graph; only when an output is not bit-identical is the graph
    run again with every tensor captured and judged operator by operator within the compliance
    bounds (:func:`diff_within_compliance`): a difference that has built up over many operators
    has no bound of its own at the output. Returns ``"identical"`` or ``"within_compliance"``.
    """
    graph, ours, theirs = _both_outputs(tosa, seed)
    assert all(a.dtype == np.float32 for a in ours), "an FP graph's outputs are float32"
    if all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True)):
        return "identical"
    diff_within_compliance(tosa, seed)
    return "within_compliance"


def diff_within_compliance(tosa: bytes, seed: int = 0) -> tosa_verify.DiffReport:
    """VGF vs the interpreter operator by operator (FP): every tensor exact or within its bound."""
    graph = tosa_verify.load(tosa)
    report = tosa_verify.diff(graph, random_inputs(graph, seed), engine=vgf.VgfExecutor(), against="interpreter")
    assert report.against == "interpreter" and report.engine == "VGF"
    assert not report.error and report.ok, report.format_table(all_ops=False)
    # every operator output was compared (none missing), and a float output that is not
    # bit-identical was re-run alone by the reference model and judged under its compliance mode
    outs = [t for op in report.ops for t in op.outputs]
    assert all(t.verdict is not None for t in outs)
    assert all(t.local is not None and t.local.ok for t in outs if t.is_float and t.status == "within_compliance")
    assert set(report.counts()) <= {"exact", "within_compliance", "inherited"}
    return report
