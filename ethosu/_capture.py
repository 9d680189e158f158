"""Capture what Vela prints while it runs in-process.

Vela's Python code prints through ``sys.stdout``; its C++ core (``ethosu.regor``) would
write straight to file descriptors 1 and 2. Both are captured: Python-level output with
``contextlib.redirect_stdout``/``redirect_stderr``, native output by pointing fds 1 and 2 at
a temporary file for the duration. Process-wide state is touched, so callers serialise.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import sys
import tempfile
from collections.abc import Iterator


class Captured:
    """The text captured by :func:`capture_output` (filled in when the block exits).

    Example:
        >>> Captured().text
        ''
    """

    def __init__(self) -> None:
        self.text = ""


def _flush_native() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # not a libc platform: nothing buffered natively
        pass


def _flush_python() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


@contextlib.contextmanager
def capture_output(native: bool = True) -> Iterator[Captured]:
    """Capture Python and (when ``native``) file-descriptor level stdout/stderr.

    Example:
        >>> with capture_output() as cap:
        ...     print("hello from Vela")
        >>> cap.text
        'hello from Vela\\n'
    """
    result = Captured()
    python_buf = io.StringIO()
    saved: list[tuple[int, int]] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        if native:
            _flush_python()
            _flush_native()
            for fd in (1, 2):
                try:
                    saved.append((fd, os.dup(fd)))
                    os.dup2(sink.fileno(), fd)
                except OSError:  # fd not open (embedded interpreter): skip it
                    continue
        try:
            with contextlib.redirect_stdout(python_buf), contextlib.redirect_stderr(python_buf):
                yield result
        finally:
            if saved:
                _flush_native()
                for fd, copy in saved:
                    os.dup2(copy, fd)
                    os.close(copy)
            sink.seek(0)
            native_text = sink.read().decode("utf-8", errors="replace")
            result.text = python_buf.getvalue() + native_text
