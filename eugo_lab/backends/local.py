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

This module is the engine's public face and the I/O thread's loop; the parts that change
for their own reasons live beside it:

- ``local_placement``: the queues and which worker (or GPU) gets the next task;
- ``local_io``: framing, non-blocking writes and reading whole frames (``local_wire``: the layouts);
- ``local_watchdog``: cancelling a running task, memory limits, the kills past their grace;
- ``local_recovery``: what a worker's death does to the tasks it held;
- ``local_spawn``: starting workers, forked by the template (``local_template``) or spawned (``local_process``).
"""

from __future__ import annotations

import collections
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from eugo_lab.backends import (
    local_args,
    local_gpus,
    local_io,
    local_recovery,
    local_template,
    local_watchdog,
)
from eugo_lab.backends.local_placement import (  # noqa: F401 - the prefetch bounds: importable from here as before
    DEFAULT_PREFETCH,
    DONE,
    MAX_PREFETCH,
    PREFETCH_SECONDS,
    QUEUED,
    SENT,
    Placement,
    slots,
)
from eugo_lab.backends.local_process import Worker, usable_cores
from eugo_lab.backends.local_recovery import MAX_FAILED_STARTS_PER_WORKER
from eugo_lab.backends.local_spawn import MAX_TEMPLATE_STARTS, USE_TEMPLATE, Spawner  # noqa: F401 - as before
from eugo_lab.backends.local_watchdog import CANCEL_GRACE_SECONDS, MEMORY_POLL_SECONDS  # noqa: F401 - as before
from eugo_lab.backends.shm_store import (
    OOB_BYTES,
    claim_result,
    drop_result,
    make_store_dir,
    read_object,
    write_object,
)
from eugo_lab.contract import base, outcome
from eugo_lab.contract.errors import BackendError, NoWorkersError
from eugo_lab.contract.outcome import Crash, Outcome
from eugo_lab.contract.refs import ObjectRef, describe_type
from eugo_lab.contract.row import TaskStats
from eugo_lab.contract.task import Task

# Functions a worker keeps loaded (least recently used evicted, re-sent when needed) and per-function cost
# estimates the pool keeps: a session that maps a new lambda every call stays flat. 256 covers every
# function a notebook uses at once many times over; a function's pickle is typically a few KiB.
WORKER_FUNCTIONS = 256

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
        # What waits and which worker gets it (the I/O thread's alone); the names below are its
        # containers, kept on the pool for shutdown, crash recovery, tests and diagnostics.
        self._placement = Placement(self._send, gpu_pool=bool(self.n_gpu))
        self._queue = self._placement.queue
        self._gpu_queue = self._placement.gpu_queue
        self._item_cost = self._placement.item_cost
        self._held = self._placement.held
        self._children = self._placement.children
        self._incoming: collections.deque[tuple[str, Any]] = collections.deque()
        self._wake_pending = False
        self._wake_r = self._wake_w = -1  # the I/O thread's wake-up pipe, -1 while closed
        self._wake_lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()
        self._sel = selectors.DefaultSelector()
        self._on_done: dict[int, base.DoneCallback] = {}
        #: Called on the I/O thread with (worker index, message) for each request of a task that submits
        #: tasks (``("nest", op, ...)``); the runtime sets it (eugo_lab.hpc.nested), and answers with :meth:`tell`.
        self.nested_handler: Callable[[int, tuple], None] | None = None
        self._thread: threading.Thread | None = None
        self._store_dir = ""
        self._ready = threading.Event()
        self._all_greeted = threading.Event()
        self._start_error: BaseException | None = None
        self._lock = threading.Lock()
        # Starts the workers (forked by a template process, or spawned), on the I/O thread only.
        self._spawner = Spawner(self._sel, self.devices, self.n_gpu, self._gpu_envs, self.threads_per_worker,
                                self.extra_env, self._threads_explicit)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the I/O thread, which spawns the workers (so they die with it, never earlier)."""
        self._spawner.take_prestarted()
        self._store_dir = self._spawner.store_dir = make_store_dir()
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

    def template_pid(self) -> int | None:
        """Process id of the live template process, if workers are forked from one (tests and diagnostics)."""
        return self._spawner.template_pid()

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
        if slots(task) > self.n_workers:
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
            asked = self._spawner.ask(list(range(self.n_workers)))
            if not any(w is not None for w in asked[2]):  # no template: spawn now, errors go to start()
                self._workers = self._spawner.finish(*asked)
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._spawner.close()
            self._start_error = exc
            self._ready.set()
            return
        # start() returns before the template answers: the caller goes on (pickling its first
        # task, say) while the template boots. Tasks wait in the queue for the workers' hello.
        self._ready.set()
        if not self._workers:
            try:
                self._workers = self._spawner.finish(*asked)
            except Exception as exc:  # noqa: BLE001 - no workers: tasks fail, init() does not hang
                self._no_workers = f"could not start local worker processes: {exc}"
        try:
            while True:
                timeout = local_watchdog.poll_interval(self._workers, self._stopping, self.memory_limit)
                for key, mask in self._sel.select(timeout):
                    w = key.data
                    if w is None:
                        continue
                    if isinstance(w, local_template.Template):
                        self._spawner.on_template(w)
                        continue
                    if mask & selectors.EVENT_READ:
                        self._read(w)
                    if mask & selectors.EVENT_WRITE and not w.dead:
                        self._flush(w)
                if self._drain_incoming():
                    break
                local_watchdog.kill_over_memory(self._workers, self.memory_limit)
                local_watchdog.kill_overdue_cancels(self._workers)
                if any(w.blocked for w in self._workers):
                    self._placement.help(self._workers)
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
                self._placement.enqueue(item)
            elif kind == "cancel":
                self._cancel(item)
            elif kind == "drop":
                data = local_io.frame(("drop", item))
                for w in self._workers:
                    if not w.dead:
                        w.outbuf += data
                        self._flush(w)
            elif kind == "tell":
                index, msg = item
                w = self._workers[index] if 0 <= index < len(self._workers) else None
                if w is not None and not w.dead:
                    w.outbuf += local_io.frame(msg)
                    self._flush(w)
            elif kind == "stop":
                stop = True
        if stop:
            self._stopping = True
        return stop

    def _dispatch(self) -> None:
        # Only workers that said hello get tasks: a task handed to one still starting (or to one
        # that never will) would wait for it while another worker sits idle. Until the first
        # hello, tasks stay queued; workers that keep failing to start fail them (_give_up).
        live = [w for w in self._workers if w.greeted and not w.dead and w.held_by is None]
        if not live:
            if self._no_workers and all(w.dead for w in self._workers):
                lost = Outcome.crashed(Crash(outcome.NO_WORKERS, message=self._no_workers))
                for q in (self._gpu_queue, self._queue):
                    while q:
                        t = q.popleft()
                        if t.state == QUEUED:
                            t.state = DONE
                            self._report(t, lost)
            return
        self._placement.dispatch(live)

    def _send(self, w: Worker, task: Task) -> None:
        """Write ``task`` to worker ``w`` (and its function, if ``w`` lacks it); ``w`` holds it from now on."""
        local_io.queue_task(w, task, WORKER_FUNCTIONS)
        task.state = SENT
        task.backend_data = w
        w.inflight.append(task)
        self._flush(w)

    def _flush(self, w: Worker) -> None:
        local_io.flush(self._sel, w)

    def _read(self, w: Worker) -> None:
        if w.dead:
            return
        messages = local_io.read_messages(w)
        if messages is None:
            self._worker_died(w)
            return
        for msg in messages:
            self._handle(w, msg)

    def _handle(self, w: Worker, msg: tuple) -> None:
        kind = msg[0]
        if kind == "done":
            self._done(w, msg)
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

    def _done(self, w: Worker, msg: tuple) -> None:
        """A task ``w`` held ended: learn its cost, free what it held and report its outcome (unless cancelled)."""
        _, key, status, payload, detail, raw_stats = msg
        task = w.inflight.popleft()
        if task.task_id != key:  # a task that ran on top of one waiting for its children (local_nested)
            w.inflight.appendleft(task)
            task = next((t for t in w.inflight if t.task_id == key), None)
            if task is None:  # pragma: no cover - protocol invariant
                raise RuntimeError(f"worker {w.index} answered task {key}, which it was not sent")
            w.inflight.remove(task)
        self._placement.ended(key)
        if w.progress:
            w.progress.pop(key, None)
        if self._held:
            self._placement.release(task)
        stats = TaskStats.from_wire(raw_stats)
        if stats is not None:  # None: a cancelled task the worker skipped or stopped
            # One bound for both: the pool forgets a function's estimate as workers forget the function.
            self._placement.record_cost(task, stats, WORKER_FUNCTIONS)
        if type(payload) is tuple:  # a result the worker wrote into the store (shm_store.write_result)
            if task.state == DONE:  # cancelled meanwhile: nobody will read it
                drop_result(payload)
            else:
                payload = claim_result(payload)
        if task.state != DONE:
            task.state = DONE
            result = outcome.from_worker(status, payload, detail, stats, w.index, task.is_batch)
            if w.gpu >= 0 and task.options.gpus:  # the device it held, for the trace (a CPU task: none)
                result = result._replace(gpu=w.gpu)
            self._report(task, result)

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
                w.outbuf += local_io.frame(("reply", msg[2], BackendError(f"the driver could not answer: {exc}")))
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
        if task.state == DONE:
            return
        if task.state == SENT:
            w: Worker = task.backend_data
            if not w.dead:
                local_watchdog.ask_to_stop(w, task, self.cancel_grace)
                if any(b[0] == task.task_id for b in w.blocked):  # it waits on children: turn its wait now
                    w.outbuf += local_io.frame(("wake",))
                    self._flush(w)
        task.state = DONE
        self._report(task, Outcome.cancelled())

    def _worker_died(self, w: Worker) -> None:
        w.dead = True
        for fd in (w.result_r, w.task_w):
            try:
                self._sel.unregister(fd)
            except (KeyError, ValueError):
                pass
        code = local_recovery.reap(w, self._store_dir)
        local_recovery.settle(w, code, self._placement, self._report)
        if self._stopping:
            return
        if not w.greeted:
            self._failed_starts += 1
        if self._failed_starts >= MAX_FAILED_STARTS_PER_WORKER * self.n_workers:
            self._give_up(code)
            return
        self._workers[w.index] = self._spawner.spawn(w.index)

    def _give_up(self, code: int | None) -> None:
        """Workers keep dying before they start: fail what is queued instead of hanging."""
        self._no_workers = local_recovery.no_workers_message(self._failed_starts, code)
        # _dispatch fails whatever is queued, now and later (retries of the crashed tasks too).

    def _fail_all(self, reason: str) -> None:
        pending = self._placement.take_all()
        for w in self._workers:
            pending.extend(w.inflight)
            w.inflight.clear()
        for t in pending:
            if t.state != DONE:
                t.state = DONE
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
        self._spawner.close()  # after the workers: the template reports their exits until they are gone
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
