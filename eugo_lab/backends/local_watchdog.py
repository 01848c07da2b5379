"""Stopping a running task of the local pool: cancels, memory limits, and the kills past their grace.

A cancelled task is asked to stop (its id on the worker's cancel pipe, then SIGUSR1 raises
``TaskCancelled`` in it); one still running after the grace, or a worker whose resident memory
passed its task's limit, is killed, and :mod:`~eugo_lab.backends.local_recovery` handles the
death like any other. The pool's I/O thread calls these between two ``select`` calls, whose
timeout :func:`poll_interval` chooses.
"""

from __future__ import annotations

import os
import signal
import time

from eugo_lab.backends.local_process import Worker
from eugo_lab.backends.local_wire import TASK_ID
from eugo_lab.contract.outcome import Crash
from eugo_lab.contract.task import Task

# How long a cancelled running task may take to stop (after TaskCancelled is raised in it)
# before its worker is killed; the default of hpc.init(cancel_grace=...).
CANCEL_GRACE_SECONDS = 1.0
# How often the resident memory of workers running memory-limited tasks is read.
MEMORY_POLL_SECONDS = 0.05


def memory_limit_of(task: Task, default: int | None) -> int | None:
    """The resident memory ``task`` may use, in bytes: its own ``memory=``, else the pool's (``None``: no limit)."""
    return task.options.memory or default


def poll_interval(workers: list[Worker], stopping: bool, default_limit: int | None) -> float:
    """How long the I/O thread may sleep in ``select``: short while a kill may be due, else a second."""
    if stopping or any(w.cancel_target is not None for w in workers):
        return 0.05
    # Poll memory often while a limited task runs: a task allocating 1 GB/s overshoots
    # its limit by at most ~MEMORY_POLL_SECONDS worth of growth before it is stopped.
    for w in workers:
        if w.inflight and not w.dead and memory_limit_of(w.inflight[0], default_limit):
            return MEMORY_POLL_SECONDS
    return 1.0


def ask_to_stop(w: Worker, task: Task, grace: float) -> None:
    """Tell the live worker ``w`` to drop ``task``; if it runs it, kill the worker should it outlast ``grace``."""
    # Tell the worker which task to drop (it skips a prefetched one, and a running
    # one gets TaskCancelled raised inside it), then wake it with SIGUSR1. A task
    # that does not stop within the grace (C code holding the GIL, a task that
    # swallows the exception) loses its worker: see kill_overdue_cancels.
    try:
        os.write(w.cancel_w, TASK_ID.pack(task.task_id))
        os.kill(w.pid, signal.SIGUSR1)
    except (OSError, ProcessLookupError):
        pass
    if w.inflight and w.inflight[0] is task:
        w.cancel_target = task
        w.cancel_deadline = time.monotonic() + grace


def kill_overdue_cancels(workers: list[Worker]) -> None:
    """Kill workers whose cancelled task is still running after the grace period."""
    now = time.monotonic()
    for w in workers:
        target = w.cancel_target
        if target is None or w.dead:
            continue
        if not w.inflight or w.inflight[0] is not target:
            w.cancel_target = None  # it stopped in time
        elif now >= w.cancel_deadline:
            w.cancel_target = None
            w.kill_reason = "cancel"
            try:
                os.kill(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def kill_over_memory(workers: list[Worker], default_limit: int | None) -> None:
    """Kill a worker whose resident memory passed its running task's limit (the crash names the limit)."""
    for w in workers:
        if w.dead or not w.inflight or w.kill_reason is not None:
            continue
        limit = memory_limit_of(w.inflight[0], default_limit)
        if not limit:
            continue
        import psutil  # only pools running memory-limited tasks pay for importing it (~6 ms)

        try:
            if w.ps is None:
                w.ps = psutil.Process(w.pid)
            rss = w.ps.memory_info().rss
        except psutil.Error:
            continue
        if rss > limit:
            w.kill_reason = Crash.memory(rss, limit, exit_code=-int(signal.SIGKILL))
            try:
                os.kill(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
