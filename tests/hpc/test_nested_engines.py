"""Tasks that submit tasks on Dask, Ray and the threads engine: the children go to where the parent runs.

Inside a task on either engine ``.remote()``, ``get``, ``wait``, ``put`` and ``map`` reach the
driver's cluster (eugo_lab.hpc.engine_nested), never a private local pool started inside the
worker; a parent waiting on its children gives its slot back, so recursion deeper than the
workers finishes. The process tree is sampled while the work runs; no assertion depends on the
machine's speed beyond a generous deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest

from eugo_lab import hpc

pytestmark = pytest.mark.usefixtures("resource_tracker_running")  # Dask clusters start it

# Generous: Ray starts a worker process for each task blocked on its children, seconds each on a loaded machine.
DEADLINE_S = 540


@hpc.remote
def fib(n):
    return n if n < 2 else sum(hpc.get([fib.remote(n - 1), fib.remote(n - 2)]))


@hpc.remote
def square(x):
    return x * x


@hpc.remote
def total_of(ref, k):
    return sum(ref) + k


@hpc.remote
def fan_out(n):
    """Every public call a task can make, inside a task: put, map, wait, as_completed, get."""
    ref = hpc.put(list(range(n)))
    mapped = hpc.map(square, range(n))
    done, pending = hpc.wait(mapped, num_returns=n, timeout=DEADLINE_S)
    assert len(done) == n and not pending
    sums = [total_of.remote(ref, k) for k in range(3)]
    seen = sorted(f.result() for f in hpc.as_completed(sums, timeout=DEADLINE_S))
    return hpc.get(mapped), seen


@hpc.remote
def init_inside():
    try:
        hpc.init()
    except hpc.BackendError as exc:
        return str(exc)
    return "no error"


# A private local pool's processes: what a task on Dask or Ray started before its children went to the cluster.
# (Other new processes are not named here: Ray starts a worker for each task that waits on its children, and
# one that is starting shows as "bash" or "python" for a moment.)
_LOCAL_POOL = ("local_zygote", "local_worker", "local_template")


class _Sampler:
    """The driver's process tree, sampled in a thread: the most processes seen, and any of a local pool."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.peak = 0
        self.local_pool: set[str] = set()
        self.before = {p.pid for p in self.me.children(recursive=True)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            kids = self.me.children(recursive=True)
            self.peak = max(self.peak, len(kids))
            for p in kids:
                try:
                    line = " ".join(p.cmdline()) or p.name()
                except psutil.Error:
                    continue
                if any(mark in line for mark in _LOCAL_POOL):
                    self.local_pool.add(f"{p.pid}: {line[:120]}")
            time.sleep(0.05)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def _engine(backend: str) -> Iterator[None]:
    hpc.init(backend=backend, workers=2)
    try:
        yield
    finally:
        hpc.shutdown()


# Ray starts a worker process for each task that waits on its children (seconds each on a busy machine):
# a shallower recursion there proves the same (more waiting tasks than workers) at a tenth of the cost.
@pytest.mark.parametrize(("backend", "n", "fib_n"), [("dask", 10, 55), ("ray", 6, 8)])
def test_tasks_that_submit_tasks_use_the_drivers_cluster(backend, n, fib_n):
    with _engine(backend):  # one start per engine: every check of this engine runs on it
        with _Sampler() as sampled:
            base = len(sampled.before)
            began = time.monotonic()
            assert hpc.get(fib.remote(n), timeout=DEADLINE_S) == fib_n  # 2 workers, more tasks waiting on children
            took = time.monotonic() - began
            assert hpc.get(fan_out.remote(6), timeout=DEADLINE_S) == ([i * i for i in range(6)], [15, 16, 17])
            message = hpc.get(init_inside.remote(), timeout=DEADLINE_S)
        assert not sampled.local_pool, f"a local pool started inside a {backend} worker: {sampled.local_pool}"
        if backend == "dask":  # waiting tasks leave the thread pool: threads, never processes
            assert sampled.peak <= base + 1, (sampled.peak, base)
        assert took < DEADLINE_S
        assert f"inside a task on the {backend} engine" in message and "on the driver" in message


def test_a_task_outside_an_engine_worker_sees_no_engine():
    from eugo_lab.hpc import engine_nested

    assert engine_nested.engine_of_this_worker() is None
    assert engine_nested.task_runtime() is None


def test_threads_engine_parents_run_their_queued_children_instead_of_holding_every_thread():
    # 2 threads, fib(12): 376 tasks waiting on children at one point or another. Each waiting thread runs its
    # own queued children on its stack, so no thread is ever added and the recursion cannot deadlock.
    hpc.init(backend="threads", workers=2)
    try:
        hpc.get([square.remote(i) for i in range(4)])  # the runtime's own threads and the pool's first are up
        threads_before = threading.active_count()
        assert hpc.get(fib.remote(12), timeout=120) == 144
        assert hpc.get(fan_out.remote(6), timeout=120) == ([i * i for i in range(6)], [15, 16, 17])
        assert threading.active_count() <= threads_before + 1  # at most the pool's second thread, on demand
    finally:
        hpc.shutdown()
