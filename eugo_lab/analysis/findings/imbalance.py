"""Work shared unevenly: stragglers, a long tail, and unbalanced partitions.

- *Straggler*: tasks far slower than their function's median.
- *Long tail*: the end of the run while at most half the workers were busy.
- *Unbalanced partitions*: input sizes and durations of one function's tasks spread together.
"""

from __future__ import annotations

import math

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.critical_path import driver_predecessors, recorded_predecessors
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, listed, priced, split_fixed, units_of
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.submission import SLOW_SUBMIT_GAP_S
from eugo_lab.analysis.report import WARNING, fmt_pct
from eugo_lab.analysis.timeline import child_waits, measure
from eugo_lab.contract.row import ERROR, OK
from eugo_lab.units import capitalized, fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s

# A straggler takes more than 3x its function's median: ordinary variation (cache, GC,
# input size noise) stays within about 2x, so 3x is clearly abnormal...
STRAGGLER_RATIO = 3.0
# ...and at least 50 ms more than the median, because on millisecond tasks a 3x blip
# (a page fault, a scheduler time slice) costs nothing worth acting on.
STRAGGLER_FLOOR_S = 0.05
# The median of fewer tasks is not a typical duration (one slow task moves it).
STRAGGLER_MIN_TASKS = 4

# A tail is the end of the run while at most half the workers are busy. Some tail is
# normal (the last wave rarely ends together), but when it is a fifth of the run or more,
# the idle workers cost more than splitting the long tasks would.
LONG_TAIL_FRACTION = 0.2
LONG_TAIL_FLOOR_S = 0.05
# Unbalanced partitions: input sizes and durations of one function's tasks both spread over
# 3x (ordinary variation stays within ~2x, as for stragglers) and move together (a rank
# correlation of 0.8: bigger input, longer task, nearly always), over at least 4 tasks.
UNBALANCED_RATIO = 3.0
UNBALANCED_CORR = 0.8
UNBALANCED_MIN_TASKS = 4


def stragglers(ctx: Context, skip: frozenset[str] = frozenset()) -> list[Finding]:
    """Tasks far slower than their function's median (see ``STRAGGLER_*``).

    Priced as the slow tasks split into median-sized pieces. Functions in ``skip`` already
    have an Unbalanced partitions finding, which names the cause (their input sizes).
    """
    t = ctx.trace.tasks
    # A parent's wait on its children is theirs; a worker's warm-up (its measured imports, the Warm-up
    # finding's) is taken off the body too: what is left of a slow first task is still its own.
    body = t["end"] - t["start"] - child_waits(ctx.trace) - ctx.warm_body
    valid = np.isfinite(body) & np.isin(t["status"], (OK, ERROR))
    last_end = float(np.nanmax(t["end"][valid])) if valid.any() else math.nan
    valid &= ~ctx.trial_rows  # a JIT trial is slower than the compiled calls by design, not a straggler
    valid &= ~ctx.per_row(ctx.beside_compile, False)  # nor a task a background compile slowed
    out = []
    slow_all = np.zeros(len(body), dtype=bool)
    meds = np.zeros(len(body))
    for f in np.unique(t["function"][valid]):
        sel = valid & (t["function"] == f)
        if sel.sum() < STRAGGLER_MIN_TASKS or ctx.fname(f) in skip:
            continue
        med = float(np.median(body[sel]))
        slow = sel & (body > STRAGGLER_RATIO * med) & (body - med >= STRAGGLER_FLOOR_S)
        slow_all |= slow
        meds[sel] = med
    if not slow_all.any():
        return out
    # Had every straggler taken its median time, the last task would have ended this much earlier.
    ends = np.where(slow_all, t["start"] + meds, t["end"])
    saved = max(last_end - float(np.nanmax(ends[valid])), 0.0)
    for f in np.unique(t["function"][slow_all]):
        sel = slow_all & (t["function"] == f)
        rows = np.flatnonzero(sel)
        rows = rows[np.lexsort((t["task_id"][rows], -body[rows]))]
        med = float(meds[rows[0]])
        name = ctx.fname(f)
        n_f = int((valid & (t["function"] == f)).sum())
        tasks = [{"task_id": int(t["task_id"][r]), "duration": float(body[r])} for r in rows]
        verdict = (f"{len(rows)} of {n_f} {name}() tasks took over {STRAGGLER_RATIO:g}x the median "
                   f"{fmt_s(med)} (slowest: task {tasks[0]['task_id']}, {fmt_s(tasks[0]['duration'])}).")
        advice = (f"Find what makes task {listed([x['task_id'] for x in tasks], 3)} different (input size, data "
                  "skew): split big inputs so every task does similar work, or submit the biggest first.")
        finding = Finding(Code.STRAGGLER, "Straggler", WARNING, verdict, advice,
                          {"function": name, "median": med, "tasks": tasks, "tail_cost": saved})
        out.append(priced(ctx, finding, split_fixed(ctx, [x["task_id"] for x in tasks], med),
                          f"split task {listed([x['task_id'] for x in tasks], 3)} of {name}() into median-sized pieces",
                          parallel=True))
    return out


def long_tail(ctx: Context) -> list[Finding]:
    """The end of the run while at most half the workers were busy (see ``LONG_TAIL_*``)."""
    u, w, win = ctx.units, ctx.workers, ctx.window
    if w < 2 or not len(u):
        return []
    s = np.clip(u.occ_start, win.start, win.end)
    e = np.clip(u.occ_end, win.start, win.end)
    times = np.concatenate([s, e])
    deltas = np.concatenate([np.ones(len(s)), -np.ones(len(e))])
    order = np.lexsort((deltas, times))  # at equal times, ends (-1) before starts (+1)
    count = np.cumsum(deltas[order])
    times = times[order]
    half = w / 2
    above = np.flatnonzero(count > half)
    if not len(above):
        return []  # never more than half busy: too few tasks, not a tail (see critical path)
    tail_start = float(times[above[-1] + 1])
    last = float(e.max())
    tail = last - tail_start
    if tail < LONG_TAIL_FRACTION * win.length or tail < LONG_TAIL_FLOOR_S:
        return []
    inside = np.clip(np.minimum(e, last) - np.maximum(s, tail_start), 0.0, None)
    busy = float(inside.sum())
    idle = w * tail - busy
    running = np.flatnonzero(inside > 0)
    running = running[np.lexsort((u.task_id[running], -inside[running]))]
    ids = [int(u.task_id[i]) for i in running]
    verdict = (f"for the last {fmt_s(tail)} ({fmt_pct(tail / win.length)} of the run) at most "
               f"{int(half)} of {w} workers were busy, finishing task {listed(ids, 3)}.")
    verdict = capitalized(verdict)
    advice = ("Make the last tasks short: split the longest tasks into pieces, or submit the longest first "
              "so they do not start last.")
    finding = Finding(Code.LONG_TAIL, "Long tail", WARNING, verdict, advice,
                      {"tail": tail, "fraction": tail / win.length, "idle_worker_time": idle, "tasks": ids})
    # Two fixes, priced both ways; the finding names the one that saves more.
    idx = units_of(ctx, ids)
    fn = u.function[idx] if idx else np.zeros(0, dtype=np.int64)
    typical = float(np.median(u.occ_end[np.isin(u.function, fn)] - u.occ_start[np.isin(u.function, fn)])) \
        if idx else 0.0
    split = split_fixed(ctx, ids, typical if typical > 0 else tail / 2)
    group = np.flatnonzero(np.isin(u.function, fn))
    movable = _could_come_first(ctx, idx, group)
    early = whatif.first(ctx.replay, movable, group) if movable else ctx.replay
    a, b = ctx.predict(split), ctx.predict(early)
    if b.saves > a.saves:
        ids = [int(u.task_id[i]) for i in movable]
        return [priced(ctx, finding, early, f"submit task {listed(ids, 3)} first", parallel=True)]
    return [priced(ctx, finding, split, f"split task {listed(ids, 3)} into smaller pieces", parallel=True)]


def _rank(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    return r


def unbalanced(ctx: Context) -> list[Finding]:
    """A function's input sizes and task durations spread together (see ``UNBALANCED_*``).

    Priced as equal partitions: the same number of tasks, each with an equal share of the
    function's total work.
    """
    u, out = ctx.units, []
    for f in np.unique(u.function):
        sel = np.flatnonzero((u.function == f) & (u.n_items == 1))
        if len(sel) < UNBALANCED_MIN_TASKS:
            continue
        size, body = u.bytes_in[sel], u.body[sel]
        if size.min() <= 0 or body.min() <= 0:
            continue
        if size.max() / size.min() < UNBALANCED_RATIO or body.max() / body.min() < UNBALANCED_RATIO:
            continue
        rs, rb = _rank(size), _rank(body)
        corr = float(np.corrcoef(rs, rb)[0, 1]) if rs.std() > 0 and rb.std() > 0 else 0.0
        if corr < UNBALANCED_CORR:
            continue
        name = ctx.fname(f)
        big = sel[np.lexsort((u.task_id[sel], -body))][:3]
        verdict = (f"{name}() inputs range from {fmt_bytes(float(size.min()), '.3g')} to "
                   f"{fmt_bytes(float(size.max()), '.3g')} "
                   f"and its tasks from {fmt_s(float(body.min()))} to {fmt_s(float(body.max()))}, in step (bigger "
                   f"input, longer task; rank correlation {corr:.2f}): the partitions are unequal.")
        advice = (f"Split the data into equal partitions (for a DataFrame, equal row counts: np.array_split(df, n)), "
                  f"a few per worker, so every {name}() task does about the same work "
                  f"(largest now: task {listed([int(t) for t in u.task_id[big]], 3)}).")
        fixed = whatif.equalized(ctx.replay, sel)
        finding = Finding(Code.UNBALANCED_PARTITIONS, "Unbalanced partitions", WARNING, verdict, advice,
                          {"function": name, "bytes_min": int(size.min()), "bytes_max": int(size.max()),
                           "duration_min": float(body.min()), "duration_max": float(body.max()),
                           "correlation": corr, "tasks": int(len(sel))}, related=("Partition",))
        out.append(priced(ctx, finding, fixed, f"split {name}()'s input into equal partitions", parallel=True))
    return out


def _could_come_first(ctx: Context, idx: list[int], group: np.ndarray) -> list[int]:
    """The units of ``idx`` the driver could have submitted at the start of ``group``'s submissions.

    A task can move to the front only if its input existed then: between the group's first
    submission and its own, the driver only submitted (``SLOW_SUBMIT_GAP_S`` per submission:
    a ``.remote()`` costs well under that) or waited in a recorded get()/wait(). Time spent
    otherwise was the driver's own work, building inputs in order (a submission loop that
    makes each argument), and a task whose value came through the driver (``Trace.driver_deps``)
    or from another task's future needs that task first.
    """
    u, b = ctx.units, ctx.trace.blocks
    if not idx or not len(group):
        return []
    t0 = float(u.submit[group].min())
    subs = np.sort(u.submit[group])
    needs = driver_predecessors(ctx.trace, u)
    data = recorded_predecessors(ctx.trace, u)
    out = []
    for i in idx:
        t = float(u.submit[i])
        if i in needs or i in data:
            continue
        waited = measure(np.clip(b["start"], t0, t), np.clip(b["end"], t0, t)) if len(b["start"]) else 0.0
        n = int(np.searchsorted(subs, t, side="right"))  # submissions up to this one, itself included
        if (t - t0) - waited <= n * SLOW_SUBMIT_GAP_S:
            out.append(i)
    return out
