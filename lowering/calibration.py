"""Why calibration failed: the first node of the float graph whose value is not finite.

A histogram observer cannot take NaN or infinity (torch.histc raises "range of [nan, nan] is
not finite"), and a min/max one would turn it into a meaningless scale. When calibration fails,
:func:`first_non_finite` walks the float graph on the calibration batches and names the node
that produced the NaN or infinity and the model's source line, so the error says what to fix.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx


class _FirstNonFinite(fx.Interpreter):
    """Runs a graph and stops at the first input or call whose tensor value holds a NaN or
    infinity."""

    found: fx.Node | None = None

    def run_node(self, n: fx.Node):
        result = super().run_node(n)
        if n.op in ("placeholder", "call_function", "call_method", "call_module"):
            values = result if isinstance(result, (tuple, list)) else (result,)
            for value in values:
                if isinstance(value, torch.Tensor) and value.is_floating_point() \
                        and not bool(torch.isfinite(value).all()):
                    self.found = n
                    raise StopIteration
        return result


def first_non_finite(gm: fx.GraphModule, batches: Sequence[tuple]) -> str | None:
    """A sentence naming the first node of ``gm`` that gives a NaN or infinity on one of
    ``batches`` (its number, the aten op and the model's source line), or None when every value
    is finite (or the graph does not run).

    Example:
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.log(x - 2.0).abs()
        >>> gm = torch.export.export(M(), (torch.ones(3),)).module(check_guards=False)
        >>> first_non_finite(gm, [(torch.ones(3),)]).split(":")[0]
        "calibration batch 1, node 'log' (aten.log.default) gives NaN or infinity"
        >>> first_non_finite(gm, [(torch.full((3,), 5.0),)]) is None
        True
        >>> first_non_finite(gm, [(torch.tensor([5.0, float("nan"), 5.0]),)]).split(":")[0]
        "calibration batch 1, input 'x' holds NaN or infinity"
    """
    from .emitter import source_line
    from .graph_utils import target_name

    for number, batch in enumerate(batches, 1):
        walker = _FirstNonFinite(gm)
        try:
            with torch.no_grad():
                walker.run(*batch)
        except StopIteration:
            node = walker.found
            if node.op == "placeholder":
                return (f"calibration batch {number}, input {node.name!r} holds NaN or infinity: INT "
                        f"quantization needs finite activations; fix the calibration data")
            where = source_line(node)
            return (f"calibration batch {number}, node {node.name!r} ({target_name(node)}) gives NaN or "
                    f"infinity: INT quantization needs finite activations; fix the model or its "
                    f"calibration data" + (f" (at {where})" if where else ""))
        except Exception:  # noqa: BLE001  (the caller reports the original failure)
            return None
    return None
