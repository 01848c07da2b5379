"""Sizing a cluster: how many workers a bigger job needs to meet a deadline, from a small traced run.

The answer comes from the simulator (:mod:`eugo_lab.analysis.simulate`): the small run's
tasks, with their measured durations, dispatch and return latencies and the driver's
typical submission pace (the median gap between submissions: a pause of a few milliseconds in
the small run is not repeated thousands of times), are repeated until there are ``job.tasks``
of them, and replayed on a
candidate worker count. That keeps what linear arithmetic ("tasks x seconds / deadline")
leaves out: per-task overhead, the uneven tasks and the last wave, and a driver that submits
one task at a time. ``job.startup`` (bringing the cluster up, listing the input) comes first
and counts against the deadline; ``job.scale`` stretches every task's work for inputs larger
than the measured ones (a 36 MB scene where the run read 2 MB tiles).

Assumptions on top of the simulator's: the extra tasks are more of the same (data-parallel
growth); the workers are as fast as this machine's; storage and network keep up (the plan
reports the aggregate bandwidth it needs so that can be checked against what they offer).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from eugo_lab.analysis.inputs import takes_trace
from eugo_lab.analysis.simulate import Replay, replay_of, replay_scaled, typical_submit_span
from eugo_lab.tracing.trace import Trace
from eugo_lab.units import fmt_seconds as fmt_s


@dataclass(frozen=True)
class Job:
    """A job to size: ``tasks`` like the measured ones, done ``deadline`` seconds after asking.

    ``startup``: seconds before the first task can start (cluster start-up), part of the
    deadline. ``scale``: each task does this many times the work of a measured one.
    ``task_bytes``: input bytes per task (for the bandwidth the plan needs; 0: not known).
    ``price_per_worker_hour``: for the cost (None: not priced).
    """

    tasks: int
    deadline: float
    startup: float = 0.0
    scale: float = 1.0
    task_bytes: float = 0.0
    price_per_worker_hour: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tasks, bool) or not isinstance(self.tasks, int) or self.tasks < 1:
            raise ValueError(f"Job tasks must be a whole number >= 1, got {self.tasks!r}")
        for name in ("deadline", "scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                raise ValueError(f"Job {name} must be a positive number, got {v!r}")
        for name in ("startup", "task_bytes"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v >= 0 and math.isfinite(v)):
                raise ValueError(f"Job {name} must be a number >= 0, got {v!r}")
        if self.startup >= self.deadline:
            raise ValueError(f"Job startup ({self.startup:g} s) leaves no time before the deadline "
                             f"({self.deadline:g} s): no worker count can meet it")
        p = self.price_per_worker_hour
        if p is not None and not (isinstance(p, (int, float)) and p >= 0):
            raise ValueError(f"Job price_per_worker_hour must be a number >= 0 or None, got {p!r}")


@dataclass(frozen=True)
class Plan:
    """The sizing answer: ``workers`` (None when out of reach) and what that run looks like.

    ``wall_time``: predicted seconds from asking to the last result, start-up included.
    ``cost``: every worker billed for that whole time (start-up included: a cluster bills
    from its start). ``bandwidth``: input bytes per second the store must serve while the
    tasks run. ``submit_time``: the driver's seconds to submit every task at the measured pace.
    """

    job: Job
    workers: int | None
    wall_time: float
    cost: float | None
    bandwidth: float
    submit_time: float
    measured_tasks: int
    reason: str

    def to_text(self) -> str:
        """A few deterministic-format lines (the numbers are the plan's)."""
        j = self.job
        head = (f"{j.tasks:,} tasks in {fmt_s(j.deadline)} ({fmt_s(j.startup)} start-up), from a run of "
                f"{self.measured_tasks} task{'s' if self.measured_tasks != 1 else ''}"
                + (f", each task {j.scale:.3g}x the measured work" if j.scale != 1 else ""))
        lines = [head, self.reason, f"the driver submits them in {fmt_s(self.submit_time)}"]
        if self.bandwidth:
            lines.append(f"the store must serve {self.bandwidth / 1e9:.3g} GB/s while the tasks run")
        if self.cost is not None:
            lines.append(f"cost per run {self.cost:.4g} at {j.price_per_worker_hour:g} per worker-hour")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def _job_replay(trace: Trace) -> Replay:
    """The trace's replay up to its last result: the driver's own time after it is not part of the job.

    A plan predicts the time from asking to the last result. What the notebook did after the
    tasks (in a cell that times its small run and then plans from it, the plan's own search,
    seconds long on a busy machine) would otherwise be replayed as a fixed cost of the big job,
    and the same tasks would plan differently traced in a region and in the whole cell.
    """
    return dataclasses.replace(replay_of(trace), after_results=0.0, after_submit=0.0)


def _stretched(r: Replay, scale: float) -> Replay:
    return r if scale == 1 else dataclasses.replace(r, occupancy=r.occupancy * scale)


def _wall(r: Replay, job: Job, workers: int) -> float:
    return job.startup + replay_scaled(r, job.tasks / len(r), workers, typical_submit_span(r))


@takes_trace
def predict(trace: Trace, job: Job, workers: int) -> float:
    """Predicted seconds from asking to the last result of ``job`` on ``workers`` workers (start-up included)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    r = _job_replay(trace)
    if not len(r):
        raise ValueError("the trace has no tasks: run the small job traced first (with hpc.trace() or %%eugo)")
    return _wall(_stretched(r, job.scale), job, workers)


@takes_trace
def plan(trace: Trace, job: Job, max_workers: int = 1 << 20) -> Plan:
    """The fewest workers that finish ``job`` by its deadline, predicted from ``trace`` (see the module docstring).

    A linear first guess (total work / time left), corrected once by the replay's time that
    does not shrink with more workers, starts the search; galloping and bisection find the
    smallest count the replay says meets the deadline (list scheduling is nearly
    monotone in the worker count, so the answer can be off by one where a worker more
    reorders the tail). Out of reach when even one worker per task misses it: then the
    driver's submission pace or the longest task sets the floor.
    """
    r0 = _job_replay(trace)
    if not len(r0):
        raise ValueError("the trace has no tasks: run the small job traced first (with hpc.trace() or %%eugo)")
    r = _stretched(r0, job.scale)
    submit = typical_submit_span(r) * job.tasks / len(r)
    cap = max(1, min(max_workers, job.tasks))
    work = float(r.occupancy.sum()) * job.tasks / len(r)
    left = job.deadline - job.startup
    walls: dict[int, float] = {}

    def wall(w: int) -> float:
        if w not in walls:
            walls[w] = _wall(r, job, w)
        return walls[w]

    # Two replays usually land next to the answer: the linear guess, then the count that the guess's
    # non-scaling time (submission, overheads, the last wave) leaves room for; galloping and
    # bisection from there find the fewest (each replay of a big job costs ~0.1-0.5 s).
    guess = min(cap, max(1, math.ceil(work / left)))
    fixed = wall(guess) - job.startup - work / guess
    start = guess if fixed >= left else min(cap, max(1, math.ceil(work / (left - fixed))))
    w = _fewest(lambda n: wall(n) <= job.deadline, start, cap)
    if w is None:
        t = wall(cap)
        return _plan(job, None, t, submit, len(r), (
            f"unreachable: even {cap:,} workers take {fmt_s(t)}; the driver's submission "
            f"({fmt_s(submit)}) or the longest task sets that floor"))
    t = wall(w)
    return _plan(job, w, t, submit, len(r), f"{w:,} worker{'s' if w != 1 else ''} finish in about {fmt_s(t)}")


def _fewest(ok: Callable[[int], bool], start: int, cap: int) -> int | None:
    """The smallest n in 1..cap with ``ok(n)`` (ok assumed monotone), searched outward from ``start``."""
    if ok(start):
        hi, step = start, 1
        lo = start - step
        while lo >= 1 and ok(lo):  # gallop down while it still holds
            hi, step = lo, step * 2
            lo = hi - step
        lo = max(lo, 0)
    else:
        lo, step = start, 1
        hi = min(cap, start + step)
        while not ok(hi):  # gallop up until it holds
            if hi == cap:
                return None
            lo, step = hi, step * 2
            hi = min(cap, hi + step)
    while hi - lo > 1:  # ok(hi) holds, ok(lo) does not (lo 0: nothing below was tried)
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _plan(job: Job, workers: int | None, wall: float, submit: float, measured: int, reason: str) -> Plan:
    running = max(wall - job.startup, 1e-9)
    cost = None
    if job.price_per_worker_hour is not None and workers is not None:
        cost = workers * wall * job.price_per_worker_hour / 3600.0
    return Plan(job=job, workers=workers, wall_time=wall, cost=cost, bandwidth=job.tasks * job.task_bytes / running,
                submit_time=submit, measured_tasks=measured, reason=reason)
