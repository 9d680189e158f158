"""Errors of the ``vgf`` package (TOSA -> VGF with the ML SDK, run on a Vulkan device).

They derive from :class:`tosa_verify.errors.TosaError`, so the ``tosa-verify`` CLI reports
them like every other deliberate failure (exit code 2, one readable line).
"""

from __future__ import annotations

from tosa_verify.errors import TosaError


class VgfError(TosaError):
    """Base class of every error the ``vgf`` package raises on purpose.

    ``step`` names what failed (``"model-converter"``, ``"vgf_dump"``, ``"scenario-runner"``,
    ``"setup"``); ``tool_output`` keeps everything the tool printed, for a log.

    Example:
        >>> err = VgfError("scenario-runner: no device", step="scenario-runner")
        >>> isinstance(err, TosaError), err.step
        (True, 'scenario-runner')
    """

    def __init__(self, message: str, *, step: str = "", tool_output: str = "") -> None:
        super().__init__(message)
        self.step = step
        self.tool_output = tool_output


class VgfUnavailableError(VgfError):
    """A piece of the VGF tool chain or the Vulkan runtime is missing; the message says what to install.

    Example:
        >>> issubclass(VgfUnavailableError, VgfError)
        True
    """


class VgfCompileError(VgfError):
    """The model converter rejected the TOSA graph, crashed or timed out.

    Example:
        >>> VgfCompileError("model-converter: unsupported op", step="model-converter").step
        'model-converter'
    """


class VgfRuntimeError(VgfError):
    """The scenario runner failed, crashed or timed out, or its outputs do not fit the graph.

    Example:
        >>> VgfRuntimeError("scenario-runner: timed out after 5 s", step="scenario-runner").step
        'scenario-runner'
    """
