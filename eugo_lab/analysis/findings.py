"""Detectors: each looks at one pattern in a trace and returns zero or more :class:`Finding`.

Thresholds are module constants with the reason for their value next to them, so a
course can quote them and a test can pin them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.breakdown import Breakdown
from eugo_lab.analysis.critical_path import CriticalPath
from eugo_lab.analysis.report import (
    INFO,
    PROBLEM,
    WARNING,
    Finding,
    display_source,
    fmt_bytes,
    fmt_pct,
    fmt_s,
    fmt_x,
)
from eugo_lab.analysis.timeline import Units, Window, measure
from eugo_lab.tracing.row import ERROR, OK
from eugo_lab.tracing.trace import Trace

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
# when at least 3 consecutive task pairs, and at least half of all tasks, were submitted
# only after the previous task's get() returned.
BLOCKING_MIN_PAIRS = 3
BLOCKING_MIN_SHARE = 0.5

# Tasks are too small when the per-task overhead is at least the body: then at least half
# of each round trip is overhead. Below 10 tasks batching cannot gain much in total.
OVERHEAD_RATIO = 1.0
OVERHEAD_MIN_TASKS = 10
# Suggested batches last about 0.2 s: long enough to amortize millisecond overheads to ~1%,
# short enough to leave several batches per worker for balance (hpc.map aims there too).
TARGET_BATCH_S = 0.2
# Keep at least this many batches per worker so the tail stays balanced.
BATCHES_PER_WORKER = 2

# CPU time / wall time of a body: below 0.5 the task mostly waits (I/O, sleep, locks,
# network); at or above 0.8 it is limited by the CPU.
IO_BOUND_RATIO = 0.5
COMPUTE_BOUND_RATIO = 0.8
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

    @property
    def workers(self) -> int:
        """Workers of the traced engine."""
        return self.trace.n_workers

    def fname(self, code: int) -> str:
        """Function name for a function index."""
        return self.trace.functions[int(code)]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _ids(ids: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


# -- detectors -------------------------------------------------------------------------------------
def speedup(ctx: Context) -> list[Finding]:
    """Always present: measured speedup against the ideal (the worker count)."""
    wall, serial, w = ctx.window.length, ctx.serial_time, ctx.workers
    s = serial / wall if wall > 0 else 0.0
    eff = s / w if w else 0.0
    sev = INFO if eff >= GOOD_EFFICIENCY else WARNING if eff >= POOR_EFFICIENCY else PROBLEM
    verdict = (f"{fmt_x(s)} on {_plural(w, 'worker')}, ideal {w}x ({fmt_pct(eff)} efficiency): "
               f"{fmt_s(serial)} of task time in {fmt_s(wall)}.")
    if sev == INFO:
        advice = "Scaling is good; simulate(trace) predicts how far more workers would take it."
    else:
        cats = {k: v for k, v in ctx.breakdown.worker_categories().items() if k != "compute"}
        worst = max(cats, key=lambda k: cats[k])
        advice = (f"The largest loss is {worst} ({fmt_s(cats[worst])} of worker time); "
                  "the findings below say where it comes from.")
    return [Finding("speedup", "Speedup", sev, verdict, advice,
                    {"speedup": s, "workers": w, "efficiency": eff, "serial_time": serial, "wall_time": wall})]


def stragglers(ctx: Context) -> list[Finding]:
    """Tasks far slower than their function's median (see ``STRAGGLER_*``)."""
    t = ctx.trace.tasks
    body = t["end"] - t["start"]
    valid = np.isfinite(body) & np.isin(t["status"], (OK, ERROR))
    last_end = float(np.nanmax(t["end"][valid])) if valid.any() else math.nan
    out = []
    slow_all = np.zeros(len(body), dtype=bool)
    meds = np.zeros(len(body))
    for f in np.unique(t["function"][valid]):
        sel = valid & (t["function"] == f)
        if sel.sum() < STRAGGLER_MIN_TASKS:
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
        out.append(Finding("straggler", "Straggler", WARNING, verdict, advice,
                           {"function": name, "median": med, "tasks": tasks, "tail_cost": saved}))
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
               f"{int(half)} of {w} workers were busy, finishing task {_ids(ids, 3)}.")
    verdict = verdict[0].upper() + verdict[1:]
    advice = ("Make the last tasks short: split the longest tasks into pieces, or submit the longest first "
              "so they do not start last.")
    return [Finding("long-tail", "Long tail", WARNING, verdict, advice,
                    {"tail": tail, "fraction": tail / win.length, "idle_worker_time": idle, "tasks": ids})]


def blocking(ctx: Context) -> list[Finding]:
    """``get()`` right after each ``.remote()`` so tasks never overlap (see ``BLOCKING_*``)."""
    u, trace = ctx.units, ctx.trace
    b = trace.blocks
    if ctx.workers < 2 or len(u) < 2 or not len(b["kind"]):
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
    pairs = []
    for k in range(len(order) - 1):
        if sub[k + 1] < rcv[k]:
            continue  # the next task was submitted while this one ran: they could overlap
        # The latest one-future get() that ended before the next submission...
        m = np.searchsorted(bend, sub[k + 1], side="right") - 1
        # ...waited for this task: it started after the submission and ended after the result.
        if m >= 0 and bstart[m] >= sub[k] and bend[m] >= rcv[k]:
            pairs.append(int(one[m]))
    if len(pairs) < BLOCKING_MIN_PAIRS or len(pairs) < BLOCKING_MIN_SHARE * (len(u) - 1):
        return []
    src_counts = Counter(int(b["source"][p]) for p in pairs)
    src_code = min(src_counts, key=lambda s: (-src_counts[s], s))
    src = trace.sources[src_code]
    # Time the driver spent in one-future get() calls at that line (the last task's included).
    at_src = one[b["source"][one] == src_code]
    blocked = float((b["end"][at_src] - b["start"][at_src]).sum())
    spans = u.received - u.ready
    union = measure(u.ready, u.received)
    concurrency = float(spans.sum() / union) if union > 0 else 0.0
    shown = display_source(src)
    awaited = kinds[pairs[0]] == "await"
    call = "awaited" if awaited else "called get() on"
    verdict = (f"the driver {call} each task right after submitting it ({shown}), so "
               f"{len(pairs) + 1} tasks ran one at a time (average concurrency {concurrency:.2f}).")
    verdict = verdict[0].upper() + verdict[1:]
    if awaited:
        advice = (f"Submit all tasks first, then await them together: replace the await at {shown} by "
                  "`await asyncio.gather(*futures)` after the loop.")
    else:
        advice = (f"Submit all tasks first, then call hpc.get() once on the list: move the get() at {shown} "
                  "out of the loop.")
    return [Finding("blocking", "Blocking", PROBLEM, verdict, advice,
                    {"source": src, "serialized_tasks": len(pairs) + 1, "blocked": blocked,
                     "concurrency": concurrency, "gets": int(len(one))})]


def tasks_too_small(ctx: Context) -> list[Finding]:
    """Per function: median per-task overhead at least the median body (see ``OVERHEAD_*``)."""
    u = ctx.units
    out = []
    for f in np.unique(u.function):
        sel = u.function == f
        n = int(sel.sum())
        if n < OVERHEAD_MIN_TASKS:
            continue
        body = float(np.median(u.body[sel]))
        ovh = float(np.median(ctx.overhead[sel]))
        if ovh < OVERHEAD_RATIO * body or ovh <= 0:
            continue
        items = int(u.n_items[sel].sum())
        per_item = float(np.median(u.body[sel] / u.n_items[sel]))
        size = math.ceil(TARGET_BATCH_S / max(per_item, 1e-9))
        size = max(1, min(size, math.ceil(items / (BATCHES_PER_WORKER * ctx.workers))))
        name = ctx.fname(f)
        sev = PROBLEM if ovh >= 3 * body else WARNING
        if bool(u.is_batch[sel].all()) and int(u.n_items[sel].max()) > 1:
            # hpc.map sized these batches itself: a bigger batch is not the fix, the work is too small.
            biggest = int(u.n_items[sel].max())
            verdict = (f"hpc.map already sends {name}() items in batches (up to {biggest} per task), yet an item "
                       f"does only {fmt_s(per_item)} of work: sending the work out costs more than doing it.")
            advice = ("Do this step in the notebook or vectorize it (one NumPy call over the whole array); "
                      "distribute work that takes milliseconds per item or more.")
            out.append(Finding("tasks-too-small", "Scheduling overhead", sev, verdict, advice,
                               {"function": name, "tasks": n, "median_body": body, "median_overhead": ovh,
                                "total_overhead": float(ctx.overhead[sel].sum()), "per_item": per_item,
                                "largest_batch": biggest},
                               related=("Batching",)))
            continue
        if size <= float(np.median(u.n_items[sel])):
            continue  # already batched as far as the item count allows
        verdict = (f"{n} {name}() tasks run {fmt_s(body)} each but cost {fmt_s(ovh)} of overhead each: "
                   "scheduling takes more time than the work.")
        advice = (f"Batching: give each task about {size} items, e.g. hpc.map({name}, items, batch={size}), "
                  f"so a task runs about {fmt_s(size * per_item)}.")
        out.append(Finding("tasks-too-small", "Scheduling overhead", sev, verdict, advice,
                           {"function": name, "tasks": n, "median_body": body, "median_overhead": ovh,
                            "total_overhead": float(ctx.overhead[sel].sum()), "suggested_batch": size},
                           related=("Batching",)))
    return out


def _bound(ctx: Context, label: str, code_suffix: str, what: str, body: float, cpu: float) -> list[Finding]:
    serial = ctx.serial_time
    if body < BOUND_MIN_S or serial <= 0 or body < BOUND_MIN_SHARE * serial:
        return []
    ratio = cpu / body
    cores = int(ctx.trace.meta.get("cores", 0) or 0)
    ev = {what: label, "cpu": cpu, "wall": body, "cpu_ratio": ratio, "share": body / serial}
    if ratio < IO_BOUND_RATIO:
        verdict = f"{label} used the CPU {fmt_pct(ratio)} of its run time: it mostly waits (I/O, sleep, network)."
        more = f"hpc.init(workers={2 * cores})" if cores else "more workers than cores"
        advice = f"Waiting does not need a core: run more workers than cores ({more}) or overlap the waits."
        return [Finding(f"io-bound{code_suffix}", "I/O-bound", WARNING, verdict, advice, ev)]
    if ratio >= COMPUTE_BOUND_RATIO:
        threads = f" (about {ratio:.1f} cores per task: threaded code)" if ratio >= 1.5 else ""
        verdict = f"{label} kept the CPU busy {fmt_pct(min(ratio, 1.0))} of its run time{threads}."
        if cores and ctx.workers > cores:
            advice = f"Use at most {cores} workers here: CPU-bound tasks on more workers than cores only share them."
            sev = WARNING
        else:
            advice = "Speed comes from more cores (a cluster) or a faster body (vectorize with NumPy)."
            sev = INFO
        return [Finding(f"compute-bound{code_suffix}", "Compute-bound", sev, verdict, advice, ev)]
    return []


def boundness(ctx: Context) -> list[Finding]:
    """I/O-bound vs compute-bound, per function and per ``hpc.phase`` (see ``*_RATIO``, ``BOUND_*``)."""
    u, out = ctx.units, []
    for f in np.unique(u.function):
        sel = u.function == f
        if float(np.median(u.body[sel] / u.n_items[sel])) < BOUND_MIN_ITEM_S:
            continue  # CPU/wall of microsecond bodies measures scheduling noise, not the code
        out += _bound(ctx, f"{ctx.fname(f)}()", "", "function", float(u.body[sel].sum()), float(u.cpu[sel].sum()))
    p = ctx.trace.phases
    for n in np.unique(p["name"]):
        sel = p["name"] == n
        dur = float((p["end"][sel] - p["start"][sel]).sum())
        out += _bound(ctx, f"phase '{ctx.trace.phase_names[n]}'", "-phase", "phase", dur,
                      float(np.nansum(p["cpu"][sel])))
    return out


def serialization(ctx: Context) -> list[Finding]:
    """(Un)pickling dominating the workers, or the same big argument shipped again and again."""
    u, out = ctx.units, []
    ser = float((u.deser + u.ser).sum())
    busy = ser + float(u.body.sum())
    if ser >= SERIALIZATION_MIN_S and busy > 0 and ser >= SERIALIZATION_SHARE * busy:
        by_fn = {int(f): float((u.deser + u.ser)[u.function == f].sum()) for f in np.unique(u.function)}
        top = ctx.fname(min(by_fn, key=lambda f: (-by_fn[f], f)))
        bin_, bout = float(u.bytes_in.sum()), float(u.bytes_out.sum())
        verdict = (f"workers spent {fmt_s(ser)} ({fmt_pct(ser / busy)} of their busy time) pickling and unpickling "
                   f"({fmt_bytes(bin_)} in, {fmt_bytes(bout)} out), mostly in {top}().")
        verdict = verdict[0].upper() + verdict[1:]
        advice = ("Send less: pass big inputs once with hpc.put() or let tasks load their own data, and return "
                  "summaries instead of large results.")
        out.append(Finding("serialization", "Serialization", WARNING, verdict, advice,
                           {"serialization": ser, "share": ser / busy, "bytes_in": bin_, "bytes_out": bout,
                            "function": top}))
    single = u.n_items == 1
    for f in np.unique(u.function[single]):
        sizes = u.bytes_in[single & (u.function == f)]
        big = sizes[sizes >= REPEAT_MIN_BYTES]
        if not len(big):
            continue
        counts = Counter(int(x) for x in big)
        size, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if n < REPEAT_MIN_COUNT:
            continue
        name = ctx.fname(f)
        verdict = f"{name}() was sent a {fmt_bytes(size)} argument {n} times ({fmt_bytes(size * n)} in all)."
        advice = (f"Store it once with ref = hpc.put(data) and pass ref to {name}.remote(ref, ...): workers read "
                  "it without re-sending.")
        out.append(Finding("repeated-argument", "Serialization", WARNING, verdict, advice,
                           {"function": name, "bytes": size, "count": n, "total_bytes": size * n}))
    return out


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
        return [Finding("critical-path", "Partition", WARNING, verdict, advice, ev)]
    verdict = (f"a chain of {len(cp)} tasks, each waiting for the previous one, took {fmt_s(cp.length)} "
               f"({fmt_pct(cp.fraction)} of the run); more workers cannot shorten it.")
    verdict = verdict[0].upper() + verdict[1:]
    advice = ("Fan out: submit independent steps together (pass futures instead of calling get() between them) "
              "and split each step into several tasks.")
    return [Finding("critical-path", "Fan-out", WARNING, verdict, advice, ev)]
