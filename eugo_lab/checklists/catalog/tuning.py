"""Performance tuning: the usual causes of a slow distributed run, each checked by the analysis' findings.

Every item names the finding codes of :func:`eugo_lab.analysis.analyze` it stands for. An
item is not ok while one of its findings is a problem or a warning (its evidence is the
finding's verdict and what the fix saves); a finding the analysis demoted to a note (its fix
saves under 3% of the run) leaves the item ok and says so. With no such finding, the
evidence gives the numbers of the trace that show the cause is absent.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from eugo_lab.analysis.breakdown import per_task_overhead
from eugo_lab.analysis.findings import BOUND_MIN_ITEM_S, CONTENTION_MIN, GOOD_EFFICIENCY, IO_BOUND_RATIO, Code
from eugo_lab.analysis.report import INFO, NOTE, PROBLEM, WARNING, Report, fmt_pct
from eugo_lab.analysis.timeline import units
from eugo_lab.checklists.model import Checklist, Item, register
from eugo_lab.checklists.subject import Subject
from eugo_lab.tracing.trace import Trace
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s

#: Which finding codes each item stands for (the item ids are the checklist's).
CODES: dict[str, tuple[Code, ...]] = {
    "no-blocking": (Code.BLOCKING,),
    "as-completed": (Code.SUBMISSION_ORDER,),
    "fast-submission": (Code.SLOW_SUBMISSION,),
    "task-size": (Code.TASKS_TOO_SMALL, Code.RECURSION_TOO_FINE),
    "even-tasks": (Code.STRAGGLER, Code.WARM_UP, Code.LONG_TAIL, Code.UNBALANCED_PARTITIONS),
    "parallel-chain": (Code.CRITICAL_PATH,),
    "data-once": (Code.REPEATED_ARGUMENT, Code.SERIALIZATION, Code.CAPTURED_OBJECT, Code.LARGE_RESULTS),
    "io-bound": (Code.IO_BOUND, Code.IO_BOUND_PHASE),
    "contention": (Code.CONTENTION, Code.GIL_WAIT, Code.COMPUTE_BOUND, Code.COMPUTE_BOUND_PHASE),
}


def _clean(item_id: str, tr: Trace, rep: Report) -> str:
    """What the trace shows for an item none of whose findings fired (the learner's numbers)."""
    u = units(tr)
    n, w = len(u), tr.n_workers
    if not n:
        return "the trace has no finished task to look at"
    conc = rep.serial_time / rep.wall_time if rep.wall_time > 0 else 0.0
    body = float(np.median(u.body / np.maximum(u.n_items, 1)))
    if item_id == "no-blocking":
        return (f"{n} tasks ran with an average concurrency of {conc:.2g} on {w} workers; no get() in the "
                "submission loop held them back")
    if item_id == "as-completed":
        gets = int(np.sum(tr.blocks["futures"] == 1))
        return f"{gets} one-future get() calls; none waited on an early task while later results sat ready"
    if item_id == "fast-submission":
        ready = np.sort(u.ready)
        gap = float(np.mean(np.diff(ready))) if n > 1 else 0.0
        return f"{n} tasks were handed out {fmt_s(gap)} apart on average"
    if item_id == "task-size":
        ovh = float(np.median(per_task_overhead(u)))
        return f"the median task body is {fmt_s(float(np.median(u.body)))} against {fmt_s(ovh)} of overhead per task"
    if item_id == "even-tasks":
        med, top = float(np.median(u.body)), float(np.max(u.body))
        return f"the slowest task took {top / med if med > 0 else 1.0:.2g}x the median ({fmt_s(top)} vs {fmt_s(med)})"
    if item_id == "parallel-chain":
        waited = len(set(tr.deps["task"].tolist()))
        if not waited:
            return "no task was passed another task's future: nothing had to wait for another task"
        return (f"{waited} tasks waited on other tasks' results, yet the chain of dependent tasks did not limit "
                "the run")
    if item_id == "data-once":
        ser = float((u.deser + u.ser).sum())
        busy = ser + float(u.body.sum())
        share = ser / busy if busy > 0 else 0.0
        return (f"the largest argument was {fmt_bytes(float(u.bytes_in.max()), '.3g')}; pickling took "
                f"{fmt_pct(share)} of the workers' busy time")
    if item_id == "io-bound":
        cpu = float(u.cpu.sum()) / float(u.body.sum()) if u.body.sum() > 0 else 0.0
        if body < 1e-3:
            return f"tasks of {fmt_s(body)} are too short to tell waiting from computing; nothing waits long"
        return f"tasks used the CPU {fmt_pct(min(cpu, 1.0))} of their run time"
    if item_id == "contention":
        return (f"no function's tasks ran {fmt_pct(CONTENTION_MIN)} slower side by side than alone, and no more "
                f"workers than cores ({w} workers, {tr.meta.get('cores', '?')} cores)")
    raise KeyError(item_id)  # pragma: no cover - every item with CODES has a clean sentence


def _waiting(tr: Trace) -> str:
    """Why the tasks of ``tr`` are waiting, when their bodies (each long enough to tell) mostly did not compute."""
    u = units(tr)
    long = u.body / np.maximum(u.n_items, 1) >= BOUND_MIN_ITEM_S
    body = float(u.body[long].sum())
    if body <= 0:
        return ""
    busy = (float(u.cpu[long].sum()) + float(np.nansum(u.runq[long]))) / body  # waiting for a core is not I/O
    if busy >= IO_BOUND_RATIO:
        return ""
    return (f"tasks used the CPU {fmt_pct(busy)} of their run time: they mostly wait (I/O, sleep, network), so "
            "they are waiting on I/O even where the analysis priced no fix")


def _from_findings(item_id: str) -> Callable[[Subject], tuple[bool | None, str]]:
    codes = CODES[item_id]

    def measure(s: Subject) -> tuple[bool | None, str]:
        rep = s.report
        if rep is None:
            return None, s.no_trace("the run's findings")
        found = [f for f in rep.findings if f.code in codes]
        # compute-bound is advice, not a mistake, unless it says there are more workers than cores
        bad = [f for f in found if f.severity in (PROBLEM, WARNING)]
        if bad:
            f = bad[0]
            saving = f.saving_text()
            more = f" (and {len(bad) - 1} more like it)" if len(bad) > 1 else ""
            return False, f"{f.verdict}{more} {f.advice}" + (f" Fixing it {saving}." if saving else "")
        notes = [f for f in found if f.severity == NOTE]
        if notes:  # the statement is false on this run, even though fixing it would save little here
            return False, f"{notes[0].verdict} Fixing it saves little on this run, yet it is there: {notes[0].advice}"
        if item_id == "io-bound":
            waiting = _waiting(s.trace)
            if waiting:
                return False, waiting
        return True, _clean(item_id, s.trace, rep)

    return measure


def speedup(s: Subject) -> tuple[bool | None, str]:
    """The run's efficiency against the worker count."""
    rep = s.report
    if rep is None:
        return None, s.no_trace("the speedup")
    f = rep.finding(Code.SPEEDUP)
    if f is None:  # the analysis reports no speedup where tasks never ran side by side long enough
        if rep.workers < 2:
            return None, "not measured: 1 worker, and the tasks took too little of the run to replay on 2"
        return False, ("The tasks did not run side by side long enough to have a speedup: most of the run was the "
                       "driver's (see the summary's first line).")
    if rep.workers < 2:
        return None, f"not measured: {f.verdict}"
    return (f.severity == INFO and rep.efficiency >= GOOD_EFFICIENCY), f"{f.verdict} {f.advice}"


def _item(item_id: str, text: str, why: str) -> Item:
    return Item(item_id, text, why, _from_findings(item_id), "trace")


TUNING = register(Checklist(
    id="performance-tuning",
    order=2,  # its place on the course page (courses/index.ipynb)
    title="Performance tuning checklist",
    purpose="Work through the usual causes when a distributed run is slower than expected.",
    aliases=("tuning",),
    items=(
        Item("speedup", "The speedup is close to the worker count",
             "Start from the number: efficiency is the share of the workers' time that did useful work. The items "
             "below say where the rest went.", speedup, "trace"),
        _item("no-blocking", "Every task is submitted before the first get()",
              "A get() inside the loop waits for each task before the next one starts, so the workers take turns."),
        _item("as-completed", "Results are handled as they finish",
              "Reading results in submission order makes the notebook wait on a slow early task while later ones "
              "sit finished."),
        _item("fast-submission", "The driver hands out tasks quickly",
              "While the loop builds each task's input, the workers have nothing to do. Let tasks build their own."),
        _item("task-size", "Each task runs far longer than its overhead",
              "Tiny tasks spend their time being scheduled. Batch them so the work outweighs the trip."),
        _item("even-tasks", "Tasks take about the same time (no stragglers, no long tail)",
              "The run ends when its slowest task ends. One long task keeps the others idle at the end."),
        _item("parallel-chain", "No long chain of tasks that wait on each other",
              "Dependent tasks run one after another; more workers cannot shorten that chain."),
        _item("data-once", "Large data is sent once (hpc.put), not with every task",
              "Every copy is pickled on the driver and unpickled on a worker: time spent on neither side computing."),
        _item("io-bound", "Tasks are not waiting on I/O",
              "A task waiting on a disk or a network holds its worker without using the core."),
        _item("contention", "Workers do not compete for the cores",
              "Two workers with several BLAS threads each, or more workers than cores, slow every task down."),
    ),
))
