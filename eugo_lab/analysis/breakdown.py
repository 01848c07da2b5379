"""Where the time went: worker time split into categories, plus driver- and task-side waits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis import facts, gil
from eugo_lab.analysis.inputs import takes_trace
from eugo_lab.analysis.timeline import Units, Window, bandwidth, covered, crowded, measure, merge, units, window
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
    - ``gil_wait`` (the threads engine only, ``shared_interpreter``): time the tasks' threads waited
      for the interpreter lock while another task ran Python (:mod:`eugo_lab.analysis.gil`), taken out
      of ``compute`` and ``serialization``: a thread pickling a few bytes while another computes waits
      for the lock, and that wait is neither work nor pickling.

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
    gil_wait: float = 0.0
    shared_interpreter: bool = False

    @property
    def worker_time(self) -> float:
        """``workers × wall_time``: the total the worker-side categories add up to."""
        return self.workers * self.wall_time

    def worker_categories(self) -> dict[str, float]:
        """The worker-side categories in display order (``GIL wait`` on the threads engine only)."""
        lock = {"GIL wait": self.gil_wait} if self.shared_interpreter else {}
        return {"compute": self.compute, **lock, "serialization": self.serialization, "scheduling": self.scheduling,
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
    shared = gil.shares_interpreter(trace.meta)
    gil_wait = 0.0
    if shared:  # waiting for the one interpreter lock is neither the tasks' work nor their pickling
        in_body = float(gil.gil_waits(u).sum())
        in_pickling = float(gil.pickling_gil_waits(u, *facts.per_unit(trace, u, "pickling_cpu")).sum())
        compute, serialization, gil_wait = compute - in_body, serialization - in_pickling, in_body + in_pickling
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
    idle = max(workers * wall - compute - gil_wait - serialization - scheduling - transfer, 0.0)
    b = trace.blocks
    blocked = measure(np.clip(b["start"], win.start, win.end), np.clip(b["end"], win.start, win.end))
    return Breakdown(workers=workers, wall_time=wall, compute=compute, serialization=serialization,
                     scheduling=scheduling, transfer=transfer, idle=idle,
                     queue_wait=float(queue_waits(u).sum()), driver_blocked=blocked, gil_wait=gil_wait,
                     shared_interpreter=shared)


#: Speedup and efficiency mean something only where tasks ran side by side for at least a
#: fifth of the cell: below that, task time over wall time measures how long the driver took
#: (pickling, its own loop, waiting on one task), not parallelism, and reads "0.0x".
SIDE_BY_SIDE_MIN_SHARE = 0.2
#: The summary leads with the driver when more than half the cell was the driver's own time.
DRIVER_LEAD_SHARE = 0.5


@dataclass(frozen=True)
class DriverTime:
    """Where the cell's wall time went on the driver (``Trace.driver_breakdown``), and how much ran in parallel.

    ``serializing + submitting + blocked + own_work == wall_time``. ``blocked_single``: the
    part of ``blocked`` during which at most one task body ran (the driver waiting on a
    single task); ``side_by_side``: time during which two or more task bodies ran at once.
    """

    wall_time: float
    serializing: float
    submitting: float
    blocked: float
    own_work: float
    blocked_single: float
    side_by_side: float
    workers: int

    @property
    def driver_bound(self) -> float:
        """Seconds the cell spent on the driver rather than in parallel tasks (waiting on one task counts)."""
        single = self.blocked_single if self.workers >= 2 else 0.0
        return self.serializing + self.submitting + self.own_work + single

    def share(self, seconds: float) -> float:
        """``seconds`` as a share of the wall time (0 for an empty window)."""
        return seconds / self.wall_time if self.wall_time > 0 else 0.0

    @property
    def ran_in_parallel(self) -> bool:
        """Whether tasks ran side by side long enough for a speedup to mean something (``SIDE_BY_SIDE_MIN_SHARE``)."""
        return self.workers >= 2 and self.side_by_side >= SIDE_BY_SIDE_MIN_SHARE * self.wall_time > 0

    @property
    def driver_led(self) -> bool:
        """Whether most of the cell was the driver's (``DRIVER_LEAD_SHARE``)."""
        return self.share(self.driver_bound) > DRIVER_LEAD_SHARE

    def parts(self) -> list[tuple[str, float]]:
        """The driver's shares as ``[(what, seconds)]``, largest first, the ones under 1% left out."""
        items = [("serializing arguments", self.serializing), ("submitting", self.submitting),
                 ("its own work", self.own_work)]
        if self.workers >= 2:
            items.append(("waiting while at most one task ran", self.blocked_single))
        return sorted([(k, v) for k, v in items if self.share(v) >= 0.01], key=lambda kv: -kv[1])

    def sentence(self) -> str:
        """``72% of this cell ran in the driver: 41% serializing arguments, 31% its own work``."""
        parts = ", ".join(f"{self.share(v):.0%} {k}" for k, v in self.parts())
        return f"{self.share(self.driver_bound):.0%} of this cell ran in the driver" + (f": {parts}" if parts else "")


def parallel_time(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Where two or more of the intervals overlap, within ``[lo, hi]``, as merged ``(starts, ends)``."""
    ok = np.isfinite(start) & np.isfinite(end) & (end > start)
    return crowded(np.clip(start[ok], lo, hi), np.clip(end[ok], lo, hi))


def single_time(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Where at most one of the intervals runs, within ``[lo, hi]`` (the complement of :func:`parallel_time`)."""
    ps, pe = parallel_time(start, end, lo, hi)
    edges = np.concatenate([[lo], pe]), np.concatenate([ps, [hi]])
    return merge(*edges)


@takes_trace
def driver_time(trace: Trace) -> DriverTime:
    """The :class:`DriverTime` of a trace (its driver lane, and how long tasks ran side by side)."""
    d = trace.driver_breakdown()
    t = trace.tasks
    lo, hi = trace.t0, trace.t0 + max(trace.wall_time, 0.0)
    start, end = np.asarray(t["start"], float), np.asarray(t["end"], float)
    ps, pe = parallel_time(start, end, lo, hi)
    b = trace.blocks
    blocked = merge(np.clip(np.asarray(b["start"], float), lo, hi), np.clip(np.asarray(b["end"], float), lo, hi))
    single = float(covered(single_time(start, end, lo, hi), *blocked).sum()) if len(blocked[0]) else 0.0
    return DriverTime(wall_time=max(trace.wall_time, 0.0), serializing=d["serializing"], submitting=d["submitting"],
                      blocked=d["blocked"], own_work=d["own work"], blocked_single=single,
                      side_by_side=float((pe - ps).sum()), workers=trace.n_workers)
