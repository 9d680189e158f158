"""How many intra-op threads torch uses while we lower: ``threads=``, ``TOSA_VERIFY_THREADS``.

Why: lowering runs many small torch kernels (export, calibration, fake-quant reference runs).
On a machine whose cores are busy with other work, torch's OpenMP threads spin against each
other and the other processes: on a 2-core machine under load (load average 9-16), the width-1.0
MobileNetV2 took about 3x as long to lower with torch's default 2 threads as with one (76 vs
24 s, 143 vs 49 s, 268 vs 90 s in alternating pairs; ``benchmarks/bench_threads.py``). So the
default leaves a core free: ``cpu_count // 2`` threads, at least 1 and at most 4 -- 1 on a
2-core CI machine.

Precedence: an explicit ``threads`` argument (the CLI's ``--threads``), then the environment
variable ``TOSA_VERIFY_THREADS``, then ``OMP_NUM_THREADS`` if the user set it (torch already
follows it; we leave torch alone), then the default above. The previous setting is restored
afterwards.

Example:
    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1) as n:
    ...     n, torch.get_num_threads()
    (1, 1)
    >>> torch.get_num_threads() == before
    True
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

__all__ = ["ENV", "default_threads", "resolve_threads", "torch_threads"]

ENV = "TOSA_VERIFY_THREADS"


def default_threads(cpu_count: int | None = None) -> int:
    """Threads when nothing asks for a number: half the cores, between 1 and 4.

    Example:
        >>> default_threads(2), default_threads(8), default_threads(64), default_threads(1)
        (1, 4, 4, 1)
    """
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return max(1, min(4, cores // 2))


def resolve_threads(threads: int | None = None) -> int | None:
    """The thread count to use, or ``None`` to leave torch as the user set it (OMP_NUM_THREADS).

    Raises ``ValueError`` naming ``TOSA_VERIFY_THREADS`` (or ``threads``) when not a positive
    integer.

    Example:
        >>> resolve_threads(3)
        3
    """
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        return threads
    text = os.environ.get(ENV, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{ENV} must be a positive integer, got {text!r}")
        return int(text)
    if os.environ.get("OMP_NUM_THREADS", "").strip():
        return None
    return default_threads()


@contextlib.contextmanager
def torch_threads(threads: int | None = None) -> Iterator[int]:
    """Run the block with torch's intra-op thread count from :func:`resolve_threads`.

    Example:
        >>> with torch_threads(2) as n:
        ...     n
        2
    """
    n = resolve_threads(threads)
    old = torch.get_num_threads()
    if n is None or n == old:
        yield old
        return
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(old)

