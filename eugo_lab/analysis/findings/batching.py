"""The Scheduling overhead finding: tasks too small for their per-task overhead, priced as batches."""

from __future__ import annotations

import math

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.results import LARGE_RESULT_BYTES
from eugo_lab.analysis.findings.submission import SLOW_SUBMIT_GAP_S, SUBMIT_COST_S
from eugo_lab.analysis.report import PROBLEM, WARNING
from eugo_lab.units import fmt_seconds as fmt_s

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
# share of (un)pickling, the worker's loop and the trace's per-item ends, measured ~0.3-0.4 us
# (100,000 tiny items in 16-20 ms on 2 workers, traced, the automatic JIT on; 2026-12-02).
# A single task that short measures only its own timing (~1 us, with a tail of scheduler noise
# that a batch's tight loop does not pay).
MAP_ITEM_WORK_S = 3.5e-7


def overhead_room(ctx: Context) -> float:
    """The most overhead a task can have cost its worker: the workers' time outside task bodies, per task.

    A task's round trip beyond its body (``ctx.overhead``) overlaps other tasks' bodies when the
    driver sends the next task while a worker computes: 612 us of round trip a task, where
    wall time x workers - task time leaves 51 us a task, costs the workers 51 us, not 612.
    """
    u = ctx.units
    if not len(u):
        return 0.0
    return max(ctx.workers * ctx.wall - float(u.body.sum()), 0.0) / len(u)


def tasks_too_small(ctx: Context) -> list[Finding]:
    """Per function: median per-task overhead at least the median body (see ``OVERHEAD_*``)."""
    u = ctx.units
    out = []
    room = overhead_room(ctx)
    for f in np.unique(u.function):
        sel = u.function == f
        n = int(sel.sum())
        if n < OVERHEAD_MIN_TASKS:
            continue
        if float(np.median(u.bytes_out[sel])) >= LARGE_RESULT_BYTES:
            continue  # large results: a batch sends them all at once, doubling the bytes per task (findings.results)
        body = float(np.median(u.body[sel]))
        ovh = min(float(np.median(ctx.overhead[sel])), room)
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
            out.append(Finding(Code.TASKS_TOO_SMALL, "Scheduling overhead", sev, verdict, advice,
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
        finding = Finding(Code.TASKS_TOO_SMALL, "Scheduling overhead", sev, verdict, advice,
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
