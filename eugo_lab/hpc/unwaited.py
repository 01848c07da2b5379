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

from eugo_lab.hpc.future import Future

if TYPE_CHECKING:
    from eugo_lab.hpc.session import Runtime
    from eugo_lab.hpc.task import Task

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


def unfinished_since(rt: Runtime, t0: float) -> list[Task]:
    """Tasks (and ``hpc.map`` batches) submitted at or after ``t0`` that have not finished."""
    return [t for t in list(rt._tasks.values()) if t.submit_time >= t0]


def settle(rt: Runtime, tasks: list[Task], timeout: float) -> list[Task]:
    """Wait up to ``timeout`` seconds for ``tasks`` to finish; return those still unfinished."""
    deadline = time.monotonic() + timeout
    left = [t for t in tasks if t.task_id in rt._tasks]
    while left and time.monotonic() < deadline:
        time.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0.0)))
        left = [t for t in left if t.task_id in rt._tasks]
    return left


def _items(t: Task) -> int:
    return len(t.items) if t.items is not None else 1


def _name(t: Task) -> str:
    return t.future.function if t.future is not None else (t.options.name or t.fn.name)


def describe(unwaited: list[Task], running: list[Task]) -> dict[str, Any]:
    """The trace's ``meta`` entries: what the block never waited on, and what still ran at the close.

    ``unwaited_tasks``: tasks (map items) unfinished when the block's code ended;
    ``unwaited_ids``: the first of their future's task ids (single tasks only);
    ``running_at_end``: function name -> tasks (map items) still unfinished when the trace closed;
    ``unwaited_ref``: where :func:`future_names` finds their futures.
    Empty when the block waited for everything it submitted.
    """
    if not unwaited:
        return {}
    by_fn: dict[str, int] = {}
    for t in running:
        by_fn[_name(t)] = by_fn.get(_name(t), 0) + _items(t)
    key = next(_keys)
    _futures[key] = [weakref.ref(t.future) for t in unwaited if t.future is not None][:_MAX_IDS]
    while len(_futures) > _KEEP:
        _futures.pop(next(iter(_futures)))
    ids = [t.task_id for t in unwaited if t.items is None][:_MAX_IDS]
    return {"unwaited_tasks": sum(_items(t) for t in unwaited), "unwaited_ids": ids,
            "running_at_end": dict(sorted(by_fn.items())), "unwaited_ref": key}


def future_names(namespace: dict[str, Any] | None, meta: dict[str, Any]) -> list[str]:
    """The user's variables holding a future (or a list/tuple of them) the traced block never waited on.

    ``meta`` is the trace's (see :func:`describe`). The futures are matched by identity
    (weak references kept for the last few traces): a variable left from an earlier runtime
    may hold a future with the same task id.
    """
    refs = _futures.get(meta.get("unwaited_ref", -1), ())
    mine = {id(f): f for f in (r() for r in refs) if f is not None}
    if not namespace or not mine:
        return []

    def ours(v: Any) -> bool:
        return type(v) is Future and mine.get(id(v)) is v

    names = []
    for name, value in list(namespace.items()):
        if name.startswith("_"):
            continue  # IPython's output history (_, _1, ...)
        if ours(value) or (type(value) in (list, tuple) and any(ours(v) for v in value)):
            names.append(name)
    return sorted(names)
