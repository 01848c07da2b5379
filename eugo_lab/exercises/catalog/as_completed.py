"""Exercise ``as-completed`` (Course 1, lesson 3): handle each result as soon as it finishes.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.ms``, how many
milliseconds each measurement takes (in the lesson 10 of them, the first 400.5 ms and the
others 25.5-45.5 ms); a passing cell is run again on a hidden case of 6 (each 12.5-24.5 ms; the checker
hands one of them, at a place drawn from the seed and not the longest, back 160-200 ms late, so
``p.ms`` does not tell which finishes last).

Starter cell (graded ``not yet``: the loop waits in submission order, on the slow first task)::

    %%eugo --exercise as-completed
    import time
    from eugo_lab import exercises, hpc

    p = exercises.problem("as-completed")   # this exercise's inputs: p.ms, how long each measurement takes

    @hpc.remote
    def measure(ms):
        time.sleep(ms / 1000)   # a measurement that takes ms milliseconds
        return ms

    def handle(r):          # the driver's own work on each result
        time.sleep(0.02)
        return r + 1

    futures = [measure.remote(ms) for ms in p.ms]
    handled = []
    for f in futures:
        handled.append(handle(hpc.get(f)))

Reference solution (same first lines, then)::

    futures = [measure.remote(ms) for ms in p.ms]
    handled = []
    for f in hpc.as_completed(futures):
        handled.append(handle(hpc.get(f)))

Criteria, on the inputs the run was handed: ``handled`` holds ``ms + 1`` for each ms in
``p.ms`` (any order); one ``measure`` task ran per input; every task was submitted before the
driver's first blocking wait (:func:`eugo_lab.exercises.measure.wait_between_submissions`: a cell
that takes one result, or holds the slow one back, and submits the rest after never runs them side
by side) and no Blocking finding; ``handled`` holds ``handle(r)`` (``r + 1``) of each value those
tasks returned (their traced digests) and the cell took their
values with get(); each item of ``handled`` is the object a call of ``handle`` in the notebook
returned, and that call was given the very object get() or result() handed over from a ``measure``
task (:func:`~eugo_lab.exercises.steps.stepped_from_fetched`; every ``p.ms`` is a float, so identity
tells it from an equal value computed again); no Submission order finding; the driver never waited on one task while
another had finished before it and was not taken yet (the runtime records each wait with the one
future it was on: a get()/result(), an ``hpc.wait`` on it alone, a loop of ``done()`` on it; and
when each result arrived, :func:`eugo_lab.exercises.measure.held_up`), so the results were taken
in the order the tasks finished (ties within a fraction of the gaps between finishes); the driver
took some values (a get() of one future, or of the ones ``hpc.wait`` said were done) before the last one
arrived (so not one
``hpc.get`` of all of them first, with or without an ``as_completed`` loop that takes nothing).
The hidden case's slow measurement is at a place drawn from the seed and slow by the checker's
hold, not its input: an order fitted to the lesson's (its slow one is first) or to ``p.ms``
fails there, with words of its own that hold nothing of the case
(:func:`eugo_lab.exercises.problems.explained_on_hidden`). On 1 worker tasks finish in
submission order, so the run cannot show the difference: there the check needs the results
taken in completion order (``hpc.as_completed`` or ``hpc.wait``) and says so. Then the same on
the hidden case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from eugo_lab.analysis.findings import Code
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise
from eugo_lab.units import fmt_seconds
from eugo_lab.units import fmt_source as display_source

N = 10
# The slow first measurement of the lesson's case, and the others: on 2 workers the 9 short ones
# (at most 45 ms each) are all done long before it, so handling them in completion order shows.
# Each half a millisecond past a whole one: a float, so each value measure returns (and handle's r + 1) is an
# object of its own, which identity tells from an equal value the notebook computes again (steps.fetched).
SLOW_MS, SHORT_MS = 400.5, tuple(m + 0.5 for m in range(25, 46))
# The hidden case, sized to cost at most about half the lesson's: 6 short measurements of 12.5-24.5 ms, one of
# them (at a place drawn from the seed, never the longest input) handed back 160-200 ms late by the checker
# (the others take at most 123 ms together on one worker: still done before it). Other values than the lesson's, so
# a typed answer cannot match.
HIDDEN_N, HIDDEN_SLOW_MS, HIDDEN_SHORT_MS = 6, range(160, 201), tuple(m + 0.5 for m in range(12, 25))
FUNCTION = "measure"
# What the driver's calls are named in the trace when they take results as they finish.
COMPLETION_ORDER = ("as_completed", "wait")
# How the driver waited on one task, as the runtime recorded it (measure.WAITING_ON_ONE).
WAITED_BY = {"get": "taking its value with get() or result()", "await": "awaiting it",
             "wait": "with a wait() on it alone", "done": "calling done() on it until it said True"}
# How each completion-order call is named in the passing line.
TAKEN_BY = {"as_completed": "hpc.as_completed", "wait": "hpc.wait"}




@problems.declare("as-completed")
@dataclass(frozen=True, repr=False)
class AsCompletedProblem(problems.Problem):
    """How many milliseconds each measurement takes: one slow among short ones, all distinct."""

    ms: tuple[float, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> AsCompletedProblem:
        """The lesson's case: the slow one first; hidden: fewer, all short, one made slow where the cell cannot see.

        The hidden case's slow measurement is at a place drawn from the seed, and slow because the
        checker hands its result back late (:func:`~eugo_lab.exercises.problems.hold_result`), not
        because of its input: no fixed order (the list's, reversed, sorted by ``p.ms``) matches the
        order the tasks finish in there; only taking them as they finish does.
        """
        if not hidden:
            return cls((SLOW_MS, *rng.sample(SHORT_MS, N - 1)))
        ms = rng.sample(HIDDEN_SHORT_MS, HIDDEN_N)
        # The slow one is made slow by the checker, not by its input: its result comes back late. Not the
        # longest input, so neither the list's order nor an order by p.ms puts it where it finishes.
        slow = rng.choice([i for i in range(HIDDEN_N) if ms[i] != max(ms)])
        return problems.hold_result(cls(tuple(ms)), FUNCTION, slow, rng.choice(HIDDEN_SLOW_MS) / 1000)


_SOLUTION = ("futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
             "for f in hpc.as_completed(futures):\n    handled.append(handle(hpc.get(f)))")
HINTS = {
    DEFAULT: Hint("Submit all the calls first, then loop over the futures in the order they finish "
                  "(as_completed hands you each one as soon as its task is done) and handle each result there.",
                  _SOLUTION),
    "results": Hint("`handled` must hold handle() of every result, one for each input in p.ms: get the value of "
                    "each future "
                    "and append what handle returns for it.", _SOLUTION),
    "decoy": Hint("Append to `handled` what handle returns for each value get() gives you in the loop, one "
                  "for each of the 10 tasks, instead of a list computed here in the notebook.", _SOLUTION),
    "not-taken": Hint("Take each task's value with get() inside the as_completed loop and handle it there; "
                      "a list computed here beside the tasks does not count.", _SOLUTION),
    "local": Hint("Submit each call, one for each input in p.ms, as a task with .remote and keep the futures in "
                  "a list.", _SOLUTION),
    "submission-order": Hint("Loop over the futures in completion order instead of list order: as_completed "
                             "yields each future as its task finishes, so a fast result is handled while the slow "
                             "first task still runs.", _SOLUTION),
    "held-up": Hint("Take the results in the order their tasks finish, not in an order you pick (the list's, "
                    "reversed, or by how long you expect each to take): as_completed yields each future as soon "
                    "as its task is done, and waiting for one while others are already finished leaves them "
                    "unhandled.", _SOLUTION),
    "submit-first": Hint("Submit every measurement before you wait for any of them: make all the .remote calls "
                         "first and keep the futures in a list, then take the results as they finish, so the "
                         "tasks run side by side and a short one is handled while the slow one still runs.",
                         _SOLUTION),
    "not-the-work": Hint("Keep the lesson's measure: it sleeps `ms` milliseconds, the measurement's own time. The "
                         "exercise is about results that arrive at different times; a measure that returns at once "
                         "has nothing to take in any order.", _SOLUTION),
    "all-at-once": Hint("Do not wait for all results with one get() before handling any: take them one at a time "
                        "as they finish, with as_completed, and handle each in the loop.", _SOLUTION),
    problems.CARRY_OVER: Hint("Submit one measurement for each input in p.ms, the exercise's inputs, instead of "
                              "numbers written into the cell, and fill `handled` in the loop from the values get() "
                              "returns, not with numbers typed in.",
                              "p = exercises.problem(\"as-completed\")\n" + _SOLUTION),
}


# An order of the cell's own that matched the lesson's case (its slow measurement is the first) fails where
# the slow one is elsewhere: say that, not "a value is written into the cell" (nothing of the case named).
problems.explained_on_hidden(
    "as-completed", "held-up",
    "the cell waited for one measurement while others had already finished and were not taken yet: the order "
    "it took the results in matched the order they finished in on the lesson's inputs, where the slow "
    "measurement is the first, but not on these")


def waited_before_submitting(w: measure.WaitBetween) -> str:
    """The ``not yet`` for a wait between submissions, from the record: which call, where, after how many."""
    # An as_completed() wait is on none in particular: the record names the future it yielded.
    on = (f"that yielded measurement {w.task}" if w.task and w.kind == "as_completed" else
          f"on measurement {w.task}" if w.task else f"on {measure.plural(w.futures, 'future')}")
    return (f"the cell waited ({w.kind}() {on}{measure.where(w.source)}) when it had submitted only "
            f"{w.submitted} of the {w.total} {FUNCTION} tasks, and submitted the other {w.total - w.submitted} after "
            "that wait began: submit them all before waiting on any, so they run side by side and each can be taken "
            "as it finishes.")


def all_at_once(trace: Any, n_calls: int) -> str:
    """The ``not yet`` for no value taken before the last result came: the first take, from the record.

    Says what was checked (no get()/result()/await returned before the last result arrived) and
    which call took the values first; nothing about when the cell computed `handled`, which is not recorded.
    """
    takes = [w for w in measure.waits(trace) if w[0] in measure.TAKING]
    first = (f" Its first take was {takes[0][0]}() of {measure.plural(takes[0][1], 'future')}"
             f"{measure.where(takes[0][2])}." if takes else "")
    loop = (" Its as_completed loop took no value itself." if "as_completed" in {w[0] for w in measure.waits(trace)}
            and not any(w[1] == 1 for w in takes) else "")
    return (f"the cell took no {FUNCTION} task's value (with get(), result() or await) before the last of "
            f"the {n_calls} tasks finished, so none of their results reached the notebook to be handled while the "
            f"slow one still ran.{first}{loop}")


# Other mistakes a cell with every input taken from p can meet only on the hidden case (its slow measurement is
# elsewhere): say what happened there, in words that hold nothing of the case.
problems.explained_on_hidden(
    "as-completed", "submission-order",
    "the cell called get() on one future after another in submission order and waited for a measurement that "
    "had not finished while later ones were already done")
problems.explained_on_hidden(
    "as-completed", "all-at-once",
    "the cell took no task's value before the last task finished, so none reached the notebook to be handled "
    "while the slow one still ran")


@exercise("as-completed", lesson="01-distributed-python/03-futures-as-arguments-and-as-completed.ipynb",
          title="Process results as they finish", hints=HINTS, values_of=("handle",))
def as_completed(a: Attempt) -> Verdict:
    """Grade a results loop: every result handled, taken in completion order, the first before the last arrived."""
    ms = problems.given(a).ms
    n_calls = len(ms)
    handled = a.require("handled")
    expected = sorted(m + 1 for m in ms)
    try:
        got = sorted(handled)
    except TypeError:
        got = None
    if got is None or not measure.same_within_tolerance(got, expected):
        return a.not_yet(f"`handled` does not hold handle's answer for each of the {n_calls} results (measure's "
                         "value plus 1, one for each input in p.ms, in any order).", mistake="results")
    # What ran in the notebook is said only from the runtime's record of it (steps.tasks_ran).
    n = steps.tasks_ran(a, FUNCTION, "`handled`")
    steps.every_call_a_task(a, FUNCTION, n, n_calls)
    came = derivation.mapped(handled, a.trace, FUNCTION, lambda r: r + 1, name="handled", how="handle()")
    if not came:
        steps.from_tasks(a, came, FUNCTION, mistake="decoy")
    # The work is the measurement: each task takes its ms (a sleep), whatever the cell's measure looks like.
    # After the value checks: the tasks returned p.ms (a decoy's wrong inputs are named by those checks).
    short, run, need = measure.short_of(a.trace, FUNCTION, [m / 1000 for m in ms])
    if short:
        took, takes = fmt_seconds(run), fmt_seconds(need)
        return a.not_yet(f"{measure.plural(short, f'{FUNCTION} task')} finished in less time than the measurements "
                         f"in p.ms take (the tasks' run times and p.ms sorted side by side: one took {took} where "
                         f"the measurement takes {takes}): the cell's {FUNCTION} does not take each measurement's "
                         "ms, so the tasks do not finish at different times as the lesson's do.",
                         mistake="not-the-work")
    taken = measure.values_taken(a.trace)
    if not taken:
        return a.not_yet(f"`handled` holds the right answers, but the cell never took a {FUNCTION} task's value "
                         "with get(), so they were computed here in the notebook beside the tasks.",
                         mistake="not-taken")
    between = measure.wait_between_submissions(a.trace, FUNCTION)
    if between is not None:
        return a.not_yet(waited_before_submitting(between), mistake="submit-first")
    blocked = measure.blocking_loop(a.report)
    if blocked is not None:
        where, k = blocked
        return a.not_yet(f"the cell called get(){measure.where(where)} right after submitting each task, so {k} "
                         "tasks ran one at a time: the analysis raised the Blocking finding.", mistake="submit-first")
    # handle(r) runs in the notebook by design: what is checked is that it was fed the values get() handed over.
    steps.stepped_from_fetched(a, handled, FUNCTION, "handle", "handled", mistake="decoy")
    order = a.report.finding(Code.SUBMISSION_ORDER)
    if order is not None:
        where = measure.where(display_source(order.evidence["source"]))
        number = measure.submission_numbers(a.trace, FUNCTION).get(int(order.evidence["task_id"]))
        which = f"measurement {number}" if number else "an early measurement"
        done = int(order.evidence["done_meanwhile"])
        return a.not_yet(f"the cell called get(){where} on one future after another in submission order: it waited "
                         f"for {which} while {measure.plural(done, 'later result')} "
                         f"{'was' if done == 1 else 'were'} already done, and handled them only after it (the "
                         "Submission order finding).", mistake="submission-order")
    held = measure.held_up(a.trace, FUNCTION)
    if held is not None:
        n_sat = len(held.finished)
        return a.not_yet(f"the cell waited for measurement {held.waited_on}"
                         f"{' (the slowest)' if held.slowest else ''}, {WAITED_BY[held.kind]}"
                         f"{measure.where(held.source)}, "
                         f"while measurement{'s' if n_sat > 1 else ''} {measure.spans(held.finished)} had already "
                         f"finished and {'were' if n_sat > 1 else 'was'} not taken yet: it took the results in an "
                         "order of its own, not the order the tasks finished in, so finished results waited "
                         "unhandled behind a running one.", mistake="held-up")
    last = measure.last_received(a.trace, FUNCTION)
    # Any take that returned before the last result counts, one future or the list hpc.wait said was done.
    early = measure.values_taken_before(a.trace, last)
    if not early:
        return a.not_yet(all_at_once(a.trace, n_calls), mistake="all-at-once")
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
                    (f"the first result was taken by itself before the last task finished{note}"
                     if measure.taken_singly_before(a.trace, last) else
                     f"results were taken before the last task finished{note}"),
                    f"results taken {how}; no Submission order finding",
                    details=(f"{measure.plural(early, 'result')} taken before the last task finished",
                             f"{len(measure.waits(a.trace))} waits by the driver",
                             f"{a.workers} worker{'s' if a.workers != 1 else ''} in this run"))
