"""Detectors: each looks at one pattern in a trace and returns zero or more :class:`Finding`.

Thresholds are module constants with the reason for their value next to them, so a
course can quote them and a test can pin them; they are all here, also those of the
detectors in :mod:`findings_tasks` (overhead, waiting, pickling) and :mod:`findings_more`
(feeding and collecting tasks, balance). Every mistake is priced by :func:`priced`: the
trace replayed with the fix (:mod:`eugo_lab.analysis.whatif`). This module holds the
shared :class:`Context`, the speedup, Blocking, tail and critical-path detectors.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis import contention, whatif
from eugo_lab.analysis.breakdown import Breakdown
from eugo_lab.analysis.critical_path import CriticalPath
from eugo_lab.analysis.report import INFO, PROBLEM, WARNING, Finding, fmt_pct, fmt_x
from eugo_lab.analysis.simulate import Replay, replay
from eugo_lab.analysis.timeline import Units, Window, measure
from eugo_lab.tracing.row import ERROR, OK
from eugo_lab.tracing.trace import Trace
from eugo_lab.units import fmt_seconds as fmt_s
from eugo_lab.units import fmt_source as display_source

# -- thresholds -------------------------------------------------------------------------------------
# Efficiency at or above 70% is good for a process pool: what is left is usually the
# unavoidable ramp-up and the last wave of tasks. Below 35% most of the workers' time is
# lost, which deserves the strongest flag.
GOOD_EFFICIENCY = 0.7
POOR_EFFICIENCY = 0.35

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

# Blocking too early: a handful of one-future get()s is normal (a setup step); we flag it
# when at least 3 consecutive task pairs were submitted only after the previous task's get()
# returned, and submitting them together is predicted to save at least MIN_SAVES of the run
# (by its cost, not its share of the tasks: 6 serialized of 20 can cost a third of the run).
BLOCKING_MIN_PAIRS = 3

# -- what a fix is worth ------------------------------------------------------------------------------
# A mistake found by its cost is flagged when its fix is predicted to save at least 5% of the
# run: this VM's speed drifts by up to ~25% minute to minute, but a replay compares the
# same trace with and without the fix, so 5% is real time, not noise...
MIN_SAVES = 0.05
# ...and at least 10 ms: a saving below that is not something a learner could measure.
MIN_SAVES_S = 0.01
# Found by their own rules (a straggler, an I/O-bound phase) but worth under 3% of the run
# if fixed: shown as a note, so the list leads with what pays.
NOTE_SHARE = 0.03
# The speedup headline only says "scaling is good" when no fix would save a tenth of the run.
GOOD_ENOUGH_SAVES = 0.1
# Honest on 1 core (Binder): findings that need parallelism say what this worker count
# would do instead, from the replay.
TWO_WORKERS = 2

# -- driver patterns ---------------------------------------------------------------------------------
# Waiting in submission order: at least 3 one-future get()s at one line over tasks that were
# all submitted first (fewer is a setup step, not a results loop).
ORDER_MIN_GETS = 3
# Slow submission: a loop of at least 4 submissions with no wait in between, whose
# submissions are at least 2 ms apart on average: a .remote() call costs 0.1-0.5 ms on the
# local pool (ARCHITECTURE facts: ~155 us per call for a process pool), so 2 ms means the
# driver did other work in the loop (building the argument).
SLOW_SUBMIT_MIN_TASKS = 4
SLOW_SUBMIT_GAP_S = 0.002
# What a bare submission costs in the replay of the fix (the upper end of the measured range).
SUBMIT_COST_S = 0.0005

# -- balance -----------------------------------------------------------------------------------------
# Contention: a function's tasks ran at least 10% slower side by side than alone. Noise
# between runs on this VM is up to ~25% minute to minute, but within one trace (or a
# --compare pair run back to back) medians over several tasks stay within a few percent;
# 10% is also where the measured and estimated speedups visibly disagree (item "one speedup
# story"), and at least 5 ms per task so microsecond tasks' jitter does not count.
CONTENTION_MIN = 0.1
CONTENTION_MIN_S = 0.005
CONTENTION_MIN_TASKS = 2
# A task ran "alone" when others overlapped under 10% of it, "side by side" when over 90%.
ALONE_OVERLAP = 0.1
TOGETHER_OVERLAP = 0.9
# The measured and task-time speedups "differ" when they are more than 10% apart.
SPEEDUP_GAP = 0.1
# Unbalanced partitions: input sizes and durations of one function's tasks both spread over
# 3x (ordinary variation stays within ~2x, as for stragglers) and move together (a rank
# correlation of 0.8: bigger input, longer task, nearly always), over at least 4 tasks.
UNBALANCED_RATIO = 3.0
UNBALANCED_CORR = 0.8
UNBALANCED_MIN_TASKS = 4

# Tasks are too small when the per-task overhead is at least the body: then at least half
# of each round trip is overhead. Below 10 tasks batching cannot gain much in total.
OVERHEAD_RATIO = 1.0
OVERHEAD_MIN_TASKS = 10
# Suggested batches last about 0.2 s: long enough to amortize millisecond overheads to ~1%,
# short enough to leave several batches per worker for balance (hpc.map aims there too).
TARGET_BATCH_S = 0.2
# Keep at least this many batches per worker so the tail stays balanced.
BATCHES_PER_WORKER = 2
# A single task's measured body includes about 1 us of the worker's own timing and
# bookkeeping around the call (measured: `return x + 1` reads ~1 us as a task, ~0.14 us per
# item inside an hpc.map batch); the batching what-if takes it off each item.
TASK_TIMING_S = 1e-6
# hpc.map's own set-up on the driver before its first batch goes: ~13 ms per 1,000,000 items
# measured since its result makes no future per item (it was ~0.18 us per item with one
# future each), so the batches of the what-if are ready that much later.
MAP_ITEM_S = 1.3e-8
# What an item costs its worker inside an hpc.map batch besides its own work: the batch's
# share of (un)pickling and the worker's loop, measured ~0.1-0.2 us (100,000 no-op items in
# 10-16 ms on 2 workers). A single task that short measures only its own timing
# (~1 us, with a tail of scheduler noise that a batch's tight loop does not pay).
MAP_ITEM_WORK_S = 2e-7

# CPU time / wall time of a body: below 0.5 the task mostly waits (I/O, sleep, locks,
# network); at or above 0.8 it is limited by the CPU.
IO_BOUND_RATIO = 0.5
COMPUTE_BOUND_RATIO = 0.8
# The body's wall time minus its CPU time is not all waiting: on busy cores a body ready to
# compute waits on the scheduler's run queue (the trace's ``runq``, Linux schedstat). That
# wait counts with the CPU (the ratios above compare (cpu + runq) / wall), and a verdict
# mentions it from 10% of the run time: an idle machine's scheduling stays within a few percent.
RUNQ_MENTION = 0.1
# Contention from the run queue alone: a function's bodies waited for a core a fifth of their
# time or more (measured on at least 2 tasks and 10 ms in all): a fifth of the cores' worth of
# work lost, and far above the few percent of an idle machine.
RUNQ_CONTENTION = 0.2
RUNQ_CONTENTION_MIN_S = 0.01
# Only functions/phases with at least 20% of the serial time (and 10 ms) get a verdict:
# the others do not change the run's speed whichever way they are bound.
BOUND_MIN_SHARE = 0.2
BOUND_MIN_S = 0.01
# ...and each call must run at least this long: for bodies of microseconds the CPU/wall
# ratio is dominated by clock reads and the process being descheduled, not by I/O.
BOUND_MIN_ITEM_S = 0.001

# Serialization dominates when (un)pickling is a fifth or more of the worker's busy time
# (then it costs as much as losing one worker in five), and at least 10 ms in total.
SERIALIZATION_SHARE = 0.2
SERIALIZATION_MIN_S = 0.01
# The same argument size shipped repeatedly: from 1 MB, re-sending costs milliseconds per
# task; three repeats rule out coincidence between two similar inputs.
REPEAT_MIN_BYTES = 1_000_000
REPEAT_MIN_COUNT = 3
# Pickling an argument at .remote() costs the driver up to ~5x what unpickling it costs a
# worker (measured here: a list of a million ints, 0.2-0.29 s to pickle through the
# future-aware pickler, 0.05-0.08 s to unpickle; bytes and arrays are a memcpy both ways).
# The put what-if credits at most 8x the unpickling (and never more than the driver's time
# between submissions), so a loop that also built something is not all credited to pickling.
PICKLE_PER_UNPICKLE = 8.0
# hpc.put pickles the object once with the plain pickler: about half a worker's unpickling
# (measured: 29 ms to put the same list).
PUT_PER_UNPICKLE = 0.5

# The critical path limits the run when it is half the wall time or more and workers sat
# idle for at least a quarter of their time (otherwise the worker count is the limit).
CRITICAL_FRACTION = 0.5
CRITICAL_MIN_IDLE = 0.25
# One task that is half of the chain is a "Partition" problem (split it); otherwise the
# chain of many steps is a "Fan-out" problem (run independent steps side by side).
PARTITION_SHARE = 0.5


@dataclass(frozen=True)
class Context:
    """Inputs every detector shares (computed once by :func:`eugo_lab.analysis.analyze`)."""

    trace: Trace
    units: Units
    window: Window
    breakdown: Breakdown
    queue: np.ndarray
    overhead: np.ndarray
    critical_path: CriticalPath
    serial_time: float
    replay: Replay
    baseline: Trace | None = None  # the same work measured on 1 worker (--compare / --scaling), if any

    @property
    def workers(self) -> int:
        """Workers of the traced engine."""
        return self.trace.n_workers

    @property
    def wall(self) -> float:
        """The analysed wall time."""
        return self.window.length

    def fname(self, code: int) -> str:
        """Function name for a function index."""
        return self.trace.functions[int(code)]

    @functools.cached_property
    def overlap(self) -> np.ndarray:
        """Per unit: the share of its occupancy while another unit ran too (see :mod:`contention`)."""
        return contention.overlap_share(self.units)

    def worth_flagging(self, saves: float) -> bool:
        """A mistake found by its cost: the fix saves at least ``MIN_SAVES`` of the run and ``MIN_SAVES_S``."""
        return saves >= MIN_SAVES * self.wall and saves >= MIN_SAVES_S

    def predict(self, fixed: Replay, parallel: bool = False) -> whatif.Prediction:
        """The fix replayed on this run's workers (on 2 when ``parallel`` and the run had 1: see ``TWO_WORKERS``)."""
        w = max(self.workers, TWO_WORKERS) if parallel else self.workers
        return whatif.predict(self.replay, fixed, w)


def side_by_side(ctx: Context, fn: int) -> dict | None:
    """``fn``'s tasks alone vs side by side in this trace (see ``ALONE_OVERLAP``, ``TOGETHER_OVERLAP``)."""
    return contention.side_by_side(ctx.units, fn, ALONE_OVERLAP, TOGETHER_OVERLAP, CONTENTION_MIN_TASKS,
                                   ctx.overlap)


def priced(ctx: Context, f: Finding, fixed: Replay, fix: str, parallel: bool = False) -> Finding:
    """``f`` with what its fix saves on this run (``saves``, ``wall_after``, ``fix``).

    ``parallel``: the mistake only costs time when tasks could overlap. On a 1-worker run the
    verdict then also says what 2 workers are predicted to do with and without the fix, so a
    learner on one core (Binder) still sees the mistake's price.
    """
    p = whatif.predict(ctx.replay, fixed, ctx.workers)
    after = after_fix(ctx, p)
    ev, verdict = dict(f.evidence), f.verdict
    if parallel and ctx.workers < TWO_WORKERS:
        p2 = whatif.predict(ctx.replay, fixed, TWO_WORKERS)
        ev["on_2_workers"] = {"before": p2.before, "after": p2.after, "saves": p2.saves}
        verdict += (f" On {TWO_WORKERS} workers the replay predicts {fmt_s(p2.before)} as written and "
                    f"{fmt_s(p2.after)} with the fix.")
    return dataclasses.replace(f, verdict=verdict, evidence=ev, saves=ctx.wall - after, wall_after=after, fix=fix)


def after_fix(ctx: Context, p: whatif.Prediction) -> float:
    """The measured wall time scaled by the replay's ratio (fixed / as written), never above the measured.

    A ratio, not a difference: where the replay is off for the run as written (a driver
    cost it does not model), it is off in proportion for the fixed run too, and the
    prediction can never drop below zero.
    """
    if p.before <= 0:
        return ctx.wall
    return ctx.wall * min(p.after / p.before, 1.0)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _ids(ids: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


# -- detectors -------------------------------------------------------------------------------------
def speedup(ctx: Context, others: list[Finding]) -> list[Finding]:
    """Always present: the speedup against the ideal (the worker count), measured when a baseline exists.

    ``others`` are the run's other findings: the advice says "scaling is good" only when no
    fix would save ``GOOD_ENOUGH_SAVES`` of the run.
    """
    wall, serial, w = ctx.window.length, ctx.serial_time, ctx.workers
    est = serial / wall if wall > 0 else 0.0
    base = ctx.baseline.wall_time if ctx.baseline is not None else None
    s = base / wall if base is not None and wall > 0 else est
    eff = s / w if w else 0.0
    best = max((f for f in others if f.saves is not None), key=lambda f: f.saves or 0.0, default=None)
    big = best is not None and (best.saves or 0.0) >= GOOD_ENOUGH_SAVES * wall
    sev = INFO if eff >= GOOD_EFFICIENCY else WARNING if eff >= POOR_EFFICIENCY else PROBLEM
    ev = {"speedup": s, "estimated_speedup": est, "measured_speedup": None if base is None else s, "workers": w,
          "efficiency": eff, "serial_time": serial, "wall_time": wall}
    if base is not None:
        verdict = (f"{fmt_x(s)} on {_plural(w, 'worker')} measured against the 1-worker run ({fmt_s(base)} → "
                   f"{fmt_s(wall)}), ideal {w}x ({fmt_pct(eff)} efficiency); the task-time estimate is {fmt_x(est)}.")
        if abs(est - s) > SPEEDUP_GAP * s and not any(f.code == "contention" for f in others):
            # The Contention finding explains a gap made of slower tasks; any other gap is time outside them.
            verdict += (" They differ by more than 10% although the tasks did not run slower side by side: the "
                        "difference is time outside the tasks (dispatch, transfers, the driver's own work).")
    else:
        verdict = (f"{fmt_x(s)} on {_plural(w, 'worker')}, ideal {w}x ({fmt_pct(eff)} efficiency): "
                   f"{fmt_s(serial)} of task time in {fmt_s(wall)} (estimated from task time).")
    if w < TWO_WORKERS:
        two = replay(ctx.replay, TWO_WORKERS)
        ev["on_2_workers"] = {"before": two}
        verdict = (f"1 worker: nothing ran in parallel here, so no speedup is measured. The replay predicts "
                   f"{fmt_s(two)} on {TWO_WORKERS} workers ({fmt_x(wall / two if two > 0 else 0.0)} faster).")
        advice = ("Run with 2 or more workers where you have the cores (%%eugo -w 2 --compare) to measure it; "
                  "the findings below price each mistake on 2 workers.")
        sev = INFO
    elif big:
        advice = (f"The biggest win: {best.fix}, saving {fmt_s(best.saves)}; the findings below say what else "
                  "costs.")
    elif sev == INFO:
        advice = "Scaling is good; simulate(trace) predicts how far more workers would take it."
    else:
        cats = {k: v for k, v in ctx.breakdown.worker_categories().items() if k != "compute"}
        worst = max(cats, key=lambda k: cats[k])
        advice = (f"The largest loss is {worst} ({fmt_s(cats[worst])} of worker time); "
                  "the findings below say where it comes from.")
    return [Finding("speedup", "Speedup", sev, verdict, advice, ev)]


def stragglers(ctx: Context, skip: frozenset[str] = frozenset()) -> list[Finding]:
    """Tasks far slower than their function's median (see ``STRAGGLER_*``).

    Priced as the slow tasks split into median-sized pieces. Functions in ``skip`` already
    have an Unbalanced partitions finding, which names the cause (their input sizes).
    """
    t = ctx.trace.tasks
    body = t["end"] - t["start"]
    valid = np.isfinite(body) & np.isin(t["status"], (OK, ERROR))
    last_end = float(np.nanmax(t["end"][valid])) if valid.any() else math.nan
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
        advice = (f"Find what makes task {_ids([x['task_id'] for x in tasks], 3)} different (input size, data "
                  "skew): split big inputs so every task does similar work, or submit the biggest first.")
        finding = Finding("straggler", "Straggler", WARNING, verdict, advice,
                          {"function": name, "median": med, "tasks": tasks, "tail_cost": saved})
        out.append(priced(ctx, finding, _split_fixed(ctx, [x["task_id"] for x in tasks], med),
                          f"split task {_ids([x['task_id'] for x in tasks], 3)} of {name}() into median-sized pieces",
                          parallel=True))
    return out


def _unit_of(ctx: Context, task_ids: list[int]) -> list[int]:
    """Unit indices of these task ids (their first measured attempt's unit, when there is one)."""
    u = ctx.units
    pos = {int(t): i for i, t in reversed(list(enumerate(u.task_id.tolist())))}
    return [pos[t] for t in task_ids if t in pos]


def _split_fixed(ctx: Context, task_ids: list[int], piece: float) -> Replay:
    """The replay with these tasks split into pieces of about ``piece`` seconds of body each."""
    idx = _unit_of(ctx, task_ids)
    occ = ctx.replay.occupancy
    return whatif.split(ctx.replay, idx, [whatif.pieces_for(float(occ[i]), piece) for i in idx])


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
               f"{int(half)} of {w} workers were busy, finishing task {_ids(ids, 3)}.")
    verdict = verdict[0].upper() + verdict[1:]
    advice = ("Make the last tasks short: split the longest tasks into pieces, or submit the longest first "
              "so they do not start last.")
    finding = Finding("long-tail", "Long tail", WARNING, verdict, advice,
                      {"tail": tail, "fraction": tail / win.length, "idle_worker_time": idle, "tasks": ids})
    # Two fixes, priced both ways; the finding names the one that saves more.
    idx = _unit_of(ctx, ids)
    fn = u.function[idx] if idx else np.zeros(0, dtype=np.int64)
    typical = float(np.median(u.occ_end[np.isin(u.function, fn)] - u.occ_start[np.isin(u.function, fn)])) \
        if idx else 0.0
    split = _split_fixed(ctx, ids, typical if typical > 0 else tail / 2)
    group = np.flatnonzero(np.isin(u.function, fn))
    early = whatif.first(ctx.replay, idx, group) if idx else ctx.replay
    a, b = ctx.predict(split), ctx.predict(early)
    if b.saves > a.saves:
        return [priced(ctx, finding, early, f"submit task {_ids(ids, 3)} first", parallel=True)]
    return [priced(ctx, finding, split, f"split task {_ids(ids, 3)} into smaller pieces", parallel=True)]


def blocking(ctx: Context) -> list[Finding]:
    """``get()`` right after each ``.remote()`` so tasks never overlap (see ``BLOCKING_*``, ``MIN_SAVES``).

    Found by its cost: the replay with the serialized tasks submitted together (their
    one-future waits cut out of the driver's time line, nothing waiting on their results
    until the end) must save ``MIN_SAVES`` of the run. Tasks that ran alone are priced at
    the speed the same function's tasks had side by side in this trace, when it shows one
    (see :func:`side_by_side`), so contention does not inflate the promise.
    """
    u, trace = ctx.units, ctx.trace
    b = trace.blocks
    if len(u) < 2 or not len(b["kind"]):
        return []
    kinds = np.array(trace.block_kinds, dtype=object)[b["kind"]]
    # One-future waits: get(f), or `await f` in async code (the same pattern: r = await t.remote(x)).
    one = np.flatnonzero(np.isin(kinds, ("get", "await")) & (b["futures"] == 1))
    if not len(one):
        return []
    one = one[np.argsort(b["end"][one], kind="stable")]
    bend, bstart = b["end"][one], b["start"][one]
    order = np.argsort(u.submit, kind="stable")
    sub, rcv = u.submit[order], u.received[order]
    pairs, waited = [], set()
    for k in range(len(order) - 1):
        if sub[k + 1] < rcv[k]:
            continue  # the next task was submitted while this one ran: they could overlap
        # The latest one-future get() that ended before the next submission...
        m = np.searchsorted(bend, sub[k + 1], side="right") - 1
        # ...waited for this task: it started after the submission and ended after the result.
        if m >= 0 and bstart[m] >= sub[k] and bend[m] >= rcv[k]:
            pairs.append(int(one[m]))
            waited.add(int(order[k]))
    if len(pairs) < BLOCKING_MIN_PAIRS:
        return []
    # The loop's last task: waited on by a one-future get before anything else was submitted.
    for k in range(len(order)):
        m = int(np.searchsorted(bend, rcv[k], side="left"))
        if m < len(one) and sub[k] <= bstart[m] <= rcv[k] and (k == len(order) - 1 or sub[k + 1] >= bend[m]):
            waited.add(int(order[k]))
    src_counts = Counter(int(b["source"][p]) for p in pairs)
    src_code = min(src_counts, key=lambda s: (-src_counts[s], s))
    src = trace.sources[src_code]
    # Time the driver spent in one-future get() calls at that line (the last task's included).
    at_src = one[b["source"][one] == src_code]
    blocked = float((b["end"][at_src] - b["start"][at_src]).sum())
    t0 = ctx.window.start
    fixed = whatif.without_waits(ctx.replay, b["start"][at_src] - t0, b["end"][at_src] - t0, sorted(waited))
    alone = sorted(waited)
    for f in np.unique(u.function[alone]):
        slow = side_by_side(ctx, int(f))
        if slow is not None and slow["slowdown"] >= CONTENTION_MIN:
            sel = [i for i in alone if u.function[i] == f]
            fixed = whatif.scaled(fixed, sel, 1.0 + slow["slowdown"])
    pred = ctx.predict(fixed, parallel=True)
    if not ctx.worth_flagging(pred.saves) and not (ctx.workers < TWO_WORKERS and pred.saves >= MIN_SAVES * pred.before
                                                    and pred.saves >= MIN_SAVES_S):
        return []
    # Concurrency of the serialized tasks themselves (the fan-out after the loop is not the mistake).
    ws = np.array(sorted(waited))
    spans = u.received[ws] - u.ready[ws]
    union = measure(u.ready[ws], u.received[ws])
    concurrency = float(spans.sum() / union) if union > 0 else 0.0
    loop = float(u.received[ws].max() - u.ready[ws].min())
    shown = display_source(src)
    awaited = kinds[pairs[0]] == "await"
    call = "awaited" if awaited else "called get() on"
    n_ser = len(waited)
    of = f"{n_ser} tasks" if n_ser == len(u) else f"{n_ser} of {len(u)} tasks"
    idle = (f": for {fmt_s(loop)} ({fmt_pct(loop / ctx.wall)} of the run) {ctx.workers - 1} of {ctx.workers} "
            f"workers sat idle" if ctx.workers > 1 and ctx.wall > 0 else "")
    verdict = (f"the driver {call} each task right after submitting it ({shown}), so "
               f"{of} ran one at a time (average concurrency {concurrency:.2f}){idle}.")
    verdict = verdict[0].upper() + verdict[1:]
    if awaited:
        advice = (f"Submit all tasks first, then await them together: replace the await at {shown} by "
                  "`await asyncio.gather(*futures)` after the loop.")
        fix = f"await the tasks together instead of at {shown}"
    else:
        advice = (f"Submit all tasks first, then call hpc.get() once on the list: move the get() at {shown} "
                  "out of the loop.")
        fix = f"move the get() at {shown} out of the loop"
    finding = Finding("blocking", "Blocking", PROBLEM, verdict, advice,
                      {"source": src, "serialized_tasks": n_ser, "blocked": blocked, "loop": loop,
                       "concurrency": concurrency, "gets": int(len(one))}, related=("Fan-out",))
    return [priced(ctx, finding, fixed, fix, parallel=True)]


def critical(ctx: Context, blocked: bool) -> list[Finding]:
    """The chain of dependent tasks is most of the wall time (see ``CRITICAL_*``, ``PARTITION_SHARE``).

    "Partition": one task is most of the chain; split its input so pieces run in parallel.
    "Fan-out": many dependent steps; run independent steps side by side and split each
    step into parallel tasks. Skipped when the Blocking finding already explains the chain.
    """
    cp, b = ctx.critical_path, ctx.breakdown
    if blocked or ctx.workers < 2 or not len(cp) or cp.fraction < CRITICAL_FRACTION:
        return []
    if b.worker_time <= 0 or b.idle < CRITICAL_MIN_IDLE * b.worker_time:
        return []
    u = ctx.units
    if set(cp.task_ids) <= set(u.task_id[u.is_batch].tolist()):
        # A chain of hpc.map batches: the map sizes and paces its own batches, so "partition
        # your input" would be wrong advice; a slow batch is the Straggler/Long tail findings' case.
        return []
    ev = {"tasks": list(cp.task_ids), "length": cp.length, "fraction": cp.fraction,
          "idle_share": b.idle / b.worker_time}
    k = int(np.argmax(cp.durations))
    if cp.durations[k] >= PARTITION_SHARE * cp.length:
        fn = cp.functions[k]
        verdict = (f"task {cp.task_ids[k]} ({fn}) alone took {fmt_s(cp.durations[k])} of the "
                   f"{fmt_s(cp.wall_time)} run; other workers had nothing to do meanwhile.")
        verdict = verdict[0].upper() + verdict[1:]
        advice = f"Partition the input of {fn}() into pieces (one task each) so they run in parallel."
        finding = Finding("critical-path", "Partition", WARNING, verdict, advice, ev)
        pieces = max(ctx.workers, TWO_WORKERS)
        idx = _unit_of(ctx, [cp.task_ids[k]])
        return [priced(ctx, finding, whatif.split(ctx.replay, idx, [pieces] * len(idx)),
                       f"partition task {cp.task_ids[k]}'s input ({fn}) into {pieces} pieces")]
    verdict = (f"a chain of {len(cp)} tasks, each waiting for the previous one, took {fmt_s(cp.length)} "
               f"({fmt_pct(cp.fraction)} of the run); more workers cannot shorten it.")
    verdict = verdict[0].upper() + verdict[1:]
    advice = ("Fan out: submit independent steps together (pass futures instead of calling get() between them) "
              "and split each step into several tasks.")
    return [Finding("critical-path", "Fan-out", WARNING, verdict, advice, ev)]
