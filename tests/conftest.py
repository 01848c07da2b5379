"""Shared fixtures: every test must leave no worker process behind."""

from __future__ import annotations

import psutil
import pytest
from _processes import children, signal_all, wait_gone

from eugo_lab import hpc


def _pooled_by_ray(pid: int, before: set[int]) -> bool:
    """A worker of a Ray that was running before the test (a module's fixture; its raylet among the worker's
    ancestors): Ray sizes its own pool.

    Ray starts a worker when it sees fit (a placement group, a task blocked in ``ray.get``) and keeps it
    for later tasks; it ends when that Ray does, at the fixture's ``ray.shutdown()``.
    """
    try:
        proc = psutil.Process(pid)
        title = " ".join(proc.cmdline()) or proc.name()  # Ray retitles its workers "ray::IDLE", "ray::f"
        return title.startswith("ray::") and any(p.pid in before for p in proc.parents())
    except psutil.Error:
        return False


@pytest.fixture(autouse=True)
def no_leaked_processes():
    """Fail a test that leaves processes behind (after shutting the runtime down)."""
    before = children()
    yield
    hpc.shutdown()
    leaked = wait_gone({pid for pid in children() - before if not _pooled_by_ray(pid, before)}, timeout=10)
    if leaked:
        desc = []
        for pid in leaked:
            try:
                desc.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())[:120]}")
            except psutil.Error:
                pass
        signal_all(leaked)  # do not poison the following tests
        pytest.fail("test leaked processes:\n" + "\n".join(desc))


@pytest.fixture(scope="module")
def ip():
    """The IPython shell with the ``%%eugo`` magics loaded (one shell per process, shared by the modules)."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or get_ipython()  # None when another test module started it already
    shell.run_line_magic("load_ext", "eugo_lab")
    return shell


@pytest.fixture
def local2():
    """A fresh 2-worker local pool."""
    hpc.init(backend="local", workers=2)
    yield hpc
    hpc.shutdown()
