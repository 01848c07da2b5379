"""The embedded default engine: a pool of worker processes on this machine.

Unlike ``ProcessPoolExecutor`` and loky, a dying worker costs only the task it was
running: the pool notices the closed pipe, reports that one task as crashed (the runtime
retries it), puts the tasks the worker had prefetched back at the head of the queue and
starts a replacement. See ``local_worker`` for why workers survive Jupyter's Interrupt
and never outlive the driver.

One I/O thread owns every pipe. It reads results from all workers with one ``select``,
writes tasks without blocking (a 100 MB argument never stalls the other workers), and
dispatches queued tasks to the least-loaded worker. Submitting only appends to a deque
and, when the I/O thread is not already awake, writes one byte to wake it.
"""

from __future__ import annotations

import collections
import math
import os
import pickle
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from eugo_lab.backends import local_args, local_gpus, local_nested, local_process, local_template
from eugo_lab.backends.local_process import Worker, usable_cores
from eugo_lab.backends.local_wire import LEN as _LEN
from eugo_lab.backends.local_wire import TASK_ID as _ID
from eugo_lab.backends.shm_store import (
    OOB_BYTES,
    claim_result,
    drop_result,
    make_store_dir,
    read_object,
    sweep_results,
    write_object,
)
from eugo_lab.contract import base, outcome
from eugo_lab.contract.errors import BackendError, NoWorkersError, describe_exit
from eugo_lab.contract.item_cost import ItemCost, task_seconds
from eugo_lab.contract.outcome import Crash, Outcome
from eugo_lab.contract.refs import ObjectRef, describe_type
from eugo_lab.contract.row import TaskStats
from eugo_lab.contract.task import Task

# How much work a worker may hold beyond the task it runs. Prefetching hides the round
# trip for tiny tasks; for long tasks it would strand work on a busy worker at the tail,
# so we prefetch only about PREFETCH_SECONDS of measured work, at most MAX_PREFETCH tasks.
PREFETCH_SECONDS = 0.002
MAX_PREFETCH = 32
# Unknown functions get one task prefetched until their first result tells us more.
DEFAULT_PREFETCH = 1
# Functions a worker keeps loaded (least recently used evicted, re-sent when needed) and per-function cost
# estimates the pool keeps: a session that maps a new lambda every call stays flat. 256 covers every
# function a notebook uses at once many times over; a function's pickle is typically a few KiB.
WORKER_FUNCTIONS = 256
# How long a cancelled running task may take to stop (after TaskCancelled is raised in it)
# before its worker is killed; the default of hpc.init(cancel_grace=...).
CANCEL_GRACE_SECONDS = 1.0
# How often the resident memory of workers running memory-limited tasks is read.
MEMORY_POLL_SECONDS = 0.05
# Workers that die before saying hello, in a row, before the pool gives up: a broken
# environment (missing package, bad PYTHONPATH) must fail tasks, not respawn forever.
MAX_FAILED_STARTS_PER_WORKER = 3
# Workers are forked from a pre-imported template process (local_zygote): ~1 ms a worker
# instead of ~20 ms of CPU for a fresh interpreter, at start-up and after a crash. A template
# that dies is replaced on the next worker start, at most this many times per pool; past that,
# or when one cannot start, workers are spawned as fresh interpreters (the pool stays usable).
MAX_TEMPLATE_STARTS = 3
USE_TEMPLATE = local_template.USE_TEMPLATE
_SPAWN_WORKER = local_process.spawn_worker

_QUEUED, _SENT, _DONE = 0, 1, 2


def _slots(task: Task) -> int:
    """Worker processes a task holds while it runs: ``cpus=`` rounded up, at least one."""
    cpus = task.options.cpus
    return 1 if cpus <= 1 else math.ceil(cpus)


def _fits_stack(task: Task) -> bool:
    """A task a worker may run on top of a waiting one: it needs no GPU and no more than that one worker."""
    return not task.options.gpus and _slots(task) == 1


def _total_memory() -> int:
    """Physical memory of this machine in bytes (what psutil reports as total, without importing psutil)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        import psutil

        return psutil.virtual_memory().total


class LocalBackend(base.Backend):
    """A pool of ``workers`` processes on this machine (default: one per usable core).

    GPU workers: with GPUs here (or named by ``gpus=``, see :mod:`~eugo_lab.backends.local_gpus`)
    workers ``0 .. k-1`` hold one device each (``CUDA_VISIBLE_DEVICES`` set to it alone) and the
    others see none. A ``gpus=1`` task runs only on a GPU worker (it waits in its own queue while
    they are busy); other tasks run on the CPU workers, and on a GPU worker only while it sits
    idle with no GPU task waiting. There are at least as many workers as devices, unless
    ``workers=`` asks for fewer than were found (then only the first devices get a worker).

    ``cpus=N``: each worker is one process with one core's worth of threads, so a task that asks
    for ``N`` cores holds ``N`` workers while it runs: it starts when ``N`` workers are idle, runs
    on one of them and keeps the other ``N - 1`` idle until it ends, so the threads or processes
    it starts itself have ``N`` cores to themselves. Tasks queued after it wait (no task jumps
    the queue, so a wide task is never starved by narrow ones). A fraction rounds up (a task
    always holds a whole worker); more than the pool has is refused at submission.
    """

    name = "local"
    # Larger argument buffers go through shared memory: one copy at .remote(), no pickling
    # through the pipe (a 100 MB array by value took ~0.6 s per task through the pipe).
    oob_threshold = OOB_BYTES

    def __init__(self, workers: int | None = None, env: dict[str, str] | None = None,
                 threads_per_worker: int | None = None, memory_limit: int | str | None = None,
                 cancel_grace: float = CANCEL_GRACE_SECONDS, gpus: Any = None):
        """``cancel_grace``: seconds a cancelled running task gets to stop before its worker is killed.

        ``gpus``: the devices that get a GPU worker each: ``[0, 1]``, ``0`` for none, a count for
        the first ones found; default: ``EUGO_LAB_GPU_DEVICES``, ``CUDA_VISIBLE_DEVICES``, or
        every GPU NVML finds (:func:`eugo_lab.backends.local_gpus.resolve`).

        A task stops at once unless it catches ``TaskCancelled`` (to clean up, say) or sits in
        C code that holds the GIL; past the grace its worker is killed and replaced. A longer
        grace suits tasks with real clean-up to do; ``0`` kills at once.
        """
        from eugo_lab.units import parse_bytes, parse_grace

        cores = usable_cores()
        self.memory_limit = parse_bytes(memory_limit, "memory_limit")
        self.cancel_grace = parse_grace(cancel_grace)
        self._failed_starts = 0
        self._no_workers: str | None = None
        self.devices = local_gpus.fit(local_gpus.resolve(gpus), workers)
        self.n_gpu = len(self.devices)  # workers 0 .. n_gpu-1 hold GPU i each
        self.n_workers = max(workers or cores, self.n_gpu)
        self._gpu_envs = local_gpus.worker_envs(self.devices, self.n_workers) if self.n_gpu else None
        if threads_per_worker is None:  # EUGO_THREADS_PER_WORKER: the same explicit choice, from the environment
            from eugo_lab.settings import THREADS_PER_WORKER_ENV

            raw = os.environ.get(THREADS_PER_WORKER_ENV, "").strip()
            threads_per_worker = int(raw) if raw.isdigit() and int(raw) > 0 else None
        self.threads_per_worker = threads_per_worker or max(1, cores // self.n_workers)
        self._threads_explicit = threads_per_worker is not None  # the user's choice wins over thread variables
        self.extra_env = dict(env or {})
        self._workers: list[Worker] = []
        self._queue: collections.deque[Task] = collections.deque()
        self._gpu_queue: collections.deque[Task] = collections.deque()  # gpus= tasks, for GPU workers only
        self._incoming: collections.deque[tuple[str, Any]] = collections.deque()
        self._wake_pending = False
        self._wake_r = self._wake_w = -1  # the I/O thread's wake-up pipe, -1 while closed
        self._wake_lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()
        self._sel = selectors.DefaultSelector()
        self._item_cost: dict[int, ItemCost] = {}  # by function id: sizes what a worker may prefetch
        self._on_done: dict[int, base.DoneCallback] = {}
        self._held: dict[int, list[Worker]] = {}  # by task id: the idle workers a cpus=N task holds
        # Tasks submitted from inside a task, queued, by the id of that parent: a parent waiting on
        # them runs them on its own worker (local_nested). Entries go when the parent ends.
        self._children: dict[int, collections.deque[Task]] = {}
        #: Called on the I/O thread with (worker index, message) for each request of a task that submits
        #: tasks (``("nest", op, ...)``); the runtime sets it (eugo_lab.hpc.nested), and answers with :meth:`tell`.
        self.nested_handler: Callable[[int, tuple], None] | None = None
        self._thread: threading.Thread | None = None
        self._store_dir = ""
        self._ready = threading.Event()
        self._all_greeted = threading.Event()
        self._start_error: BaseException | None = None
        self._lock = threading.Lock()
        self._template: local_template.Template | None = None
        self._template_starts = 0
        self._prestarted: local_template.Template | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the I/O thread, which spawns the workers (so they die with it, never earlier)."""
        # Taken here, on the thread that started the runtime: an older pool's I/O thread, still
        # spawning while it shuts down, must not take the template hpc.init() started for this one.
        self._prestarted = local_template.take_prestarted()
        self._store_dir = make_store_dir()
        self._arguments = local_args.SharedArguments(self._store_dir)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name="eugo-local-io", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._start_error is not None:
            raise BackendError(f"could not start local worker processes: {self._start_error}") from self._start_error

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until every worker process has started (imported its code and said hello)."""
        # Not _cluster.this_cpu: _cluster (with the worker shim, ctypes, logging) is ~2 ms of
        # imports the local pool's start-up does not need; the driver's imports are that start-up.
        from eugo_lab.hardware.cpu import describe_cpu

        describe_cpu()  # init() reports it next (cached): read /proc/cpuinfo while the workers boot, not after
        deadline = time.monotonic() + timeout
        while not self._all_greeted.wait(0.1):
            if self._no_workers or self._stopping or time.monotonic() > deadline:
                return  # tasks will report what is wrong; init() must not hang

    def _spawn(self, index: int) -> Worker:
        return self._spawn_many([index])[0]

    def _spawn_many(self, indices: list[int]) -> list[Worker]:
        """Start these workers: forked by the template when one fits, else as fresh interpreters."""
        return self._finish_spawn(*self._ask_spawn(indices))

    def _ask_spawn(self, indices: list[int]) -> tuple[list[int], list[dict[str, str]], list[Worker | None]]:
        """Ask the template for these workers (if one fits) without waiting for it; see _finish_spawn."""
        env = local_process.worker_env(self.threads_per_worker, self.extra_env, self._threads_explicit)
        envs = [env] * len(indices)
        if self._gpu_envs is not None:
            # CUDA reads CUDA_VISIBLE_DEVICES once, when a library first initialises it in the
            # process (cuInit). A worker forked by the template sets its environment before it
            # serves (local_zygote._fork) and the template never initialises CUDA, so a forked
            # GPU worker sees only its device, as a spawned one does; the variable is not one
            # read at process start (_startup_env), so GPU and CPU workers fork from one template.
            envs = [{**env, **self._gpu_envs[i]} for i in indices]
        template = self._template_for(env)
        asked: list[Worker | None] = [None] * len(indices)
        if template is not None:
            asked = local_process.ask_workers(template, indices, self._store_dir, envs)
        return indices, envs, asked

    def _finish_spawn(self, indices: list[int], envs: list[dict[str, str]],
                      asked: list[Worker | None]) -> list[Worker]:
        """The workers asked for: those the template forked, the others spawned now."""
        template = self._template
        found = asked
        if template is not None and any(w is not None for w in asked):
            found = local_process.answered(template, asked)
            if not template.alive:
                self._drop_template()
        workers = [w or local_process.spawn_worker(i, self._store_dir, env)
                   for i, w, env in zip(indices, found, envs)]
        for w in workers:
            if w.index < self.n_gpu:
                w.gpu = self.devices.indices[w.index]
            self._sel.register(w.result_r, selectors.EVENT_READ, w)
        return workers

    def _template_for(self, env: dict[str, str]) -> local_template.Template | None:
        """The template to fork a worker with this environment from (started if need be), or None to spawn."""
        pre, self._prestarted = self._prestarted, None  # one this pool does not use is closed, not leaked
        t = self._template
        if not USE_TEMPLATE or local_process._WORKER_CMD != local_process.DEFAULT_WORKER_CMD \
                or local_process.spawn_worker is not _SPAWN_WORKER:
            t = None  # a replaced worker command or spawner (tests) is not what the template runs
        elif t is not None and t.alive:
            # A forked worker keeps the template's variables read at process start (PYTHON*, LD_*):
            # one that should start with others (sys.path changed since, say) is spawned.
            t = t if t.fits(env) else None
        else:
            if t is not None:
                self._drop_template()
            t = None
            if self._template_starts < MAX_TEMPLATE_STARTS:
                self._template_starts += 1
                if pre is not None and pre.fits(env):  # else started for another environment (init(env=...))
                    t, pre = pre, None
                else:
                    try:
                        t = local_template.Template(env)
                    except OSError:
                        t = None
                if t is not None:
                    self._template = t
                    self._sel.register(t.fileno(), selectors.EVENT_READ, t)
        if pre is not None:
            pre.close()
        return t

    def _drop_template(self) -> None:
        t, self._template = self._template, None
        if t is None:
            return
        try:
            self._sel.unregister(t.fileno())
        except (KeyError, ValueError):
            pass
        t.close()

    def _on_template(self, t: local_template.Template) -> None:
        t.poll()  # exit reports of workers; EOF: the template died
        if not t.alive and t is self._template:
            self._drop_template()

    def template_pid(self) -> int | None:
        """Process id of the live template process, if workers are forked from one (tests and diagnostics)."""
        t = self._template
        return t.pid if t is not None and t.alive else None

    def shutdown(self) -> None:
        """Stop every worker (at once, also mid-task) and the I/O thread; idempotent."""
        if self._thread is None or self._stopping:
            self._stopped.wait(10)
            return
        self._post("stop", None)
        if threading.current_thread() is not self._thread:
            self._thread.join(15)

    # -- submission (any thread) --------------------------------------------------------
    def _post(self, kind: str, item: Any) -> None:
        self._incoming.append((kind, item))
        # See _drain_incoming for why clearing the flag before draining is race-free.
        if not self._wake_pending:
            self._wake_pending = True
            # Under the lock, and only while the pipe is open: a write after _teardown closed
            # it would land in whatever file reused that descriptor number (a socket of
            # another engine, a log). Late posts happen: an ObjectRef collected after
            # shutdown posts its "drop".
            with self._wake_lock:
                if self._wake_w >= 0:
                    try:
                        os.write(self._wake_w, b"x")
                    except (BlockingIOError, OSError):
                        pass

    def submit(self, task: Task, on_done: base.DoneCallback) -> None:
        """Queue a task; ``on_done`` is called from the I/O thread."""
        if self._stopping:
            raise BackendError("the local pool is shut down; call hpc.init() to start a new one")
        if self._no_workers:
            raise NoWorkersError(self._no_workers)
        opts = task.options
        if opts.gpus or opts.resources or opts.cpus > 1:
            self._check_request(task)
        self._on_done[task.task_id] = on_done
        self._post("task", task)

    def _check_request(self, task: Task) -> None:
        """Raise :class:`~eugo_lab.contract.errors.ResourceRequestError` for a request no worker of this pool meets."""
        # Only a task asking for resources pays for importing _cluster (~2 ms at pool start otherwise).
        from eugo_lab.backends._cluster import RESOURCE_ENGINES, request_error

        opts = task.options
        if opts.resources:
            raise request_error(task, f"the local pool offers no custom resources (its {self.n_workers} workers "
                                f"offer CPUs{', and GPUs ' + self.devices.describe() if self.n_gpu else ''})",
                                RESOURCE_ENGINES, ("resources",))
        if opts.gpus and not self.n_gpu:
            raise request_error(task, f"this local pool has no GPU workers ({self.devices.reason})",
                                "run it on a machine with a GPU (or on a Dask or Ray cluster whose workers have "
                                "one: hpc.init(backend='ray', num_gpus=1))", ("gpus",))
        if opts.gpus > 1:
            raise request_error(task, f"each GPU worker of this local pool holds one device (it has {self.n_gpu}: "
                                f"{self.devices.describe()})", "split the work into gpus=1 tasks (or run it on a "
                                "Dask or Ray cluster whose workers hold several GPUs)", ("gpus",))
        if _slots(task) > self.n_workers:
            raise request_error(task, f"this local pool has {self.n_workers} worker processes (a task holds "
                                "cpus= of them while it runs)", f"ask for at most cpus={self.n_workers}, or run it "
                                "on a Dask or Ray cluster with larger workers "
                                "(hpc.init(backend='ray'), whose tasks get cpus= cores of a node)", ("cpus",))

    def cancel(self, task: Task) -> None:
        """Drop a queued task; a running one is stopped by replacing its worker."""
        self._post("cancel", task)

    def tell(self, worker: int, msg: tuple) -> None:
        """Send ``msg`` to worker ``worker``'s task pipe (an answer to a task that submits tasks); any thread."""
        self._post("tell", (worker, msg))

    # -- objects ------------------------------------------------------------------------
    def put(self, obj: Any) -> ObjectRef:
        """Write ``obj`` once to shared memory; workers map it read-only."""
        with self._lock:
            ref = ObjectRef(None, 0, describe_type(obj))
        path = os.path.join(self._store_dir, f"obj-{ref.ref_id}")
        ref.nbytes = write_object(obj, path)
        ref.location = path
        return self._releasing(ref, path)

    def adopt(self, path: str, nbytes: int, type_name: str) -> ObjectRef:
        """A reference to an object a task stored itself under this pool's store (``hpc.put`` inside a task)."""
        if os.path.dirname(os.path.abspath(path)) != os.path.abspath(self._store_dir):
            raise BackendError(f"{path} is not in this pool's object store")
        with self._lock:
            ref = ObjectRef(path, nbytes, type_name)
        return self._releasing(ref, path)

    def _releasing(self, ref: ObjectRef, path: str) -> ObjectRef:
        """``ref``, which removes its file at ``path`` and tells the workers to drop it when released."""
        ref_id = ref.ref_id

        def release() -> None:
            try:
                os.unlink(path)
            except OSError:
                pass
            if not self._stopping:
                self._post("drop", ref_id)

        ref._release = release
        return ref

    def stage_buffers(self, task_id: int, buffers: list[memoryview]) -> tuple:
        """Copy a task's large argument buffers into shared memory, once for tasks sent the same array.

        Workers map each copy privately (copy-on-write); see :mod:`~eugo_lab.backends.local_args`.
        """
        return self._arguments.stage(task_id, buffers)

    def copied_bytes(self, staged: tuple) -> int:
        """The bytes :meth:`stage_buffers` copied for this task (0 for a buffer it shared with another task)."""
        return self._arguments.copied(staged)

    def release_staged(self, staged: tuple) -> None:
        """The task is final: delete the copies no pending task uses (workers that mapped one keep it)."""
        self._arguments.release(staged)

    def get_object(self, ref: ObjectRef) -> Any:
        """Read the stored object back (zero-copy for its large buffers)."""
        return read_object(ref.location)

    # -- info -----------------------------------------------------------------------------
    def info(self) -> base.ClusterInfo:
        """Pool size, cores and memory of this machine."""
        from eugo_lab.hardware.cpu import describe_cpu


        return base.ClusterInfo(
            backend="local",
            workers=self.n_workers,
            cores=usable_cores(),
            memory=_total_memory(),
            gpus=self.n_gpu,
            address="local processes",
            threads_per_worker=self.threads_per_worker,
            cpu=describe_cpu(),
            gpu_workers={i: self.devices.indices[i] for i in range(self.n_gpu)},
            gpus_detected=self.devices.present or not self.n_gpu,
        )

    def workers(self) -> list[base.WorkerInfo]:
        """The live workers (``gpu``: the device a GPU worker holds, -1 for a CPU worker)."""
        return [base.WorkerInfo(w.index, w.host, w.pid, gpu=w.gpu) for w in list(self._workers) if not w.dead]

    @property
    def worker_count(self) -> int:
        """Tasks that can run at once."""
        return self.n_workers

    @property
    def explicit_threads_per_worker(self) -> int | None:
        """``threads_per_worker`` when the user chose it (the option or its variable), else ``None``."""
        return self.threads_per_worker if self._threads_explicit else None

    @property
    def started_workers_here(self) -> bool:
        """Always: the pool's workers are this process's children."""
        return True

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (tests and diagnostics)."""
        return [w.pid for w in list(self._workers) if not w.dead]

    # -- the I/O thread -----------------------------------------------------------------
    def _run(self) -> None:
        try:
            asked = self._ask_spawn(list(range(self.n_workers)))
            if not any(w is not None for w in asked[2]):  # no template: spawn now, errors go to start()
                self._workers = self._finish_spawn(*asked)
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._drop_template()
            if self._prestarted is not None:
                self._prestarted.close()
            self._start_error = exc
            self._ready.set()
            return
        # start() returns before the template answers: the caller goes on (pickling its first
        # task, say) while the template boots. Tasks wait in the queue for the workers' hello.
        self._ready.set()
        if not self._workers:
            try:
                self._workers = self._finish_spawn(*asked)
            except Exception as exc:  # noqa: BLE001 - no workers: tasks fail, init() does not hang
                self._no_workers = f"could not start local worker processes: {exc}"
        try:
            while True:
                for key, mask in self._sel.select(self._select_timeout()):
                    w = key.data
                    if w is None:
                        continue
                    if isinstance(w, local_template.Template):
                        self._on_template(w)
                        continue
                    if mask & selectors.EVENT_READ:
                        self._read(w)
                    if mask & selectors.EVENT_WRITE and not w.dead:
                        self._flush(w)
                if self._drain_incoming():
                    break
                self._check_memory()
                self._check_cancels()
                if any(w.blocked for w in self._workers):
                    self._help()
                self._dispatch()
        except BaseException:  # pragma: no cover - a bug here must not hang callers
            import logging

            logging.getLogger("eugo_lab").exception("local pool I/O thread failed")
            self._fail_all("the local pool's I/O thread failed (see the log)")
        finally:
            self._teardown()

    def _drain_incoming(self) -> bool:
        # Clear the flag *before* taking items: a producer that saw it set appended its
        # item before we clear, so we take it below; one that sees it clear will wake us.
        self._wake_pending = False
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        incoming = self._incoming
        stop = False
        while incoming:
            kind, item = incoming.popleft()
            if kind == "task":
                item.state = _QUEUED
                if self.n_gpu and item.options.gpus:
                    self._gpu_queue.append(item)
                else:
                    self._queue.append(item)
                if item.parent >= 0:
                    kids = self._children.get(item.parent)
                    if kids is None:
                        kids = self._children[item.parent] = collections.deque()
                    kids.append(item)
            elif kind == "cancel":
                self._cancel(item)
            elif kind == "drop":
                data = self._frame(("drop", item))
                for w in self._workers:
                    if not w.dead:
                        w.outbuf += data
                        self._flush(w)
            elif kind == "tell":
                index, msg = item
                w = self._workers[index] if 0 <= index < len(self._workers) else None
                if w is not None and not w.dead:
                    w.outbuf += self._frame(msg)
                    self._flush(w)
            elif kind == "stop":
                stop = True
        if stop:
            self._stopping = True
        return stop

    def _limit_of(self, task: Task) -> int | None:
        return task.options.memory or self.memory_limit

    def _select_timeout(self) -> float:
        if self._stopping or any(w.cancel_target is not None for w in self._workers):
            return 0.05
        # Poll memory often while a limited task runs: a task allocating 1 GB/s overshoots
        # its limit by at most ~MEMORY_POLL_SECONDS worth of growth before it is stopped.
        for w in self._workers:
            if w.inflight and not w.dead and self._limit_of(w.inflight[0]):
                return MEMORY_POLL_SECONDS
        return 1.0

    def _check_memory(self) -> None:
        """Stop a worker whose resident memory passed its running task's limit."""
        for w in self._workers:
            if w.dead or not w.inflight or w.kill_reason is not None:
                continue
            limit = self._limit_of(w.inflight[0])
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

    def _capacity(self, task: Task) -> int:
        cost = self._item_cost.get(task.fn.fid)
        if cost is None:
            return 1 + DEFAULT_PREFETCH
        return 1 + min(MAX_PREFETCH, cost.items_in(PREFETCH_SECONDS))

    def _dispatch(self) -> None:
        queue = self._queue
        # Only workers that said hello get tasks: a task handed to one still starting (or to one
        # that never will) would wait for it while another worker sits idle. Until the first
        # hello, tasks stay queued; workers that keep failing to start fail them (_give_up).
        live = [w for w in self._workers if w.greeted and not w.dead and w.held_by is None]
        if not live:
            if self._no_workers and all(w.dead for w in self._workers):
                lost = Outcome.crashed(Crash(outcome.NO_WORKERS, message=self._no_workers))
                for q in (self._gpu_queue, queue):
                    while q:
                        t = q.popleft()
                        if t.state == _QUEUED:
                            t.state = _DONE
                            self._report(t, lost)
            return
        if self.n_gpu:
            self._dispatch_gpu(live)
        else:
            self._fill(queue, live)

    def _fill(self, queue: collections.deque[Task], workers: list[Worker], spare: list[Worker] | None = None) -> None:
        """Hand ``queue``'s tasks, in order, to the least-loaded of ``workers`` while one has room.

        ``spare``: the workers a ``cpus=N`` task may hold besides the one it runs on (default: ``workers``).
        """
        while queue:
            task = queue[0]
            if task.state != _QUEUED:  # cancelled while queued, or taken by a waiting parent (_help)
                queue.popleft()
                continue
            if task.options.cpus > 1 and _slots(task) > 1:
                if not self._send_wide(task, workers, spare or workers):
                    return
                queue.popleft()
                workers = [w for w in workers if w.held_by is None]
                continue
            w = min(workers, key=lambda w: len(w.inflight))
            if len(w.inflight) >= self._capacity(task):
                return
            queue.popleft()
            self._send(w, task)

    def _send_wide(self, task: Task, first: list[Worker], spare: list[Worker]) -> bool:
        """Send a ``cpus=N`` task to an idle worker of ``first`` and hold ``N - 1`` other idle ones of ``spare``.

        False (nothing sent) while fewer are idle: the task waits at the head of its queue.
        CPU workers are held before GPU workers, which stay free for GPU tasks.
        """
        main = next((w for w in first if not w.inflight), None)
        if main is None:
            return False
        others = sorted((w for w in spare if w is not main and not w.inflight and w.held_by is None),
                        key=lambda w: w.gpu >= 0)[: _slots(task) - 1]
        if len(others) < _slots(task) - 1:
            return False
        for w in others:
            w.held_by = task
        self._held[task.task_id] = others
        self._send(main, task)
        return True

    def _release(self, task: Task) -> None:
        """The workers a ``cpus=N`` task held go back to the pool (it ended, or its worker died)."""
        for w in self._held.pop(task.task_id, ()):
            w.held_by = None

    def _help(self) -> None:
        """Give each worker whose top task waits on tasks it submitted, and that runs nothing else, a task to run.

        One task at a time, in this order: the oldest queued child it waits for (what its get()
        reads first), a task that a worker whose stack is full waits for (that worker cannot take
        it itself), its newest other child, then, on a shallow stack only, the oldest task in the
        queue (the largest piece of a recursion, which keeps the worker busy while its own children
        run elsewhere). See local_nested for why that never deadlocks and keeps stacks shallow.
        """
        queue = self._queue
        stranded: set[int] = set()  # what the top tasks of full stacks wait for
        for w in self._workers:
            if w.blocked and w.blocked[-1][1] == local_nested.HELP_NONE and not w.dead:
                stranded |= w.blocked[-1][2]
        for w in self._workers:
            blocked = w.blocked
            if not blocked or w.dead or len(w.inflight) != len(blocked):
                continue
            key, helping, waiting = blocked[-1]
            if helping == local_nested.HELP_NONE:
                continue
            kids = self._children.get(key)
            pick = None
            if kids:
                while kids and kids[0].state != _QUEUED:  # taken by another worker, or cancelled
                    kids.popleft()
                pick = next((t for t in kids if t.task_id in waiting and t.state == _QUEUED and _fits_stack(t)),
                            None)
            if pick is None and stranded:
                pick = next((t for t in queue if t.task_id in stranded and t.state == _QUEUED and _fits_stack(t)),
                            None)
            if pick is None and kids:
                pick = next((t for t in reversed(kids) if t.state == _QUEUED and _fits_stack(t)), None)
            if pick is None and helping == local_nested.HELP_ANY:
                while queue and queue[0].state != _QUEUED:
                    queue.popleft()
                pick = next((t for t in queue if t.state == _QUEUED and _fits_stack(t)), None)
            if pick is not None:
                self._send(w, pick)

    def _dispatch_gpu(self, live: list[Worker]) -> None:
        """Dispatch in a pool with GPU workers: GPU tasks to GPU workers, the rest to CPU workers first.

        A CPU task goes to an idle CPU worker, else to an idle GPU worker (when no GPU task
        waits), else is prefetched by a CPU worker: an idle worker beats a prefetch slot. A GPU
        worker holds one CPU task at most (no prefetch), so a GPU task that comes next waits for
        at most that one.
        """
        gpu_live = [w for w in live if w.gpu >= 0]
        cpu_live = [w for w in live if w.gpu < 0]
        if gpu_live:
            self._fill(self._gpu_queue, gpu_live, live)
            gpu_live = [w for w in gpu_live if w.held_by is None]
            cpu_live = [w for w in cpu_live if w.held_by is None]
        queue = self._queue
        while queue:
            task = queue[0]
            if task.state != _QUEUED:
                queue.popleft()
                continue
            if task.options.cpus > 1 and _slots(task) > 1:
                ok = cpu_live + ([g for g in gpu_live if not g.inflight] if not self._gpu_queue else [])
                if not self._send_wide(task, ok, ok):
                    return
                queue.popleft()
                gpu_live = [w for w in gpu_live if w.held_by is None]
                cpu_live = [w for w in cpu_live if w.held_by is None]
                continue
            w = min(cpu_live, key=lambda w: len(w.inflight)) if cpu_live else None
            if w is None or w.inflight:
                idle = [g for g in gpu_live if not g.inflight] if not self._gpu_queue else []
                if idle:
                    w = idle[0]
                elif w is None or len(w.inflight) >= self._capacity(task):
                    return
            queue.popleft()
            self._send(w, task)

    @staticmethod
    def _frame(msg: tuple) -> bytes:
        data = pickle.dumps(msg, 5)
        return _LEN.pack(len(data)) + data

    def _send(self, w: Worker, task: Task) -> None:
        fn = task.fn
        known = w.known_fns
        if fn.fid in known:
            known.move_to_end(fn.fid)
        else:
            w.outbuf += self._frame(("fn", fn.fid, fn.name, fn.payload))
            known[fn.fid] = None
            fn.sends += 1
            if len(known) > WORKER_FUNCTIONS:
                # The worker reads its pipe in order: a task of the evicted function already sent runs
                # before the worker forgets it, and a later one gets the function sent again.
                w.outbuf += self._frame(("forget", known.popitem(last=False)[0]))
        # A batch's flag says how its items run: 2, each alone (a group of its own; see Task.alone).
        w.outbuf += self._frame(("run", task.task_id, fn.fid, task.args, task.deps_payload,
                                 2 if task.alone else task.is_batch, task.staged, task.probe))
        task.state = _SENT
        task.backend_data = w
        w.inflight.append(task)
        self._flush(w)

    def _flush(self, w: Worker) -> None:
        buf = w.outbuf
        if buf:
            try:
                n = os.write(w.task_w, buf)
                del buf[:n]
            except BlockingIOError:
                pass
            except OSError:  # the worker is gone; its death is handled on read EOF
                buf.clear()
        self._watch_write(w, bool(buf))

    def _watch_write(self, w: Worker, want: bool) -> None:
        try:
            registered = self._sel.get_key(w.task_w)
        except (KeyError, ValueError):
            registered = None
        if want and registered is None:
            self._sel.register(w.task_w, selectors.EVENT_WRITE, w)
        elif not want and registered is not None:
            self._sel.unregister(w.task_w)

    def _read(self, w: Worker) -> None:
        if w.dead:
            return
        try:
            data = os.read(w.result_r, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._worker_died(w)
            return
        buf = w.inbuf
        buf += data
        off = 0
        size = _LEN.size
        while len(buf) - off >= size:
            (n,) = _LEN.unpack_from(buf, off)
            if len(buf) - off - size < n:
                break
            msg = pickle.loads(memoryview(buf)[off + size : off + size + n])
            off += size + n
            self._handle(w, msg)
        del buf[:off]

    def _handle(self, w: Worker, msg: tuple) -> None:
        kind = msg[0]
        if kind == "done":
            _, key, status, payload, detail, raw_stats = msg
            task = w.inflight.popleft()
            if task.task_id != key:  # a task that ran on top of one waiting for its children (local_nested)
                w.inflight.appendleft(task)
                task = next((t for t in w.inflight if t.task_id == key), None)
                if task is None:  # pragma: no cover - protocol invariant
                    raise RuntimeError(f"worker {w.index} answered task {key}, which it was not sent")
                w.inflight.remove(task)
            if self._children:
                self._children.pop(key, None)
            if w.progress:
                w.progress.pop(key, None)
            if self._held:
                self._release(task)
            stats = TaskStats.from_wire(raw_stats)
            if stats is not None:  # None: a cancelled task the worker skipped or stopped
                cost = self._item_cost.get(task.fn.fid)
                if cost is None:
                    if len(self._item_cost) >= WORKER_FUNCTIONS:  # the oldest function's estimate goes first
                        del self._item_cost[next(iter(self._item_cost))]
                    cost = self._item_cost[task.fn.fid] = ItemCost()
                cost.add(task_seconds(stats), task.item_count if task.is_batch else 1)
            if type(payload) is tuple:  # a result the worker wrote into the store (shm_store.write_result)
                if task.state == _DONE:  # cancelled meanwhile: nobody will read it
                    drop_result(payload)
                else:
                    payload = claim_result(payload)
            if task.state != _DONE:
                task.state = _DONE
                result = outcome.from_worker(status, payload, detail, stats, w.index, task.is_batch)
                if w.gpu >= 0 and task.options.gpus:  # the device it held, for the trace (a CPU task: none)
                    result = result._replace(gpu=w.gpu)
                self._report(task, result)
        elif kind == "part":  # a group of a batch's items finished (local_worker: execute_batch's progress)
            _, key, lo, hi, part, failed, next_size, begun, end = msg
            got = w.progress.get(key)
            if got is None:
                got = w.progress[key] = [[], [], begun, 1]
            got[0].append((lo, hi, part, failed))
            got[1].append(end)
            got[3] = next_size
        elif kind == "block":  # its top task waits in get() on tasks it submitted (local_nested)
            w.blocked.append((msg[1], msg[2], frozenset(msg[3])))
        elif kind == "unblock":
            if w.blocked:
                w.blocked.pop()
        elif kind == "nest":
            self._nested(w, msg)
        elif kind == "hello":
            _, w.pid, w.host, _ = msg
            w.greeted = True
            self._failed_starts = 0
            if all(x.greeted or x.dead for x in self._workers):
                self._all_greeted.set()

    def _nested(self, w: Worker, msg: tuple) -> None:
        """A request of a task that submits tasks: to the runtime's handler, which answers through :meth:`tell`."""
        handler = self.nested_handler
        try:
            if handler is None:
                raise BackendError("this pool's runtime takes no requests from its tasks")
            handler(w.index, msg)
        except Exception as exc:  # a broken request fails that task's call, never the I/O thread
            import logging

            logging.getLogger("eugo_lab").exception("a request from a task on worker %s failed", w.index)
            if msg[1] in ("ids", "put"):  # the task waits for an answer: give it the error
                w.outbuf += self._frame(("reply", msg[2], BackendError(f"the driver could not answer: {exc}")))
                self._flush(w)

    def _report(self, task: Task, result: Outcome) -> None:
        on_done = self._on_done.pop(task.task_id, None)
        if on_done is not None:
            try:
                on_done(task, result)
            except Exception:  # one bad callback must not stop the I/O thread
                import logging

                logging.getLogger("eugo_lab").exception("completing task %s failed", task.task_id)

    def _cancel(self, task: Task) -> None:
        if task.state == _DONE:
            return
        if task.state == _SENT:
            w: Worker = task.backend_data
            if not w.dead:
                # Tell the worker which task to drop (it skips a prefetched one, and a running
                # one gets TaskCancelled raised inside it), then wake it with SIGUSR1. A task
                # that does not stop within cancel_grace seconds (C code holding the GIL, a
                # task that swallows the exception) loses its worker: see _check_cancels.
                try:
                    os.write(w.cancel_w, _ID.pack(task.task_id))
                    os.kill(w.pid, signal.SIGUSR1)
                except (OSError, ProcessLookupError):
                    pass
                if w.inflight and w.inflight[0] is task:
                    w.cancel_target = task
                    w.cancel_deadline = time.monotonic() + self.cancel_grace
                if any(b[0] == task.task_id for b in w.blocked):  # it waits on children: turn its wait now
                    w.outbuf += self._frame(("wake",))
                    self._flush(w)
        task.state = _DONE
        self._report(task, Outcome.cancelled())

    def _check_cancels(self) -> None:
        """Kill workers whose cancelled task is still running after the grace period."""
        now = time.monotonic()
        for w in self._workers:
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

    def _worker_died(self, w: Worker) -> None:
        w.dead = True
        for fd in (w.result_r, w.task_w):
            try:
                self._sel.unregister(fd)
            except (KeyError, ValueError):
                pass
        w.close_pipes()
        try:
            code = w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - pipe closed, process stuck
            w.proc.kill()
            code = w.proc.wait()
        # Results it wrote into the store and never announced (it died between writing one and
        # sending its name): nobody else knows their names. Every name it sent was read before the EOF.
        if w.pid:
            sweep_results(self._store_dir, w.pid)
        inflight = list(w.inflight)
        w.inflight.clear()
        if w.blocked:
            # Tasks were waiting on its stack, each on top of another: which of the others had
            # started is not known here, so all of them count as crashed (a crash is retried).
            w.blocked.clear()
            crash = w.kill_reason if isinstance(w.kill_reason, Crash) else Crash(outcome.DIED, exit_code=code)
            for t in inflight:
                self._release(t)
                if t.state != _DONE:
                    t.state = _DONE
                    self._report(t, Outcome.crashed(crash, w.index))
            inflight = []
        if inflight:
            running, rest = inflight[0], inflight[1:]
            self._release(running)
            # Prefetched tasks never started: back to the head of the queue, in order.
            for t in reversed(rest):
                if t.state != _DONE:
                    t.state = _QUEUED
                    (self._gpu_queue if self.n_gpu and t.options.gpus else self._queue).appendleft(t)
            if running.state != _DONE:
                running.state = _DONE
                crash = w.kill_reason if isinstance(w.kill_reason, Crash) else Crash(outcome.DIED, exit_code=code)
                lost = Outcome.crashed(crash, w.index)
                if running.is_batch:  # which of its items finished, and which group was running: see BatchProgress
                    parts, ends, begun, size = w.progress.get(running.task_id) or ((), (), 0.0, 1)
                    done = parts[-1][1] if parts else 0
                    lost = lost._replace(progress=outcome.BatchProgress(
                        tuple(parts), (done, min(done + size, running.item_count)), begun, tuple(ends)))
                self._report(running, lost)
        w.progress.clear()
        if w.held_by is not None:  # a worker held for a cpus=N task died idle: its replacement is free
            held = self._held.get(w.held_by.task_id, [])
            if w in held:
                held.remove(w)
            w.held_by = None
        if self._stopping:
            return
        if not w.greeted:
            self._failed_starts += 1
        if self._failed_starts >= MAX_FAILED_STARTS_PER_WORKER * self.n_workers:
            self._give_up(code)
            return
        self._workers[w.index] = self._spawn(w.index)

    def _give_up(self, code: int | None) -> None:
        """Workers keep dying before they start: fail what is queued instead of hanging."""
        self._no_workers = (
            f"the local pool has no workers: {self._failed_starts} worker processes in a row exited with "
            f"{describe_exit(code)} before they could start. Check that eugo_lab and the packages your "
            f"tasks import are installed for {sys.executable}, then call hpc.init() to start a new pool."
        )
        # _dispatch fails whatever is queued, now and later (retries of the crashed tasks too).

    def _fail_all(self, reason: str) -> None:
        pending = list(self._gpu_queue) + list(self._queue)
        self._gpu_queue.clear()
        self._queue.clear()
        for w in self._workers:
            pending.extend(w.inflight)
            w.inflight.clear()
        for t in pending:
            if t.state != _DONE:
                t.state = _DONE
                self._report(t, Outcome.cancelled(reason))

    def _teardown(self) -> None:
        self._stopping = True
        # Closing the lifeline makes every worker exit at once, also mid-task.
        for w in self._workers:
            w.close_pipes()
        deadline = time.monotonic() + 3
        for w in self._workers:
            try:
                w.proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
        self._drop_template()  # after the workers: it reports their exits until they are gone
        if self._prestarted is not None:  # the I/O thread failed before it started any worker
            self._prestarted.close()
            self._prestarted = None
        # Tasks still queued or running: their futures must not wait forever.
        for kind, item in list(self._incoming):
            if kind == "task":
                self._queue.append(item)
        self._incoming.clear()
        self._fail_all("the runtime was shut down")
        with self._wake_lock:
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._wake_r = self._wake_w = -1
        self._sel.close()
        import shutil  # at shutdown only (with its bz2/lzma: 1.5 ms of the start-up otherwise)

        shutil.rmtree(self._store_dir, ignore_errors=True)
        self._stopped.set()
