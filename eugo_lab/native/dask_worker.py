"""The worker half of recording a Dask cell: a ``WorkerPlugin`` that logs each task it ran.

It reads what the worker itself records for a task when the task leaves ``executing``:
the ``compute`` start/stop (``TaskState.startstops``), the result's size as Dask measures it
(``TaskState.nbytes``, ``dask.sizeof``), the thread that ran it (``Worker.threads``) and the
keys it depended on; the ``transfer`` spans of the dependencies it fetched from other workers, and their bytes.

CPU time: Dask meters every task's ``thread-cpu`` seconds (its fine performance metrics) but
files them under the task's prefix, not its key. The worker finalizes a task's metrics
synchronously right after the task's own ``executing -> memory`` transition and before any
other task can leave ``executing``, so the cumulative ``thread-cpu`` counter read at the next
such transition (or when the log is collected) minus its value at this one is exactly this
task's share. Failed tasks have no ``thread-cpu`` metric (Dask books them as "failed"): NaN.

Run-queue wait (Linux): the seconds the task's thread was ready to compute but waited for a
core, from ``/proc/self/task/<tid>/schedstat``, as the runtime's own workers measure it
(:mod:`eugo_lab.contract.run_queue`), so a CPU-bound task on busy cores is not read as waiting
for I/O. The thread that will run a task is not known when it starts executing, so every thread
of the worker's executor is read then and the one that ran it is read again at its end (a
thread runs one task at a time). Elsewhere, or for another executor: NaN, "not measured".

This module imports only ``distributed``, ``os`` and ``socket``: workers unpickle the plugin.
"""

from __future__ import annotations

import math
import os
import socket
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

PLUGIN_NAME = "eugo-lab-task-log"
_RUNQ_SUPPORTED = os.path.exists("/proc/self/task")
# Transitions out of "executing" that end a task attempt on this worker, and what each means.
_DONE = {"memory": "ok", "error": "error"}


def _thread_cpu_total(worker: Any) -> float:
    """The worker's cumulative ``thread-cpu`` seconds of executed tasks, all prefixes and spans together."""
    total = 0.0
    for label, value in list(worker.digests_total.items()):
        if isinstance(label, tuple) and len(label) == 5 and label[0] == "execute" and label[3] == "thread-cpu":
            total += value
    return total


def _runq_ns(fds: dict[int, int], native_id: int) -> int | None:
    """Nanoseconds thread ``native_id`` of this process has waited on a run queue (None: not readable here).

    ``fds`` keeps each thread's file open: re-reading it with ``pread`` costs ~2 us, opening it ~25 us
    (the kernel formats fresh values on every read).
    """
    try:
        fd = fds.get(native_id)
        if fd is None:
            fd = fds[native_id] = os.open(f"/proc/self/task/{native_id}/schedstat", os.O_RDONLY)
        return int(os.pread(fd, 128, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _close_all(fds: dict[int, int]) -> None:
    for fd in fds.values():
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()


def _executor_threads(worker: Any) -> dict[int, int]:
    """``{ident: native_id}`` of the threads of the worker's default executor (empty when it has no such set)."""
    threads = getattr(worker.executors.get("default"), "_threads", ())
    return {t.ident: t.native_id for t in list(threads) if t.ident is not None and t.native_id is not None}


class TaskLog(WorkerPlugin):
    """Logs every task attempt (and the transfers it waited for) on one worker until :meth:`take` is called."""

    name = PLUGIN_NAME
    idempotent = False

    def __init__(self) -> None:
        self.worker: Any = None
        self.tasks: list[dict[str, Any]] = []
        self._fetched: dict[Any, int] = {}  # keys fetched from another worker -> their bytes
        self._runq_at: dict[Any, dict[int, int | None]] = {}  # executing key -> each thread's run-queue ns then
        self._runq = _RUNQ_SUPPORTED
        self._fds: dict[int, int] = {}  # native thread id -> its open schedstat file
        self._pending: dict[str, Any] | None = None  # the last finished task, its CPU not yet settled
        self._cpu_mark = 0.0

    def setup(self, worker: Any) -> None:
        """Remember the worker (Dask calls this when the plugin is registered)."""
        self.worker = worker
        self._cpu_mark = _thread_cpu_total(worker)

    def _settle(self) -> None:
        """Give the pending task the ``thread-cpu`` seconds booked since its transition."""
        now = _thread_cpu_total(self.worker)
        if self._pending is not None and self._pending["status"] == "ok":
            self._pending["cpu"] = max(now - self._cpu_mark, 0.0)
        self._pending = None
        self._cpu_mark = now

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        """Log a task leaving ``executing`` and a dependency arriving by transfer (called on the worker's loop)."""
        if self.worker is None:
            return
        if finish == "executing" and self._runq:
            threads = _executor_threads(self.worker)
            self._runq_at[key] = {ident: (nid, _runq_ns(self._fds, nid)) for ident, nid in threads.items()}
        elif start == "executing" and finish in _DONE:
            self._settle()
            ts = self.worker.state.tasks.get(key)
            if ts is None:
                return
            compute = [s for s in ts.startstops if s.get("action") == "compute"]
            # Dask shifts these stamps by its estimate of the scheduler's clock offset (scheduler_delay,
            # from heartbeats: tens of ms on a busy machine); the trace wants this machine's own clock.
            shift = float(getattr(self.worker, "scheduler_delay", 0.0) or 0.0)
            row = {"key": str(key), "status": _DONE[finish], "cpu": math.nan,
                   "start": compute[-1]["start"] - shift if compute else math.nan,
                   "stop": compute[-1]["stop"] - shift if compute else math.nan,
                   "nbytes": int(ts.nbytes or 0) if finish == "memory" else 0,
                   "thread": int(self.worker.threads.get(key, 0) or 0),
                   "deps": [str(d.key) for d in ts.dependencies],
                   # dependencies fetched from other workers for this task: when, from whom, how many bytes
                   "transfers": [{"source": str(s.get("source", "")), "start": s["start"] - shift,
                                  "stop": s["stop"] - shift}
                                 for s in ts.startstops if s.get("action") == "transfer"],
                   "fetched": sum(self._fetched.get(d.key, 0) for d in ts.dependencies)}
            row["runq"] = self._runq_of(key, row["thread"])
            self.tasks.append(row)
            self._pending = row
        elif start == "flight" and finish == "memory":
            ts = self.worker.state.tasks.get(key)
            if ts is not None:  # the transfer's span lands on the startstops of the task that needed it
                self._fetched[key] = int(ts.nbytes or 0)

    def teardown(self, worker: Any) -> None:
        """Close the schedstat files (Dask calls this when the plugin is removed or the worker closes)."""
        _close_all(self._fds)

    def _runq_of(self, key: Any, thread: int) -> float:
        """Seconds the thread that ran ``key`` waited for a core while it did (NaN: not measured)."""
        native, before = self._runq_at.pop(key, {}).get(thread, (None, None))
        after = _runq_ns(self._fds, native) if native is not None and before is not None else None
        return (after - before) / 1e9 if after is not None and before is not None and after >= before else math.nan

    def take(self) -> dict[str, Any]:
        """Everything logged so far (the log is emptied), with who this worker is."""
        self._settle()
        tasks, self.tasks = self.tasks, []
        self._fetched.clear()
        self._runq_at.clear()
        _close_all(self._fds)
        return {"address": self.worker.address, "host": socket.gethostname(), "pid": os.getpid(),
                "nthreads": int(self.worker.state.nthreads), "tasks": tasks}


def take_log(dask_worker: Any) -> dict[str, Any] | None:
    """``client.run`` target: this worker's log, or None when the plugin is not on it (a worker that joined late)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return plugin.take() if plugin is not None else None
