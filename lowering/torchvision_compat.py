"""``import torchvision`` beside a CPU-only torch.

PyPI's torchvision wheels are CUDA builds. Beside the CPU torch their native library cannot
register ``torchvision::nms``, and ``torchvision._meta_registrations`` (fake-tensor kernels for
those detection ops) fails on import with "operator torchvision::nms does not exist". The
classification models, and everything ``torch.export`` needs from them, use none of
torchvision's custom ops, so an empty module under that name lets the rest import.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TypeVar

_SHIM = "torchvision._meta_registrations"
T = TypeVar("T")


def allow_cpu_torchvision() -> None:
    """Register the empty ``torchvision._meta_registrations`` (idempotent; a real one already
    imported stays).

    Example:
        >>> allow_cpu_torchvision()
        >>> "torchvision._meta_registrations" in sys.modules
        True
    """
    sys.modules.setdefault(_SHIM, types.ModuleType(_SHIM))


def retry_on_cpu_torchvision(fn: Callable[[], T]) -> T:
    """``fn()``; if it fails importing torchvision as above (the error names a ``torchvision::``
    operator and the shim is not in place), drop the half-imported torchvision modules,
    register the shim and call ``fn()`` once more. Any other error propagates unchanged.

    Example:
        >>> retry_on_cpu_torchvision(lambda: 42)
        42
    """
    try:
        return fn()
    except Exception as exc:
        if "torchvision::" not in str(exc) or _SHIM in sys.modules:
            raise
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]
    allow_cpu_torchvision()
    return fn()
