"""PyTorch nn.Module -> torch.export -> TOSA 1.0.0 (INT and FP profiles).

Example:
    >>> import torch, lowering
    >>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Sigmoid()).eval()
    >>> lm = lowering.lower(m, (torch.randn(1, 4),), profile="INT")
    >>> lm.op_counts["TABLE"]
    1
"""

from . import noise

noise.install()  # before torchao is imported (by .api): its CUDA-only .so lines, see noise.py

from .api import export_module, lower  # noqa: E402
from .errors import LoweringError  # noqa: E402
from .lowered import CpuNode, LoweredModel, Partition  # noqa: E402
from .qparams import QParams  # noqa: E402
from .quantizer import QuantConfig, TosaQuantizer  # noqa: E402
from .support import supported_ops  # noqa: E402

#: Every aten overload that lowers (``aten.<name>.<overload>``), in either profile; derived
#: from the emitter and pass registries by :func:`lowering.support.support_table`.
SUPPORTED_OPS: frozenset[str] = supported_ops()
#: The aten overloads that lower in the INT profile.
SUPPORTED_OPS_INT: frozenset[str] = supported_ops("INT")
#: The aten overloads that lower in the FP profile.
SUPPORTED_OPS_FP: frozenset[str] = supported_ops("FP")

#: Names served from :mod:`lowering.partitioner`, imported on first use (it imports ExecuTorch).
_PARTITIONER_NAMES = ("TosaPartitioner", "DelegateSpec", "TosaVerifyBackend",
                      "TosaVerifyEthosUBackend", "TosaVerifyVgfBackend", "delegate_payloads",
                      "target_executorch_ethosu_runtime", "target_executorch_vgf_runtime")


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
    "SUPPORTED_OPS_INT",
    "SUPPORTED_OPS_FP",
    *_PARTITIONER_NAMES,
]
