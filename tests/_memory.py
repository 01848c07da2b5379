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
