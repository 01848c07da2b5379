"""The live recorder: appends task and blocking events while regions are open.

Task rows are packed C structs (:mod:`eugo_lab.contract.row`, 136 bytes, strings interned
into small tables) appended to ``bytearray`` segments, so a
million rows cost 136 MB and no Python object per field; an ``hpc.map`` batch is one compact
segment (:class:`BatchRows`) whatever its size. Reading rows out turns the packed bytes
into one NumPy array per column in a single pass. Phases and driver waits are rare and
kept in ``array.array`` columns. Recording happens on the runtime's I/O thread; reading a
region out produces an immutable :class:`~eugo_lab.tracing.trace.Trace`.

Nothing is recorded while no region is open and nobody subscribed: the runtime checks
``recorder.active`` (a plain attribute) before doing any work for the trace.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eugo_lab.contract import task as _task
from eugo_lab.contract.row import (
    ARG_COLUMNS,
    BLOCK_COLUMNS,
    DRIVER_DEP_COLUMNS,
    GPU_COLUMNS,
    PARENT_COLUMNS,
    PHASE_COLUMNS,
    PUT_COLUMNS,
    ROW_SIZE,
    STATUS_NAMES,
    TASK_FLOAT_COLUMNS,
    TASK_INT_COLUMNS,
    TaskProfile,
    TaskStats,
    pack_head,
    pack_row,
)
from eugo_lab.tracing.driver import DriverLog
from eugo_lab.tracing.provenance import Refused, shipped_since
from eugo_lab.tracing.segments import BatchRows, TaskRows

if TYPE_CHECKING:
    from eugo_lab.tracing.trace import Trace

# Fast-path rows buffered before they are joined into the row store (~8 MB of bytes).
FLUSH_ROWS = 65536
#: The key in a trace's ``meta`` of ``{task name: the function's own name}`` for the tasks submitted under another
#: name (``f.options(name="...")``): a trace names a task by its label, and a checker asks which function it ran.
LABELS_KEY = "task_labels"
MAP_CALLS_KEY = "map_calls"


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
    """New rows read by :meth:`Recorder.read_since`: the same columns and name tables as a Trace.

    Task columns are NumPy arrays (int64/float64); phase and block columns ``array.array``.
    """

    tasks: dict[str, Any]
    phases: dict[str, array]
    blocks: dict[str, array]
    functions: tuple[str, ...]
    phase_names: tuple[str, ...]
    block_kinds: tuple[str, ...]
    sources: tuple[str, ...]
    gpu: Any = None  # per task row, the GPU it held (-1: none); None when no task held one

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


def _hostname() -> str:
    """The driver's host name, as the workers report theirs (socket on first use: not at the runtime's start)."""
    import socket

    return socket.gethostname()


def align_clocks(tasks: dict[str, Any], phases: dict[str, array], workers: dict[int, tuple[str, int]],
                 driver_host: str) -> dict[int, float]:
    """Shift the times of workers on other hosts onto the driver's clock; return the offsets.

    Workers stamp ``start``/``end`` with their own wall clock. On the driver's host that is
    the driver's clock. On another host it may be off by milliseconds or more, which would
    draw a task starting before it was sent. Each task bounds the offset NTP-style: the
    body cannot start before the driver made it ready, nor end after the driver received
    its result, so ``max(ready - start) <= offset <= min(received - end)`` over that
    worker's tasks. We keep 0 when it fits those bounds, else take the middle of the
    interval (or its lower end when skewed bounds cross). Durations never change: each is
    measured with one process's monotonic clock. ``tasks`` holds writable NumPy columns.
    """
    import numpy as np

    offsets: dict[int, float] = {}
    for w, (host, _) in workers.items():
        if not host or host == driver_host:
            continue
        rows = (tasks["worker"] == w) & ~np.isnan(tasks["start"])
        if not rows.any():
            continue
        lo = float(np.max(tasks["ready"][rows] - tasks["start"][rows]))
        hi = float(np.min(tasks["received"][rows] - tasks["end"][rows]))
        if lo <= 0.0 <= hi:
            continue
        off = (lo + hi) / 2 if lo <= hi else lo
        offsets[w] = off
        tasks["start"][rows] += off
        tasks["end"][rows] += off
        row_set = set(np.flatnonzero(rows).tolist())
        for j in range(len(phases["row"])):
            if phases["row"][j] in row_set:
                phases["start"][j] += off
                phases["end"][j] += off
    return offsets


def _items_at(phases: Sequence[tuple], ends: Any, n: int) -> list[int]:
    """For each phase of an ``hpc.map`` batch, the item it started in (``ends``: each item's end offset)."""
    import numpy as np

    # An item's span starts after the previous item's end was read: the first end past its start is its item's.
    at = np.searchsorted(np.asarray(ends), [p[1] for p in phases], side="right")
    return np.minimum(at, n - 1).tolist()


class Recorder:
    """Thread-safe event store with nestable regions and live subscribers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions = 0
        self._subscribers: list[Callable[[Any], None]] = []
        self.active = False
        # A region is open (not only a live subscriber): tasks submitted now report provenance (Task.probe).
        self.in_region = False
        # Finished tasks waiting to join the row store: one packed row (bytes) each, appended
        # by record_attempt on the runtime's I/O thread (list.append: atomic under the GIL,
        # no lock), joined in bulk by _flush. The list is never replaced.
        self._pending: list[bytes] = []
        # Which process each worker index is; kept across regions (workers outlive them).
        self.workers: dict[int, tuple[str, int]] = {}
        # The driver's submissions (their pickling and hand-off), see eugo_lab.tracing.driver.
        self.driver = DriverLog()
        self._reset()

    def _reset(self) -> None:
        # A new recording: the runtime forgets the values its get()s returned in the previous one
        # (eugo_lab.tracing.returned keys them by this object).
        self.epoch = object()
        # Task rows, in order: sealed segments (a bytearray of packed rows, never written
        # again, or one map batch kept compact as BatchRows), then the open tail of packed
        # rows. Columns are built from segments only when somebody reads them (see TaskRows).
        self._segments: list[bytearray | BatchRows] = []
        self._seg_starts: list[int] = []  # the index of each segment's first row
        self._sealed = 0  # rows in self._segments
        self._tail = bytearray()
        self._pending.clear()
        self.phases = {"row": array("q"), "name": array("q"), "start": array("d"), "end": array("d"), "cpu": array("d"),
                       "runq": array("d")}
        self.blocks = {"kind": array("q"), "start": array("d"), "end": array("d"), "futures": array("q"),
                       "source": array("q"), "task": array("q")}
        self.deps = {"task": array("q"), "on": array("q")}
        self.parents = {c: array("q") for c in PARENT_COLUMNS}  # tasks submitted by a running task
        self.driver_deps = {c: array("q") for c in DRIVER_DEP_COLUMNS}  # passed a value get() returned
        self.arg_keys = {c: array("q") for c in ARG_COLUMNS}  # tasks sent a large argument: which one
        self.gpus = {c: array("q") for c in GPU_COLUMNS}  # attempts that held a GPU (rare: only gpus= tasks)
        self.profiles: list[TaskProfile] = []  # profiled attempts only (eugo_lab.profile): rare, kept as sent
        # Provenance (tasks submitted in a region only, Task.probe): what workers saw, what tasks returned
        # (small payloads kept by reference, digested when read), hpc.put calls, refused requests.
        self.puts = {c: array("d" if c == "time" else "q") for c in PUT_COLUMNS}
        self.refused: list[Refused] = []
        # Traced attempts (Task.probe) as the runtime's I/O thread appends them, one tuple each
        # (list.append: atomic under the GIL, no lock, ~0.1 us; see provenance.Attempt). They are
        # filed into the trace's fact, ref and result tables only when somebody reads those
        # (Trace.facts, Trace.results): a region pays nothing more per task.
        self.attempts: list[tuple] = getattr(self, "attempts", [])
        self.attempts.clear()
        self.labels: dict[str, str] = {}  # LABELS_KEY: a task name given with .options(name=) -> its function
        # MAP_CALLS_KEY: (task name, when the hpc.map call returned) for each hpc.map of the region: every item
        # was asked for then, whenever the map sends its batches (it sizes them from the first ones' times)
        self.map_calls: list[tuple[str, float]] = []
        # hpc.map_partitions calls of the region (PartitionsRun): live objects, kept beside the trace, never in its meta
        self.partition_runs: list[Any] = []
        self.functions = _Strings()
        self.phase_names = _Strings()
        self.sources = _Strings()
        self.block_kinds = _Strings()
        if hasattr(self, "driver"):
            self.driver.reset()

    def flush(self) -> None:
        """Move buffered rows into the row store now (the runtime calls it every FLUSH_ROWS rows)."""
        with self._lock:
            self._flush()

    @property
    def rows_recorded(self) -> int:
        """Task rows held now (all open regions together)."""
        return self._n_rows() + len(self._pending)

    @property
    def nbytes(self) -> int:
        """Bytes of task rows held now (buffered rows not counted)."""
        return len(self._tail) + sum(seg.nbytes if isinstance(seg, BatchRows) else len(seg)
                                     for seg in self._segments)

    def _flush(self) -> None:
        """Append buffered fast-path rows to the tail (caller holds the lock): one join."""
        pending = self._pending
        n = len(pending)
        if n:
            # Each step is one C call, atomic under the GIL; the I/O thread only appends at
            # the end, so rows appended meanwhile stay for the next flush.
            if self._tail:
                self._tail += b"".join(pending[:n])
            else:  # the usual case: one allocation, not two
                self._tail = bytearray().join(pending[:n])
            del pending[:n]

    def _seal(self) -> None:
        """Close the tail into a segment (caller holds the lock); it is never written again."""
        self._flush()
        if self._tail:
            self._add_segment(self._tail, len(self._tail) // ROW_SIZE)
            self._tail = bytearray()

    def _add_segment(self, segment: bytearray | BatchRows, rows: int) -> None:
        self._segments.append(segment)
        self._seg_starts.append(self._sealed)
        self._sealed += rows

    def _n_rows(self) -> int:
        return self._sealed + len(self._tail) // ROW_SIZE

    def _rows_from(self, first: int) -> TaskRows:
        """Task rows from index ``first`` on, as an unbuilt :class:`TaskRows` (lock held)."""
        self._seal()
        if first >= self._sealed:
            return TaskRows([], 0, 0)
        k = max(bisect.bisect_right(self._seg_starts, first) - 1, 0)  # the segment holding row `first`
        segments = self._segments[k:]
        return TaskRows(segments, first - self._seg_starts[k] if segments else 0, self._sealed - first)

    def function_code(self, name: str) -> int:
        """The small int standing for a function name in this recording."""
        with self._lock:
            return self.functions.code(name)

    def _update_active(self) -> None:
        self.active = self._regions > 0 or bool(self._subscribers)
        self.in_region = self._regions > 0

    # -- regions ---------------------------------------------------------------------------
    @property
    def regions_open(self) -> int:
        """How many regions are open now (regions nest: an inner one records into the outer one's tables too)."""
        return self._regions

    def open_region(self) -> tuple[Any, ...]:
        """Start a region; returns the offsets a later :meth:`close_region` slices from.

        The last element holds the provenance tables' offsets and each live function record's
        send count (what the region then shipped is the difference at its close).
        """
        _task.keep_sent_records(True)
        sends = {rec.fid: (rec, rec.sends) for rec in _task.live_records()}
        with self._lock:
            if self._regions == 0 and not self._subscribers:
                self._reset()
            self._regions += 1
            self._update_active()
            self._flush()
            extra = {"attempts": len(self.attempts), "puts": len(self.puts["ref"]), "refused": len(self.refused),
                     "sends": sends, "parents": len(self.parents["task"])}
            return (self._n_rows(), len(self.phases["row"]), len(self.blocks["kind"]), time.time(),
                    len(self.deps["task"]), len(self.profiles), len(self.gpus["task"]), len(self.arg_keys["task"]),
                    extra, self.driver.mark(), len(self.driver_deps["task"]))

    def close_region(self, mark: tuple[Any, ...], meta: dict[str, Any]) -> Trace:
        """End a region; return its :class:`Trace`. Buffers are freed when no region is left."""
        end = time.time()  # before the import below, which loads NumPy on first use
        from eugo_lab.tracing.trace import Trace

        with self._lock:
            t0, p0, b0, start, d0, f0, g0, a0, extra = mark[:9]
            provenance = {
                "attempts": self.attempts[extra["attempts"]:],
                "puts": {c: col[extra["puts"]:] for c, col in self.puts.items()},
                "refused": self.refused[extra["refused"]:],
            }
            driver_spans, driver_short = self.driver.since(mark[9])
            rows = self._rows_from(t0)
            deps = {c: col[d0:] for c, col in self.deps.items()}
            parents = {c: col[extra["parents"]:] for c, col in self.parents.items()}
            driver_deps = {c: col[mark[10]:] for c, col in self.driver_deps.items()}
            gpus = {c: col[g0:] for c, col in self.gpus.items()}
            arg_keys = {c: col[a0:] for c, col in self.arg_keys.items()}
            phases = {c: col[p0:] for c, col in self.phases.items()}
            if len(phases["row"]):
                phases["row"] = array("q", (r - t0 for r in phases["row"]))
            blocks = {c: col[b0:] for c, col in self.blocks.items()}
            host = _hostname()
            tasks: TaskRows | dict[str, Any] = rows
            if any(h and h != host for h, _ in self.workers.values()):
                # Workers on other hosts: their clocks are aligned now, which needs the columns.
                tasks = rows.build()
                align_clocks(tasks, phases, self.workers, host)
            trace = Trace.from_columns(
                tasks=tasks, phases=phases, blocks=blocks, deps=deps, driver_deps=driver_deps, gpus=gpus,
                arg_keys=arg_keys, parents=parents,
                functions=list(self.functions.names), phase_names=list(self.phase_names.names),
                sources=list(self.sources.names), block_kinds=list(self.block_kinds.names),
                workers=dict(self.workers), profiles=self.profiles[f0:], driver_spans=driver_spans,
                # "driver_deps_recorded" first: a recording that cannot see the driver's values (an
                # engine's own API) says so in its meta.
                meta={"driver_deps_recorded": True, **meta, "region_start": start, "region_end": end,
                      "deps_recorded": True,
                      "provenance_recorded": True, "driver_short": driver_short, LABELS_KEY: dict(self.labels),
                      MAP_CALLS_KEY: [list(c) for c in self.map_calls]},
                shipped=shipped_since(extra["sends"], _task.live_records()), **provenance,
            )
            trace.partition_runs = tuple(self.partition_runs)
            self._regions -= 1
            if self._regions == 0:
                _task.keep_sent_records(False)
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
            except Exception:  # a broken subscriber must not stop tasks
                import logging

                logging.getLogger("eugo_lab").exception("trace subscriber failed")

    # -- polling (the live view) ---------------------------------------------------------------
    def read_since(self, cursor: tuple[int, int, int] | None = None) -> tuple[tuple[int, int, int], Chunk]:
        """Rows appended since ``cursor`` (``None``: start from now) and the cursor to pass next time.

        For a live view that polls a few times a second: it costs nothing per task (unlike
        :meth:`subscribe`, whose callback runs for every event on the I/O thread) and one
        lock and one copy of the new rows per call. Phase rows in the chunk index its own task
        rows (a task and its phases are recorded under one lock, so they arrive in the same chunk).
        """
        with self._lock:
            self._flush()
            end = (self._n_rows(), len(self.phases["row"]), len(self.blocks["kind"]))
            if cursor is None or any(c > e for c, e in zip(cursor, end)):  # None, or the buffers were reset
                return end, Chunk.empty()
            t0, p0, b0 = cursor
            tasks = self._rows_from(t0).build()
            phases = {c: col[p0:] for c, col in self.phases.items()}
            if t0:
                phases["row"] = array("q", (r - t0 for r in phases["row"]))
            blocks = {c: col[b0:] for c, col in self.blocks.items()}
            gpu = None
            if len(self.gpus["task"]):  # GPU tasks ran (rare): which GPU each new row held, for the live bars
                from eugo_lab.tracing.trace import gpu_per_row

                gpu = gpu_per_row(tasks, self.gpus)
            chunk = Chunk(tasks, phases, blocks, tuple(self.functions.names), tuple(self.phase_names.names),
                          tuple(self.block_kinds.names), tuple(self.sources.names), gpu)
        return end, chunk

    def driver_spans_since(self, cursor: int | None) -> tuple[int, dict[str, array]]:
        """The driver's recorded submission spans since ``cursor`` (``None``: from now) and the next cursor.

        For the live view, like :meth:`read_since`; a cursor past the end (the log was reset) starts over.
        """
        n = self.driver.mark()[0]
        if cursor is None or cursor > n:
            cursor = n
        spans, _ = self.driver.since((cursor, 0.0, 0.0, 0))
        return cursor + len(spans["kind"]), spans

    # -- recording ---------------------------------------------------------------------------
    def worker_seen(self, index: int, host: str, pid: int) -> None:
        """Remember which process a worker index is (hosts and pids for lanes)."""
        self.workers[index] = (host, pid)

    def record_attempt(self, task_id: int, attempt: int, function: str, worker: int, status: int, batch: int,
                       submit: float, ready: float, received: float, stats: TaskStats | None) -> None:
        """Append one finished attempt of a single task: the runtime's hot path (its I/O thread).

        The common case, a task that ran with no phases while nobody subscribed, costs one
        pack of the driver's 9 fields joined to the tail the worker packed
        (``stats.tail``) and one list append: no lock, the same row :meth:`record_task`
        would append. Anything else goes through :meth:`record_task`.
        """
        if (stats is not None and stats.tail is not None and stats.phases is None and not self._subscribers
                and worker in self.workers):
            code = self.functions.codes.get(function)
            if code is None:
                code = self.function_code(function)
            pending = self._pending
            pending.append(pack_head(task_id, attempt, code, worker, status, batch, submit, ready, received)
                           + stats.tail)
            if len(pending) >= FLUSH_ROWS:
                self.flush()
            return
        self.record_task(task_id, attempt, function, worker, status, batch, submit, ready, received, stats)

    def record_task(self, task_id: int, attempt: int, function: str, worker: int, status: int, batch: int,
                    submit: float, ready: float, received: float, stats: TaskStats | None,
                    item_ids: Sequence[int] | None = None, item_status: list[int] | None = None) -> None:
        """Append one attempt (or one row per item of a batch) from what its worker measured.

        ``stats`` is ``None`` when the attempt never ran (crashed or cancelled before any
        measurement). ``item_ids`` (a ``range`` when consecutive: no per-item Python work)
        names the items of an ``hpc.map`` batch, one row each.
        """
        nan = math.nan
        if stats is None:  # crashed or cancelled before any measurement
            start_wall = body = cpu = deser = ser = runq = nan
            bytes_in = bytes_out = 0
            phases = ends = None
        else:
            start_wall, body, cpu, deser, ser = stats.start_wall, stats.body, stats.cpu, stats.deser, stats.ser
            bytes_in, bytes_out, phases, ends = stats.bytes_in, stats.bytes_out, stats.phases, stats.item_ends
            runq = stats.runq
        body_start = start_wall + deser
        events: list[tuple[int, float, float]] = []
        items: list[int] | None = None  # a batch's phases: the item each started in
        with self._lock:
            profile = getattr(stats, "profile", None)  # (a plain tuple of the first fields is accepted too)
            if profile is not None:  # a profiled attempt: its worker sent no tail, so it never takes the fast path
                self.profiles.append(TaskProfile(task_id, attempt, function, worker, profile))
            fcode = self.functions.code(function)
            if item_ids is None or ends is None:
                end = body_start + body
                row = pack_row(task_id, attempt, fcode, worker, status, batch, submit, ready, received,
                               body_start, end, cpu, deser, ser, runq, bytes_in, bytes_out)
                if not phases and not self._subscribers:
                    self._pending.append(row)  # keeps rows in order with the fast path's
                    if len(self._pending) >= FLUSH_ROWS:
                        self._flush()
                    return
                self._flush()
                index = self._n_rows()
                self._tail += row
                if phases:
                    self._add_phases(phases, body_start, [index] * len(phases))
                events.append((task_id, body_start, end))
            else:
                self._seal()
                n = len(item_ids)
                shared = {"attempt": attempt, "function": fcode, "worker": worker, "batch": batch,
                          "bytes_in": bytes_in // n, "bytes_out": bytes_out // n, "submit": submit, "ready": ready,
                          "received": received, "deser": deser / n, "ser": ser / n}
                rows = BatchRows(item_ids, item_status if item_status is not None else status, shared, ends,
                                  body_start, cpu / body if body > 0 else 0.0, runq / body if body > 0 else nan)
                first = self._sealed  # the row of the batch's first item
                self._add_segment(rows, n)
                if phases:  # each span on the row of the item it started in (a JIT trial: the first call's)
                    items = _items_at(phases, ends, n)
                    self._add_phases(phases, body_start, [first + i for i in items])
                if self._subscribers:
                    cols = rows.columns()
                    events.extend(zip(cols["task_id"].tolist(), cols["start"].tolist(), cols["end"].tolist()))
        if self._subscribers:
            status_name = STATUS_NAMES[status]
            spans = [(p[0], body_start + p[1], body_start + p[2]) for p in phases or ()]
            if items is None:
                per_event = {0: tuple(spans)} if spans else {}
            else:
                per_event = {}
                for i, span in zip(items, spans):
                    per_event.setdefault(i, []).append(span)
            for i, (tid, s, e) in enumerate(events):
                st = STATUS_NAMES[item_status[i]] if item_status else status_name
                self._publish(TaskEvent(tid, function, worker, s, e, st, attempt, batch, tuple(per_event.get(i, ())),
                                        bytes_in, bytes_out))

    def _add_phases(self, phases: Sequence[tuple], body_start: float, rows: Sequence[int]) -> None:
        """Append ``phases`` (offsets from ``body_start``), span ``j`` on task row ``rows[j]`` (lock held)."""
        for ph, index in zip(phases, rows):
            name, s, e, pcpu = ph[:4]
            self.phases["row"].append(index)
            self.phases["name"].append(self.phase_names.code(name))
            self.phases["start"].append(body_start + s)
            self.phases["end"].append(body_start + e)
            self.phases["cpu"].append(pcpu)
            self.phases["runq"].append(ph[4] if len(ph) > 4 else math.nan)  # a 4-tuple: no run-queue time

    def record_gpu(self, task_id: int, attempt: int, gpu: int) -> None:
        """Remember that attempt ``attempt`` of task ``task_id`` (an ``hpc.map`` batch: its id) held GPU ``gpu``."""
        with self._lock:
            g = self.gpus
            g["task"].append(task_id)
            g["attempt"].append(attempt)
            g["gpu"].append(gpu)

    def record_put(self, ref_id: int, nbytes: int, when: float) -> None:
        """Remember an ``hpc.put`` made in the region: its reference id, its bytes and when."""
        with self._lock:
            self.puts["ref"].append(ref_id)
            self.puts["bytes"].append(nbytes)
            self.puts["time"].append(when)

    def record_refused(self, task_id: int, function: str, request: dict[str, float], when: float) -> None:
        """Remember a resource request no worker could meet (``ResourceRequestError``)."""
        with self._lock:
            self.refused.append(Refused(task_id, function, dict(request), when))

    def _add_edges(self, table: str, task_id: int, on: list[int]) -> None:
        """Append the edges ``task_id`` -> each of ``on`` to the dependency table named ``table``.

        ``deps`` or ``driver_deps``: looked up under the lock, as a reset replaces the table.
        """
        with self._lock:
            edges = getattr(self, table)
            edges["task"].extend([task_id] * len(on))
            edges["on"].extend(on)

    def record_deps(self, task_id: int, on: list[int]) -> None:
        """Remember that task ``task_id`` was passed the futures of the tasks ``on``."""
        self._add_edges("deps", task_id, on)

    def record_parent(self, task_id: int, parent: int) -> None:
        """Remember that task ``task_id`` was submitted from inside the running task ``parent``."""
        self._add_pair("parents", "parent", task_id, parent)
    def note_partitions(self, run: Any) -> None:
        """Remember one ``hpc.map_partitions`` call (a :class:`~eugo_lab.hpc.partitions.PartitionsRun`)."""
        self.partition_runs.append(run)  # one list append under the GIL: no lock needed

    def note_map_call(self, name: str, returned: float) -> None:
        """Remember that an ``hpc.map`` of tasks named ``name`` returned at ``returned``: all its items asked for."""
        self.map_calls.append((name, returned))  # one list append under the GIL: no lock needed

    def note_label(self, label: str, function: str) -> None:
        """Remember that tasks named ``label`` run ``function`` (a remote function given another name with options)."""
        self.labels[label] = function  # one dict store under the GIL: no lock needed

    def record_driver_deps(self, task_id: int, on: list[int]) -> None:
        """Remember that task ``task_id`` was passed values that get()/result() returned for the tasks ``on``."""
        self._add_edges("driver_deps", task_id, on)

    def record_arg(self, task_id: int, key: int) -> None:
        """Remember that task ``task_id`` was sent the large argument named ``key`` (``hpc.arg_identity``)."""
        self._add_pair("arg_keys", "key", task_id, key)

    def _add_pair(self, table: str, column: str, task_id: int, value: int) -> None:
        """Append ``(task_id, value)`` to the two-column table named ``table``.

        The table is looked up under the lock, as a reset replaces it.
        """
        with self._lock:
            rows = getattr(self, table)
            rows["task"].append(task_id)
            rows[column].append(value)

    def record_block(self, kind: str, start: float, end: float, futures: int, source: str, task: int = -1) -> None:
        """Append one span during which the driver waited in ``get()``/``wait()``.

        ``task``: the task of the one future the call waited on or took (-1: several, or not known).
        """
        with self._lock:
            self.blocks["task"].append(task)
            self.blocks["kind"].append(self.block_kinds.code(kind))
            self.blocks["start"].append(start)
            self.blocks["end"].append(end)
            self.blocks["futures"].append(futures)
            self.blocks["source"].append(self.sources.code(source))
        if self._subscribers:
            self._publish(BlockEvent(kind, start, end, futures, source))
