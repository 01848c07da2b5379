"""Process helpers shared by the tests (a module, not conftest: workers import test modules).

Test modules that workers import by reference must not import ``conftest``: on a worker
that name can resolve to the repository's root ``conftest.py``.
"""

from __future__ import annotations

import time

import psutil


def children() -> set[int]:
    """Pids of this process's descendants."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    """Wait until none of ``pids`` is alive (zombies count as gone); return the survivors."""
    deadline = time.monotonic() + timeout
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}
        if alive:
            time.sleep(0.05)
    return alive
