"""What if the mistake were fixed: the trace's replay with one change, and the time that saves.

Every finding's ``saves`` comes from here. Each function below takes the simulator's
:class:`~eugo_lab.analysis.simulate.Replay` of a trace and returns a copy with one mistake
removed (the serialized tasks submitted together, the long task split, the tiny tasks
batched...). :func:`predict` replays both on the same worker count, so the saving compares
like with like: the model's own error on the run as it was cancels out, and the learner
is told ``measured wall - saving`` as the wall time after the fix.

Unit indices are those of :func:`eugo_lab.analysis.timeline.units` (the replay keeps
that order); times are seconds from the window's start, as in the replay.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.simulate import Replay, replay
from eugo_lab.analysis.timeline import merge


@dataclass(frozen=True)
class Prediction:
    """The replay of a run as it was (``before``) and with a fix (``after``), on ``workers`` workers."""

    workers: int
    before: float
    after: float

    @property
    def saves(self) -> float:
        """Seconds the fix is predicted to save (never negative: a fix that would not help saves 0)."""
        return max(self.before - self.after, 0.0)


def predict(r: Replay, fixed: Replay, workers: int) -> Prediction:
    """Replay ``r`` and ``fixed`` on ``workers`` workers."""
    return Prediction(workers, _as_written(r, workers), replay(fixed, workers))


# The run as written is the same for every finding an analysis prices: replay it once per
# worker count (a replay of 20,000 tiny tasks takes tens of milliseconds). Held weakly, so
# the cache never keeps a trace's arrays alive; a Replay is frozen, so the value stays right.
_written: tuple[weakref.ref[Replay], dict[int, float]] | None = None


def _as_written(r: Replay, workers: int) -> float:
    global _written
    memo = _written  # one read: another thread may replace it meanwhile
    if memo is None or memo[0]() is not r:
        memo = _written = (weakref.ref(r), {})
    t = memo[1].get(workers)
    if t is None:
        t = memo[1][workers] = replay(r, workers)
    return t


def _gates(r: Replay) -> np.ndarray:
    return np.ones(len(r), dtype=bool) if r.gates is None else r.gates.copy()


def without_waits(r: Replay, starts: np.ndarray, ends: np.ndarray, ungate: np.ndarray) -> Replay:
    """The driver never waited in the spans ``starts..ends``, and nobody waits on the units ``ungate``.

    The spans are cut out of the driver's time line (every later ready and received time
    moves earlier by the waiting cut before it; order is kept, so real dependencies stay),
    and the units the waits were for stop gating later units: their results are collected
    at the end, as with one ``get()`` after the loop.
    """
    s, e = merge(np.asarray(starts, float), np.asarray(ends, float))
    cum = np.concatenate([[0.0], np.cumsum(e - s)])

    def cut(x: np.ndarray) -> np.ndarray:  # waiting time before x
        k = np.searchsorted(s, x, side="right") - 1
        kk = np.clip(k, 0, max(len(s) - 1, 0))
        if not len(s):
            return np.zeros_like(x)
        inside = np.clip(x - s[kk], 0.0, e[kk] - s[kk])
        return np.where(k < 0, 0.0, cum[kk] + inside)

    gates = _gates(r)
    gates[np.asarray(ungate, dtype=np.int64)] = False
    return dataclasses.replace(r, ready=r.ready - cut(r.ready), received=r.received - cut(r.received), gates=gates)


def _append(r: Replay, keep: np.ndarray, **new: np.ndarray) -> Replay:
    """The units ``keep`` of ``r`` plus new units given as arrays (ready, occupancy, pre, post, received, gates).

    New units are not held up at dispatch (``stall`` 0) unless ``stall`` is given.
    """
    gates = _gates(r)
    cols = {"ready": r.ready, "occupancy": r.occupancy, "pre": r.pre, "post": r.post, "received": r.received,
            "gates": gates}
    if r.started is not None:
        cols["started"] = r.started
    if r.stall is not None:
        cols["stall"] = r.stall
        new.setdefault("stall", np.zeros(len(new["ready"])))
    out = {k: np.concatenate([v[keep], np.asarray(new[k], dtype=v.dtype)]) for k, v in cols.items()}
    return dataclasses.replace(r, **out)


def _started(r: Replay, rows: np.ndarray, firsts: np.ndarray | None = None) -> np.ndarray:
    """Measured dispatch order for new units made of the units ``rows``; zeros without it.

    Without ``firsts`` each new unit is one row's piece (its row's start); with it, new unit
    ``k`` is made of ``rows[firsts[k]:firsts[k + 1]]`` (their earliest start).
    """
    n = len(rows) if firsts is None else len(firsts)
    if r.started is None or not n:
        return np.zeros(n)
    s = r.started[rows]
    return s if firsts is None else np.minimum.reduceat(s, firsts)


def split(r: Replay, idx: list[int], pieces: list[int]) -> Replay:
    """Unit ``idx[k]`` split into ``pieces[k]`` equal parts that are ready together and can run side by side."""
    keep = np.ones(len(r), dtype=bool)
    keep[idx] = False
    rep = np.repeat(np.asarray(idx, dtype=np.int64), pieces)
    per = np.repeat(np.asarray(pieces, dtype=float), pieces)
    return _append(r, keep, ready=r.ready[rep], occupancy=r.occupancy[rep] / per, pre=r.pre[rep], post=r.post[rep],
                   received=r.received[rep], gates=_gates(r)[rep], started=_started(r, rep),
                   **({} if r.stall is None else {"stall": r.stall[rep]}))


def first(r: Replay, idx: list[int], group: np.ndarray) -> Replay:
    """Units ``idx`` submitted first among ``group`` (longest first): ready at the group's earliest ready time."""
    ready = r.ready.copy()
    t = float(r.ready[group].min())
    ranked = sorted(idx, key=lambda i: -float(r.occupancy[i]))
    for k, i in enumerate(ranked):
        ready[i] = t - (len(ranked) - k) * 1e-7  # ahead of the group, in that order
    return dataclasses.replace(r, ready=ready)


def batched(r: Replay, idx: np.ndarray, size: int, body: np.ndarray, submit_cost: float, driver_gap: float,
            per_item: float = 0.0) -> Replay:
    """Units ``idx`` sent as batches of ``size``: one dispatch per batch.

    A batch is ready when its last item would be. A loop that only submitted (median gap
    between submissions under ``driver_gap``) becomes one ``hpc.map`` call: every batch is
    ready at once. Otherwise the driver still produces the items at the measured pace,
    less ``submit_cost`` per item (the ``.remote()`` call that batching no longer makes).
    A batch occupies its worker for its items' bodies (``body``, per unit of ``idx``) plus
    one unit's fixed cost (the group's median occupancy beyond the body: unpickling,
    pickling, bookkeeping), pays the median dispatch and return latency once, and gates
    nothing (hpc.map items are independent). ``per_item``: the driver's cost per item of
    setting up the map (its futures), paid before the first batch is sent.
    """
    idx = np.asarray(idx, dtype=np.int64)
    o = np.argsort(r.ready[idx], kind="stable")
    idx, body = idx[o], np.asarray(body, float)[o]
    keep = np.ones(len(r), dtype=bool)
    keep[idx] = False
    gaps = np.diff(r.ready[idx])
    if len(gaps) and float(np.median(gaps)) < driver_gap:
        gaps = np.zeros_like(gaps)
    ready = float(r.ready[idx[0]]) + np.concatenate([[0.0], np.cumsum(np.maximum(gaps - submit_cost, 0.0))])
    ready = ready + per_item * len(idx)  # the map's own futures, made before the first batch goes
    firsts = np.arange(0, len(idx), size)  # batch k is idx[firsts[k]:firsts[k + 1]]
    n_batches = len(firsts)
    fixed = float(np.median(np.maximum(r.occupancy[idx] - body, 0.0)))
    pre, post = float(np.median(r.pre[idx])), float(np.median(r.post[idx]))
    out = _append(r, keep, ready=np.maximum.reduceat(ready, firsts),
                  occupancy=np.add.reduceat(body, firsts) + fixed,
                  pre=np.full(n_batches, pre), post=np.full(n_batches, post),
                  received=np.maximum.reduceat(r.received[idx], firsts), gates=np.zeros(n_batches, dtype=bool),
                  started=_started(r, idx, firsts))
    # What the driver did after its last submission and after the last result (get() decoding
    # one result per future) shrinks with the number of units: a batch's results come back as
    # one list, joined at C speed. Kept whole, 100,000 tiny results' decoding (~30 ms) was
    # predicted for 4 batches too, three times what the fixed run took in all.
    share = (int(keep.sum()) + n_batches) / len(r)
    return dataclasses.replace(out, after_results=r.after_results * share, after_submit=r.after_submit * share)


def sent_once(r: Replay, idx: np.ndarray, driver: np.ndarray, unpickle: np.ndarray, keep: int, pre: float,
              post: float, put: float = 0.0) -> Replay:
    """Units ``idx`` get their big argument by reference (``hpc.put``) instead of by value.

    Per unit (any order; sorted by ready time here): ``driver`` the seconds the driver spent
    pickling its copy at ``.remote()``, which later submissions no longer wait for;
    ``unpickle`` the seconds its worker spent unpickling it. The first ``keep`` units (one
    per worker) still load the object once, at the median unpickling; the others skip that. Dispatch and return
    latencies fall to at most ``pre``/``post``: no copy travels through the pipe, and the
    driver, no longer pickling, picks results up promptly. The units' dispatch hold-ups
    (``Replay.stall``: the dispatch thread starved while the driver pickled the next copy)
    go with the pickling. ``put``: the driver's seconds storing the one copy (the put itself), before the
    first of the units: every unit from then on is ready that much later.
    """
    idx = np.asarray(idx, dtype=np.int64)
    o = np.argsort(r.ready[idx], kind="stable")
    idx, driver, unpickle = idx[o], np.asarray(driver, float)[o], np.asarray(unpickle, float)[o]
    occ, pre_, post_ = r.occupancy.copy(), r.pre.copy(), r.post.copy()
    occ[idx[keep:]] = np.maximum(occ[idx[keep:]] - unpickle[keep:], 0.0)
    # The first copies were unpickled while the driver pickled the next ones on the same
    # cores (measured on 2 cores: 45-50 ms against 18-25 ms for the later copies); with put
    # the driver is idle by then, so each worker's one load costs a typical unpickle.
    if keep and len(idx):
        occ[idx[:keep]] = np.maximum(occ[idx[:keep]] - unpickle[:keep] + float(np.median(unpickle)), 0.0)
    pre_[idx] = np.minimum(pre_[idx], pre)
    post_[idx] = np.minimum(post_[idx], post)
    stall = None
    if r.stall is not None:
        stall = r.stall.copy()
        stall[idx] = 0.0
    # Driver side: every unit ready after the k-th copy comes earlier by what copies 0..k cost.
    saved = np.cumsum(driver)
    order = np.argsort(r.ready, kind="stable")
    pos = np.searchsorted(r.ready[idx], r.ready[order], side="right") - 1
    shift = np.zeros(len(r))
    shift[order] = np.where(pos >= 0, saved[np.clip(pos, 0, None)] - put, 0.0)
    # The gap between a worker's back-to-back units was measured while every dispatch carried
    # a copy: when most units did, it falls to the bare dispatch latency too.
    turn = min(r.turnaround, pre) if 2 * len(idx) >= len(r) else r.turnaround
    return dataclasses.replace(r, occupancy=occ, pre=pre_, post=post_, ready=r.ready - shift,
                               received=r.received - shift, turnaround=turn, stall=stall)


def shorter(r: Replay, idx: np.ndarray, seconds: np.ndarray) -> Replay:
    """Units ``idx`` occupy their worker ``seconds`` less each (a phase overlapped, a wait removed)."""
    occ = r.occupancy.copy()
    idx = np.asarray(idx, dtype=np.int64)
    occ[idx] = np.maximum(occ[idx] - np.asarray(seconds, float), 0.0)
    return dataclasses.replace(r, occupancy=occ)


def scaled(r: Replay, idx: np.ndarray, factor: float) -> Replay:
    """Units ``idx`` occupy their worker ``factor`` times as long (``1 / slowdown``: as fast as alone)."""
    occ = r.occupancy.copy()
    idx = np.asarray(idx, dtype=np.int64)
    occ[idx] = occ[idx] * factor
    return dataclasses.replace(r, occupancy=occ)


def equalized(r: Replay, idx: np.ndarray) -> Replay:
    """Units ``idx`` given equal shares of their summed occupancy (equal partitions of the same input)."""
    occ = r.occupancy.copy()
    idx = np.asarray(idx, dtype=np.int64)
    occ[idx] = float(r.occupancy[idx].mean())
    return dataclasses.replace(r, occupancy=occ)


def fed_fast(r: Replay, idx: np.ndarray, gap: float) -> Replay:
    """Units ``idx`` (one submission loop) submitted ``gap`` apart, each building its own input in the task.

    The driver's time between two submissions beyond ``gap`` (building the argument) moves
    into the task that needed it, so the work is the same, only no longer serial. The first
    task's input was built before its submission, where no earlier submission bounds it: taken
    as the loop's median build (at most the time from the run's start to that submission), it
    moves into the first task too, and the loop starts that much earlier. Left on the driver,
    it priced a loop of 12 inputs built 0.1 s each 13% short of what the fix saved.
    """
    idx = np.asarray(idx, dtype=np.int64)
    idx = idx[np.argsort(r.ready[idx], kind="stable")]
    ready, occ = r.ready.copy(), r.occupancy.copy()
    builds = np.maximum(np.diff(r.ready[idx]) - gap, 0.0)
    first = min(float(np.median(builds)) if len(builds) else 0.0, max(float(r.ready[idx[0]]), 0.0))
    t0 = float(r.ready[idx[0]]) - first
    build = np.concatenate([[first], builds])
    ready[idx] = t0 + gap * np.arange(len(idx))
    occ[idx] = occ[idx] + build
    # The loop ends sooner: later driver work (and the final wait) comes that much earlier.
    moved = float(r.ready[idx[-1]] - ready[idx[-1]])
    rest = np.ones(len(r), dtype=bool)
    rest[idx] = False
    late = rest & (r.ready > r.ready[idx[-1]])
    ready[late] -= moved
    gates = _gates(r)
    gates[idx] = False  # the loop's tasks were independent (nothing was waited on between submissions)
    return dataclasses.replace(r, ready=ready, occupancy=occ, gates=gates)


def returned_small(r: Replay, idx: np.ndarray, pickling: np.ndarray, transfer: np.ndarray) -> Replay:
    """Units ``idx`` return a summary instead of their large result.

    Per unit: its worker no longer spends ``pickling`` seconds pickling the result, and the
    result arrives ``transfer`` seconds sooner (no longer moved back to the driver).
    """
    idx = np.asarray(idx, dtype=np.int64)
    occ, post = r.occupancy.copy(), r.post.copy()
    occ[idx] = np.maximum(occ[idx] - np.asarray(pickling, float), 0.0)
    post[idx] = np.maximum(post[idx] - np.asarray(transfer, float), 0.0)
    return dataclasses.replace(r, occupancy=occ, post=post)


def pieces_for(occupancy: float, target: float) -> int:
    """How many pieces split ``occupancy`` seconds into parts of about ``target`` (at least 2)."""
    return max(2, int(math.ceil(occupancy / max(target, 1e-9))))


__all__ = ["Prediction", "predict", "without_waits", "split", "first", "batched", "sent_once", "shorter", "scaled",
           "equalized", "fed_fast", "returned_small", "pieces_for"]
