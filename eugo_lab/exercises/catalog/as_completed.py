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
from eugo_lab.exercises.base import Attempt, Verdict, exercise
from eugo_lab.units import fmt_source as display_source

N = 10
FUNCTION = "measure"
# What the driver's calls are named in the trace when they take results as they finish.
COMPLETION_ORDER = ("as_completed", "wait")
# Clock reads of one driver this close are "the same moment".
_EPS = 1e-6


@exercise("as-completed", lesson="01-distributed-python/03-futures-as-arguments-and-as-completed.ipynb",
          title="Process results as they finish")
def as_completed(a: Attempt) -> Verdict:
    """Grade a results loop: every result handled, taken in completion order, the first before the last arrived."""
    handled = a.require("handled")
    expected = [i * 10 + 1 for i in range(N)]
    try:
        got = sorted(handled)
    except TypeError:
        got = None
    if got is None or not measure.same_result(got, expected):
        return a.not_yet(f"`handled` should hold handle(r) for each of the {N} results (measure(i) + 1 = "
                         f"1, 11, 21, ..., {(N - 1) * 10 + 1}, in any order); append handle(hpc.get(f)) for every "
                         "future.")
    n = measure.tasks(a.trace, FUNCTION)
    if n < N:
        return a.not_yet(f"only {n} of the {N} calls ran as {FUNCTION} tasks; submit each one with "
                         f"{FUNCTION}.remote(i) and keep the futures in a list.")
    order = a.report.finding(Code.SUBMISSION_ORDER)
    if order is not None:
        where = display_source(order.evidence["source"])
        return a.not_yet(f"your loop called get() at {where} in submission order: it waited for the slow first "
                         "task while later results were already done, and handled them only after it. Loop over "
                         "hpc.as_completed(futures) to handle each result as it finishes.")
    b = a.trace.blocks
    last = float(np.nanmax(a.trace.tasks["received"]))
    ends = np.asarray(b["end"])
    if not len(ends) or float(ends.min()) >= last - _EPS:
        waited = [w for w in measure.waits(a.trace) if w[1] > 1]
        at = f" ({waited[0][0]}() at {waited[0][2]})" if waited else ""
        return a.not_yet(f"the cell waited for all {N} results at once{at} and only then handled them, so nothing "
                         "was handled while the slow task ran. Take them one at a time as they finish: "
                         "for f in hpc.as_completed(futures): handled.append(handle(hpc.get(f))).")
    kinds = {w[0] for w in measure.waits(a.trace)}
    one_worker = a.workers < 2
    if one_worker and not kinds & set(COMPLETION_ORDER):
        return a.not_yet("this run had 1 worker, where tasks finish in the order they were submitted, so waiting "
                         "in submission order costs nothing here; on 2 or more workers the slow first task would "
                         "hold the loop. Take results with hpc.as_completed(futures) so the same cell handles "
                         "them as they finish anywhere.")
    how = "hpc.as_completed" if "as_completed" in kinds else "completion order"
    note = " (1 worker: checked by the way results were taken)" if one_worker else ""
    return a.passed(f"all {N} results handled; the first was handled before the last task finished{note}",
                    f"results taken in {how}; no Submission order finding",
                    details=(f"{len(measure.waits(a.trace))} waits by the driver",
                             f"{a.workers} worker{'s' if a.workers != 1 else ''} in this run"))
