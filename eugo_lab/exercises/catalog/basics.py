"""Exercise ``first-task`` (Course 1, lesson 1): run a function as a task and take its value with ``hpc.get``.

The lesson's first cell defines ``estimate_pi(seed, n=1_500_000)`` with ``@hpc.remote``.

Starter cell (graded ``not yet``: a plain call runs in the notebook, so no task ran on a worker)::

    %%eugo --exercise first-task
    result = estimate_pi(42)
    print(result)

Reference solution::

    %%eugo --exercise first-task
    future = estimate_pi.remote(42)
    result = hpc.get(future)
    print(result)

Criteria: ``estimate_pi`` is a remote function; ``result`` is a value, not a future; at least
one ``estimate_pi`` task ran on a worker and succeeded; ``result`` equals the plain call
``estimate_pi(42)``, made here by the checker; ``result`` is what one of this cell's
``estimate_pi`` tasks returned (its traced digest), and the cell took a task's value with
``get()`` (so a plain call beside a decoy task does not count). Nothing here needs
parallelism, so the verdict is the same on one worker as on many.
"""

from __future__ import annotations

from typing import Any

from eugo_lab import hpc
from eugo_lab.exercises import derivation, measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise

FUNCTION = "estimate_pi"
SEED = 42


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


_SOLUTION = f"future = {FUNCTION}.remote({SEED})\nresult = hpc.get(future)\nprint(result)"
HINTS = {
    DEFAULT: Hint(f"Start {FUNCTION} with seed {SEED} as a task (.remote after the function's name), which hands "
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
    "decoy": Hint(f"Keep in `result` the value get() returns for the {FUNCTION} task with seed {SEED}, not a "
                  "value computed here in the notebook beside a task.", _SOLUTION),
    "not-taken": Hint("Pass the future .remote returned to get() and keep what get() returns in `result`; "
                      "starting a task and computing the value here as well does not count.", _SOLUTION),
    "wrong-seed": Hint(f"Give the task the seed {SEED} and keep the value get() returns, not anything computed "
                       "after it.", _SOLUTION),
}


@exercise("first-task", lesson="01-distributed-python/01-remote-functions-and-futures.ipynb",
          title="Your first task", hints=HINTS)
def first_task(a: Attempt) -> Verdict:
    """Grade the first task: ``estimate_pi(42)`` ran on a worker and ``result`` holds its value."""
    fn = _function(a)
    result = a.require("result")
    ran = measure.tasks(a.trace, FUNCTION)
    if _is_pending_value(result):
        # Whether or not its task finished before the cell ended, the learner kept the receipt, not the value.
        return a.not_yet(f"`result` holds a future ({result!r}), not its value: .remote started the task on a "
                         "worker and handed you this receipt at once, and printing it shows only the receipt.",
                         mistake="future")
    expected = fn(SEED)  # the plain call, here: the reference the task's value must equal
    if not ran:
        if measure.same_within_tolerance(result, expected):
            return a.not_yet(f"the value is right, but no task ran on a worker: `{FUNCTION}({SEED})` is a plain "
                             "call, so it ran right here in the notebook.", mistake="local")
        return a.not_yet(f"no {FUNCTION} task ran on a worker in this cell, and `result` is not what "
                         f"{FUNCTION}({SEED}) returns.", mistake="local")
    if not measure.same_within_tolerance(result, expected):
        return a.not_yet(f"`result` is {result!r}, but {FUNCTION}({SEED}) returns {expected!r}: a task ran, with "
                         f"another seed or another value kept.", mistake="wrong-seed")
    came = derivation.one_of(result, a.trace, FUNCTION, name="result")
    if not came:
        return a.not_yet(f"{came.why}: the right value was computed here in the notebook, while the "
                         f"{measure.plural(ran, 'task')} computed something else.", mistake="decoy")
    taken = measure.values_taken(a.trace)
    if not taken:
        return a.not_yet(f"`result` equals what the {FUNCTION} task returned, but the cell never took a task's "
                         "value: no get() or result() asked for a future in this cell, so `result` was computed "
                         "here in the notebook beside the task.", mistake="not-taken")
    workers = measure.workers_used(a.trace, FUNCTION)
    which = "the value that task returned" if ran == 1 else f"the value one of the {ran} tasks returned"
    return a.passed(f"{FUNCTION} ran as {measure.plural(ran, 'task')} on {measure.plural(workers, 'worker')}",
                    f"`result` is {result!r}, {which}, taken with get() "
                    f"({measure.plural(taken, 'value')} taken in this cell); the same value as the plain call "
                    f"{FUNCTION}({SEED})")
