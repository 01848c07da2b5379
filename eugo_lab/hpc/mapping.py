"""``hpc.map``: a sequence of one future per item, dispatched in batches sized from measured durations.

Why batches: a task costs a fixed ~100 us of scheduling overhead, so 100,000 tasks of
1 us each would spend 99% of their time on overhead. Like joblib's auto-batching, we
start with single-item probe batches, measure the per-item time on the worker, and then
size batches to take about ``MAP_BATCH_SECONDS`` each. Near the end, batches shrink so
that every worker still has about two batches left: no worker idles at the tail while
another chews through one oversized batch. They never shrink below ``MIN_BATCH_SECONDS``
of work: a worker idling that long at the end costs less than the round trips of ever
smaller batches (100,000 no-op items: 45 batches without the floor, 0.28 us per item; ~15 and
0.15 us with it, medians of 20 alternated runs).

Why a :class:`MapResult` and not a list of futures: an item costs well under a microsecond
on the workers, so one ``Future`` per item (creating it, completing it, reading it back)
was most of ``hpc.map``'s time and memory. The state of a map lives per batch instead (a
span of item positions, its decoded results, its error), plus a small dict of the items
whose outcome differs from their batch's (a cancelled item, an item that raised). An
item's ``Future`` is made only when somebody indexes or iterates the result, and from then
on it moves in step with its batch; ``hpc.get(result)`` joins the batches' result lists.
"""

from __future__ import annotations

import contextlib
import gc
import math
import pickle
import threading
import time
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from eugo_lab.contract import errors, given
from eugo_lab.contract.item_cost import ItemCost, task_seconds
from eugo_lab.contract.task import FunctionRecord, TaskOptions
from eugo_lab.hpc.future import (
    STATE_CANCELLED,
    STATE_FAILED,
    STATE_FINISHED,
    STATE_PENDING,
    BatchResult,
    Future,
    settle,
    wake,
)
from eugo_lab.hpc.pending import Pending

# A batch this long amortizes the ~0.1 ms per-task overhead to well under 1%, yet is short
# enough that the live timeline moves and the tail stays balanced (joblib aims at 0.2 s too).
# Longer than a coalesced batch (hpc.coalesce.COALESCED_BATCH_SECONDS): hpc.map has every item
# up front, so a batch's length costs no caller any waiting, only balance at the tail, which
# the shrinking tail batches (MIN_BATCH_SECONDS) take care of.
MAP_BATCH_SECONDS = 0.2
# The shortest batch worth sending at the tail: ~50 per-task overheads (0.1 ms each).
MIN_BATCH_SECONDS = 0.005
# Batches in flight per worker: one running, one queued, so a worker never waits for the
# driver to form its next batch.
INFLIGHT_PER_WORKER = 2
# Futures made per lock hold while iterating a MapResult: long enough to amortize the lock,
# short enough that the runtime's I/O thread (which takes the same lock) never waits long.
_ITER_CHUNK = 4096


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
# items: Runtime.pending_tasks sees one task per batch and nothing of the items not sent yet),
# and for Runtime.cancel_all (an Interrupt must stop the items not sent yet too).
# Weak: a job the user dropped, or one whose runtime was shut down, simply disappears.
_unfinished_jobs: weakref.WeakSet[MapJob] = weakref.WeakSet()
_jobs_lock = threading.Lock()


def _jobs_of(runtime: Any) -> list[MapJob]:
    with _jobs_lock:
        return [j for j in _unfinished_jobs if j.runtime is runtime]


def map_progress(runtime: Any) -> tuple[int, int]:
    """``(items, batches)`` of ``runtime``'s running ``hpc.map`` calls: items not finished, batch tasks in flight.

    Items not finished = not sent yet + in a batch that has not come back. A progress
    display counts ``runtime.pending_tasks - batches + items``. Cheap (a few running maps,
    no per-item work): the live view calls it ~10 times a second.
    """
    items = batches = 0
    for j in _jobs_of(runtime):
        with j.lock:
            items += j.end - j.next + j.sent_items
            batches += j.inflight
    return items, batches


def cancel_maps(runtime: Any) -> int:
    """Cancel every pending item of ``runtime``'s ``hpc.map`` calls, sent or not; returns how many."""
    return sum(j.cancel_pending() for j in _jobs_of(runtime))


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while creating many objects at once.

    Creating 100,000 futures triggers ~140 young-generation passes plus older ones that walk
    every live object; in a notebook with a large heap that was more than half of the cost
    of making them. Futures form no cycles that need collecting now, and the collector's
    previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Batch:
    """One batch of an ``hpc.map``: the item positions sent as one task, and how that task ended.

    It is that task's ``items``: a sequence of the items' futures (made on demand), which is
    what the recorder and the backends read (``len``, ``items[0].task_id``). For the
    runtime's failure paths (``Runtime._futures_of``) it also stands in for all its items'
    futures at once: ``_state``, ``_complete(state, error=...)``, ``cancel()``,
    ``function`` and ``task_id`` act on the whole batch, so a batch of 100,000 items that
    crashed, was cancelled or lost its runtime costs no per-item work either.
    """

    __slots__ = ("job", "lo", "hi", "positions", "size", "task", "state", "result", "error", "n_cancelled",
                 "reported", "attempt", "alone")
    # When its worker dies, the runtime ends each item on its own (Runtime._batch_crashed): finish() takes
    # the items to send again. (Coalesced .remote() calls, hpc.future.FutureBatch, are retried as a batch.)
    per_item_crashes = True

    def __init__(self, job: MapJob, lo: int, hi: int, positions: list[int] | None, attempt: int = 1,
                 alone: bool = False):
        self.job = job
        self.lo = lo
        self.hi = hi
        self.positions = positions  # None: every position in lo..hi; else the sorted ones sent
        self.size = hi - lo if positions is None else len(positions)
        self.task: Pending | None = None
        self.state = STATE_PENDING
        self.result: BatchResult | None = None
        self.error: BaseException | None = None  # None with STATE_CANCELLED: each item gets its own message
        self.n_cancelled = 0  # items of this batch cancelled one by one while it ran
        self.reported = False  # its task came back to MapJob._batch_done
        self.attempt = attempt  # > 1: it re-sends items of earlier batches that raised (MapJob.rebatched)
        self.alone = alone  # each item runs as a group of its own on the worker (contract.task.Task.alone)

    # -- positions ----------------------------------------------------------------------------
    def position(self, i: int) -> int:
        """Item position (in the map's input) of this batch's ``i``-th item."""
        return self.lo + i if self.positions is None else self.positions[i]

    def item_id(self, i: int) -> int:
        """The task id of this batch's ``i``-th item (what its future and the trace's item row carry)."""
        return self.job.first_id + self.position(i)

    def index(self, p: int) -> int:
        """Index in this batch of item position ``p`` (a position it holds)."""
        return p - self.lo if self.positions is None else bisect_left(self.positions, p)

    def holds(self, p: int) -> bool:
        """True if item position ``p`` was sent in this batch."""
        if not self.lo <= p < self.hi:
            return False
        if self.positions is None:
            return True
        k = bisect_left(self.positions, p)
        return k < len(self.positions) and self.positions[k] == p

    # -- the sequence of item futures (the recorder and the backends read it) -----------------
    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> Future:
        if i < 0:
            i += self.size
        if not 0 <= i < self.size:
            raise IndexError("batch index out of range")
        return self.job.future(self.position(i))

    def __iter__(self) -> Iterator[Future]:
        return iter([self.job.future(self.position(i)) for i in range(self.size)])

    def __repr__(self) -> str:
        return f"<hpc.map batch of {self.size} {self.job.name}() items, positions {self.lo}..{self.hi - 1}>"

    # -- completion (the runtime's I/O thread) -------------------------------------------------
    def finish(self, result: BatchResult, failed: dict[int, BaseException], retry: Sequence[int] = (),
               attempt: int = 2, resend: Sequence[int] = (), alone: Sequence[int] = (),
               split: Sequence[int] = ()) -> None:
        """The batch's task came back: ``result`` holds every item's value, ``failed`` the items that failed.

        The items in ``retry`` (indices of items that raised an error ``retry_exceptions`` names, or
        that crashed their worker, with attempts left) go again, as attempt ``attempt``: the items that
        succeeded are never run again. ``resend`` (items that never ran: the batch's worker died before
        them) and ``alone`` (the group of tiny items running when it died, each then run as a group of its
        own so that a second death names its item) go again as this batch's attempt: no retry is used.
        ``split``: items that go again as this batch's attempt, each as a batch of its own (an engine that
        cannot say how far a batch got before its worker died: a second death names its item).
        """
        job = self.job
        again: list[_Batch] = []
        with job.lock:
            if self.state != STATE_PENDING:
                return  # cancelled meanwhile: its items stay cancelled, as a single task's future would
            self.state = STATE_FINISHED
            self.result = result
            outcomes = job.outcomes
            carried = 0
            for indices, at, one_by_one in ((retry, attempt, False), (resend, self.attempt, False),
                                            (alone, self.attempt, True)):
                positions = {self.position(i) for i in indices} - outcomes.keys() if indices else None
                if positions:  # (items cancelled meanwhile stay cancelled)
                    again.append(job._retry_batch(sorted(positions), at, one_by_one))
                    carried += len(positions)
            for p in sorted({self.position(i) for i in split} - outcomes.keys()):
                again.append(job._retry_batch([p], self.attempt))
                carried += 1
            for i, exc in failed.items():
                p = self.position(i)
                if p not in outcomes and job._batch_of(p) is self:
                    outcomes[p] = (STATE_FAILED, exc)
            woken = job._closed(self, carried=carried)
        wake(woken)
        for b in again:
            job._submit(b, [job.items[p] for p in b.positions])  # type: ignore[union-attr]
        job._maybe_finished()

    # -- the Future methods the runtime's failure paths call (see Runtime._futures_of) ---------
    @property
    def function(self) -> str:
        """The mapped function's name."""
        return self.job.name

    @property
    def task_id(self) -> int:
        """The batch task's id (-1 before it was submitted)."""
        return self.task.task_id if self.task is not None else -1

    @property
    def _state(self) -> int:
        if self.state == STATE_PENDING and self.n_cancelled == self.size:
            return STATE_CANCELLED  # every item was cancelled one by one: nothing is left to wait for
        return self.state

    def _complete(self, state: int, payload: Any = None, error: BaseException | None = None) -> bool:
        # The runtime ends the whole batch (failed after its retries, cancelled by the engine,
        # its input failed, or the runtime shut down): every item still pending ends the same way.
        job = self.job
        with job.lock:
            if self.state != STATE_PENDING:
                return False
            self.state = state
            self.error = error
            woken = job._closed(self)
            if job.runtime._closed:  # no batch will ever be sent again: end the items not sent yet too
                woken += job._end_tail(state, error)
        wake(woken)
        job._maybe_finished()
        return True

    def cancel(self) -> bool:
        """Cancel this batch's pending items; True if there were any."""
        return self.job._cancel(only=self) > 0


class MapJob:
    """Feeds the items of one ``hpc.map`` call to the runtime as adaptive batches, and keeps their outcomes."""

    def __init__(self, runtime: Any, fn: FunctionRecord, items: list, options: TaskOptions, batch: int | str,
                 plain: bool | None = None):
        self.runtime = runtime
        self.fn = fn
        self.items = items
        self.n = len(items)
        self.options = options
        self.batch = batch
        self.name = options.name or fn.name
        recorder = getattr(runtime, "recorder", None)
        if options.name and options.name != fn.name and recorder is not None and recorder.active:
            recorder.note_label(options.name, fn.name)  # renamed: the trace keeps which function it runs
        # One block of consecutive task ids: item p is task first_id + p (no id list per item).
        self.first_id = runtime.new_id_block(self.n) if self.n else 0
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)  # get()/wait() on the whole map wait on it
        self.next = 0  # items[:next] were given to a batch
        self.end = self.n  # items[end:] will never be sent: they ended as `tail` says
        self.tail: tuple[int, BaseException | None] = (STATE_CANCELLED, None)
        self.done = 0  # items whose outcome is known
        self.inflight = 0
        self.sent_items = 0  # items in batches sent and not come back (for map_progress)
        self.per_item = ItemCost()  # seconds an item takes, from the batches that came back
        # Batches in position order (their spans tile items[:next]): starts[k] is batches[k].lo,
        # so an item's batch is one bisect away, with no per-item bookkeeping.
        self.starts: list[int] = []
        self.batches: list[_Batch] = []
        self.open: set[_Batch] = set()  # batches whose task has not ended
        # Items whose outcome is not their batch's: (state, error), error None = cancelled.
        self.outcomes: dict[int, tuple[int, BaseException | None]] = {}
        self.unsent_cancelled: set[int] = set()  # positions >= next cancelled one by one: skipped when sent
        self.futs: dict[int, Future] = {}  # the item futures made so far, by position
        # Items re-sent after they raised (retry_exceptions): the batch that holds each one's latest attempt.
        self.rebatched: dict[int, _Batch] = {}
        self._canceller = self._cancel_item  # one bound method shared by every item future
        self.workers = max(1, runtime.backend.worker_count)
        # True: every item is plain (a range holds ints only); None: each batch's slice is
        # scanned as it is sent (C speed), not the whole input up front: that scan (11 ms per
        # 1,000,000 items) would hold back the first batch while the workers wait.
        self.plain = plain

    # -- outcomes ---------------------------------------------------------------------------------
    def _error(self, p: int, error: BaseException | None) -> BaseException:
        # A cancellation made in bulk carries no error object per item: each is made when asked.
        return error if error is not None else errors.cancelled(self.name, self.first_id + p)

    def _outcome(self, p: int) -> tuple[int, BaseException | None, BatchResult | None, int]:
        """``(state, error, batch result, index in it)`` of item ``p``; the lock is held."""
        if self.outcomes:
            o = self.outcomes.get(p)
            if o is not None:
                return o[0], self._error(p, o[1]), None, 0
        if p >= self.next:
            if p >= self.end:
                return self.tail[0], self._error(p, self.tail[1]), None, 0
            return STATE_PENDING, None, None, 0
        b = self._batch_of(p)
        if b.state == STATE_PENDING:
            return STATE_PENDING, None, None, 0
        if b.state == STATE_FINISHED:
            return STATE_FINISHED, None, b.result, b.index(p)
        return b.state, self._error(p, b.error), None, 0

    def _batch_of(self, p: int) -> _Batch:
        """The batch that holds item ``p``'s latest attempt (``p`` < ``next``); the lock is held."""
        if self.rebatched:
            b = self.rebatched.get(p)
            if b is not None:
                return b
        return self.batches[bisect_right(self.starts, p) - 1]

    def _retry_batch(self, positions: list[int], attempt: int, alone: bool = False) -> _Batch:
        """A batch that re-sends the items at ``positions`` (sorted) as attempt ``attempt``; the lock is held.

        ``alone``: its items run one a group on the worker (see :attr:`_Batch.alone`).
        """
        b = _Batch(self, positions[0], positions[-1] + 1, positions, attempt, alone)
        for p in positions:
            self.rebatched[p] = b
        self.open.add(b)
        self.inflight += 1
        self.sent_items += b.size
        return b

    def _closed(self, b: _Batch, carried: int = 0) -> list:
        """Book ``b`` as ended (its ``state`` is set) and settle its item futures; the lock is held.

        ``carried``: items of ``b`` that another batch runs again (a retry), not done yet.
        """
        self.open.discard(b)
        self.done += b.size - b.n_cancelled - carried
        futs = self.futs
        if not futs:
            changes = []
        elif len(futs) < b.size:  # few futures made (the usual case): look at those
            changes = [(f, *self._outcome(p)) for p, f in list(futs.items())
                       if f._state == STATE_PENDING and b.holds(p)]
        else:
            get = futs.get
            changes = [(f, *self._outcome(p)) for p in (range(b.lo, b.hi) if b.positions is None else b.positions)
                       if (f := get(p)) is not None and f._state == STATE_PENDING]
        self.cond.notify_all()
        return settle([c for c in changes if c[1] != STATE_PENDING])  # an item being retried is not settled

    def _end_tail(self, state: int, error: BaseException | None) -> list:
        """The items not sent yet will never be: they end with ``state``; the lock is held."""
        if self.end <= self.next:
            return []
        lo, hi = self.next, self.end
        already = sum(1 for p in self.unsent_cancelled if lo <= p < hi)
        self.done += hi - lo - already
        self.end, self.tail = lo, (state, error)
        self.cond.notify_all()
        return settle([(f, *self._outcome(p)) for p, f in list(self.futs.items())
                       if p >= lo and f._state == STATE_PENDING])

    def _maybe_finished(self) -> None:
        if self.done >= self.n:
            with _jobs_lock:
                _unfinished_jobs.discard(self)

    # -- item futures -----------------------------------------------------------------------------
    def future(self, p: int) -> Future:
        """The future of item ``p``, made (in step with its batch) on first use."""
        f = self.futs.get(p)
        if f is None:
            with self.lock:
                f = self.futs.get(p)
                if f is None:
                    f = self._make(p)
        return f

    def _make(self, p: int) -> Future:
        # The lock is held: the future starts in the item's current state and the I/O thread,
        # which settles futures under the same lock, can never leave it behind.
        f = Future(self.first_id + p, self.name, self._canceller)
        state, error, result, index = self._outcome(p)
        if state != STATE_PENDING:
            f._state, f._error, f._batch, f._index, f._canceller = state, error, result, index, None
        self.futs[p] = f
        return f

    def futures(self, lo: int, hi: int) -> list[Future]:
        """The futures of items ``lo..hi-1``, in order (made as needed, a chunk per lock hold)."""
        out: list[Future] = []
        get = self.futs.get
        with _gc_paused():  # many new objects, no cycles among them: no collector passes meanwhile
            for c in range(lo, hi, _ITER_CHUNK):
                with self.lock:
                    make = self._make
                    out += [get(p) or make(p) for p in range(c, min(hi, c + _ITER_CHUNK))]
        return out

    # -- waiting and values (hpc.get / hpc.wait on the whole map) ---------------------------------
    def wait(self, count: int, timeout: float | None) -> bool:
        """Block until ``count`` items are done (at most ``timeout`` s); True if they are."""
        if self.done >= count:
            return True
        with self.cond:
            return self.cond.wait_for(lambda: self.done >= count, timeout)

    def first_pending(self) -> int | None:
        """Position of the first item not done yet, if any (for timeout messages)."""
        with self.lock:
            for b in sorted(self.open, key=lambda b: b.lo):
                for i in range(b.size):
                    if b.position(i) not in self.outcomes:
                        return b.position(i)
            for p in range(self.next, self.end):
                if p not in self.unsent_cancelled:
                    return p
        return None

    def values(self) -> list:
        """Every item's value, in order, once all are done; raises the first failed item's error (in order)."""
        with self.lock:
            bad = [p for p, o in self.outcomes.items() if o[0] != STATE_FINISHED]
            bad += [b.lo if b.positions is None else b.positions[0]
                    for b in self.batches if b.state not in (STATE_FINISHED, STATE_PENDING) and b.size]
            bad += [p for p, b in self.rebatched.items() if b.state not in (STATE_FINISHED, STATE_PENDING)]
            if self.end < self.n:
                bad.append(self.end)
            if bad:
                p = min(bad)
                raise self._outcome(p)[1]  # type: ignore[misc]
            results = [b.result for b in self.batches if b.size]
            redone = [(p, b.result, b.index(p)) for p, b in self.rebatched.items()]
        out: list = []
        for r in results:  # C-speed: each batch's decoded list joined onto the last
            out += r.values()  # type: ignore[union-attr]
        for p, r, i in redone:  # items that succeeded on a later attempt: their value from that batch
            out[p] = r.values()[i]  # type: ignore[union-attr]
        return out

    # -- cancellation -----------------------------------------------------------------------------
    def _cancel_item(self, fut: Future) -> bool:
        p = fut.task_id - self.first_id
        task = None
        with self.lock:
            state, _, _, _ = self._outcome(p)
            if state != STATE_PENDING:
                return False
            exc = errors.cancelled(self.name, fut.task_id)
            self.outcomes[p] = (STATE_CANCELLED, exc)
            self.done += 1
            if p >= self.next:
                self.unsent_cancelled.add(p)
            else:
                b = self._batch_of(p)
                b.n_cancelled += 1
                if b.n_cancelled == b.size:  # nothing of it is wanted any more: stop the task
                    task = b.task
            woken = settle([(fut, STATE_CANCELLED, exc, None, 0)])
            self.cond.notify_all()
        wake(woken)
        if task is not None:
            self.runtime.backend.cancel(task)
        self._maybe_finished()
        return True

    def cancel_pending(self) -> int:
        """Cancel every item still pending (``hpc.cancel(result)``); returns how many."""
        return self._cancel()

    def _cancel(self, only: _Batch | None = None) -> int:
        with self.lock:
            n = 0
            woken: list = []
            if only is None:
                before = self.done
                woken += self._end_tail(STATE_CANCELLED, None)
                n += self.done - before
                batches = list(self.open)
            else:
                batches = [only] if only.state == STATE_PENDING else []
            tasks = []
            for b in batches:
                n += b.size - b.n_cancelled
                b.state, b.error = STATE_CANCELLED, None
                woken += self._closed(b)
                tasks.append(b.task)
        wake(woken)
        for task in tasks:
            if task is not None:
                self.runtime.backend.cancel(task)
        self._maybe_finished()
        return n

    # -- feeding batches --------------------------------------------------------------------------
    def _size(self) -> int:
        remaining = self.end - self.next
        if isinstance(self.batch, int):
            return min(self.batch, remaining)
        if self.per_item.seconds is None:
            return 1  # probe: the first results tell us how long an item takes
        size = self.per_item.items_in(MAP_BATCH_SECONDS)
        tail_cap = max(math.ceil(remaining / (INFLIGHT_PER_WORKER * self.workers)),
                       self.per_item.items_in(MIN_BATCH_SECONDS))
        return max(1, min(size, tail_cap, remaining))

    def pump(self) -> None:
        """Submit batches until enough are in flight or every item is out."""
        while True:
            with self.lock:
                if self.next >= self.end or self.inflight >= INFLIGHT_PER_WORKER * self.workers:
                    return
                lo = self.next
                hi = self.next = lo + self._size()
                positions = None
                if self.unsent_cancelled:  # items cancelled before they were sent are left out
                    skip = self.unsent_cancelled
                    hit = {p for p in skip if lo <= p < hi} if len(skip) < hi - lo else skip.intersection(range(lo, hi))
                    if hit:
                        positions = [p for p in range(lo, hi) if p not in hit]
                        skip -= hit
                b = _Batch(self, lo, hi, positions)
                self.starts.append(lo)
                self.batches.append(b)
                if not b.size:  # every item of this span was cancelled already
                    b.state, b.reported = STATE_FINISHED, True
                    continue
                self.open.add(b)
                self.inflight += 1
                self.sent_items += b.size
            if positions is None:
                items: Any = self.items[lo:hi]
                given.note(self.fn.name, items)  # each item one argument, or a tuple of them (on while grading)
                if self.plain or (self.plain is None and set(map(type, items)) <= _PLAIN):
                    items = _Packed(items)
            else:
                items = [self.items[p] for p in positions]
                given.note(self.fn.name, items)
            if not self._submit(b, items):
                return

    def _submit(self, b: _Batch, items: Any) -> bool:
        """Send batch ``b``; False if the runtime refused it (then nothing more is sent)."""
        try:
            b.task = self.runtime.submit_batch(self.fn, items, b, self.options, on_done=self._batch_done,
                                               attempt=b.attempt, alone=b.alone)
        except errors.SerializationError as exc:
            return self._fail_unpicklable(b, exc)
        except errors.HpcError as exc:
            return self._refused(b, exc)
        return True

    def _refused(self, b: _Batch, exc: BaseException) -> bool:
        """The runtime would not take batch ``b``: it and the items not sent yet fail with ``exc``."""
        with self.lock:
            self.inflight -= 1
            self.sent_items -= b.size
            b.state, b.error, b.reported = STATE_FAILED, exc, True
            woken = self._closed(b) + self._end_tail(STATE_FAILED, exc)  # the runtime refuses: so it would the rest
        wake(woken)
        self._maybe_finished()
        return False

    def _fail_unpicklable(self, b: _Batch, exc: errors.SerializationError) -> bool:
        # Pickle item by item to blame exactly the bad ones; the good ones still run.
        from eugo_lab.contract.serialization import dumps_args

        good: list[int] = []
        bad: list[tuple[int, BaseException]] = []
        for p in (range(b.lo, b.hi) if b.positions is None else b.positions):
            try:
                dumps_args((self.items[p],), {}, function=self.fn.name)
                good.append(p)
            except errors.SerializationError as err:
                bad.append((p, errors.SerializationError(
                    f"item {p} of hpc.map({self.fn.name}, ...) cannot be sent to a worker: {err}")))
        if not bad:  # every item pickles alone, not all together (a resend of the good ones too): fail the batch
            return self._refused(b, exc)
        with self.lock:
            changes = []
            for p, err in bad:
                if p not in self.outcomes:
                    self.outcomes[p] = (STATE_FAILED, err)
                    self.done += 1
                    if (f := self.futs.get(p)) is not None:
                        changes.append((f, STATE_FAILED, err, None, 0))
            self.sent_items -= b.size - len(good)
            b.positions, b.size = good, len(good)
            b.n_cancelled = sum(1 for p in good if p in self.outcomes)
            if not good:
                self.inflight -= 1
                b.state, b.reported = STATE_FINISHED, True
                self.open.discard(b)
            self.cond.notify_all()
            woken = settle(changes)
        wake(woken)
        self._maybe_finished()
        return self._submit(b, [self.items[p] for p in good]) if good else True

    def _batch_done(self, task: Pending, stats: Any) -> None:
        b = task.items
        with self.lock:
            if b.reported:  # type: ignore[union-attr]
                return
            b.reported = True  # type: ignore[union-attr]
            self.inflight -= 1
            self.sent_items -= b.size  # type: ignore[union-attr]
            if stats is not None and b.size:  # type: ignore[union-attr]
                self.per_item.add(task_seconds(stats), b.size)  # type: ignore[union-attr]
        self.pump()
        self._maybe_finished()


class MapResult(Sequence):
    """What ``hpc.map`` returns: a read-only sequence of one :class:`~eugo_lab.hpc.Future` per item, in order.

    It behaves like the list of futures it stands for (``len``, indexing, slicing, iteration,
    ``==`` with that list, ``+``), and every ``hpc`` call that takes futures takes it:
    ``hpc.get(result)`` (the values, in order: each batch's decoded list joined to the
    last, no per-item work), ``hpc.wait``, ``hpc.as_completed``, ``hpc.cancel``, passing it
    or its items to ``.remote()``, ``await result[i]``, ``asyncio.gather(*result)``. An item's
    future is only made when it is indexed or iterated; until then an item costs its slot in
    the input list and nothing else.
    """

    __slots__ = ("_job",)

    def __init__(self, job: MapJob):
        self._job = job

    def __len__(self) -> int:
        return self._job.n

    def __getitem__(self, i: Any) -> Any:
        n = self._job.n
        if isinstance(i, slice):
            lo, hi, step = i.indices(n)
            if step == 1:
                return self._job.futures(lo, hi) if hi > lo else []
            return [self._job.future(p) for p in range(lo, hi, step)]
        try:
            p = i.__index__()
        except AttributeError:
            raise TypeError(f"MapResult indices must be integers or slices, not {type(i).__name__}") from None
        if p < 0:
            p += n
        if not 0 <= p < n:
            raise IndexError("MapResult index out of range")
        return self._job.future(p)

    def __iter__(self) -> Iterator[Future]:
        job = self._job
        for c in range(0, job.n, _ITER_CHUNK):
            yield from job.futures(c, min(job.n, c + _ITER_CHUNK))

    def __reversed__(self) -> Iterator[Future]:
        return reversed(self._job.futures(0, self._job.n))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MapResult):
            return other._job is self._job or (len(other) == len(self) and list(self) == list(other))
        if isinstance(other, list):  # equal to the list of its futures, as the list hpc.map returned was
            return len(other) == len(self) and list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment] - like a list: equal to lists, so unhashable

    def __add__(self, other: Any) -> list:
        if isinstance(other, (list, MapResult)):
            return list(self) + list(other)
        return NotImplemented

    def __radd__(self, other: Any) -> list:
        if isinstance(other, list):
            return other + list(self)
        return NotImplemented

    def __reduce__(self) -> tuple:
        # Passed to .remote() (or copied), it is the list of its futures: the task pickler turns
        # each into a dependency, and the worker receives the list of values.
        return list, (list(self),)

    def __repr__(self) -> str:
        # The futures' own reprs, without making them; no states: reprs must be deterministic.
        job = self._job

        def one(p: int) -> str:
            return f"<hpc.Future {job.name}() task {job.first_id + p}>"

        shown = range(job.n) if job.n <= 6 else [0, 1, 2, None, job.n - 1]
        body = ", ".join("..." if p is None else one(p) for p in shown)
        return f"hpc.MapResult({job.n} items: [{body}])"


def map_items(runtime: Any, fn: FunctionRecord, iterable: Iterable, options: TaskOptions,
              batch: int | str = "auto") -> MapResult:
    """Start an ``hpc.map``; returns its :class:`MapResult` (item futures in input order)."""
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
        from eugo_lab.contract.serialization import dumps_args

        dumps_args((items[0],), {}, function=options.name or fn.name, token_of=runtime._token_of,
                   oob_threshold=runtime.backend.oob_threshold)
    job = MapJob(runtime, fn, items, options, batch, plain=True if type(iterable) is range else None)
    if items:
        runtime.on_cancel_all(cancel_maps)  # %%eugo's Interrupt cancels the items not sent yet too
        with _jobs_lock:
            _unfinished_jobs.add(job)
    job.pump()
    if runtime.recorder.active:  # the trace keeps when the cell asked for every item (batches go out later)
        runtime.recorder.note_map_call(options.name or fn.name, time.time())
    return MapResult(job)
