"""Threads in this process: no pickling of code, no start-up cost; for I/O-bound work and demos.

CPython runs Python bytecode on one thread at a time (the GIL), so threads run side by side only
where tasks release it: I/O, sleep, NumPy on large arrays, compiled code. Pure-Python tasks on
several threads take turns, and the analysis (:mod:`eugo_lab.analysis.gil`) counts their turns
waiting as neither work nor I/O.

Arguments are still pickled and unpickled (``execute`` does it) so a task never shares
mutable state with the caller, exactly as on the process-based engines.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
import time
from typing import Any

import psutil

from eugo_lab.backends._worker import execute, execute_batch
from eugo_lab.contract import base, outcome, waits
from eugo_lab.contract.outcome import Outcome
from eugo_lab.contract.refs import ObjectRef, describe_type
from eugo_lab.contract.serialization import loads_value
from eugo_lab.contract.task import TASK_STATE_NEW, Task

# How often a task thread waiting on children that run on other threads looks again.
_HELP_POLL_S = 0.002
# A task's state here: new (queued in the executor) or ended (ran, or cancelled: on_done was called once).
_ENDED = 1


class ThreadBackend(base.Backend):
    """``workers`` threads (default: usable cores) in the driver process.

    A task runs on one thread: ``cpus=`` above 1, ``memory=``, ``gpus=`` and ``resources=``
    are refused at submission (``ResourceRequestError``), since no thread can be given them;
    ``cpus=`` of 1 or less takes one thread.
    """

    name = "threads"

    def __init__(self, workers: int | None = None):
        from eugo_lab.backends.local_process import usable_cores

        self.n_workers = workers or usable_cores()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._objects: dict[int, Any] = {}
        self._index = threading.local()
        self._counter = 0
        self._lock = threading.Lock()
        self._stopped = False
        # Tasks handed to the pool and not started yet, by task id: [task, its pool future, on_done]. A task
        # thread waiting on its children runs those of them still here itself (see _help_wait).
        self._queued: dict[int, list] = {}

    def start(self) -> None:
        """Create the thread pool."""
        self._pool = concurrent.futures.ThreadPoolExecutor(self.n_workers, thread_name_prefix="eugo-thread",
                                                           initializer=self._name_thread)

    def _name_thread(self) -> None:
        with self._lock:
            self._index.value = self._counter
            self._counter += 1
        waits.local.wait = self._help_wait  # a task here that waits on futures runs its queued children itself

    def _help_wait(self, futures: list[Any], n: int, timeout: float | None) -> bool:
        """Wait on a task thread until ``n`` of ``futures`` are done, running those still queued here meanwhile.

        A task blocked on its children would hold this thread: with every thread a parent waiting, no child
        could start. So the waiting thread takes each child that has not started yet out of the queue and
        runs it on its own stack (a child that waits in turn does the same), and only sleeps while the ones
        left run on other threads. Only the waited-for tasks are taken, so the stack holds the task's own
        descendants and nothing else. True if ``n`` finished in time.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while sum(1 for f in futures if f.done()) < n:
            for f in futures:
                entry = None if f.done() else self._queued.pop(f.task_id, None)
                if entry is not None and entry[1] is not None and entry[1].cancel():
                    self._run(entry[0], entry[2])
                    break
            else:  # none of them queued here: they run on other threads
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(_HELP_POLL_S)
        return True

    def submit(self, task: Task, on_done: base.DoneCallback) -> None:
        """Run the task on a pool thread."""
        if self._pool is None or self._stopped:
            from eugo_lab.contract.errors import BackendError

            raise BackendError("the thread pool is shut down; call hpc.init() to start a new one")
        opts = task.options
        if opts.gpus or opts.resources or opts.cpus > 1 or opts.memory:
            from eugo_lab.backends._cluster import refuse_options

            refuse_options(task, "threads", self.n_workers)
        task.state = TASK_STATE_NEW
        entry: list = [task, None, on_done]
        self._queued[task.task_id] = entry  # before the pool may start it: _run takes it out
        entry[1] = self._pool.submit(self._run, task, on_done)
        task.backend_data = (entry[1], on_done)

    def _run(self, task: Task, on_done: base.DoneCallback) -> None:
        queued = self._queued.get(task.task_id)
        if queued is not None and queued[0] is task:
            del self._queued[task.task_id]
        if task.state == _ENDED:  # cancelled while queued
            return
        deps = task.deps_payload

        def load_token(token: tuple) -> Any:
            if token[0] == "fut":
                return loads_value(deps[token[1]])  # type: ignore[index]
            return self._objects[token[1]]

        run = execute_batch if task.is_batch else execute
        status, payload, detail, stats = run(task.fn.fn, task.fn.name, task.args, load_token, time.thread_time,
                                             None, task.probe)
        if task.state != _ENDED:
            task.state = _ENDED
            worker = getattr(self._index, "value", 0)
            on_done(task, outcome.from_worker(status, payload, detail, stats, worker, task.is_batch))

    def cancel(self, task: Task) -> None:
        """Queued tasks are dropped; a running thread cannot be stopped, its late result is ignored."""
        if task.state == _ENDED or task.backend_data is None:
            return
        task.state = _ENDED
        fut, on_done = task.backend_data
        self._queued.pop(task.task_id, None)
        fut.cancel()
        on_done(task, Outcome.cancelled())

    def put(self, obj: Any) -> ObjectRef:
        """Keep ``obj`` in this process; tasks receive the same object."""
        ref = ObjectRef(None, 0, describe_type(obj))
        ref.location = ref.ref_id
        self._objects[ref.ref_id] = obj
        rid = ref.ref_id
        ref._release = lambda: self._objects.pop(rid, None)
        return ref

    def get_object(self, ref: ObjectRef) -> Any:
        """The stored object itself."""
        return self._objects[ref.ref_id]

    def shutdown(self) -> None:
        """Stop accepting work; running threads finish in the background."""
        self._stopped = True
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def info(self) -> base.ClusterInfo:
        """Threads of this process."""
        from eugo_lab.backends._cluster import this_cpu
        from eugo_lab.backends.local_process import usable_cores

        return base.ClusterInfo(backend="threads", workers=self.n_workers, cores=usable_cores(),
                                memory=psutil.virtual_memory().total, address="this process", cpu=this_cpu())

    def workers(self) -> list[base.WorkerInfo]:
        """One entry per thread."""
        return [base.WorkerInfo(i, socket.gethostname(), os.getpid()) for i in range(self.n_workers)]

    @property
    def worker_count(self) -> int:
        """Threads that can run at once."""
        return self.n_workers
