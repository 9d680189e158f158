"""VGF: TOSA compiled to the Vulkan Graph Format by the ML SDK, executed on a Vulkan device.

The second deployment target of the seed backend beside Ethos-U. Unlike the Ethos-U, a VGF
program runs here: the ML SDK scenario runner executes it on any Vulkan device under the ML
emulation layer (on a machine without a GPU, Mesa's CPU driver lavapipe), which makes VGF a
second real executor of TOSA semantics beside the reference model.

* :func:`compile_tosa` -- TOSA -> :class:`VgfProgram` (``model-converter``);
* :func:`run` -- a program (or a TOSA graph) on numpy inputs, outputs in graph order, the same
  contract as :func:`tosa_verify.run`; :func:`capture` -- every intermediate tensor;
* :func:`available` -- ``(True, "ok")`` or ``(False, what to install)``;
* :class:`VgfExecutor` -- VGF as an engine of :func:`tosa_verify.diff`.

Errors are :class:`VgfError` (a :class:`~tosa_verify.errors.TosaError`): one line naming the step
and the tool's own message. Install: ``pip install -e ".[test]"`` (the four ``ai-ml-*`` wheels)
and ``apt-get install mesa-vulkan-drivers libvulkan1``.

>>> import vgf
>>> ok, reason = vgf.available()
>>> program = vgf.compile_tosa("model.tosa")          # doctest: +SKIP
>>> outputs = vgf.run(program, [x])                    # doctest: +SKIP
"""

from __future__ import annotations

from .agreement import VgfAgreement, check_agreement
from .compiler import VgfProgram, VgfTensor, compile_tosa, converter_version
from .errors import VgfCompileError, VgfError, VgfRuntimeError, VgfUnavailableError
from .runner import INSTALL_HINT, VgfExecutor, available, capture, run

__all__ = [
    "INSTALL_HINT",
    "VgfAgreement",
    "VgfCompileError",
    "VgfError",
    "VgfExecutor",
    "VgfProgram",
    "VgfRuntimeError",
    "VgfTensor",
    "VgfUnavailableError",
    "available",
    "capture",
    "check_agreement",
    "compile_tosa",
    "converter_version",
    "run",
]
