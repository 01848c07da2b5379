"""The one active runtime: a backend, a recorder, and the rules every engine shares.

Dependencies between tasks, retries, error reconstruction and trace recording live here,
above the backends, so a task behaves the same on the local pool, Dask and Ray.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import math
import os
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from typing import Any

from eugo_lab.contract import base, errors, given, outcome, row, serialization
from eugo_lab.contract.item_ends import ItemEnds
from eugo_lab.contract.outcome import Crash, Outcome
from eugo_lab.contract.row import TaskStats
from eugo_lab.contract.serialization import dumps_args, loads_value
from eugo_lab.contract.task import TASK_STATE_NEW, FunctionRecord, TaskOptions
from eugo_lab.hpc import blocking
from eugo_lab.hpc.arg_identity import large_argument_key
from eugo_lab.hpc.future import STATE_CANCELLED, STATE_FAILED, STATE_FINISHED, STATE_PENDING, BatchResult, Future
from eugo_lab.hpc.future import argument_token as _argument_token
from eugo_lab.hpc.pending import Pending
from eugo_lab.tracing import recorder as rec
from eugo_lab.tracing import returned
from eugo_lab.tracing.returned import DriverValues


class _Log:
    """The ``eugo_lab`` logger, looked up on first use.

    Importing ``logging`` (with traceback, string and weakref, ~3 ms) at ``hpc.init`` would
    delay every local pool's first result, and a session logs only when something went wrong.
    """

    def __getattr__(self, name: str) -> Any:
        import logging

        return getattr(logging.getLogger("eugo_lab"), name)


log = _Log()


class _DependencyGate:
    """Launches a task once every future it was given has finished; fails it if one failed."""

    __slots__ = ("runtime", "task", "remaining", "lock", "closed")

    def __init__(self, runtime: Runtime, task: Pending, deps: list[Future]):
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
            if dep._state != STATE_FINISHED:
                self.closed = True
                launch = False
            else:
                self.remaining -= 1
                launch = self.remaining == 0
                self.closed = launch
        if launch:
            self.runtime._launch(self.task)
        elif dep._state != STATE_FINISHED:
            self.runtime._fail_from_dependency(self.task, dep)


def _item_ids(items: list[Future]) -> range | list[int]:
    """The task ids of a map batch's items: a ``range`` when consecutive (the usual case)."""
    first, last = items[0].task_id, items[-1].task_id
    if last - first == len(items) - 1:  # ids only grow within a map job: consecutive ends mean all are
        return range(first, last + 1)
    return [f.task_id for f in items]


# -- the runtime's features hook in here; the runtime imports none of them ----------------------
#: ``wrap(runtime, record, args, kwargs, items) -> record``: swaps a function record before its call is
#: pickled (the JIT trial, profiling), in ``order``; returns ``record`` itself when it has nothing to do.
#: A single call passes its arguments and ``items=None``; an ``hpc.map`` batch ``()``, ``{}`` and its items.
Wrapper = Callable[["Runtime", FunctionRecord, tuple, dict, Any], FunctionRecord]
_wrappers: list[tuple[int, Wrapper]] = []
_wrap_chain: tuple[Wrapper, ...] = ()
#: Called with no arguments after the active runtime changed (``hpc.init``, ``hpc.shutdown``).
_runtime_listeners: list[Callable[[], None]] = []


def _retries(task: Pending, exc: BaseException) -> bool:
    """Whether a task that raised ``exc`` is run again (while attempts are left): its type is in ``retry_exceptions``.

    A function the worker cannot load would fail the same way again, whatever the option says, and so
    would a map item stopped at its memory limit (a ``WorkerMemoryError``, never retried).
    """
    rex = task.options.retry_exceptions
    matches = rex is True or (isinstance(rex, tuple) and bool(rex) and isinstance(exc, rex))
    return matches and not isinstance(exc, (errors.FunctionLoadError, errors.WorkerMemoryError))


def _per_item_crash(task: Pending, result: Outcome) -> bool:
    """Whether ``task`` is a batch whose worker died and whose items end one by one (see ``Runtime._batch_crashed``).

    The batch's items must take it (``hpc.map``'s; coalesced ``.remote()`` calls are retried as a batch, as
    any task); :func:`_with_progress` gives it a progress where the engine reported none.
    """
    return result.progress is not None and getattr(task.items, "per_item_crashes", False)


def _with_progress(task: Pending, result: Outcome) -> Outcome:
    """``result``, with a progress where an ``hpc.map`` batch crashed on an engine that reports none (Dask, Ray).

    No item is known to have finished: every one counts as running, so the batch's items go again each as a
    batch of its own (``Runtime._batch_crashed``), and a second death names the item that causes it.
    """
    if result.status == base.CRASHED and result.progress is None and getattr(task.items, "per_item_crashes", False):
        return result._replace(progress=outcome.BatchProgress((), (0, len(task.items)), reported=False))
    return result


def add_wrapper(wrap: Wrapper, order: int) -> None:
    """Have every call's function record pass through ``wrap`` (lower ``order`` first); registering twice is one."""
    global _wrap_chain
    with _current_lock:
        if all(w is not wrap for _, w in _wrappers):
            _wrappers.append((order, wrap))
            _wrappers.sort(key=lambda ow: ow[0])
            _wrap_chain = tuple(w for _, w in _wrappers)


def on_runtime_changed(listener: Callable[[], None]) -> None:
    """Call ``listener()`` whenever the active runtime is set or cleared (a listener registered twice runs once)."""
    with _current_lock:
        if listener not in _runtime_listeners:
            _runtime_listeners.append(listener)


class Runtime:
    """A started backend plus the shared task rules; ``hpc.init`` makes one, ``hpc.shutdown`` ends it."""

    def __init__(self, backend: base.Backend, *, backend_name: str, options: dict[str, Any] | None = None,
                 recorder: rec.Recorder | None = None):
        self.backend = backend
        self.backend_name = backend_name
        self.options = dict(options or {})
        # A runtime started while a traced region is open (hpc.init inside a %%eugo cell) takes over
        # the recorder of the one it replaces, so the region records the new runtime's tasks too.
        self.recorder = recorder if recorder is not None else rec.Recorder()
        #: What get()/result() returned in the open region, to record dependencies through the driver.
        self.driver_values = DriverValues()
        self.successor: Runtime | None = None  # the runtime that took this one's recorder over, if any
        self.stopped_by: str | None = None  # why it ended: "shutdown" (by hand, hpc.init or the kernel)
        self._ids = itertools.count(1)
        self._tasks: dict[int, Pending] = {}
        # Results the notebook gets late, by task id (seconds): see :meth:`hand_back_late`.
        self._held: dict[int, float] = {}
        self._closed = False
        self.started_at = time.time()
        self.tasks_submitted = 0
        self.tasks_finished = 0
        self.last_activity = time.time()
        self.optimize = 0  # %%eugo --optimize: the run's generation (> 0) while the cell runs (eugo_lab.hpc.optimized)
        self.price_per_worker_hour: float | None = None  # hpc.init(price_per_worker_hour=...): what it bills at
        self.auto_optimize = True  # the JIT without annotation (eugo_lab.hpc.optimized); hpc.init(optimize=False): off
        # Features that keep work of their own outside _tasks (hpc.map's unsent items, batch="auto"'s held
        # calls) register here to be cancelled with the rest: cancel_all() sums what each cancelled.
        self._cancel_all_hooks: list[Callable[[Runtime], int]] = []
        self._shutdown_hooks: list[Callable[[Runtime], None]] = []
        # hpc.profile / %%eugo --profile: while set, every task submitted is profiled on its
        # worker (an eugo_lab.hpc.profiling.Settings; its wrap() swaps the function record).
        self.profiling: Any = None
        # Tasks that submit tasks (eugo_lab.hpc.nested): an engine whose workers ask the driver
        # takes a handler; the server behind it is made on the first request.
        self._nested_server: Any = None
        if hasattr(backend, "nested_handler"):
            backend.nested_handler = self._nested_request

    def _nested_request(self, worker: int, msg: tuple) -> None:
        """A request of a task running on worker ``worker`` (its ``.remote()``, ``get``, ``put``...)."""
        server = self._nested_server
        if server is None:
            from eugo_lab.hpc.nested_server import NestedServer

            server = self._nested_server = NestedServer(self)
        server.handle(worker, msg)

    @property
    def idle_stops(self) -> tuple[Any, ...]:
        """Each time this runtime's engine stopped its cluster on its idle timer, oldest first.

        ``IdleStop`` records, which the embedded Dask cluster keeps; empty for an engine without a
        timer, and for a cluster that was only ever shut down by hand.
        """
        return tuple(getattr(self.backend, "idle_stops", ()))

    def on_cancel_all(self, hook: Callable[[Runtime], int]) -> None:
        """Have :meth:`cancel_all` call ``hook(runtime)`` (it returns how many it cancelled); once per hook."""
        if hook not in self._cancel_all_hooks:
            self._cancel_all_hooks.append(hook)

    def on_shutdown(self, hook: Callable[[Runtime], None]) -> None:
        """Have :meth:`shutdown` call ``hook(runtime)`` after its own tasks ended cancelled; once per hook."""
        if hook not in self._shutdown_hooks:
            self._shutdown_hooks.append(hook)

    # -- submission ------------------------------------------------------------------------
    def _token_of(self, obj: Any) -> Any:
        return _argument_token(obj, self.backend)

    def new_ids(self, n: int) -> list[int]:
        """``n`` fresh task ids (unique, not necessarily consecutive)."""
        return list(itertools.islice(self._ids, n))

    def new_id_block(self, n: int) -> int:
        """The first of ``n`` consecutive fresh task ids (``hpc.map``: item ``p`` is task ``first + p``).

        The counter is advanced by C code alone (``islice``), which another thread's
        ``next(self._ids)`` cannot interleave with, and no list of ``n`` ids is built.
        """
        first = next(self._ids)
        if n > 1:
            next(itertools.islice(self._ids, n - 2, None))
        return first

    def submit(self, fn: FunctionRecord, args: tuple, kwargs: dict, options: TaskOptions,
               on_done: Callable[[Pending, Any], None] | None = None) -> Future:
        """Pickle the call now (errors surface here), then launch it once its inputs exist.

        ``on_done(task, stats)``: called once the call ended (``batch="auto"`` measures with it).
        """
        self._check_open()
        name = options.name or fn.name
        if options.name and options.name != fn.name and self.recorder.active:  # the trace keeps what a label runs
            self.recorder.note_label(name, fn.name)
        for wrap in _wrap_chain:
            fn = wrap(self, fn, args, kwargs, None)
        fn.payload  # noqa: B018 - pickle the function now so a bad capture raises at .remote()
        traced = self.recorder.active  # the driver lane: pickling and hand-off timed only while tracing
        began = time.time() if traced else 0.0
        args_bytes, tokens, buffers = dumps_args(args, kwargs, function=name, token_of=self._token_of,
                                                 oob_threshold=self.backend.oob_threshold)
        tid = next(self._ids)
        if traced:  # an argument that is a value a get() returned: a dependency through the driver
            on = self.driver_values.sources(self.recorder.epoch, args, kwargs,
                                            loaded=lambda: returned.loaded_names(returned.user_frame()))
            if on:
                self.recorder.record_driver_deps(tid, on)
        if self.recorder.active and (buffers or len(args_bytes) >= row.ARG_KEY_MIN_BYTES):  # tiny: one len()
            self._record_large_argument(tid, args, kwargs, args_bytes, buffers)
        fut = Future(tid, name, self._cancel_future)
        task = Pending(tid, fn, args_bytes, tokens, options, fut, submit_time=time.time())
        for observe in _submit_observers:
            observe(self, tid, name)
        given.note(name, args, kwargs)
        task.on_batch_done = on_done
        task.probe = self.recorder.in_region
        if buffers:
            task.staged = self.backend.stage_buffers(tid, buffers)
        # Out-of-band buffers copied out too: the argument is ready to send (without them, it was at submit_time).
        pickled = (time.time() if buffers else task.submit_time) if traced else 0.0
        self._tasks[tid] = task
        self.tasks_submitted += 1
        self._start(task, tokens)
        if traced:  # the driver lane: how long pickling and handing the task on took
            self.recorder.driver.submitted(began, pickled, time.time(), tid, args_bytes, buffers,
                                           self._copied(task))
        return fut

    def hand_back_late(self, tid: int, seconds: float) -> None:
        """Have task ``tid``'s result reach the notebook ``seconds`` after it arrives, as if it ran that much longer.

        Its future completes, and the trace records it received, that much later; the task itself
        runs as written. An exercise's hidden case uses it (``eugo_lab.cellrun.exercise``) so that
        which task finishes last is the checker's secret, not something the inputs reveal.
        """
        self._held[tid] = seconds

    def submit_pickled(self, tid: int, fn: FunctionRecord, args_bytes: bytes, tokens: list, options: TaskOptions,
                       name: str, parent: int) -> Future:
        """Submit a call a running task pickled itself, as task ``tid`` (an id of :meth:`new_id_block`).

        ``tokens``: the futures and references its arguments name (futures become dependencies);
        ``parent``: the task that submitted it, which the trace records.
        """
        self._check_open()
        fut = Future(tid, name, self._cancel_future)
        task = Pending(tid, fn, args_bytes, tokens, options, fut, submit_time=time.time())
        task.parent = parent
        task.probe = self.recorder.in_region
        self._tasks[tid] = task
        self.tasks_submitted += 1
        if self.recorder.active:
            self.recorder.record_parent(tid, parent)
        self._start(task, tokens)
        return fut

    def _copied(self, task: Pending) -> int | None:
        """The bytes of ``task``'s large argument buffers the engine copied (None: all of them, or none had any)."""
        return self.backend.copied_bytes(task.staged) if task.staged is not None else None

    def _record_large_argument(self, tid: int, args: tuple, kwargs: dict, args_bytes: bytes, buffers: list) -> None:
        """Tell the trace which large argument task ``tid`` was sent (see :mod:`eugo_lab.hpc.arg_identity`)."""
        size = len(args_bytes) + (sum(b.nbytes for b in buffers) if buffers else 0)
        if size < row.ARG_KEY_MIN_BYTES:
            return
        try:
            key = large_argument_key(args, kwargs)
        except Exception:  # a tracing aid must never fail a submission
            log.exception("identifying the large argument of task %s failed", tid)
            return
        if key:
            self.recorder.record_arg(tid, key)

    def submit_batch(self, fn: FunctionRecord, items: list, futures: Any, options: TaskOptions,
                     on_done: Any = None, attempt: int = 1, alone: bool = False) -> Pending:
        """Submit one ``hpc.map`` batch; ``futures`` (a ``mapping._Batch``) receives the results of ``fn(item)``.

        ``attempt`` > 1: the batch re-sends items of an earlier batch that raised (their next attempt).
        ``alone``: each item runs as a group of its own on the worker (``contract.task.Task.alone``).
        """
        self._check_open()
        for wrap in _wrap_chain:
            fn = wrap(self, fn, (), {}, items)
        traced = self.recorder.active
        began = time.time() if traced else 0.0
        args_bytes, tokens, buffers = dumps_args((items,), {}, function=fn.name, token_of=self._token_of,
                                                 oob_threshold=self.backend.oob_threshold)
        tid = next(self._ids)
        task = Pending(tid, fn, args_bytes, tokens, options, None, items=futures, submit_time=time.time(),
                       batch_id=tid)
        task.attempt = attempt
        task.alone = alone
        task.probe = self.recorder.in_region
        if buffers:
            task.staged = self.backend.stage_buffers(tid, buffers)
        pickled = time.time() if traced else 0.0
        task.on_batch_done = on_done
        self._tasks[tid] = task
        self._start(task, tokens)
        if traced:
            self.recorder.driver.submitted(began, pickled, time.time(), tid, args_bytes, buffers,
                                           self._copied(task))
        return task

    def _start(self, task: Pending, tokens: list) -> None:
        """Launch ``task`` now, or once the futures it was passed have finished."""
        deps = [t for t in tokens if type(t) is Future]
        if deps:
            deps = list({id(d): d for d in deps}.values())
            if self.recorder.active:  # exact edges for the trace's critical path
                self.recorder.record_deps(task.task_id, [d.task_id for d in deps])
            if any(d._state != STATE_FINISHED for d in deps):
                _DependencyGate(self, task, deps)
                return
        self._launch(task)

    def _launch(self, task: Pending) -> None:
        deps = {t.task_id: t._result_payload() for t in task.tokens if type(t) is Future}
        task.deps_payload = deps or None
        self._hand_to_backend(task)

    def _hand_to_backend(self, task: Pending) -> None:
        """Give a ready task (or its next attempt) to the engine; an engine that refuses it fails it."""
        task.ready_time = time.time()
        task.state = TASK_STATE_NEW
        try:
            self.backend.submit(task, self._on_done)
        except errors.HpcError as exc:
            self._complete_error(task, exc)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.BackendError("this runtime was shut down; call hpc.init() (or just .remote()) again")

    # -- completion (backend threads) ------------------------------------------------------
    def _on_done(self, task: Pending, result: Outcome) -> None:
        if result.status == base.CRASHED:
            result = _with_progress(task, result)
        if self._held:  # empty but for a checker's hidden case (hand_back_late)
            late = self._held.pop(task.task_id, None)
            if late is not None:  # handed to the notebook, and recorded as received, that much later
                timer = threading.Timer(late, self._on_done, (task, result))
                timer.daemon = True
                timer.start()
                return
        received = time.time()
        self.last_activity = received
        status, stats, worker = result.status, result.stats, result.worker
        ready, map_cb = task.ready_time, task.on_batch_done
        name = task.label
        recorder = self.recorder
        if recorder.active:
            if status == base.OK and task.items is None and worker in recorder.workers:
                # The I/O thread's hot path (the driver's busiest thread), inline: one packed row.
                try:
                    recorder.record_attempt(task.task_id, task.attempt, name, worker, status, task.batch_id,
                                            task.submit_time, ready, received, stats)
                except Exception:  # a tracing bug must never keep a future from completing
                    log.exception("recording task %s failed", task.task_id)
            elif status == base.OK and task.items is None:
                self._record_safely(recorder.record_attempt, task.task_id, task.attempt, name, worker, status,
                                    task.batch_id, task.submit_time, ready, received, stats, worker=worker)
            elif _per_item_crash(task, result):  # a batch its worker died in, item by item
                self._record_safely(self._record_crashed_batch, task, result.progress, worker, name, ready, received,
                                    worker=worker)
            elif not (status == base.CANCELLED and all(f._state == STATE_CANCELLED for f in self._futures_of(task))):
                # (cancellations the runtime made itself were recorded when they were made)
                self._record_safely(self._record, task, status, stats, worker, name, ready, received,
                                    result.item_errors if status == base.OK else None, worker=worker)
            if result.gpu >= 0:  # a gpus= task on a worker with a device: which one it held
                self._record_safely(recorder.record_gpu, task.task_id, task.attempt, result.gpu, worker=worker)
            if task.probe:  # submitted in the region: what it saw and returned (Recorder.note_attempt)
                kept = result.payload
                if type(kept) is not bytes and stats is not None and stats.facts \
                        and stats.facts[row.FACT_DIGEST] is not None:
                    # A result in the pool's shared memory the worker digested already: the trace needs
                    # only the digest, and holding the result would keep its memory as long as the trace.
                    kept = None
                recorder.attempts.append((task.task_id, task.attempt, name, status == base.OK, kept,
                                          None if stats is None else stats.facts, task.options.gpus,
                                          None if task.items is None else _item_ids(task.items), result.item_errors))
        retry = False
        if status == base.OK:
            self._release(task)  # before the futures complete: a caller woken by them sees it freed
            self._tasks.pop(task.task_id, None)
            self.tasks_finished += 1
            if task.items is None:
                task.future._complete(STATE_FINISHED, payload=result.payload)
            else:  # an hpc.map batch (mapping._Batch) settles all its items at once, no future per item
                failed = {i: self._item_error(task, i, exc_bytes, tb, name, worker)
                          for i, (exc_bytes, tb) in (result.item_errors or {}).items()}
                # Each item that raised is retried on its own, as a .remote() call would be; the items that
                # succeeded keep their results and never run again.
                again = [i for i, exc in failed.items() if self._may_retry(task, exc)] if failed else []
                task.items.finish(BatchResult(result.payload), failed, again, task.attempt + 1)
        elif status == base.ERROR:
            exc = self._rebuild(result.payload, result.traceback, name, task, worker)
            retry = self._may_retry(task, exc)
            if not retry:
                self._complete_error(task, exc)
        elif status == base.CRASHED and _per_item_crash(task, result):
            self._batch_crashed(task, result.progress, result.crash or Crash(outcome.DIED), name, worker)
        elif status == base.CRASHED:
            crash = result.crash or Crash(outcome.DIED)
            retry = crash.retryable and task.attempt <= task.options.retries
            if not retry:
                self._complete_error(task, errors.crash_error(name, task.task_id, task.attempt, crash))
        else:  # STATE_CANCELLED
            self._release(task)
            self._tasks.pop(task.task_id, None)
            exc = errors.cancelled(name, task.task_id, result.reason or "it was cancelled")
            for f in self._futures_of(task):
                f._complete(STATE_CANCELLED, error=exc)
        if not retry:
            self._release(task)
        if self._nested_server is not None:  # tasks that submit tasks: this attempt's children end with it
            self._nested_server.task_ended(task.task_id, status == base.OK)
        if retry:
            task.attempt += 1
            log.info("retrying %s() (task %s), attempt %s", name, task.task_id, task.attempt)
            self._hand_to_backend(task)
        elif map_cb is not None:
            map_cb(task, stats)

    def _batch_crashed(self, task: Pending, progress: outcome.BatchProgress, crash: Crash, name: str,
                       worker: int) -> None:
        """An ``hpc.map`` batch lost its worker: each item ends as if it had been a task of its own.

        The items that finished keep their results (or errors) and never run again. The item that was
        running crashed: it gets another attempt if the crash is retryable (a death, not a memory stop)
        and it has attempts left, else it fails with the crash's error, naming it. The items that never
        started go again without using a retry. When the running group held several tiny items, which one
        crashed is not known: they go again each as a group of its own, without using a retry either (each
        as a batch of its own on an engine that reports no groups, Dask and Ray: there every item of the
        batch counts as running, and items that finished before the death run again, their results lost
        with the worker).
        """
        b = task.items
        n = len(b)
        values: list = [None] * n
        failed: dict[int, BaseException] = {}
        resend: list[int] = []
        for lo, hi, payload, errs in progress.parts:
            if payload is None:  # its results did not travel ahead (too large, unpicklable): they run again
                resend.extend(range(lo, hi))
                continue
            try:
                values[lo:hi] = loads_value(payload)
            except Exception as exc:  # noqa: BLE001 - a type the driver lacks: those items fail, the others go on
                for i in range(lo, hi):
                    failed[i] = errors.HpcError(f"item {b.position(i)} of hpc.map({name}, ...) finished, but its "
                                                f"result could not be rebuilt here: {exc}")
            for i, (exc_bytes, tb) in (errs or {}).items():
                failed[i] = self._item_error(task, i, exc_bytes, tb, name, worker)
        retry = [i for i, exc in failed.items() if self._may_retry(task, exc)]
        lo, hi = progress.running
        alone: list[int] = []
        split: list[int] = []
        if hi - lo == 1:
            if crash.retryable and task.attempt <= task.options.retries:
                retry.append(lo)
            else:
                failed[lo] = errors.crash_error(name, b.item_id(lo), task.attempt, crash, item=b.position(lo))
        elif progress.reported:
            alone = list(range(lo, hi))
        else:  # the engine cannot report groups within a batch: one batch each
            split = list(range(lo, hi))
        resend.extend(range(hi, n))
        self._release(task)
        self._tasks.pop(task.task_id, None)
        self.tasks_finished += 1
        b.finish(BatchResult.of(values), failed, retry, task.attempt + 1, resend, alone, split)

    def _item_error(self, task: Pending, i: int, exc_bytes: bytes, tb: Any, name: str, worker: int) -> BaseException:
        """The error of item ``i`` of batch ``task``: what it raised, or its crash (stopped at its memory limit)."""
        if type(tb) is Crash:  # (b"", crash): see outcome.Outcome.item_errors
            b = task.items
            item = b.position(i) if hasattr(b, "position") else None  # an hpc.map item is named by its position
            return errors.crash_error(name, b.item_id(i), task.attempt, tb, item=item)
        return self._rebuild(exc_bytes, tb, name, task, worker)

    def _record_crashed_batch(self, task: Pending, progress: outcome.BatchProgress, worker: int, name: str,
                              ready: float, received: float) -> None:
        """The trace of a batch its worker died in: a row per item that finished, one for the item that crashed.

        The items that never started (or whose results were lost) get their rows when they run again. A group
        of several tiny items that was running gets one crashed row under the batch's id: which of its items
        crashed is not known.
        """
        b = task.items
        ids: list[int] = []
        status: list[int] = []
        counts, ends = array("q"), array("d")
        for (lo, hi, payload, errs), end in zip(progress.parts, progress.ends):
            if payload is None:
                continue
            ids += [b.item_id(i) for i in range(lo, hi)]
            status += [row.OK if not errs or i not in errs else row.CRASHED if type(errs[i][1]) is Crash else row.ERROR
                       for i in range(lo, hi)]
            counts.append(hi - lo)
            ends.append(end)
        record = self.recorder.record_task
        if ids:
            body = ends[-1]
            stats = TaskStats(progress.body_start, body, math.nan, 0.0, 0.0, 0, 0, None,
                              ItemEnds(counts.tobytes(), ends.tobytes()), None, None, math.nan, None)
            record(task.task_id, task.attempt, name, worker, row.OK, task.batch_id, task.submit_time, ready, received,
                   stats, ids, status)
        lo, hi = progress.running
        crashed_id = b.item_id(lo) if hi - lo == 1 else task.task_id
        record(crashed_id, task.attempt, name, worker, row.CRASHED, task.batch_id, task.submit_time, ready,
               received, None)

    @staticmethod
    def _may_retry(task: Pending, exc: BaseException) -> bool:
        """True if ``task`` (or one of its batch's items) that raised ``exc`` gets another attempt."""
        return _retries(task, getattr(exc, "original", exc)) and task.attempt <= task.options.retries

    def _record_safely(self, record: Callable[..., None], *args: Any, worker: int) -> None:
        """``record(*args)``, logging instead of raising: a tracing bug must never keep a future from completing."""
        try:
            if worker >= 0 and worker not in self.recorder.workers:
                for w in self.backend.workers():  # a worker the trace has not seen: learn its host and pid
                    self.recorder.worker_seen(w.index, w.host, w.pid)
            record(*args)
        except Exception:
            log.exception("recording a task attempt failed")

    def _record(self, task: Pending, status: int, stats: TaskStats | None, worker: int, name: str, ready: float,
                received: float, item_errors: dict | None) -> None:
        item_status = None
        if item_errors:  # an item stopped at its memory limit carries its Crash: a crashed attempt
            item_status = [row.OK if i not in item_errors else row.CRASHED if type(item_errors[i][1]) is Crash
                           else row.ERROR for i in range(len(task.items))]
        self.recorder.record_task(
            task.task_id, task.attempt, name, worker, status, task.batch_id, task.submit_time, ready, received,
            stats, _item_ids(task.items) if task.items is not None else None, item_status,
        )

    @staticmethod
    def _futures_of(task: Pending) -> list:
        # An hpc.map batch (mapping._Batch) stands in for all its items' futures: it ends,
        # cancels and reports them at once, without making a future per item.
        return [task.items] if task.items is not None else [task.future]

    def _rebuild(self, exc_bytes: bytes, tb: Any, name: str, task: Pending, worker: int) -> BaseException:
        try:
            exc = loads_value(exc_bytes)
        except Exception as load_err:  # noqa: BLE001 - the type may not exist on the driver
            exc = errors.HpcError(f"task {name}() failed and its exception could not be rebuilt here: {load_err}")
        where = f"worker {worker}" if worker >= 0 else "the driver"
        text = errors.format_remote_traceback(tb)
        child = getattr(exc, "remote_traceback", None)
        if child and isinstance(child, str):  # a child task's error, raised by this task's get(): its traceback first
            text = f"{child}\nThe child task's error above was raised in its parent task:\n\n{text}"
        # "attempt 1 of 4" only where a failure of this type is retried: the retries count
        # lost workers, and an exception not listed in retry_exceptions= is never run again.
        context = f"attempt {task.attempt} of {task.options.retries + 1} on {where}" if _retries(task, exc) else \
            f"on {where}"
        return errors.remote_exception(exc, function=name, traceback_text=text, context=context)

    def _release(self, task: Pending) -> None:
        staged, task.staged = task.staged, None
        if staged is not None:
            self.backend.release_staged(staged)

    def _complete_error(self, task: Pending, exc: BaseException) -> None:
        if isinstance(exc, errors.ResourceRequestError) and self.recorder.active:  # the trace's refused requests
            self._record_safely(self.recorder.record_refused, task.task_id, task.label, exc.request, time.time(),
                                worker=-1)
        self._release(task)
        self._tasks.pop(task.task_id, None)
        self.tasks_finished += 1
        for f in self._futures_of(task):
            f._complete(STATE_FAILED, error=exc)

    def _fail_from_dependency(self, task: Pending, dep: Future) -> None:
        self._release(task)
        self._tasks.pop(task.task_id, None)
        exc = dep._error or errors.cancelled(task.fn.name, task.task_id,
                                             f"its input, task {dep.task_id}, was cancelled")
        state = STATE_CANCELLED if dep._state == STATE_CANCELLED else STATE_FAILED
        for f in self._futures_of(task):
            f._complete(state, error=exc)
        if task.on_batch_done is not None:
            task.on_batch_done(task, None)

    # -- cancellation ------------------------------------------------------------------------
    def _cancel_future(self, fut: Future) -> bool:
        task = self._tasks.get(fut.task_id)
        if task is None:
            # A map item (its batch carries the id) or already finished: cancel just this future.
            return fut._complete(STATE_CANCELLED, error=errors.cancelled(fut.function, fut.task_id))
        # The future is cancelled now, so the caller sees it at once; the backend stops the
        # work in the background and its late report finds the future already done.
        done = fut._complete(STATE_CANCELLED, error=errors.cancelled(fut.function, fut.task_id))
        if done and self.recorder.active:
            # Recorded now, not when the backend confirms: a traced region (a %%eugo cell
            # stopped by Interrupt) closes right after the cancel and must show it.
            self._record_safely(self._record, task, base.CANCELLED, None, -1, fut.function,
                                task.ready_time or time.time(), time.time(), None, worker=-1)
        if task.ready_time:  # launched: the backend stops it
            self.backend.cancel(task)
        else:  # still waiting for its inputs
            self._release(task)
            self._tasks.pop(task.task_id, None)
        return done

    def cancel_all(self) -> int:
        """Cancel every task submitted and not finished (``%%eugo`` does this on Interrupt)."""
        n = sum(hook(self) for hook in self._cancel_all_hooks)  # hpc.map items not sent yet, counted per item
        for task in list(self._tasks.values()):
            for f in self._futures_of(task):
                if f._state == STATE_PENDING and f.cancel():
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
        self.stopped_by = "shutdown"
        try:
            self.backend.shutdown()
        finally:
            for task in list(self._tasks.values()):
                for f in self._futures_of(task):
                    f._complete(STATE_CANCELLED, error=errors.cancelled(
                        f.function, f.task_id, "the runtime was shut down (hpc.shutdown, hpc.init or the kernel)"))
            self._tasks.clear()
            for hook in self._shutdown_hooks:  # batch="auto" calls still held for a batch end cancelled too
                hook(self)


# Called with ``(runtime, task id, name)`` for every ``.remote()`` call submitted (see :func:`observing_submissions`).
_submit_observers: tuple[Callable[[Runtime, int, str], None], ...] = ()


@contextlib.contextmanager
def observing_submissions(observe: Callable[[Runtime, int, str], None]) -> Iterator[None]:
    """While the block runs, call ``observe(runtime, task_id, name)`` as each ``.remote()`` call is submitted.

    It runs on the submitting thread, before the task is handed to the engine: an observer may mark the
    task (:meth:`Runtime.hand_back_late`). With none installed, submission pays one empty loop.
    """
    global _submit_observers
    with _current_lock:
        _submit_observers = (*_submit_observers, observe)
    try:
        yield
    finally:
        with _current_lock:
            _submit_observers = tuple(o for o in _submit_observers if o is not observe)


_current: Runtime | None = None
_latest: Runtime | None = None  # the last runtime set current: it stays readable after its shutdown
_current_lock = threading.RLock()


def start_runtime(backend: str | None = None, workers: int | None = None, *, address: str | None = None,
          cluster: Any = None, wait_ready: bool = True, **backend_options: Any) -> Runtime:
    """Start a runtime on ``backend`` and make it the active one (what ``hpc.init`` does).

    A running runtime is shut down first (its pending tasks end cancelled). With no engine
    named, ``EUGO_ADDRESS`` (an existing cluster's address) wins over the embedded pool.
    """
    from eugo_lab import backends
    from eugo_lab.hpc.optimized import jit_trial
    from eugo_lab.settings import ADDRESS_ENV

    # Every call carries the automatic JIT from the first runtime on; before profiling (order 20), so a
    # profiled trial samples the wrapper that runs the compiled code.
    add_wrapper(jit_trial, order=10)

    if address is None and backend is None and cluster is None:
        address = os.environ.get(ADDRESS_ENV) or None
    name = backends.resolve_name(backend, address=address, cluster=cluster)
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if name == "local":  # the worker template boots while the pool's own code is imported
        from eugo_lab.backends.local_template import discard_prestarted, prestart_template

        prestart_template()
        try:
            return _start(name, workers, address, cluster, wait_ready, backend_options)
        except BaseException:
            discard_prestarted()  # the pool did not take it
            raise
    if "eugo_lab.backends.local_template" in sys.modules:  # a lookup of hpc.get may have booted one for nothing
        from eugo_lab.backends.local_template import discard_prestarted

        discard_prestarted()
    return _start(name, workers, address, cluster, wait_ready, backend_options)


def _start(name: str, workers: int | None, address: str | None, cluster: Any, wait_ready: bool,
           backend_options: dict[str, Any]) -> Runtime:
    from eugo_lab import backends

    with _current_lock:
        old = _current
        if old is not None:
            old.shutdown()
            set_current(None)
        be = backends.create(name, workers=workers, address=address, cluster=cluster, **backend_options)
        be.start()
        if wait_ready:
            # The first .remote() needs cloudpickle: import it while the workers boot, not after.
            serialization.warm()
            be.wait_ready()
        # An open region (a %%eugo cell that calls hpc.init) keeps recording: the new runtime takes its recorder.
        handed = old.recorder if old is not None and old.recorder.in_region else None
        # Everything it was started with, so a restart (%%eugo -w N, --compare) can start the same again.
        where = {k: v for k, v in (("address", address), ("cluster", cluster)) if v is not None}
        rt = Runtime(be, backend_name=name, options={"workers": workers, **where, **backend_options}, recorder=handed)
        if handed is not None:
            old.successor = rt  # type: ignore[union-attr]
        set_current(rt)
    return rt


def stop_runtime() -> None:
    """Shut the active runtime down, if any (what ``hpc.shutdown`` does)."""
    with _current_lock:
        rt = _current
        set_current(None)
    if rt is not None:
        rt.shutdown()


# How a task running on an engine's worker finds the runtime of that engine (eugo_lab.hpc.engine_nested registers
# its own when imported): each returns it, or None outside such a task. Asked before a runtime is started.
_task_runtimes: list[Callable[[], Runtime | None]] = []


def add_task_runtime(find: Callable[[], Runtime | None]) -> None:
    """Have :func:`current` ask ``find()`` for the runtime of the task this process runs, first (once per ``find``)."""
    if find not in _task_runtimes:
        _task_runtimes.append(find)


def current(start: bool = True) -> Runtime | None:
    """The active runtime; start the embedded default (or ``EUGO_ADDRESS``) if ``start``."""
    rt = _current
    if rt is not None:
        return rt
    connection = sys.modules.get("eugo_lab.backends.local_nested")
    if connection is not None and connection.client is not None:  # inside a local-pool task: the driver's runtime
        from eugo_lab.hpc.nested import worker_runtime

        nested = worker_runtime()
        if nested is not None:
            return nested  # type: ignore[return-value]
    for find in _task_runtimes:  # inside a task on Dask or Ray: that cluster (eugo_lab.hpc.engine_nested)
        found = find()
        if found is not None:
            return found
    if not start:
        return None
    with _current_lock:
        if _current is None:
            start_runtime(wait_ready=False)  # the first .remote() should not wait for every worker to boot
        return _current


def running() -> Runtime:
    """The active runtime, starting the default one if none runs (never ``None``)."""
    rt = current()
    assert rt is not None  # current(start=True) always leaves one
    return rt


def idle_stops() -> tuple[Any, ...]:
    """Every idle stop of an embedded cluster in this process, oldest first (the last 100), replaced runtimes too."""
    dask_engine = sys.modules.get("eugo_lab.backends.dask")  # not imported: no Dask cluster ever ran, none stopped
    return dask_engine.recorded_idle_stops() if dask_engine is not None else ()


def latest() -> Runtime | None:
    """The runtime started last, running or already stopped (``None`` before the first); for graders."""
    return _latest


def set_current(rt: Runtime | None) -> None:
    """Install ``rt`` as the active runtime (``hpc.init`` and ``hpc.shutdown`` use this)."""
    global _current, _latest
    with _current_lock:
        _current = rt
        if rt is not None:
            _latest = rt
    for listener in tuple(_runtime_listeners):  # the status publisher, when this kernel reports to a server
        try:
            listener()
        except Exception:  # a listener must never break init or shutdown
            log.debug("a runtime listener failed", exc_info=True)


def _shutdown_at_exit() -> None:
    rt = _current
    if rt is not None:
        try:
            rt.shutdown()
        except Exception:  # noqa: BLE001 - interpreter exit
            pass


atexit.register(_shutdown_at_exit)
# Futures record their waits on the active runtime through this (they cannot import the session).
blocking.active_runtime = lambda: _current
