"""Does a TOSA graph compute on VGF what the interpreter computes? (``check --target vgf``)

:func:`check_agreement` compiles the graph, runs the deployed program once (its outputs must equal
the interpreter's bit for bit where they are integers) and runs it once more with every tensor
captured for :func:`tosa_verify.diff` (engine VGF, against the interpreter): integer tensors must
be identical, float tensors within their operator's compliance bound on their own inputs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tosa_verify
from tosa_verify.compare import compare
from tosa_verify.diff import DiffReport
from tosa_verify.dtypes import dtype_info
from tosa_verify.interpreter import Inputs, Source

from .compiler import VgfProgram, compile_tosa
from .runner import VgfExecutor, run

__all__ = ["VgfAgreement", "check_agreement"]


@dataclass
class VgfAgreement:
    """The verdict of :func:`check_agreement`: ``ok``, a one-line ``detail`` and the evidence.

    Example:
        >>> result = check_agreement("model.tosa", inputs)    # doctest: +SKIP
        >>> result.ok, result.detail                          # doctest: +SKIP
        (True, '16 operators agree (16 exact); outputs bit-identical')
    """

    ok: bool
    detail: str
    program: VgfProgram = field(repr=False)
    outputs: list[np.ndarray] = field(repr=False)
    tensors: dict[str, np.ndarray] = field(repr=False)
    diff: DiffReport = field(repr=False)
    run_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {"ok": self.ok, "detail": self.detail, "program": self.program.to_dict(),
                "run_seconds": self.run_seconds, "operators": self.diff.counts()}


def check_agreement(tosa: Source, inputs: Inputs) -> VgfAgreement:
    """Compile ``tosa`` to VGF, run it on ``inputs`` and compare with the interpreter.

    Raises :class:`~vgf.errors.VgfError` when the converter or the runner fails.

    Example:
        >>> check_agreement(lowered.tosa, lowered.quantize_inputs(*example)).ok   # doctest: +SKIP
        True
    """
    graph = tosa_verify.load(tosa)
    program = compile_tosa(tosa)
    start = time.perf_counter()
    outputs = run(program, inputs)
    seconds = time.perf_counter() - start
    ours = tosa_verify.run(graph, inputs)
    notes = []
    exact = True
    for name, mine, theirs in zip(graph.main.outputs, ours, outputs, strict=True):
        dtype = graph.main.tensors[name].dtype
        if dtype_info(dtype).is_float:
            v = compare(mine, theirs, dtype=dtype)
            notes.append(f"{name}: {'identical' if v.mismatched == 0 else f'SQNR {v.sqnr_db:.1f} dB'}")
        elif not np.array_equal(mine, theirs):
            exact = False
            notes.append(f"{name}: {int(np.count_nonzero(mine != theirs))} elements differ")
    report = tosa_verify.diff(graph, inputs, engine=VgfExecutor(), against="interpreter")
    counts = report.counts()
    first = report.first_divergence
    if report.error:
        detail = report.error
    elif first is not None:
        detail = f"first divergence at operator {first.index} {first.op}"
    else:
        detail = f"{len(report.ops)} operators agree (" + ", ".join(f"{n} {k}" for k, n in counts.items()) + ")"
    detail += "; outputs " + ("bit-identical" if exact and not notes else ", ".join(notes))
    return VgfAgreement(ok=report.ok and exact, detail=detail, program=program, outputs=outputs,
                        tensors=report.actual, diff=report, run_seconds=seconds)
