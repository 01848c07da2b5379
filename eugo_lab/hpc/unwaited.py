"""Tasks a traced block submitted but never waited on: found, briefly awaited, and described.

``f = estimate_pi.remote(42)`` with no ``hpc.get`` ends the block while the task still runs.
Closing the trace at once would leave it out: "0 tasks". So, when the block ends normally,
the trace waits up to ``settle`` seconds (``hpc.trace(settle=...)``, :data:`SETTLE_S` by
default) for such tasks, without recording that wait as the driver blocking, then closes
with what is still running counted in ``meta``. Fire-and-forget stays what it is in Dask
and Ray: nothing is cancelled, and a task still running after the grace keeps running;
its future gives the result later.
"""

from __future__ import annotations

import itertools
import time
import weakref
from typing import TYPE_CHECKING, Any

from eugo_lab.hpc.future import STATE_CANCELLED, Future
from eugo_lab.hpc.mapping import MapResult

if TYPE_CHECKING:
    from eugo_lab.hpc.pending import Pending
    from eugo_lab.hpc.session import Runtime

# Long enough for the short tasks of a lesson cell to come back (a Monte Carlo estimate, a
# file read), short enough that a cell submitting long fire-and-forget work is barely held.
SETTLE_S = 1.0
# How often the grace wait looks at what is left: a result landing just after a look
# stretches the trace by at most this much.
_POLL_S = 0.002
# Task ids kept in the trace's meta for naming the futures to get (a summary shows a few).
_MAX_IDS = 20
# Weak references to the unwaited futures of the last few traces, for naming their variables.
_KEEP = 8
_futures: dict[int, list[weakref.ref]] = {}
_keys = itertools.count(1)


def unfinished_since(rt: Runtime, t0: float) -> list[Pending]:
    """Tasks (and ``hpc.map`` batches) submitted at or after ``t0`` that have not finished and were not cancelled.

    A cancelled task stays in the runtime's table until its worker confirms the stop, but it was not left
    unwaited: ``get()`` cancels what it was waiting on when an Interrupt lands in it, and its result is gone.
    """
    return [t for t in list(rt._tasks.values()) if t.submit_time >= t0 and not _cancelled(t)]


def _cancelled(t: Pending) -> bool:
    """Whether the task's future (an ``hpc.map`` batch: the batch) was cancelled."""
    holder = t.items if t.items is not None else t.future
    return holder is not None and holder._state == STATE_CANCELLED


def settle(rt: Runtime, t0: float, timeout: float) -> list[Pending]:
    """Wait up to ``timeout`` seconds for the tasks submitted since ``t0``; return those still unfinished.

    Looked up again at every poll: an ``hpc.map`` sends its next batches as earlier ones come back.
    """
    deadline = time.monotonic() + timeout
    left = unfinished_since(rt, t0)
    while left and time.monotonic() < deadline:
        time.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0.0)))
        left = unfinished_since(rt, t0)
    return left


def _count(tasks: list[Pending]) -> int:
    """Tasks, counting an ``hpc.map`` by its items not finished yet (also those not sent yet)."""
    n, jobs = 0, {}
    for t in tasks:
        if t.items is None:
            n += 1
        else:
            jobs[id(t.items.job)] = t.items.job
    return n + sum(max(j.n - j.done, 0) for j in jobs.values())


def _name(t: Pending) -> str:
    return t.future.function if t.future is not None else (t.options.name or t.fn.name)


def snapshot(unwaited: list[Pending]) -> dict[str, Any]:
    """What the block never waited on, taken when its code ended (before :func:`settle`): ``meta`` entries.

    ``unwaited_tasks``: tasks (map items, also those not sent yet) unfinished then;
    ``unwaited_ids``: the first of their futures' task ids (single tasks only);
    ``unwaited_ref``: where :func:`future_names` finds their futures. Empty when it waited for all.
    """
    if not unwaited:
        return {}
    key = next(_keys)
    jobs = {id(t.items.job): t.items.job for t in unwaited if t.items is not None}
    _futures[key] = ([weakref.ref(t.future) for t in unwaited if t.future is not None][:_MAX_IDS]
                     + [weakref.ref(j) for j in jobs.values()])
    while len(_futures) > _KEEP:
        _futures.pop(next(iter(_futures)))
    ids = [t.task_id for t in unwaited if t.items is None][:_MAX_IDS]
    return {"unwaited_tasks": _count(unwaited), "unwaited_ids": ids, "unwaited_ref": key}


def describe(before: dict[str, Any], running: list[Pending]) -> dict[str, Any]:
    """``before`` (from :func:`snapshot`) plus ``running_at_end``, as the trace closes.

    ``running_at_end``: function name -> tasks (map items) still unfinished when the trace closed.
    """
    if not before:
        return {}
    by_fn: dict[str, list[Pending]] = {}
    for t in running:
        by_fn.setdefault(_name(t), []).append(t)
    return {**before, "running_at_end": {name: _count(ts) for name, ts in sorted(by_fn.items())}}


def future_names(namespace: dict[str, Any] | None, meta: dict[str, Any]) -> list[str]:
    """The user's variables holding a future (a list/tuple of them, an ``hpc.map`` result) never waited on.

    ``meta`` is the trace's (see :func:`describe`). The futures are matched by identity
    (weak references kept for the last few traces): a variable left from an earlier runtime
    may hold a future with the same task id.
    """
    refs = _futures.get(meta.get("unwaited_ref", -1), ())
    mine = {id(f): f for f in (r() for r in refs) if f is not None}
    if not namespace or not mine:
        return []

    def ours(v: Any) -> bool:
        if type(v) is MapResult:
            v = v._job
        elif type(v) is not Future:
            return False
        return mine.get(id(v)) is v

    names = []
    for name, value in list(namespace.items()):
        if name.startswith("_"):
            continue  # IPython's output history (_, _1, ...)
        if ours(value) or (type(value) in (list, tuple) and any(ours(v) for v in value)):
            names.append(name)
    return sorted(names)
