"""Exercise ``straggler`` (Course 1, lesson 6): split the oversized input so no task dominates.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.ranges``, the
``(start, stop)`` ranges of numbers to add up. In the lesson seven ordinary ranges of 200,000
numbers and, last, a giant one twenty times their size; a passing cell is run again on a hidden
case of 5 or 6 ordinary ranges of 100,000-140,000 numbers from another start, with a giant range
10-14 times their size somewhere before the last.

Starter cell (graded ``not yet``: the last range is 20 times the others and ends alone)::

    %%eugo --exercise straggler
    from eugo_lab import exercises, hpc

    p = exercises.problem("straggler")   # this exercise's inputs: p.ranges, the (start, stop) ranges to add up

    @hpc.remote(optimize=False)
    def work(start, stop):
        return sum(i * i % 7 for i in range(start, stop))

    total = sum(hpc.get([work.remote(s, e) for s, e in p.ranges]))

Reference solution (same first lines, then)::

    size = min(e - s for s, e in p.ranges)   # an ordinary range's size
    pieces = [(a, min(a + size, e)) for s, e in p.ranges for a in range(s, e, size)]
    total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))

Criteria, on the ranges the run was handed, in the order checked, every one a count or a value
(never a duration, so a busy machine gives the same verdict as an idle one): ``total`` equals
the sum over every range of ``p.ranges`` computed here (the checker's own copy, never a
``ranges`` of the notebook); ``work`` tasks ran; the ``work`` they ran is the lesson's,
unchanged (compared by its compiled instructions, not its name:
:func:`~eugo_lab.exercises.steps.lesson_function`); ``total`` is the sum of what those tasks
returned (:func:`~eugo_lab.exercises.derivation.combined`), so a total computed in the notebook
beside a decoy call fails; at most ``MAX_TASKS`` tasks (pieces too small cost more to schedule
than to run); no task covered over ``STRAGGLER_RATIO`` times the numbers of the median task,
sizes read off the tasks' own results (``work`` returns about ``PER_NUMBER`` per number it
covers); at least 2 tasks were submitted with no wait between them (a loop that waits for each
piece runs them one at a time); and the pieces, packed on 2 workers (this run's workers when it
had more) in the order they were submitted, keep them busy for at least ``MIN_REPLAYED_SPEEDUP``
(:func:`~eugo_lab.exercises.measure.packed_speedup`). Then the same on the hidden case: a cell
that splits only the last range (the lesson's giant), or cuts pieces of a size written in that
is far from an ordinary range's there, leaves uneven pieces, and is told so in words that hold
nothing of that case
(:func:`~eugo_lab.exercises.problems.explained_on_hidden`).

The Straggler, Long tail and Partition findings measure time, so they are reported in the
verdict's measured details, never used as its criteria: under heavy load a preempted piece of
an even split can run several times its siblings' time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.findings import STRAGGLER_RATIO, Code
from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise, submit_all_first

# The lesson's case: 7 ordinary ranges of 200,000 numbers from 0, then the giant one, 20 of them.
PIECE, N_ORDINARY, GIANT_FACTOR = 200_000, 7, 20
END = (N_ORDINARY + GIANT_FACTOR) * PIECE
# The hidden case: 5 or 6 ordinary ranges of 100,000-140,000 numbers and a giant 10-14 times their size, at
# most 2.8 million numbers against the lesson's 5.4 million, so a passing cell costs about 1.5x. Split into
# ordinary pieces that is still 15 or more equal tasks (packed at 1.88x or more on 2 workers), and the
# giant left whole is still over STRAGGLER_RATIO times the median: every honest split passes there (pieces of
# the lesson's 200,000 too: at most twice an ordinary range), and leaving the giant whole fails there as in the
# lesson. The giant is never last (the lesson's giant is) and the ranges start elsewhere than 0, so neither
# typed ranges nor a split of only the last one carries over.
HIDDEN_PIECES = (100_000, 120_000, 140_000)
HIDDEN_N_ORDINARY = (5, 6)
HIDDEN_GIANT_FACTORS = range(10, 15)
HIDDEN_STARTS = range(1_000, 5_000_001, 1_000)
FUNCTION = "work"
# The lesson's work, as its starter cell defines it: the tasks must run it unchanged (compared by code, not name),
# since the sizes below are read off what it returns.
WORK_SOURCE = "def work(start, stop):\n    return sum(i * i % 7 for i in range(start, stop))\n"
# 27 pieces of the lesson's case cover its input; 200 tasks of 27,000 numbers are still worth sending, far
# below that the round trip (0.1-0.5 ms) is a large share of every task.
MAX_TASKS = 200
# 27 equal pieces pack on 2 workers at 27/14 = 1.93x, three equal pieces at 1.5x; the giant
# range left whole packs at 27/23 = 1.17x.
MIN_REPLAYED_SPEEDUP = 1.5
# i * i % 7 runs through 0, 1, 4, 2, 2, 4, 1 (sum 14) every 7 numbers: a work task returns 2 per
# number it covers, within 4 either way, so its result tells how many numbers it was given.
PER_NUMBER = 2


@problems.declare("straggler")
@dataclass(frozen=True, repr=False)
class StragglerProblem(problems.Problem):
    """The ``(start, stop)`` ranges to add up, one after another: ordinary ones of one size and a giant one."""

    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> StragglerProblem:
        """The lesson's 7 ordinary ranges from 0 and the giant last; hidden: fewer, smaller, the giant elsewhere."""
        if not hidden:
            start, sizes = 0, [PIECE] * N_ORDINARY + [GIANT_FACTOR * PIECE]
        else:
            piece, n = rng.choice(HIDDEN_PIECES), rng.choice(HIDDEN_N_ORDINARY)
            sizes = [piece] * n
            # At a place before the last ordinary range: a cell that splits only the last range leaves it whole.
            sizes.insert(rng.randrange(n), rng.choice(HIDDEN_GIANT_FACTORS) * piece)
            start = rng.choice(HIDDEN_STARTS)
        ranges = []
        for size in sizes:
            ranges.append((start, start + size))
            start += size
        return cls(tuple(ranges))


def reference_total(end: int = END, start: int = 0) -> int:
    """``sum(i * i % 7 for i in range(start, end))`` in closed form: ``i * i % 7`` repeats every 7 numbers."""
    period = [i * i % 7 for i in range(7)]

    def upto(n: int) -> int:
        full, rest = divmod(n, 7)
        return full * sum(period) + sum(period[:rest])

    return upto(end) - upto(start)


_SOLUTION = ("size = min(e - s for s, e in p.ranges)   # an ordinary range's size\n"
             "pieces = [(a, min(a + size, e)) for s, e in p.ranges for a in range(s, e, size)]\n"
             "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))")
HINTS = {
    DEFAULT: Hint("Cut every range into pieces the size of an ordinary range, so the giant one becomes many "
                  "ordinary tasks, then submit all the pieces and add up their results.", _SOLUTION),
    "results": Hint("The pieces must cover every range exactly once: each piece starts where the previous one "
                    "stopped, and the last stops at the range's end.", _SOLUTION),
    "local": Hint("Submit each piece as a work task with .remote, then add up the results.", _SOLUTION),
    "too-small": Hint("Cut the ranges less finely: pieces of about an ordinary range's size give a few dozen "
                      "tasks, each worth its scheduling.", _SOLUTION),
    "giant": Hint("Split the oversized range (and every range) into pieces of about the ordinary size, so "
                  "no single task holds up the run.", _SOLUTION),
    "not-from-tasks": Hint("Add up what the work tasks returned: `total` is the sum of the results that get() "
                           "gives back for the pieces, not a number computed here in the notebook.", _SOLUTION),
    "serial": submit_all_first("piece", _SOLUTION),
    "changed": Hint("Keep the lesson's work function as it is (`def work(start, stop)` adding up i * i % 7): change "
                    "only how the ranges are cut into pieces, and let the work tasks do the adding.", _SOLUTION),
    problems.CARRY_OVER: Hint("Take the ranges from p.ranges, the exercise's inputs, and cut every one of them "
                              "(not only the last) into pieces of an ordinary range's size computed from them, "
                              "instead of writing ranges or a total into the cell; keep in `total` the sum of what "
                              "get() returns.", "p = exercises.problem(\"straggler\")\n" + _SOLUTION),
}

# A cell that takes its ranges from p but splits only the lesson's giant (the last range), or cuts pieces of a
# size fitted to the lesson's ranges, leaves uneven pieces on the hidden case: say that, not "a value is written
# into the cell" (nothing of the case named).
problems.explained_on_hidden(
    "straggler", "giant",
    "the pieces were not even: one task covered several times the numbers of the median task, or the pieces were "
    "too few to share among the workers. The way the cell cut the ranges (which of them it split, or a piece "
    "size written into the cell) fitted the lesson's inputs, where the oversized range is the last one, but "
    "not these")


@exercise("straggler", lesson="01-distributed-python/06-stragglers.ipynb",
          title="Split the oversized input", hints=HINTS)
def straggler(a: Attempt) -> Verdict:
    """Grade partitioning: the right total from pieces of similar size, neither one giant nor thousands of crumbs."""
    total = a.require("total")
    ranges = problems.given(a).ranges
    piece = int(np.median([e - s for s, e in ranges]))
    steps.right_result(measure.same_within_tolerance(total, sum(reference_total(e, s) for s, e in ranges)), "total",
                       "the sum over all of `p.ranges`", "the pieces must cover every range exactly once (each "
                       "piece starts where the previous one stopped)")
    fn = steps.task_function(a, FUNCTION)  # work's tasks, or the cell's own batches of work calls
    n = steps.tasks_ran(a, fn, "the total")
    steps.lesson_function(a, fn, FUNCTION, WORK_SOURCE)  # what the tasks' results say of their sizes needs it
    steps.from_tasks(a, derivation.combined(total, a.trace, fn, sum, name="total", how="summed"), FUNCTION)
    tiny = a.report.finding(Code.TASKS_TOO_SMALL)
    found = (f"Scheduling overhead finding: {'yes' if tiny is not None else 'no'}",)
    if n > MAX_TASKS:
        return a.not_yet(f"{n} tasks: the pieces are so small that scheduling each one is a large share of its "
                         f"work; the ordinary ranges hold {piece:,} numbers, and under {MAX_TASKS} tasks each is "
                         "worth sending.", mistake="too-small", details=found)
    sizes = covered(a, fn)
    med, largest = float(np.median(sizes)), max(sizes)
    ratio = largest / med if med > 0 else float("inf")
    tail = [name for code, name in TAIL_NAMES.items() if a.report.finding(code) is not None]
    details = (f"timing findings: {', '.join(tail) if tail else 'none'}", *found)
    if ratio > STRAGGLER_RATIO:
        return a.not_yet(f"one {fn} task covered about {_about(largest):,} numbers, {fmt_x(ratio)} the median "
                         f"task's {_about(med):,} (read from what each task returned): the oversized range was left "
                         "whole, so the other workers finished early and waited for it (an ordinary range holds "
                         f"{piece:,} numbers).", mistake="giant", details=details)
    together = measure.submitted_together(a.trace, fn)
    if together < 2:
        return a.not_yet(f"the {n} pieces are even, but the cell waited after each {fn} task it submitted, "
                         "before submitting the next, so they ran one after another.",
                         mistake="serial", details=details)
    w = max(a.workers, 2)
    packed = measure.packed_speedup(sizes, w)
    on = f"on {w} workers" + (" (this run had 1 worker, so the check counts 2)" if a.workers < 2 else "")
    if packed < MIN_REPLAYED_SPEEDUP:
        return a.not_yet(f"the {n} pieces, handed out in the order submitted {on}, keep them busy for only "
                         f"{fmt_x(packed)} one worker's work, under {fmt_x(MIN_REPLAYED_SPEEDUP)}: too few pieces "
                         "to share among the workers.", mistake="giant", details=details)
    low, high = _about(min(sizes)), _about(largest)
    each = f"about {low:,}" if low == high else f"about {low:,} to {high:,}"
    return a.passed(f"{n} {fn} tasks; their results show each covered {each} numbers, "
                    f"the largest {fmt_x(ratio)} the median (at most {STRAGGLER_RATIO:g}x)",
                    f"{together} tasks were submitted with no wait between them; replayed by the numbers their "
                    f"results show, handed out in the order submitted {on}, the pieces would keep them busy for "
                    f"{fmt_x(packed)} one worker's work (at least {fmt_x(MIN_REPLAYED_SPEEDUP)})",
                    f"`total` is the sum of the {n} tasks' results and equals the sum over `p.ranges`",
                    details=(*details, f"replayed speedup by measured time {fmt_x(a.replayed_speedup(w))}"))


TAIL_NAMES = {Code.STRAGGLER: "Straggler", Code.LONG_TAIL: "Long tail", Code.CRITICAL_PATH: "Partition"}


def _about(n: float) -> int:
    """``n`` to 3 significant digits: a size read off a result is exact only to a few numbers."""
    return int(float(f"{n:.3g}"))


def covered(a: Attempt, function: str = FUNCTION) -> list[int]:
    """How many numbers each ``function`` task covered, in task order: its result over :data:`PER_NUMBER`.

    Read off what the tasks returned (the trace keeps scalar results), so the sizes are the
    same however long a busy machine made each task take.
    """
    values = derivation.scalar_values(a.trace, function) or []
    return [int(round(float(v) / PER_NUMBER)) for v in values]
