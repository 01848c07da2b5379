"""Exercise ``batching`` (Course 1, lesson 5): send thousands of tiny items in batches, not one task each.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.items``, 3,000
numbers in the lesson; a passing cell is run again on a hidden case of 1,200-1,500 other numbers.

Starter cell (graded ``not yet``: 3,000 tasks, each costing more to schedule than to run)::

    %%eugo --exercise batching
    from eugo_lab import exercises, hpc

    p = exercises.problem("batching")   # this exercise's inputs: p.items, the numbers to score

    @hpc.remote
    def score(x):
        return sum((x * k) % 7 for k in range(200))    # about 20 microseconds of work

    results = hpc.get([score.remote(x) for x in p.items])

Reference solution (same first lines, then)::

    results = hpc.get(hpc.map(score, p.items))     # batch="auto" sizes the batches

Criteria, on the inputs the run was handed: ``results`` equals ``score(x)`` for x in
``p.items``, computed here, in order; ``score`` tasks ran, and ``results`` is what they
returned, in item order (:func:`~eugo_lab.exercises.derivation.listed`: a list scored in the
notebook beside a decoy call fails), each score the very object get() handed over (an item of a
batch's list counts: :func:`~eugo_lab.exercises.steps.fetched`); at least ``MIN_ITEMS_PER_TASK``
score items per dispatched ``score`` task on average (tasks and ``hpc.map`` batches counted from
the trace, other functions' not); at least ``BATCHES_PER_WORKER`` batches per worker, counted for 2 workers when
the run had 1 (so the cell also spreads on more). Then the same on the hidden case: a batch
size written into the cell that leaves too few batches for its smaller input fails there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from eugo_lab.analysis.findings import BATCHES_PER_WORKER, Code
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise

N = 3000
# The hidden case: 40-50% of the lesson's items, so a passing cell costs at most ~1.5x; still over 100
# items per worker-batch pair, so hpc.map's automatic sizing passes there as it does in the lesson.
HIDDEN_SIZES = range(1200, 1501)
FUNCTION = "score"
# A task round trip costs ~0.1-0.5 ms on the local pool and an item here ~20 us: with 10 items
# per task or more, each item's share of the overhead is at most about its own work.
# (hpc.map's batch="auto" leaves about 2 batches per worker in flight to the end, so it always
# passes the batches-per-worker criterion below; items this small make its batches tens of items.)
MIN_ITEMS_PER_TASK = 10


@problems.declare("batching")
@dataclass(frozen=True, repr=False)
class BatchingProblem(problems.Problem):
    """The numbers to score: 3,000 in the lesson, 1,200-1,500 in the hidden case, none a multiple of 7.

    A multiple of 7 scores 0; any other number about 600 (``(x * k) % 7`` runs through every residue),
    never one of the ints CPython shares, so the grader can tell the very scores get() handed over
    from equal ones computed in the notebook (:func:`~eugo_lab.exercises.steps.fetched`).
    """

    items: tuple[int, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> BatchingProblem:
        """Numbers under a million, none a multiple of 7, from ``rng``; the hidden case's count differs."""
        n = rng.choice(HIDDEN_SIZES) if hidden else N
        return cls(tuple(7 * rng.randrange(142_857) + rng.randrange(1, 7) for _ in range(n)))


def score_of(x: int) -> int:
    """What ``score(x)`` returns, computed here for the reference."""
    return sum((x * k) % 7 for k in range(200))


_SOLUTION = "results = hpc.get(hpc.map(score, p.items))     # batch=\"auto\" sizes the batches"
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
                            "results = hpc.get(hpc.map(score, p.items, batch=\"auto\"))"),
    problems.CARRY_OVER: Hint("Give map p.items, the exercise's inputs, and leave the batch size to it (or compute "
                              "it from the number of items) instead of writing numbers into the cell; keep in "
                              "`results` what get() returns.", "p = exercises.problem(\"batching\")\n" + _SOLUTION),
}


@exercise("batching", lesson="01-distributed-python/05-task-size-and-batching.ipynb",
          title="Batch thousands of tiny items", hints=HINTS)
def batching(a: Attempt) -> Verdict:
    """Grade batching: the right results from few enough tasks, and enough batches for every worker."""
    items = problems.given(a).items
    results = a.require("results")
    try:
        got = results if isinstance(results, list) else list(results)
    except TypeError:
        got = None
    if got is None or not measure.same_within_tolerance(got, [score_of(x) for x in items]):
        return a.not_yet(f"`results` is not score of each of the {len(items)} items in order.", mistake="results")
    # Technique, not name: score's work sent as hand-made batches (a task of the cell that calls it) counts.
    fn = steps.task_function(a, FUNCTION)
    units = len(measure.dispatch_units(a.trace, fn))
    if units == 0:
        steps.tasks_ran(a, FUNCTION, f"the scores of the {len(items)} items")
    came = derivation.returned_by(results, a.trace, fn, name="results")
    steps.from_tasks(a, came, fn)
    steps.fetched(a, results, fn, "results", mistake="not-from-tasks")
    scored = len(items)  # every item's score is in `results`, and `results` came from these tasks
    per_task = scored / units
    if per_task < MIN_ITEMS_PER_TASK:
        tiny = a.report.finding(Code.TASKS_TOO_SMALL)
        return a.not_yet(f"{units} tasks for {scored} items: one task per item, so every item paid a task's "
                         "scheduling overhead, which is more than its work.", mistake="one-per-item",
                         details=(f"Scheduling overhead finding: {'yes' if tiny is not None else 'no'}",))
    w = max(a.workers, 2)
    need = BATCHES_PER_WORKER * w
    if units < need:
        only = "only 1 worker could get work" if units == 1 else f"at most {units} workers could get work"
        on = f"{w} workers" + (" (counted for 2: this run had 1)" if a.workers < 2 else "")
        return a.not_yet(f"all {scored} items went in {measure.plural(units, 'task')}, so {only}; at least "
                         f"{BATCHES_PER_WORKER} batches per worker ({need} on {on}) keep every worker busy, which "
                         f"means batches of at most {scored // need} items.", mistake="too-few-batches")
    return a.passed(f"{scored} items in {units} {fn} tasks: {per_task:.0f} items per task on average (at least "
                    f"{MIN_ITEMS_PER_TASK}) and {units / w:.1f} batches per worker on {w} workers (at least "
                    f"{BATCHES_PER_WORKER})",
                    f"`results` is the {scored} results the {fn} tasks returned, in item order, and equals "
                    "the reference")
