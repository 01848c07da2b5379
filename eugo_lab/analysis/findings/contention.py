"""The Contention finding: a function's tasks ran slower side by side than alone, or waited for a core."""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis import gil, whatif
from eugo_lab.analysis.findings import overlap, runtime_work
from eugo_lab.analysis.findings.boundness import IO_BOUND_RATIO, RUNQ_MENTION, busy_share, core_shares
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, plural, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.speedup import SPEEDUP_GAP
from eugo_lab.analysis.report import WARNING, fmt_pct, fmt_x
from eugo_lab.analysis.timeline import Units, units
from eugo_lab.units import fmt_seconds as fmt_s

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
# Contention from the run queue alone: a function's bodies waited for a core a fifth of their
# time or more (measured on at least 2 tasks and 10 ms in all): a fifth of the cores' worth of
# work lost, and far above the few percent of an idle machine.
RUNQ_CONTENTION = 0.2
RUNQ_CONTENTION_MIN_S = 0.01


def side_by_side(ctx: Context, fn: int) -> dict | None:
    """``fn``'s tasks alone vs side by side in this trace (see ``ALONE_OVERLAP``, ``TOGETHER_OVERLAP``)."""
    return overlap.side_by_side(ctx.units, fn, ALONE_OVERLAP, TOGETHER_OVERLAP, CONTENTION_MIN_TASKS,
                                ctx.overlap, exclude=ctx.trial_units | (ctx.warm_up[0] > 0))


def _cause(ctx: Context, cpu_ratio: float, starved: bool = False, idx: np.ndarray | None = None,
           function: int | None = None) -> str:
    """The likely cause of the slowdown of ``function``'s tasks, worded as its one piece of advice.

    A function whose bodies mostly wait (``boundness.busy_share`` under ``IO_BOUND_RATIO``, the measure the
    I/O-bound verdict reads) is advised more workers than cores there: "use at most N workers" would be
    the opposite advice for the same tasks, so the count of workers against cores is named as the cause
    only for a function that needs a core.
    """
    busy = busy_share(ctx, function) if function is not None else None
    cores = int(ctx.trace.meta.get("cores", 0) or 0)
    if idx is not None:
        _, share, compiled = runtime_work.compile_share(ctx, idx)
        if share >= runtime_work.COMPILE_EXPLAINS:
            names = ", ".join(f"{f}()" for f in compiled)
            return (f"the runtime's own work: the automatic JIT compiled {names} with Numba in a background thread "
                    f"of the worker during {fmt_pct(share)} of these tasks' time, and the compile competed with "
                    "the tasks for the cores. It is paid once per worker process, function and argument types: "
                    "while the workers stay up, later runs reuse the compiled code (hpc.last_optimizations() lists "
                    "it). To keep it out of a timing, run the cell once before measuring, or switch the JIT off "
                    "(%%eugo --no-optimize, hpc.init(optimize=False))")
    if cpu_ratio >= 1.5:
        return (f"each task used about {cpu_ratio:.1f} cores: threaded code (BLAS) in every worker oversubscribes "
                "the cores; limit it to one thread per worker (threadpoolctl, OMP_NUM_THREADS=1)")
    if gil.shares_interpreter(ctx.trace.meta):  # the one interpreter lock, before any count of cores
        return ("the tasks are threads of one Python process, which runs Python one thread at a time (the GIL): "
                "for Python code, processes (%%eugo -b local) run side by side where threads cannot")
    if busy is not None and busy < IO_BOUND_RATIO:
        return (f"what the tasks share side by side (a disk, the network, the cores' other users): they mostly wait, "
                f"computing or waiting for a core {fmt_pct(busy)} of their time, so the worker count is not what "
                "slows them")
    if cores and ctx.workers > cores:
        return f"{ctx.workers} workers share {cores} cores; use at most {cores} workers for CPU-bound work"
    if starved:
        return ("other programs kept this machine's cores busy (the notebook itself, other notebooks, other users "
                "of a shared machine): the tasks are compute-bound, and cores of their own (a quieter machine, "
                "a cluster) would run them that much faster; more workers would only queue for the same cores")
    return ("the workers share cores (the driver and Jupyter compete too), caches and memory bandwidth: "
            "expect it on a laptop or a small VM; on a cluster each worker has its own core")


def _runq_ratio(u: Units, idx: np.ndarray) -> tuple[float, float, int]:
    """Run-queue seconds, their share of the body time, and the unit count, over the measured units of ``idx``.

    The share is bounded by what the CPU share leaves (``boundness.core_shares``): the two are quoted together.
    """
    idx = idx[np.isfinite(u.runq[idx])]
    body = float(u.body[idx].sum())
    _, starved, _ = core_shares(body, float(u.cpu[idx].sum()), float(u.runq[idx].sum()))
    return starved * body, starved, int(len(idx))


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
        # A JIT trial (plain run, compile, compiled run) is slower than the compiled calls by design: it
        # would read as contention wherever the trials ran side by side and the compiled calls alone.
        # A worker's warm-up (importing libraries, often several workers at once) is left out the same way.
        warm = ctx.warm_up[0] > 0
        sel = np.flatnonzero((u.function == f) & (u.n_items == 1) & ~ctx.trial_units & ~warm)
        found = _slower_together(ctx, int(f), name, sel, bu, est, measured)
        if found is None:
            found = _waited_for_cores(ctx, int(f), name, np.flatnonzero((u.function == f) & ~warm))
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
    advice = f"Likely cause: {_cause(ctx, cpu, idx=idx, function=f)}."
    finding = Finding(Code.CONTENTION, "Contention", WARNING, verdict, advice,
                      {"function": name, "alone": alone, "together": together, "slowdown": slowdown,
                       "baseline": base is not None, "cpu_ratio": cpu, "runq_ratio": starved,
                       "estimated_speedup": est, "measured_speedup": measured})
    fixed = whatif.scaled(ctx.replay, idx, 1.0 / (1.0 + slowdown))
    return priced(ctx, finding, fixed, f"stop {name}()'s tasks competing for the cores")


def _waited_for_cores(ctx: Context, function: int, name: str, idx: np.ndarray) -> Finding | None:
    """The Contention finding from the run queue: bodies ready to compute that waited for a busy core."""
    u = ctx.units
    waited, starved, n = _runq_ratio(u, idx)
    if n < CONTENTION_MIN_TASKS or waited < RUNQ_CONTENTION_MIN_S or starved < RUNQ_CONTENTION:
        return None
    measured = idx[np.isfinite(u.runq[idx])]
    body = float(u.body[measured].sum())
    cpu = float(u.cpu[measured].sum()) / body if body > 0 else 0.0
    verdict = (f"{name}() tasks waited for a core {fmt_pct(starved)} of the time ({fmt_s(waited)} over "
               f"{plural(n, 'task')}; they computed {fmt_pct(cpu)}): ready to run, but every core was busy.")
    advice = f"Likely cause: {_cause(ctx, cpu, starved=True, idx=measured, function=function)}."
    finding = Finding(Code.CONTENTION, "Contention", WARNING, verdict, advice,
                      {"function": name, "runq": waited, "runq_ratio": starved, "cpu_ratio": cpu, "tasks": n,
                       "baseline": ctx.baseline is not None})
    fixed = whatif.shorter(ctx.replay, measured, u.runq[measured])
    return priced(ctx, finding, fixed, f"give {name}()'s tasks cores of their own (no waiting for a core)")
