"""The live feed: one writer thread polls the recorder ~10 times a second and updates the view.

Why one thread (one for the whole kernel, see :class:`_Writer`): Bokeh's
``ColumnDataSource.stream`` loses rows when several threads call it at once, and every
``stream`` costs >= 3 comm messages while Jupyter drops IOPub output above ~1000
messages/s. One thread wakes every ``interval`` seconds, reads every row recorded since
its last visit (``Recorder.read_since``: one lock, a few array slices) and makes one
update of the sink. 10 updates/s is smooth to the eye and stays far
below the rate limit whatever the task rate: 10,000 tiny tasks cost 10 updates a second.

Why polling rather than ``Recorder.subscribe``: a subscriber callback runs for every task
on the runtime's I/O thread (an event object, a queue put); measured on 10,000 tiny tasks
that alone slowed the run by ~10%, while polling costs nothing per task. The recorder
fills its columns anyway while the cell's ``hpc.trace()`` region is open.

Why adaptive: the writer thread holds the GIL while it updates, and the runtime's I/O
thread (which dispatches tasks and receives results) waits for it. Each update's CPU
time is measured (``time.thread_time``); the pause before the next one is stretched so
that updates take at most :data:`CPU_BUDGET` of one core (up to :data:`MAX_INTERVAL`),
which matters where an update is expensive (thousands of new bars, a slow machine).

Why the last update is drawn from the closed region's Trace (:meth:`LiveFeed.finish`):
reading the last rows from the recorder while the region is still open would make the
recorder turn its buffered rows into columns inside the cell's traced time (with
``--no-live`` that happens after the region's end is stamped). So :meth:`LiveFeed.stop`
only tells the writer thread to stop, and the rows it had not drawn are taken from the
Trace afterwards: drawing them and the final counters is not the cell's work.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from eugo_lab.cellrun.live_state import LiveState, Snapshot
from eugo_lab.contract import cellrecord
from eugo_lab.tracing.recorder import Chunk

log = logging.getLogger("eugo_lab")

#: Seconds between two updates of the live view (at most ~10 per second, see module docstring).
INTERVAL = 0.1
#: Longest pause between two updates when updates are expensive.
MAX_INTERVAL = 1.0
#: Share of one core the updates may use (their measured CPU time over the time between them).
CPU_BUDGET = 0.02
#: The finished feed's ``updates`` and ``cpu`` (seconds) in the cell record: what the live view cost the kernel
#: (benchmarks/scenarios.py::live_widget reads it; handy when a cell feels slow). A cell without a live view has none.
LIVE = cellrecord.register(cellrecord.Slot("live", "what the latest cell's live view cost: updates and CPU seconds",
                                           follows_trace=True))


def last_stats() -> dict[str, float]:
    """The latest cell's live feed: ``updates`` made and ``cpu`` seconds they took (empty: no live view)."""
    return dict(cellrecord.read(LIVE) or {})


class Sink(Protocol):
    """What the feed drives (the live view); called from the writer thread only."""

    def update(self, chunk: Any, snapshot: Snapshot) -> None:
        """Draw new rows (a recorder ``Chunk``) and counters.

        A sink may also have ``update_driver(spans)`` (the driver's new submission spans,
        ``Recorder.driver_spans_since``) and ``final(trace)`` (called once the cell ended).
        """


class _Writer:
    """The one long-lived writer thread; it runs one feed at a time (cells run one at a time).

    Long-lived because a thread's first message to the kernel's IOPub thread opens a ZMQ
    socket for that thread (ipykernel keeps one per sending thread), and a new thread per
    cell paid for that, and for starting, while the cell's tasks ran.
    """

    def __init__(self) -> None:
        self._feeds: queue.SimpleQueue[LiveFeed] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, feed: LiveFeed) -> None:
        """Hand ``feed`` to the thread (started on first use)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="eugo-live-writer", daemon=True)
                self._thread.start()
        self._feeds.put(feed)

    def _loop(self) -> None:
        while True:
            feed = self._feeds.get()
            try:
                feed._run()
            except BaseException:  # never lose the thread, or a waiting finish()
                log.exception("the live view's writer failed")
            finally:
                feed._done.set()


_writer = _Writer()


class LiveFeed:
    """Polls a recorder and drives ``sink`` from the single writer thread."""

    def __init__(self, recorder: Any, sink: Sink, state: LiveState, unfinished: Callable[[], int],
                 interval: float = INTERVAL, clock: Callable[[], float] = time.time):
        self._recorder = recorder
        self._sink = sink
        self._state = state
        self._unfinished = unfinished
        self._interval = interval
        self._clock = clock
        self._cursor: Any = None
        self._driver_cursor: int | None = None
        self._driver: Any = None  # the driver's spans read with the last chunk
        self._stop = threading.Event()
        self._done = threading.Event()  # set by the writer thread when it has left this feed
        self._read_lock = threading.Lock()  # a read after stop() began would find the region gone
        self._started = False
        # What the writer thread has drawn, to find the rest in the Trace (see finish()):
        # rows and blocks seen, and the first of each (a row recorded between the region's
        # opening and start() is in the Trace before them).
        self._seen_tasks = self._seen_blocks = 0
        self._first_task: tuple[int, int] | None = None
        self._first_block: float | None = None
        self.updates = 0  # how many sink updates were made (tests check the throttle)
        self.cpu = 0.0  # CPU seconds the updates took (reading rows, counting, drawing, sending)
        self._broken = False

    def start(self) -> LiveFeed:
        """Remember where the recorder is now and hand the feed to the writer thread."""
        self._cursor, _ = self._recorder.read_since(None)
        if hasattr(self._recorder, "driver_spans_since"):
            self._driver_cursor, _ = self._recorder.driver_spans_since(None)
        self._started = True
        _writer.run(self)
        return self

    def _read(self) -> Any:
        with self._read_lock:
            if self._stop.is_set():
                return None
            self._cursor, chunk = self._recorder.read_since(self._cursor)
            if self._driver_cursor is not None:
                self._driver_cursor, self._driver = self._recorder.driver_spans_since(self._driver_cursor)
        t = chunk.tasks
        if len(t["task_id"]) and self._first_task is None:
            self._first_task = (int(t["task_id"][0]), int(t["attempt"][0]))
        if len(chunk.blocks["start"]) and self._first_block is None:
            self._first_block = float(chunk.blocks["start"][0])
        self._seen_tasks += len(t["task_id"])
        self._seen_blocks += len(chunk.blocks["start"])
        return chunk

    def _draw(self, chunk: Any, *, finished: bool = False, error: str | None = None, now: float | None = None) -> None:
        if self._broken:
            return
        try:
            self._state.add(chunk)
            snap = self._state.snapshot(self._clock() if now is None else now,
                                        0 if finished else self._unfinished(), finished=finished, error=error)
            self._sink.update(chunk, snap)
            driver, self._driver = self._driver, None
            draw_driver = getattr(self._sink, "update_driver", None)
            if driver is not None and len(driver["kind"]) and draw_driver is not None:
                draw_driver(driver)
            self.updates += 1
        except Exception:  # a broken view must never break the user's cell
            self._broken = True
            log.exception("the live view failed; the cell keeps running without it")

    def _run(self) -> None:
        pause = self._interval
        while not self._broken and not self._stop.wait(pause):
            c = time.thread_time()
            try:
                chunk = self._read()
            except Exception:  # the view stops; the cell and its trace do not
                self._broken = True
                log.exception("the live view could not read the trace; the cell keeps running without it")
                break
            if chunk is None:
                break
            self._draw(chunk)
            spent = time.thread_time() - c
            self.cpu += spent
            pause = min(max(self._interval, spent / CPU_BUDGET), MAX_INTERVAL)

    def stop(self) -> None:
        """Tell the writer thread to stop (call before the region closes; it costs the cell nothing else).

        A read already under way finishes first, so none is left running when the region closes.
        """
        self._stop.set()
        with self._read_lock:
            pass

    def finish(self, trace: Any, error: str | None = None) -> Snapshot:
        """Draw what the writer thread had not drawn, from the region's ``trace``, and the final counters."""
        self.stop()
        if self._started:
            self._done.wait()
        c = time.thread_time()
        # The last counters end where the cell did (the trace's region), not when the recording was collected:
        # an engine's records can arrive a second or more later, and the summary's wall time is the region's.
        ended = trace.meta.get("region_end")
        now = float(ended) if ended is not None else None
        self._draw(self._unseen(trace), finished=True, error=error, now=now)
        final = getattr(self._sink, "final", None)
        if final is not None and not self._broken:
            try:
                final(trace)  # the whole driver lane and the axis over the cell
            except Exception:  # a broken view must never break the user's cell
                self._broken = True
                log.exception("the live view failed to draw the cell's end")
        self.cpu += time.thread_time() - c
        cellrecord.contribute(LIVE, {"updates": self.updates, "cpu": self.cpu})
        return self._state.snapshot(self._clock() if now is None else now, 0, finished=True, error=error)

    def _unseen(self, trace: Any) -> Chunk:
        """The rows of ``trace`` the writer thread did not draw, as a Chunk (phases re-indexed to it)."""
        t, b = trace.tasks, trace.blocks
        n, nb = len(t["task_id"]), len(b["start"])
        first = 0
        if self._first_task is not None:
            tid, att = self._first_task
            hits = np.flatnonzero((np.asarray(t["task_id"]) == tid) & (np.asarray(t["attempt"]) == att))
            first = int(hits[0]) if hits.size else 0
        keep = np.ones(n, dtype=bool)
        keep[first:first + self._seen_tasks] = False
        rows = np.flatnonzero(keep)
        first_b = 0
        if self._first_block is not None:
            hits = np.flatnonzero(np.asarray(b["start"]) == self._first_block)
            first_b = int(hits[0]) if hits.size else 0
        keep_b = np.ones(nb, dtype=bool)
        keep_b[first_b:first_b + self._seen_blocks] = False
        new_row = np.full(n, -1, dtype="int64")
        new_row[rows] = np.arange(rows.size)
        p = trace.phases
        p_rows = new_row[np.asarray(p["row"], dtype="int64")] if len(p["row"]) else np.zeros(0, dtype="int64")
        p_keep = p_rows >= 0
        phases = {c: np.asarray(v)[p_keep] for c, v in p.items()}
        phases["row"] = p_rows[p_keep]
        held = getattr(trace, "gpu", None)
        return Chunk({c: np.asarray(v)[rows] for c, v in t.items()}, phases,
                     {c: np.asarray(v)[keep_b] for c, v in b.items()}, tuple(trace.functions),
                     tuple(trace.phase_names), tuple(trace.block_kinds), tuple(trace.sources),
                     None if held is None else np.asarray(held)[rows])
