"""Quantization drift: float vs fake-quant vs TOSA, layer by layer, with the error attributed.

:func:`drift` takes a lowered model *as a value* (anything shaped like ``lowering.LoweredModel``:
``.tosa``, ``.provenance``, ``.quant_params``, ``.float_model``, ``.quantized_model``,
``.quantize_inputs``, ``.torch_reference()``; this package never imports ``lowering`` or torch)
and float inputs. It runs

* the float model and the fake-quant (``convert_pt2e``) model, capturing every FX node's value
  (the fake-quant model evaluated in float64 by ``lowering.reference``, the one float64
  fake-quant evaluator, so float32 accumulation noise does not pose as lowering error);
* the TOSA graph with the numpy interpreter, capturing every tensor;
* optionally the TOSA reference model on the same graph (executor error);

and joins them through provenance: one :class:`DriftRow` per TOSA tensor that holds a PyTorch
node's value (the tensors the lowering bound to a node, plus their RESHAPE/TRANSPOSE/IDENTITY
aliases). Per row, with ``s`` the tensor's scale:

==================  ==========================================================================
``quantization``    float vs fake-quant: what the quantization itself costs (propagated)
``lowering``        fake-quant vs TOSA: what the lowering adds (integer rescale, rounding, ...)
``total``           float vs TOSA: what a deployment sees
``executor``        interpreter vs reference model (bit-exact: 0 differing elements expected)
``local``           float vs this layer alone, fed float-accurate inputs (each input tensor is
                    ``quantize(float activation)``); ``total`` is the propagated counterpart
``local_lowering``  fake-quant vs this layer alone, fed the fake-quant inputs: the lowering
                    error this layer adds by itself (0 differing elements for a faithful layer)
==================  ==========================================================================

Each :class:`ErrorStats` carries SQNR (dB), cosine similarity, max abs error, the error in
quantization steps (max and mean of ``|err| / s``) and the count of elements more than half a step
off. SQNR and cosine are computed by :mod:`tosa_verify.compare` (the same definition as its verdicts).

Layout: TOSA tensors are NHWC where PyTorch is NCHW. For the tensor bound to a node the
lowering's ``graph_module`` records the permutation (``node.meta["layout"]``); otherwise the
permutation is chosen by shape (same, NHWC/NDHWC, or a reshape that only moves unit dimensions),
ties broken by the candidate that agrees best with the fake-quant value.

Folded nodes: a node that owns no computed TOSA tensor was folded into its input's tensor by
the lowering (a BatchNorm into the conv before it, a ReLU into the RESCALE before it), so the
tensor named after the conv holds the BatchNorm's or ReLU's value. The reference used (float and
fake-quant alike) is the last node of the single-user chain of such nodes that keep the shape;
the table shows it as ``conv2d→relu``. Of a decomposed node (softmax -> amax, sub, exp, ...),
the last piece stands for the original node; the other pieces have no float reference.

The rounding explainer (:class:`RoundingRow`) takes every RESCALE (SINGLE_ROUND <-> DOUBLE_ROUND;
INEXACT_ROUND -> SINGLE_ROUND) and every INT8 or INT16 TABLE (entries whose exact value lies
within ``tie_window`` steps of a rounding boundary are rounded the other way; an INT16 table's
513 samples are interpolated, so one flipped sample moves up to 256 input levels around it),
counts the elements that
change at that operator, and re-runs the graph downstream (only operators whose inputs changed)
to see how far the change travels.

>>> import lowering, tosa_verify                                          # doctest: +SKIP
>>> model, example, calib = lowering.zoo.digits_cnn()                     # doctest: +SKIP
>>> lm = lowering.lower(model, example, calibration=calib)                # doctest: +SKIP
>>> report = tosa_verify.drift(lm, example)                               # doctest: +SKIP
>>> print(report.format_table())                                          # doctest: +SKIP
>>> report.row("conv2d_1").total.sqnr_db                                  # doctest: +SKIP
31.2

The package, by concern: :mod:`.join` (TOSA tensors matched with PyTorch nodes, :func:`drift`),
:mod:`.metrics` (error statistics, layouts), :mod:`.local` (running parts of a graph, the local
errors), :mod:`.rounding` (the rounding explainer), :mod:`.report` (result types, text, JSON).
"""

from __future__ import annotations

from .join import ALIAS_OPS, drift
from .local import run_operators
from .report import HIST_RANGE, DriftReport, DriftRow, ErrorStats, ExecutorCheck, RoundingRow

__all__ = [
    "ALIAS_OPS",
    "HIST_RANGE",
    "DriftReport",
    "DriftRow",
    "ErrorStats",
    "ExecutorCheck",
    "RoundingRow",
    "drift",
    "run_operators",
]
