"""The critical-path findings: a chain of dependent tasks is most of the wall time ("Partition", "Fan-out")."""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.critical_path import driver_predecessors, recorded_predecessors
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import TWO_WORKERS, Context, priced, units_of
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import WARNING, fmt_pct
from eugo_lab.units import capitalized
from eugo_lab.units import fmt_seconds as fmt_s

# The critical path limits the run when it is half the wall time or more and workers sat
# idle for at least a quarter of their time (otherwise the worker count is the limit).
CRITICAL_FRACTION = 0.5
CRITICAL_MIN_IDLE = 0.25
# One task that is half of the chain is a "Partition" problem (split it); otherwise the
# chain of many steps is a "Fan-out" problem (run independent steps side by side).
PARTITION_SHARE = 0.5


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
    parents = ctx.trace.parents["parent"]
    if len(parents) and np.isin(np.asarray(cp.task_ids), parents).any():
        # A task on the chain waited on tasks it submitted itself: its span is its children's time,
        # which ran in parallel; "partition its input" would be wrong advice (it already splits it).
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
        verdict = capitalized(verdict)
        advice = f"Partition the input of {fn}() into pieces (one task each) so they run in parallel."
        finding = Finding(Code.CRITICAL_PATH, "Partition", WARNING, verdict, advice, ev)
        pieces = max(ctx.workers, TWO_WORKERS)
        idx = units_of(ctx, [cp.task_ids[k]])
        return [priced(ctx, finding, whatif.split(ctx.replay, idx, [pieces] * len(idx)),
                       f"partition task {cp.task_ids[k]}'s input ({fn}) into {pieces} pieces")]
    through = _through_driver(ctx)
    if through is not None:
        return [through]
    verdict = (f"a chain of {len(cp)} tasks, each waiting for the previous one, took {fmt_s(cp.length)} "
               f"({fmt_pct(cp.fraction)} of the run); more workers cannot shorten it.")
    verdict = capitalized(verdict)
    advice = ("Fan out: submit independent steps together (pass futures instead of calling get() between them) "
              "and split each step into several tasks.")
    idx = units_of(ctx, list(cp.task_ids))
    data = recorded_predecessors(ctx.trace, u)
    passed = sum(1 for a, b in zip(idx, idx[1:]) if a in data.get(b, ()))
    if passed and 2 * passed >= len(idx) - 1:
        # Each step was passed the previous one's future: already the fan-out's "pass futures", and a
        # real dependency; the steps cannot be submitted "together" any more than they are.
        ev["passed_futures"] = passed
        advice = ("Keep the steps in order: each was passed the previous one's future, so it needs that result. "
                  "To go faster, make each step faster or split one step's own work into parallel tasks.")
    return [Finding(Code.CRITICAL_PATH, "Fan-out", WARNING, verdict, advice, ev)]


def _through_driver(ctx: Context) -> Finding | None:
    """The chain's story when its links are values passed through the driver (``Trace.driver_deps``).

    ``x = hpc.get(step.remote(x))`` in a loop: each task was passed the value the previous
    one returned, so the steps must run in order, and neither more workers nor moving the
    get() overlaps them. What passing the future itself saves is priced: each step is then
    launched when the previous result arrives, without the round trip through the notebook
    (the get() returning, the driver's code, the next ``.remote()``); the steps stay in order.
    Returns None when fewer than half of the chain's links are such values.
    """
    cp, u = ctx.critical_path, ctx.units
    idx = units_of(ctx, list(cp.task_ids))
    needs = driver_predecessors(ctx.trace, u)
    links = [(a, b) for a, b in zip(idx, idx[1:]) if a in needs.get(b, ())]
    if not links or 2 * len(links) < len(idx) - 1:
        return None
    names = [ctx.fname(u.function[i]) for i in idx]
    fn = max(sorted(set(names)), key=names.count)
    gaps = [(float(u.received[a]), float(u.ready[b])) for a, b in links]
    ev = {"tasks": list(cp.task_ids), "length": cp.length, "fraction": cp.fraction, "through_driver": len(links),
          "function": fn,
          "round_trips": float(sum(max(e - s, 0.0) for s, e in gaps))}
    verdict = capitalized(
        f"a chain of {len(cp)} tasks took {fmt_s(cp.length)} ({fmt_pct(cp.fraction)} of the run): "
        f"{len(links)} of them were passed the value the previous one returned (through the driver, by get()), "
        "so each step needs the previous one's value and they must run one after another; neither more "
        "workers nor moving the get() can overlap them.")
    advice = (f"Keep the steps in order. Passing the future itself ({fn}.remote(fut) instead of "
              f"{fn}.remote(hpc.get(fut)), with one hpc.get() at the end) saves only the round trip through the "
              "notebook between steps; to go faster, make each step faster or split one step's own work into "
              "parallel tasks.")
    finding = Finding(Code.CRITICAL_PATH, "Fan-out", WARNING, verdict, advice, ev)
    t0 = ctx.window.start
    fixed = whatif.without_waits(ctx.replay, np.array([s for s, _ in gaps]) - t0,
                                 np.array([max(e, s) for s, e in gaps]) - t0, np.zeros(0, dtype=np.int64))
    return priced(ctx, finding, fixed, f"pass {fn}()'s futures along instead of their values from get()")
