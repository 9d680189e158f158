"""Base class and context for graph passes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx


@dataclass
class PassContext:
    """What a pass may need to know: profile, example inputs, and a scratch dict."""

    profile: str = "FP"
    example_inputs: tuple = ()
    quantized: bool = False
    notes: dict[str, Any] = field(default_factory=dict)


class GraphPass:
    """A small named transformation of an FX graph module.

    Subclasses implement :meth:`run`; calling the pass runs it and lints the graph.

    Example:
        >>> class Nothing(GraphPass):
        ...     def run(self, gm, ctx):
        ...         return None
        >>> Nothing().name
        'Nothing'
    """

    #: Whether the pass adds or replaces nodes, so that value metadata ("tv_val") must be
    #: propagated again before a pass that reads it (the pipeline does that lazily).
    restructures: bool = False

    @property
    def name(self) -> str:
        return type(self).__name__

    def run(self, gm: fx.GraphModule, ctx: PassContext) -> None:  # pragma: no cover
        raise NotImplementedError

    def __call__(self, gm: fx.GraphModule, ctx: PassContext, *, recompile: bool = True) -> None:
        """Run the pass, drop dead nodes and lint. ``recompile=False`` leaves ``gm.forward``
        stale: a pipeline of passes (which read the graph, never the generated code) recompiles
        once at its end instead of after every pass, a third of a small model's lowering."""
        self.run(gm, ctx)
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        if recompile:
            gm.recompile()
