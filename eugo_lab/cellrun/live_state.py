"""Counters for the live view, accumulated from trace events (pure: no threads, no widgets).

The writer thread of :mod:`eugo_lab.cellrun.live` feeds batches of events in and asks for
a :class:`Snapshot` at most ~10 times a second; renderers only draw snapshots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eugo_lab.tracing.recorder import TaskEvent


@dataclass(frozen=True)
class Snapshot:
    """The live counters at one moment."""

    done: int
    failed: int
    retried: int
    running: int
    pending: int
    elapsed: float
    busy: float
    workers: int
    finished: bool = False
    error: str | None = None

    @property
    def speedup(self) -> float:
        """Work done so far (sum of task durations) divided by the time elapsed."""
        return self.busy / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def efficiency(self) -> float:
        """Speedup so far per worker (1.0 = every worker busy all the time)."""
        return self.speedup / self.workers if self.workers else 0.0

    @property
    def progress(self) -> float:
        """Share of the known tasks that are done (0..1); 1 once the cell ended without error."""
        if self.finished and self.error is None:
            return 1.0
        total = self.done + self.running + self.pending
        return self.done / total if total else 0.0


class LiveState:
    """Accumulates finished-task events into counters."""

    def __init__(self, start: float, workers: int):
        self.start = start
        self.workers = max(int(workers), 1)
        self.done = 0
        self.failed = 0
        self.retried = 0
        self.busy = 0.0

    def add(self, events: list) -> None:
        """Count a batch of ``TaskEvent``/``BlockEvent`` (block events do not change counters)."""
        for ev in events:
            if type(ev) is not TaskEvent:
                continue
            self.done += 1
            if ev.status != "ok":
                self.failed += 1
            if ev.attempt > 1:
                self.retried += 1
            d = ev.end - ev.start
            if not math.isnan(d) and d > 0:
                self.busy += d

    def snapshot(self, now: float, unfinished: int, *, finished: bool = False, error: str | None = None) -> Snapshot:
        """Counters at ``now``; ``unfinished`` = tasks submitted and not done (the runtime's count)."""
        unfinished = max(int(unfinished), 0)
        running = min(unfinished, self.workers)
        return Snapshot(done=self.done, failed=self.failed, retried=self.retried, running=0 if finished else running,
                        pending=0 if finished else unfinished - running, elapsed=max(now - self.start, 0.0),
                        busy=self.busy, workers=self.workers, finished=finished, error=error)
