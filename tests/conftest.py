"""Shared fixtures: every test must leave no worker process behind."""

from __future__ import annotations

import time

import psutil
import pytest

from eugo_lab import hpc


def _children() -> set[int]:
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


@pytest.fixture(autouse=True)
def no_leaked_processes():
    """Fail a test that leaves processes behind (after shutting the runtime down)."""
    before = _children()
    yield
    hpc.shutdown()
    leaked = wait_gone(_children() - before, timeout=10)
    if leaked:
        desc = []
        for pid in leaked:
            try:
                desc.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())[:120]}")
            except psutil.Error:
                pass
        for pid in leaked:  # do not poison the following tests
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
        pytest.fail("test leaked processes:\n" + "\n".join(desc))


@pytest.fixture
def local2():
    """A fresh 2-worker local pool."""
    hpc.init(backend="local", workers=2)
    yield hpc
    hpc.shutdown()
