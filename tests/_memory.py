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
