"""``hpc.phase(name)``: mark a named phase (read / compute / write) inside a task body.

Outside a running task, or on the driver, ``phase`` returns a shared do-nothing context,
so leaving the markers in code that also runs serially costs one attribute lookup.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from eugo_lab.contract import run_queue

_local = threading.local()

def recording_phases() -> Any:
    """The phase list the running task records into on this thread (None outside a task)."""
    return getattr(_local, "phases", None)


def set_recording_phases(phases: Any) -> None:
    """Make ``phases`` the list this thread's task records into (a task run on top of a waiting one gives it back)."""
    _local.phases = phases


#: Phase names the runtime records itself, not the task's code: the JIT's verdicts and trial spans
#: (``jit: compiled``, ``jit: plain run``). ``Trace.phases_dataframe()`` leaves them out by default.
RUNTIME_PHASE_PREFIX = "jit: "
#: The span of a JIT trial's compile: the task that carries it ran the function plain, compiled it and ran
#: it compiled (eugo_lab.jit.checked), so the analyses do not compare its time with the compiled calls'.
JIT_COMPILE_PHASE = RUNTIME_PHASE_PREFIX + "compile"
#: The automatic JIT's marker where a function qualified: its compile starts then, in a background thread of
#: the worker, beside the tasks (eugo_lab.jit.auto says ``jit: not tried: compiling: ...``).
JIT_COMPILING_PHASE = RUNTIME_PHASE_PREFIX + "not tried: compiling"


def compile_seconds(name: str) -> float | None:
    """The compile time a JIT verdict phase carries (``jit: compiled [trial plain=.. compile=0.31 ..]``); None: none."""
    if not name.startswith(RUNTIME_PHASE_PREFIX) or "[cached " in name:  # cached: an earlier run's compile
        return None
    _, sep, times = name.rpartition(" compile=")
    if not sep:
        return None
    try:
        return float(times.split()[0].rstrip("]"))
    except (ValueError, IndexError):
        return None


def bytecode_share(name: str) -> float | None:
    """The share of a function's sampled time in Python bytecode that a JIT verdict phase carries, or None.

    The automatic JIT samples each function it watches and says where the time was when it judges it
    (``jit: not tried: in-c: 7% of its sampled time in Python bytecode, the rest in C code ...``, or
    ``jit: not tried: compiling: 93% of its sampled time in Python bytecode ...``; ``eugo_lab.jit.auto``).
    """
    if not name.startswith(RUNTIME_PHASE_PREFIX):
        return None
    head, sep, _ = name.partition("% of its sampled time in Python bytecode")
    if not sep:
        return None
    digits = head.rsplit(" ", 1)[-1]
    try:
        return float(digits) / 100.0
    except ValueError:
        return None


#: The span a task spent inside ``hpc.get``/``hpc.wait`` on tasks it submitted itself (its children). Its CPU
#: time is the waiting task's own (the children it ran on its stack meanwhile are their own rows), so the
#: analyses read the span as waiting on children, neither I/O nor computing.
CHILD_WAIT_PHASE = "waiting on child tasks"


class _NullPhase:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NULL = _NullPhase()


class _Phase:
    __slots__ = ("name", "record", "t0", "c0", "q0")

    def __init__(self, name: str, record: list):
        self.name = name
        self.record = record

    def __enter__(self) -> None:
        if _is_runtime_work(self.name):  # the runtime's own work inside the task (the JIT's compile)
            _local.runtime_depth = getattr(_local, "runtime_depth", 0) + 1
        self.q0 = run_queue.waited_ns()  # a phase is marked by hand: two reads (~2 us) are nothing next to it
        self.c0 = time.thread_time()
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        t1 = time.perf_counter()
        if _is_runtime_work(self.name):
            _local.runtime_depth -= 1
        cpu = time.thread_time() - self.c0
        # (name, start, end, cpu, runq): start/end are perf_counter readings of this process;
        # the executor turns them into offsets from the task's start before sending.
        self.record.append((self.name, self.t0, t1, cpu, run_queue.since(self.q0)))


def phase(name: str) -> _Phase | _NullPhase:
    """Return a context manager that records ``name`` as a phase of the running task.

    Example::

        @hpc.remote
        def tile(path):
            with hpc.phase("read"):
                data = load(path)
            with hpc.phase("compute"):
                return data.mean()
    """
    record = getattr(_local, "phases", None)
    if record is None:
        return _NULL
    if not isinstance(name, str) or not name:
        raise ValueError(f"hpc.phase() needs a non-empty string name, got {name!r}")
    return _Phase(name, record)


#: The runtime's phases in which the task's own code runs (the JIT's trial runs the function plain, then
#: compiled): what the code does there is the task's.
_TASK_CODE_PHASES = frozenset({RUNTIME_PHASE_PREFIX + "plain run", RUNTIME_PHASE_PREFIX + "compiled run"})


def _is_runtime_work(name: str) -> bool:
    return name.startswith(RUNTIME_PHASE_PREFIX) and name not in _TASK_CODE_PHASES


class runtime_work:  # noqa: N801 - used as ``with runtime_work():``, like a function
    """Mark what the runtime does inside a task, outside any phase (importing Numba, reading compiled code)."""

    def __enter__(self) -> None:
        _local.runtime_depth = getattr(_local, "runtime_depth", 0) + 1

    def __exit__(self, *exc: Any) -> None:
        _local.runtime_depth -= 1


def in_runtime_phase() -> bool:
    """Whether this thread's task is inside one of the runtime's own phases now (``jit: ...``).

    What it does there (the JIT's trial importing Numba and compiling) is the runtime's work, not the task's.
    """
    return getattr(_local, "runtime_depth", 0) > 0


def in_task() -> bool:
    """Whether this thread runs a task's body now (set on the worker side, also on a thread of the driver).

    The threads engine runs task bodies in threads of the driver process: what runs there is the
    task's work, not the notebook's (:mod:`eugo_lab.tracing.driver_calls` leaves it out).
    """
    return getattr(_local, "phases", None) is not None


def begin_task() -> list:
    """Start collecting phases for the task about to run on this thread (worker side)."""
    record: list = []
    _local.phases = record
    return record


def end_task() -> None:
    """Stop collecting phases on this thread."""
    _local.phases = None
