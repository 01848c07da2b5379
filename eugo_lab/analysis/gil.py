"""The threads engine's interpreter lock: how much of a task's time was waiting for it, not work and not I/O.

On the threads engine every task runs in the driver's process, and CPython runs Python
bytecode on one thread at a time (the GIL). A task's body time then holds three things:
its CPU time (work), time waiting for the GIL or for a core while another task ran, and
real waits (I/O, sleep, a lock) during which the GIL is free. Only the first and the last
would be there on one worker, so on this engine the serial estimate is built from them:
task time counted GIL waits as work, and pure-Python tasks on ``-b threads -w 4`` (2 cores)
read "3.2x estimated" where the measured speedup was 0.4x.

The worker measures CPU time and run-queue wait per task (``cpu``, ``runq``); the GIL wait
is not measured, it is bounded: a task off the CPU while *other tasks* of the process
computed can have waited for the GIL at most that long. So a unit's GIL wait is
``min(its off-CPU time, the other units' CPU time during its body)``, the other units' CPU
spread evenly over their bodies. Sleeping side by side (no one computes) keeps its waits as
I/O; pure Python side by side turns them into GIL waits.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis.timeline import Units

#: The engine whose tasks share one interpreter (its name in ``trace.meta["backend"]``).
SHARED_INTERPRETER_BACKENDS = frozenset({"threads"})


def shares_interpreter(meta: dict) -> bool:
    """True when the traced engine ran every task on a thread of one Python process."""
    return str(meta.get("backend", "")) in SHARED_INTERPRETER_BACKENDS


def _cpu_integral(start: np.ndarray, end: np.ndarray, cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints and the running integral of all units' CPU rate (each unit's CPU spread over its body)."""
    span = end - start
    rate = np.where(span > 0, cpu / np.where(span > 0, span, 1.0), 0.0)
    times = np.concatenate([start, end])
    delta = np.concatenate([rate, -rate])
    order = np.argsort(times, kind="stable")
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)  # the total rate from each breakpoint to the next
    integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    return times, integral


def _bodies(u: Units) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each unit's body window (start, end), its CPU within it, and every unit's CPU integrated over time."""
    start = u.occ_start + u.deser
    end = u.occ_end - u.ser
    cpu = np.minimum(u.cpu, np.maximum(u.body, 0.0))
    times, integral = _cpu_integral(start, end, cpu)
    return start, end, cpu, times, integral


def gil_waits(u: Units) -> np.ndarray:
    """Per unit: an upper bound on the seconds its body waited for the GIL (see the module docstring).

    Meaningful on an engine that :func:`shares_interpreter` only; the caller decides.
    """
    if len(u) == 0:
        return np.zeros(0)
    start, end, cpu, times, integral = _bodies(u)
    off_cpu = np.maximum(u.body - cpu - np.nan_to_num(u.runq), 0.0)
    during = np.interp(end, times, integral) - np.interp(start, times, integral)
    others = np.maximum(during - cpu, 0.0)  # its own CPU is inside the integral
    return np.minimum(off_cpu, others)


def pickling_gil_waits(u: Units, pickling_cpu: np.ndarray | None = None,
                       known: np.ndarray | None = None) -> np.ndarray:
    """Per unit: the seconds its unpickling and pickling waited for the GIL (or a core).

    On this engine the arguments and results are still pickled (a task shares no mutable state with
    the caller), and those steps are timed by the wall clock: a thread unpickling 184 bytes of ints
    while another task computes waits for the lock, and that wait read as serialization (32 ms for
    microseconds of pickling). Where the worker measured the steps' CPU (``pickling_cpu``, the trace's
    facts; ``known``), the rest of their time is waiting: pickling in memory does no I/O. Elsewhere, as
    for the body, a step waited at most as long as the other units computed during it
    (``min(its length, their CPU during it)``).
    """
    if len(u) == 0:
        return np.zeros(0)
    start, end, _, times, integral = _bodies(u)

    def during(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # The unit's own body lies outside its (un)pickling: all the CPU in the window is the others'.
        return np.maximum(np.interp(b, times, integral) - np.interp(a, times, integral), 0.0)

    deser = np.minimum(np.maximum(u.deser, 0.0), during(u.occ_start, start))
    ser = np.minimum(np.maximum(u.ser, 0.0), during(end, u.occ_end))
    bound = deser + ser
    if pickling_cpu is None or known is None:
        return bound
    steps = np.maximum(u.deser, 0.0) + np.maximum(u.ser, 0.0)
    return np.where(known, np.clip(steps - pickling_cpu, 0.0, steps), bound)


def work_time(u: Units, counted: np.ndarray) -> tuple[float, float]:
    """``(serial estimate, seconds left out)`` for the units in ``counted`` on a shared interpreter.

    The estimate is CPU time plus real waits: body time less run-queue wait and GIL wait, the
    time a task spent ready to run while another held the one interpreter or the cores.
    """
    gil = gil_waits(u)
    left_out = np.nan_to_num(u.runq) + gil
    body = u.body[counted]
    left = np.minimum(left_out[counted], np.maximum(body, 0.0))
    return float((body - left).sum()), float(left.sum())
