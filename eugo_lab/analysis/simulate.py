"""Replay a trace on other worker counts: "what if I had 1, 2, ..., 1024 workers?".

The model (list scheduling, greedy):

- Each dispatch unit (task attempt or map batch) keeps its measured worker occupancy
  (unpickle + body + pickle), its dispatch latency (from the moment both it and its worker
  were available until the worker started on it) and its return latency (worker done →
  driver received).
- Units are taken in the order they became ready and each goes to the worker that frees
  up first. A worker that finishes one unit needs the measured *turnaround* (median gap
  between a worker's units when the next one was already queued) before it starts the next.
- Dependency ordering is kept: a unit that became ready only after other units' results
  had arrived (see :mod:`eugo_lab.analysis.critical_path`) becomes ready in the replay
  the same interval after the latest of those results arrives in the replay. Units with
  no such predecessor keep their measured ready time: that is driver time (submission,
  the driver's own code) and stays serial.
- The run ends when both the last result has arrived plus the driver time measured after
  the final wait returned, and the driver's own (non-blocked) time after its last
  submission has passed (only for traces with recorded get()/wait() spans: without them
  the driver is assumed to have waited for the results).

Assumptions: task durations do not depend on the worker count (each worker has its own
core: beyond this machine's cores that means a cluster), transfers do not contend, and
the tasks are those of the trace (failed attempts included, crashed ones without a
measured body left out).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.breakdown import availability
from eugo_lab.analysis.critical_path import TOLERANCE, driver_predecessors, last_wait_before, recorded_predecessors
from eugo_lab.analysis.inputs import takes_trace
from eugo_lab.analysis.timeline import Units, measure, units, window
from eugo_lab.tracing.trace import Trace

DEFAULT_WORKERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

# The driver sends every unit and takes every result through one thread, one at a time.
# When units waited (1 ms or more between ready and start) while the workers had time to
# spare, that thread set the pace, and the replay models it as a serial dispatcher costing
# the observed time per unit. "Had time to spare": the observed time per unit is at least
# twice what the workers needed (their occupancy and turnaround divided among them), and
# over at least 50 waiting units, so a few slow starts (a worker restart) do not count.
BACKLOG_S = 0.001
DISPATCH_MIN_UNITS = 50
DISPATCH_SLACK = 2.0
# A queued unit whose worker sat free ``STALL_S`` or more beyond the median turnaround
# before it started was held up on the driver's side (its dispatch thread starved while
# the main thread pickled a big argument, a slow send): the replay keeps that hold-up for
# that unit. Below it, the gap is the usual jitter the median turnaround stands for.
STALL_S = 0.001


@dataclass(frozen=True)
class SimRow:
    """Predicted wall time at one worker count (speedup/efficiency vs the 1-worker replay)."""

    workers: int
    wall_time: float
    speedup: float
    efficiency: float


@dataclass(frozen=True)
class Replay:
    """Everything the simulator needs, extracted once from a trace (times relative to its start)."""

    ready: np.ndarray       # measured ready time
    occupancy: np.ndarray   # worker seconds per unit
    pre: np.ndarray         # dispatch latency with a free worker
    post: np.ndarray        # return latency
    received: np.ndarray    # measured received time
    turnaround: float       # worker gap between back-to-back units
    after_results: float    # driver time after the last result and the last wait
    after_submit: float     # driver's non-blocked time after its last submission
    wall_time: float        # measured
    # Per unit: does a later unit wait for its result? None: all do (as inferred from timing).
    # A what-if that removes a wait (eugo_lab.analysis.whatif) clears it for the units nobody
    # waits for any more, e.g. the tasks a get() in a loop used to wait on.
    gates: np.ndarray | None = None
    # Seconds of the driver's dispatch thread per unit when it was the bottleneck, else 0.
    dispatch: float = 0.0
    # Measured start of each unit's occupancy: units ready at the same moment are replayed
    # in the order the engine dispatched them (None: in the order their results arrived).
    started: np.ndarray | None = None
    # Per unit: how much longer than ``turnaround`` its worker sat free before it, when the
    # trace shows it queued and held up (see ``STALL_S``); None: no unit was.
    stall: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.ready.shape[0])


def replay_of(trace: Trace, u: Units | None = None) -> Replay:
    """Extract the replay model's inputs from a trace."""
    u = units(trace) if u is None else u
    win = window(trace)
    t0 = win.start
    avail, queued = availability(u)
    pre = np.maximum(u.occ_start - avail, 0.0)
    # Median, not mean: one slow dispatch (a worker restart) must not slow every replayed task.
    turnaround = float(np.median(pre[queued])) if queued.any() else 0.0
    if len(u):
        last_rcv = float(u.received.max())
        last_ready = float(u.ready.max())
        b = trace.blocks
        ends = b["end"][np.isfinite(b["end"])]
        last_wait = float(ends.max()) if len(ends) else last_rcv
        after_results = max(win.end - max(last_rcv, last_wait), 0.0)
        lo = np.clip(b["start"], last_ready, win.end)
        hi = np.clip(b["end"], last_ready, win.end)
        # Without any recorded get()/wait() we cannot tell the driver's own work from waiting
        # for results (waits outside get()/wait(), e.g. as_completed(), are not recorded), so
        # assume it waited: the results then bound the end.
        after_submit = max((win.end - last_ready) - measure(lo, hi), 0.0) if len(ends) else 0.0
    else:
        after_results = after_submit = 0.0
    occupancy = np.maximum(u.occ_end - u.occ_start, 0.0)
    dispatch = 0.0
    waited = np.flatnonzero(u.occ_start - u.ready >= BACKLOG_S)
    if len(waited) >= DISPATCH_MIN_UNITS:
        starts = np.sort(u.occ_start[waited])
        per_unit = float(starts[-1] - starts[0]) / (len(waited) - 1)
        need = float(occupancy[waited].mean() + turnaround) / max(trace.n_workers, 1)
        if per_unit >= DISPATCH_SLACK * need:
            dispatch = per_unit
    stall = None
    if not dispatch and len(u):  # with the dispatch thread modelled, the gaps are its pace, not hold-ups
        excess = np.where(queued, pre - turnaround, 0.0)
        stall = np.where(excess >= STALL_S, excess, 0.0)
    return Replay(ready=u.ready - t0, occupancy=occupancy, pre=pre, dispatch=dispatch,
                  post=np.maximum(u.received - u.occ_end, 0.0), received=u.received - t0, turnaround=turnaround,
                  after_results=after_results, after_submit=after_submit, wall_time=win.length,
                  started=u.occ_start - t0, stall=stall if stall is not None and stall.any() else None,
                  gates=recorded_gates(trace, u))


def recorded_gates(trace: Trace, u: Units) -> np.ndarray | None:
    """Per unit: could a later unit have waited for its result, by what the trace recorded? None: not recorded.

    A unit gates when a recorded dependency names it (a future passed on, a value passed on
    through the driver), or when its result arrived before a recorded get()/wait() that ended
    before some later submission (the driver may have used it: the critical path's rule). A
    result that only arrived while the driver was busy with its own work (building the next
    input) held nothing up, however late the next submission came. ``hpc.map`` batches always
    gate: the map's feeder sends a batch when an earlier one returns.
    """
    if not trace.meta.get("deps_recorded") or not len(u):
        return None
    latest = float(last_wait_before(trace, np.array([float(u.submit.max())]))[0])
    gates = (u.received <= latest + TOLERANCE) | u.is_batch
    for preds in (recorded_predecessors(trace, u), driver_predecessors(trace, u)):
        for on in preds.values():
            gates[list(on)] = True
    return gates


def replay(r: Replay, workers: int, copies: int = 1, partial: np.ndarray | None = None,
           spacing: float = 0.0) -> float:
    """Predicted wall time of replay ``r`` on ``workers`` workers.

    ``copies``/``partial``/``spacing`` serve :func:`scale`: the units run ``copies`` times
    plus once more for the unit indices in ``partial``; copy ``k`` is ready ``k × spacing``
    later, and dependencies are inferred within each copy only.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    n = len(r)
    if n == 0:
        return r.wall_time
    order = np.lexsort((r.received, r.ready) if r.started is None else (r.received, r.started, r.ready))
    by_rcv = np.argsort(r.received, kind="stable").tolist()
    n_done = np.searchsorted(r.received[by_rcv], r.ready[order] + TOLERANCE, side="right").tolist()
    ready_l, pre_l, occ_l, post_l, rcv_l = (r.ready.tolist(), r.pre.tolist(), r.occupancy.tolist(),
                                            r.post.tolist(), r.received.tolist())
    # (shifted ready, copy, position in order) for every unit instance, processed by ready time.
    present = [np.ones(n, dtype=bool)] * copies
    if partial is not None and len(partial):
        extra = np.zeros(n, dtype=bool)
        extra[partial] = True
        present = present + [extra]
    order_l = order.tolist()
    jobs: Iterable[tuple[int, int]]  # (copy, position in order), by shifted ready time
    if copies == 1 and len(present) == 1 and bool(np.all(np.diff(r.ready[order]) >= 0)):
        jobs = zip(itertools.repeat(0), range(n))  # one copy: ``order`` is by ready time already
    else:
        timed = sorted((ready_l[j] + c * spacing, c, k) for c, pres in enumerate(present)
                       for k, j in enumerate(order_l) if pres[j])
        jobs = [(c, k) for _, c, k in timed]
    nc = len(present)
    sim_rcv = [[math.nan] * n for _ in range(nc)]
    ptr = [0] * nc
    f_meas = [-math.inf] * nc
    f_sim = [-math.inf] * nc
    # Each copy's shift of its units' ready times: its spacing, then also how much later than measured
    # its latest replayed predecessor arrived (set where a unit's predecessors are first seen).
    spaced = [c * spacing for c in range(nc)]
    shift = [0.0] * nc
    n_jobs = sum(int(np.count_nonzero(pres)) for pres in present)
    heap = [(0.0, w) for w in range(min(workers, n_jobs))]
    used = [False] * workers
    turn = r.turnaround
    disp, d_free = r.dispatch, -math.inf
    gates = r.gates.tolist() if r.gates is not None else None
    stall_l = r.stall.tolist() if r.stall is not None else None
    last_ready = 0.0
    last_rcv = -math.inf
    # The loop runs once per unit (tens of thousands for tiny tasks, two or three replays in
    # every cell's analysis): plain comparisons stand in for max() (same result: the first
    # argument unless the second is greater), heapreplace for pop-then-push (the (time, worker)
    # entries are distinct, so the same entry comes off either way), and a copy's state is
    # read from its lists only where a unit has new predecessors.
    heapreplace = heapq.heapreplace
    for c, k in jobs:
        j = order_l[k]
        done = n_done[k]
        if ptr[c] < done:
            rc, p, fm, fs = sim_rcv[c], ptr[c], f_meas[c], f_sim[c]
            while p < done:
                i = by_rcv[p]
                s = rc[i]
                if s == s and (gates is None or gates[i]):  # s == s: the predecessor is in this copy, replayed
                    if rcv_l[i] > fm:
                        fm = rcv_l[i]
                    if s > fs:
                        fs = s
                p += 1
            ptr[c], f_meas[c], f_sim[c] = p, fm, fs
            if fm != -math.inf:
                shift[c] = fs - fm
        ready = ready_l[j] + spaced[c] + shift[c]
        if ready > last_ready:
            last_ready = ready
        t_free, w = heap[0]
        start = ready + pre_l[j]
        if used[w]:
            free = t_free + turn + stall_l[j] if stall_l is not None else t_free + turn
        else:
            free = t_free
            used[w] = True
        if free > start:
            start = free
        if disp:
            if d_free + disp > start:
                start = d_free + disp
            d_free = start
        end = start + occ_l[j]
        heapreplace(heap, (end, w))
        sim_rcv[c][j] = end = end + post_l[j]
        if end > last_rcv:
            last_rcv = end
    return max(last_rcv + r.after_results, last_ready + r.after_submit)


@takes_trace
def simulate(trace: Trace, workers: Iterable[int] = DEFAULT_WORKERS) -> list[SimRow]:
    """Predict the wall time of this trace's work on each worker count (see the module docstring).

    Speedup and efficiency are relative to the replay on 1 worker, so the rows compare
    like with like (the same model, the same overheads).
    """
    r = replay_of(trace)
    base = replay(r, 1)
    rows = []
    for w in workers:
        t = replay(r, int(w))
        s = base / t if t > 0 else math.inf
        rows.append(SimRow(workers=int(w), wall_time=t, speedup=s, efficiency=s / int(w)))
    return rows


def to_dataframe(rows: Sequence[SimRow]) -> object:
    """A pandas DataFrame with columns ``workers, wall_time, speedup, efficiency``."""
    import pandas as pd

    return pd.DataFrame([{"workers": x.workers, "wall_time": x.wall_time, "speedup": x.speedup,
                          "efficiency": x.efficiency} for x in rows])


@dataclass(frozen=True)
class WorkersFor:
    """Answer of :func:`workers_for`: ``workers`` is None when the target is out of reach (see ``reason``)."""

    workers: int | None
    wall_time: float
    reason: str


@takes_trace
def workers_for(trace: Trace, target_time: float, max_workers: int = 1 << 16) -> WorkersFor:
    """The fewest workers whose predicted wall time is at most ``target_time`` seconds.

    Searches powers of two, then bisects between the last two (list scheduling is nearly
    but not strictly monotone in the worker count, so the answer can be off by a little
    where adding a worker reorders the tail). Unreachable when even one worker per task
    misses the target: the critical path and the driver's serial time then set the floor.
    """
    if not target_time > 0:
        raise ValueError(f"target_time must be a positive number of seconds, got {target_time!r}")
    r = replay_of(trace)
    cap = max(1, min(max_workers, max(len(r), 1)))
    floor = replay(r, cap)
    if floor > target_time:
        return WorkersFor(None, floor, (
            f"unreachable: even {cap} worker{'s' if cap != 1 else ''} (one per task) take {floor:.3g} s; the "
            "chain of dependent tasks and the driver's serial time set that floor"))
    lo, hi = 0, 1
    while hi < cap and replay(r, hi) > target_time:
        lo, hi = hi, min(hi * 2, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if replay(r, mid) <= target_time:
            hi = mid
        else:
            lo = mid
    t = replay(r, hi)
    return WorkersFor(hi, t, f"{hi} worker{'s' if hi != 1 else ''} finish in about {t:.3g} s")


@takes_trace
def scale(trace: Trace, factor: float, workers: int) -> float:
    """Predicted wall time for ``factor`` times as many tasks on ``workers`` workers.

    Assumes the extra tasks are more of the same (data-parallel growth: more items for the
    same functions): the trace's units are repeated ``floor(factor)`` times plus a
    fraction of them (the first ones in ready order). Copy ``k`` becomes ready ``k`` times
    the driver's submission span later, so submitting stays serial; dependency chains
    repeat within each copy (they do not get longer). Driver time after the last
    submission and after the last result is kept once.
    """
    if not factor > 0:
        raise ValueError(f"factor must be positive, got {factor!r}")
    return replay_scaled(replay_of(trace), factor, workers)


def replay_scaled(r: Replay, factor: float, workers: int, spacing: float | None = None) -> float:
    """:func:`scale` on an extracted replay (so a search over worker counts extracts it once).

    ``spacing``: seconds between the starts of two copies' submissions (default: :func:`submit_span`).
    """
    n = len(r)
    if n == 0:
        return r.wall_time
    whole, frac = int(math.floor(factor)), factor - math.floor(factor)
    order = np.argsort(r.ready, kind="stable")
    part = order[: int(round(frac * n))]
    # Spacing between consecutive submissions, so that copy k follows copy k-1's submission.
    span = submit_span(r) if spacing is None else spacing
    if whole == 0 and not len(part):
        part = order[:1]
    return replay(r, workers, copies=whole, partial=part, spacing=span)


def submit_span(r: Replay) -> float:
    """The driver's time to submit the replay's units once: one copy's spacing in :func:`replay_scaled`."""
    n = len(r)
    return float(r.ready.max() - r.ready.min()) * n / max(n - 1, 1) if n else 0.0


def typical_submit_span(r: Replay) -> float:
    """The driver's time to submit the replay's units once at its typical pace: ``n`` x the median gap.

    For a job thousands of times the measured run, a pause in a handful of submissions (the
    first call pickling the function, the OS running something else for 10 ms) would be
    repeated thousands of times by :func:`submit_span` and set the plan's floor: the plan
    would then depend on how busy the machine was during the small run. The median gap is
    what each further submission costs; it never exceeds :func:`submit_span`.
    """
    n = len(r)
    if n < 3:
        return submit_span(r)
    gaps = np.diff(np.sort(r.ready))
    return min(submit_span(r), float(np.median(gaps)) * n)
