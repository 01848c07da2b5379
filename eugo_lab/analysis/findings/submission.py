"""How the driver feeds and collects tasks.

- *Submission order*: one-future ``get()``s in submission order, waiting on a slow early
  task while later results were already done.
- *Slow submission*: workers idle at the start because the driver's loop took long
  between submissions. Two causes are told apart: the driver building each input
  (fix: let tasks build their own) and the driver pickling large arguments at
  ``.remote()`` (fix: ``hpc.put`` them once); the trace times the pickling (``Trace.driver``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, plural, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import WARNING
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s
from eugo_lab.units import fmt_source as display_source

# Waiting in submission order: at least 3 one-future get()s at one line over tasks that were
# all submitted first (fewer is a setup step, not a results loop).
ORDER_MIN_GETS = 3
# Slow submission: a loop of at least 4 submissions with no wait in between, whose
# submissions are at least 2 ms apart on average: a .remote() call costs 0.1-0.5 ms on the
# local pool (ARCHITECTURE facts: ~155 us per call for a process pool), so 2 ms means the
# driver did other work in the loop (building the argument).
SLOW_SUBMIT_MIN_TASKS = 4
SLOW_SUBMIT_GAP_S = 0.002
# The loop "was pickling" when serializing its arguments took at least half of its time: then
# sending less (hpc.put) is the fix, not building inputs in the tasks. A trace without the
# driver's timing (saved before it) counts an argument of REPEAT_MIN_BYTES or more as pickling.
PICKLING_SHARE = 0.5
PICKLING_MIN_BYTES = 1_000_000
# What a bare submission costs in the replay of the fix (the upper end of the measured range).
SUBMIT_COST_S = 0.0005
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
                   f"submission order) while {plural(int(ready_later[k]), 'later result')} were already done, "
                   f"then handled them one by one ({fmt_s(float(np.median(work)))} each).")
        advice = (f"Handle results as they finish: `for f in hpc.as_completed(futures): use(hpc.get(f))` instead "
                  f"of the get() at {shown} in submission order (or hpc.wait(pending, num_returns=1) in a loop).")
        finding = Finding(Code.SUBMISSION_ORDER, "Submission order", WARNING, verdict, advice,
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
    # Every submission before the first wait is in the loop, so its pickling is all the spans up to its end.
    pickling, measured = _pickling_in(ctx, ctx.window.start, hi)
    size = float(np.median(u.bytes_in[loop]))
    ev = {"tasks": int(len(loop)), "span": span, "gap": gap, "idle_worker_time": idle, "functions": names,
          "cause": "building", "serializing": pickling}
    # (span + gap: the first task's pickling came before the first submission the span starts at)
    if (pickling >= PICKLING_SHARE * (span + gap)) if measured else size >= PICKLING_MIN_BYTES:
        ev["cause"] = "pickling"
        how = (f"{fmt_s(pickling)} of it pickling their arguments" if measured
               else f"each was sent {fmt_bytes(size, '.3g')}, which the driver pickles at .remote()")
        verdict = (f"The driver took {fmt_s(span)} to submit {len(loop)} tasks ({fmt_s(gap)} between submissions; "
                   f"{how}), so workers sat idle {fmt_s(idle)} while it did.")
        advice = (f"Send big arguments once: ref = hpc.put(data) before the loop and {fn}.remote(ref, ...) in it "
                  "(workers read it without another copy), or let each task load its own data.")
        fix = f"pickle {fn}()'s arguments once with hpc.put instead of at every .remote()"
    else:
        verdict = (f"The driver took {fmt_s(span)} to submit {len(loop)} tasks ({fmt_s(gap)} between submissions, "
                   f"where a .remote() takes under 1 ms: it was building each input in the loop), so workers sat "
                   f"idle {fmt_s(idle)} while it did.")
        advice = (f"Let each task build its own input: pass {fn}() what it needs to make it (an index, a file name, "
                  "a seed) instead of the built object. If the inputs must come from the driver, build them all first "
                  f"and submit with hpc.map({fn}, inputs).")
        fix = f"let each {fn}() task build its own input instead of the submission loop"
    finding = Finding(Code.SLOW_SUBMISSION, "Slow submission", WARNING, verdict, advice, ev, related=("Batching",))
    return [priced(ctx, finding, fixed, fix, parallel=True)]


def _pickling_in(ctx: Context, lo: float, hi: float) -> tuple[float, bool]:
    """Seconds the driver spent serializing arguments between ``lo`` and ``hi``, and whether the trace timed it.

    Submissions too short for a span of their own (``tracing.driver.SPAN_MIN_S``) are under
    a millisecond each and cannot make a loop slow; they are not counted.
    """
    trace = ctx.trace
    if not trace.meta.get("driver_short") and not len(trace.driver_spans["kind"]):
        return 0.0, False  # a trace saved before the driver's time was recorded
    if trace.meta.get("serializing_timed") is False:
        return 0.0, False  # the engine's submit was timed, its pickling not told apart (Dask)
    d = trace.driver
    sel = d["kind"] == "serializing"
    s, e = np.clip(d["start"][sel] + trace.t0, lo, hi), np.clip(d["end"][sel] + trace.t0, lo, hi)
    return float(np.clip(e - s, 0.0, None).sum()), True
