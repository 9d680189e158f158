"""The xdist order of tests/_schedule.py, checked against a simulation of the worksteal hand-out."""

from __future__ import annotations

import random

from _schedule import chunk_sizes, deal, parse_durations


def _simulated_chunks(order: list[int], workers: int) -> list[list[int]]:
    """What xdist's worksteal scheduler sends each worker first: the next ``pending // idle``."""
    chunks, pending = [], list(order)
    for i in range(workers):
        n = len(pending) // (workers - i)
        chunks.append(pending[:n])
        pending = pending[n:]
    return chunks


def test_each_worker_starts_with_its_slow_tests_balanced():
    rng = random.Random(0)
    ids = [f"t{i}" for i in range(301)]
    seconds = {f"t{i}": rng.uniform(1, 100) for i in rng.sample(range(301), 40)}
    for workers in (1, 2, 3):
        order = deal(ids, seconds, workers)
        assert sorted(order) == list(range(len(ids)))  # a permutation: nothing lost or doubled
        chunks = _simulated_chunks(order, workers)
        assert [len(c) for c in chunks] == chunk_sizes(len(ids), workers)
        loads = []
        for chunk in chunks:
            known = [ids[i] in seconds for i in chunk]
            # the slow tests lead the chunk, longest first; the rest keep collection order
            assert known == sorted(known, reverse=True)
            slow = [seconds[ids[i]] for i in chunk if ids[i] in seconds]
            assert slow == sorted(slow, reverse=True)
            rest = [i for i in chunk if ids[i] not in seconds]
            assert rest == sorted(rest)
            loads.append(sum(slow))
        # LPT: no worker's known load exceeds another's by more than the longest test
        assert max(loads) - min(loads) <= max(seconds.values())


def test_durations_table_is_read_from_a_durations_report():
    report = ("=== slowest durations ===\n"
              "30.25s call     tests/x.py::test_a[1]\n"
              "2.00s setup    tests/x.py::test_a[1]\n"
              "7.10s call     tests/y.py::test_b\n")
    table = parse_durations(report)
    assert table == {"tests/x.py::test_a[1]": 32.2, "tests/y.py::test_b": 7.1}
    assert list(table) == ["tests/x.py::test_a[1]", "tests/y.py::test_b"]
