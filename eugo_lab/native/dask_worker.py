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

This module imports only ``distributed``, ``os`` and ``socket``: workers unpickle the plugin.
"""

from __future__ import annotations

import math
import os
import socket
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

PLUGIN_NAME = "eugo-lab-task-log"
# Transitions out of "executing" that end a task attempt on this worker, and what each means.
_DONE = {"memory": "ok", "error": "error"}


def _thread_cpu_total(worker: Any) -> float:
    """The worker's cumulative ``thread-cpu`` seconds of executed tasks, all prefixes and spans together."""
    total = 0.0
    for label, value in list(worker.digests_total.items()):
        if isinstance(label, tuple) and len(label) == 5 and label[0] == "execute" and label[3] == "thread-cpu":
            total += value
    return total


class TaskLog(WorkerPlugin):
    """Logs every task attempt (and the transfers it waited for) on one worker until :meth:`take` is called."""

    name = PLUGIN_NAME
    idempotent = False

    def __init__(self) -> None:
        self.worker: Any = None
        self.tasks: list[dict[str, Any]] = []
        self._fetched: dict[Any, int] = {}  # keys fetched from another worker -> their bytes
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
        if start == "executing" and finish in _DONE:
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
            self.tasks.append(row)
            self._pending = row
        elif start == "flight" and finish == "memory":
            ts = self.worker.state.tasks.get(key)
            if ts is not None:  # the transfer's span lands on the startstops of the task that needed it
                self._fetched[key] = int(ts.nbytes or 0)

    def take(self) -> dict[str, Any]:
        """Everything logged so far (the log is emptied), with who this worker is."""
        self._settle()
        tasks, self.tasks = self.tasks, []
        self._fetched.clear()
        return {"address": self.worker.address, "host": socket.gethostname(), "pid": os.getpid(),
                "nthreads": int(self.worker.state.nthreads), "tasks": tasks}


def take_log(dask_worker: Any) -> dict[str, Any] | None:
    """``client.run`` target: this worker's log, or None when the plugin is not on it (a worker that joined late)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return plugin.take() if plugin is not None else None
