"""Counters for the live view, accumulated from trace events (pure: no threads, no widgets).

The writer thread of :mod:`eugo_lab.cellrun.live` feeds chunks of new trace rows in and asks for
a :class:`Snapshot` at most ~10 times a second; renderers only draw snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eugo_lab.contract.row import CANCELLED, CRASHED, ERROR


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
    cancelled: int = 0
    side_by_side: float = 0.0  # seconds in which two or more finished task bodies ran at once

    @property
    def parallel(self) -> bool:
        """Tasks ran side by side long enough for a speedup to mean something (the summary's rule)."""
        from eugo_lab.analysis.breakdown import SIDE_BY_SIDE_MIN_SHARE

        return self.workers >= 2 and self.side_by_side >= SIDE_BY_SIDE_MIN_SHARE * self.elapsed > 0

    @property
    def speedup(self) -> float:
        """Work done so far divided by the time elapsed: the summary's estimate, from the same sum (``busy``)."""
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
        self.cancelled = 0
        self.busy = 0.0
        self._spans: list[tuple[np.ndarray, np.ndarray]] = []  # finished bodies' (starts, ends), per chunk
        self._side_by_side: float | None = 0.0  # None: to be computed again (a chunk came in)

    @property
    def side_by_side(self) -> float:
        """Seconds in which two or more of the finished task bodies ran at once (as the summary counts it)."""
        if self._side_by_side is None:
            from eugo_lab.analysis.breakdown import parallel_time

            starts = np.concatenate([s for s, _ in self._spans])
            ends = np.concatenate([e for _, e in self._spans])
            ps, pe = parallel_time(starts, ends, -np.inf, np.inf)
            self._side_by_side = float((pe - ps).sum())
        return self._side_by_side

    def add(self, chunk: object) -> None:
        """Count the task rows of a recorder ``Chunk`` (or a Trace): vectorised, cost independent of Python loops."""
        t = chunk.tasks  # type: ignore[attr-defined]
        if not len(t["task_id"]):
            return
        from eugo_lab.analysis.timeline import work_time

        status = np.asarray(t["status"], dtype="int64")
        retried = int(np.count_nonzero(np.asarray(t["attempt"], dtype="int64") > 1))
        # A row is one attempt (one per item for hpc.map). Every attempt > 1 exists because an
        # earlier attempt of the same task failed and was not final: tasks done = rows - retries
        # (so the counters add up to the tasks the cell submitted, not to its attempts).
        self.done += int(status.size) - retried
        self.cancelled += int(np.count_nonzero(status == CANCELLED))
        self.failed += int(np.count_nonzero((status == ERROR) | (status == CRASHED)))
        self.retried += retried
        # The summary's serial time, summed the same way: a task's waits on its own children are not work
        # (the children's bodies are), or a nested run read 7.9x live and 0.2x in its summary.
        self.busy += work_time(chunk)
        self._spans.append((np.asarray(t["start"], dtype="float64"), np.asarray(t["end"], dtype="float64")))
        self._side_by_side = None

    def snapshot(self, now: float, unfinished: int, *, finished: bool = False, error: str | None = None) -> Snapshot:
        """Counters at ``now``; ``unfinished`` = tasks (``hpc.map`` items) submitted and not done.

        ``running`` is at most one per worker (a worker runs one task or item at a time).
        """
        unfinished = max(int(unfinished), 0)
        running = min(unfinished, self.workers)
        return Snapshot(done=self.done, failed=self.failed, retried=self.retried, running=0 if finished else running,
                        pending=0 if finished else unfinished - running, elapsed=max(now - self.start, 0.0),
                        busy=self.busy, workers=self.workers, finished=finished, error=error,
                        cancelled=self.cancelled, side_by_side=self.side_by_side)
