"""Dispatch units, the run's time window, and interval arithmetic shared by every analysis.

A *dispatch unit* is what the engine actually sent to a worker: one task attempt, or one
``hpc.map`` batch (whose items the trace stores as separate rows sharing ``batch``,
``ready`` and ``received``). Overhead, worker occupancy and the simulator work on units,
because a batch pays scheduling and transfer once, not once per item.

Rows without a measured body (crashed before any measurement, cancelled) have NaN
``start``/``end``; they are left out of units: their worker time is unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.contract.phases import CHILD_WAIT_PHASE
from eugo_lab.contract.row import ERROR, OK
from eugo_lab.tracing.trace import Trace

# Bytes per second assumed when estimating transfer time from ``bytes_in``. The trace
# does not time the pipe or network transfer separately from dispatch, so transfer is an
# estimate: about 1 GB/s for a pipe between processes on one host, 1 Gbit/s (125 MB/s) for
# a network hop to another host.
LOCAL_BANDWIDTH = 1e9
NETWORK_BANDWIDTH = 1.25e8


def bandwidth(trace: Trace) -> float:
    """Bytes/second assumed for transfers in this trace's backend (see the module constants).

    Local when the engine's descriptor says it runs on this machine only; an engine this process does
    not know (a trace recorded elsewhere) counts as a network hop.
    """
    from eugo_lab.contract.base import engine

    d = engine(trace.meta.get("backend", "local"))
    return LOCAL_BANDWIDTH if d is not None and d.local else NETWORK_BANDWIDTH


@dataclass(frozen=True)
class Window:
    """The analysed span of a trace, in epoch seconds.

    ``start``/``end`` are the region's start and end, widened to cover every task's
    ``submit`` and ``received`` time: normally the region already covers them, but a
    trace assembled by hand (region times 0) or a result that arrived after the region
    closed would otherwise give a negative idle time.
    """

    start: float
    end: float

    @property
    def length(self) -> float:
        """Seconds from start to end (the report's wall time)."""
        return max(self.end - self.start, 0.0)


def window(trace: Trace) -> Window:
    """The time window the analysis covers (see :class:`Window`)."""
    lo = float(trace.meta.get("region_start", math.nan))
    hi = float(trace.meta.get("region_end", math.nan))
    t = trace.tasks
    if len(trace):
        first = np.nanmin(t["submit"]) if np.isfinite(t["submit"]).any() else math.nan
        last = np.nanmax(t["received"]) if np.isfinite(t["received"]).any() else math.nan
        if not (lo > 0):  # a region that was never opened: the tasks define the span
            lo = first
        if not (hi > 0):
            hi = last
        lo = float(np.nanmin([lo, first]))
        hi = float(np.nanmax([hi, last]))
    if not math.isfinite(lo) or not math.isfinite(hi):
        lo = hi = 0.0
    return Window(lo, max(lo, hi))


def child_waits(trace: Trace | Any) -> np.ndarray:
    """Per task row, the seconds its body waited in ``hpc.get``/``wait`` on tasks it submitted (0: none).

    ``trace``: a Trace, or anything with its ``tasks``, ``phases`` and ``phase_names`` (the live view's
    chunks of new rows, whose phase rows index the chunk's own task rows).
    """
    n = len(trace.tasks["task_id"])
    if CHILD_WAIT_PHASE not in trace.phase_names:
        return np.zeros(n)
    p = trace.phases
    rows = np.asarray(p["row"], dtype=np.int64)
    sel = np.asarray(p["name"]) == list(trace.phase_names).index(CHILD_WAIT_PHASE)
    took = np.asarray(p["end"], dtype=float) - np.asarray(p["start"], dtype=float)
    return np.bincount(rows[sel], weights=took[sel], minlength=n)[:n]


def work_time(trace: Trace | Any) -> float:
    """The tasks' work: the sum of the bodies (``end - start``) of successful and failed attempts.

    A task's waits on tasks it submitted itself are left out: those children's own bodies count them
    (a parent waiting on its children while they run is not work done twice). The summary's serial time
    and the live view's "speedup so far" both divide this by the time elapsed, so they agree on any run,
    nested ones included. ``trace``: as for :func:`child_waits`.
    """
    t = trace.tasks
    body = np.asarray(t["end"], dtype=float) - np.asarray(t["start"], dtype=float) - child_waits(trace)
    sel = np.isfinite(body) & np.isin(np.asarray(t["status"]), (OK, ERROR))
    return float(body[sel].sum())


@dataclass(frozen=True)
class Units:
    """Columnar table of dispatch units (see the module docstring); all times epoch seconds.

    ``occ_start``/``occ_end`` bound the worker's occupancy: from the moment it began
    unpickling the arguments to the moment it finished pickling the result.
    """

    task_id: np.ndarray   # first task id of the unit (the batch's first item for a map batch)
    function: np.ndarray  # index into trace.functions
    worker: np.ndarray
    status: np.ndarray    # worst status of the unit's rows
    n_items: np.ndarray
    submit: np.ndarray
    ready: np.ndarray
    received: np.ndarray
    occ_start: np.ndarray
    occ_end: np.ndarray
    body: np.ndarray
    cpu: np.ndarray
    runq: np.ndarray      # seconds the body waited on a run queue for a core; NaN where not measured
    deser: np.ndarray
    ser: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    is_batch: np.ndarray  # True for an hpc.map batch (its items need nothing from other tasks)
    row_unit: np.ndarray  # per row of trace.tasks: its unit's index, -1 for rows without a measured body

    def __len__(self) -> int:
        return int(self.task_id.shape[0])


def units(trace: Trace) -> Units:
    """Group the trace's rows into dispatch units (rows with no measured body are skipped)."""
    t = trace.tasks
    ok = np.isfinite(t["start"]) & np.isfinite(t["end"]) & np.isfinite(t["ready"]) & np.isfinite(t["received"])
    rows = np.flatnonzero(ok)
    batch = t["batch"][rows]
    # Rows of one map batch attempt share a key; every other row is its own unit.
    key = np.where(batch >= 0, batch, -1 - rows)
    keys = np.stack([key, t["attempt"][rows]], axis=1) if len(rows) else np.zeros((0, 2), dtype=np.int64)
    uniq, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    n = len(uniq)
    # Keep units in the order their first row was recorded (deterministic, near completion order).
    order = np.argsort(first, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    inv = rank[inv]
    first = first[order]

    def total(col: np.ndarray) -> np.ndarray:
        return np.bincount(inv, weights=col[rows], minlength=n) if n else np.zeros(0)

    def reduce(col: np.ndarray, fn: np.ufunc, init: float) -> np.ndarray:
        out = np.full(n, init)
        fn.at(out, inv, col[rows].astype(float))
        return out

    # A task that waited on tasks it submitted (its children) spent that span in their time, not
    # its own: its body is what it did itself, or the serial time would count the children twice.
    body_rows = (t["end"] - t["start"]) - child_waits(trace)
    body = total(body_rows)
    deser = total(t["deser"])
    ser = total(t["ser"])
    runq_rows = t["runq"]
    measured = np.bincount(inv, weights=np.isfinite(runq_rows[rows]).astype(float), minlength=n) if n else np.zeros(0)
    runq = np.where(measured > 0, total(np.nan_to_num(runq_rows)), np.nan)
    fr = rows[first] if n else rows[:0]
    row_unit = np.full(len(t["task_id"]), -1, dtype=np.int64)
    row_unit[rows] = inv
    return Units(
        task_id=t["task_id"][fr],
        function=t["function"][fr],
        worker=t["worker"][fr],
        status=reduce(t["status"], np.maximum, 0).astype(np.int64),
        n_items=np.bincount(inv, minlength=n).astype(np.int64) if n else np.zeros(0, dtype=np.int64),
        submit=reduce(t["submit"], np.fmin, math.inf),
        ready=reduce(t["ready"], np.fmin, math.inf),
        received=reduce(t["received"], np.fmax, -math.inf),
        occ_start=reduce(t["start"], np.fmin, math.inf) - deser,
        occ_end=reduce(t["end"], np.fmax, -math.inf) + ser,
        body=body,
        cpu=total(np.nan_to_num(t["cpu"])),
        runq=runq,
        deser=deser,
        ser=ser,
        bytes_in=total(t["bytes_in"].astype(float)),
        bytes_out=total(t["bytes_out"].astype(float)),
        is_batch=t["batch"][fr] >= 0,
        row_unit=row_unit,
    )


# -- interval arithmetic ---------------------------------------------------------------------------
def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals ``[starts[i], ends[i]]`` as sorted, disjoint ``(starts, ends)``."""
    keep = ends > starts
    s, e = np.asarray(starts, float)[keep], np.asarray(ends, float)[keep]
    if not len(s):
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # A new merged interval begins where a start lies beyond everything seen so far.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    ends_idx = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], reach[ends_idx]


def crowded(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where two or more of the intervals ``[starts[i], ends[i]]`` overlap, as merged ``(starts, ends)``.

    Intervals that only touch do not overlap (at one instant, ends count before starts).
    """
    s, e = np.asarray(starts, float), np.asarray(ends, float)
    keep = e > s
    s, e = s[keep], e[keep]
    if not s.size:
        return np.zeros(0), np.zeros(0)
    x = np.concatenate([s, e])
    step = np.concatenate([np.ones(s.size), -np.ones(e.size)])
    order = np.lexsort((step, x))
    x, level = x[order], np.cumsum(step[order])
    two = np.flatnonzero(level[:-1] >= 2)
    return merge(x[two], x[two + 1])


def measure(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length covered by the union of the intervals."""
    s, e = merge(starts, ends)
    return float((e - s).sum())


def covered(merged: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each ``[a[i], b[i]]``: how much of it lies inside the (already merged) union."""
    s, e = merged
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    if not len(s):
        return np.zeros(np.broadcast(a, b).shape)
    cum = np.concatenate([[0.0], np.cumsum(e - s)])

    def upto(x: np.ndarray) -> np.ndarray:  # covered length of (-inf, x]
        k = np.searchsorted(s, x, side="right") - 1
        kk = np.clip(k, 0, len(s) - 1)
        inside = np.clip(x - s[kk], 0.0, e[kk] - s[kk])
        return np.where(k < 0, 0.0, cum[kk] + inside)

    return np.maximum(upto(np.maximum(a, b)) - upto(a), 0.0)
