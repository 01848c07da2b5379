"""Sizing a cluster: how many workers a bigger job needs to meet a deadline, from a small traced run.

The answer comes from the simulator (:mod:`eugo_lab.analysis.simulate`): the small run's
tasks, with their measured durations, dispatch and return latencies and the driver's
submission pace, are repeated until there are ``job.tasks`` of them, and replayed on a
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
from dataclasses import dataclass

from eugo_lab.analysis.inputs import takes_trace
from eugo_lab.analysis.report import fmt_s
from eugo_lab.analysis.simulate import Replay, replay_of, replay_scaled, submit_span
from eugo_lab.tracing.trace import Trace


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


def _stretched(r: Replay, scale: float) -> Replay:
    return r if scale == 1 else dataclasses.replace(r, occupancy=r.occupancy * scale)


def _wall(r: Replay, job: Job, workers: int) -> float:
    return job.startup + replay_scaled(r, job.tasks / len(r), workers)


@takes_trace
def predict(trace: Trace, job: Job, workers: int) -> float:
    """Predicted seconds from asking to the last result of ``job`` on ``workers`` workers (start-up included)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    r = replay_of(trace)
    if not len(r):
        raise ValueError("the trace has no tasks: run the small job traced first (with hpc.trace() or %%eugo)")
    return _wall(_stretched(r, job.scale), job, workers)


@takes_trace
def plan(trace: Trace, job: Job, max_workers: int = 1 << 20) -> Plan:
    """The fewest workers that finish ``job`` by its deadline, predicted from ``trace`` (see the module docstring).

    A linear first guess (total work / time left) starts the search; doubling and bisection
    find the smallest count the replay says meets the deadline (list scheduling is nearly
    monotone in the worker count, so the answer can be off by one where a worker more
    reorders the tail). Out of reach when even one worker per task misses it: then the
    driver's submission pace or the longest task sets the floor.
    """
    r0 = replay_of(trace)
    if not len(r0):
        raise ValueError("the trace has no tasks: run the small job traced first (with hpc.trace() or %%eugo)")
    r = _stretched(r0, job.scale)
    submit = submit_span(r) * job.tasks / len(r)
    cap = max(1, min(max_workers, job.tasks))
    work = float(r.occupancy.sum()) * job.tasks / len(r)
    guess = min(cap, max(1, math.ceil(work / (job.deadline - job.startup))))
    hi = guess
    while _wall(r, job, hi) > job.deadline:
        if hi == cap:
            t = _wall(r, job, cap)
            return _plan(job, None, t, submit, len(r), (
                f"unreachable: even {cap:,} workers take {fmt_s(t)}; the driver's submission "
                f"({fmt_s(submit)}) or the longest task sets that floor"))
        hi = min(cap, hi * 2)
    lo = hi // 2 if hi > guess else 0  # the last count that missed (0: the guess already met it)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _wall(r, job, mid) <= job.deadline:
            hi = mid
        else:
            lo = mid
    t = _wall(r, job, hi)
    return _plan(job, hi, t, submit, len(r), f"{hi:,} worker{'s' if hi != 1 else ''} finish in about {fmt_s(t)}")


def _plan(job: Job, workers: int | None, wall: float, submit: float, measured: int, reason: str) -> Plan:
    running = max(wall - job.startup, 1e-9)
    cost = None
    if job.price_per_worker_hour is not None and workers is not None:
        cost = workers * wall * job.price_per_worker_hour / 3600.0
    return Plan(job=job, workers=workers, wall_time=wall, cost=cost, bandwidth=job.tasks * job.task_bytes / running,
                submit_time=submit, measured_tasks=measured, reason=reason)
