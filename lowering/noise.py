"""Keep torch's and torchao's import-time and export-failure chatter off the user's stderr.

Each filter names one message, where it comes from and why it says nothing to our users; a
message not listed here still reaches stderr. Installed once by ``import lowering``.

* torchao's ``Failed to load .../torchao/_C_mxfp8...so`` / ``_C_cutlass_90a...so`` (logger
  ``torchao``, at import): CUDA-only kernels that cannot load in the CPU build of torch. The
  lowering uses none of them (PT2E quantization is pure Python).
* ``<enum 'KernelPreference'> is an Enum subclass ... register_constant() ... deprecated``
  (logger ``torch.utils._pytree``, at torchao's import): a deprecation addressed to torchao.
* ``isinstance(treespec, LeafSpec) is deprecated`` (FutureWarning, raised when
  ``copy.deepcopy`` copies an exported graph's pytree specs): torch's own pickling path.
* ``The tensor attributes self._flat_weights[0], ... were assigned during export`` (UserWarning
  from torch.export on every ``nn.RNN``/``nn.LSTM``/``nn.GRU``): torch's own RNN modules refresh
  that weight list in ``forward``; the user's module is fine and has nothing to register.
* During ``torch.export.export`` only (:func:`quiet_export`): the export loggers' warnings and
  errors and the partial FX graph torch prints on failure. A failure becomes one
  :class:`~lowering.LoweringError` line that says the same; on success what was held back is
  replayed, so nothing is lost. ``TOSA_VERIFY_DEBUG=1`` lets everything through.

Example:
    >>> import logging, lowering.noise
    >>> rec = logging.LogRecord("torchao", logging.WARNING, "", 0,
    ...                         "Failed to load /x/torchao/_C_mxfp8.so: nope", None, None)
    >>> lowering.noise._TorchaoSoFilter().filter(rec)
    False
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator

__all__ = ["install", "quiet_export"]

#: the loggers torch.export and its shape solver report through while exporting
EXPORT_LOGGERS = ("torch.export._trace", "torch._export.non_strict_utils",
                  "torch.fx.experimental.symbolic_shapes", "torch._dynamo.convert_frame")


class _TorchaoSoFilter(logging.Filter):
    """Drop torchao's "Failed to load <its own _C_*.so>" lines (CUDA-only kernels)."""

    _PATTERN = re.compile(r"Failed to load \S*torchao\S*/_C_\S*\.so\b")

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._PATTERN.match(record.getMessage())


class _EnumConstantFilter(logging.Filter):
    """Drop torch's deprecation of register_constant() on an Enum (torchao's KernelPreference)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "is an Enum subclass and is now natively supported" not in str(record.msg)


class _HoldBack(logging.Filter):
    """Keep every record instead of emitting it (replayed by :func:`quiet_export` on success)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return False


_INSTALLED: list[bool] = []


def install() -> None:
    """Install the import-time filters (idempotent). Call before importing torchao.

    Example:
        >>> install(); install()   # a second call adds nothing
    """
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    logging.getLogger("torchao").addFilter(_TorchaoSoFilter())
    logging.getLogger("torch.utils._pytree").addFilter(_EnumConstantFilter())
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                            category=FutureWarning)
    warnings.filterwarnings("ignore", message=r"The tensor attributes self\.[\w.]*_flat_weights",
                            category=UserWarning)


@contextlib.contextmanager
def quiet_export() -> Iterator[None]:
    """Hold back torch.export's log records and stderr prints for the duration.

    On success they are replayed (logged again, the text written to stderr); when the block
    raises they are dropped: the caller turns the exception into one clear line.

    Example:
        >>> import torch
        >>> with quiet_export():
        ...     ep = torch.export.export(torch.nn.ReLU(), (torch.ones(2),))
    """
    if os.environ.get("TOSA_VERIFY_DEBUG"):
        yield
        return
    hold = _HoldBack()
    loggers = [logging.getLogger(name) for name in EXPORT_LOGGERS]
    for lg in loggers:
        lg.addFilter(hold)
    text = io.StringIO()
    ok = False
    try:
        with contextlib.redirect_stderr(text):
            yield
        ok = True
    finally:
        for lg in loggers:
            lg.removeFilter(hold)
        if ok:
            for record in hold.records:
                logging.getLogger(record.name).handle(record)
            sys.stderr.write(text.getvalue())
