"""The ordered pass pipeline between ``torch.export`` and TOSA emission."""

from __future__ import annotations

import torch.fx as fx

from .passes import (
    AssignNHWCLayout,
    ConvertInt64ConstOpsToInt32,
    ConvertInt64OutputOpsToInt32,
    DecomposeForTosa,
    FoldBatchNorm,
    FoldConstants,
    FoldQDQ,
    FunctionalizeInPlace,
    InsertInt32CastsAfterInt64Placeholders,
    QuantizeUnusedInputs,
    RemoveNoOps,
    ScalarsToTensors,
)
from .passes.base import GraphPass, PassContext
from .passes.half import PromoteHalfCompute
from .passes.limits import BoundInfiniteScalars
from .passes.outputs import QuantizeConstantOutputs, ScalarOutputsToConstants


def build_pipeline(profile: str) -> list[GraphPass]:
    """Passes for ``profile`` ("FP", or "INT" for a ``convert_pt2e`` graph), in order.

    Example:
        >>> [p.name for p in build_pipeline("INT")]  # doctest: +NORMALIZE_WHITESPACE
        ['FunctionalizeInPlace', 'RemoveNoOps', 'ScalarOutputsToConstants', 'ConvertInt64ConstOpsToInt32',
         'ConvertInt64OutputOpsToInt32', 'InsertInt32CastsAfterInt64Placeholders', 'FoldQDQ',
         'QuantizeUnusedInputs', 'QuantizeConstantOutputs', 'AssignNHWCLayout']
    """
    # a python-number output becomes a constant before the int64 passes see it (an int is int64)
    int64 = [ScalarOutputsToConstants(), ConvertInt64ConstOpsToInt32(), ConvertInt64OutputOpsToInt32(),
             InsertInt32CastsAfterInt64Placeholders()]
    if profile == "INT":
        # decompositions already ran in TosaQuantizer.transform_for_annotation
        return [FunctionalizeInPlace(), RemoveNoOps(), *int64, FoldQDQ(), QuantizeUnusedInputs(),
                QuantizeConstantOutputs(), AssignNHWCLayout()]
    # FP folds input-independent parts here (INT did in annotation_passes), after float16 ops
    # beyond FP16_OPS went float32 (so the casts of float16 weights fold too)
    return [FunctionalizeInPlace(), RemoveNoOps(), PromoteHalfCompute(), FoldConstants(), FoldBatchNorm(), DecomposeForTosa(),
            ScalarsToTensors(), RemoveNoOps(), *int64, AssignNHWCLayout()]


def annotation_passes() -> list[GraphPass]:
    """INT only: the passes run on the float graph before PT2E annotation
    (:meth:`lowering.quantizer.TosaQuantizer.transform_for_annotation`), so the ops they
    produce get observers like any others; :func:`build_pipeline` ("INT") continues after
    ``convert_pt2e``.

    Example:
        >>> [p.name for p in annotation_passes()]  # doctest: +NORMALIZE_WHITESPACE
        ['BoundInfiniteScalars', 'RemoveNoOps', 'FoldConstants', 'FoldBatchNorm', 'DecomposeForTosa',
         'ScalarsToTensors']
    """
    return [BoundInfiniteScalars(), RemoveNoOps(), FoldConstants(), FoldBatchNorm(), DecomposeForTosa(),
            ScalarsToTensors()]


def run_pipeline(gm: fx.GraphModule, ctx: PassContext, passes: list[GraphPass] | None = None,
                 log: list | None = None) -> fx.GraphModule:
    """Run ``passes`` (default: :func:`build_pipeline`) over ``gm`` in place."""
    from .graph_utils import propagate_values

    stale = False
    for p in passes if passes is not None else build_pipeline(ctx.profile):
        if stale and not p.restructures and ctx.example_inputs:
            propagate_values(gm, ctx.example_inputs)  # value metadata for new nodes
            stale = False
        p(gm, ctx, recompile=False)
        if log is not None:
            log.append(p.name)
        if p.restructures and ctx.profile != "INT":
            stale = True
    gm.recompile()
    return gm
