"""The live feed: recorder events -> one writer thread -> a sink (the live view), ~10 updates/s.

Why one thread: Bokeh's ``ColumnDataSource.stream`` loses rows when several threads call
it at once, and every ``stream`` costs >= 3 comm messages while Jupyter drops IOPub
output above ~1000 messages/s. So the recorder's subscriber only appends to a queue (it
runs on the runtime's I/O thread and must return at once), and one thread wakes every
``interval`` seconds, drains everything that arrived, and makes one update of the sink.
10 updates/s is smooth to the eye and stays far below the rate limit whatever the task
rate: 10,000 tiny tasks cost 10 updates per second, not 10,000.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from eugo_lab.cellrun.live_state import LiveState, Snapshot

log = logging.getLogger("eugo_lab")

#: Seconds between two updates of the live view (at most ~10 per second, see module docstring).
INTERVAL = 0.1


class Sink(Protocol):
    """What the feed drives (the live view); called from the writer thread only."""

    def update(self, events: list, snapshot: Snapshot) -> None:
        """Draw new events and counters."""


class LiveFeed:
    """Subscribes to a recorder and drives ``sink`` from a single writer thread."""

    def __init__(self, recorder: Any, sink: Sink, state: LiveState, unfinished: Callable[[], int],
                 interval: float = INTERVAL, clock: Callable[[], float] = time.time):
        self._recorder = recorder
        self._sink = sink
        self._state = state
        self._unfinished = unfinished
        self._interval = interval
        self._clock = clock
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.updates = 0  # how many sink updates were made (tests check the throttle)
        self._broken = False

    def start(self) -> LiveFeed:
        """Subscribe and start the writer thread."""
        self._unsubscribe = self._recorder.subscribe(self._queue.put)
        self._thread = threading.Thread(target=self._run, name="eugo-live-writer", daemon=True)
        self._thread.start()
        return self

    def _drain(self) -> list:
        events = []
        get = self._queue.get_nowait
        try:
            while True:
                events.append(get())
        except queue.Empty:
            pass
        return events

    def _flush(self, *, finished: bool = False, error: str | None = None) -> None:
        events = self._drain()
        self._state.add(events)
        if self._broken:
            return
        try:
            snap = self._state.snapshot(self._clock(), self._unfinished(), finished=finished, error=error)
            self._sink.update(events, snap)
            self.updates += 1
        except Exception:  # noqa: BLE001 - a broken view must never break the user's cell
            self._broken = True
            log.exception("the live view failed; the cell keeps running without it")

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._flush()

    def stop(self, error: str | None = None) -> Snapshot:
        """Unsubscribe, stop the thread, make the final update; return the final counters."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._flush(finished=True, error=error)
        return self._state.snapshot(self._clock(), 0, finished=True, error=error)
