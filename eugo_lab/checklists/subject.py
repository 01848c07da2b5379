"""What a checklist measures: the learner's function and arguments, a trace, and the running runtime.

:class:`Subject` checks its inputs once (a clear :class:`ChecklistError` for a value that is
not a function, a trace that is not one) and caches what several items read: one local
call of the function (its time, CPU time and result, or the exception it raised), the
trace's analysis, and the runtime's per-task overhead measured by round trips of an empty task.
"""

from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass
from typing import Any

from eugo_lab.checklists.model import ChecklistError

# One local call is timed alone when it takes at least this long; a faster function is called
# again until about TIME_BUDGET_S has passed (at most MAX_CALLS times) and the median is kept,
# because a single call of microseconds is mostly the clock and the first call's cache misses.
SINGLE_CALL_S = 0.05
TIME_BUDGET_S = 0.2
MAX_CALLS = 200
# Round trips of an empty task to measure the runtime's scheduling overhead: the first warms the
# worker (it imports this package), the median of the rest is what each further task pays.
OVERHEAD_PROBES = 15


@dataclass(frozen=True)
class Call:
    """One timed local call: median seconds and CPU seconds per call, the result, or the exception raised.

    ``queued``: seconds per call this thread was ready to run but waited for a core (other
    programs had it); not waiting on I/O, so :attr:`cpu_share` leaves it out.
    """

    seconds: float
    cpu: float
    calls: int
    result: Any = None
    error: BaseException | None = None
    queued: float = 0.0

    @property
    def cpu_share(self) -> float:
        """CPU time over the time the call could run (wall time less waiting for a busy core)."""
        could_run = self.seconds - self.queued
        return self.cpu / could_run if could_run > 0 else 1.0


def _run_queue_wait() -> float:
    """Seconds this thread has spent runnable but waiting for a core (Linux schedstat; 0 elsewhere).

    On a shared machine a busy loop can get half a core: its CPU share then looks like
    waiting on I/O unless the time spent queued for a core is taken out.
    """
    try:
        with open("/proc/thread-self/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def describe_call(fn: Any, args: tuple, kwargs: dict) -> str:
    """``name(3, size=10)`` with argument reprs cut short, for evidence sentences."""
    name = getattr(fn, "function_name", None) or getattr(fn, "__name__", None) or type(fn).__name__

    def short(v: Any) -> str:
        r = repr(v)
        return r if len(r) <= 20 else f"<{type(v).__name__}>"

    parts = [short(a) for a in args] + [f"{k}={short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


class Subject:
    """The inputs of one :func:`~eugo_lab.checklists.measure` call, with the measurements items share."""

    def __init__(self, fn: Any = None, args: Any = (), kwargs: Any = None, trace: Any = None,
                 deadline: float | None = None, price: float | None = None):
        if fn is not None and not callable(fn):
            raise ChecklistError(f"fn= must be the function to measure (a def or an @hpc.remote function), got "
                                 f"{type(fn).__name__} {_short(fn)}; pass the function itself, not its result")
        if not isinstance(args, (tuple, list)):
            raise ChecklistError(f"args= is the tuple of positional arguments for one call, got "
                                 f"{type(args).__name__}; for one argument write args=(x,)")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ChecklistError(f"kwargs= is a dict of keyword arguments, got {type(kwargs).__name__}")
        if deadline is not None and not (isinstance(deadline, (int, float)) and deadline > 0):
            raise ChecklistError(f"deadline= is a positive number of seconds, got {deadline!r}")
        if price is not None and not (isinstance(price, (int, float)) and price >= 0):
            raise ChecklistError(f"price= is a price per worker-hour (a number >= 0), got {price!r}")
        self.fn = fn
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.given_trace = trace is not None
        self.trace = _as_trace(trace)
        self.deadline = None if deadline is None else float(deadline)
        self.price = price

    # -- the function ------------------------------------------------------------------------------
    @property
    def call_text(self) -> str:
        """How the evidence names the call: ``slow(3)``."""
        return describe_call(self.fn, self.args, self.kwargs)

    @functools.cached_property
    def call(self) -> Call | None:
        """One local call of ``fn`` timed (None without ``fn``); an exception is kept, not raised."""
        if self.fn is None:
            return None
        times, cpus, queued = [], [], []
        result = None
        budget_end = time.perf_counter() + TIME_BUDGET_S
        while True:
            q0, c0, t0 = _run_queue_wait(), time.process_time(), time.perf_counter()
            try:
                result = self.fn(*self.args, **self.kwargs)
            except Exception as exc:  # noqa: BLE001 - the learner's function: reported as evidence, never raised
                return Call(0.0, 0.0, len(times) + 1, error=exc)
            t1, c1, q1 = time.perf_counter(), time.process_time(), _run_queue_wait()
            times.append(t1 - t0)
            cpus.append(c1 - c0)
            queued.append(q1 - q0)
            if times[0] >= SINGLE_CALL_S or len(times) >= MAX_CALLS or t1 >= budget_end:
                break
        return Call(statistics.median(times), statistics.median(cpus), len(times), result,
                    queued=statistics.median(queued))

    def call_failed(self) -> str:
        """The evidence for items that need the call when it raised ('' when it did not)."""
        c = self.call
        if c is None or c.error is None:
            return ""
        return (f"not measured: calling {self.call_text} raised {type(c.error).__name__}: {c.error}; "
                "fix the function or its arguments, then measure again")

    # -- the trace ----------------------------------------------------------------------------------
    @functools.cached_property
    def report(self) -> Any:
        """``analyze(trace)`` (None without a trace)."""
        if self.trace is None:
            return None
        from eugo_lab.analysis import analyze

        return analyze(self.trace)

    def no_trace(self, what: str) -> str:
        """The evidence when an item needs a trace and there is none."""
        return (f"not measured: no trace yet; run the work in a %%eugo cell or 'with hpc.trace() as t:' "
                f"(then trace=t) to measure {what}")

    # -- the runtime --------------------------------------------------------------------------------
    @staticmethod
    def runtime(start: bool = False) -> Any:
        """The running runtime (started with the defaults when ``start`` and none runs), or None."""
        from eugo_lab.hpc import session

        return session.current(start=start)

    @functools.cached_property
    def overhead(self) -> tuple[float, str]:
        """Median round trip of an empty task on the running runtime (started if none), and its engine."""
        from eugo_lab import hpc
        from eugo_lab.checklists.probes import empty_task

        rt = self.runtime(start=True)
        probe = hpc.remote(empty_task)
        hpc.get(probe.remote())
        trips = []
        for _ in range(OVERHEAD_PROBES):
            t0 = time.perf_counter()
            hpc.get(probe.remote())
            trips.append(time.perf_counter() - t0)
        info = rt.backend.info()
        return statistics.median(trips), f"{rt.backend_name}, {info.workers} workers"


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _as_trace(trace: Any) -> Any:
    """A Trace from ``trace`` (a Trace or an ended ``hpc.trace()`` region), else the last trace, else None."""
    from eugo_lab import hpc

    if trace is None:
        return hpc.last_trace()
    from eugo_lab.analysis.inputs import as_trace

    try:
        return as_trace(trace, "measure")
    except TypeError as exc:
        raise ChecklistError(str(exc).replace("measure()", "trace=")) from None
