"""The critical-path findings: a chain of dependent tasks is most of the wall time ("Partition", "Fan-out")."""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis import whatif
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
    verdict = (f"a chain of {len(cp)} tasks, each waiting for the previous one, took {fmt_s(cp.length)} "
               f"({fmt_pct(cp.fraction)} of the run); more workers cannot shorten it.")
    verdict = capitalized(verdict)
    advice = ("Fan out: submit independent steps together (pass futures instead of calling get() between them) "
              "and split each step into several tasks.")
    return [Finding(Code.CRITICAL_PATH, "Fan-out", WARNING, verdict, advice, ev)]
