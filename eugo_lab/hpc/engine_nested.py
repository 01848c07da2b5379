"""Tasks that submit tasks on Dask and Ray: the runtime of a task running on a cluster engine's worker.

Inside a task that the Dask or Ray engine runs (its wrapper, ``dask._dask_task`` or
``ray._ray_task_body``, marks the process: ``_cluster.engine_worker``), ``session.current()`` gives
:func:`task_runtime`: a runtime whose engine borrows the worker's own connection (Ray's
``ray.init`` of the worker, the Dask worker's client), so ``.remote()``, ``hpc.get``, ``hpc.wait``,
``hpc.as_completed``, ``hpc.put`` and ``hpc.map`` reach the cluster the driver uses, never a
private local pool in the worker.

A task that waits on its children gives its slot back while it waits, or a recursion deeper than
the cluster's slots would deadlock (every slot held by a parent waiting on children that have
nowhere to run): on Ray it waits inside ``ray.wait`` (Ray releases a task's CPU while it blocks
there); on Dask it leaves the worker's thread pool (``distributed.secede``) and rejoins it
(``distributed.rejoin``) once its children are done. See :func:`_ray_wait` and :func:`_dask_wait`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from eugo_lab.contract import errors
from eugo_lab.hpc import blocking, session
from eugo_lab.hpc.future import STATE_PENDING, Future
from eugo_lab.hpc.prestart import engine_worker
from eugo_lab.hpc.session import Runtime

if TYPE_CHECKING:
    from eugo_lab.contract.base import Backend

# How long one ray.wait lasts before the waiting task looks again at which of its runtime's tasks are
# running (a retry replaces a task's Ray reference; a task held for its inputs gets one once launched).
_RAY_WAIT_SLICE_S = 0.5
# How long a waiting task sleeps when every running task it waits on has a result Ray already
# delivered: the runtime's reporter thread completes their futures within milliseconds.
_SETTLE_S = 0.01


class EngineTaskRuntime(Runtime):
    """The runtime of a task on a Dask or Ray worker: the engine borrows the worker's connection.

    Its tasks go to the same cluster as the driver's. ``hpc.map`` inside a task submits one task per
    item and returns their futures in order (as on the local pool: ``hpc.get`` of the list gives the
    values), so every wait of a task goes through the engine's wait that gives the task's slot back.
    """

    #: Read by the public API: ``hpc.map`` and ``batch=`` take the per-item path inside a task.
    nested = True

    def map(self, fn: Any, iterable: Iterable, batch: int | str = "auto") -> list[Future]:
        """``hpc.map`` inside a task: one child task per item, their futures in order.

        ``fn`` is the remote function (``hpc.map`` wraps a plain one); ``batch`` is ignored here, as on the
        local pool: each item is a task of its own.
        """
        return [self.submit(fn._record, (item,), {}, fn._options) for item in iterable]


_runtime: EngineTaskRuntime | None = None
_lock = threading.Lock()


#: ``"ray"`` or ``"dask"`` in a process whose engine's task wrapper runs tasks, else ``None``.
engine_of_this_worker = engine_worker


def task_runtime() -> EngineTaskRuntime | None:
    """The runtime of tasks in this Dask or Ray worker process (made on first use), or ``None`` elsewhere."""
    global _runtime
    engine = engine_of_this_worker()
    if engine is None:
        return None
    with _lock:
        if _runtime is None:
            backend: Backend
            if engine == "ray":
                from eugo_lab.backends.ray import RayBackend

                backend = RayBackend.in_task()
                wait = _ray_wait
            elif engine == "dask":
                from eugo_lab.backends.dask import DaskBackend

                backend = DaskBackend.in_task()
                wait = _dask_wait
            else:  # pragma: no cover - a wrapper of an engine this module does not know
                raise errors.BackendError(f"a task on the {engine!r} engine cannot submit tasks: only tasks on the "
                                          "local pool, Dask and Ray can. Submit them from the driver instead.")
            _runtime = EngineTaskRuntime(backend, backend_name=engine)
            blocking.engine_wait = wait
    return _runtime


def _done_enough(futures: list[Future], n: int) -> bool:
    return sum(1 for f in futures if f._state != STATE_PENDING) >= n


@contextlib.contextmanager
def _notified(futures: list[Future]) -> Iterator[threading.Event]:
    """An event set whenever one of ``futures`` completes, while the block runs (the callbacks come off after)."""
    event = threading.Event()

    def on_done(_: Future) -> None:
        event.set()

    for f in futures:
        f.add_done_callback(on_done)
    try:
        yield event
    finally:
        for f in futures:
            if f._state == STATE_PENDING:
                f._remove_done_callback(on_done)


def _ray_wait(futures: list[Future], n: int, timeout: float | None) -> bool:
    """Wait until ``n`` of ``futures`` are done, blocked in ``ray.wait`` so that Ray lends this task's CPU out.

    It waits on the Ray references of every task of this worker's runtime still running (the
    futures' own, and the inputs of those held for them), a slice at a time: a retry or a launch
    gives a task a new reference. False on timeout.
    """
    import ray

    rt = _runtime
    assert rt is not None
    rep = rt.backend._reporter  # type: ignore[attr-defined]
    deadline = None if timeout is None else time.monotonic() + timeout
    delivered: set = set()  # references Ray says are ready: their futures complete on the reporter thread
    with _notified(futures) as event:
        while not _done_enough(futures, n):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            refs = [h for t in list(rt._tasks.values()) if (h := rep.handle(t)) is not None and h not in delivered]
            step = _RAY_WAIT_SLICE_S if left is None else min(left, _RAY_WAIT_SLICE_S)
            if refs:
                ready, _ = ray.wait(refs, num_returns=1, timeout=step, fetch_local=False)
                delivered.update(ready)
            else:
                event.wait(min(step, _SETTLE_S))
                event.clear()
        return True


def _dask_wait(futures: list[Future], n: int, timeout: float | None) -> bool:
    """Wait until ``n`` of ``futures`` are done, out of the Dask worker's thread pool meanwhile.

    ``distributed.secede()`` lets the worker run another task (this task's children) on a new
    thread while this one waits; ``distributed.rejoin()`` waits for a free slot before the task
    goes on, so the worker never runs more tasks at once than it has threads. False on timeout.
    """
    import distributed

    if _done_enough(futures, n):
        return True
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        distributed.secede()
        seceded = True
    except (KeyError, ValueError, AttributeError):  # a thread the body started itself: not a worker task thread
        seceded = False
    try:
        with _notified(futures) as event:
            while not _done_enough(futures, n):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                event.wait(left)
                event.clear()
            return True
    finally:
        if seceded:
            distributed.rejoin()


session.add_task_runtime(task_runtime)  # session.current() in a task on Dask or Ray: that cluster's runtime
