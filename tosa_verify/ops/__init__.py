"""Interpreter operators, one module per chapter of the TOSA specification.

Importing this package imports every op-family module, which fills
:data:`tosa_verify.ops.registry.REGISTRY`.
"""

from __future__ import annotations

import importlib
import pkgutil

from .registry import REGISTRY, OpCall, register

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "registry" and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["REGISTRY", "OpCall", "register"]
