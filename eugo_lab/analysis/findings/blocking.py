"""The Blocking finding: ``get()`` right after each ``.remote()``, so the tasks never overlap."""

from __future__ import annotations

from collections import Counter

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.critical_path import driver_predecessors
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.contention import CONTENTION_MIN, side_by_side
from eugo_lab.analysis.findings.context import MIN_SAVES, MIN_SAVES_S, TWO_WORKERS, Context, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import PROBLEM, fmt_pct
from eugo_lab.analysis.timeline import measure
from eugo_lab.units import capitalized
from eugo_lab.units import fmt_seconds as fmt_s
from eugo_lab.units import fmt_source as display_source

# Blocking too early: a handful of one-future get()s is normal (a setup step); we flag it
# when at least 3 consecutive task pairs were submitted only after the previous task's get()
# returned, and submitting them together is predicted to save at least MIN_SAVES of the run
# (by its cost, not its share of the tasks: 6 serialized of 20 can cost a third of the run).
BLOCKING_MIN_PAIRS = 3


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
    pairs, pair_tasks, waited = [], [], set()
    for k in range(len(order) - 1):
        if sub[k + 1] < rcv[k]:
            continue  # the next task was submitted while this one ran: they could overlap
        # The latest one-future get() that ended before the next submission...
        m = np.searchsorted(bend, sub[k + 1], side="right") - 1
        # ...waited for this task: it started after the submission and ended after the result.
        if m >= 0 and bstart[m] >= sub[k] and bend[m] >= rcv[k]:
            pairs.append(int(one[m]))
            pair_tasks.append(int(order[k]))
            waited.add(int(order[k]))
    # A pair whose next task was passed the value the get() returned (recorded by the runtime)
    # is a chain through the driver: moving the get() cannot overlap them. Those pairs do not
    # count, and their tasks keep gating the next one in the replay (the critical-path finding
    # tells the chain's story).
    needs = driver_predecessors(trace, u)
    chained = {int(order[k]) for k in range(len(order) - 1) if int(order[k]) in needs.get(int(order[k + 1]), ())}
    pairs = [p for p, k in zip(pairs, pair_tasks) if k not in chained]
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
    # Tasks whose values later tasks were passed keep gating them: only the others stop being waited for.
    needed = set().union(*needs.values()) if needs else set()
    fixed = whatif.without_waits(ctx.replay, b["start"][at_src] - t0, b["end"][at_src] - t0,
                                 sorted(waited - needed))
    waited -= chained
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
    verdict = capitalized(verdict)
    if awaited:
        advice = (f"Submit all tasks first, then await them together: replace the await at {shown} by "
                  "`await asyncio.gather(*futures)` after the loop.")
        fix = f"await the tasks together instead of at {shown}"
    else:
        advice = (f"Submit all tasks first, then call hpc.get() once on the list: move the get() at {shown} "
                  "out of the loop.")
        fix = f"move the get() at {shown} out of the loop"
    finding = Finding(Code.BLOCKING, "Blocking", PROBLEM, verdict, advice,
                      {"source": src, "serialized_tasks": n_ser, "blocked": blocked, "loop": loop,
                       "concurrency": concurrency, "gets": int(len(one))}, related=("Fan-out",))
    return [priced(ctx, finding, fixed, fix, parallel=True)]
