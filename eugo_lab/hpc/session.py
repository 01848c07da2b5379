"""The one active runtime: a backend, a recorder, and the rules every engine shares.

Dependencies between tasks, retries, error reconstruction and trace recording live here,
above the backends, so a task behaves the same on the local pool, Dask and Ray.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import signal
import threading
import time
from typing import Any

from eugo_lab.backends import base
from eugo_lab.hpc import errors
from eugo_lab.hpc.future import CANCELLED, ERROR, FINISHED, PENDING, BatchResult, Future, complete_batch
from eugo_lab.hpc.objects import ObjectRef
from eugo_lab.hpc.serialization import dumps_args, loads_value
from eugo_lab.hpc.task import FunctionRecord, Task, TaskOptions
from eugo_lab.tracing import recorder as rec
from eugo_lab.units import fmt_bytes

log = logging.getLogger("eugo_lab")


def describe_exit(code: int | None) -> str:
    """``-9`` -> ``signal 9 (SIGKILL)``; ``1`` -> ``exit code 1``."""
    if code is None:
        return "an unknown exit status"
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class _DependencyGate:
    """Launches a task once every future it was given has finished; fails it if one failed."""

    __slots__ = ("runtime", "task", "remaining", "lock", "closed")

    def __init__(self, runtime: Runtime, task: Task, deps: list[Future]):
        self.runtime = runtime
        self.task = task
        self.remaining = len(deps)
        self.lock = threading.Lock()
        self.closed = False
        for d in deps:
            d.add_done_callback(self.on_dep_done)

    def on_dep_done(self, dep: Future) -> None:
        with self.lock:
            if self.closed:
                return
            if dep._state != FINISHED:
                self.closed = True
                launch = False
            else:
                self.remaining -= 1
                launch = self.remaining == 0
                self.closed = launch
        if launch:
            self.runtime._launch(self.task)
        elif dep._state != FINISHED:
            self.runtime._fail_from_dependency(self.task, dep)


def _item_ids(items: list[Future]) -> range | list[int]:
    """The task ids of a map batch's items: a ``range`` when consecutive (the usual case)."""
    first, last = items[0].task_id, items[-1].task_id
    if last - first == len(items) - 1:  # ids only grow within a map job: consecutive ends mean all are
        return range(first, last + 1)
    return [f.task_id for f in items]


class Runtime:
    """A started backend plus the shared task rules; ``hpc.init`` makes one, ``hpc.shutdown`` ends it."""

    def __init__(self, backend: base.Backend, *, backend_name: str, options: dict[str, Any] | None = None):
        self.backend = backend
        self.backend_name = backend_name
        self.options = dict(options or {})
        self.recorder = rec.Recorder()
        self._ids = itertools.count(1)
        self._tasks: dict[int, Task] = {}
        self._closed = False
        self.started_at = time.time()
        self.tasks_submitted = 0
        self.tasks_finished = 0
        self.last_activity = time.time()

    # -- submission ------------------------------------------------------------------------
    def _token_of(self, obj: Any) -> Any:
        t = type(obj)
        if t is Future:
            return ("fut", obj.task_id)
        if t is ObjectRef:
            return self.backend.token(obj)
        return None

    def new_ids(self, n: int) -> list[int]:
        """``n`` fresh task ids (unique, not necessarily consecutive)."""
        return list(itertools.islice(self._ids, n))

    def submit(self, fn: FunctionRecord, args: tuple, kwargs: dict, options: TaskOptions) -> Future:
        """Pickle the call now (errors surface here), then launch it once its inputs exist."""
        self._check_open()
        name = options.name or fn.name
        fn.payload  # noqa: B018 - pickle the function now so a bad capture raises at .remote()
        args_bytes, tokens, buffers = dumps_args(args, kwargs, function=name, token_of=self._token_of,
                                                 oob_threshold=self.backend.oob_threshold)
        tid = next(self._ids)
        fut = Future(tid, name, self._cancel_future)
        task = Task(tid, fn, args_bytes, tokens, options, fut, submit_time=time.time())
        if buffers:
            task.staged = self.backend.stage_buffers(tid, buffers)
        self._tasks[tid] = task
        self.tasks_submitted += 1
        self._start(task, tokens)
        return fut

    def submit_batch(self, fn: FunctionRecord, items: list, futures: list[Future], options: TaskOptions,
                     on_done: Any = None) -> Task:
        """Submit one ``hpc.map`` batch; ``futures[i]`` receives the result of ``fn(items[i])``."""
        self._check_open()
        args_bytes, tokens, buffers = dumps_args((items,), {}, function=fn.name, token_of=self._token_of,
                                                 oob_threshold=self.backend.oob_threshold)
        tid = next(self._ids)
        task = Task(tid, fn, args_bytes, tokens, options, None, items=futures, submit_time=time.time(), batch_id=tid)
        if buffers:
            task.staged = self.backend.stage_buffers(tid, buffers)
        task.on_batch_done = on_done
        self._tasks[tid] = task
        self._start(task, tokens)
        return task

    def _start(self, task: Task, tokens: list) -> None:
        """Launch ``task`` now, or once the futures it was passed have finished."""
        deps = [t for t in tokens if type(t) is Future]
        if deps:
            deps = list({id(d): d for d in deps}.values())
            if self.recorder.active:  # exact edges for the trace's critical path
                self.recorder.record_deps(task.task_id, [d.task_id for d in deps])
            if any(d._state != FINISHED for d in deps):
                _DependencyGate(self, task, deps)
                return
        self._launch(task)

    def _launch(self, task: Task) -> None:
        deps = {t.task_id: t._result_payload() for t in task.tokens if type(t) is Future}
        task.deps_payload = deps or None
        task.ready_time = time.time()
        task.state = 0
        try:
            self.backend.submit(task, self._on_done)
        except errors.HpcError as exc:
            self._complete_error(task, exc)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.BackendError("this runtime was shut down; call hpc.init() (or just .remote()) again")

    # -- completion (backend threads) ------------------------------------------------------
    def _on_done(self, task: Task, status: int, payload: Any, extra: Any, stats: Any, worker: int) -> None:
        received = time.time()
        self.last_activity = received
        ready, map_cb = task.ready_time, task.on_batch_done
        name = task.future.function if task.future is not None else (task.options.name or task.fn.name)
        item_errors = extra if (status == base.OK and task.items is not None) else None
        recorder = self.recorder
        if (recorder.active and status == base.OK and stats is not None and task.items is None
                and stats[7] is None and not recorder._subscribers and worker in recorder.workers):
            # The common case, on the I/O thread's hot path (the driver's busiest thread): the
            # driver's 9 fields packed and joined to the tail the worker packed (stats[9]);
            # the same row Recorder.record_task would append.
            code = recorder.functions.codes.get(name)
            if code is None:
                code = recorder.function_code(name)
            try:
                recorder.record_fast(rec.pack_head(task.task_id, task.attempt, code, worker, status, task.batch_id,
                                                   task.submit_time, ready, received) + stats[9])
            except (IndexError, TypeError):  # an engine whose stats carry no packed tail
                self._record_safely(task, status, stats, worker, name, ready, received, item_errors)
            if len(recorder._pending) >= rec.FLUSH_ROWS:
                recorder.flush()
        elif recorder.active and not (status == base.CANCELLED and
                                      all(f._state == CANCELLED for f in self._futures_of(task))):
            # (cancellations the runtime made itself were recorded when they were made)
            self._record_safely(task, status, stats, worker, name, ready, received, item_errors)
        retry = False
        if status == base.OK:
            self._release(task)  # before the futures complete: a caller woken by them sees it freed
            self._tasks.pop(task.task_id, None)
            self.tasks_finished += 1
            if task.items is None:
                task.future._complete(FINISHED, payload=payload)
            else:
                for i, (exc_bytes, tb) in (item_errors or {}).items():  # failed items first, one by one
                    task.items[i]._complete(ERROR, error=self._rebuild(exc_bytes, tb, name, task, worker))
                complete_batch(task.items, BatchResult(payload), skip=item_errors or ())
        elif status == base.ERROR:
            exc = self._rebuild(payload, extra, name, task, worker)
            rex = task.options.retry_exceptions
            original = getattr(exc, "original", exc)
            matches = rex is True or (isinstance(rex, tuple) and rex and isinstance(original, rex))
            retry = bool(matches) and task.attempt <= task.options.retries
            if not retry:
                self._complete_error(task, exc)
        elif status == base.CRASHED:
            # A memory-limit kill would happen again: no retry. Other deaths are retried.
            special = extra if isinstance(extra, dict) else None
            retry = special is None and task.attempt <= task.options.retries
            if not retry:
                self._complete_error(task, self._crash_error(task, name, extra))
        else:  # CANCELLED
            self._release(task)
            self._tasks.pop(task.task_id, None)
            reason = extra if isinstance(extra, str) else "it was cancelled"
            exc = errors.cancelled(name, task.task_id, reason)
            for f in self._futures_of(task):
                f._complete(CANCELLED, error=exc)
        if not retry:
            self._release(task)
        if retry:
            task.attempt += 1
            log.info("retrying %s() (task %s), attempt %s", name, task.task_id, task.attempt)
            self._launch_retry(task)
        elif map_cb is not None:
            map_cb(task, stats)

    def _record_safely(self, task: Task, *args: Any) -> None:
        """:meth:`_record`, logging instead of raising: a tracing bug must never keep a future from completing."""
        try:
            self._record(task, *args)
        except Exception:  # noqa: BLE001
            log.exception("recording task %s failed", task.task_id)

    def _record(self, task: Task, status: int, stats: Any, worker: int, name: str, ready: float, received: float,
                item_errors: Any) -> None:
        recorder = self.recorder
        if worker >= 0 and worker not in recorder.workers:
            for w in self.backend.workers():
                recorder.worker_seen(w.index, w.host, w.pid)
        item_status = None
        if item_errors:
            item_status = [rec.ERROR if i in item_errors else rec.OK for i in range(len(task.items))]
        recorder.record_task(
            task.task_id, task.attempt, name, worker, status, task.batch_id, task.submit_time, ready, received,
            stats, _item_ids(task.items) if task.items is not None else None, item_status,
        )

    @staticmethod
    def _crash_error(task: Task, name: str, extra: Any) -> errors.HpcError:
        attempts = task.attempt
        plural = "s" if attempts != 1 else ""
        if isinstance(extra, dict) and extra.get("reason") == "memory":
            rss, limit = extra["rss"], extra["limit"]
            baseline = extra.get("baseline")
            exit_code = extra.get("exit_code", -9)
            killed = ""
            if baseline is None:  # the local pool: the worker process's whole resident memory
                used = f"its worker used {fmt_bytes(rss, '.2f')}"
            else:  # Dask and Ray: what the task added to a worker process that runs other things too
                used = (f"it grew its worker's memory by {fmt_bytes(rss, '.2f')} (from {fmt_bytes(baseline, '.2f')} "
                        f"to {fmt_bytes(baseline + rss, '.2f')})")
                if exit_code is not None:
                    killed = "; it did not stop when asked, so its worker process was killed"
            return errors.WorkerMemoryError(
                f"task {name}() (task {task.task_id}) was stopped on attempt {attempts}: {used}, over the "
                f"{fmt_bytes(limit, '.2f')} memory limit{killed}. It was not retried, "
                "since it would grow the same way again. Next step: process the input in smaller pieces (more, smaller "
                "partitions), or raise the limit with @hpc.remote(memory=...) or hpc.init(memory_limit=...).",
                function=name, attempts=attempts, exit_code=exit_code, limit=limit, observed=rss,
            )
        if isinstance(extra, dict) and extra.get("reason") == "no-workers":
            return errors.NoWorkersError(f"task {name}() (task {task.task_id}) cannot run: {extra['message']}")
        if isinstance(extra, dict) and extra.get("reason") == "engine-lost":
            return errors.BackendError(f"task {name}() (task {task.task_id}) did not finish: {extra['message']}")
        code = extra if isinstance(extra, int) else None
        return errors.WorkerCrashedError(
            f"task {name}() (task {task.task_id}) killed its worker on every attempt "
            f"({attempts} attempt{plural}); the last worker died with {describe_exit(code)}. "
            "Likely causes: the task used more memory than the machine has and the OS killed it, "
            "a C extension crashed, or something outside killed the process. Next step: call "
            f"{name}() directly on one input in the notebook to see the failure, or give it more "
            "memory (fewer workers, smaller partitions).",
            function=name, attempts=attempts, exit_code=extra if isinstance(extra, int) else None,
        )

    def _launch_retry(self, task: Task) -> None:
        task.ready_time = time.time()
        task.state = 0
        try:
            self.backend.submit(task, self._on_done)
        except errors.HpcError as exc:
            self._complete_error(task, exc)

    @staticmethod
    def _futures_of(task: Task) -> list[Future]:
        return list(task.items) if task.items is not None else [task.future]

    def _rebuild(self, exc_bytes: bytes, tb: Any, name: str, task: Task, worker: int) -> BaseException:
        try:
            exc = loads_value(exc_bytes)
        except Exception as load_err:  # noqa: BLE001 - the type may not exist on the driver
            exc = errors.HpcError(f"task {name}() failed and its exception could not be rebuilt here: {load_err}")
        total = task.options.retries + 1
        where = f"worker {worker}" if worker >= 0 else "the driver"
        return errors.remote_exception(exc, function=name, traceback_text=errors.format_remote_traceback(tb),
                                       context=f"attempt {task.attempt} of {total} on {where}")

    def _release(self, task: Task) -> None:
        staged, task.staged = task.staged, None
        if staged is not None:
            self.backend.release_staged(staged)

    def _complete_error(self, task: Task, exc: BaseException) -> None:
        self._release(task)
        self._tasks.pop(task.task_id, None)
        self.tasks_finished += 1
        for f in self._futures_of(task):
            f._complete(ERROR, error=exc)

    def _fail_from_dependency(self, task: Task, dep: Future) -> None:
        self._release(task)
        self._tasks.pop(task.task_id, None)
        exc = dep._error or errors.cancelled(task.fn.name, task.task_id,
                                             f"its input, task {dep.task_id}, was cancelled")
        state = CANCELLED if dep._state == CANCELLED else ERROR
        for f in self._futures_of(task):
            f._complete(state, error=exc)
        if task.on_batch_done is not None:
            task.on_batch_done(task, None)

    # -- cancellation ------------------------------------------------------------------------
    def _cancel_future(self, fut: Future) -> bool:
        task = self._tasks.get(fut.task_id)
        if task is None:
            # A map item (its batch carries the id) or already finished: cancel just this future.
            return fut._complete(CANCELLED, error=errors.cancelled(fut.function, fut.task_id))
        # The future is cancelled now, so the caller sees it at once; the backend stops the
        # work in the background and its late report finds the future already done.
        done = fut._complete(CANCELLED, error=errors.cancelled(fut.function, fut.task_id))
        if done and self.recorder.active:
            # Recorded now, not when the backend confirms: a traced region (a %%eugo cell
            # stopped by Interrupt) closes right after the cancel and must show it.
            self._record_safely(task, base.CANCELLED, None, -1, fut.function, task.ready_time or time.time(),
                                time.time(), None)
        if task.ready_time:  # launched: the backend stops it
            self.backend.cancel(task)
        else:  # still waiting for its inputs
            self._release(task)
            self._tasks.pop(task.task_id, None)
        return done

    def cancel_all(self) -> int:
        """Cancel every task submitted and not finished (``%%eugo`` does this on Interrupt)."""
        n = 0
        for task in list(self._tasks.values()):
            for f in self._futures_of(task):
                if f._state == PENDING and f.cancel():
                    n += 1
        return n

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def pending_tasks(self) -> int:
        """Tasks submitted and not yet finished."""
        return len(self._tasks)

    def shutdown(self) -> None:
        """Stop the backend; pending futures end cancelled."""
        if self._closed:
            return
        self._closed = True
        try:
            self.backend.shutdown()
        finally:
            for task in list(self._tasks.values()):
                for f in self._futures_of(task):
                    f._complete(CANCELLED, error=errors.cancelled(
                        f.function, f.task_id, "the runtime was shut down (hpc.shutdown, hpc.init or the kernel)"))
            self._tasks.clear()


_current: Runtime | None = None
_current_lock = threading.RLock()


def current(start: bool = True) -> Runtime | None:
    """The active runtime; start the embedded default (or ``EUGO_ADDRESS``) if ``start``."""
    rt = _current
    if rt is not None or not start:
        return rt
    with _current_lock:
        if _current is None:
            from eugo_lab.hpc.api import init

            init(_wait_ready=False)  # the first .remote() should not wait for every worker to boot
        return _current


def set_current(rt: Runtime | None) -> None:
    """Install ``rt`` as the active runtime (``hpc.init`` and ``hpc.shutdown`` use this)."""
    global _current
    with _current_lock:
        _current = rt
    try:
        from eugo_lab.hpc.status import runtime_changed

        runtime_changed()  # tell the Jupyter server, when this kernel reports to one
    except Exception:  # noqa: BLE001 - a status file must never break init or shutdown
        import logging

        logging.getLogger("eugo_lab").debug("publishing the runtime status failed", exc_info=True)


def _shutdown_at_exit() -> None:
    rt = _current
    if rt is not None:
        try:
            rt.shutdown()
        except Exception:  # noqa: BLE001 - interpreter exit
            pass


atexit.register(_shutdown_at_exit)
