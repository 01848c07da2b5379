"""``@hpc.remote(batch="auto")``: ``.remote()`` calls of a tiny function, coalesced into batch tasks.

Why: each task costs the runtime ~0.1-0.5 ms of scheduling and pickling (Dask ~2 ms), so a
loop of 10,000 ``.remote()`` calls of a 10 us function spends almost all its time on
overhead. ``hpc.map`` batches because it sees all items at once; here the calls arrive one
by one, so batches are formed from what arrives while the workers are busy:

1. **probe**: the first calls go out as plain tasks, each reporting its measured time (up to
   two per worker in flight, so a slow function loses no parallelism while it is measured);
   calls made while those are out wait here, at most until the first one reports;
2. a function measured slower than :data:`TINY_SECONDS` a call is left alone: every call is
   a plain task, exactly as without ``batch="auto"``;
3. a **tiny** function's calls are held while :data:`INFLIGHT_PER_WORKER` batches per worker are
   out, and sent as one batch when one comes back (or when :data:`COALESCED_BATCH_SECONDS` of
   work is waiting). With nothing in flight a call goes at once, so a lone call never waits.

Each call keeps its own :class:`~eugo_lab.hpc.Future` (its own task id; errors and
cancellation per call) and shows in the trace as its own task, as a ``hpc.map`` item does.
Calls whose arguments hold futures or ``put`` references go as plain tasks (they would make
a batch wait for all of their inputs).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from eugo_lab.contract import errors
from eugo_lab.contract.item_cost import ItemCost, task_seconds
from eugo_lab.contract.task import FunctionRecord, TaskOptions
from eugo_lab.hpc import session
from eugo_lab.hpc.future import STATE_CANCELLED, STATE_FAILED, Future, FutureBatch
from eugo_lab.hpc.spread import Spread

# A call under 1 ms is "tiny": the ~0.1-0.5 ms a task costs is then 10% or more of its time.
TINY_SECONDS = 1e-3
# Work per batch at most: well above the per-task overhead (<1% of it), short enough that
# the live timeline moves and the last batches do not leave workers idle. Shorter than an
# hpc.map batch (hpc.mapping.MAP_BATCH_SECONDS): calls arrive one .remote() at a time and the
# caller may be waiting on the first of them, and no shrinking tail follows (the calls' end is unknown).
COALESCED_BATCH_SECONDS = 0.05
# Batches (or probe tasks) in flight per worker: one running, one queued, as hpc.map does.
INFLIGHT_PER_WORKER = 2
# A batch of at least this many calls moves that estimate with the full weight; smaller ones pro rata.
FULL_WEIGHT_CALLS = 16

_PLAIN = frozenset({int, float, complex, str, bytes, bool, type(None)})


@dataclass(frozen=True)
class CoalesceStats:
    """What ``batch="auto"`` did for one function (since its runtime started)."""

    function: str
    calls: int  # .remote() calls
    plain_tasks: int  # calls sent as plain tasks (probes, slow function, calls with futures)
    batches: int  # batch tasks sent
    batched_calls: int  # calls sent inside those batches
    largest_batch: int
    per_call: float | None  # measured seconds per call (body, unpickling, pickling)
    mode: str  # "probing" | "tiny" | "slow"

    @property
    def backend_tasks(self) -> int:
        """Tasks the engine saw: plain tasks plus batches."""
        return self.plain_tasks + self.batches


_all: weakref.WeakSet[Coalescer] = weakref.WeakSet()

_SHUT_DOWN = "the runtime was shut down (hpc.shutdown, hpc.init or the kernel)"


def runtime_closed(rt: Any) -> None:
    """``rt`` was shut down: the calls still held for a batch on it end cancelled, as its tasks did."""
    for c in list(_all):
        c._drop_held(rt)


def all_stats() -> list[CoalesceStats]:
    """Stats of every ``batch="auto"`` function that made calls, by name."""
    return sorted((c.stats() for c in list(_all) if c.calls), key=lambda s: s.function)


class Coalescer:
    """Holds and batches the ``.remote()`` calls of one ``batch="auto"`` function."""

    def __init__(self, record: FunctionRecord, options: TaskOptions, name: str):
        self.record = record
        self.options = options
        self.name = name
        self.spread = FunctionRecord(Spread(record.fn), record.name)
        self.lock = threading.Lock()
        self.runtime: Any = None
        self._reset()
        _all.add(self)

    def _reset(self) -> None:
        self.per_call = ItemCost()  # measured seconds per call (body, unpickling, pickling)
        self.mode = "probing"
        self.probe_best: float | None = None  # the fastest probe's seconds a call
        self.buffer: list[tuple[tuple, dict, Future]] = []
        self.inflight = 0
        self.calls = self.plain_tasks = self.batches = self.batched_calls = self.largest = 0

    def stats(self) -> CoalesceStats:
        """A snapshot of the counters."""
        with self.lock:
            return CoalesceStats(self.name, self.calls, self.plain_tasks, self.batches, self.batched_calls,
                                 self.largest, self.per_call.seconds, self.mode)

    # -- .remote() ----------------------------------------------------------------------------------
    def submit(self, args: tuple, kwargs: dict) -> Future:
        """One ``.remote()`` call: a plain task, or a future whose call waits here for the next batch."""
        rt = session.running()
        if rt is not self.runtime:  # a new runtime (hpc.init): measure again, on its workers
            self._drop_held(self.runtime)
            with self.lock:
                self._reset()
                self.runtime = rt
            rt.on_shutdown(runtime_closed)  # calls held for a batch end cancelled with the runtime
        plain_args = all(type(a) in _PLAIN for a in args) and all(type(v) in _PLAIN for v in kwargs.values())
        if not plain_args:
            # Raise here, like .remote(), for an argument that cannot be pickled; inputs that are
            # futures or put() references make a plain task (a batch would wait for all of them).
            from eugo_lab.contract.serialization import dumps_args

            _, tokens, _ = dumps_args(args, kwargs, function=self.name, token_of=rt._token_of)
            if tokens:
                with self.lock:
                    self.calls += 1
                    self.plain_tasks += 1
                return rt.submit(self.record, args, kwargs, self.options)
        slots = INFLIGHT_PER_WORKER * max(1, rt.backend.worker_count)
        fut: Future | None = None
        batch = None
        with self.lock:
            self.calls += 1
            probe = self.mode == "probing" and self.inflight < slots and not self.buffer
            if self.mode == "slow" or probe:
                self.plain_tasks += 1
                if probe:
                    self.inflight += 1
            else:
                fut = Future(rt.new_ids(1)[0], self.name, self._cancel)
                self.buffer.append((args, kwargs, fut))
                if self.mode == "tiny" and (self.inflight < slots or self._buffer_full()):
                    batch = self._take()
                    if batch is not None:
                        self.inflight += 1
        if fut is None:
            try:
                return rt.submit(self.record, args, kwargs, self.options, on_done=self._probe_done if probe else None)
            except BaseException:
                if probe:
                    with self.lock:
                        self.inflight -= 1
                raise
        if batch is not None:
            self._send(rt, batch)
        return fut

    def _drop_held(self, rt: Any) -> None:
        """Cancel the calls held for ``rt`` (shut down or replaced); nothing happens for another runtime."""
        with self.lock:
            if rt is None or rt is not self.runtime:
                return
            held, self.buffer = self.buffer, []
        for _, _, fut in held:
            fut._complete(STATE_CANCELLED, error=errors.cancelled(fut.function, fut.task_id, _SHUT_DOWN))

    def _buffer_full(self) -> bool:
        per = self.per_call.seconds or TINY_SECONDS
        return len(self.buffer) * per >= COALESCED_BATCH_SECONDS

    def _take(self) -> list[tuple[tuple, dict, Future]] | None:
        """The waiting calls (not cancelled) as one batch, at most COALESCED_BATCH_SECONDS of work (under the lock)."""
        live = [c for c in self.buffer if c[2]._state != STATE_CANCELLED]
        if not live:
            self.buffer = []
            return None
        cap = max(1, self.per_call.items_in(COALESCED_BATCH_SECONDS, default=TINY_SECONDS))
        # Spread what is waiting over the free slots, so a burst of held calls keeps every worker busy.
        rt = self.runtime
        free = max(1, INFLIGHT_PER_WORKER * max(1, rt.backend.worker_count if rt is not None else 1) - self.inflight)
        size = min(cap, -(-len(live) // free))
        batch, rest = live[:size], live[size:]
        self.buffer = rest
        self.batches += 1
        self.batched_calls += len(batch)
        self.largest = max(self.largest, len(batch))
        return batch

    def _send(self, rt: Any, batch: list[tuple[tuple, dict, Future]], attempt: int = 1) -> None:
        futs = [f for _, _, f in batch]
        calls = [(a, k) for a, k, _ in batch]

        def resend(indices: list[int], _: FutureBatch, next_attempt: int) -> None:
            # Calls that raised an exception named in retry_exceptions: only those go again, in a batch
            # of their own (the calls that succeeded keep their results), as .remote() retries a call.
            with self.lock:
                self.inflight += 1
            self._send(rt, [(*calls[i], futs[i]) for i in indices], next_attempt)

        try:
            rt.submit_batch(self.spread, calls, FutureBatch(futs, resend), self.options,
                            on_done=self._batch_done, attempt=attempt)
        except errors.HpcError as exc:  # the runtime was shut down meanwhile: fail these calls, as .remote() would
            with self.lock:
                self.inflight -= 1
            for f in futs:
                f._complete(STATE_FAILED, error=exc)

    # -- completions (the runtime's reporting thread) ---------------------------------------------------
    def _measured(self, stats: Any, n: int) -> None:
        if stats is None or not n:
            return
        body = stats.body
        ends = getattr(stats.item_ends, "ends", None)
        if ends:  # a batch: up to its last item's end; the body also holds a profiled batch's recording
            body = min(body, memoryview(ends).cast("d")[-1])  # being serialized (0.4 s the first time)
        seconds = body + stats.deser + stats.ser
        # A batch of a few calls measures mostly its fixed cost (unpickling, the reply): it moves the
        # estimate less, so the last small batches of a loop do not turn a tiny function slow.
        self.per_call.add(seconds, n, weight=min(1.0, n / FULL_WEIGHT_CALLS))

    def _probe_done(self, task: Any, stats: Any) -> None:
        with self.lock:
            self.inflight -= 1
            # Probes are timed by their fastest: a worker's first call also pays one-time costs (loading the
            # function, the JIT trial of --optimize: 4 ms against 10 us measured here) that its next call does
            # not, and a running average fed those would call a tiny function slow.
            if stats is not None:
                est = task_seconds(stats)
                self.probe_best = est if self.probe_best is None else min(self.probe_best, est)
                self.per_call = ItemCost(self.probe_best)
            if self.mode == "probing":
                # One tiny probe decides "tiny"; "slow" waits for every probe out (each may be a first call).
                # No timing at all (the worker died): decide now.
                if self.probe_best is not None and self.probe_best < TINY_SECONDS:
                    self.mode = "tiny"
                elif self.inflight == 0 or self.probe_best is None:
                    self.mode = "slow"
            held, self.buffer = (self.buffer, []) if self.mode == "slow" else ([], self.buffer)
        rt = self.runtime
        for args, kwargs, fut in held:  # a slow function: the calls that waited for the verdict go plain
            if fut._state == STATE_CANCELLED:
                continue
            self._plain_for(rt, args, kwargs, fut)
        self._pump()

    def _plain_for(self, rt: Any, args: tuple, kwargs: dict, fut: Future) -> None:
        """Send a held call as a plain task whose result lands in the future the caller already has."""
        with self.lock:
            self.plain_tasks += 1
        self._plain_send(rt, args, kwargs, fut, 1)

    def _plain_send(self, rt: Any, args: tuple, kwargs: dict, fut: Future, attempt: int) -> None:
        # A one-call batch: the caller's future (and its task id) stays the one it was given.
        def resend(_: list[int], __: FutureBatch, next_attempt: int) -> None:
            self._plain_send(rt, args, kwargs, fut, next_attempt)  # retry_exceptions: the call goes again

        try:
            rt.submit_batch(self.spread, [(args, kwargs)], FutureBatch([fut], resend), self.options, attempt=attempt)
        except errors.HpcError as exc:
            fut._complete(STATE_FAILED, error=exc)

    def _batch_done(self, task: Any, stats: Any) -> None:
        with self.lock:
            self.inflight -= 1
            self._measured(stats, len(task.items or ()))
            if self.mode == "tiny" and self.per_call.seconds is not None and self.per_call.seconds >= 2 * TINY_SECONDS:
                self.mode = "slow"  # its calls got longer: stop holding them
        self._pump()

    def _pump(self) -> None:
        rt = self.runtime
        if rt is None:
            return
        slots = INFLIGHT_PER_WORKER * max(1, rt.backend.worker_count)
        while True:
            with self.lock:
                if not self.buffer or self.mode == "probing" or self.inflight >= slots:
                    if self.mode == "slow" and self.buffer:
                        held, self.buffer = self.buffer, []
                    else:
                        return
                else:
                    held = None
                    batch = self._take()
                    if batch is None:
                        return
                    self.inflight += 1
            if held is not None:
                for args, kwargs, fut in held:
                    if fut._state != STATE_CANCELLED:
                        self._plain_for(rt, args, kwargs, fut)
                return
            self._send(rt, batch)

    def _cancel(self, fut: Future) -> bool:
        # Held here: it is dropped when its batch is formed. Sent: the batch still runs it (as with
        # hpc.map items) and its result is ignored; the caller sees the cancellation at once.
        return fut._complete(STATE_CANCELLED, error=errors.cancelled(fut.function, fut.task_id))
