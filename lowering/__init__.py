"""PyTorch nn.Module -> torch.export -> TOSA 1.0.0 (INT and FP profiles).

Example:
    >>> import torch, lowering
    >>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Sigmoid()).eval()
    >>> lm = lowering.lower(m, (torch.randn(1, 4),), profile="INT")
    >>> lm.op_counts["TABLE"]
    1
"""

from .api import export_module, lower
from .errors import LoweringError
from .lowered import CpuNode, LoweredModel, Partition
from .ops import REGISTRY
from .qparams import QParams
from .quantizer import QuantConfig, TosaQuantizer

SUPPORTED_OPS: frozenset[str] = frozenset(
    f"aten.{t._schema.name.split('::')[-1]}.{t._overloadname}" for t in REGISTRY
)

#: Names served from :mod:`lowering.partitioner`, imported on first use (it imports ExecuTorch).
_PARTITIONER_NAMES = ("TosaPartitioner", "DelegateSpec", "TosaVerifyBackend",
                      "TosaVerifyEthosUBackend", "delegate_payloads")


def __getattr__(name: str):
    if name in _PARTITIONER_NAMES:
        from . import partitioner

        return getattr(partitioner, name)
    raise AttributeError(f"module 'lowering' has no attribute {name!r}")


__all__ = [
    "lower",
    "export_module",
    "LoweredModel",
    "Partition",
    "CpuNode",
    "LoweringError",
    "QuantConfig",
    "TosaQuantizer",
    "QParams",
    "SUPPORTED_OPS",
    *_PARTITIONER_NAMES,
]
