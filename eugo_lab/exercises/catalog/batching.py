"""Exercise ``batching`` (Course 1, lesson 5): send thousands of tiny items in batches, not one task each.

Starter cell (graded ``not yet``: 3,000 tasks, each costing more to schedule than to run)::

    %%eugo --exercise batching
    from eugo_lab import hpc

    @hpc.remote
    def score(x):
        return sum((x * k) % 7 for k in range(200))    # about 20 microseconds of work

    items = range(3000)
    results = hpc.get([score.remote(x) for x in items])

Reference solution (same first lines, then)::

    results = hpc.get(hpc.map(score, items))     # batch="auto" sizes the batches

Criteria: ``results`` equals ``score(x)`` for x in range(3000), computed here, in order;
``score`` tasks ran, and ``results`` is what they returned, in item order
(:func:`~eugo_lab.exercises.derivation.listed`: a list scored in the notebook beside a decoy
call fails); at least ``MIN_ITEMS_PER_TASK`` score items per dispatched ``score`` task on
average (tasks and ``hpc.map`` batches counted from the trace, other functions' not); at least
``BATCHES_PER_WORKER`` batches per worker, counted for 2
workers when the run had 1 (so the cell also spreads on more).
"""

from __future__ import annotations

from eugo_lab.analysis.findings import BATCHES_PER_WORKER, Code
from eugo_lab.exercises import derivation, measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise

N = 3000
FUNCTION = "score"
# A task round trip costs ~0.1-0.5 ms on the local pool and an item here ~20 us: with 10 items
# per task or more, each item's share of the overhead is at most about its own work.
# (hpc.map's batch="auto" leaves about 2 batches per worker in flight to the end, so it always
# passes the batches-per-worker criterion below; items this small make its batches tens of items.)
MIN_ITEMS_PER_TASK = 10


def score_of(x: int) -> int:
    """What ``score(x)`` returns, computed here for the reference."""
    return sum((x * k) % 7 for k in range(200))


_SOLUTION = "results = hpc.get(hpc.map(score, items))     # batch=\"auto\" sizes the batches"
HINTS = {
    DEFAULT: Hint("Send the items in batches instead of one task each: map sends many items per task and sizes "
                  "the batches for your workers.", _SOLUTION),
    "results": Hint("`results` must be score of every item, in the items' order: get() on the futures, or on "
                    "map's result, keeps that order.", _SOLUTION),
    "local": Hint("Send the items to the workers; map runs score over all of them as tasks, in batches.",
                  _SOLUTION),
    "not-from-tasks": Hint("Make `results` what the score tasks returned: get() on map's result gives every "
                           "item's score in order; a list computed here in the notebook does not count.", _SOLUTION),
    "one-per-item": Hint("Stop submitting one task per item: give map the function and all items, and let it "
                         "group them into batches of many items.", _SOLUTION),
    "too-few-batches": Hint("Leave the batch size to map (its default, auto, keeps about two batches per worker) "
                            "or choose a size small enough that every worker gets several batches.",
                            "results = hpc.get(hpc.map(score, items, batch=\"auto\"))"),
}


@exercise("batching", lesson="01-distributed-python/05-task-size-and-batching.ipynb",
          title="Batch thousands of tiny items", hints=HINTS)
def batching(a: Attempt) -> Verdict:
    """Grade batching: the right results from few enough tasks, and enough batches for every worker."""
    results = a.require("results")
    if not measure.same_within_tolerance(list(results) if not isinstance(results, list) else results,
                               [score_of(x) for x in range(N)]):
        return a.not_yet(f"`results` is not score of each of the {N} items in order.", mistake="results")
    units = len(measure.dispatch_units(a.trace, FUNCTION))
    if units == 0:
        others = {f: k for f, k in a.trace.task_counts().items() if k}
        ran = (" (the tasks that ran were " + ", ".join(f"{measure.plural(k, f + ' task')}" for f, k in others.items())
               + ")") if others else ""
        return a.not_yet(f"no {FUNCTION} task ran on a worker{ran}: the {N} items were scored here in the notebook.",
                         mistake="local")
    came = derivation.listed(results, a.trace, FUNCTION, name="results")
    if not came:
        return a.not_yet(f"{came.why}: the graded list must be what the tasks returned.", mistake="not-from-tasks")
    items = measure.tasks(a.trace, FUNCTION)
    per_task = items / units
    if per_task < MIN_ITEMS_PER_TASK:
        tiny = a.report.finding(Code.TASKS_TOO_SMALL)
        return a.not_yet(f"{units} tasks for {items} items: one task per item, so every item paid a task's "
                         "scheduling overhead, which is more than its work.", mistake="one-per-item",
                         details=(f"Scheduling overhead finding: {'yes' if tiny is not None else 'no'}",))
    w = max(a.workers, 2)
    need = BATCHES_PER_WORKER * w
    if units < need:
        only = "only 1 worker could get work" if units == 1 else f"at most {units} workers could get work"
        on = f"{w} workers" + (" (counted for 2: this run had 1)" if a.workers < 2 else "")
        return a.not_yet(f"all {items} items went in {measure.plural(units, 'task')}, so {only}; at least "
                         f"{BATCHES_PER_WORKER} batches per worker ({need} on {on}) keep every worker busy, which "
                         f"means batches of at most {items // need} items.", mistake="too-few-batches")
    return a.passed(f"{items} items in {units} {FUNCTION} tasks: {per_task:.0f} items per task on average (at least "
                    f"{MIN_ITEMS_PER_TASK}) and {units / w:.1f} batches per worker on {w} workers (at least "
                    f"{BATCHES_PER_WORKER})",
                    f"`results` is the {items} results the {FUNCTION} tasks returned, in item order, and equals "
                    "the reference")
