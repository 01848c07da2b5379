"""Exercise ``as-completed`` (Course 1, lesson 3): handle each result as soon as it finishes.

Starter cell (graded ``not yet``: the loop waits in submission order, on the slow first task)::

    %%eugo --exercise as-completed
    import time
    from eugo_lab import hpc

    @hpc.remote
    def measure(i):
        time.sleep(0.4 if i == 0 else 0.03)   # the first task is the slow one
        return i * 10

    def handle(r):          # the driver's own work on each result
        time.sleep(0.02)
        return r + 1

    futures = [measure.remote(i) for i in range(10)]
    handled = []
    for f in futures:
        handled.append(handle(hpc.get(f)))

Reference solution (same first lines, then)::

    futures = [measure.remote(i) for i in range(10)]
    handled = []
    for f in hpc.as_completed(futures):
        handled.append(handle(hpc.get(f)))

Criteria: ``handled`` holds ``i * 10 + 1`` for i in range(10) (any order); 10 ``measure``
tasks ran; ``handled`` holds ``handle(r)`` (``r + 1``) of each value those tasks returned
(their traced digests) and the cell took their values with get(); no Submission order
finding; the driver took a result by itself (a get() of one future) before the last one
arrived (so not one ``hpc.get`` of all of them first, with or without an ``as_completed``
loop that takes nothing). On 1 worker tasks finish in
submission order, so the run cannot show the difference: there the check needs the
results taken in completion order (``hpc.as_completed`` or ``hpc.wait``) and says so.
"""

from __future__ import annotations

from eugo_lab.analysis.findings import Code
from eugo_lab.exercises import derivation, measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise
from eugo_lab.units import fmt_source as display_source

N = 10
FUNCTION = "measure"
# What the driver's calls are named in the trace when they take results as they finish.
COMPLETION_ORDER = ("as_completed", "wait")
# How each completion-order call is named in the passing line.
TAKEN_BY = {"as_completed": "hpc.as_completed", "wait": "hpc.wait"}


_SOLUTION = ("futures = [measure.remote(i) for i in range(10)]\nhandled = []\n"
             "for f in hpc.as_completed(futures):\n    handled.append(handle(hpc.get(f)))")
HINTS = {
    DEFAULT: Hint("Submit the 10 calls first, then loop over the futures in the order they finish "
                  "(as_completed hands you each one as soon as its task is done) and handle each result there.",
                  _SOLUTION),
    "results": Hint("`handled` must hold handle() of every one of the 10 results: get the value of each future "
                    "and append what handle returns for it.", _SOLUTION),
    "decoy": Hint("Append to `handled` what handle returns for each value get() gives you in the loop, one "
                  "for each of the 10 tasks, instead of a list computed here in the notebook.", _SOLUTION),
    "not-taken": Hint("Take each task's value with get() inside the as_completed loop and handle it there; "
                      "a list computed here beside the tasks does not count.", _SOLUTION),
    "local": Hint("Submit each of the 10 calls as a task with .remote and keep the futures in a list.", _SOLUTION),
    "submission-order": Hint("Loop over the futures in completion order instead of list order: as_completed "
                             "yields each future as its task finishes, so a fast result is handled while the slow "
                             "first task still runs.", _SOLUTION),
    "all-at-once": Hint("Do not wait for all results with one get() before handling any: take them one at a time "
                        "as they finish, with as_completed, and handle each in the loop.", _SOLUTION),
}


@exercise("as-completed", lesson="01-distributed-python/03-futures-as-arguments-and-as-completed.ipynb",
          title="Process results as they finish", hints=HINTS)
def as_completed(a: Attempt) -> Verdict:
    """Grade a results loop: every result handled, taken in completion order, the first before the last arrived."""
    handled = a.require("handled")
    expected = [i * 10 + 1 for i in range(N)]
    try:
        got = sorted(handled)
    except TypeError:
        got = None
    if got is None or not measure.same_within_tolerance(got, expected):
        return a.not_yet(f"`handled` does not hold handle's answer for each of the {N} results (measure's value "
                         f"plus 1: 1, 11, 21, ..., {(N - 1) * 10 + 1}, in any order).", mistake="results")
    n = measure.tasks(a.trace, FUNCTION)
    if n < N:
        return a.not_yet(f"only {n} of the {N} calls ran as {FUNCTION} tasks; the others ran here in the "
                         "notebook.", mistake="local")
    came = derivation.mapped(handled, a.trace, FUNCTION, lambda r: r + 1, name="handled", how="handle()")
    if not came:
        return a.not_yet(f"{came.why}: the right answers were computed here in the notebook, while the tasks "
                         "computed something else.", mistake="decoy")
    taken = measure.values_taken(a.trace)
    if not taken:
        return a.not_yet(f"`handled` holds the right answers, but the cell never took a {FUNCTION} task's value "
                         "with get(), so they were computed here in the notebook beside the tasks.",
                         mistake="not-taken")
    order = a.report.finding(Code.SUBMISSION_ORDER)
    if order is not None:
        where = display_source(order.evidence["source"])
        return a.not_yet(f"your loop called get() at {where} in submission order: it waited for the slow first "
                         "task while later results were already done, and handled them only after it (the "
                         "Submission order finding).", mistake="submission-order")
    last = measure.last_received(a.trace, FUNCTION)
    early = measure.taken_singly_before(a.trace, last)
    if not early:
        many = [w for w in measure.waits(a.trace) if w[0] in measure.TAKING and w[1] > 1]
        at = f" ({many[0][0]}() of {many[0][1]} futures at {many[0][2]})" if many else ""
        loop = (" The as_completed loop took no value itself." if "as_completed" in
                {w[0] for w in measure.waits(a.trace)} else "")
        return a.not_yet(f"the cell took no result by itself before the last task finished: it waited for all "
                         f"{N} results at once{at} and only then handled them, so nothing was handled while the "
                         f"slow task ran.{loop}", mistake="all-at-once")
    kinds = {w[0] for w in measure.waits(a.trace)}
    one_worker = a.workers < 2
    if one_worker and not kinds & set(COMPLETION_ORDER):
        return a.not_yet("this run had 1 worker, where tasks finish in the order they were submitted, so waiting "
                         "in submission order costs nothing here; on 2 or more workers the slow first task would "
                         "hold the loop, and the results were not taken in completion order.",
                         mistake="submission-order")
    by = next((TAKEN_BY[k] for k in COMPLETION_ORDER if k in kinds), None)
    how = f"in completion order by {by}" if by else "one get() at a time"
    note = " (1 worker: checked by the way results were taken)" if one_worker else ""
    return a.passed(f"all {len(handled)} answers in `handled` are handle() of the {n} values the {FUNCTION} tasks "
                    f"returned",
                    f"the first result was taken by itself before the last task finished{note}",
                    f"results taken {how}; no Submission order finding",
                    details=(f"{early} results taken one at a time before the last task finished",
                             f"{len(measure.waits(a.trace))} waits by the driver",
                             f"{a.workers} worker{'s' if a.workers != 1 else ''} in this run"))
