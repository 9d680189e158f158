"""Shared pieces of the VGF tests: graphs lowered by the peer (ExecuTorch's Arm TOSA backend).

The device gate is ``vgf.testing`` (the ``vgf_device`` fixture); the zoo models lowered by us come
from the suite's ``zoo_lowered`` fixture (tests/conftest.py, once per test process).

ExecuTorch's lowering of a MobileNetV2 costs 15-75 CPU seconds (torch.export, PT2E calibration,
its pass pipeline) where the VGF run costs 3-7 and our interpreter a tenth of a second, so the
peer graphs are lowered once per machine: the TOSA bytes are kept under the zoo's cache
directory (``TOSA_VERIFY_CACHE``, default ``~/.cache/tosa-verify``), keyed by the versions of
torch, torchao and ExecuTorch and by the source of the model and of the peer flow, so any
change there lowers again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import os

import numpy as np

import tosa_verify
import vgf
from tosa_verify.diff import random_inputs


def _peer_source_key(*parts: object) -> str:
    import _peer  # benchmarks/_peer.py, on sys.path through pyproject

    from lowering import zoo

    digest = hashlib.sha256()
    for dist in ("torch", "torchao", "executorch"):
        digest.update(f"{dist}={importlib.metadata.version(dist)};".encode())
    for obj in (zoo.MobileNetV2, zoo.InvertedResidual, zoo.ConvBNReLU6, zoo._make_divisible,
                _peer.executorch_tosa, _peer._pt2e_quantize):
        digest.update(inspect.getsource(obj).encode())
    digest.update(repr(parts).encode())
    return digest.hexdigest()[:24]


def _mobilenet_v2(full: bool):
    """``(model, example)``: MobileNetV2 0.35 at 224x224 (``full``), or its first two stages at 32x32.

    The reduced network is the same class with ``SETTINGS[:2]``: the stem conv, an expansion-1
    block (depthwise + pointwise), a strided expansion-6 block and a residual expansion-6 block,
    the last 1x1 conv (1280 channels), global pooling and a 10-class linear layer -- every
    operator kind of the full network (ReLU6 clamps, depthwise and pointwise convs, the residual
    ADD, pooling, the classifier) at about a fifth of its operators.
    """
    import torch

    from lowering.zoo import MobileNetV2

    torch.manual_seed(0)
    if full:
        model, size = MobileNetV2(0.35), 224
    else:
        reduced = type("MobileNetV2Reduced", (MobileNetV2,), {"SETTINGS": MobileNetV2.SETTINGS[:2]})
        model, size = reduced(0.35, num_classes=10), 32
    example = (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(7)),)
    return model.eval(), example


_PEER: dict[str, bytes] = {}


def cached_peer_tosa(name: str, build, *key_parts: object) -> bytes:
    """TOSA bytes ``build()`` makes (a peer lowering), kept on disk under ``name`` and the peer key."""
    from lowering.zoo import CACHE_DIR

    path = CACHE_DIR / "peer-tosa" / f"{name}-{_peer_source_key(name, *key_parts)}.tosa"
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


def peer_mobilenet_v2(profile: str, full: bool = False) -> bytes:
    """MobileNetV2 lowered by ExecuTorch's Arm TOSA backend in ``profile``: TOSA bytes, cached."""

    def build() -> bytes:
        from _peer import executorch_tosa

        return executorch_tosa(*_mobilenet_v2(full), profile).tosa

    return cached_peer_tosa(f"mobilenet_v2-{profile}-{'full' if full else 'reduced'}", build, profile, full)


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


def outputs_agree_bit_exact(tosa: bytes | vgf.VgfProgram, seed: int = 0) -> None:
    """Run ``tosa`` on VGF and in the interpreter on seeded random inputs: every output identical."""
    program = tosa if isinstance(tosa, vgf.VgfProgram) else vgf.compile_tosa(tosa)
    graph = program.graph
    inputs = random_inputs(graph, seed)
    theirs = vgf.run(program, inputs)
    ours = tosa_verify.run(graph, inputs)
    assert len(theirs) == len(ours) == len(graph.main.outputs)
    for name, a, b in zip(graph.main.outputs, ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(b, a, err_msg=name)


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
