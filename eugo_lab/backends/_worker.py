"""Running one task body on a worker: the same code on every backend.

``execute`` deserializes the arguments, runs the function, times the body (wall clock and
CPU), collects ``hpc.phase`` spans, pickles the result and captures any exception with its
traceback. It never raises: everything that happens becomes part of the returned outcome,
so a bad return value or a broken exception cannot take a worker down.

Memory limits (Dask and Ray): ``execute(..., memory_limit=n)`` runs the body under
:class:`_MemoryWatchdog`, see there. The local pool enforces its limits from the driver
instead (it polls each worker process and kills it), so its workers never pass a limit
and a task without one pays nothing: no watchdog thread is started or consulted.

Run-queue time (``TaskStats.runq``): how long the body's thread waited for a core, read
from Linux's schedstat around the body (:mod:`eugo_lab.contract.run_queue`); it is what
tells a body slowed down by busy cores from one waiting for I/O. Two reads cost a few
microseconds, as much as a tiny task's whole body, so a function whose last body on this
worker was shorter than ``RUNQ_MIN_BODY_S`` is not measured (NaN): no verdict reads the CPU
share of bodies that short (analysis.findings.boundness.BOUND_MIN_ITEM_S).

Timestamps: ``start`` is ``time.time()`` on the worker (wall clock, comparable across
processes of one host); every duration is measured with ``perf_counter`` and added to it,
so a wall-clock step during the task cannot produce negative durations. Lining up clocks
of *different hosts* is the driver's job (see ``eugo_lab.tracing``).
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import math
import os
import signal
import sys
import threading
import time
from array import array
from collections.abc import Callable
from typing import Any

from eugo_lab.backends import import_clock
from eugo_lab.contract import async_exc, run_queue
from eugo_lab.contract import phases as _phase
from eugo_lab.contract.errors import MemoryLimitExceeded, SerializationError, TaskError
from eugo_lab.contract.item_ends import ItemEnds
from eugo_lab.contract.outcome import Crash
from eugo_lab.contract.row import (
    CRASHED,
    DIGEST_ON_WORKER_BYTES,
    ERROR,
    OK,
    SMALL_ITEM_BYTES,
    Phase,
    TaskStats,
    pack_tail,
)
from eugo_lab.contract.serialization import PROTOCOL, dumps_value, loads_args
from eugo_lab.profile.collect import Profiled, not_task_code
from eugo_lab.profile.collect import start as _profile_start

# How often the watchdog reads the worker's resident memory while a limited task runs: a
# task allocating 1 GB/s overshoots its limit by about this much growth before it is asked to stop.
MEMORY_POLL_SECONDS = 0.05
# How long a task asked to stop (MemoryLimitExceeded raised in it) may take to unwind
# before the worker process is killed: it swallowed the exception, or it is inside C code.
MEMORY_GRACE_SECONDS = 1.0

# What a task's run returns: (status, payload, detail, stats). ``detail`` is the traceback
# (ERROR), the failed items of a batch (OK) or a memory stop (CRASHED: a Crash); the
# backend turns it into a typed ``outcome.Outcome`` (``outcome.from_worker``).
Ran = tuple[int, bytes, Any, "TaskStats | None"]

#: How an engine sends a task's result, given the value: ``(payload, bytes)``, the payload being the
#: pickle itself or what the engine's driver side turns into a ``StoredValue`` (the local pool writes
#: large results into shared memory: ``shm_store.write_result``), and the bytes the result weighs.
Store = Callable[[Any], tuple[Any, int]]

# A group of tiny map items is timed as one: its items run back to back and its end is read
# once, so reading the clock costs at most ~1/GROUP_CLOCKS of the items' own time. A clock
# read costs 25-110 ns (110 on this project's VMs), as much as a whole tiny item: timing
# every item made hpc.map's workers 3-4x slower than a plain loop. Items that take more
# than GROUP_CLOCKS clock reads are still timed one by one.
GROUP_CLOCKS = 50
MAX_GROUP = 1024

#: ``execute_batch``'s report after each group: ``(lo, hi, results, errors, next_size, body_start, end)``:
#: items ``lo..hi-1`` just finished (``results[lo:hi]``, the errors among them in ``errors``, which may
#: be ``None``), ``end`` seconds after the body started (``body_start``, wall clock), and the next group
#: runs items ``hi..hi+next_size-1``. The local pool sends it to the driver (``local_worker``), which
#: keeps the finished items when the worker dies in a later group.
Progress = Callable[[int, int, list, "dict | None", int, float, float], None]
# A reported group lasts at least this many reports' time (measured on each), so reporting costs
# the items at most ~1/PROGRESS_CALLS of their time.
PROGRESS_CALLS = 50
# ...but never longer than this: a report costs ~5-20 us, so groups rarely reach it. A group grows only
# while it lasts less, so items of 2 ms and more, whatever the machine's speed, run one a group.
PROGRESS_GROUP_MAX_S = 0.002

# A body shorter than this makes its function's next task skip the run-queue reads (see the
# module docstring): 200 us is 100x the reads' cost and a fifth of the shortest body the
# analysis gives an I/O- or compute-bound verdict.
RUNQ_MIN_BODY_S = 2e-4
_tiny_bodies: set[str] = set()  # functions whose last body here was under RUNQ_MIN_BODY_S
_NAN = float("nan")


def _children_cpu() -> float:
    """CPU seconds of this process's children that ended and were waited for (user + system).

    A task that runs a program (``subprocess.run(["gzip", ...])``) computes in the child while its own
    thread waits: without the child's CPU such a task reads as I/O-bound, and the advice (more workers
    than cores) would make it slower. The kernel adds a child's time here when it is reaped, so the
    difference over a body is the CPU of the children it started and waited for. On a worker running
    several tasks at once (threads) a child reaped during the body is counted in every body running
    then: which task started it is not recorded by the kernel. ~0.5 us a read (os.times, one syscall).
    """
    t = os.times()
    return t.children_user + t.children_system


def _clock_cost() -> float:
    """Seconds one perf_counter() read takes here (the cheapest of a few tries)."""
    perf = time.perf_counter
    best = 1.0
    for _ in range(5):
        t0 = perf()
        for _ in range(8):
            perf()
        best = min(best, (perf() - t0) / 9)
    return best


_clock_cost_s: float | None = None


# -- facts from inside a traced task (Task.probe): TaskStats.facts ------------------------------------
# Libraries whose presence means a BLAS or OpenMP runtime may be loaded: without any of them the
# thread count is -1 at no cost (threadpoolctl, and its scan of the loaded libraries, stay unloaded).
_THREADED_LIBS = ("numpy", "scipy", "sklearn", "torch", "numba", "cupy", "jax")
_pool_controller: Any = None
_pool_key: tuple = ()  # which of _THREADED_LIBS were loaded when the controller was made
_blas_key: tuple = ()  # ...and at the last reading (a tiny body reuses it while none was imported since)
_blas_modules = -1  # len(sys.modules) at the last reading: unchanged, no module was imported since
_last_blas = -1
_device_seen: int | None = None


def _blas_threads(function: str) -> int:
    """The BLAS/OpenMP threads in effect now (the largest over the loaded libraries); -1 when none is loaded.

    A function whose last body here was tiny reuses the last reading (see RUNQ_MIN_BODY_S): reading
    costs ~2 us, a tiny body's whole time, and no verdict reads threads for bodies that short. The
    library scan (threadpoolctl's controller, ~10 ms) is made again only when one of
    ``_THREADED_LIBS`` was imported since.
    """
    global _pool_controller, _pool_key, _blas_key, _blas_modules, _last_blas
    modules = sys.modules
    # Modules are added, seldom removed: the same count as at the last reading means the same ones
    # (the check costs 0.05 us, the scan of _THREADED_LIBS 0.5 us, a tiny task's whole probe).
    if function in _tiny_bodies and len(modules) == _blas_modules:
        return _last_blas
    key = tuple(m in modules for m in _THREADED_LIBS)
    _blas_modules = len(modules)
    if function in _tiny_bodies and key == _blas_key:
        return _last_blas
    _blas_key = key
    if not any(key):
        _last_blas = -1
        return -1
    try:
        if _pool_controller is None or _pool_key != key:
            import threadpoolctl

            _pool_controller, _pool_key = threadpoolctl.ThreadpoolController(), key
        _last_blas = max((lib.num_threads for lib in _pool_controller.lib_controllers), default=-1)
    except Exception:  # noqa: BLE001 - a fact for the trace must never fail the task
        _last_blas = -1
    return _last_blas


def _device() -> int:
    """The GPU this worker process really has (-1: none), read once per process.

    The first device of ``CUDA_VISIBLE_DEVICES`` (0 when unset or named by id) counts only where
    the driver exposes it (``/dev/nvidiaN``): a local-pool GPU worker named by ``gpus=[0]`` on a
    machine with no GPU has none, whatever its environment says.
    """
    global _device_seen
    if _device_seen is None:
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        if first in ("-1", "none", "NoDevFiles"):
            _device_seen = -1
        else:
            index = int(first) if first.isdigit() else 0
            present = os.path.exists(f"/dev/nvidia{index}") if first.isdigit() else any(
                os.path.exists(f"/dev/nvidia{i}") for i in range(16))
            _device_seen = index if present else -1
    return _device_seen


def _probing(load_token: Callable[[Any], Any] | None) -> tuple[Callable[[Any], Any] | None, list[int]]:
    """``load_token`` wrapped to note the stored references (``hpc.put``) it resolves, and the list it fills."""
    refs: list[int] = []
    if load_token is None:
        return None, refs

    def noting(token: Any) -> Any:
        value = load_token(token)
        if token[0] == "ref":
            refs.append(token[1])
        return value

    return noting, refs


def _facts(value: Any, payload: Any, blas: int, refs: list[int], batch: bool,
           imported: tuple[float, int], pickling_cpu: float, nbytes: int | None = None) -> tuple:
    """``TaskStats.facts`` of a traced attempt (see ``contract.row.FACT_DIGEST`` .. ``FACT_PICKLING_CPU``).

    The result's digest when its payload is large, threads, refs, device, the modules imported for it
    with the seconds that took (``imported``, from :mod:`.import_clock`), and the CPU seconds of its
    unpickling and pickling (their wall time, on a worker whose threads share the interpreter, also
    holds waits for the GIL: ``analysis.gil``). ``nbytes``: the result's size when ``payload`` is not
    its whole pickle (a result stored in shared memory: then the digest pickles again where it must).
    """
    found = None
    if nbytes is None:
        nbytes = len(payload)
    if type(payload) is not bytes:
        payload = None
    # A batch whose items pickle small on average (scalars among them) is digested on the driver,
    # item by item when they are scalars, from the payload it keeps: that costs the worker nothing
    # per item, and the payload kept is at most SMALL_ITEM_BYTES an item.
    if nbytes >= DIGEST_ON_WORKER_BYTES and not (batch and nbytes <= SMALL_ITEM_BYTES * len(value)):
        from eugo_lab.contract.digest import digest

        try:
            found = digest(value, payload)
        except Exception:  # noqa: BLE001 - a fact for the trace must never fail the task
            found = None
    return found, blas, tuple(refs), _device(), imported[1], imported[0], max(pickling_cpu, 0.0)


# cloudpickle and traceback are imported where an exception is reported, not at module level:
# a local-pool worker imports this module before it says hello, and cloudpickle alone took
# ~20 ms of that (it imports dataclasses, inspect and logging).
def _pickle_exception(exc: BaseException) -> bytes:
    import cloudpickle

    try:
        return cloudpickle.dumps(exc, protocol=PROTOCOL)
    except Exception:  # noqa: BLE001 - any failure: send a picklable stand-in
        return cloudpickle.dumps(TaskError(f"{type(exc).__qualname__}: {exc}"), protocol=PROTOCOL)


def _format_tb(exc: BaseException) -> tuple[list[tuple[str, int, str, str]], str]:
    """The traceback as frames plus the exception line, for the driver to format.

    Source lines are looked up where the code lives: a frame whose file the worker cannot
    read (a notebook cell) keeps an empty line, and the driver fills it from its own
    ``linecache``, which holds the cells' source.
    """
    import traceback

    # Drop this module's own frame: the user's code is what they need to see.
    tb = exc.__traceback__
    if tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frames = [(f.filename, f.lineno or 0, f.name, f.line or "") for f in traceback.extract_tb(tb)]
    return frames, "".join(traceback.format_exception_only(type(exc), exc))


def _read_only_write(exc: BaseException, function: str, args: tuple, kwargs: dict) -> BaseException:
    """NumPy's bare "assignment destination is read-only", explained when an argument is a read-only array.

    Arrays stored with ``hpc.put()`` reach tasks as read-only views of one shared copy; a task
    that writes into one gets NumPy's message, which names neither the cause nor the fix. The
    same type (ValueError) with the original traceback, so ``except ValueError`` still works.
    """
    if type(exc) is not ValueError or "read-only" not in str(exc):
        return exc
    values = [*args, *kwargs.values()]
    for v in list(values):
        if isinstance(v, (list, tuple)):
            values.extend(v)
        elif isinstance(v, dict):
            values.extend(v.values())
    if not any(getattr(getattr(v, "flags", None), "writeable", True) is False for v in values):
        return exc
    return ValueError(
        f"{exc}: {function}() wrote into an array it was given read-only. Arrays stored with hpc.put() are "
        "one copy shared by every task that reads them, so they are read-only (a write would change every "
        "other task's input). Return the new values instead: compute a new array (out = a * 2, or "
        "b = a.copy() and write into b) and return it."
    ).with_traceback(exc.__traceback__)


def _bytes_in(args_bytes: bytes, buffers: Any) -> int:
    """What the task was sent: the pickle stream plus its out-of-band buffers (large arrays by value).

    On the local pool an array of 1 MiB or more travels through shared memory beside the
    pickle, which holds ~100 bytes of it; counting only the pickle would hide exactly the
    mistake the Serialization finding looks for (the same large array sent to every task).
    """
    if not buffers:
        return len(args_bytes)
    return len(args_bytes) + sum(memoryview(b).nbytes for b in buffers)


def _phase_offsets(phases: list, t0: float) -> list[Phase] | None:
    if not phases:
        return None
    return [Phase(name, s - t0, e - t0, cpu, runq) for name, s, e, cpu, runq in phases]


# -- memory limits ---------------------------------------------------------------------------------
class _Watch:
    """One memory-limited task being watched: its thread, limit, starting size and verdict."""

    __slots__ = ("thread_id", "limit", "baseline", "verdict", "deadline", "on_kill")

    def __init__(self, limit: int, baseline: int, on_kill: Callable[[dict], None] | None):
        self.thread_id = threading.get_ident()
        self.limit = limit
        self.baseline = baseline
        self.verdict: Crash | None = None  # set once, when the task went over its limit
        self.deadline = 0.0
        self.on_kill = on_kill


class _MemoryWatchdog:
    """Stops tasks that grow their worker process past their memory limit (Dask and Ray workers).

    One daemon thread per worker process, started with the first memory-limited task and
    asleep whenever none runs. Every ``MEMORY_POLL_SECONDS`` it reads the process's
    resident memory (RSS); a task whose worker grew by more than its limit *since the task
    started* gets :class:`MemoryLimitExceeded` raised in its thread
    (``PyThreadState_SetAsyncExc``, delivered at its next bytecode). Its frames unwind, the
    memory it held is freed and the worker stays up, so no replacement process has to
    start. A task still running ``MEMORY_GRACE_SECONDS`` later (it swallowed the exception,
    or it sits in C code) has its whole worker process killed, after ``on_kill`` told the
    driver why (the engine's side channel: Dask's event log, Ray's internal KV).

    Why growth and not the process's total: a Dask or Ray worker process also holds its
    engine's runtime (~100 MB), results and ``hpc.put`` objects cached for other tasks and
    memory freed by earlier tasks but not yet returned to the OS. None of that is the
    task's doing, and a limit on the total would stop small tasks on a busy worker.

    Limits of an in-process watchdog, by design: (1) a worker process that runs several
    tasks at once (a Dask worker with ``threads_per_worker > 1``) counts the growth of
    every thread, so a limited task pays for its neighbours' allocations; the embedded Dask
    cluster and Ray run one task per process, where the measure is exact. (2) One C call
    that allocates while holding the GIL (``bytearray(10**10)``) is seen only when it
    returns. The local pool watches from the driver instead and has neither limit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[_Watch] = set()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._proc: Any = None
        self._pid = 0

    def rss(self) -> int:
        """Resident memory of this process, in bytes."""
        if self._pid != os.getpid():  # first use, or a forked child: psutil caches the pid
            import psutil

            self._proc, self._pid = psutil.Process(), os.getpid()
        return self._proc.memory_info().rss

    def watch(self, limit: int, on_kill: Callable[[dict], None] | None) -> _Watch:
        """Start watching the calling thread's task."""
        w = _Watch(limit, self.rss(), on_kill)
        with self._lock:
            self._watches.add(w)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="eugo-memory-watchdog", daemon=True)
                self._thread.start()
            self._wake.notify()
        return w

    def unwatch(self, w: _Watch) -> None:
        """Stop watching; idempotent, and safe against the exception landing inside it.

        Called on the task's own thread. Once ``w`` is out of the set no new exception can be
        raised in the thread; one raised already and not delivered yet lands here and is caught
        (:func:`eugo_lab.contract.async_exc.absorb`: never withdrawn, see there). One delivered on
        the way out propagates to the caller, which calls ``unwatch`` again.
        """
        with self._lock:
            self._watches.discard(w)
        if w.verdict is not None:
            async_exc.absorb(MemoryLimitExceeded)

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._watches:
                    self._wake.wait()
            time.sleep(MEMORY_POLL_SECONDS)
            try:
                rss = self.rss()
            except Exception:  # noqa: BLE001 - /proc unreadable for a moment: try again
                continue
            now = time.monotonic()
            doomed = None
            with self._lock:
                for w in self._watches:
                    if w.verdict is None:
                        if rss - w.baseline > w.limit:
                            w.verdict = Crash.memory(rss - w.baseline, w.limit, w.baseline)
                            w.deadline = now + MEMORY_GRACE_SECONDS
                            async_exc.raise_in_thread(w.thread_id, MemoryLimitExceeded)
                    elif now >= w.deadline:
                        doomed = w
            if doomed is not None:
                self._kill_process(doomed)

    @staticmethod
    def _kill_process(w: _Watch) -> None:
        """The task did not stop: tell the driver through the engine, then end this process."""
        verdict = (w.verdict or Crash.memory(0, w.limit, w.baseline))._replace(exit_code=-int(signal.SIGKILL))
        if w.on_kill is not None:
            # On a thread of its own, bounded: a hook stuck on an unreachable scheduler must
            # not keep a runaway task alive.
            t = threading.Thread(target=_call_quietly, args=(w.on_kill, verdict.to_dict()), daemon=True)
            t.start()
            t.join(2.0)
        os.kill(os.getpid(), signal.SIGKILL)


def _call_quietly(fn: Callable, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - best effort: the process is about to be killed anyway
        pass


_watchdog: _MemoryWatchdog | None = None
_watchdog_lock = threading.Lock()


def memory_watchdog() -> _MemoryWatchdog:
    """The watchdog of the calling process (created on first use)."""
    global _watchdog
    if _watchdog is None:
        with _watchdog_lock:
            if _watchdog is None:
                _watchdog = _MemoryWatchdog()
    return _watchdog


def _release_memory() -> None:
    """Give the stopped task's memory back to the OS, so the worker shrinks for the next task."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)  # glibc keeps freed heap pages otherwise
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def run_limited(run: Callable[..., Ran], limit: int, on_kill: Callable[[dict], None] | None,
                *args: Any) -> Ran:
    """``run(*args)`` (``execute`` or ``execute_batch``) under the memory watchdog.

    Returns ``run``'s outcome, or ``(CRASHED, b"", crash, stats)`` when the task went
    over ``limit``: the :class:`~eugo_lab.contract.outcome.Crash` (kind memory, ``used`` =
    growth, ``limit``, ``baseline``) is what the driver turns into ``hpc.WorkerMemoryError``,
    never retried. ``on_kill`` receives the same crash as a dict (``Crash.to_dict``).

    A batch (``execute_batch``) is limited item by item, as if each were its own task: an item
    stopped at the limit fails alone (its error is its crash, see ``execute_batch``), its memory
    goes back and the items after it run under a fresh watch. Only an item that does not stop
    when asked (its process is killed) loses the whole batch.
    """
    dog = memory_watchdog()
    w = dog.watch(limit, on_kill)

    def item_stopped() -> Crash | None:
        # An item of a batch was stopped and its frames are gone: its verdict, and a fresh watch (from the
        # worker's size now) for the items after it; None: no verdict, the exception was not the watchdog's.
        nonlocal w
        verdict = w.verdict
        if verdict is None:
            return None
        dog.unwatch(w)
        _release_memory()
        w = dog.watch(limit, on_kill)
        return verdict

    outcome = None
    try:
        try:
            outcome = run(*args, on_memory_stop=item_stopped) if run is execute_batch else run(*args)
        finally:
            dog.unwatch(w)
    except MemoryLimitExceeded:  # landed outside the body (our own bookkeeping): same verdict
        dog.unwatch(w)
    if w.verdict is None:
        return outcome  # type: ignore[return-value]
    stats = outcome[3].stopped() if outcome is not None and outcome[3] is not None else None
    del outcome
    _release_memory()
    return CRASHED, b"", w.verdict, stats


def _report(progress: Progress, *args: Any) -> None:
    """``progress(*args)`` in a frame of its own, which a profile of the batch leaves out (see below)."""
    progress(*args)


not_task_code(_report.__code__)


def _begin(function: str, probe: bool, load_token: Callable[[Any], Any] | None
           ) -> tuple[Callable[[Any], Any] | None, list[int], int]:
    """The set-up ``execute`` and ``execute_batch`` share: ``(load_token, refs, blas threads)``.

    A traced attempt (``probe``) notes the stored references it resolves and the BLAS threads in
    effect, and from here to the body's end its imports count as its warm-up (:mod:`.import_clock`);
    an untraced one only drops what the import clock held for ``function``.
    """
    if not probe:
        import_clock.drop(function)
        return load_token, [], -1
    load_token, refs = _probing(load_token)
    blas = _blas_threads(function)
    import_clock.begin(function)
    return load_token, refs, blas


def _body_ended(cpu_clock: Callable[[], float], c0: float, k0: float, q0: int | None
                ) -> tuple[float, float, float, float]:
    """The end of a body (or a batch's items) that ``execute`` and ``execute_batch`` share.

    Returns ``(perf_counter, cpu_clock, CPU seconds, run-queue seconds)``: the CPU counts the
    children the body started and waited for when their CPU was read at the start (``k0`` not
    NaN), the run-queue wait is NaN when it was not read then (``q0`` None: a tiny body).
    """
    p2 = time.perf_counter()
    c2 = cpu_clock()
    cpu = c2 - c0
    if k0 == k0:  # not NaN: read at the start
        cpu += _children_cpu() - k0
    return p2, c2, cpu, run_queue.since(q0)


def _unpicklable(function: str, value: Any, exc: BaseException, item: int | None = None) -> SerializationError:
    """The error of a result that could not be pickled (``item``: its index in a batch), with the fix."""
    which = "" if item is None else f" for item {item}"
    return SerializationError(
        f"the value returned by {function}(){which} could not be pickled: a {type(value).__qualname__} ({exc}). "
        "Return plain data (numbers, arrays, dicts) or save the object to a file and return its path."
    )


def execute(
    fn: Callable,
    function: str,
    args_bytes: bytes,
    load_token: Callable[[Any], Any] | None = None,
    cpu_clock: Callable[[], float] = time.process_time,
    buffers: Any = None,
    probe: bool = False,
    store: Store | None = None,
) -> Ran:
    """Run ``fn`` on pickled arguments; return ``(status, payload, traceback, stats)``.

    ``payload`` is the pickled result when ``status == OK``, else the pickled exception.
    ``buffers`` are the out-of-band buffers of large arguments (see ``dumps_args``).
    ``store``: how the engine sends a result (see :data:`Store`); ``None``: pickled in band.
    ``cpu_clock`` is ``process_time`` where a process runs one task at a time (the local
    pool: this counts BLAS threads too) and ``thread_time`` on multi-threaded workers.
    ``probe`` (a task of a traced region): also report what the task saw (``TaskStats.facts``).
    """
    start_wall = time.time()
    p0 = time.perf_counter()
    p1 = p0
    c0 = c_in = cpu_clock()  # c_in: the unpickling's CPU starts here (a fact, see _facts)
    # -- profiling (eugo_lab.profile): a profiled task arrives wrapped; off, this test is all it costs
    wrapped = profile = recording = None
    if type(fn) is Profiled:
        wrapped, fn = fn, fn.fn
    phases = _phase.begin_task()
    q0 = None
    k0 = _NAN  # children's CPU at the body's start (not read for a tiny body: see RUNQ_MIN_BODY_S)
    load_token, refs, blas = _begin(function, probe, load_token)
    args: tuple = ()
    kwargs: dict = {}
    try:
        args, kwargs = loads_args(args_bytes, load_token, buffers)
        if function not in _tiny_bodies:
            q0 = run_queue.waited_ns()
            k0 = _children_cpu()
        p1 = time.perf_counter()
        c0 = cpu_clock()
        if wrapped is not None:
            recording = _profile_start(wrapped)
        value = fn(*args, **kwargs)
        status = OK
    except BaseException as exc:  # noqa: BLE001 - reported, never raised on the worker
        exc = _read_only_write(exc, function, args, kwargs)
        status, value, tb = ERROR, exc, _format_tb(exc)
    finally:
        _phase.end_task()
        if recording is not None:
            profile = recording.stop()
    imported = import_clock.end() if probe else (0.0, 0)
    p2, c2, cpu, runq = _body_ended(cpu_clock, c0, k0, q0)
    if p2 - p1 < RUNQ_MIN_BODY_S:
        _tiny_bodies.add(function)
    else:
        _tiny_bodies.discard(function)
    out_bytes = -1
    if status == OK:
        try:
            if store is None:
                payload = dumps_value(value)
            else:
                payload, out_bytes = store(value)
            tb = None
        except Exception as exc:  # noqa: BLE001 - the worker must survive a bad result
            err = _unpicklable(function, value, exc)
            status, payload, tb = ERROR, _pickle_exception(err), _format_tb(err)
    else:
        payload = _pickle_exception(value)
    if out_bytes < 0 or status != OK:
        out_bytes = len(payload)
    p3 = time.perf_counter()
    body_start = start_wall + (p1 - p0)  # the body starts once the arguments are unpickled
    bytes_in = _bytes_in(args_bytes, buffers)
    facts = _facts(value, payload if status == OK else b"", blas, refs, False, imported,
                   (c0 - c_in) + (cpu_clock() - c2), out_bytes if status == OK else 0) if probe else None
    # The tail: the same numbers packed as the trace row's worker half, so the driver's I/O
    # thread does not pack them per task.
    if profile is not None:  # no packed tail: the recorder takes its slow path, which keeps the profile
        return status, payload, tb, TaskStats(start_wall, p2 - p1, cpu, p1 - p0, p3 - p2, bytes_in,
                                              out_bytes, _phase_offsets(phases, p1), None, None, profile, runq,
                                              facts)
    stats = TaskStats(start_wall, p2 - p1, cpu, p1 - p0, p3 - p2, bytes_in, out_bytes,
                      _phase_offsets(phases, p1), None,
                      pack_tail(body_start, body_start + (p2 - p1), cpu, p1 - p0, p3 - p2, runq, bytes_in,
                                out_bytes), None, runq, facts)
    return status, payload, tb, stats


def execute_batch(
    fn: Callable,
    function: str,
    args_bytes: bytes,
    load_token: Callable[[Any], Any] | None = None,
    cpu_clock: Callable[[], float] = time.process_time,
    buffers: Any = None,
    probe: bool = False,
    store: Store | None = None,
    progress: Progress | None = None,
    alone: bool = False,
    on_memory_stop: Callable[[], Crash | None] | None = None,
) -> Ran:
    """Run ``fn(item)`` for every item of a pickled batch (``hpc.map``).

    Returns ``(OK, pickled list of results, errors, stats)``; ``errors`` maps an item's
    index to ``(pickled exception, traceback)`` and its slot in the list holds ``None``.
    ``stats.item_ends`` holds each item's end (an :class:`ItemEnds`) as an offset from the
    body's start, so the trace can show every item as its own task. Items run in groups
    through ``map`` (C, no bytecode per item) with one clock read per group; a group grows
    while its items stay tiny next to a clock read and falls back to one item when one is slow.

    ``progress`` (see :data:`Progress`): called after every group but the last, so that the
    driver knows, should this process die, which items finished (with their results) and which
    group was running. Groups then also grow only while they are short next to a call of it
    (``PROGRESS_CALLS``), so reporting costs the items at most ~2%. ``alone``: every item is a
    group of its own (the items of a group a worker died in: the next death names its item).
    ``on_memory_stop`` (``run_limited``): an item stopped at its memory limit fails alone, its
    ``errors`` entry ``(b"", crash)`` holding the :class:`~eugo_lab.contract.outcome.Crash` this
    returns in place of a traceback (``None``: the stop is not an item's, and ends the batch).
    """
    start_wall = time.time()
    p0 = time.perf_counter()
    c_in = cpu_clock()
    load_token, refs, blas = _begin(function, probe, load_token)
    (items,), _ = loads_args(args_bytes, load_token, buffers)
    q0 = run_queue.waited_ns()  # once per batch: its items share the wait like their CPU time
    k0 = _children_cpu()
    p1 = time.perf_counter()
    c0 = cpu_clock()
    global _clock_cost_s
    if _clock_cost_s is None:
        _clock_cost_s = _clock_cost()
    results: list = []
    errors: dict | None = None
    counts, ends = array("q"), array("d")
    perf = time.perf_counter
    # -- profiling (eugo_lab.profile): one recording covers every item of the batch
    recording = None
    if type(fn) is Profiled:
        fn, recording = fn.fn, _profile_start(fn)
    rest = iter(items)
    n, done, size, last = len(items), 0, 1, 0.0
    group_s = GROUP_CLOCKS * _clock_cost_s  # a group should last about this long
    clock_group_s = group_s
    max_group = 1 if alone else MAX_GROUP
    # With `progress`: the items from `reported` to `promised` run before the next report (the driver was
    # told, so that it knows which items were running should this process die).
    reported, promised = 0, 1
    cheapest = math.inf  # the cheapest report so far, in seconds
    # hpc.phase spans of the items (a JIT trial announces its verdict as phases): one list per batch
    phases = _phase.begin_task()
    # The automatic JIT's wrapper says, once a group, whether the plain function will do (jit.auto.AutoJit.eugo_settled;
    # a name no user callable is likely to carry).
    settled = getattr(fn, "eugo_settled", None)
    try:
        while done < n:
            # Items that mark phases run one a group: each end is then measured, and the trace puts
            # each span on its own item. A group never runs past the next report.
            take = 1 if phases else min(size, n - done, promised - done if progress is not None else n)
            try:
                results.extend(map(settled() if settled is not None else fn, itertools.islice(rest, take)))
            except MemoryLimitExceeded:  # this item went over its limit: it fails alone (run_limited)
                verdict = on_memory_stop() if on_memory_stop is not None else None
                if verdict is None:  # no item's verdict: the whole batch stops (run_limited reports it)
                    if recording is not None:
                        recording.stop()
                    raise
                if errors is None:
                    errors = {}
                errors[len(results)] = (b"", verdict)
                results.append(None)
            except BaseException as exc:  # noqa: BLE001 - per item, reported; the group ends at this item
                exc = _read_only_write(exc, function, (items[len(results)],), {})
                if errors is None:
                    errors = {}
                errors[len(results)] = (_pickle_exception(exc), _format_tb(exc))
                results.append(None)
            t = perf() - p1
            got = len(results) - done
            counts.append(got)
            ends.append(t)
            done += got
            took, last = t - last, t
            # Grow (doubling, so one slow item cannot hide in a large group) while the group was
            # short; back to single items as soon as one took long.
            size = min(max_group, 2 * size) if took < group_s else 1 if took > 4 * group_s else size
            if progress is not None and promised <= done < n:
                _report(progress, reported, done, results, errors, size, start_wall + (p1 - p0), t)
                reported, promised = done, done + size
                # The report's time is the items' overhead: a group lasts PROGRESS_CALLS reports at least.
                # Its own time is left out of the next group's (`last`), so the group's size stays the items'.
                # The cheapest report seen is its cost (one preempted report must not group slow items),
                # and groups grow only while under PROGRESS_GROUP_MAX_S however reports cost: items that long
                # run one a group, so a death among them is always pinned on its item.
                last = perf() - p1
                cheapest = min(cheapest, last - t)
                group_s = max(clock_group_s, min(PROGRESS_CALLS * cheapest, PROGRESS_GROUP_MAX_S))
    finally:
        _phase.end_task()
        imported = import_clock.end() if probe else (0.0, 0)
    profile = recording.stop() if recording is not None else None
    p2, c2, cpu, runq = _body_ended(cpu_clock, c0, k0, q0)
    dump = dumps_value if store is None else store
    try:
        payload = dump(results)
    except Exception:  # noqa: BLE001 - find the item(s) at fault, keep the rest
        good = []
        for i, value in enumerate(results):
            try:
                dumps_value(value)
                good.append(value)
            except Exception as exc:  # noqa: BLE001
                good.append(None)
                err = _unpicklable(function, value, exc, i)
                errors = errors or {}
                errors[i] = (_pickle_exception(err), _format_tb(err))
        payload = dump(good)
    payload, out_bytes = payload if store is not None else (payload, len(payload))
    p3 = time.perf_counter()
    facts = _facts(results, payload, blas, refs, True, imported, (c0 - c_in) + (cpu_clock() - c2),
                   out_bytes) if probe else None
    stats = TaskStats(start_wall, p2 - p1, cpu, p1 - p0, p3 - p2, _bytes_in(args_bytes, buffers), out_bytes,
                      _phase_offsets(phases, p1), ItemEnds(counts.tobytes(), ends.tobytes()), None, profile, runq,
                      facts)
    return OK, payload, errors, stats
