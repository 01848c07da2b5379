"""The Speedup finding: the speedup against the ideal (the worker count), where tasks ran side by side.

Where they did not (see ``breakdown.SIDE_BY_SIDE_MIN_SHARE``), a speedup measures the
driver, not parallelism: the finding is left out and the summary leads with the driver's time.
"""

from __future__ import annotations

from eugo_lab.analysis import gil
from eugo_lab.analysis.breakdown import SIDE_BY_SIDE_MIN_SHARE, driver_time
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import TWO_WORKERS, Context, plural
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import INFO, PROBLEM, WARNING, fmt_pct, fmt_x
from eugo_lab.analysis.simulate import replay
from eugo_lab.units import fmt_seconds as fmt_s

# Efficiency at or above 70% is good for a process pool: what is left is usually the
# unavoidable ramp-up and the last wave of tasks. Below 35% most of the workers' time is
# lost, which deserves the strongest flag.
GOOD_EFFICIENCY = 0.7
POOR_EFFICIENCY = 0.35
# The speedup headline only says "scaling is good" when no fix would save a tenth of the run.
GOOD_ENOUGH_SAVES = 0.1
# The measured and task-time speedups "differ" when they are more than 10% apart.
SPEEDUP_GAP = 0.1


def speedup(ctx: Context, others: list[Finding]) -> list[Finding]:
    """The speedup against the ideal (the worker count), measured when a baseline exists.

    Raised where tasks ran side by side long enough to have a speedup
    (``DriverTime.ran_in_parallel``); on 1 worker, where tasks took at least
    ``SIDE_BY_SIDE_MIN_SHARE`` of the run (the replay on 2 workers then has something to spread).
    ``others`` are the run's other findings: the advice says "scaling is good" only when no
    fix would save ``GOOD_ENOUGH_SAVES`` of the run.
    """
    wall, serial, w = ctx.window.length, ctx.serial_time, ctx.workers
    if not _has_speedup(ctx):
        return []
    est = serial / wall if wall > 0 else 0.0
    base = ctx.baseline.wall_time if ctx.baseline is not None else None
    s = base / wall if base is not None and wall > 0 else est
    eff = s / w if w else 0.0
    best = max((f for f in others if f.saves is not None), key=lambda f: f.saves or 0.0, default=None)
    big = best is not None and (best.saves or 0.0) >= GOOD_ENOUGH_SAVES * wall
    sev = INFO if eff >= GOOD_EFFICIENCY else WARNING if eff >= POOR_EFFICIENCY else PROBLEM
    ev = {"speedup": s, "estimated_speedup": est, "measured_speedup": None if base is None else s, "workers": w,
          "efficiency": eff, "serial_time": serial, "wall_time": wall}
    basis = "CPU" if gil.shares_interpreter(ctx.trace.meta) else "task"
    if base is not None:
        verdict = (f"{fmt_x(s)} on {plural(w, 'worker')} measured against the 1-worker run ({fmt_s(base)} → "
                   f"{fmt_s(wall)}), ideal {w}x ({fmt_pct(eff)} efficiency); the {basis}-time "
                   f"estimate is {fmt_x(est)}.")
        if abs(est - s) > SPEEDUP_GAP * s and not any(f.code == Code.CONTENTION for f in others):
            # The Contention finding explains a gap made of slower tasks; any other gap is time outside them.
            verdict += (" They differ by more than 10% although the tasks did not run slower side by side: the "
                        "difference is time outside the tasks (dispatch, transfers, the driver's own work).")
    else:
        verdict = (f"{fmt_x(s)} on {plural(w, 'worker')}, ideal {w}x ({fmt_pct(eff)} efficiency): "
                   f"{fmt_s(serial)} of task time in {fmt_s(wall)} (estimated from task time).")
        if gil.shares_interpreter(ctx.trace.meta):  # threads: the lock's waits are not work (analysis.gil)
            verdict = (f"{fmt_x(s)} on {plural(w, 'worker')}, ideal {w}x ({fmt_pct(eff)} efficiency): "
                       f"{fmt_s(serial)} of CPU time and real waits in {fmt_s(wall)} (estimated from CPU time: "
                       "time a thread waited for the interpreter lock or a core is left out).")
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
    return [Finding(Code.SPEEDUP, "Speedup", sev, verdict, advice, ev)]


def _has_speedup(ctx: Context) -> bool:
    """Whether the run has a speedup worth a finding (see :func:`speedup`)."""
    if ctx.workers < TWO_WORKERS:
        return ctx.window.length > 0 and ctx.serial_time >= SIDE_BY_SIDE_MIN_SHARE * ctx.window.length
    return driver_time(ctx.trace).ran_in_parallel
