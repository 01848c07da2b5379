"""Shared fixtures: every test must leave no worker process behind."""

from __future__ import annotations

import sys
from multiprocessing import resource_tracker

import psutil
import pytest
from _processes import children, signal_all, wait_gone

from eugo_lab import hpc


def _ray_running() -> bool:
    """Whether this process is connected to a Ray (without importing Ray)."""
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def _pooled_by_ray(pid: int) -> bool:
    """A worker process of Ray's (retitled ``ray::IDLE``, ``ray::f``): with a Ray that was running before the test
    (a module's fixture) and still is, Ray sizes its own pool.

    Ray starts a worker when it sees fit (a placement group, a task blocked in ``ray.get``) and keeps it
    for later tasks; it ends when that Ray does, at the fixture's ``ray.shutdown()``.
    """
    try:
        proc = psutil.Process(pid)
        return (" ".join(proc.cmdline()) or proc.name()).startswith("ray::")
    except psutil.Error:
        return False


@pytest.fixture(autouse=True)
def no_leaked_processes():
    """Fail a test that leaves processes behind (after shutting the runtime down)."""
    before = children()
    ray_before = _ray_running()
    yield
    hpc.shutdown()
    pooled = ray_before and _ray_running()  # a module's Ray, still running: its workers are its own to keep
    leaked = wait_gone(children() - before, timeout=10)
    # (read after the wait: a worker Ray has just started takes a moment to retitle itself ray::IDLE)
    leaked = [pid for pid in leaked if not (pooled and _pooled_by_ray(pid))]
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


@pytest.fixture(scope="module")
def resource_tracker_running() -> None:
    """multiprocessing's resource tracker, started before a module's clusters are.

    A cluster of worker processes (LocalCluster's spawned workers) starts this per-interpreter helper
    once; it lives as long as the test process and is no leak of one test.
    """
    resource_tracker.ensure_running()


@pytest.fixture
def local2():
    """A fresh 2-worker local pool."""
    hpc.init(backend="local", workers=2)
    yield hpc
    hpc.shutdown()


@pytest.fixture
def hidden_seed(monkeypatch):
    """Every exercise's hidden case made during the test comes from ``_variants.SEED`` (``problems.draw_seed``)."""
    from _variants import SEED

    from eugo_lab.exercises import problems

    monkeypatch.setattr(problems, "draw_seed", lambda: SEED)
