"""A golden writer for the fault tests, run as ``python -m tests.faults.golden_writer``.

``loop ROOT CASE DELAY``: write the golden of CASE over and over (values 0, 1, 2, ... in
``output/y``), each write's atomic switch slowed by DELAY seconds, printing ``wrote N`` after
each; the test kills it at random moments.
``race ROOT CASE COUNT DELAY``: COUNT times, note the live version, then write expecting it;
print ``recorded`` or ``conflict`` per attempt (two of these run at once).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from golden import store as golden_store
from golden.store import Golden, GoldenConflictError, GoldenStore, tensor_stats


def golden(value: int) -> Golden:
    """A golden whose every array says which write it came from."""
    y = np.full(4096, value, np.int32)
    return Golden(manifest={"profile": "INT"}, inputs={"x": np.arange(16, dtype=np.int8)}, outputs={"y": y},
                  stats={"y": tensor_stats(y)})


def _slow_switch(delay: float) -> None:
    real = os.replace

    def slow(src, dst):
        time.sleep(delay)  # widen the window between writing the new version and switching to it
        real(src, dst)

    golden_store._replace = slow


def main(argv: list[str]) -> int:
    mode, root, case = argv[:3]
    store = GoldenStore(root)
    if mode == "loop":
        _slow_switch(float(argv[3]))
        n = 0
        while True:
            n += 1
            store.write(case, golden(n), update=True)
            print(f"wrote {n}", flush=True)
    count, delay = int(argv[3]), float(argv[4])
    _slow_switch(delay)
    for _ in range(count):
        seen = store.version(case)
        time.sleep(delay)  # record (slowly), as check --update-golden does between the two
        try:
            store.write(case, golden(os.getpid()), update=True, expected=seen)
            print("recorded", flush=True)
        except GoldenConflictError as exc:
            print(f"conflict {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
