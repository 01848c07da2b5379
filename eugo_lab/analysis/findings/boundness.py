"""The I/O-bound and Compute-bound findings: a function's or ``hpc.phase``'s CPU share.

Worded by what the phase is of its task: more workers only when waiting dominates the whole task.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, after_fix, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import INFO, WARNING, fmt_pct
from eugo_lab.analysis.simulate import replay
from eugo_lab.contract.phases import CHILD_WAIT_PHASE, RUNTIME_PHASE_PREFIX

# CPU time / wall time of a body: below 0.5 the task mostly waits (I/O, sleep, locks,
# network); at or above 0.8 it is limited by the CPU.
IO_BOUND_RATIO = 0.5
COMPUTE_BOUND_RATIO = 0.8
# The body's wall time minus its CPU time is not all waiting: on busy cores a body ready to
# compute waits on the scheduler's run queue (the trace's ``runq``, Linux schedstat). That
# wait counts with the CPU (the ratios above compare (cpu + runq) / wall), and a verdict
# mentions it from 10% of the run time: an idle machine's scheduling stays within a few percent.
RUNQ_MENTION = 0.1
# Only functions/phases with at least 20% of the serial time (and 10 ms) get a verdict:
# the others do not change the run's speed whichever way they are bound.
BOUND_MIN_SHARE = 0.2
BOUND_MIN_S = 0.01
# ...and each call must run at least this long: for bodies of microseconds the CPU/wall
# ratio is dominated by clock reads and the process being descheduled, not by I/O.
BOUND_MIN_ITEM_S = 0.001

_FUNCTION_CODES = (Code.IO_BOUND, Code.COMPUTE_BOUND)
_PHASE_CODES = (Code.IO_BOUND_PHASE, Code.COMPUTE_BOUND_PHASE)


def core_shares(body: float, cpu: float, runq: float = 0.0, gil: float = 0.0) -> tuple[float, float, float]:
    """The shares of ``body`` seconds spent computing, waiting for a core and waiting for the GIL, adding up.

    Each is measured apart (CPU by the process clock, which counts every thread of the worker and ticks
    coarsely; the run-queue wait from the body thread's schedstat; the GIL wait from overlaps), so their
    sum can pass the wall time by a few percent, and "computed 89% and waited 13%" reads as an error.
    A body cannot wait longer than it did not compute: the waits are bounded by what the CPU share leaves
    of the run (none where it computed on more cores than one, threaded code), the run queue first.
    """
    if body <= 0:
        return 0.0, 0.0, 0.0
    ratio = max(cpu / body, 0.0)
    left = max(1.0 - ratio, 0.0)
    starved = min(max(runq / body, 0.0), left)  # waited for a core
    locked = min(max(gil / body, 0.0), left - starved)  # waited for the interpreter lock (threads engine)
    return ratio, starved, locked


def _bound(ctx: Context, label: str, codes: tuple[Code, Code], what: str, body: float, cpu: float,
           task: tuple[float, float, float] | None = None, units_with: np.ndarray | None = None,
           per_unit: np.ndarray | None = None, runq: float = 0.0, gil: float = 0.0,
           bytecode: float | None = None) -> list[Finding]:
    """The bound verdict for one function (``task`` None) or one phase.

    ``codes``: the (I/O-bound, compute-bound) codes, a function's or a phase's.

    ``runq``: seconds the bodies waited on a run queue for a core (0 where not measured). That
    wait is the CPU's, not I/O's: a body is I/O-bound only when what is left of its wall time
    after computing and waiting for a core (``body - cpu - runq``) is most of it, and a body
    ready to compute all along is compute-bound however little CPU it got (busy cores are the
    Contention finding's subject). ``gil``: seconds waited for the interpreter lock on the threads
    engine (:mod:`eugo_lab.analysis.gil`): ready to compute too, never I/O, so never advice to run
    more workers than cores. ``bytecode``: the share of the function's time in Python bytecode, as the
    automatic JIT sampled it (None: not measured); a faster body is advised by it (:func:`_compute_advice`).

    For a phase, ``task`` is (body, cpu, runq) of the tasks that ran it, ``units_with`` their
    unit indices and ``per_unit`` the phase's seconds in each: a phase's verdict is worded by
    what it is of its task, and "more workers than cores" is only advised when waiting
    dominates the task as a whole; otherwise the waiting phase can overlap the rest (item: prefetch).
    """
    serial = ctx.serial_time
    if body < BOUND_MIN_S or serial <= 0 or body < BOUND_MIN_SHARE * serial:
        return []
    ratio, starved, locked = core_shares(body, cpu, runq, gil)
    busy = ratio + starved + locked  # the share of the run the body wanted a core
    cores = int(ctx.trace.meta.get("cores", 0) or 0)
    ev = {what: label, "cpu": cpu, "wall": body, "cpu_ratio": ratio, "share": body / serial,
          "runq": runq, "runq_ratio": starved, "gil_wait": gil, "gil_ratio": locked}
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
            finding = Finding(codes[0], "I/O-bound", WARNING, verdict, advice, ev)
            return [dataclasses.replace(finding, saves=ctx.wall - after, wall_after=after,
                                        fix=f"run more workers than cores ({init})")]
        name = label.split("'")[1] if "'" in label else label
        advice = (f"Overlap the {label} with compute: prefetch the next input while computing this one (start "
                  f"reading item i+1, e.g. in a thread, before computing item i). More workers than cores would "
                  f"slow the {fmt_pct(1 - of_task)} of the task that computes.")
        finding = Finding(codes[0], "I/O-bound", WARNING, verdict, advice, ev)
        if units_with is None or per_unit is None:
            return [finding]
        occ = ctx.replay.occupancy[units_with]
        hidden = np.minimum(per_unit, np.maximum(occ - per_unit, 0.0))
        fixed = whatif.shorter(ctx.replay, units_with, hidden)
        return [priced(ctx, finding, fixed, f"overlap the '{name}' phase with compute (prefetch)")]
    if busy >= COMPUTE_BOUND_RATIO:
        threads = f" (about {ratio:.1f} cores per task: threaded code)" if ratio >= 1.5 else ""
        if locked >= RUNQ_MENTION:
            verdict = (f"{label} computed {fmt_pct(ratio)} of its run time and waited {fmt_pct(starved + locked)} for "
                       "the interpreter lock (the GIL) or a core while other threads ran: it is limited by the CPU.")
        elif starved >= RUNQ_MENTION:
            verdict = (f"{label} computed {fmt_pct(ratio)} of its run time and waited {fmt_pct(starved)} for a "
                       "core (ready to run while the cores were busy): it is limited by the CPU.")
        else:
            verdict = f"{label} kept the CPU busy {fmt_pct(min(ratio, 1.0))} of its run time{threads}."
        if locked >= RUNQ_MENTION:
            advice = ("Threads run Python one at a time and help only where tasks release the GIL: for Python code, "
                      "run processes (%%eugo -b local).")
            sev = WARNING
        elif cores and ctx.workers > cores:
            advice = f"Use at most {cores} workers here: CPU-bound tasks on more workers than cores only share them."
            sev = WARNING
        else:
            advice = _compute_advice(bytecode)
            sev = INFO
        return [Finding(codes[1], "Compute-bound", sev, verdict, advice, ev)]
    return []


# A body whose time is at least half Python bytecode gains from vectorizing (or the JIT); under that, its
# time is in C code already (one NumPy call over the whole array), which vectorizing does not shorten.
# The automatic JIT judges functions at the same share (eugo_lab.jit.auto.MIN_PYTHON_SHARE).
BYTECODE_SHARE = 0.5


def _compute_advice(bytecode: float | None) -> str:
    """The compute-bound advice: more cores, and a faster body only where its time was Python bytecode."""
    if bytecode is None:
        return ("Speed comes from more cores (a cluster) or a faster body: %%eugo --profile shows whether its time "
                "is Python bytecode, which vectorizing with NumPy removes, or C code already.")
    if bytecode >= BYTECODE_SHARE:
        return (f"Speed comes from more cores (a cluster) or a faster body: {fmt_pct(bytecode)} of its sampled time "
                "was Python bytecode (vectorize with NumPy).")
    return (f"Speed comes from more cores (a cluster): {fmt_pct(1 - bytecode)} of its sampled time was in C code "
            "already (NumPy), which vectorizing does not speed up.")


def _function_times(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per unit: body, CPU and run-queue seconds that are the function's own, and whether the unit counts.

    A JIT trial's compile is the runtime's work inside the task and a worker's warm-up imports libraries:
    neither says what the function's own time is bound by.
    """
    u = ctx.units
    c_wall, c_cpu, c_runq = ctx.trial_compile
    body, cpu, runq = u.body - c_wall, u.cpu - c_cpu, np.where(np.isfinite(u.runq), u.runq - c_runq, np.nan)
    return body, cpu, runq, ~(ctx.warm_up[0] > 0)


def busy_share(ctx: Context, function: int) -> float | None:
    """The share of ``function``'s run time its bodies wanted a core (computed, waited for a core or the GIL).

    The measure the I/O-bound and Compute-bound verdicts read: another finding that advises on the worker
    count reads it too, so one function never gets "more workers than cores" and "at most N workers" at once.
    None where nothing of it was measured.
    """
    body, cpu, runq, counted = _function_times(ctx)
    sel = (ctx.units.function == function) & counted
    total = float(body[sel].sum())
    if total <= 0:
        return None
    return sum(core_shares(total, float(cpu[sel].sum()), float(np.nansum(runq[sel])), float(ctx.gil_wait[sel].sum())))


def boundness(ctx: Context) -> list[Finding]:
    """I/O-bound vs compute-bound, per function and per ``hpc.phase`` (see ``*_RATIO``, ``BOUND_*``)."""
    u, out = ctx.units, []
    body, cpu, runq, counted = _function_times(ctx)
    for f in np.unique(u.function):
        sel = (u.function == f) & counted
        if not sel.any() or float(np.median(body[sel] / u.n_items[sel])) < BOUND_MIN_ITEM_S:
            continue  # CPU/wall of microsecond bodies measures scheduling noise, not the code
        out += _bound(ctx, f"{ctx.fname(f)}()", _FUNCTION_CODES, "function", float(body[sel].sum()),
                      float(cpu[sel].sum()), runq=float(np.nansum(runq[sel])), gil=float(ctx.gil_wait[sel].sum()),
                      bytecode=ctx.bytecode_shares.get(int(f)))
    p = ctx.trace.phases
    for n in np.unique(p["name"]):
        if str(ctx.trace.phase_names[n]).startswith(RUNTIME_PHASE_PREFIX):
            continue  # the JIT's own spans (its trial's runs, its compile): not a phase of the task's code
        if ctx.trace.phase_names[n] == CHILD_WAIT_PHASE:  # waiting on its children: their time, not I/O
            continue
        sel = p["name"] == n
        dur = float((p["end"][sel] - p["start"][sel]).sum())
        unit_of_row = u.row_unit[p["row"][sel]]
        ok = unit_of_row >= 0
        with_phase = np.unique(unit_of_row[ok])
        per_unit = np.bincount(np.searchsorted(with_phase, unit_of_row[ok]),
                               weights=(p["end"][sel] - p["start"][sel])[ok], minlength=len(with_phase))
        # The tasks' GIL waits count as wanting a core: only real waiting earns "more workers than cores".
        task = ((float(body[with_phase].sum()), float(cpu[with_phase].sum()),
                 float(np.nansum(runq[with_phase]) + ctx.gil_wait[with_phase].sum())) if len(with_phase) else None)
        out += _bound(ctx, f"phase '{ctx.trace.phase_names[n]}'", _PHASE_CODES, "phase", dur,
                      float(np.nansum(p["cpu"][sel])), task, with_phase, per_unit, float(np.nansum(p["runq"][sel])))
    return out
