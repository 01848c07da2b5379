"""``hpc.Future``: the handle a ``.remote()`` call returns at once.

Futures are deliberately small (``__slots__``, no lock or event of their own until
somebody waits), because a cell may create 100,000 of them. Results stay pickled until a
caller asks for them: a result only forwarded to another task is never unpickled on the
driver, and ``get()`` pays for decoding in the caller's thread, not the runtime's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

from eugo_lab.contract.errors import GetTimeoutError, cancelled
from eugo_lab.contract.refs import ObjectRef
from eugo_lab.contract.serialization import dumps_value, loads_value
from eugo_lab.hpc import blocking as _blocking
from eugo_lab.tracing.driver_calls import unwatched

# A future's state. Not the trace row's status codes (eugo_lab.contract.row: those describe
# one attempt; a future outlives failed attempts that were retried).
STATE_PENDING, STATE_FINISHED, STATE_FAILED, STATE_CANCELLED = 0, 1, 2, 3
_STATE_NAMES = {STATE_PENDING: "pending", STATE_FINISHED: "finished", STATE_FAILED: "error",
                STATE_CANCELLED: "cancelled"}

# One lock for all futures: completing a future takes it for a few instructions, and a
# lock per future would cost memory on every one of them.
_lock = threading.Lock()

# Inside a local-pool worker (eugo_lab.hpc.nested): how a task waits on the futures of tasks it
# submitted, ``(futures, how many, timeout) -> done in time``. It runs what the driver sends
# meanwhile; an event would block the worker's only thread, which is the one that must run them.
_nested_wait: Callable[[list[Future], int, float | None], bool] | None = None


class BatchResult:
    """The pickled results of one ``hpc.map`` batch, decoded once for all its items."""

    __slots__ = ("payload", "_values", "_decode_lock")

    def __init__(self, payload: bytes):
        self.payload = payload
        self._values: list | None = None
        self._decode_lock = threading.Lock()

    @classmethod
    def of(cls, values: list) -> BatchResult:
        """A result whose values are already decoded (the items a crashed batch finished: see ``Runtime``)."""
        result = cls(b"")
        result._values = values
        return result

    def values(self) -> list:
        """The decoded list of item results (decoded on first use)."""
        if self._values is None:
            with self._decode_lock:
                if self._values is None:
                    self._values = loads_value(self.payload)
                    self.payload = b""
        return self._values


class Future:
    """The eventual result of one task; resolve it with ``hpc.get(future)``."""

    __slots__ = (
        "task_id",
        "function",
        "_state",
        "_payload",
        "_batch",
        "_index",
        "_error",
        "_event",
        "_callbacks",
        "_canceller",
        "__weakref__",
    )

    def __init__(self, task_id: int, function: str, canceller: Callable[[Future], bool] | None = None):
        self.task_id = task_id
        self.function = function
        self._state = STATE_PENDING
        self._payload: bytes | None = None
        self._batch: BatchResult | None = None
        self._index = 0
        self._error: BaseException | None = None
        self._event: threading.Event | None = None
        self._callbacks: list | None = None
        self._canceller = canceller

    def __repr__(self) -> str:
        # No state here: it changes from run to run, and reprs must be deterministic.
        return f"<hpc.Future {self.function}() task {self.task_id}>"

    # -- state -------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """One of ``pending``, ``finished``, ``error``, ``cancelled``."""
        return _STATE_NAMES[self._state]

    def done(self) -> bool:
        """True once the task finished, failed or was cancelled.

        While a trace records, a loop that calls it on this future until it says True is recorded as
        a wait on it (:func:`eugo_lab.hpc.blocking.polled`): the driver was held by this one task.
        """
        finished = self._state != STATE_PENDING
        _blocking.polled(self.task_id, finished)
        return finished

    def cancelled(self) -> bool:
        """True if the task was cancelled before it produced a result."""
        return self._state == STATE_CANCELLED

    # -- completion (runtime side) -----------------------------------------------------
    def _complete(self, state: int, payload: bytes | None = None, error: BaseException | None = None,
                  batch: BatchResult | None = None, index: int = 0) -> bool:
        # Runs once per hpc.map item on the I/O thread, so it is kept lean: explicit
        # acquire/release (cheaper than ``with`` here), and only the slots that change are
        # written (the others still hold their None defaults from __init__).
        _lock.acquire()
        try:
            if self._state != STATE_PENDING:
                return False
            if batch is not None:
                self._batch = batch
                self._index = index
            elif payload is not None:
                self._payload = payload
            if error is not None:
                self._error = error
            self._state = state
            event = self._event
            callbacks = self._callbacks
            if callbacks is not None:
                self._callbacks = None
            self._canceller = None
        finally:
            _lock.release()
        if event is not None:
            event.set()
        if callbacks:
            for cb in callbacks:
                _run_callback(cb, self)
        return True

    def add_done_callback(self, fn: Callable[[Future], Any]) -> None:
        """Call ``fn(future)`` when the future is done (at once if it already is).

        Callbacks run on the runtime's I/O thread: keep them short and never block in them.
        """
        with _lock:
            if self._state == STATE_PENDING:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        _run_callback(fn, self)

    def _remove_done_callback(self, fn: Callable[[Future], Any]) -> None:
        """Take ``fn`` off a pending future (no-op once it is done or if it is not there)."""
        with _lock:
            callbacks = self._callbacks
            if callbacks is not None:
                try:
                    callbacks.remove(fn)
                except ValueError:
                    pass

    # -- waiting and values ------------------------------------------------------------
    def _wait(self, timeout: float | None) -> bool:
        if self._state != STATE_PENDING:
            return True
        if _nested_wait is not None:
            return _nested_wait([self], 1, timeout)
        waiter = _blocking.waiter()
        if waiter is not None:  # inside a task on Dask, Ray or the threads engine: its slot is lent out meanwhile
            return waiter([self], 1, timeout)
        with _lock:
            if self._state != STATE_PENDING:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    def _value(self) -> Any:
        """The result of a finished future (raise its error otherwise); never blocks."""
        state = self._state
        if state == STATE_FINISHED:
            if self._batch is not None:
                return self._batch.values()[self._index]
            return loads_value(self._payload)  # type: ignore[arg-type]
        if state == STATE_FAILED:
            raise self._error  # type: ignore[misc]
        if state == STATE_CANCELLED:
            raise self._error or cancelled(self.function, self.task_id)
        raise RuntimeError("future is still pending")  # pragma: no cover - callers wait first

    def _result_payload(self) -> bytes:
        """The pickled result, for forwarding to a dependent task without decoding it."""
        if self._batch is not None:
            return dumps_value(self._value())
        return self._payload  # type: ignore[return-value]

    @unwatched  # the runtime's own work: a graded cell's call monitor leaves it alone
    def result(self, timeout: float | None = None) -> Any:
        """Block until done and return the value (same as ``hpc.get(self)``).

        Recorded in traces as a ``get`` wait, like ``hpc.get``, even on a future already done
        (graders count the values a cell took); an Interrupt while waiting cancels the task,
        and a timeout leaves it running.
        """
        from eugo_lab.hpc.blocking import check_timeout, record_wait

        check_timeout(timeout, "result()")
        if self._state != STATE_PENDING:
            record_wait("get", time.time(), 1, self.task_id)
            return self._noted(self._value())
        start = time.time()
        try:
            if not self._wait(timeout):
                raise GetTimeoutError(
                    f"result() timed out after {timeout} s: {self.function}() (task {self.task_id}) is still running "
                    "and keeps running. Call result() again to keep waiting, or cancel() it.")
        except KeyboardInterrupt:
            self.cancel()
            raise
        finally:
            record_wait("get", start, 1, self.task_id)
        return self._noted(self._value())

    def _noted(self, value: Any) -> Any:
        """``value``, noted as this task's result handed to the driver (see :mod:`eugo_lab.tracing.returned`)."""
        from eugo_lab.hpc.blocking import active_runtime
        from eugo_lab.tracing.returned import note_returned

        note_returned(active_runtime(), [value], [self.task_id], single=True)
        return value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Block until done; return the task's exception, or ``None`` if it succeeded.

        Recorded in traces as a ``get`` wait, like :meth:`result`: it blocks the same way and
        takes the task's outcome, so a cell that waits through ``exception()`` is seen waiting.
        """
        from eugo_lab.hpc.blocking import check_timeout, record_wait

        check_timeout(timeout, "exception()")
        start = time.time()
        try:
            finished = self._wait(timeout)
        finally:
            record_wait("get", start, 1, self.task_id)
        if not finished:
            raise GetTimeoutError(f"task {self.function}() did not finish within {timeout} s")
        if self._state == STATE_FINISHED:
            return None
        try:
            self._value()
        except BaseException as exc:  # noqa: BLE001 - returned, not raised
            return exc
        return None  # pragma: no cover

    def __await__(self) -> Generator[Any, None, Any]:
        """``await future``: the value (or the task's exception), without blocking the event loop.

        For async code: a notebook cell with top-level ``await``, ``asyncio.gather(*futures)``,
        an async web handler. The I/O thread that completes the future hands the wake-up to
        the awaiting loop with ``call_soon_threadsafe``; the value is decoded on the loop's
        thread, as ``get()`` decodes in its caller's. Cancelling the awaiting asyncio task
        stops the wait only: the hpc task keeps running (cancel it with ``hpc.cancel``).
        """
        if self._state == STATE_PENDING:
            import asyncio

            loop = asyncio.get_running_loop()
            waiter = loop.create_future()

            def wake(_: Future) -> None:
                try:
                    loop.call_soon_threadsafe(_release, waiter)
                except RuntimeError:  # the loop was closed meanwhile: nobody is waiting any more
                    pass

            self.add_done_callback(wake)
            start = time.time()
            try:
                yield from waiter
            except BaseException:  # the awaiting task was cancelled: stop watching this future
                self._remove_done_callback(wake)
                raise
            _record_await(start, self.task_id)
        return self._value()

    def cancel(self) -> bool:
        """Cancel the task (see :func:`eugo_lab.hpc.cancel`); True if it was still pending."""
        canceller = self._canceller
        if self._state != STATE_PENDING or canceller is None:
            return False
        return canceller(self)


def complete_batch(futures: list[Future], batch: BatchResult, skip: Any = ()) -> None:
    """Finish every future of a batch with its item of ``batch`` (one lock for all; see :func:`settle`).

    The same effect as ``f._complete(STATE_FINISHED, batch=batch, index=i)`` for each ``i`` not in
    ``skip`` (items that failed, completed separately): the global lock is taken once, and
    events and callbacks are fired after it is released.
    """
    wake(settle([(f, STATE_FINISHED, None, batch, i) for i, f in enumerate(futures) if not (skip and i in skip)]))


def settle(changes: list[tuple[Future, int, BaseException | None, BatchResult | None, int]]) -> list:
    """Set the outcome of pending futures in one go: ``(future, state, error, batch, index)`` each.

    For callers that must change futures in step with their own bookkeeping (``hpc.map``
    settles its item futures while it holds its own lock, so a future never says pending
    after its map said done). Returns what :func:`wake` must do once the caller's locks are
    released: events and callbacks never run under a lock.
    """
    woken = []
    _lock.acquire()
    try:
        for f, state, error, batch, index in changes:
            if f._state != STATE_PENDING:
                continue
            if batch is not None:
                f._batch = batch
                f._index = index
            if error is not None:
                f._error = error
            f._state = state
            f._canceller = None
            if f._event is not None or f._callbacks is not None:
                woken.append((f, f._event, f._callbacks))
                f._callbacks = None
    finally:
        _lock.release()
    return woken


def argument_token(obj: Any, backend: Any) -> Any:
    """What the engine is sent in place of a future or stored reference among a task's arguments (None: neither)."""
    t = type(obj)
    if t is Future:
        return ("fut", obj.task_id)
    if t is ObjectRef:
        return backend.token(obj)
    return None


def collect(obj: Any, out: list, leaves: tuple[type, ...]) -> None:
    """Append to ``out`` each object of an exact type in ``leaves`` within ``obj`` (lists, tuples, sets, dicts)."""
    t = type(obj)
    if t in leaves:
        out.append(obj)
    elif t in (list, tuple, set, frozenset):
        for x in obj:
            collect(x, out, leaves)
    elif t is dict:
        for x in obj.values():
            collect(x, out, leaves)


def rebuild(obj: Any, leaves: tuple[type, ...], value: Callable[[Any], Any]) -> Any:
    """``obj`` with each object of an exact type in ``leaves`` replaced by ``value(it)``.

    The containers :func:`collect` walks (lists, tuples, sets, dicts) are rebuilt as the same type;
    anything else is kept as it is.
    """
    t = type(obj)
    if t in leaves:
        return value(obj)
    if t in (list, tuple, set, frozenset):
        return t(rebuild(x, leaves, value) for x in obj)
    if t is dict:
        return {k: rebuild(v, leaves, value) for k, v in obj.items()}
    return obj


def wake(woken: list) -> None:
    """Set the events and run the callbacks that :func:`settle` collected."""
    for f, event, callbacks in woken:
        if event is not None:
            event.set()
        for cb in callbacks or ():
            _run_callback(cb, f)


def _record_await(start: float, task: int) -> None:
    """The span an ``await`` on task ``task`` waited, as a driver block of kind ``await`` (like ``get``'s)."""
    from eugo_lab.hpc.blocking import record_wait

    record_wait("await", start, 1, task)


def _release(waiter: Any) -> None:
    """Wake an ``await`` (on its event loop's thread), unless that wait was cancelled."""
    if not waiter.done():
        waiter.set_result(None)


def _run_callback(fn: Callable[[Future], Any], fut: Future) -> None:
    try:
        fn(fut)
    except Exception:  # a broken callback must not stop the runtime
        import logging

        logging.getLogger("eugo_lab").exception("done-callback %r failed for %r", fn, fut)


class FutureBatch:
    """A batch task's items when each already has its future (``batch="auto"`` coalescing of ``.remote()`` calls).

    The same protocol as an ``hpc.map`` batch (``mapping._Batch``), which the runtime uses for
    every batch task: ``finish`` settles the items from one result list, and the batch stands
    in for its items where the runtime ends a task as a whole (``_complete``, ``cancel``,
    ``_state``, ``function``, ``task_id``).
    """

    __slots__ = ("futures", "resend")

    def __init__(self, futures: list[Future],
                 resend: Callable[[list[int], FutureBatch, int], None] | None = None):
        self.futures = list(futures)
        # resend(indices, batch, attempt): send these items again as their next attempt (batch="auto"
        # keeps each call's arguments for it); None: an item that raised fails at once.
        self.resend = resend

    def __len__(self) -> int:
        return len(self.futures)

    def __getitem__(self, i: int) -> Future:
        return self.futures[i]

    def __iter__(self) -> Iterator[Future]:
        return iter(self.futures)

    def __repr__(self) -> str:
        return f"<hpc.FutureBatch of {len(self.futures)} calls>"

    def item_id(self, i: int) -> int:
        """The task id of the ``i``-th call (its future's)."""
        return self.futures[i].task_id

    def finish(self, result: BatchResult, failed: dict[int, BaseException], retry: Sequence[int] = (),
               attempt: int = 2) -> None:
        """Settle every item: the failed ones with their error, the others from ``result``.

        Items in ``retry`` (indices of ``failed``) are sent again as attempt ``attempt`` and stay pending.
        """
        again = {i for i in retry if self.futures[i]._state == STATE_PENDING} if self.resend is not None else set()
        for i, exc in failed.items():
            if i not in again:
                self.futures[i]._complete(STATE_FAILED, error=exc)
        complete_batch(self.futures, result, skip=failed)
        if again:
            self.resend(sorted(again), self, attempt)  # type: ignore[misc]

    @property
    def function(self) -> str:
        """The calls' function name."""
        return self.futures[0].function if self.futures else "?"

    @property
    def task_id(self) -> int:
        """The first call's task id."""
        return self.futures[0].task_id if self.futures else -1

    @property
    def _state(self) -> int:
        states = {f._state for f in self.futures}
        if STATE_PENDING in states:
            return STATE_PENDING
        return STATE_CANCELLED if states == {STATE_CANCELLED} else STATE_FINISHED

    def _complete(self, state: int, payload: Any = None, error: BaseException | None = None) -> bool:
        """End every item still pending the same way; True if any was."""
        return any([f._complete(state, payload=payload, error=error) for f in self.futures])

    def cancel(self) -> bool:
        """Cancel the items still pending; True if any was."""
        return any([f.cancel() for f in self.futures])
