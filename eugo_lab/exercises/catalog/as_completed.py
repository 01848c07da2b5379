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
tasks ran; no Submission order finding; the driver handled a result before the last one
arrived (so not one ``hpc.get`` of all of them first). On 1 worker tasks finish in
submission order, so the run cannot show the difference: there the check needs the
results taken in completion order (``hpc.as_completed`` or ``hpc.wait``) and says so.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis.findings import Code
from eugo_lab.exercises import measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise
from eugo_lab.units import fmt_source as display_source

N = 10
FUNCTION = "measure"
# What the driver's calls are named in the trace when they take results as they finish.
COMPLETION_ORDER = ("as_completed", "wait")
# Clock reads of one driver this close are "the same moment".
_EPS = 1e-6


_SOLUTION = ("futures = [measure.remote(i) for i in range(10)]\nhandled = []\n"
             "for f in hpc.as_completed(futures):\n    handled.append(handle(hpc.get(f)))")
HINTS = {
    DEFAULT: Hint("Submit the 10 calls first, then loop over the futures in the order they finish "
                  "(as_completed hands you each one as soon as its task is done) and handle each result there.",
                  _SOLUTION),
    "results": Hint("`handled` must hold handle() of every one of the 10 results: get the value of each future "
                    "and append what handle returns for it.", _SOLUTION),
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
    if got is None or not measure.same_result(got, expected):
        return a.not_yet(f"`handled` does not hold handle's answer for each of the {N} results (measure's value "
                         f"plus 1: 1, 11, 21, ..., {(N - 1) * 10 + 1}, in any order).", mistake="results")
    n = measure.tasks(a.trace, FUNCTION)
    if n < N:
        return a.not_yet(f"only {n} of the {N} calls ran as {FUNCTION} tasks; the others ran here in the "
                         "notebook.", mistake="local")
    order = a.report.finding(Code.SUBMISSION_ORDER)
    if order is not None:
        where = display_source(order.evidence["source"])
        return a.not_yet(f"your loop called get() at {where} in submission order: it waited for the slow first "
                         "task while later results were already done, and handled them only after it (the "
                         "Submission order finding).", mistake="submission-order")
    b = a.trace.blocks
    last = float(np.nanmax(a.trace.tasks["received"]))
    ends = np.asarray(b["end"])
    if not len(ends) or float(ends.min()) >= last - _EPS:
        waited = [w for w in measure.waits(a.trace) if w[1] > 1]
        at = f" ({waited[0][0]}() at {waited[0][2]})" if waited else ""
        return a.not_yet(f"the cell waited for all {N} results at once{at} and only then handled them, so nothing "
                         "was handled while the slow task ran.", mistake="all-at-once")
    kinds = {w[0] for w in measure.waits(a.trace)}
    one_worker = a.workers < 2
    if one_worker and not kinds & set(COMPLETION_ORDER):
        return a.not_yet("this run had 1 worker, where tasks finish in the order they were submitted, so waiting "
                         "in submission order costs nothing here; on 2 or more workers the slow first task would "
                         "hold the loop, and the results were not taken in completion order.",
                         mistake="submission-order")
    how = "hpc.as_completed" if "as_completed" in kinds else "completion order"
    note = " (1 worker: checked by the way results were taken)" if one_worker else ""
    return a.passed(f"all {N} results handled; the first was handled before the last task finished{note}",
                    f"results taken in {how}; no Submission order finding",
                    details=(f"{len(measure.waits(a.trace))} waits by the driver",
                             f"{a.workers} worker{'s' if a.workers != 1 else ''} in this run"))
