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

if TYPE_CHECKING:
    from eugo_lab.hpc.session import Runtime

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _no_runtime() -> Runtime | None:
    return None


#: The active runtime, if any (never starting one): the session installs its own ``current`` when it is
#: imported, so a future records its waits without importing the session, which imports the futures.
active_runtime: Callable[[], Runtime | None] = _no_runtime


def caller_source() -> str:
    """``file:line`` of the user's code that called into ``hpc`` (the first frame outside eugo_lab)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back  # type: ignore[assignment]
    if f is None:
        return "?"
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def record_block(rt: Runtime | None, kind: str, start: float, n: int) -> None:
    """Record that the driver waited from ``start`` until now on ``n`` futures, if a trace is open."""
    if rt is not None and rt.recorder.active:
        rt.recorder.record_block(kind, start, time.time(), n, caller_source())


def record_wait(kind: str, start: float, n: int) -> None:
    """:func:`record_block` on the active runtime (what a future's ``result()`` and ``await`` record)."""
    record_block(active_runtime(), kind, start, n)


def check_timeout(timeout: Any, call: str) -> None:
    """``None`` or a number of seconds >= 0; anything else is refused before waiting starts."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"{call}: timeout must be None (wait as long as it takes) or a number of seconds "
                         f">= 0, got {timeout!r}")
