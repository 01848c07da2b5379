"""Recording where the driver waited: each ``get``/``wait``/``as_completed``/``await`` that blocked.

The trace's driver lane and the Blocking findings need the span and the user's line that
waited (``file:line``, the first frame outside eugo_lab), so a finding can say "the get()
at cell line 4". Shared by the module-level calls (:mod:`eugo_lab.hpc.api`) and
``await future`` (:mod:`eugo_lab.hpc.future`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eugo_lab.contract import waits as _waits

if TYPE_CHECKING:
    from eugo_lab.hpc.session import Runtime

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _no_runtime() -> Runtime | None:
    return None


#: The active runtime, if any (never starting one): the session installs its own ``current`` when it is
#: imported, so a future records its waits without importing the session, which imports the futures.
active_runtime: Callable[[], Runtime | None] = _no_runtime

#: Inside a task on a Dask or Ray worker (``eugo_lab.hpc.engine_nested``): how the task waits on futures,
#: ``(futures, how many, timeout) -> done in time``, giving its engine slot back meanwhile (a task blocked on
#: an event would hold its slot, and a recursion deeper than the slots would deadlock). ``None`` elsewhere.
engine_wait: Callable[[list[Any], int, float | None], bool] | None = None


def waiter() -> Callable[[list[Any], int, float | None], bool] | None:
    """How this thread waits on futures if not by blocking, else ``None``.

    A Dask or Ray task's wait (:data:`engine_wait`), or a threads-engine task thread's (``eugo_lab.contract.waits``).
    """
    return engine_wait or getattr(_waits.local, "wait", None)


def caller_source() -> str:
    """``file:line`` of the user's code that called into ``hpc`` (the first frame outside eugo_lab)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back  # type: ignore[assignment]
    if f is None:
        return "?"
    return f"{f.f_code.co_filename}:{f.f_lineno}"


#: A loop of ``done()`` calls on one future that lasted at least this long is a wait (as_completed's
#: threshold: a shorter one found the future done, or nearly, and held nothing up).
POLL_MIN_S = 1e-4

# The future a loop of done() calls is on: its task, when done() first said pending, and the recording
# (its epoch) it belongs to. Any other call that waits or takes ends the streak: the driver turned away.
_poll: list[Any] = [-1, 0.0, None]


def record_block(rt: Runtime | None, kind: str, start: float, n: int, task: int = -1) -> None:
    """Record that the driver waited from ``start`` until now on ``n`` futures, if a trace is open.

    ``task``: the task of the one future the call waited on or took (-1: several).
    """
    if rt is not None and rt.recorder.active:
        _poll[0] = -1
        rt.recorder.record_block(kind, start, time.time(), n, caller_source(), task)


def record_wait(kind: str, start: float, n: int, task: int = -1) -> None:
    """:func:`record_block` on the active runtime (what a future's ``result()`` and ``await`` record)."""
    record_block(active_runtime(), kind, start, n, task)


def polled(task: int, finished: bool) -> None:
    """A ``done()`` on task ``task``'s future said ``finished``; record a loop that polled it until it was done.

    ``while not f.done(): ...`` blocks the driver on that one future as ``get(f)`` would, without a
    call that waits: the calls in a row on one future, from the first that said pending to the one
    that said done, are recorded as a ``done`` wait on it (at least :data:`POLL_MIN_S`). A loop that
    polls several futures in turn waits on none of them in particular: each call on another future
    starts over, so it records nothing. Costs a few comparisons per call (and one clock read when the
    future changes); nothing more when no trace is open.
    """
    rt = active_runtime()
    if rt is None or not rt.recorder.active:
        return
    epoch = rt.recorder.epoch
    if not finished:
        if _poll[0] != task or _poll[2] is not epoch:
            _poll[0], _poll[1], _poll[2] = task, time.time(), epoch
        return
    if _poll[0] == task and _poll[2] is epoch:
        since = _poll[1]
        _poll[0] = -1
        if time.time() - since >= POLL_MIN_S:
            record_block(rt, "done", since, 1, task)


def check_timeout(timeout: Any, call: str) -> None:
    """``None`` or a number of seconds >= 0; anything else is refused before waiting starts."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"{call}: timeout must be None (wait as long as it takes) or a number of seconds "
                         f">= 0, got {timeout!r}")
