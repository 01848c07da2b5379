"""Where the time went: worker time split into categories, plus driver- and task-side waits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.inputs import takes_trace
from eugo_lab.analysis.timeline import Units, Window, bandwidth, covered, measure, merge, units, window
from eugo_lab.tracing.trace import Trace


@dataclass(frozen=True)
class Breakdown:
    """Seconds spent in each category.

    Worker-side categories partition the worker time ``workers × wall_time``:

    - ``compute``: task bodies (``end - start``) of every measured attempt, failed ones
      included (they ran; the code decides whether that was useful).
    - ``serialization``: unpickling arguments and pickling results on the workers
      (``deser + ser``).
    - ``scheduling``: time a worker sat idle although a task already assigned to it was
      ready (``ready`` passed, the worker had not yet begun unpickling it), minus the
      share attributed to ``transfer``: dispatch, messaging and the driver's bookkeeping;
      also worker start-up when the region began with a freshly started pool.
    - ``transfer``: the part of that waiting explained by moving the arguments, estimated
      as ``bytes_in / bandwidth`` (bandwidth from :mod:`eugo_lab.analysis.timeline`;
      the trace does not time transfers separately).
    - ``idle``: the rest: workers with nothing assigned (too few tasks, a long tail,
      the driver busy before or between submissions).

    Not part of that sum:

    - ``queue_wait``: summed over tasks, time a ready task waited because its worker was
      busy with other tasks (capacity, not overhead).
    - ``driver_blocked``: time the driver spent inside ``get()``/``wait()`` or an ``await`` (union of the
      blocking spans).
    """

    workers: int
    wall_time: float
    compute: float
    serialization: float
    scheduling: float
    transfer: float
    idle: float
    queue_wait: float
    driver_blocked: float

    @property
    def worker_time(self) -> float:
        """``workers × wall_time``: the total the worker-side categories add up to."""
        return self.workers * self.wall_time

    def worker_categories(self) -> dict[str, float]:
        """The worker-side categories in display order."""
        return {"compute": self.compute, "serialization": self.serialization, "scheduling": self.scheduling,
                "transfer": self.transfer, "idle": self.idle}


def queue_waits(u: Units) -> np.ndarray:
    """Per unit: seconds between ``ready`` and occupancy start during which its worker was busy."""
    q = np.zeros(len(u))
    for w in np.unique(u.worker):
        sel = np.flatnonzero(u.worker == w)
        busy = merge(u.occ_start[sel], u.occ_end[sel])
        q[sel] = covered(busy, u.ready[sel], u.occ_start[sel])
    return q


def availability(u: Units) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: when both it and its worker were available, and whether it had to queue.

    ``avail = max(ready, end of the previous occupancy on the same worker)``; ``queued`` is
    True when the unit became ready while its worker was still busy with the previous one.
    """
    avail = u.ready.copy()
    queued = np.zeros(len(u), dtype=bool)
    for w in np.unique(u.worker):
        sel = np.flatnonzero(u.worker == w)
        sel = sel[np.argsort(u.occ_start[sel], kind="stable")]
        prev_end = np.concatenate([[-np.inf], np.maximum.accumulate(u.occ_end[sel])[:-1]])
        queued[sel] = u.ready[sel] < prev_end
        avail[sel] = np.maximum(u.ready[sel], prev_end)
    return avail, queued


def per_task_overhead(u: Units) -> np.ndarray:
    """Per unit: round trip beyond the body, ``(received - avail) - body`` (see :func:`availability`).

    It includes (un)pickling, dispatch, transfer and the driver's handling of the result.
    The round trip is counted from ``avail``, not ``ready``: time spent waiting for a busy
    worker is a capacity effect, not a cost every task pays. A worker that was still
    starting up counts as available, so a cold pool's start-up shows as overhead of the
    first tasks.
    """
    avail, _ = availability(u)
    return np.maximum((u.received - avail) - u.body, 0.0)


@takes_trace
def breakdown(trace: Trace, u: Units | None = None, win: Window | None = None) -> Breakdown:
    """Compute the :class:`Breakdown` of a trace."""
    u = units(trace) if u is None else u
    win = window(trace) if win is None else win
    wall = win.length
    workers = trace.n_workers
    compute = float(u.body.sum())
    serialization = float((u.deser + u.ser).sum())
    waiting = 0.0
    transfer = 0.0
    bw = bandwidth(trace)
    for w in np.unique(u.worker):
        sel = np.flatnonzero(u.worker == w)
        busy = merge(np.clip(u.occ_start[sel], win.start, win.end), np.clip(u.occ_end[sel], win.start, win.end))
        ws, we = merge(np.clip(u.ready[sel], win.start, win.end), np.clip(u.occ_start[sel], win.start, win.end))
        # Waiting-for-dispatch time = union of [ready, occupancy start] not covered by work.
        wait_w = float((we - ws).sum() - covered(busy, ws, we).sum())
        waiting += wait_w
        transfer += min(wait_w, float(u.bytes_in[sel].sum()) / bw)
    scheduling = waiting - transfer
    idle = max(workers * wall - compute - serialization - scheduling - transfer, 0.0)
    b = trace.blocks
    blocked = measure(np.clip(b["start"], win.start, win.end), np.clip(b["end"], win.start, win.end))
    return Breakdown(workers=workers, wall_time=wall, compute=compute, serialization=serialization,
                     scheduling=scheduling, transfer=transfer, idle=idle,
                     queue_wait=float(queue_waits(u).sum()), driver_blocked=blocked)
