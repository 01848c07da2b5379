"""Pieces shared by the cluster engines (Dask, Ray): the worker-side task and driver bookkeeping.

Worker side: :func:`run_task` is the one body every cluster task runs. It loads the
function (cached per process, so a function is unpickled once per worker, not once per
task), maps argument tokens back to values (``("fut", id)`` to a dependency's pickled
result, ``("ref", id)`` to an ``hpc.put`` object the engine delivered as an extra
argument) and calls :func:`~eugo_lab.backends._worker.execute`, so tasks are timed,
traced and their errors captured exactly as on the local pool.

Driver side: :class:`Reporter` calls ``on_done`` exactly once per task attempt, always
from one thread of ours (never from the engine's event loop, where a callback that
submits more work or does a blocking call could stall or deadlock the engine), and
:class:`WorkerIndex` turns engine worker identities into small, stable ints for the trace.

Clocks: ``stats.start_wall`` is ``time.time()`` on the worker. Workers on other hosts may have
clocks that differ from the driver's by milliseconds (NTP) or more; we record their
timestamps as they are and leave alignment to ``eugo_lab.tracing`` (which can apply
per-host ``clock_offsets``), so a backend never rewrites a measurement.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import socket
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from eugo_lab.backends._worker import Ran, _pickle_exception, execute, execute_batch, run_limited
from eugo_lab.contract import base
from eugo_lab.contract.errors import BackendError, ResourceRequestError
from eugo_lab.contract.outcome import Outcome
from eugo_lab.contract.serialization import loads_value

log = logging.getLogger("eugo_lab")

# -- worker side -----------------------------------------------------------------------------
_FN_CACHE_SIZE = 256
_fn_cache: collections.OrderedDict[tuple[str, int], Callable] = collections.OrderedDict()
_fn_lock = threading.Lock()


def _load_function(fn_key: tuple[str, int], payload: bytes) -> Callable:
    with _fn_lock:
        fn = _fn_cache.get(fn_key)
        if fn is not None:
            _fn_cache.move_to_end(fn_key)
            return fn
    fn = loads_value(payload)
    with _fn_lock:
        _fn_cache[fn_key] = fn
        while len(_fn_cache) > _FN_CACHE_SIZE:
            _fn_cache.popitem(last=False)
    return fn


_threads_unguarded = True

#: The cluster engine whose task wrapper runs tasks in this process (``"ray"``, ``"dask"``), else ``None``. Set
#: by the wrapper itself (``ray._ray_task_body``, ``dask._dask_task``) before the body runs, so that a
#: ``.remote()`` inside the body finds the engine it runs on (``eugo_lab.hpc.engine_nested``) instead of
#: starting a private local pool in the worker.
engine_worker: str | None = None


def mark_engine_worker(engine: str) -> None:
    """Record that this process runs tasks of ``engine`` (called by the engine's task wrapper)."""
    global engine_worker
    engine_worker = engine


def _guard_threads() -> None:
    global _threads_unguarded
    _threads_unguarded = False
    try:
        from eugo_lab.threadguard.variables import apply_once

        apply_once()
    except Exception:  # a guard that fails must never fail the task
        log.debug("eugo_lab: the thread guard failed", exc_info=True)


def run_task(fn_key: tuple[str, int], fn_payload: bytes, name: str, args: bytes, deps: dict | None,
             is_batch: bool, ref_ids: tuple, ref_values: tuple, cpu_clock: Callable[[], float],
             memory_limit: int | None = None, on_memory_kill: Callable[[dict], None] | None = None,
             probe: bool = False) -> Ran:
    """Run one task (or ``hpc.map`` batch) on this worker; never raises.

    Returns ``(status, payload, detail, stats)`` as :func:`execute` does. With
    ``memory_limit`` the body runs under the worker's memory watchdog (see
    ``_worker._MemoryWatchdog``); ``on_memory_kill`` is how the engine tells the driver why,
    should the watchdog have to kill this whole process. ``probe``: a task of a traced region
    (``Task.probe``), whose stats then carry what it saw (``TaskStats.facts``).
    """
    if _threads_unguarded:  # once per worker process: BLAS/OpenMP/Numba threads = cores / workers
        _guard_threads()
    try:
        fn = _load_function(fn_key, fn_payload)
    except BaseException as exc:  # noqa: BLE001 - e.g. a module the function needs is missing here
        from eugo_lab.contract.errors import function_load_error

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return base.ERROR, _pickle_exception(function_load_error(name, exc)), tb, None
    refs = dict(zip(ref_ids, ref_values))

    def load_token(token: tuple) -> Any:
        if token[0] == "fut":
            return loads_value(deps[token[1]])  # type: ignore[index]
        return refs[token[1]]

    run = execute_batch if is_batch else execute
    if memory_limit:
        return run_limited(run, memory_limit, on_memory_kill, fn, name, args, load_token, cpu_clock, None, probe)
    return run(fn, name, args, load_token, cpu_clock, None, probe)


def cuda_device() -> int:
    """The GPU a task on this Dask worker uses: the first of ``CUDA_VISIBLE_DEVICES``, else 0.

    Dask resources (``GPU=1``) are counts, not devices; a GPU worker is pinned to its device
    by ``CUDA_VISIBLE_DEVICES`` (dask-cuda puts the worker's own device first), and a CUDA
    library uses the first device it sees. A device named by id, not number, shows as 0.
    """
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def held_gpu(task: Any, device: int) -> int:
    """The GPU for the trace: ``device`` for a task that asked for one (``gpus=``), else -1."""
    return device if task.options.gpus and device >= 0 else -1


def host_and_pid() -> tuple[str, int]:
    """The host name and pid of the calling (worker) process."""
    return socket.gethostname(), os.getpid()


#: Why unfinished tasks end when the runtime stops them (hpc.shutdown, hpc.init, the kernel).
SHUT_DOWN_REASON = "the runtime was shut down"


def shut_down_error(engine: str) -> BackendError:
    """What a call on an engine that was shut down raises, for ``engine`` ("Dask", "Ray")."""
    return BackendError(f"the {engine} backend is shut down; call hpc.init() to start a new one")


def wanted_resources(task: Any, cpus: bool = False) -> dict[str, float]:
    """What ``task`` asks a worker for: its ``resources=`` plus ``gpus=`` as ``GPU`` (``cpus``: and ``CPU``)."""
    opts = task.options
    wanted = {"CPU": opts.cpus} if cpus else {}
    wanted.update(opts.resources)
    if opts.gpus:
        wanted["GPU"] = opts.gpus
    return wanted


def offered(wanted: dict[str, float], offers: list[dict[str, float]]) -> bool:
    """True when some worker's resources (``offers``, one dict each) cover ``wanted``.

    No worker at all is no answer either way (an adaptive cluster scaling up): True, and
    the engine queues the task until one comes.
    """
    return not offers or any(all(o.get(k, 0) >= v for k, v in wanted.items()) for o in offers)


#: The options a request is made of, in the order a message lists them, with the value that drops each.
_REQUEST_OPTIONS = (("cpus", "cpus=1"), ("gpus", "gpus=0"), ("resources", "resources={}"), ("memory", "memory=None"))


def _asked(task: Any, options: tuple[str, ...] | None) -> tuple[str, ...]:
    """The options of ``task`` a refusal is about: ``options``, else every one it set away from its default."""
    if options is not None:
        return options
    opts = task.options
    return tuple(k for k, _ in _REQUEST_OPTIONS if (opts.cpus != 1 if k == "cpus" else getattr(opts, k)))


def describe_request(task: Any, options: tuple[str, ...] | None = None) -> str:
    """The task's request as its author wrote it: ``gpus=1``, ``cpus=4``, ``resources={'TPU': 1}``, ``memory=2 GiB``."""
    from eugo_lab.units import fmt_bytes

    opts = task.options
    words = {"cpus": lambda: f"cpus={opts.cpus:g}", "gpus": lambda: f"gpus={opts.gpus:g}",
             "resources": lambda: f"resources={dict(opts.resources)!r}",
             "memory": lambda: f"memory={fmt_bytes(opts.memory)}"}
    return ", ".join(words[k]() for k in _asked(task, options))


def _request(task: Any, options: tuple[str, ...]) -> dict[str, float]:
    """What ``ResourceRequestError.request`` holds for these options (``{"CPU": 4}``, ``{"GPU": 1}``...)."""
    opts = task.options
    out: dict[str, float] = {}
    for k in options:
        if k == "cpus":
            out["CPU"] = opts.cpus
        elif k == "gpus":
            out["GPU"] = opts.gpus
        elif k == "resources":
            out.update(opts.resources)
        elif k == "memory":
            out["memory"] = opts.memory
    return out


def request_error(task: Any, have: str, how: str, options: tuple[str, ...] | None = None) -> ResourceRequestError:
    """The one wording, on every engine, of a ``cpus=``/``gpus=``/``resources=``/``memory=`` request it cannot meet.

    ``have``: what the cluster has instead ("this local pool has no GPU workers (...)");
    ``how``: what would give the task a worker that can run it; ``options``: which of the
    task's options are refused (default: every one it set away from its default).
    """
    asked = _asked(task, options)
    drop = ", ".join(d for k, d in _REQUEST_OPTIONS if k in asked)
    name = task.fn.name
    return ResourceRequestError(
        f"task {name}() requested {describe_request(task, asked)}, but {have}; {how}, or drop the request "
        f"({name}.options({drop})).", request=_request(task, asked))


#: The option each resource name of a request comes from (any other name: ``resources=``).
_OPTION_OF = {"CPU": "cpus", "GPU": "gpus", "memory": "memory"}


def no_offer_error(task: Any, wanted: dict[str, float], offers: list[dict[str, float]], *, engine: str,
                   unit: str, how: str) -> ResourceRequestError:
    """The error for a request no ``unit`` ("worker", "node") of the cluster offers; ``how`` starts one that does."""
    need = ", ".join(f"{k}={v:g}" for k, v in wanted.items())
    have = sorted({", ".join(f"{k}={o.get(k, 0):g}" for k in wanted) if o else "no resources" for o in offers})
    # Name the options the request came from; a default cpus=1 is part of what Ray asks, not what the user did.
    named = {_OPTION_OF.get(k, "resources") for k in wanted if not (k == "CPU" and task.options.cpus == 1)}
    options = tuple(k for k, _ in _REQUEST_OPTIONS if k in named)
    return request_error(task, f"no {unit} of the {engine} cluster offers {need}: its {len(offers)} {unit}(s) offer "
                         f"{'; '.join(have)}", f"start {how}", options)


#: How to get workers that offer GPUs or other resources, for engines whose workers offer none.
RESOURCE_ENGINES = ("run on a Dask or Ray cluster whose workers have them (hpc.init(backend='dask', "
                    "resources={'GPU': 1}), hpc.init(backend='ray', num_gpus=1))")


def refuse_options(task: Any, engine: str, workers: int) -> None:
    """Raise for what a ``threads`` task asks that a thread of this process cannot give.

    GPUs and other resources (its workers offer none: a ``gpus=1`` task would run on the CPU
    without a word), more than one core (a thread is one core's worth of work under the
    GIL; nothing else can be held back for it), and a memory limit (the threads share one
    process: one task's memory cannot be told from the others', nor stopped alone).
    """
    opts = task.options
    if wanted_resources(task):
        raise request_error(task, f"the {engine} backend has no GPU workers and offers no resources",
                            RESOURCE_ENGINES, tuple(k for k in ("gpus", "resources") if getattr(opts, k)))
    if opts.cpus > 1:
        raise request_error(task, f"the {engine} backend runs each task on one of its {workers} threads in this "
                            "process, and cannot hold cores back for one task", "run it on the local pool "
                            "(hpc.init(backend='local')), where a task holds cpus= worker processes", ("cpus",))
    if opts.memory:
        raise request_error(task, f"the {engine} backend runs tasks as threads of this process, where one task's "
                            "memory cannot be measured apart from the others' nor stopped alone", "run it on the "
                            "local pool (hpc.init(backend='local')), which stops a task that outgrows its limit",
                            ("memory",))


def describe_cpus(descriptions: list[str]) -> str:
    """One line for the CPUs of a cluster's workers (one description per worker, as ``describe_cpu`` gives).

    ``AMD EPYC (x86-64, 2 cores)`` when all are alike; ``2x AMD EPYC (...); 1x ARM Neoverse V2 (...)`` when not.
    """
    counts = collections.Counter(d for d in descriptions if d)
    if len(counts) <= 1:
        return next(iter(counts), "")
    return "; ".join(f"{n}x {d}" for d, n in sorted(counts.items()))


def this_cpu() -> str:
    """The CPU of the machine this runs on, for engines whose workers all run here."""
    from eugo_lab.hardware.cpu import describe_cpu

    return describe_cpu()


# -- driver side -----------------------------------------------------------------------------
class WorkerIndex:
    """Maps an engine's worker identity (an address, a worker id) to a small stable int."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[Any, int] = {}
        self._info: list[base.WorkerInfo] = []

    def index(self, key: Any, host: str = "", pid: int = 0, address: str = "") -> int:
        """The index of worker ``key``, assigning the next one on first sight."""
        with self._lock:
            i = self._by_key.get(key)
            if i is None:
                i = self._by_key[key] = len(self._info)
                self._info.append(base.WorkerInfo(i, host, pid, address))
            else:
                w = self._info[i]
                if pid and not w.pid:
                    w.host, w.pid = host, pid
            return i

    def all(self) -> list[base.WorkerInfo]:
        """Every worker seen so far (also ones that have gone)."""
        with self._lock:
            return list(self._info)


class Reporter:
    """Delivers task outcomes: at most one ``on_done`` per attempt, from one thread of ours.

    ``register`` when a task is handed to the engine; ``finish`` from any thread when it
    ended (the first call for an attempt wins, later ones are ignored, e.g. a result that
    arrives after ``cancel`` already reported the task cancelled).
    """

    def __init__(self, name: str):
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[int, base.DoneCallback, Any, Any]] = {}
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()
        self.last_activity = time.monotonic()

    def register(self, task: Any, on_done: base.DoneCallback, handle: Any) -> None:
        """Remember ``task``'s current attempt and the engine's handle for it."""
        with self._lock:
            self._pending[task.task_id] = (task.attempt, on_done, handle, task)
            self.last_activity = time.monotonic()

    def handle(self, task: Any) -> Any:
        """The engine handle of ``task``'s current attempt, or ``None`` if it already ended."""
        with self._lock:
            entry = self._pending.get(task.task_id)
        return None if entry is None or entry[0] != task.attempt else entry[2]

    def finish(self, task: Any, attempt: int, result: Outcome) -> bool:
        """Report attempt ``attempt`` of ``task``; False if it was already reported."""
        with self._lock:
            entry = self._pending.get(task.task_id)
            if entry is None or entry[0] != attempt:
                return False
            del self._pending[task.task_id]
            self.last_activity = time.monotonic()
        self._q.put((entry[1], (task, result)))
        return True

    def post(self, fn: Callable, *args: Any) -> None:
        """Run ``fn(*args)`` on the reporter thread (in order with the reports)."""
        self._q.put((fn, args))

    @property
    def busy(self) -> int:
        """Attempts handed to the engine and not reported yet."""
        return len(self._pending)

    def cancel(self, task: Any) -> Any:
        """Report ``task``'s current attempt cancelled now; return the engine's handle for it.

        ``None`` when the attempt had already ended (nothing to stop) or was handed over
        without a handle yet; the caller then stops the engine's work with the handle.
        """
        handle = self.handle(task)
        if not self.finish(task, task.attempt, Outcome.cancelled()):
            return None
        return handle

    def cancel_all(self, reason: str = SHUT_DOWN_REASON) -> list[Any]:
        """Report every attempt not reported yet as cancelled; return the engine handles."""
        return self.finish_all(Outcome.cancelled(reason))

    def finish_all(self, result: Outcome) -> list[Any]:
        """Report every attempt not reported yet with ``result``; return the engine handles."""
        with self._lock:
            entries = list(self._pending.values())
        for attempt, _, _, task in entries:
            self.finish(task, attempt, result)
        return [h for _, _, h, _ in entries]

    def stop(self, timeout: float = 5.0) -> None:
        """Deliver what is queued, then end the thread."""
        self._q.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:  # one bad callback must not stop every report
                log.exception("eugo_lab: reporting a task outcome failed")


def error_outcome(exc: BaseException, engine: str) -> tuple[bytes, str]:
    """``(pickled exception, traceback text)`` for an engine-level failure of a task.

    A worker without eugo_lab is the usual cause on a real cluster: say so, for ``engine``.
    """
    if isinstance(exc, ModuleNotFoundError) and "eugo_lab" in str(exc):
        exc = BackendError(f"{engine} backend: a {engine.capitalize()} worker cannot import eugo_lab ({exc}); "
                           "install eugo-lab on every worker (the same version as on the driver)")
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return _pickle_exception(exc), tb
