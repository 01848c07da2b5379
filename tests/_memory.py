"""Task bodies that outgrow any memory limit, shared by the memory-limit tests of every engine.

Plain functions in an importable module: cluster workers load them by reference.
"""

from __future__ import annotations

import time


def grow_forever(step_mb: int = 20) -> None:
    """Allocate ``step_mb`` MB every 10 ms until something stops the task."""
    chunks = []
    while True:
        chunks.append(bytearray(step_mb * 1_000_000))
        time.sleep(0.01)


def square_or_grow(arg: tuple[int, int]) -> int:
    """An ``hpc.map`` item ``(i, hog)``: item ``hog`` grows like :func:`grow_forever`, the others return ``i * i``."""
    i, hog = arg
    if i == hog:
        grow_forever()
    return i * i


def grow_ignoring_stops(step_mb: int = 10) -> None:
    """Like :func:`grow_forever`, but swallow every exception raised to stop it (even BaseException)."""
    chunks = []
    while True:
        try:
            while True:
                chunks.append(bytearray(step_mb * 1_000_000))
                time.sleep(0.01)
        except BaseException:  # noqa: BLE001 - the point of this task
            pass


def stop_two_growing_tasks(hpc) -> tuple[BaseException, list]:  # the eugo_lab.hpc module
    """Run :func:`grow_forever` under the init's default limit, then under its own 300 MB limit.

    Both must raise ``hpc.WorkerMemoryError`` (the second naming its own limit); returns the
    first error and both futures.
    """
    import pytest

    grow = hpc.remote(grow_forever)
    f = grow.remote()
    with pytest.raises(hpc.WorkerMemoryError) as info:
        hpc.get(f, timeout=60)
    g = grow.options(memory="300MB").remote()  # a task's own limit wins
    with pytest.raises(hpc.WorkerMemoryError, match="over the 300.00 MB memory limit"):
        hpc.get(g, timeout=60)
    return info.value, [f, g]


def check_a_map_item_over_its_limit_fails_alone(hpc) -> None:  # the eugo_lab.hpc module
    """An ``hpc.map`` batch of 6 under a 200 MB limit whose item 2 grows: only that item fails, never retried."""
    import re

    hog = 2
    result = hpc.map(hpc.remote(square_or_grow).options(memory="200MB"), [(i, hog) for i in range(6)], batch=6)
    hpc.wait(result, num_returns=6, timeout=120)
    try:
        hpc.get(result[hog])
    except hpc.WorkerMemoryError as exc:
        assert re.search(rf"item {hog} of hpc.map\(square_or_grow, ...\).*not retried", str(exc), re.S), str(exc)
    else:
        raise AssertionError(f"item {hog} went over its memory limit and did not fail")
    assert [hpc.get(f) for i, f in enumerate(result) if i != hog] == [i * i for i in range(6) if i != hog]
