"""One visitor module per aten-op family; importing this package fills ``REGISTRY``."""

from . import (  # noqa: F401
    activation,
    conv,
    elementwise,
    matmul,
    pool,
    reduce,
    shape,
)
from .registry import REGISTRY, register

__all__ = ["REGISTRY", "register"]
