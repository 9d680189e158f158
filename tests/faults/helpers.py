"""Running the CLI in a child process and judging how it failed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What every failure must look like: one line naming the verb.
ERROR_LINE = re.compile(r"^tosa-verify (?P<verb>[a-z][a-z-]*): error: \S.*$")


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_bytes: int  # the child's peak resident set size


def run_cli(args: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 120) -> Outcome:
    """``python -m tosa_verify.cli ARGS`` with this checkout first on the path."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.update(env or {})
    code = ("import resource, sys\nfrom tosa_verify.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
            "except SystemExit as exc:\n    rc = exc.code\nsys.stdout.flush()\n"
            "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "print(f'\\n@@rss={peak}', file=sys.stderr)\nsys.exit(rc)\n")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full_env,
                          cwd=cwd, timeout=timeout, check=False)
    seconds = time.monotonic() - start
    stderr, _, rss = proc.stderr.rpartition("\n@@rss=")
    assert rss, f"the child did not finish normally: {proc.returncode}\n{proc.stderr[-2000:]}"
    return Outcome(proc.returncode, proc.stdout, stderr.strip("\n"), seconds, int(rss) * 1024)


def assert_one_line_error(outcome: Outcome | tuple[int, str], verb: str, *, contains: str = "") -> str:
    """Exit 2, and stderr is exactly one ``tosa-verify VERB: error: ...`` line (no traceback)."""
    code, stderr = (outcome.code, outcome.stderr) if isinstance(outcome, Outcome) else outcome
    lines = [line for line in stderr.splitlines() if line.strip()]
    # check prints its progress on stderr; the error is its last line and nothing else may follow
    if verb == "check":
        lines = [line for line in lines if not line.startswith("[")]
    assert code == 2, f"exit {code}, stderr:\n{stderr}"
    assert len(lines) == 1, f"expected one error line, got:\n{stderr}"
    match = ERROR_LINE.match(lines[0])
    assert match and match.group("verb") == verb, lines[0]
    assert "Traceback" not in stderr
    assert contains in lines[0], lines[0]
    return lines[0]

