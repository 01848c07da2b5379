"""Detectors for how the driver feeds and collects tasks, and for how evenly the work is shared.

- *Submission order*: one-future ``get()``s in submission order, waiting on a slow early
  task while later results were already done.
- *Slow submission*: workers idle at the start because the driver's loop took long
  between submissions.
- *Contention*: a function's tasks ran slower side by side than alone, or waited on the
  run queue for a core (the trace's ``runq``) a large share of their time.
- *Unbalanced partitions*: input sizes and durations of one function's tasks spread together.

Thresholds live at the top of :mod:`eugo_lab.analysis.findings` with the reasons for their values.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings import (
    CONTENTION_MIN,
    CONTENTION_MIN_S,
    CONTENTION_MIN_TASKS,
    ORDER_MIN_GETS,
    RUNQ_CONTENTION,
    RUNQ_CONTENTION_MIN_S,
    RUNQ_MENTION,
    SLOW_SUBMIT_GAP_S,
    SLOW_SUBMIT_MIN_TASKS,
    SPEEDUP_GAP,
    SUBMIT_COST_S,
    UNBALANCED_CORR,
    UNBALANCED_MIN_TASKS,
    UNBALANCED_RATIO,
    Context,
    _ids,
    _plural,
    priced,
    side_by_side,
)
from eugo_lab.analysis.report import WARNING, Finding, fmt_pct, fmt_x
from eugo_lab.analysis.timeline import Units, units
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s
from eugo_lab.units import fmt_source as display_source

# Timestamps of one driver this close are "the same moment" (clock reads around a call).
_EPS = 1e-6


def _driver_finish(arrive: np.ndarray, work: np.ndarray, start: float) -> float:
    """When a driver that handles results one at a time, in the given order, is done.

    Result ``k`` can be handled once it arrived and the previous one is handled; handling
    takes ``work[k]`` seconds of the driver's own time.
    """
    t = start
    for a, w in zip(arrive.tolist(), work.tolist()):
        t = max(t, a) + w
    return t


def submission_order(ctx: Context) -> list[Finding]:
    """Waiting in submission order (see ``ORDER_MIN_GETS``; priced by replaying the driver's loop).

    The loop ``for f in futures: use(hpc.get(f))`` over tasks all submitted before it: the
    k-th one-future get() at that line waits for the k-th task. Its price is the driver's
    loop replayed in completion order (``hpc.as_completed``): each result's handling (the
    driver's time between two gets) starts as soon as that result and the previous handling
    are done, instead of after every earlier task.
    """
    u, trace = ctx.units, ctx.trace
    b = trace.blocks
    if len(u) < ORDER_MIN_GETS or not len(b["kind"]):
        return []
    kinds = np.array(trace.block_kinds, dtype=object)[b["kind"]]
    one = np.flatnonzero(np.isin(kinds, ("get", "await")) & (b["futures"] == 1))
    out = []
    for src in np.unique(b["source"][one]):
        gets = one[b["source"][one] == src]
        gets = gets[np.argsort(b["start"][gets], kind="stable")]
        first = float(b["start"][gets[0]])
        before = np.flatnonzero(u.submit <= first + _EPS)
        before = before[np.argsort(u.submit[before], kind="stable")]
        m = len(gets)
        if m < ORDER_MIN_GETS or len(before) < m:
            continue
        tasks = before[:m]
        s, e = b["start"][gets], b["end"][gets]
        arrive = u.received[tasks]
        if np.any(e + _EPS < arrive):
            continue  # a get() returned before "its" task's result: the loop is not over these tasks in order
        work = np.empty(m)
        work[:-1] = np.maximum(s[1:] - e[:-1], 0.0)
        work[-1] = float(np.median(work[:-1]))
        in_order = _driver_finish(arrive, work, first)
        by_done = np.argsort(arrive, kind="stable")
        as_done = _driver_finish(arrive[by_done], work[by_done], first)
        saves = max(in_order - as_done, 0.0)
        if not ctx.worth_flagging(saves):
            continue
        # The worst wait: the get() that waited longest while later results were already in.
        ready_later = np.array([int(np.sum(arrive[k + 1:] <= s[k] + (e[k] - s[k]))) for k in range(m)])
        waits = np.where(ready_later > 0, e - s, 0.0)
        k = int(np.argmax(waits))
        shown = display_source(trace.sources[int(src)])
        tid = int(u.task_id[tasks[k]])
        verdict = (f"The driver waited {fmt_s(float(waits[k]))} at {shown} for task {tid} (number {k + 1} in "
                   f"submission order) while {_plural(int(ready_later[k]), 'later result')} were already done, "
                   f"then handled them one by one ({fmt_s(float(np.median(work)))} each).")
        advice = (f"Handle results as they finish: `for f in hpc.as_completed(futures): use(hpc.get(f))` instead "
                  f"of the get() at {shown} in submission order (or hpc.wait(pending, num_returns=1) in a loop).")
        finding = Finding("submission-order", "Submission order", WARNING, verdict, advice,
                          {"source": trace.sources[int(src)], "gets": m, "task_id": tid,
                           "waited": float(waits[k]), "done_meanwhile": int(ready_later[k]),
                           "handling": float(np.median(work)), "in_order_finish": in_order - ctx.window.start,
                           "as_completed_finish": as_done - ctx.window.start},
                          related=("get()",))
        out.append(dataclasses.replace(finding, saves=saves, wall_after=max(ctx.wall - saves, 0.0),
                                       fix=f"handle results with hpc.as_completed instead of the get() at {shown}"))
    return out


def slow_submission(ctx: Context) -> list[Finding]:
    """Workers idle at the start because the driver submitted slowly (see ``SLOW_SUBMIT_*``).

    The loop is the tasks submitted before the driver's first wait (a loop with a get() in
    it is the Blocking finding's case). Priced as each task building its own input: the
    driver's time between submissions beyond a bare ``.remote()`` moves into the task.
    """
    u, b = ctx.units, ctx.trace.blocks
    first_wait = float(b["start"].min()) if len(b["start"]) else np.inf
    loop = np.flatnonzero((u.ready <= first_wait + _EPS) & ~u.is_batch)
    if len(loop) < SLOW_SUBMIT_MIN_TASKS:
        return []
    loop = loop[np.argsort(u.ready[loop], kind="stable")]
    gaps = np.diff(u.ready[loop])
    gap = float(np.mean(gaps))
    if gap < SLOW_SUBMIT_GAP_S:
        return []
    span = float(u.ready[loop[-1]] - u.ready[loop[0]])
    # Worker time with nothing to do while the loop was still submitting.
    lo, hi = float(u.ready[loop[0]]), float(u.ready[loop[-1]])
    busy = float(np.clip(np.minimum(u.occ_end, hi) - np.maximum(u.occ_start, lo), 0.0, None).sum())
    idle = max(ctx.workers * span - busy, 0.0)
    fixed = whatif.fed_fast(ctx.replay, loop, min(float(gaps.min()), SUBMIT_COST_S))
    pred = ctx.predict(fixed, parallel=True)
    if not ctx.worth_flagging(pred.saves):
        return []
    names = sorted({ctx.fname(f) for f in u.function[loop]})
    fn = names[0]
    verdict = (f"The driver took {fmt_s(span)} to submit {len(loop)} tasks ({fmt_s(gap)} between submissions, "
               f"where a .remote() takes under 1 ms: it was building each input in the loop), so workers sat idle "
               f"{fmt_s(idle)} while it did.")
    advice = (f"Let each task build its own input: pass {fn}() what it needs to make it (an index, a file name, a "
              "seed) instead of the built object. If the inputs must come from the driver, build them all first and "
              f"submit with hpc.map({fn}, inputs).")
    finding = Finding("slow-submission", "Slow submission", WARNING, verdict, advice,
                      {"tasks": int(len(loop)), "span": span, "gap": gap, "idle_worker_time": idle,
                       "functions": names}, related=("Batching",))
    return [priced(ctx, finding, fixed, f"let each {fn}() task build its own input instead of the submission loop",
                   parallel=True)]


def _cause(ctx: Context, cpu_ratio: float, starved: bool = False) -> str:
    cores = int(ctx.trace.meta.get("cores", 0) or 0)
    if cpu_ratio >= 1.5:
        return (f"each task used about {cpu_ratio:.1f} cores: threaded code (BLAS) in every worker oversubscribes "
                "the cores; limit it to one thread per worker (threadpoolctl, OMP_NUM_THREADS=1)")
    if cores and ctx.workers > cores:
        return f"{ctx.workers} workers share {cores} cores; use at most {cores} workers for CPU-bound work"
    if starved:
        return ("other programs kept this machine's cores busy (the notebook itself, other notebooks, other users "
                "of a shared machine): the tasks are compute-bound, and cores of their own (a quieter machine, "
                "a cluster) would run them that much faster; more workers would only queue for the same cores")
    return ("the workers share cores (the driver and Jupyter compete too), caches and memory bandwidth: "
            "expect it on a laptop or a small VM; on a cluster each worker has its own core")


def _runq_ratio(u: Units, idx: np.ndarray) -> tuple[float, float, int]:
    """Run-queue seconds, their share of the body time, and the unit count, over the measured units of ``idx``."""
    idx = idx[np.isfinite(u.runq[idx])]
    body = float(u.body[idx].sum())
    waited = float(u.runq[idx].sum())
    return waited, (waited / body if body > 0 else 0.0), int(len(idx))


def contention(ctx: Context) -> list[Finding]:
    """Tasks slower side by side than alone (see ``CONTENTION_*``), or waiting for a core (``RUNQ_*``).

    With a baseline (the same work on 1 worker: ``%%eugo --compare``/``--scaling``), each
    function's median body is compared with the baseline's; without one, with the tasks of
    the same function that ran alone in this trace. Priced as the side-by-side tasks
    running at their alone speed. With a baseline the verdict also reconciles the measured
    speedup with the task-time estimate when they differ by more than ``SPEEDUP_GAP``.

    Where neither comparison shows it, the run queue can: bodies that waited for a core
    ``RUNQ_CONTENTION`` of their time or more (cores busy with more workers than cores, or
    with other programs) are priced as running without that wait.
    """
    u, out = ctx.units, []
    base = ctx.baseline
    bu = units(base) if base is not None else None
    est = ctx.serial_time / ctx.wall if ctx.wall > 0 else 0.0
    measured = base.wall_time / ctx.wall if base is not None and ctx.wall > 0 else None
    for f in np.unique(u.function):
        name = ctx.fname(f)
        sel = np.flatnonzero((u.function == f) & (u.n_items == 1))
        found = _slower_together(ctx, int(f), name, sel, bu, est, measured)
        if found is None:
            found = _waited_for_cores(ctx, name, np.flatnonzero(u.function == f))
        if found is not None:
            out.append(found)
    return out


def _slower_together(ctx: Context, f: int, name: str, sel: np.ndarray, bu: Units | None, est: float,
                     measured: float | None) -> Finding | None:
    """The Contention finding from durations: side by side against alone (or the 1-worker baseline)."""
    u, base = ctx.units, ctx.baseline
    if bu is not None and base is not None and name in base.functions:
        bsel = (bu.function == base.functions.index(name)) & (bu.n_items == 1)
        if bsel.sum() < 2 or len(sel) < 2 or ctx.workers < 2:
            return None
        alone, together = float(np.median(bu.body[bsel])), float(np.median(u.body[sel]))
        side = ctx.overlap[sel] > 0.5
        idx = sel[side] if side.any() else sel
        where = "in the 1-worker run"
    else:
        slow = side_by_side(ctx, f)
        if slow is None:
            return None
        alone, together, idx = slow["alone"], slow["together"], slow["units"]
        where = "when they ran alone in this run"
    if alone <= 0 or together / alone - 1 < CONTENTION_MIN or together - alone < CONTENTION_MIN_S:
        return None
    slowdown = together / alone - 1
    cpu = float(u.cpu[idx].sum() / u.body[idx].sum()) if u.body[idx].sum() > 0 else 0.0
    _, starved, _ = _runq_ratio(u, idx)
    verdict = (f"{name}() tasks ran {fmt_pct(slowdown)} slower side by side (median {fmt_s(together)}) than "
               f"{where} ({fmt_s(alone)}).")
    if starved >= RUNQ_MENTION:
        verdict += f" Side by side they waited for a core {fmt_pct(starved)} of the time."
    if measured is not None and est > 0 and abs(est - measured) > SPEEDUP_GAP * measured:
        verdict += (f" That is why the measured speedup, {fmt_x(measured)}, is below the task-time estimate, "
                    f"{fmt_x(est)}: the estimate assumes tasks take as long side by side as alone.")
    advice = f"Likely cause: {_cause(ctx, cpu)}."
    finding = Finding("contention", "Contention", WARNING, verdict, advice,
                      {"function": name, "alone": alone, "together": together, "slowdown": slowdown,
                       "baseline": base is not None, "cpu_ratio": cpu, "runq_ratio": starved,
                       "estimated_speedup": est, "measured_speedup": measured})
    fixed = whatif.scaled(ctx.replay, idx, 1.0 / (1.0 + slowdown))
    return priced(ctx, finding, fixed, f"stop {name}()'s tasks competing for the cores")


def _waited_for_cores(ctx: Context, name: str, idx: np.ndarray) -> Finding | None:
    """The Contention finding from the run queue: bodies ready to compute that waited for a busy core."""
    u = ctx.units
    waited, starved, n = _runq_ratio(u, idx)
    if n < CONTENTION_MIN_TASKS or waited < RUNQ_CONTENTION_MIN_S or starved < RUNQ_CONTENTION:
        return None
    measured = idx[np.isfinite(u.runq[idx])]
    body = float(u.body[measured].sum())
    cpu = float(u.cpu[measured].sum()) / body if body > 0 else 0.0
    verdict = (f"{name}() tasks waited for a core {fmt_pct(starved)} of the time ({fmt_s(waited)} over "
               f"{_plural(n, 'task')}; they computed {fmt_pct(cpu)}): ready to run, but every core was busy.")
    advice = f"Likely cause: {_cause(ctx, cpu, starved=True)}."
    finding = Finding("contention", "Contention", WARNING, verdict, advice,
                      {"function": name, "runq": waited, "runq_ratio": starved, "cpu_ratio": cpu, "tasks": n,
                       "baseline": ctx.baseline is not None})
    fixed = whatif.shorter(ctx.replay, measured, u.runq[measured])
    return priced(ctx, finding, fixed, f"give {name}()'s tasks cores of their own (no waiting for a core)")


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
                  f"(largest now: task {_ids([int(t) for t in u.task_id[big]], 3)}).")
        fixed = whatif.equalized(ctx.replay, sel)
        finding = Finding("unbalanced-partitions", "Unbalanced partitions", WARNING, verdict, advice,
                          {"function": name, "bytes_min": int(size.min()), "bytes_max": int(size.max()),
                           "duration_min": float(body.min()), "duration_max": float(body.max()),
                           "correlation": corr, "tasks": int(len(sel))}, related=("Partition",))
        out.append(priced(ctx, finding, fixed, f"split {name}()'s input into equal partitions", parallel=True))
    return out


__all__ = ["submission_order", "slow_submission", "contention", "unbalanced"]
