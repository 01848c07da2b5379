"""Exercise ``fan-out`` (Course 1, lesson 2): submit every task first, then call ``hpc.get`` once.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.xs``, twelve
numbers in the lesson; a passing cell is run again on a hidden case of 4 or 6 other numbers.

Starter cell (graded ``not yet``: the loop waits for each task before submitting the next)::

    %%eugo --exercise fan-out
    import time
    from eugo_lab import exercises, hpc

    p = exercises.problem("fan-out")   # this exercise's inputs: p.xs, the numbers to square

    @hpc.remote
    def slow_square(x):
        time.sleep(0.05)   # stands in for 50 ms of real work
        return x * x

    results = []
    for x in p.xs:
        results.append(hpc.get(slow_square.remote(x)))

Reference solution (same magic; the cell's ``slow_square`` may also come from an earlier cell)::

    ... (the same first lines)
    futures = [slow_square.remote(x) for x in p.xs]
    results = hpc.get(futures)

Criteria, on the inputs the run was handed (``n = len(p.xs)``): ``results`` equals
``[x * x for x in p.xs]`` computed here; all n calls ran as ``slow_square`` tasks;
``results`` holds what those tasks returned, in submission order (their traced digests),
and the cell took all n values with get(); its items are the very objects get() or result()
handed over (:func:`~eugo_lab.exercises.steps.fetched`); no Blocking finding; the driver submitted every
task before its first blocking wait (:func:`eugo_lab.exercises.measure.wait_between_submissions`:
an ``hpc.map`` counts as submitted when called, whatever window its runtime sends at a time); the
replay on 2 workers (on this run's workers when it had more) predicts at least
``MIN_REPLAYED_SPEEDUP``. Then the same on the hidden case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise

N = 12
# The hidden case: 4 or 6 tasks of 50 ms, 2-3 rounds on 2 workers, so a passing cell costs at most ~1.5x;
# an even count keeps both workers busy to the end, and its replay stays near 2x like the lesson's.
HIDDEN_SIZES = (4, 6)
FUNCTION = "slow_square"
# 12 tasks of 50 ms on 2 workers replay at 1.6-2.0x (the low end on freshly started workers);
# waiting for each replays at ~1.0x. 1.3x sits clearly between, whatever the machine's speed
# (the replay keeps the measured durations).
MIN_REPLAYED_SPEEDUP = 1.3


@problems.declare("fan-out")
@dataclass(frozen=True, repr=False)
class FanOutProblem(problems.Problem):
    """The numbers to square: 12 distinct ones from 17-39 in the lesson, 4 or 6 from 40-99 in the hidden case.

    Every square is over 256, so it is never one of the ints CPython shares: the grader can tell the
    very values get() handed over from equal ones computed in the notebook (:func:`~eugo_lab.exercises.steps.fetched`).
    """

    xs: tuple[int, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> FanOutProblem:
        """Distinct numbers (so every square differs), from ranges that never meet: a typed list cannot match."""
        if hidden:
            return cls(tuple(rng.sample(range(40, 100), rng.choice(HIDDEN_SIZES))))
        return cls(tuple(rng.sample(range(17, 40), N)))


_SOLUTION = "futures = [slow_square.remote(x) for x in p.xs]\nresults = hpc.get(futures)"
HINTS = {
    DEFAULT: Hint("Submit all 12 calls first and keep the futures in a list; then wait for the whole list with one "
                  "get(), which returns the values in the order of the list.", _SOLUTION),
    "results": Hint("`results` must be the values of slow_square for every x in p.xs, in that order: get() on "
                    "the list of futures returns them in the list's order.", _SOLUTION),
    "decoy": Hint("Keep in `results` the list get() returns for the futures of p.xs: a list computed "
                  "here in the notebook beside tasks does not count.", _SOLUTION),
    "not-taken": Hint("Take the 12 values with one get() on the list of futures and keep what it returns in "
                      "`results`, instead of computing the list here as well.", _SOLUTION),
    "local": Hint("Put .remote between the function's name and its argument: that submits the call as a task "
                  "and returns a future at once; get() turns the futures into values.", _SOLUTION),
    "blocking-loop": Hint("Take get() out of the loop: let the loop only submit (a list of futures), and call "
                          "get() once, on the whole list, after it.", _SOLUTION),
    "waited-between": Hint("Make every submission before the first get() or wait(): submit all the calls and "
                           "keep the futures in a list, then wait once for the whole list.", _SOLUTION),
    "driver-paced": Hint("Make the loop do nothing but submit: move any other work out of it, before the "
                         "submissions or after the one get().", _SOLUTION),
    problems.CARRY_OVER: Hint("Take the numbers from p.xs, the exercise's inputs, instead of writing numbers or "
                              "squares into the cell, and keep in `results` the list get() returns.",
                              "p = exercises.problem(\"fan-out\")\n" + _SOLUTION),
}


def waited_between(w: measure.WaitBetween, in_flight: int) -> str:
    """The ``not yet`` for a wait between two submissions, from the record: which call, where, after how many.

    ``in_flight``: the most tasks out at once (:func:`~eugo_lab.exercises.measure.max_in_flight`); "never all in
    flight together" is said only when it was fewer than all (threads that each submit and wait can have them all).
    """
    # An as_completed() wait is on none in particular: the record names the future it yielded.
    on = (f"that yielded task {w.task}" if w.task and w.kind == "as_completed" else
          f"on task {w.task}" if w.task else f"on {measure.plural(w.futures, 'future')}")
    return (f"the cell waited ({w.kind}() {on}{measure.where(w.source)}) when it had submitted only {w.submitted} "
            f"of the {w.total} {FUNCTION} tasks, and submitted the other {w.total - w.submitted} after that wait "
            "began" + (", so they were never all in flight together." if in_flight < w.total else
                       ": every submission should come before the first wait."))


@exercise("fan-out", lesson="01-distributed-python/02-fan-out-without-blocking.ipynb", title="Submit all, get once",
          hints=HINTS)
def fan_out(a: Attempt) -> Verdict:
    """Grade a fan-out: the right results, from 12 tasks that were all in flight before the first get()."""
    xs = problems.given(a).xs
    n_calls = len(xs)
    results = a.require("results")
    expected = [x * x for x in xs]
    if not measure.same_within_tolerance(results, expected):
        return a.not_yet(f"`results` is not the {n_calls} squares of the exercise's inputs in order: "
                         "slow_square's value of each number in p.xs.", mistake="results")
    # What ran in the notebook is said only from the runtime's record of it (steps.tasks_ran).
    n = steps.tasks_ran(a, FUNCTION, "`results`")
    steps.every_call_a_task(a, FUNCTION, n, n_calls)
    came = derivation.listed(results, a.trace, FUNCTION, name="results", ordered=True)
    if not came:
        steps.from_tasks(a, came, FUNCTION, mistake="decoy")
    taken = measure.values_taken(a.trace)
    if taken < n_calls:
        return a.not_yet(f"`results` equals what the {n_calls} {FUNCTION} tasks returned, but the cell took only "
                         f"{measure.plural(taken, 'value')} of theirs with get(), so the list was computed here in "
                         "the notebook beside the tasks.", mistake="not-taken")
    steps.fetched(a, results, FUNCTION, "results", mistake="decoy")
    blocked = measure.blocking_loop(a.report)
    if blocked is not None:
        where, k = blocked
        return a.not_yet(f"your loop called get(){measure.where(where)} after each task, so {k} tasks ran one at a "
                         "time: the analysis raised the Blocking finding.", mistake="blocking-loop")
    # What the driver did, not how many tasks were out at once: hpc.map paces its sends itself.
    between = measure.wait_between_submissions(a.trace, FUNCTION)
    if between is not None:
        return a.not_yet(waited_between(between, measure.max_in_flight(a.trace)), mistake="waited-between")
    in_flight = measure.max_in_flight(a.trace)
    w = max(a.workers, 2)
    replayed = a.replayed_speedup(w)
    on = f"on {w} workers" + (" (this run had 1 worker, so the check uses the replay)" if a.workers < 2 else "")
    if replayed < MIN_REPLAYED_SPEEDUP:
        return a.not_yet(f"the tasks were all submitted, yet the replay {on} predicts only {fmt_x(replayed)}, "
                         f"under {fmt_x(MIN_REPLAYED_SPEEDUP)}: the driver's own work between tasks set the pace.",
                         mistake="driver-paced")
    gets = sum(1 for kind, _, _ in measure.waits(a.trace) if kind in measure.TAKING)
    # "Before the first came back" is true of plain .remote() calls; hpc.map sends a window at a time.
    submitted = (f"all {n} {FUNCTION} tasks were submitted before the first of them came back" if in_flight >= n
                 else f"the cell submitted all {n} {FUNCTION} tasks before it first waited (the runtime sent them "
                      f"to the workers at most {in_flight} at a time)")
    return a.passed(submitted,
                    f"`results` is the {n} values the tasks returned, in submission order, taken with "
                    f"{measure.plural(gets, 'get() call')}",
                    f"no Blocking finding; the replay {on} predicts over {fmt_x(MIN_REPLAYED_SPEEDUP)}",
                    details=(f"average concurrency {measure.concurrency(a.trace):.1f}",
                             f"replayed speedup {fmt_x(replayed)} on {w} workers",
                             f"{a.workers} worker{'s' if a.workers != 1 else ''} in this run"))
