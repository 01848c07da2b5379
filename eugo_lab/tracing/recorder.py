"""The live recorder: appends task and blocking events into columns while regions are open.

Storage is columnar (``array.array`` per field, strings interned into small tables), so a
million task rows cost about 100 bytes each instead of a Python object per field.
Recording happens on the runtime's I/O thread under one lock; reading a region out
produces an immutable :class:`~eugo_lab.tracing.trace.Trace`.

Nothing is recorded while no region is open and nobody subscribed: the runtime checks
``recorder.active`` (a plain attribute) before doing any work for the trace.
"""

from __future__ import annotations

import collections
import math
import socket
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Row statuses (a column of int8 in the trace).
OK, ERROR, CRASHED, CANCELLED = 0, 1, 2, 3
STATUS_NAMES = ("ok", "error", "crashed", "cancelled")

TASK_INT_COLUMNS = ("task_id", "attempt", "function", "worker", "status", "batch", "bytes_in", "bytes_out")
TASK_FLOAT_COLUMNS = ("submit", "ready", "start", "end", "received", "cpu", "deser", "ser")
PHASE_COLUMNS = ("row", "name", "start", "end", "cpu")
BLOCK_COLUMNS = ("kind", "start", "end", "futures", "source")
_TASK_COLUMNS = TASK_INT_COLUMNS + TASK_FLOAT_COLUMNS
# Fast rows: (task_id, attempt, function code, worker, status, batch, submit, ready, received,
#             start_wall, body, cpu, deser, ser, bytes_in, bytes_out); the first six are ints.
_FAST_INT_COLUMNS = ("task_id", "attempt", "function", "worker", "status", "batch")
# Rows buffered before the runtime asks for a flush: ~30 MB of tuples at most.
FLUSH_ROWS = 65536


@dataclass(frozen=True)
class TaskEvent:
    """What live subscribers receive for each finished task attempt (one per map item)."""

    task_id: int
    function: str
    worker: int
    start: float
    end: float
    status: str
    attempt: int
    batch: int
    phases: tuple[tuple[str, float, float], ...]
    bytes_in: int
    bytes_out: int


@dataclass(frozen=True)
class BlockEvent:
    """What live subscribers receive for each ``get()``/``wait()`` that blocked the driver."""

    kind: str
    start: float
    end: float
    futures: int
    source: str


@dataclass(frozen=True)
class Chunk:
    """New rows read by :meth:`Recorder.read_since`: the same columns and name tables as a Trace."""

    tasks: dict[str, array]
    phases: dict[str, array]
    blocks: dict[str, array]
    functions: tuple[str, ...]
    phase_names: tuple[str, ...]
    block_kinds: tuple[str, ...]
    sources: tuple[str, ...]

    @classmethod
    def empty(cls) -> Chunk:
        """No rows."""
        return cls({c: array("q") for c in TASK_INT_COLUMNS} | {c: array("d") for c in TASK_FLOAT_COLUMNS},
                   {c: array("d") for c in PHASE_COLUMNS}, {c: array("d") for c in BLOCK_COLUMNS}, (), (), (), ())

    def __len__(self) -> int:
        return len(self.tasks["task_id"])


class _Strings:
    """Interns strings into ints so a column stores small codes."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, s: str) -> int:
        c = self.codes.get(s)
        if c is None:
            c = self.codes[s] = len(self.names)
            self.names.append(s)
        return c


def align_clocks(tasks: dict[str, array], phases: dict[str, array], workers: dict[int, tuple[str, int]],
                 driver_host: str) -> dict[int, float]:
    """Shift the times of workers on other hosts onto the driver's clock; return the offsets.

    Workers stamp ``start``/``end`` with their own wall clock. On the driver's host that is
    the driver's clock. On another host it may be off by milliseconds or more, which would
    draw a task starting before it was sent. Each task bounds the offset NTP-style: the
    body cannot start before the driver made it ready, nor end after the driver received
    its result, so ``max(ready - start) <= offset <= min(received - end)`` over that
    worker's tasks. We keep 0 when it fits those bounds, else take the middle of the
    interval (or its lower end when skewed bounds cross). Durations never change: each is
    measured with one process's monotonic clock.
    """
    offsets: dict[int, float] = {}
    n = len(tasks["task_id"])
    for w, (host, _) in workers.items():
        if not host or host == driver_host:
            continue
        rows = [i for i in range(n) if tasks["worker"][i] == w and not math.isnan(tasks["start"][i])]
        if not rows:
            continue
        lo = max(tasks["ready"][i] - tasks["start"][i] for i in rows)
        hi = min(tasks["received"][i] - tasks["end"][i] for i in rows)
        if lo <= 0.0 <= hi:
            continue
        off = (lo + hi) / 2 if lo <= hi else lo
        offsets[w] = off
        for i in rows:
            tasks["start"][i] += off
            tasks["end"][i] += off
        row_set = set(rows)
        for j in range(len(phases["row"])):
            if phases["row"][j] in row_set:
                phases["start"][j] += off
                phases["end"][j] += off
    return offsets


class Recorder:
    """Thread-safe event store with nestable regions and live subscribers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions = 0
        self._subscribers: list[Callable[[Any], None]] = []
        self.active = False
        # Finished tasks waiting to become columns: one tuple each, appended by the runtime's
        # I/O thread through record_fast (a bound deque.append: atomic, no lock, no Python
        # frame), turned into columns in bulk by _flush. The deque is never replaced, so the
        # bound method stays valid.
        self._pending: collections.deque[tuple] = collections.deque()
        self.record_fast = self._pending.append
        # Which process each worker index is; kept across regions (workers outlive them).
        self.workers: dict[int, tuple[str, int]] = {}
        self._reset()

    def _reset(self) -> None:
        self.tasks = {c: array("q") for c in TASK_INT_COLUMNS}
        self.tasks.update({c: array("d") for c in TASK_FLOAT_COLUMNS})
        self._pending.clear()
        self.phases = {"row": array("q"), "name": array("q"), "start": array("d"), "end": array("d"), "cpu": array("d")}
        self.blocks = {"kind": array("q"), "start": array("d"), "end": array("d"), "futures": array("q"),
                       "source": array("q")}
        self.functions = _Strings()
        self.phase_names = _Strings()
        self.sources = _Strings()
        self.block_kinds = _Strings()

    def flush(self) -> None:
        """Move buffered rows into the columns now (the runtime calls it every FLUSH_ROWS rows)."""
        with self._lock:
            self._flush()

    @property
    def rows_recorded(self) -> int:
        """Task rows held now (all open regions together)."""
        return len(self.tasks["task_id"]) + len(self._pending)

    def _flush(self) -> None:
        """Turn buffered fast-path rows into columns (caller holds the lock).

        Rows are flat tuples of 16 numbers (see :meth:`fast_row`), so one ``np.array`` call
        converts them all in C; each column is then a slice. About 0.5 us a row.
        """
        pending = self._pending
        if not pending:
            return
        import numpy as np

        popleft = pending.popleft  # a row appended meanwhile simply waits for the next flush
        arr = np.array([popleft() for _ in range(len(pending))], dtype=np.float64)
        cols = self.tasks
        for j, name in enumerate(_FAST_INT_COLUMNS):
            cols[name].frombytes(arr[:, j].astype(np.int64).tobytes())
        start = arr[:, 9] + arr[:, 12]  # the body starts after the arguments were unpickled
        floats = {"submit": arr[:, 6], "ready": arr[:, 7], "received": arr[:, 8], "start": start,
                  "end": start + arr[:, 10], "cpu": arr[:, 11], "deser": arr[:, 12], "ser": arr[:, 13]}
        for name, values in floats.items():
            cols[name].frombytes(np.ascontiguousarray(values).tobytes())
        cols["bytes_in"].frombytes(arr[:, 14].astype(np.int64).tobytes())
        cols["bytes_out"].frombytes(arr[:, 15].astype(np.int64).tobytes())

    def fast_row(self, task_id: int, attempt: int, function: str, worker: int, status: int, batch: int,
                 submit: float, ready: float, received: float, stats: tuple) -> tuple:
        """The flat row ``record_fast`` takes (the runtime builds the same tuple inline)."""
        code = self.functions.codes.get(function)
        if code is None:
            code = self.function_code(function)
        return (task_id, attempt, code, worker, status, batch, submit, ready, received) + stats[:7]

    def function_code(self, name: str) -> int:
        """The small int standing for a function name in this recording."""
        with self._lock:
            return self.functions.code(name)

    def _update_active(self) -> None:
        self.active = self._regions > 0 or bool(self._subscribers)

    # -- regions ---------------------------------------------------------------------------
    def open_region(self) -> tuple[int, int, int, float]:
        """Start a region; returns the offsets a later :meth:`close_region` slices from."""
        with self._lock:
            if self._regions == 0 and not self._subscribers:
                self._reset()
            self._regions += 1
            self._update_active()
            self._flush()
            return (len(self.tasks["task_id"]), len(self.phases["row"]), len(self.blocks["kind"]), time.time())

    def close_region(self, mark: tuple[int, int, int, float], meta: dict[str, Any]) -> Any:
        """End a region; return its :class:`Trace`. Buffers are freed when no region is left."""
        end = time.time()  # before the import below, which loads NumPy on first use
        from eugo_lab.tracing.trace import Trace

        with self._lock:
            t0, p0, b0, start = mark
            self._flush()
            tasks = {c: col[t0:] for c, col in self.tasks.items()}
            phases = {c: col[p0:] for c, col in self.phases.items()}
            if len(phases["row"]):
                phases["row"] = array("q", (r - t0 for r in phases["row"]))
            blocks = {c: col[b0:] for c, col in self.blocks.items()}
            align_clocks(tasks, phases, self.workers, socket.gethostname())
            trace = Trace.from_columns(
                tasks=tasks, phases=phases, blocks=blocks,
                functions=list(self.functions.names), phase_names=list(self.phase_names.names),
                sources=list(self.sources.names), block_kinds=list(self.block_kinds.names),
                workers=dict(self.workers), meta={**meta, "region_start": start, "region_end": end},
            )
            self._regions -= 1
            self._update_active()
            if not self.active:
                self._reset()
        return trace

    # -- subscribers -------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every TaskEvent/BlockEvent; returns an unsubscribe function.

        Callbacks run on the runtime's I/O thread: hand the event to your own thread or
        queue and return at once (the live widgets coalesce updates in their own thread).
        """
        with self._lock:
            self._subscribers.append(callback)
            self._update_active()

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
                self._update_active()

        return unsubscribe

    def _publish(self, event: Any) -> None:
        for cb in list(self._subscribers):
            try:
                cb(event)
            except Exception:  # noqa: BLE001 - a broken subscriber must not stop tasks
                import logging

                logging.getLogger("eugo_lab").exception("trace subscriber failed")

    # -- polling (the live view) ---------------------------------------------------------------
    def read_since(self, cursor: tuple[int, int, int] | None = None) -> tuple[tuple[int, int, int], Chunk]:
        """Rows appended since ``cursor`` (``None``: start from now) and the cursor to pass next time.

        For a live view that polls a few times a second: it costs nothing per task (unlike
        :meth:`subscribe`, whose callback runs for every event on the I/O thread) and one
        lock and a few array slices per call. Phase rows in the chunk index its own task rows
        (a task and its phases are recorded under one lock, so they arrive in the same chunk).
        """
        with self._lock:
            self._flush()
            end = (len(self.tasks["task_id"]), len(self.phases["row"]), len(self.blocks["kind"]))
            if cursor is None or any(c > e for c, e in zip(cursor, end)):  # None, or the buffers were reset
                return end, Chunk.empty()
            t0, p0, b0 = cursor
            tasks = {c: col[t0:] for c, col in self.tasks.items()}
            phases = {c: col[p0:] for c, col in self.phases.items()}
            if t0:
                phases["row"] = array("q", (r - t0 for r in phases["row"]))
            blocks = {c: col[b0:] for c, col in self.blocks.items()}
            chunk = Chunk(tasks, phases, blocks, tuple(self.functions.names), tuple(self.phase_names.names),
                          tuple(self.block_kinds.names), tuple(self.sources.names))
        return end, chunk

    # -- recording ---------------------------------------------------------------------------
    def worker_seen(self, index: int, host: str, pid: int) -> None:
        """Remember which process a worker index is (hosts and pids for lanes)."""
        self.workers[index] = (host, pid)

    def record_task(self, task_id: int, attempt: int, function: str, worker: int, status: int, batch: int,
                    submit: float, ready: float, received: float, stats: tuple | None,
                    item_ids: list[int] | None = None, item_status: list[int] | None = None) -> None:
        """Append one attempt (or one row per item of a batch) from a backend's stats tuple."""
        if item_ids is None and stats is not None and stats[7] is None and not self._subscribers:
            # The common case (a finished task without phases): one tuple appended now,
            # turned into columns later with NumPy, thousands at a time (see _flush).
            row = self.fast_row(task_id, attempt, function, worker, status, batch, submit, ready, received, stats)
            with self._lock:
                self._pending.append(row)
                if len(self._pending) >= FLUSH_ROWS:
                    self._flush()
            return
        nan = math.nan
        if stats is None:  # crashed or cancelled before any measurement
            start_wall = end = cpu = deser = ser = nan
            body = nan
            bytes_in = bytes_out = 0
            phases = ends = None
        else:
            start_wall, body, cpu, deser, ser, bytes_in, bytes_out, phases, ends = stats
            end = start_wall + deser + body
        with self._lock:
            cols = self.tasks
            fcode = self.functions.code(function)
            self._flush()
            if item_ids is None or ends is None:
                row = len(cols["task_id"])
                values = (task_id, attempt, fcode, worker, status, batch, bytes_in, bytes_out, submit, ready,
                          start_wall + deser if stats else nan, end, received, cpu, deser, ser)
                for name, value in zip(_TASK_COLUMNS, values):
                    cols[name].append(value)
                if phases:
                    base = start_wall + deser
                    for name, s, e, pcpu in phases:
                        self.phases["row"].append(row)
                        self.phases["name"].append(self.phase_names.code(name))
                        self.phases["start"].append(base + s)
                        self.phases["end"].append(base + e)
                        self.phases["cpu"].append(pcpu)
                rows = [(task_id, start_wall + deser if stats else nan, end)]
            else:
                import numpy as np

                # One row per item, computed with NumPy: a 25,000-item batch costs the I/O
                # thread about a millisecond instead of tens of Python-level list builds.
                n = len(item_ids)
                body_start = start_wall + deser
                stops = body_start + np.asarray(ends, dtype=np.float64)
                starts = np.empty(n)
                starts[0] = body_start
                starts[1:] = stops[:-1]
                cpu_share = cpu / body if body > 0 else 0.0

                def put(name: str, values: Any, dtype: Any) -> None:
                    cols[name].frombytes(np.broadcast_to(np.asarray(values, dtype=dtype), (n,)).tobytes())

                i64, f64 = np.int64, np.float64
                put("task_id", item_ids, i64)
                put("attempt", attempt, i64)
                put("function", fcode, i64)
                put("worker", worker, i64)
                put("status", item_status if item_status is not None else status, i64)
                put("batch", batch, i64)
                put("bytes_in", bytes_in // n, i64)
                put("bytes_out", bytes_out // n, i64)
                put("submit", submit, f64)
                put("ready", ready, f64)
                put("start", starts, f64)
                put("end", stops, f64)
                put("received", received, f64)
                put("cpu", (stops - starts) * cpu_share, f64)
                put("deser", deser / n, f64)
                put("ser", ser / n, f64)
                rows = list(zip(item_ids, starts.tolist(), stops.tolist())) if self._subscribers else []
        if self._subscribers:
            status_name = STATUS_NAMES[status]
            ph = tuple((name, start_wall + deser + s, start_wall + deser + e) for name, s, e, _ in phases or ())
            for i, (tid, s, e) in enumerate(rows):
                st = STATUS_NAMES[item_status[i]] if item_status else status_name
                self._publish(TaskEvent(tid, function, worker, s, e, st, attempt, batch, ph, bytes_in, bytes_out))

    def record_block(self, kind: str, start: float, end: float, futures: int, source: str) -> None:
        """Append one span during which the driver waited in ``get()``/``wait()``."""
        with self._lock:
            self.blocks["kind"].append(self.block_kinds.code(kind))
            self.blocks["start"].append(start)
            self.blocks["end"].append(end)
            self.blocks["futures"].append(futures)
            self.blocks["source"].append(self.sources.code(source))
        if self._subscribers:
            self._publish(BlockEvent(kind, start, end, futures, source))
