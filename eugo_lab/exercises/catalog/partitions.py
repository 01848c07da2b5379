"""Exercise ``partitions`` (Course 1, lesson 7): cut work of uneven cost so that no worker idles.

Row ``n`` of the work takes ``n`` steps, so equal ranges of rows hold unequal work: the last
range of the starter's one-per-worker split holds most of it. The inputs come from the checker
(:mod:`eugo_lab.exercises.problems`): ``p.rows``, how many rows to add up (rows ``0..p.rows-1``),
4,000 in the lesson; a passing cell is run again on a hidden case of 2,000-2,800 rows (at most
half the lesson's steps: the work grows as the square of the rows). Starter cell (graded ``not
yet``: on 2 workers the second range holds three quarters of the work, so the first worker idles
half the run)::

    %%eugo --exercise partitions
    from eugo_lab import exercises, hpc

    p = exercises.problem("partitions")   # this exercise's inputs: p.rows, how many rows to add up

    @hpc.remote(optimize=False)
    def load(start, stop):
        return sum(k * k % 7 for n in range(start, stop) for k in range(n))

    N = p.rows
    workers = hpc.cluster().workers
    cuts = [N * i // workers for i in range(workers + 1)]
    total = sum(hpc.get([load.remote(a, b) for a, b in zip(cuts, cuts[1:])]))

Reference solution (same first lines, then)::

    cuts = [N * i // (8 * workers) for i in range(8 * workers + 1)]
    pieces = sorted(zip(cuts, cuts[1:]), reverse=True)
    total = sum(hpc.get([load.remote(a, b) for a, b in pieces]))

Ranges cut so they hold equal work (boundaries at ``N * sqrt(i / k)``) pass too, as do
enough equal ranges in row order.

Criteria, on the rows the run was handed, in the order checked, each a count or a value (never a
duration, so a busy machine gives the verdict an idle one does): ``total`` equals the sum over
rows ``0..p.rows-1``, computed here (from the checker's own copy, never an ``N`` of the
notebook); ``load`` tasks ran; the ``load`` they ran is the lesson's, unchanged (compared by
its compiled instructions, not its name: :func:`~eugo_lab.exercises.steps.lesson_function`);
``total`` is the sum of what those tasks returned (:func:`~eugo_lab.exercises.derivation.combined`); at most
``max(MAX_TASKS, MAX_PER_WORKER * workers)`` tasks; at least 2 of them submitted with no
wait between them; and the pieces, handed out in the order submitted to 2 workers (this run's
workers when it had more), each to the least-loaded one as the pool's queue does, keep the
workers busy at least ``MIN_BUSY`` of the run (:func:`~eugo_lab.exercises.measure.packed_speedup`
over the worker count). Each piece's work is read off its own result: ``k * k % 7`` runs
through 0, 1, 4, 2, 2, 4, 1 (sum 14) every 7 numbers, so row ``n``'s ``n`` steps return about
``2n`` and a piece returns about twice the steps it took, whatever the machine's speed (the
replay needs only the pieces' relative sizes, so the results are its weights as they are).
Then the same on the hidden case: a row count, cut or total written into the cell does not
carry over, while every split that spreads the work (several ranges per worker, the costly
ones first, or cuts of equal work) passes there too (the shares of the work are the same
at any row count).

The Long tail and Straggler findings weigh measured times, so the verdict reports them as
measured details only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from eugo_lab.analysis.findings import Code
from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise, submit_all_first

FUNCTION = "load"
# The lesson's load, as its starter cell defines it: the tasks must run it unchanged (compared by code, not name),
# since each piece's work is read off what it returns.
LOAD_SOURCE = "def load(start, stop):\n    return sum(k * k % 7 for n in range(start, stop) for k in range(n))\n"
ROWS = 4_000
# The hidden case's rows: their steps grow as the square of the rows, so 2,800 rows hold at most half the
# lesson's (a pass costs at most ~1.5x), and 2,000 still take each piece well over the round trip. Where each
# range's share of the work lies does not depend on the count, so a split that spreads the lesson's rows spreads
# these too.
HIDDEN_ROWS = range(2_000, 2_801)
# The share of the run the workers must be busy, replayed by work. On 2 workers one equal range
# each gives 67% (1/4 and 3/4 of the work), four in row order 80%, eight in row order 89%, and
# any split submitted costly rows first or cut to equal work about 100%: 85% asks for several
# pieces per worker, or pieces of equal work, and leaves room for rounding.
MIN_BUSY = 0.85
# 4,000 rows hold about 8 million steps (~0.4 s of plain Python here): 100 pieces keep the average
# piece near 4 ms, ten times the local pool's round trip (0.1-0.5 ms); far more pieces and the trip
# becomes a large share of each. A bigger cluster needs more pieces: 16 per worker stay allowed.
MAX_TASKS = 100
MAX_PER_WORKER = 16


def reference_total(rows: int = ROWS) -> int:
    """``sum(k * k % 7 for n in range(rows) for k in range(n))``, counted per ``k`` (in ``rows - 1 - k`` rows)."""
    return sum((k * k % 7) * (rows - 1 - k) for k in range(rows))


@problems.declare("partitions")
@dataclass(frozen=True, repr=False)
class PartitionsProblem(problems.Problem):
    """How many rows to add up, rows ``0..rows-1``: 4,000 in the lesson, 2,000-2,800 in the hidden case."""

    rows: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> PartitionsProblem:
        """The lesson's 4,000 rows; hidden: a count drawn from ``rng``, never the lesson's."""
        return cls(rng.choice(HIDDEN_ROWS) if hidden else ROWS)


_SOLUTION = ("cuts = [N * i // (8 * workers) for i in range(8 * workers + 1)]  # eight ranges per worker\n"
             "pieces = sorted(zip(cuts, cuts[1:]), reverse=True)  # the costly last rows first\n"
             "total = sum(hpc.get([load.remote(a, b) for a, b in pieces]))")
HINTS = {
    DEFAULT: Hint("Cut the rows into several ranges per worker instead of one, and submit the ranges of costly "
                  "late rows first, so a worker that finishes early takes another piece and none is left working "
                  "alone at the end.", _SOLUTION),
    "results": Hint("The ranges must cover every row from 0 to N exactly once: each starts where the previous one "
                    "stopped, and the last stops at N.", _SOLUTION),
    "local": Hint("Submit each range as a load task with .remote, then add up what the tasks return.", _SOLUTION),
    "not-from-tasks": Hint("Add up what the load tasks returned: `total` is the sum of the results that get() gives "
                           "back for your ranges, not a number computed here in the notebook or kept from an "
                           "earlier cell.", _SOLUTION),
    "too-small": Hint("Cut the rows less finely: eight or so ranges per worker spread the work well, and each "
                      "still holds enough rows to be worth its trip.", _SOLUTION),
    "uneven": Hint("Equal ranges of rows are not equal work here: the late rows cost the most. Cut more ranges "
                   "than there are workers (several each) and submit the costly ones first, or place the cuts so "
                   "every range holds the same number of steps.", _SOLUTION),
    "serial": submit_all_first("range", _SOLUTION),
    "changed": Hint("Keep the lesson's load function as it is (`def load(start, stop)`): change only how the rows "
                    "are cut into ranges, and let the load tasks do the adding.", _SOLUTION),
    problems.CARRY_OVER: Hint("Take the number of rows from p.rows, the exercise's inputs, and compute the cuts "
                              "from it and the worker count, instead of writing a row count, cuts or a total into "
                              "the cell; keep in `total` the sum of what get() returns.",
                              "p = exercises.problem(\"partitions\")\nN = p.rows\n" + _SOLUTION),
}


@exercise("partitions", lesson="01-distributed-python/07-partitions.ipynb",
          title="Partition uneven work so no worker idles", hints=HINTS)
def partitions(a: Attempt) -> Verdict:
    """Grade partitioning by work: the right total, from pieces that keep every worker busy to the end."""
    total = a.require("total")
    rows = problems.given(a).rows
    steps.right_result(measure.same_within_tolerance(total, reference_total(rows)), "total",
                       f"the sum over all {rows:,} rows", "the ranges must cover every row exactly once (each starts "
                       "where the previous one stopped, the last stops at the end)")
    fn = steps.task_function(a, FUNCTION)  # load's tasks, or the cell's own batches of load calls
    n = steps.tasks_ran(a, fn, "the total")
    steps.lesson_function(a, fn, FUNCTION, LOAD_SOURCE)  # each piece's work is read off what load returns
    steps.from_tasks(a, derivation.combined(total, a.trace, fn, sum, name="total", how="summed"), FUNCTION)
    w = max(a.workers, 2)
    on = f"{w} workers" + (" (this run had 1 worker, so the check counts 2)" if a.workers < 2 else "")
    limit = max(MAX_TASKS, MAX_PER_WORKER * w)
    tail = [name for code, name in TIMED.items() if a.report.finding(code) is not None]
    details = (f"timing findings: {', '.join(tail) if tail else 'none'}",
               f"measured: workers computing {a.report.efficiency:.0%} of the run's time")
    if n > limit:
        return a.not_yet(f"{n:,} tasks for {rows:,} rows: so many pieces that each carries little work beside its "
                         f"fixed trip to a worker; up to {limit} pieces on {on} each stays worth sending.",
                         mistake="too-small", details=details)
    together = measure.submitted_together(a.trace, fn)
    if n > 1 and together < 2:  # one task has nothing to wait between: it is graded on the work it holds
        return a.not_yet(f"the cell waited after each of the {n} {fn} tasks it submitted, before submitting "
                         "the next, so they ran one after another.", mistake="serial", details=details)
    work = [float(v) for v in derivation.scalar_values(a.trace, fn) or []]
    busy = measure.packed_speedup(work, w) / w
    biggest = max(work) / sum(work) if sum(work) > 0 else 1.0
    if busy < MIN_BUSY:
        return a.not_yet(f"your {measure.plural(n, 'piece')}, handed out in the order submitted to {on}, "
                         f"{'keeps' if n == 1 else 'keep'} them "
                         f"busy {busy:.0%} of the run, under {MIN_BUSY:.0%}: the largest piece holds {biggest:.0%} "
                         "of the work (read from what each task returned), and the late rows cost the most, so "
                         "equal ranges of rows are not equal work and the workers without the costly pieces sit "
                         "idle at the end.", mistake="uneven", details=details)
    return a.passed(f"{n} {fn} tasks, {n / w:.1f} per worker on {on}; the largest holds {biggest:.0%} of the "
                    "work (read from what each task returned)",
                    f"{together} tasks were submitted with no wait between them; replayed by the work each piece's "
                    f"result shows, handed out in the order submitted, the pieces would keep the workers busy "
                    f"{busy:.0%} of a run (at least {MIN_BUSY:.0%}), {fmt_x(measure.packed_speedup(work, w))} one "
                    "worker's work (the measured share, which a busy machine lowers, is in the details)",
                    f"`total` is the sum of the {n} tasks' results and equals the sum over all {rows:,} rows",
                    details=(*details, f"replayed speedup by measured time {fmt_x(a.replayed_speedup(w))}"))


TIMED = {Code.STRAGGLER: "Straggler", Code.LONG_TAIL: "Long tail"}
