"""Isolated Vela compiles without paying Vela's start-up each time: a pre-imported "zygote".

An isolated compile used to start a fresh interpreter per graph (``python -m ethosu.vela``):
about 0.5 s of CPU importing Python, numpy and Vela, against ~20 ms for compiling a small graph.
The zygote is one child process that imports Vela once and then, per request, ``fork()``s a
grandchild that runs ``vela.main(argv)`` and exits. Isolation is the same as before: a segfault,
an abort or a hang ends (or is killed in) the grandchild only; the zygote reports its exit
status, and the caller turns a signal into an error as it always did.

Protocol (one JSON object per line over the zygote's stdin/stdout):

* request ``{"argv": [...], "cwd": str, "env": {...}, "code": str}``: the grandchild switches to
  ``cwd`` and ``env`` (the caller's, at the time of the call), then executes ``code`` with
  ``argv`` bound (by default: Vela's ``main``, as its ``__main__`` does);
* answer ``{"pid": int}`` as soon as the grandchild runs (so the caller can kill it on a
  timeout), then ``{"returncode": int, "log": str}`` when it has ended (negative for a signal,
  as :mod:`subprocess` reports it; ``log`` is everything it printed, stdout and stderr merged).

Run as ``python -m ethosu._vela_zygote``; the client is :class:`VelaZygote`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

#: What a grandchild runs by default: Vela's own entry point, exactly as ``python -m ethosu.vela``.
VELA_MAIN = "from ethosu.vela.vela import main\nstatus = main(argv)"


def _child(request: dict, log_path: str) -> None:
    """In the forked grandchild: run the request's code, print into ``log_path``, exit."""
    import traceback

    log = os.open(log_path, os.O_WRONLY | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives until os._exit
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    status = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        scope = {"argv": list(request["argv"]), "status": 0}
        exec(request["code"], scope)  # noqa: S102 - our own parent's code, over a private pipe
        status = scope["status"] if isinstance(scope["status"], int) else 0
    except SystemExit as exc:  # argparse's refusal (2) or sys.exit(n), as the interpreter maps it
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - a traceback on stderr and status 1, as `python -m` does
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def serve() -> None:
    """The zygote's loop: import Vela, then fork one grandchild per request line on stdin."""
    import ethosu.vela.vela  # noqa: F401 - the point of the zygote: imported once, inherited by every fork

    answers = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        fd, log_path = tempfile.mkstemp(prefix="vela-log-")
        os.close(fd)
        answers.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, log_path)
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, wait_status = os.waitpid(pid, 0)
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            log = handle.read()
        os.unlink(log_path)
        answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(wait_status), "log": log}) + "\n")
        answers.flush()


class ZygoteUnavailable(RuntimeError):
    """The zygote could not start or died between requests: the caller starts Vela itself."""


class VelaZygote:
    """Client of one zygote process (started on first use, restarted if it has died).

    Not thread-safe: :func:`ethosu.compiler.compile_tosa` calls it under its Vela lock.

    Example:
        >>> zygote = VelaZygote()
        >>> returncode, log = zygote.run(["--version"], timeout=60)
        >>> returncode, log.strip() != ""
        (0, True)
        >>> zygote.close()
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._owner = os.getpid()

    def _start(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None and self._owner == os.getpid():
            return self._proc
        # numpy's BLAS threads are not needed by Vela and do not survive fork() well
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "ethosu._vela_zygote"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        except OSError as exc:
            raise ZygoteUnavailable(f"cannot start the Vela zygote: {exc}") from exc
        self._owner = os.getpid()
        return self._proc

    def _answer(self, proc: subprocess.Popen, deadline: float | None) -> dict | None:
        """The next answer line, or None when ``deadline`` passed first."""
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([proc.stdout], [], [], wait)
            if not ready:
                return None
            line = proc.stdout.readline()
            if not line:
                raise ZygoteUnavailable("the Vela zygote ended unexpectedly")
            return json.loads(line)

    def run(self, argv: list[str], timeout: float | None = None, code: str = VELA_MAIN) -> tuple[int | None, str]:
        """Run ``code`` (default: Vela's main) on ``argv`` in a forked grandchild.

        Returns ``(returncode, log)``; ``returncode`` is None when the grandchild was killed
        after ``timeout`` seconds. Raises :class:`ZygoteUnavailable` if the zygote itself fails.
        """
        proc = self._start()
        request = {"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ), "code": code}
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            started = self._answer(proc, None)
        except (OSError, ValueError) as exc:
            self.close()
            raise ZygoteUnavailable(f"the Vela zygote did not take the request: {exc}") from exc
        deadline = None if timeout is None else time.monotonic() + timeout
        done = self._answer(proc, deadline)
        if done is None:  # too slow: kill the grandchild; the zygote reaps it and answers
            try:
                os.kill(started["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
            killed = self._answer(proc, None)
            return None, killed["log"]
        return done["returncode"], done["log"]

    def close(self) -> None:
        """End the zygote (it also ends by itself when its caller exits: its stdin closes)."""
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid():
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()


if __name__ == "__main__":
    serve()
