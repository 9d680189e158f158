"""Test order for ``pytest -n N --dist worksteal``: each worker starts with its share of the slow tests.

xdist's work-stealing scheduler hands worker ``i`` the next ``remaining // (N - i)`` tests of the
collection in order, and an idle worker later steals the tail of the longest queue. A minute-long
test that a worker reaches last keeps the run going while the other worker idles, so the known
slow tests (``tests/durations.json``: seconds per node id from a ``--durations`` run) are dealt
out first, longest first, each to the chunk with the least known time (LPT); the other tests keep
their collection order (one file's module fixtures stay together) behind them. A renamed or new
test is simply not known: it keeps its place. Refresh the table after a run with
``--durations=80``: ``python tests/_schedule.py pytest-output.txt``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")


def chunk_sizes(total: int, workers: int) -> list[int]:
    """The number of tests xdist's worksteal scheduler first sends to each of ``workers``.

    >>> chunk_sizes(7, 2)
    [3, 4]
    """
    sizes, left = [], total
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def deal(ids: list[str], seconds: dict[str, float], workers: int) -> list[int]:
    """A permutation of ``range(len(ids))``: the known slow ids first in each worker's chunk.

    >>> deal(["a", "b", "c", "d"], {"c": 5.0, "d": 3.0}, 2)
    [2, 0, 3, 1]
    """
    sizes = chunk_sizes(len(ids), max(1, workers))
    slow = sorted((i for i, n in enumerate(ids) if n in seconds), key=lambda i: -seconds[ids[i]])
    chunks: list[list[int]] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    for i in slow:
        # the least-loaded chunk with room (a chunk holds exactly its size, as xdist sends it)
        k = min((k for k in range(len(sizes)) if len(chunks[k]) < sizes[k]), key=lambda k: load[k])
        chunks[k].append(i)
        load[k] += seconds[ids[i]]
    rest = iter(i for i, n in enumerate(ids) if n not in seconds)
    for k, size in enumerate(sizes):
        chunks[k] += [next(rest) for _ in range(size - len(chunks[k]))]
    return [i for chunk in chunks for i in chunk]


def order_items(config, items: list) -> None:
    """Reorder ``items`` in place by :func:`deal` (a no-op without ``tests/durations.json``)."""
    if not DURATIONS.exists():
        return
    seconds = json.loads(DURATIONS.read_text())
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = [items[i] for i in deal([it.nodeid for it in items], seconds, workers)]


def parse_durations(report: str) -> dict[str, float]:
    """Seconds per node id (setup + call + teardown) from pytest's ``--durations`` report, longest first.

    >>> parse_durations("12.50s call     tests/a.py::t\\n0.50s setup    tests/a.py::t")
    {'tests/a.py::t': 13.0}
    """
    seconds: dict[str, float] = {}
    for m in re.finditer(r"^\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)", report, re.M):
        seconds[m.group(2)] = round(seconds.get(m.group(2), 0.0) + float(m.group(1)), 1)
    return dict(sorted(seconds.items(), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    DURATIONS.write_text(json.dumps(parse_durations(Path(sys.argv[1]).read_text()), indent=0) + "\n")

