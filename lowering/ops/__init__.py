"""One visitor module per aten-op family; importing this package fills ``REGISTRY``."""

from . import (  # noqa: F401
    activation,
    control_flow,
    conv,
    elementwise,
    indexing,
    matmul,
    pool,
    reduce,
    shape,
    unary,
)
from .registry import ALL_PROFILES, PROFILES, REGISTRY, register

__all__ = ["REGISTRY", "PROFILES", "ALL_PROFILES", "register"]
