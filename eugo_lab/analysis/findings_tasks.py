"""Detectors for what tasks spend besides computing: per-task overhead, waiting, and (un)pickling.

- *Scheduling overhead* / *Batching*: tasks too small for their overhead, priced as batches.
- *I/O-bound* / *Compute-bound*: a function's or ``hpc.phase``'s CPU share, worded by what
  the phase is of its task (more workers only when waiting dominates the whole task).
- *Serialization*: (un)pickling dominating, or the same big argument sent again and again
  (priced as ``hpc.put``).

Thresholds live at the top of :mod:`eugo_lab.analysis.findings` with the reasons for their values.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings import (
    BATCHES_PER_WORKER,
    BOUND_MIN_ITEM_S,
    BOUND_MIN_S,
    BOUND_MIN_SHARE,
    COMPUTE_BOUND_RATIO,
    IO_BOUND_RATIO,
    MAP_ITEM_S,
    MAP_ITEM_WORK_S,
    OVERHEAD_MIN_TASKS,
    OVERHEAD_RATIO,
    PICKLE_PER_UNPICKLE,
    PUT_PER_UNPICKLE,
    REPEAT_MIN_BYTES,
    REPEAT_MIN_COUNT,
    RUNQ_MENTION,
    SERIALIZATION_MIN_S,
    SERIALIZATION_SHARE,
    SLOW_SUBMIT_GAP_S,
    SUBMIT_COST_S,
    TARGET_BATCH_S,
    TASK_TIMING_S,
    Context,
    after_fix,
    priced,
)
from eugo_lab.analysis.report import INFO, PROBLEM, WARNING, Finding, fmt_pct
from eugo_lab.analysis.simulate import replay
from eugo_lab.analysis.timeline import bandwidth
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s


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
        finding = Finding("tasks-too-small", "Scheduling overhead", sev, verdict, advice,
                          {"function": name, "tasks": n, "median_body": body, "median_overhead": ovh,
                           "total_overhead": float(ctx.overhead[sel].sum()), "suggested_batch": size},
                          related=("Batching",))
        # Tasks of one item each: plain calls, and hpc.map batches of a single item (batch=1).
        one = np.flatnonzero(sel & (~u.is_batch | (u.n_items <= 1)))
        # Each item at the function's median body less the task's own timing (bodies this short
        # are mostly that timing plus scheduler noise: a preempted task reads hundreds of us,
        # which a batch's tight loop over its items does not pay per item), plus what the
        # batch's loop costs per item. Flooring the work at the loop's cost instead predicted
        # items of 1.6 us of real work 30% fast (68 ms against 98 ms for 100,000).
        per_item_in_batch = max(float(np.median(u.body[one])) - TASK_TIMING_S, 0.0) + MAP_ITEM_WORK_S
        body_in_batch = np.full(len(one), per_item_in_batch)
        fixed = whatif.batched(ctx.replay, one, size, body_in_batch, SUBMIT_COST_S, SLOW_SUBMIT_GAP_S, MAP_ITEM_S)
        out.append(priced(ctx, finding, fixed, f"batch {name}() {size} items per task with hpc.map"))
    return out


def _bound(ctx: Context, label: str, code_suffix: str, what: str, body: float, cpu: float,
           task: tuple[float, float, float] | None = None, units_with: np.ndarray | None = None,
           per_unit: np.ndarray | None = None, runq: float = 0.0) -> list[Finding]:
    """The bound verdict for one function (``task`` None) or one phase.

    ``runq``: seconds the bodies waited on a run queue for a core (0 where not measured). That
    wait is the CPU's, not I/O's: a body is I/O-bound only when what is left of its wall time
    after computing and waiting for a core (``body - cpu - runq``) is most of it, and a body
    ready to compute all along is compute-bound however little CPU it got (busy cores are the
    Contention finding's subject).

    For a phase, ``task`` is (body, cpu, runq) of the tasks that ran it, ``units_with`` their
    unit indices and ``per_unit`` the phase's seconds in each: a phase's verdict is worded by
    what it is of its task, and "more workers than cores" is only advised when waiting
    dominates the task as a whole; otherwise the waiting phase can overlap the rest (item: prefetch).
    """
    serial = ctx.serial_time
    if body < BOUND_MIN_S or serial <= 0 or body < BOUND_MIN_SHARE * serial:
        return []
    ratio = cpu / body
    starved = runq / body  # waited for a core
    busy = ratio + starved  # the share of the run the body wanted a core
    cores = int(ctx.trace.meta.get("cores", 0) or 0)
    ev = {what: label, "cpu": cpu, "wall": body, "cpu_ratio": ratio, "share": body / serial,
          "runq": runq, "runq_ratio": starved}
    if busy < IO_BOUND_RATIO:
        more = max(2 * cores, 2 * ctx.workers) if cores else 2 * ctx.workers
        task_busy = (task[1] + task[2]) / task[0] if task is not None and task[0] > 0 else busy
        of_task = body / task[0] if task is not None and task[0] > 0 else 1.0
        ev.update(task_share=of_task, task_cpu_ratio=task[1] / task[0] if task is not None and task[0] > 0 else ratio)
        queued = f" and waited {fmt_pct(starved)} for a core" if starved >= RUNQ_MENTION else ""
        if task is None:
            verdict = (f"{label} used the CPU {fmt_pct(ratio)} of its run time{queued}: it mostly waits "
                       "(I/O, sleep, network).")
        else:
            verdict = (f"{label} is {fmt_pct(of_task)} of its tasks' time and used the CPU {fmt_pct(ratio)} of "
                       f"it{queued}: it waits (I/O, sleep, network); the tasks as a whole used the CPU "
                       f"{fmt_pct(ev['task_cpu_ratio'])}.")
        if task_busy < IO_BOUND_RATIO:
            init = f"hpc.init(workers={more})"
            advice = f"Waiting does not need a core: run more workers than cores ({init}) or overlap the waits."
            # The replay keeps each task's duration, which holds for waiting (it needs no core).
            after = after_fix(ctx, whatif.Prediction(more, replay(ctx.replay, ctx.workers), replay(ctx.replay, more)))
            finding = Finding(f"io-bound{code_suffix}", "I/O-bound", WARNING, verdict, advice, ev)
            return [dataclasses.replace(finding, saves=ctx.wall - after, wall_after=after,
                                        fix=f"run more workers than cores ({init})")]
        name = label.split("'")[1] if "'" in label else label
        advice = (f"Overlap the {label} with compute: prefetch the next input while computing this one (start "
                  f"reading item i+1, e.g. in a thread, before computing item i). More workers than cores would "
                  f"slow the {fmt_pct(1 - of_task)} of the task that computes.")
        finding = Finding(f"io-bound{code_suffix}", "I/O-bound", WARNING, verdict, advice, ev)
        if units_with is None or per_unit is None:
            return [finding]
        occ = ctx.replay.occupancy[units_with]
        hidden = np.minimum(per_unit, np.maximum(occ - per_unit, 0.0))
        fixed = whatif.shorter(ctx.replay, units_with, hidden)
        return [priced(ctx, finding, fixed, f"overlap the '{name}' phase with compute (prefetch)")]
    if busy >= COMPUTE_BOUND_RATIO:
        threads = f" (about {ratio:.1f} cores per task: threaded code)" if ratio >= 1.5 else ""
        if starved >= RUNQ_MENTION:
            verdict = (f"{label} computed {fmt_pct(ratio)} of its run time and waited {fmt_pct(starved)} for a "
                       "core (ready to run while the cores were busy): it is limited by the CPU.")
        else:
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
        out += _bound(ctx, f"{ctx.fname(f)}()", "", "function", float(u.body[sel].sum()), float(u.cpu[sel].sum()),
                      runq=float(np.nansum(u.runq[sel])))
    p = ctx.trace.phases
    for n in np.unique(p["name"]):
        sel = p["name"] == n
        dur = float((p["end"][sel] - p["start"][sel]).sum())
        unit_of_row = u.row_unit[p["row"][sel]]
        ok = unit_of_row >= 0
        with_phase = np.unique(unit_of_row[ok])
        per_unit = np.bincount(np.searchsorted(with_phase, unit_of_row[ok]),
                               weights=(p["end"][sel] - p["start"][sel])[ok], minlength=len(with_phase))
        task = ((float(u.body[with_phase].sum()), float(u.cpu[with_phase].sum()),
                 float(np.nansum(u.runq[with_phase]))) if len(with_phase) else None)
        out += _bound(ctx, f"phase '{ctx.trace.phase_names[n]}'", "-phase", "phase", dur,
                      float(np.nansum(p["cpu"][sel])), task, with_phase, per_unit, float(np.nansum(p["runq"][sel])))
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
                   f"({fmt_bytes(bin_, '.3g')} in, {fmt_bytes(bout, '.3g')} out), mostly in {top}().")
        verdict = verdict[0].upper() + verdict[1:]
        advice = ("Send less: pass big inputs once with hpc.put() or let tasks load their own data, and return "
                  "summaries instead of large results.")
        finding = Finding("serialization", "Serialization", WARNING, verdict, advice,
                          {"serialization": ser, "share": ser / busy, "bytes_in": bin_, "bytes_out": bout,
                           "function": top})
        # Priced as if nothing were pickled: the most sending less can save.
        fixed = whatif.shorter(ctx.replay, np.arange(len(u)), u.deser + u.ser)
        out.append(priced(ctx, finding, fixed, "send less data to and from the tasks (hpc.put, summaries)"))
    single = u.n_items == 1
    big = single & (u.bytes_in >= REPEAT_MIN_BYTES)
    group = _argument_groups(ctx, np.flatnonzero(big))
    for f in np.unique(u.function[big]):
        sel = np.flatnonzero(big & (u.function == f))
        counts = Counter(group[i] for i in sel)
        first: dict[tuple, int] = {}
        for i in sel:
            first.setdefault(group[i], int(i))
        # The most repeated argument; ties go to the larger one, then the one sent first (deterministic).
        g, n = min(counts.items(), key=lambda kv: (-kv[1], -float(u.bytes_in[first[kv[0]]]), first[kv[0]]))
        if n < REPEAT_MIN_COUNT:
            continue
        idx = np.array([i for i in sel if group[i] == g], dtype=np.int64)
        size = float(np.median(u.bytes_in[idx]))  # the same argument; small ones beside it may differ a little
        total = float(u.bytes_in[idx].sum())
        name = ctx.fname(f)
        verdict = f"{name}() was sent a {fmt_bytes(size, '.3g')} argument {n} times ({fmt_bytes(total, '.3g')} in all)."
        advice = (f"Store it once with ref = hpc.put(data) and pass ref to {name}.remote(ref, ...): workers read "
                  "it without re-sending.")
        finding = Finding("repeated-argument", "Serialization", WARNING, verdict, advice,
                          {"function": name, "bytes": int(size), "count": n, "total_bytes": int(total)})
        fixed = whatif.sent_once(ctx.replay, idx, _pickling(ctx, idx, size), u.deser[idx],
                                 keep=min(ctx.workers, len(idx)),
                                 pre=_bare(ctx.replay.pre, u.bytes_in, size / bandwidth(ctx.trace)),
                                 post=_bare(ctx.replay.post, u.bytes_in, size / bandwidth(ctx.trace)))
        out.append(priced(ctx, finding, fixed, f"send {name}()'s {fmt_bytes(size, '.3g')} argument once with hpc.put"))
    return out


def _argument_groups(ctx: Context, idx: np.ndarray) -> dict[int, tuple]:
    """Per unit of ``idx``: what identifies its large argument, so tasks sent the same one share a group.

    The driver's record of the argument (``trace.arg_keys``: the same object, the same key)
    where there is one, so small arguments beside it that differ from call to call do not
    split the group; else (a trace from before the record, an argument the driver could
    not name) the pickle's exact size.
    """
    u = ctx.units
    k = ctx.trace.arg_keys
    key_of = dict(zip(k["task"].tolist(), k["key"].tolist()))
    return {int(i): ("arg", key_of[t]) if t in key_of else ("bytes", int(b))
            for i, t, b in zip(idx.tolist(), u.task_id[idx].tolist(), u.bytes_in[idx].tolist())}


def _pickling(ctx: Context, idx: np.ndarray, size: float) -> np.ndarray:
    """Per unit of ``idx``: the driver's seconds pickling its copy of the argument at ``.remote()``.

    Not timed by the trace, so bounded from both sides: at most the driver's time since the
    previous submission (minus a bare ``.remote()``, ``SUBMIT_COST_S``), and taken as the
    larger of moving the bytes (``size / bandwidth``) and ``PICKLE_PER_UNPICKLE`` times the
    worker's measured unpickling of the same bytes.
    """
    u = ctx.units
    ready = u.ready[idx]
    srt = np.sort(u.ready)
    prev = np.searchsorted(srt, ready, side="left") - 1
    # The first submission's copy was pickled after the region began (the driver's time before it).
    gap = ready - np.where(prev >= 0, srt[np.clip(prev, 0, None)], ctx.window.start)
    est = np.maximum(size / bandwidth(ctx.trace), PICKLE_PER_UNPICKLE * u.deser[idx])
    cost = np.clip(np.minimum(gap - SUBMIT_COST_S, est), 0.0, None)
    # ...less the one copy hpc.put() still makes (a plain pickle, see PUT_PER_UNPICKLE).
    first = int(np.argmin(ready))
    cost[first] = max(cost[first] - PUT_PER_UNPICKLE * float(u.deser[idx][first]), 0.0)
    return cost


def _bare(latency: np.ndarray, bytes_in: np.ndarray, copy_s: float) -> float:
    """A dispatch or return latency without a big argument in flight.

    The median over small-argument units when there are any. Otherwise every measured
    latency had a copy travelling (``copy_s``: one copy's transfer time): a dispatch carried
    its own, and a result waited behind the copy the driver's one I/O thread was sending to
    the other worker. Measured on a 5 MB list to 12 tasks: 7-8 ms before dispatch and 5 ms
    before a result arrived with the copies, 0.1 ms each with hpc.put.
    """
    small = bytes_in < REPEAT_MIN_BYTES
    if small.any():
        return float(np.median(latency[small]))
    return max(float(latency.min()) - copy_s, 0.0) if len(latency) else 0.0


__all__ = ["tasks_too_small", "boundness", "serialization"]
