"""Exercise ``put`` (Course 1, lesson 4): store a large array once with ``hpc.put`` and share it.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.data``, a read-only
array of 2,000,000 float64 (16 MB) in the lesson; a passing cell is run again on a hidden case,
another array of 250,000-500,000 values (2-4 MB).

Starter cell (graded ``not yet``: the 16 MB array is pickled and shipped with every task)::

    %%eugo --exercise put
    import numpy as np
    from eugo_lab import exercises, hpc

    p = exercises.problem("put")   # this exercise's inputs: p.data, a 16 MB array of float64

    @hpc.remote
    def chunk_sum(arr, i):
        return float(arr[i::8].sum())    # task i sums every 8th value from i

    total = sum(hpc.get([chunk_sum.remote(p.data, i) for i in range(8)]))

Reference solution (same first lines, then)::

    ref = hpc.put(p.data)
    total = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))

Criteria, on the array the run was handed: ``total`` equals ``data.sum()`` of the checker's own
copy; 8 ``chunk_sum`` tasks ran; ``total`` is the sum of what those tasks returned (their traced
results); their arguments came to under ``MAX_SHIPPED_SHARE`` of the array (bytes shipped, from
the trace); the ``chunk_sum`` function did not carry a copy of the array (a global or closure it
reads, pickled with it); the cell called ``hpc.put`` exactly once and every task resolved that
stored reference on its worker (the trace's refs, so a put whose reference never reaches the
tasks does not count). Then the same on the hidden case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.findings import Code
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise
from eugo_lab.units import fmt_bytes

N_TASKS = 8
SIZE = 2_000_000
# The hidden case: 2-4 MB, still thousands of times a reference's size (so shipping it by value, or
# carrying it in the function, fails there as in the lesson), and quick to make, store and sum.
HIDDEN_SIZES = range(250_000, 500_001)
FUNCTION = "chunk_sum"
# A reference is a few hundred bytes; one copy of the array in the arguments is 100%: 10% is
# far from both, so a stray small argument never fails a correct solution.
MAX_SHIPPED_SHARE = 0.1


@problems.declare("put")
@dataclass(frozen=True, repr=False, eq=False)  # an array field: compared by identity, never element by element
class PutProblem(problems.Problem):
    """The array the tasks sum, read-only: 16 MB in the lesson, 2-4 MB in the hidden case."""

    data: np.ndarray

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> PutProblem:
        """Uniform values in [0, 1) from a NumPy generator seeded from ``rng``; the size from ``rng`` when hidden."""
        size = rng.choice(HIDDEN_SIZES) if hidden else SIZE
        values = np.random.default_rng(rng.randrange(2**32)).random(size)
        return cls(problems.frozen_array(values))


_SOLUTION = "ref = hpc.put(p.data)\ntotal = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))"
HINTS = {
    DEFAULT: Hint("Store the array once with put, before submitting, and give every task the reference put "
                  "returns instead of the array itself.", _SOLUTION),
    "results": Hint("`total` must add up what the 8 chunk_sum tasks return, one task for each i from 0 to 7.",
                    _SOLUTION),
    "local": Hint("Submit each of the 8 chunk_sum calls as a task with .remote.", _SOLUTION),
    "by-value": Hint("Store the array once with put and pass the reference it returns to every task; a "
                     "reference is a few hundred bytes, the array 16 MB.", _SOLUTION),
    "decoy": Hint("Let `total` add up what get() returns for the 8 chunk_sum tasks, i from 0 to 7, instead of "
                  "a sum computed here in the notebook.", _SOLUTION),
    "ref-unused": Hint("Pass the reference put returned to every task as its argument, so each task reads the "
                       "stored copy on its worker.", _SOLUTION),
    "put-per-task": Hint("Call put once, before the loop, and pass the same reference to every task.", _SOLUTION),
    "no-put": Hint("Do not let the tasks reach the array through a global or a closure (it is pickled with the "
                   "function); store it with put and pass the reference as an argument.", _SOLUTION),
    problems.CARRY_OVER: Hint("Store p.data, the exercise's array, with put and let `total` add up what get() "
                              "returns for the 8 tasks, instead of a number written into the cell.",
                              "p = exercises.problem(\"put\")\n" + _SOLUTION),
}


@exercise("put", lesson="01-distributed-python/04-large-arguments-and-put.ipynb",
          title="Share a large array with hpc.put", hints=HINTS)
def put(a: Attempt) -> Verdict:
    """Grade sharing: the right total, from 8 tasks that all read one stored copy of the array."""
    total = a.require("total")
    data = problems.given(a).data
    if not measure.same_within_tolerance(total, float(data.sum())):
        return a.not_yet("`total` is not the sum of the array, which is what the 8 chunk_sum results add up to.",
                         mistake="results")
    n = measure.tasks(a.trace, FUNCTION)
    if n < N_TASKS:
        return a.not_yet(f"only {n} of the {N_TASKS} chunk_sum calls ran as tasks.", mistake="local")
    came = derivation.combined(total, a.trace, FUNCTION, sum, name="total", how="summed")
    if not came:
        steps.from_tasks(a, came, FUNCTION, mistake="decoy")
    size = fmt_bytes(data.nbytes, ".3g")
    shipped = measure.bytes_in(a.trace, FUNCTION)
    if shipped > MAX_SHIPPED_SHARE * data.nbytes:
        per = shipped / max(n, 1)
        return a.not_yet(f"the {n} chunk_sum tasks were sent {fmt_bytes(shipped, '.3g')} of arguments in all, about "
                         f"{fmt_bytes(per, '.3g')} each: the {size} array went by value with every task.",
                         mistake="by-value")
    fn = measure.carried(a.trace, FUNCTION)
    # The function's own pickle holds whatever it captured: its size is the fact, the names when they were measured.
    if fn is not None and fn.payload_bytes > MAX_SHIPPED_SHARE * data.nbytes:
        names = (" (" + ", ".join(f"`{name}`" for name, _ in fn.captured) + ")") if fn.captured else ""
        finding = " (the analysis raised its captured-object finding)" if a.report.finding(Code.CAPTURED_OBJECT) else ""
        return a.not_yet(f"the chunk_sum function was pickled at {fmt_bytes(fn.payload_bytes, '.3g')} and sent "
                         f"{measure.plural(fn.sends, 'time')}: it carried the array with it{names}, a global or "
                         f"closure it reads, so the tasks read that copy of the {size} array, not a stored "
                         f"one{finding}.", mistake="no-put")
    puts = len(a.trace.puts["ref"])
    if puts > 1:
        return a.not_yet(f"the cell called put {puts} times, about once per task: each call stores another "
                         f"copy of the {size} array.", mistake="put-per-task")
    if puts == 0:
        return a.not_yet("the tasks got the array without put (through a global or a closure, which is "
                         "pickled with the function), so no stored copy was shared.", mistake="no-put")
    stored = set(np.asarray(a.trace.puts["ref"]).tolist())
    reading = measure.tasks_resolving(a.trace, FUNCTION, stored)
    if reading < n:
        return a.not_yet(f"the cell stored the array with put, but {reading} of the {n} chunk_sum tasks read the "
                         "stored copy on their workers: the reference put returned did not reach "
                         f"{'them' if not reading else 'the others'} as an argument.", mistake="ref-unused")
    return a.passed(f"all {n} chunk_sum tasks read the one stored copy of the array on their workers "
                    f"({measure.plural(puts, 'hpc.put')})",
                    f"their arguments came to {fmt_bytes(shipped, '.3g')} in all, under {MAX_SHIPPED_SHARE:.0%} of "
                    f"the array's {size}, and the function carried no copy of it",
                    f"`total` is the sum of the {n} values the tasks returned",
                    details=(f"{fmt_bytes(shipped, '.3g')} of arguments shipped",))
