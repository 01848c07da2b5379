"""What a run costs on rented workers, what an idle cluster costs, and the cheapest worker count."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass

from eugo_lab.analysis.breakdown import breakdown
from eugo_lab.analysis.inputs import takes_trace
from eugo_lab.analysis.report import WARNING, Finding, fmt_pct
from eugo_lab.analysis.simulate import DEFAULT_WORKERS, replay, replay_of
from eugo_lab.tracing.trace import Trace
from eugo_lab.units import fmt_seconds as fmt_s

# Flag an idle cluster once its idle time costs at least a tenth of the work it did:
# below that, keeping it warm for the next run is usually worth the start-up it saves.
IDLE_CLUSTER_SHARE = 0.1


def _seconds(x: float | datetime.timedelta) -> float:
    return x.total_seconds() if isinstance(x, datetime.timedelta) else float(x)


@dataclass(frozen=True)
class CostReport:
    """Cost of one traced run, in the currency of ``price_per_worker_hour``.

    ``run_cost``: all workers for the wall time. ``wasted_in_run``: the share of it paid
    for worker time the breakdown counts as idle. ``idle_cost``: all workers for the
    ``idle_seconds`` the cluster stayed up after the work. ``total`` = run + idle.
    """

    workers: int
    wall_time: float
    price_per_worker_hour: float
    run_cost: float
    wasted_in_run: float
    idle_seconds: float
    idle_cost: float
    findings: tuple[Finding, ...]

    @property
    def total(self) -> float:
        """``run_cost + idle_cost``."""
        return self.run_cost + self.idle_cost


@takes_trace
def cost(trace: Trace, price_per_worker_hour: float, idle: float | datetime.timedelta = 0.0) -> CostReport:
    """Price the run at ``price_per_worker_hour`` per worker.

    ``idle`` is how long the cluster stays up after the work, in SECONDS (like every time
    in a trace) or as a ``datetime.timedelta``.

    Adds an "Idle cluster" finding when the idle time costs at least ``IDLE_CLUSTER_SHARE``
    of the run.
    """
    idle_s = _seconds(idle)
    if idle_s < 0 or price_per_worker_hour < 0:
        raise ValueError("idle and price_per_worker_hour must not be negative")
    b = breakdown(trace)
    w, wall = trace.n_workers, b.wall_time
    rate = price_per_worker_hour / 3600.0
    run = w * wall * rate
    idle_cost = w * idle_s * rate
    found = []
    if idle_s > 0 and idle_cost >= IDLE_CLUSTER_SHARE * run:
        share = idle_cost / (run + idle_cost) if run + idle_cost > 0 else 1.0
        found.append(Finding(
            "idle-cluster", "Idle cluster", WARNING,
            f"The {w} workers stayed up {fmt_s(idle_s)} after {fmt_s(wall)} of work: {fmt_pct(share)} of the bill "
            "paid for nothing.",
            "Shut the cluster down when the work ends (hpc.shutdown()), or give it an idle timeout of a few minutes.",
            {"idle_seconds": idle_s, "idle_cost": idle_cost, "run_cost": run, "share": share}))
    return CostReport(workers=w, wall_time=wall, price_per_worker_hour=price_per_worker_hour, run_cost=run,
                      wasted_in_run=b.idle * rate, idle_seconds=idle_s, idle_cost=idle_cost, findings=tuple(found))


@dataclass(frozen=True)
class CostChoice:
    """Answer of :func:`cheapest_workers`: ``workers`` is None when no candidate meets the deadline."""

    workers: int | None
    wall_time: float
    cost: float
    reason: str


@takes_trace
def cheapest_workers(trace: Trace, deadline: float, price_per_worker_hour: float,
                     candidates: Iterable[int] = DEFAULT_WORKERS) -> CostChoice:
    """The worker count with the lowest predicted cost that meets ``deadline`` seconds.

    Cost = workers × predicted wall time × price; candidates default to 1, 2, 4, ... 1024.

    Ties go to fewer workers. Predictions come from :func:`eugo_lab.analysis.simulate`.
    """
    if not deadline > 0:
        raise ValueError(f"deadline must be a positive number of seconds, got {deadline!r}")
    if not price_per_worker_hour >= 0:
        raise ValueError(f"price_per_worker_hour must not be negative, got {price_per_worker_hour!r}")
    r = replay_of(trace)
    rate = price_per_worker_hour / 3600.0
    best: CostChoice | None = None
    fastest = None
    for w in sorted(set(int(c) for c in candidates)):
        t = replay(r, w)
        if fastest is None or t < fastest[1]:
            fastest = (w, t)
        if t > deadline:
            continue
        c = w * t * rate
        if best is None or c < best.cost - 1e-12:
            best = CostChoice(w, t, c, f"{w} workers finish in about {t:.3g} s for {c:.4g}")
    if best is None:
        w, t = fastest if fastest else (0, float("inf"))
        return CostChoice(None, t, float("inf"),
                          f"no candidate meets the {deadline:.3g} s deadline; "
                          f"the fastest, {w} workers, takes {t:.3g} s")
    return best
