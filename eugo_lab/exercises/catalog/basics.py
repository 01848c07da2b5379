"""Exercise ``first-task`` (Course 1, lesson 1): run a function as a task and take its value with ``hpc.get``.

The lesson's first cell defines ``estimate_pi(seed, n=1_500_000)`` with ``@hpc.remote``. The
inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.seed`` and ``p.darts``
(200,000 darts in the lesson); a passing cell is run again on a hidden case, another seed with
20,000-60,000 darts.

Starter cell (graded ``not yet``: a plain call runs in the notebook, so no task ran on a worker)::

    %%eugo --exercise first-task
    from eugo_lab import exercises
    p = exercises.problem("first-task")   # this exercise's inputs: p.seed and p.darts
    result = estimate_pi(p.seed, p.darts)
    print(result)

Reference solution::

    %%eugo --exercise first-task
    from eugo_lab import exercises
    p = exercises.problem("first-task")
    future = estimate_pi.remote(p.seed, p.darts)
    result = hpc.get(future)
    print(result)

Criteria, on the inputs the run was handed: ``estimate_pi`` is a remote function; ``result``
is a value, not a future; the cell's ``estimate_pi`` computes the lesson's estimate (checked on an
input of the checker's own, :data:`PROBE`, against the checker's copy of the lesson's function,
:func:`lesson_estimate_pi`: a same-named function that returns a kept or fixed value, or throws
fewer darts, is not the lesson's work); at least one ``estimate_pi`` task ran on a worker and
succeeded (a task counts by the function it ran, also renamed with ``options(name=)``, or inside a
wrapper task), on an engine whose workers are processes (not the threads engine); ``result``
equals the checker's own ``lesson_estimate_pi(p.seed, p.darts)``; ``result`` is what one of this
cell's ``estimate_pi`` tasks returned (its traced digest), and the cell took a task's value with
``get()`` (so a plain call beside a decoy task does not count); ``result`` is the very object get() or
result() handed over (:func:`~eugo_lab.exercises.steps.fetched`: an equal float computed again in the
notebook is another object). Then the same on the hidden case,
whose ``not yet`` says what the checker found there (:func:`problems.explained_on_hidden`).
Nothing here needs parallelism, so the verdict is the same on one worker as on many.
"""

from __future__ import annotations

import os
import random
import socket
from dataclasses import dataclass
from typing import Any

from eugo_lab import hpc
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise

FUNCTION = "estimate_pi"
# The lesson's case: a task of about a tenth of a second (the checker makes the plain call too).
DARTS = 200_000
# The hidden case: fewer darts, so its task and the checker's plain call cost a fraction of the lesson's;
# any of them differs from DARTS, so a value typed in (or the function's default n) cannot carry over.
HIDDEN_DARTS = (20_000, 40_000, 60_000)
# The checker's own input for telling whether the cell's estimate_pi is the lesson's: (seed, darts). No case's
# inputs (a function returning a value kept for them is told apart), and darts unlike any case's or a round
# thousand a shortcut would pick (one that ignores n is told apart too); a plain call of it costs about a millisecond.
PROBE = (7, 2_345)
# The mistake of a cell whose estimate_pi does not compute the lesson's estimate.
NOT_LESSONS = "not-lessons-function"


def lesson_estimate_pi(seed: int, n: int) -> float:
    """The checker's own copy of the lesson's ``estimate_pi``: the same code, so the same random stream and value.

    The reference every verdict compares with: the cell's ``estimate_pi`` can be redefined under
    the same name, this cannot. ``tests/exercises/test_exercises_basics.py`` checks it against the
    lesson's notebook.
    """
    rng = random.Random(seed)
    inside = 0
    for _ in range(n):
        x, y = rng.random(), rng.random()
        inside += x * x + y * y <= 1.0
    return 4 * inside / n


@problems.declare("first-task")
@dataclass(frozen=True, repr=False)
class FirstTaskProblem(problems.Problem):
    """The seed and the number of darts of the one estimate the exercise asks for."""

    seed: int
    darts: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> FirstTaskProblem:
        """A seed under 100 and 200,000 darts in the lesson; a seed of 100 or more and fewer darts hidden."""
        if hidden:
            return cls(rng.randrange(100, 1_000_000), rng.choice(HIDDEN_DARTS))
        return cls(rng.randrange(1, 100), DARTS)


def _is_pending_value(value: Any) -> bool:
    """A future or an ``hpc.map`` result: something ``hpc.get`` still has to turn into values."""
    return isinstance(value, (hpc.Future, hpc.MapResult))


def _function(a: Attempt) -> Any:
    """The lesson's ``estimate_pi``, as a remote function; ``not yet`` saying what to run when it is missing."""
    if FUNCTION not in a.namespace:
        raise NotYet(f"this notebook has no `{FUNCTION}` yet: run the lesson's first code cell (it defines "
                     f"{FUNCTION} as a remote function), then this cell again.", mistake="no-function")
    fn = a.namespace[FUNCTION]
    if not isinstance(fn, hpc.RemoteFunction):
        raise NotYet(f"`{FUNCTION}` is a plain function here, without `.remote`: the line that makes it a remote "
                     f"function is missing above its definition.", mistake="plain-function")
    return fn


_SOLUTION = f"future = {FUNCTION}.remote(p.seed, p.darts)\nresult = hpc.get(future)\nprint(result)"
HINTS = {
    DEFAULT: Hint(f"Start {FUNCTION} with the exercise's inputs, p.seed and p.darts, as a task (.remote after the "
                  "function's name), which hands "
                  "you a future at once, then pass that future to get() and keep what it returns in `result`.",
                  _SOLUTION),
    "no-function": Hint(f"Run the lesson's first code cell, the one that defines {FUNCTION}, then run the exercise "
                        "cell again.", "# run the lesson's first code cell, then:\n" + _SOLUTION),
    "plain-function": Hint(f"Put the decorator that makes {FUNCTION} a remote function back on the line above its "
                           "def, and run that cell again.",
                           f"@hpc.remote\ndef {FUNCTION}(seed, n=1_500_000):\n    ..."),
    "future": Hint("A future is a receipt, not the value: hand it to get(), which waits for the task and returns "
                   "what it computed, and keep that in `result`.", _SOLUTION),
    "local": Hint(f"Call {FUNCTION} through .remote so it runs as a task on a worker; that gives a future, and "
                  "get() gives its value.", _SOLUTION),
    "decoy": Hint(f"Keep in `result` the value get() returns for the {FUNCTION} task of p.seed and p.darts, not a "
                  "value computed here in the notebook beside a task.", _SOLUTION),
    "not-taken": Hint("Pass the future .remote returned to get() and keep what get() returns in `result`; "
                      "starting a task and computing the value here as well does not count.", _SOLUTION),
    "wrong-seed": Hint("Give the task the seed and the darts in p, p.seed and p.darts, and keep the value get() "
                       "returns, not anything computed after it.", _SOLUTION),
    NOT_LESSONS: Hint(f"Use the lesson's {FUNCTION}: run the lesson's first code cell again, so {FUNCTION} is "
                      "the lesson's function, and do not define another function of that name; then start it as a "
                      "task with p.seed and p.darts and keep what get() returns in `result`.",
                      "# run the lesson's first code cell again, then:\n" + _SOLUTION),
    "threads": Hint("Run the cell on the local engine, whose workers are separate processes, instead of the threads "
                    "engine: give the cell magic the local backend option, and drop any line of the cell that starts "
                    "the threads engine.",
                    f"%%eugo --exercise first-task -b local\nfrom eugo_lab import exercises\n"
                    f"p = exercises.problem(\"first-task\")\n{_SOLUTION}"),
    problems.CARRY_OVER: Hint("Pass the task p.seed and p.darts, the exercise's inputs, instead of numbers written "
                              "into the cell, and keep in `result` the value get() returns, not a number typed in.",
                              f"p = exercises.problem(\"first-task\")\n{_SOLUTION}"),
}


@exercise("first-task", lesson="01-distributed-python/01-remote-functions-and-futures.ipynb",
          title="Your first task", hints=HINTS)
def first_task(a: Attempt) -> Verdict:
    """Grade the first task: the lesson's ``estimate_pi(p.seed, p.darts)`` ran on a worker; ``result`` holds its value.

    The work is the lesson's function run as a task on the problem's inputs. The checker owns both:
    the reference value comes from its own copy of the lesson's function (:func:`lesson_estimate_pi`),
    never from the cell's ``estimate_pi``, which a cell can redefine under the same name; the cell's
    function is then checked against that copy on the checker's own input (:data:`PROBE`), so a
    same-named function that returns a fixed number or throws fewer darts is told apart by what it
    computes. A task counts by the function it ran, also under another name (``options(name=)``).

    Engines: the lesson's point is a task on a worker *process*, separate from the notebook (its
    timeline shows two worker processes and the driver). The threads engine runs a task's body in a
    thread of the notebook's own process, so a future and get() alone would pass a cell whose work
    never left the notebook: a task whose worker is the notebook's process (the trace records each
    worker's host and pid) is ``not yet``, naming the engine and what to use instead. The local pool,
    Dask and Ray run tasks in worker processes, and count.
    """
    p = problems.given(a)
    call = f"{FUNCTION}({p.seed}, {p.darts})"
    fn = _function(a)
    result = a.require("result")
    if _is_pending_value(result):
        # Whether or not its task finished before the cell ended, the learner kept the receipt, not the value.
        if isinstance(result, hpc.MapResult):  # what started the tasks was a map, not .remote: say so
            one = len(result) == 1
            return a.not_yet(f"`result` holds the {measure.plural(len(result), 'future')} of a map, not "
                             f"{'its value' if one else 'their values'}: the map started "
                             f"{'the task on a worker' if one else 'the tasks on workers'} and handed you "
                             f"{'this receipt' if one else 'these receipts'} at once.", mistake="future")
        return a.not_yet(f"`result` holds a future ({result!r}), not its value: .remote started the task on a "
                         "worker and handed you this receipt at once, and printing it shows only the receipt.",
                         mistake="future")
    _is_the_lessons(fn)
    expected = lesson_estimate_pi(p.seed, p.darts)  # the checker's own copy: the reference the task's value must equal
    # Technique, not name: a task of the cell that calls estimate_pi (a wrapper task), or estimate_pi renamed.
    doer = steps.task_function(a, FUNCTION)
    ran = measure.tasks(a.trace, doer)
    if not ran:
        _no_task(a, result, expected, call)
    inside_notebook = measure.tasks_in_process(a.trace, doer, socket.gethostname(), os.getpid())
    if inside_notebook:  # the grader runs in the notebook's kernel: its process is the notebook's
        return a.not_yet(f"{measure.plural(inside_notebook, doer + ' task')} ran in this notebook's own process, "
                         f"on the {measure.engine(a.trace)} engine, whose workers are threads of it, so the work "
                         "never left the notebook's process: the exercise asks for a task on a worker process, "
                         "separate from the notebook, as in the lesson's timeline.", mistake="threads")
    if not measure.same_within_tolerance(result, expected):
        _wrong_value(a, fn, p, result, call)
    came = derivation.one_of(result, a.trace, doer, name="result")
    steps.from_tasks(a, came, FUNCTION, mistake="decoy")
    taken = measure.values_taken(a.trace)
    if not taken:
        # Where `result` came from instead is said only as far as the record shows it (estimate_pi's plain calls).
        here = steps.ran_here(a, FUNCTION)
        instead = f", and {here} beside the task: `result` was computed there" if here else \
            ", so `result` was not taken from the task"
        return a.not_yet(f"`result` equals what the {FUNCTION} task returned, but the cell never took a task's "
                         f"value: no get() or result() asked for a future in this cell{instead}.",
                         mistake="not-taken")
    steps.fetched(a, result, doer, "result", mistake="decoy")
    workers = measure.workers_used(a.trace, doer)
    which = "the value that task returned" if ran == 1 else f"the value one of the {ran} tasks returned"
    if doer == FUNCTION:
        inside = ""
    elif measure.runs_function(a.trace, doer, FUNCTION):
        inside = f" (named {doer})"
    else:
        inside = f" (inside {doer}, which calls it)"
    return a.passed(f"{FUNCTION} ran as {measure.plural(ran, 'task')}{inside} on "
                    f"{measure.plural(workers, 'worker')}",
                    f"`result` is {result!r}, {which}, taken with get() "
                    f"({measure.plural(taken, 'value')} taken in this cell); the same value as the lesson's "
                    f"{call}, which the checker computed with its own copy of the function")


def _is_the_lessons(fn: Any) -> None:
    """``not yet`` when the cell's ``estimate_pi`` does not give the lesson's estimate on the checker's :data:`PROBE`.

    A plain call of the cell's function, here in the checker, on an input of the checker's own
    (no case's): a function redefined to return a value kept for the exercise's inputs, or to
    throw a fixed number of darts, returns something else there.
    """
    seed, darts = PROBE
    want = lesson_estimate_pi(seed, darts)
    try:
        got = fn(seed, darts)
    except Exception as exc:  # noqa: BLE001 - the learner's function: its error is the verdict
        raise NotYet(f"your {FUNCTION} is not the lesson's: called by the checker for seed {seed} with {darts:,} "
                     f"darts, it raised {type(exc).__name__}, where the lesson's {FUNCTION} returns an estimate, so "
                     "its tasks cannot do the lesson's work.", mistake=NOT_LESSONS) from None
    if not measure.same_within_tolerance(got, want):
        raise NotYet(f"your {FUNCTION} is not the lesson's: for seed {seed} with {darts:,} darts it returns "
                     f"{got!r}, but the lesson's {FUNCTION} returns {want!r} (the checker ran both), so its tasks "
                     "do not do the lesson's work.", mistake=NOT_LESSONS)


def _no_task(a: Attempt, result: Any, expected: float, call: str) -> None:
    """``not yet`` for a cell where no task ran ``estimate_pi``, saying only what the record shows happened."""
    if not measure.same_within_tolerance(result, expected):
        raise NotYet(f"no {FUNCTION} task ran on a worker in this cell, and `result` is not what {call} returns.",
                     mistake="local")
    others = sorted(f for f, k in a.trace.task_counts().items() if k)
    none = "no task ran on a worker" if not others else \
        f"no {FUNCTION} task ran on a worker (only tasks of {', '.join(others)})"
    here = steps.driver_calls(a, FUNCTION)
    if here:
        raise NotYet(f"the value is right, but {none}: {FUNCTION} ran {measure.plural(here, 'time')} as a plain "
                     "call, so it ran right here in the notebook.", mistake="local")
    if not others:
        raise NotYet(f"the value is right, but no task ran in this cell and {FUNCTION} did not run in the notebook "
                     f"either, so `result` was not computed by {FUNCTION} in this cell.", mistake="local")
    steps.tasks_ran(a, FUNCTION, "`result`")


def _wrong_value(a: Attempt, fn: Any, p: FirstTaskProblem, result: Any, call: str) -> None:
    """``not yet`` for a ``result`` other than the lesson's estimate for ``p``: which part of the work differed.

    The cell's function on ``p``'s inputs (a plain call, here) tells a function that is not the
    lesson's from a task given other inputs: past that check, the cell's function is the lesson's on
    ``p``, which the hidden case's words for ``wrong-seed`` say. On the hidden case, a ``result`` equal to the lesson's
    case's answer is that answer kept (:data:`~eugo_lab.exercises.problems.CARRY_OVER`).
    """
    try:
        mine = fn(p.seed, p.darts)
    except Exception as exc:  # noqa: BLE001 - the learner's function: its error is the verdict
        raise NotYet(f"your {FUNCTION} is not the lesson's: called by the checker for seed {p.seed} with "
                     f"{p.darts:,} darts, it raised {type(exc).__name__}, where the lesson's {FUNCTION} returns an "
                     "estimate, so its tasks do not do the lesson's work.", mistake=NOT_LESSONS) from None
    if not measure.same_within_tolerance(mine, lesson_estimate_pi(p.seed, p.darts)):
        raise NotYet(f"your {FUNCTION} returns {mine!r} for seed {p.seed} with {p.darts:,} darts, which is not what "
                     f"the lesson's {FUNCTION} returns for them (the checker ran both), so its tasks do not do the "
                     "lesson's work.", mistake=NOT_LESSONS)
    lesson = problems.lesson_case(a.exercise_id)
    if p != lesson and measure.same_within_tolerance(result, lesson_estimate_pi(lesson.seed, lesson.darts)):
        raise NotYet("`result` is the lesson's answer, not the estimate for the inputs handed out.",
                     mistake=problems.CARRY_OVER)
    # Never the expected value: a `not yet` that states the answer lets it be typed in.
    raise NotYet(f"`result` is {result!r}, which is not what {call} returns: a task ran, with another seed or "
                 "number of darts, or another value kept.", mistake="wrong-seed")


# What the hidden case's `not yet` says for the mistakes a cell can make there with the lesson's case passed
# (problems.explained_on_hidden): each states the fact the checker found there, and nothing of the hidden case.
problems.explained_on_hidden(
    "first-task", problems.CARRY_OVER,
    "`result` held the lesson's answer again, not the estimate for the inputs handed out there, so your answer did "
    "not carry over: a value the cell keeps from the lesson's case (the answer, or its seed and darts, written into "
    "the cell or left by an earlier one) stays the same when the inputs change")
problems.explained_on_hidden(
    "first-task", "wrong-seed",
    f"`result` was not what the lesson's {FUNCTION} returns for the seed and darts `p` handed out there, although "
    f"the cell's {FUNCTION} returns the lesson's estimate for them: a task ran with another seed or number of darts "
    "than `p`'s, or another value was kept (a number written into a cell, or a function's default, does not change "
    "with `p`)")
problems.explained_on_hidden(
    "first-task", NOT_LESSONS,
    f"the cell's {FUNCTION} did not return the lesson's estimate for the inputs handed out there (the checker called "
    "it and its own copy of the lesson's function), so its tasks did not do the lesson's work")
