"""The live feed: one writer thread polls the recorder ~10 times a second and updates the view.

Why one thread: Bokeh's ``ColumnDataSource.stream`` loses rows when several threads call
it at once, and every ``stream`` costs >= 3 comm messages while Jupyter drops IOPub
output above ~1000 messages/s. One thread wakes every ``interval`` seconds, reads every
row recorded since its last visit (``Recorder.read_since``: one lock, a few array
slices) and makes one update of the sink. 10 updates/s is smooth to the eye and stays far
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

Why the last update is drawn after the region closes (:meth:`LiveFeed.finish`): the
final rows must be read while the region is open (its buffers go when it closes), but
drawing them and the final counters is not the cell's work, so it stays out of the
traced time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from eugo_lab.cellrun.live_state import LiveState, Snapshot

log = logging.getLogger("eugo_lab")

#: Seconds between two updates of the live view (at most ~10 per second, see module docstring).
INTERVAL = 0.1
#: Longest pause between two updates when updates are expensive.
MAX_INTERVAL = 1.0
#: Share of one core the updates may use (their measured CPU time over the time between them).
CPU_BUDGET = 0.02
#: The last finished feed's ``updates`` and ``cpu`` (seconds): what the live view cost the kernel
#: (benchmarks/scenarios.py::live_widget reads it; handy when a cell feels slow).
last_stats: dict[str, float] = {}


class Sink(Protocol):
    """What the feed drives (the live view); called from the writer thread only."""

    def update(self, chunk: Any, snapshot: Snapshot) -> None:
        """Draw new rows (a recorder ``Chunk``) and counters."""


class LiveFeed:
    """Polls a recorder and drives ``sink`` from a single writer thread."""

    def __init__(self, recorder: Any, sink: Sink, state: LiveState, unfinished: Callable[[], int],
                 interval: float = INTERVAL, clock: Callable[[], float] = time.time):
        self._recorder = recorder
        self._sink = sink
        self._state = state
        self._unfinished = unfinished
        self._interval = interval
        self._clock = clock
        self._cursor: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: Any = None  # the rows read by stop(), drawn by finish()
        self.updates = 0  # how many sink updates were made (tests check the throttle)
        self.cpu = 0.0  # CPU seconds the updates took (reading rows, counting, drawing, sending)
        self._broken = False

    def start(self) -> LiveFeed:
        """Remember where the recorder is now and start the writer thread."""
        self._cursor, _ = self._recorder.read_since(None)
        self._thread = threading.Thread(target=self._run, name="eugo-live-writer", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> Any:
        self._cursor, chunk = self._recorder.read_since(self._cursor)
        return chunk

    def _draw(self, chunk: Any, *, finished: bool = False, error: str | None = None) -> None:
        self._state.add(chunk)
        if self._broken:
            return
        try:
            snap = self._state.snapshot(self._clock(), 0 if finished else self._unfinished(), finished=finished,
                                        error=error)
            self._sink.update(chunk, snap)
            self.updates += 1
        except Exception:  # noqa: BLE001 - a broken view must never break the user's cell
            self._broken = True
            log.exception("the live view failed; the cell keeps running without it")

    def _run(self) -> None:
        pause = self._interval
        while not self._stop.wait(pause):
            c = time.thread_time()
            self._draw(self._read())
            spent = time.thread_time() - c
            self.cpu += spent
            pause = min(max(self._interval, spent / CPU_BUDGET), MAX_INTERVAL)

    def stop(self) -> None:
        """Stop the thread and read the last rows (call before the region closes; draw them with :meth:`finish`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        c = time.thread_time()
        self._last = self._read()
        self.cpu += time.thread_time() - c

    def finish(self, error: str | None = None) -> Snapshot:
        """Draw the rows :meth:`stop` read and the final counters; return them (after the region closed is fine)."""
        if self._last is None:
            self.stop()
        c = time.thread_time()
        self._draw(self._last, finished=True, error=error)
        self._last = None
        self.cpu += time.thread_time() - c
        last_stats.update(updates=self.updates, cpu=self.cpu)
        return self._state.snapshot(self._clock(), 0, finished=True, error=error)
