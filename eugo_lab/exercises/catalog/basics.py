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
is a value, not a future; at least one ``estimate_pi`` task ran on a worker and succeeded;
``result`` equals the plain call ``estimate_pi(p.seed, p.darts)``, made here by the checker
with its own copy of the inputs; ``result`` is what one of this cell's ``estimate_pi`` tasks
returned (its traced digest), and the cell took a task's value with ``get()`` (so a plain call
beside a decoy task does not count); ``result`` is the very object get() or result() handed over
(:func:`~eugo_lab.exercises.steps.fetched`: an equal float computed again in the notebook is another
object). Then the same on the hidden case. Nothing here needs parallelism, so the verdict is the
same on one worker as on many.
"""

from __future__ import annotations

import random
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
    problems.CARRY_OVER: Hint("Pass the task p.seed and p.darts, the exercise's inputs, instead of numbers written "
                              "into the cell, and keep in `result` the value get() returns, not a number typed in.",
                              f"p = exercises.problem(\"first-task\")\n{_SOLUTION}"),
}


@exercise("first-task", lesson="01-distributed-python/01-remote-functions-and-futures.ipynb",
          title="Your first task", hints=HINTS)
def first_task(a: Attempt) -> Verdict:
    """Grade the first task: ``estimate_pi(p.seed, p.darts)`` ran on a worker and ``result`` holds its value."""
    p = problems.given(a)
    call = f"{FUNCTION}({p.seed}, {p.darts})"
    fn = _function(a)
    result = a.require("result")
    # Technique, not name: a task of the cell that calls estimate_pi (a wrapper task) does its work.
    doer = steps.task_function(a, FUNCTION)
    ran = measure.tasks(a.trace, doer)
    if _is_pending_value(result):
        # Whether or not its task finished before the cell ended, the learner kept the receipt, not the value.
        return a.not_yet(f"`result` holds a future ({result!r}), not its value: .remote started the task on a "
                         "worker and handed you this receipt at once, and printing it shows only the receipt.",
                         mistake="future")
    expected = fn(p.seed, p.darts)  # the plain call, here: the reference the task's value must equal
    if not ran:
        if not measure.same_within_tolerance(result, expected):
            return a.not_yet(f"no {FUNCTION} task ran on a worker in this cell, and `result` is not what "
                             f"{call} returns.", mistake="local")
        if steps.ran_here(a, FUNCTION) or not any(a.trace.task_counts().values()):
            return a.not_yet(f"the value is right, but no task ran on a worker: `{call}` is a plain "
                             "call, so it ran right here in the notebook.", mistake="local")
        steps.tasks_ran(a, FUNCTION, "`result`")
    if not measure.same_within_tolerance(result, expected):
        # Never the expected value: a `not yet` that states the answer lets it be typed in.
        return a.not_yet(f"`result` is {result!r}, which is not what {call} returns: a task ran, with another "
                         "seed or number of darts, or another value kept.", mistake="wrong-seed")
    came = derivation.one_of(result, a.trace, doer, name="result")
    steps.from_tasks(a, came, FUNCTION, mistake="decoy")
    taken = measure.values_taken(a.trace)
    if not taken:
        return a.not_yet(f"`result` equals what the {FUNCTION} task returned, but the cell never took a task's "
                         "value: no get() or result() asked for a future in this cell, so `result` was computed "
                         "here in the notebook beside the task.", mistake="not-taken")
    steps.fetched(a, result, doer, "result", mistake="decoy")
    workers = measure.workers_used(a.trace, doer)
    which = "the value that task returned" if ran == 1 else f"the value one of the {ran} tasks returned"
    inside = "" if doer == FUNCTION else f" (inside {doer}, which calls it)"
    return a.passed(f"{FUNCTION} ran as {measure.plural(ran, 'task')}{inside} on "
                    f"{measure.plural(workers, 'worker')}",
                    f"`result` is {result!r}, {which}, taken with get() "
                    f"({measure.plural(taken, 'value')} taken in this cell); the same value as the plain call "
                    f"{call}")
