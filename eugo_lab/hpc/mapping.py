"""``hpc.map``: one future per item, dispatched in batches sized from measured durations.

Why batches: a task costs a fixed ~100 us of scheduling overhead, so 100,000 tasks of
1 us each would spend 99% of their time on overhead. Like joblib's auto-batching, we
start with single-item probe batches, measure the per-item time on the worker, and then
size batches to take about ``TARGET_BATCH_SECONDS`` each. Near the end, batches shrink so
that every worker still has about two batches left: no worker idles at the tail while
another chews through one oversized batch.
"""

from __future__ import annotations

import contextlib
import gc
import math
import pickle
import threading
import weakref
from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any

from eugo_lab.hpc import errors
from eugo_lab.hpc.future import CANCELLED, Future
from eugo_lab.hpc.task import FunctionRecord, Task, TaskOptions

# A batch this long amortizes the ~0.1 ms per-task overhead to well under 1%, yet is short
# enough that the live timeline moves and the tail stays balanced (joblib aims at 0.2 s too).
TARGET_BATCH_SECONDS = 0.2
# Batches in flight per worker: one running, one queued, so a worker never waits for the
# driver to form its next batch.
INFLIGHT_PER_WORKER = 2
# Weight of a new per-item timing in the running estimate.
EWMA_ALPHA = 0.5


# Item types that can never hide a future, a put reference or a large buffer: a batch of
# only these is pickled once by the C pickler (see _Packed) instead of going through the
# task pickler's per-object persistent_id hook (~0.25 us per item, 10x plain pickle).
_PLAIN = frozenset({int, float, complex, str, bytes, bool, type(None)})


class _Packed:
    """A batch of plain items pickled up front; it unpickles on the worker as the list itself."""

    __slots__ = ("blob",)

    def __init__(self, items: list):
        self.blob = pickle.dumps(items, pickle.HIGHEST_PROTOCOL)

    def __reduce__(self) -> tuple:
        return pickle.loads, (self.blob,)


# hpc.map calls with items not finished yet, for progress displays (the %%eugo counters count
# items: Runtime.pending_tasks sees one task per batch and nothing of the items not sent yet).
# Weak: a job the user dropped, or one whose runtime was shut down, simply disappears.
_unfinished_jobs: weakref.WeakSet[MapJob] = weakref.WeakSet()
_jobs_lock = threading.Lock()


def map_progress(runtime: Any) -> tuple[int, int]:
    """``(items, batches)`` of ``runtime``'s running ``hpc.map`` calls: items not finished, batch tasks in flight.

    Items not finished = not sent yet + in a batch that has not come back. A progress
    display counts ``runtime.pending_tasks - batches + items``. Cheap (a few running maps,
    no per-item work): the live view calls it ~10 times a second.
    """
    with _jobs_lock:
        jobs = [j for j in _unfinished_jobs if j.runtime is runtime]
    items = batches = 0
    for j in jobs:
        with j.lock:
            items += len(j.items) - j.next + j.sent_items
            batches += j.inflight
    return items, batches


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while creating many objects at once.

    Creating 100,000 futures triggers ~140 young-generation passes plus older ones that walk
    every live object; in a notebook with a large heap that was more than half of
    ``hpc.map``'s own cost (35-68 ms against 15 ms paused). Futures form no cycles that need
    collecting now, and the collector's previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class MapJob:
    """Feeds the items of one ``hpc.map`` call to the runtime as adaptive batches."""

    def __init__(self, runtime: Any, fn: FunctionRecord, items: list, options: TaskOptions, batch: int | str):
        self.runtime = runtime
        self.fn = fn
        self.items = items
        self.options = options
        self.batch = batch
        name = options.name or fn.name
        cancel = self._cancel_item
        ids = runtime.new_ids(len(items))
        with _gc_paused():  # no Python-level loop, and no collector passes over half-built lists
            self.futures = list(map(Future, ids, repeat(name), repeat(cancel)))
        # Item position of a future: task_id - first_id when the ids are consecutive (they are
        # unless another thread took ids meanwhile); otherwise a dict built on the first cancel.
        self.first_id = ids[0] if ids and ids[-1] - ids[0] == len(ids) - 1 else None
        self._pos_of: dict[int, int] | None = None
        self.next = 0
        self.inflight = 0
        self.sent_items = 0  # items in batches sent and not come back (for map_progress)
        self.cancelled = 0  # items cancelled so far: while 0, batches are plain slices
        self.per_item: float | None = None
        self.lock = threading.Lock()
        # The batch task of each item position (for cancel), and each batch's positions:
        # bookkeeping per batch with C-speed slices rather than a dict entry per item.
        self.task_of: list[Task | None] = [None] * len(items)
        self.positions: dict[int, range | list[int]] = {}
        self.workers = max(1, runtime.backend.worker_count)
        self.plain = set(map(type, items)) <= _PLAIN  # one C-speed scan decides for every batch

    def _size(self) -> int:
        remaining = len(self.items) - self.next
        if isinstance(self.batch, int):
            return min(self.batch, remaining)
        if self.per_item is None:
            return 1  # probe: the first results tell us how long an item takes
        size = int(TARGET_BATCH_SECONDS / max(self.per_item, 1e-7))
        tail_cap = math.ceil(remaining / (INFLIGHT_PER_WORKER * self.workers))
        return max(1, min(size, tail_cap, remaining))

    def pump(self) -> None:
        """Submit batches until enough are in flight or every item is out."""
        while True:
            with self.lock:
                if self.next >= len(self.items) or self.inflight >= INFLIGHT_PER_WORKER * self.workers:
                    return
                size = self._size()
                lo, hi = self.next, self.next + size
                self.next = hi
                if self.cancelled:
                    idx: range | list[int] = [i for i in range(lo, hi) if self.futures[i]._state != CANCELLED]
                    if not idx:
                        continue
                else:
                    idx = range(lo, hi)
                self.inflight += 1
                self.sent_items += len(idx)
            if type(idx) is range:
                futs, items = self.futures[lo:hi], self.items[lo:hi]
                if self.plain:
                    items = _Packed(items)  # type: ignore[assignment]
            else:
                futs, items = [self.futures[i] for i in idx], [self.items[i] for i in idx]
            try:
                task = self.runtime.submit_batch(self.fn, items, futs, self.options, on_done=self._batch_done)
            except errors.SerializationError:
                with self.lock:
                    self.inflight -= 1
                    self.sent_items -= len(idx)
                self._fail_unpicklable(idx)
                continue
            except errors.HpcError as exc:
                with self.lock:
                    self.inflight -= 1
                    self.sent_items -= len(idx)
                for f in futs:
                    f._complete(2, error=exc)
                return
            self._assign(task, idx)

    def _fail_unpicklable(self, idx: list[int]) -> None:
        # Pickle item by item to blame exactly the bad ones; the good ones still run.
        from eugo_lab.hpc.serialization import dumps_args

        good: list[int] = []
        for i in idx:
            try:
                dumps_args((self.items[i],), {}, function=self.fn.name)
                good.append(i)
            except errors.SerializationError as exc:
                self.futures[i]._complete(2, error=errors.SerializationError(
                    f"item {i} of hpc.map({self.fn.name}, ...) cannot be sent to a worker: {exc}"))
        if good:
            with self.lock:
                self.inflight += 1
                self.sent_items += len(good)
            futs = [self.futures[i] for i in good]
            task = self.runtime.submit_batch(self.fn, [self.items[i] for i in good], futs, self.options,
                                             on_done=self._batch_done)
            self._assign(task, good)

    def _assign(self, task: Task, idx: range | list[int]) -> None:
        with self.lock:
            if task.task_id in self.positions:  # a tombstone: the batch finished before we got here
                del self.positions[task.task_id]
                return
            if type(idx) is range:
                self.task_of[idx.start:idx.stop] = [task] * len(idx)
            else:
                for i in idx:
                    self.task_of[i] = task
            self.positions[task.task_id] = idx

    def _position(self, fut: Future) -> int:
        if self.first_id is not None:
            return fut.task_id - self.first_id
        if self._pos_of is None:
            self._pos_of = {f.task_id: i for i, f in enumerate(self.futures)}
        return self._pos_of[fut.task_id]

    def _batch_done(self, task: Task, stats: Any) -> None:
        with self.lock:
            self.inflight -= 1
            self.sent_items -= len(task.items or ())
            if stats is not None and task.items:
                _, body, _, deser, ser = stats[:5]
                est = (body + deser + ser) / len(task.items)
                self.per_item = est if self.per_item is None else self.per_item + EWMA_ALPHA * (est - self.per_item)
            idx = self.positions.pop(task.task_id, None)
            if idx is None:
                self.positions[task.task_id] = None  # type: ignore[assignment] - see _assign
            elif type(idx) is range:
                self.task_of[idx.start:idx.stop] = [None] * len(idx)
            else:
                for i in idx:
                    self.task_of[i] = None
        self.pump()
        if self.next >= len(self.items) and not self.inflight:
            with _jobs_lock:
                _unfinished_jobs.discard(self)

    def _cancel_item(self, fut: Future) -> bool:
        done = fut._complete(CANCELLED, error=errors.cancelled(fut.function, fut.task_id))
        with self.lock:
            if done:
                self.cancelled += 1
            task = self.task_of[self._position(fut)]
        if task is not None and all(f._state == CANCELLED for f in task.items or ()):
            self.runtime.backend.cancel(task)
        return done


def map_items(runtime: Any, fn: FunctionRecord, iterable: Iterable, options: TaskOptions,
              batch: int | str = "auto") -> list[Future]:
    """Start an ``hpc.map``; returns the item futures in input order."""
    if batch != "auto" and not (isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1):
        raise ValueError(f"batch must be 'auto' or an int >= 1, got {batch!r}")
    try:
        items = list(iterable)
    except TypeError as exc:
        if hasattr(iterable, "__iter__"):
            raise  # an iterator that failed while producing its items: its own error
        raise TypeError(f"hpc.map({options.name or fn.name}, items): items must be an iterable (a list, a range, "
                        f"a generator...), got {type(iterable).__name__}") from exc
    fn.payload  # noqa: B018 - a function that cannot be pickled fails here, not later
    if items:
        # Probe the first item so an unpicklable input fails at the call, like .remote().
        from eugo_lab.hpc.serialization import dumps_args

        dumps_args((items[0],), {}, function=options.name or fn.name, token_of=runtime._token_of,
                   oob_threshold=runtime.backend.oob_threshold)
    job = MapJob(runtime, fn, items, options, batch)
    if items:
        with _jobs_lock:
            _unfinished_jobs.add(job)
    job.pump()
    return job.futures
