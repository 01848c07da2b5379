"""Polling helpers shared by the tests: wait until a file says something, or the local pool is whole.

A module, not conftest (see ``_processes``).
"""

from __future__ import annotations

import os
import time

from _processes import is_alive

from eugo_lab.hpc import session


def wait_for_file(path: str | os.PathLike, text: str = "", timeout: float = 30.0) -> str:
    """Wait until ``path`` exists and contains ``text``; return its content (AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        content = None
        try:
            with open(path) as fh:
                content = fh.read()
        except FileNotFoundError:
            pass
        if content is not None and text in content:
            return content
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never appeared in {os.fspath(path)}" if content is not None
                                 else f"{os.fspath(path)} was never created")
        time.sleep(0.02)


def pool_pids() -> list[int]:
    """The pids of the current runtime's local-pool workers."""
    return session.current().backend.worker_pids()


def wait_for_pool(n: int, other_than: set[int] | frozenset[int] = frozenset(), timeout: float = 10.0) -> set[int]:
    """Wait until the local pool has ``n`` live workers and is not the set ``other_than``; return their pids.

    ``other_than``: the pids before a worker was killed, to wait for its replacement.
    """
    deadline = time.monotonic() + timeout
    while True:  # a killed worker not yet reaped is a zombie: it exists, but is not live
        pids = set(pool_pids())
        if len(pids) == n and pids != set(other_than) and all(is_alive(p) for p in pids):
            return pids
        if time.monotonic() > deadline:
            raise AssertionError(f"the pool did not come back to {n} workers (other than {sorted(other_than)}) "
                                 f"within {timeout} s: {sorted(pids)}")
        time.sleep(0.05)
