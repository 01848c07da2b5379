"""Exercise ``dask-scatter`` (Course 1, lesson 11): scatter a large array once, in Dask's own API.

The cell is written with ``distributed.Client`` itself (no ``eugo_lab.hpc``); ``%%eugo`` records
it from Dask's own records (:mod:`eugo_lab.native`): the bytes each task's arguments came to
(``dask.sizeof``, as the driver sent them), what each function weighed as Dask pickles it into
every task, each ``client.scatter``, which tasks' workers list a scattered key among their
dependencies, and the values the driver received for each task.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.readings``, a read-only
array of 2,000,000 float64 sensor readings (16 MB) in the lesson, and ``p.limits``, the six limits
10-35; a passing cell is run again, on the same Dask client, on a hidden case: 250,000-500,000
readings (2-4 MB) of another mean and spread, and 4-5 other limits.

Starter cell (graded ``not yet``: the 16 MB array is pickled and sent with every task)::

    %%eugo --exercise dask-scatter
    p = exercises.problem("dask-scatter")  # this exercise's inputs: p.readings (16 MB) and p.limits

    def above(data, limit):
        return int((data > limit).sum())

    counts = client.gather([client.submit(above, p.readings, limit) for limit in p.limits])

(``exercises`` is imported in the lesson's first code cell: a cell that names ``eugo_lab`` is taken
for an ``hpc`` cell and not recorded from Dask.)

Reference solution: ``readings_f = client.scatter(p.readings, broadcast=True)`` and the same
submissions with ``readings_f`` in place of ``p.readings``.

Criteria, each from the recording, on the inputs the run was handed: the tasks ran through Dask's
own API on worker processes (in-process workers are sent nothing, so there would be nothing to
measure); ``counts`` equals the counts computed here from the checker's own copy of the readings
and limits; one ``above`` task ran per limit; ``counts`` holds what those tasks returned to the
notebook; their arguments came to under ``MAX_SHIPPED_SHARE`` of the array; the function carried
no copy of it; exactly one scatter; every ``above`` task read the scattered copy on its worker.
Then the same on the hidden case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.units import fmt_bytes

# The lesson's readings: the array its cell made before the checker handed it out (seed 7, mean 20, spread 5).
SEED = 7
SIZE = 2_000_000
MEAN, SPREAD = 20.0, 5.0
LIMITS = (10, 15, 20, 25, 30, 35)
# The hidden case: 2-4 MB, still thousands of times a scattered future's size (so sending it by value, or
# carrying it in the function, fails there as in the lesson), and quick to make, scatter and count; fewer
# limits (each a task), so the second run costs less than the first.
HIDDEN_SIZES = range(250_000, 500_001)
HIDDEN_MEANS = range(12, 29)
HIDDEN_SPREADS = (3.0, 4.0, 6.0, 7.0)
HIDDEN_N_LIMITS = (4, 5)
FUNCTION = "above"
# A scattered future is a few hundred bytes; one copy of the array in the arguments is 100%: 10% is far from both.
MAX_SHIPPED_SHARE = 0.1


@problems.declare("dask-scatter")
@dataclass(frozen=True, repr=False, eq=False)  # an array field: compared by identity, never element by element
class DaskScatterProblem(problems.Problem):
    """The sensor readings the tasks count (read-only) and the limits, one task each."""

    readings: np.ndarray
    limits: tuple[int, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> DaskScatterProblem:
        """The lesson's readings and six limits; hidden: fewer readings of another mean and spread, other limits.

        The hidden limits are distinct whole numbers within two spreads of the mean, in rising order, so every
        count is a different number of readings (none 0, none all of them) and a typed count cannot match.
        """
        if not hidden:
            return cls(problems.frozen_array(np.random.default_rng(SEED).normal(MEAN, SPREAD, SIZE)), LIMITS)
        mean, spread = rng.choice(HIDDEN_MEANS), rng.choice(HIDDEN_SPREADS)
        size = rng.choice(HIDDEN_SIZES)
        readings = np.random.default_rng(rng.randrange(2**32)).normal(mean, spread, size)
        span = range(int(mean - 2 * spread), int(mean + 2 * spread) + 1)
        limits = tuple(sorted(rng.sample(span, rng.choice(HIDDEN_N_LIMITS))))
        return cls(problems.frozen_array(readings), limits)


def expected_counts(p: DaskScatterProblem | None = None) -> list[int]:
    """How many readings exceed each limit, in the order of the limits (of ``p``; the lesson's case by default)."""
    p = p if p is not None else problems.lesson_case("dask-scatter")
    return [int((p.readings > limit).sum()) for limit in p.limits]


_SOLUTION = ("readings_f = client.scatter(p.readings, broadcast=True)  # one copy on the cluster\n"
             "counts = client.gather([client.submit(above, readings_f, limit) for limit in p.limits])")
HINTS = {
    DEFAULT: Hint("Send the array to the cluster once with the client's scatter, before submitting, and give every "
                  "task the future scatter returns instead of the array itself.", _SOLUTION),
    "not-native": Hint("Write the cell with Dask's own client: client.scatter for the array, client.submit for "
                       "each task, client.gather for the results, instead of eugo_lab's calls.", _SOLUTION),
    "no-client": Hint("Run the lesson's first code cell: it makes `client`, a Dask client on the lesson's "
                      "cluster. Then submit each above call with client.submit.", "client = Client(cluster)\n"
                      + _SOLUTION),
    "in-process": Hint("Use a client of the lesson's cluster of worker processes (its first code cell), "
                       "so the tasks' arguments are really sent.", "client = Client(cluster)\n" + _SOLUTION),
    "results": Hint("`counts` must hold what the above tasks return, one per limit in p.limits, in that order.",
                    _SOLUTION),
    "local": Hint("Submit each above call, one per limit in p.limits, to the cluster with client.submit (or "
                  "client.map).", _SOLUTION),
    "given": Hint("Let each above task count the readings over its limit in the scattered array: pass it only the "
                  "array's future and the limit, never a count worked out here in the notebook.", _SOLUTION),
    "decoy": Hint("Let `counts` be what the above tasks returned (client.gather of their futures), not counts "
                  "computed here in the notebook.", _SOLUTION),
    "by-value": Hint("Scatter the array once and pass the future scatter returns to every task; that future is a "
                     "few hundred bytes, the array 16 MB.", _SOLUTION),
    "captured": Hint("Pass the array to the function as an argument (the scattered future) instead of reading a "
                     "global: Dask pickles a function with what it reads into every task it sends.", _SOLUTION),
    "no-scatter": Hint("Scatter the exercise's array, p.readings, to the cluster once and pass the future to "
                       "every task, instead of making the data inside the tasks.", _SOLUTION),
    "scatter-per-task": Hint("Call scatter once, before the loop, and pass the same future to every task.",
                             _SOLUTION),
    "scatter-unused": Hint("Pass the future scatter returned to every task as its argument, so each task reads the "
                           "scattered copy on its worker.", _SOLUTION),
    problems.CARRY_OVER: Hint("Scatter p.readings, the exercise's array, and submit one task for each limit in "
                              "p.limits, instead of an array of your own, limits or counts written into the cell.",
                              "p = exercises.problem(\"dask-scatter\")\n" + _SOLUTION),
}


def _dask_run(a: Attempt) -> None:
    """Raise ``NotYet`` unless the cell's tasks were recorded from Dask's own API on worker processes."""
    trace = a.trace
    api = trace.meta.get("api")
    if api != "dask":
        n = measure.tasks(trace)
        if n:
            raise NotYet(f"your cell's {measure.plural(n, 'task')} ran through eugo_lab.hpc, not Dask's own API: this "
                         "exercise is about Dask's client (scatter, submit, gather), so write the cell with that "
                         "client instead of eugo_lab's calls.",
                         mistake="not-native")
        raise NotYet("no Dask task was recorded: the cell needs the Dask client made in the lesson's first code cell "
                     "(`client`), and each above call submitted with it.", mistake="no-client")
    if trace.meta.get("in_process"):
        raise NotYet("your client's workers run inside this notebook's process (a cluster without worker processes): "
                     "Dask hands them the notebook's objects without pickling or sending anything, so this exercise "
                     "cannot see what each task carried. Use a client of the lesson's cluster of worker processes.",
                     mistake="in-process")


def _graded_function(a: Attempt, counts: list[Any], n_limits: int) -> str:
    """The function whose tasks did the counting: ``above``, a task that calls it, or another.

    Technique, not name: the function whose tasks returned the counts, whatever the cell named it.
    """
    if measure.tasks(a.trace, FUNCTION) >= n_limits:
        return FUNCTION
    doer = steps.task_function(a, FUNCTION)
    if doer != FUNCTION:
        return doer
    for name, k in sorted(a.trace.task_counts().items()):
        if k >= n_limits and derivation.listed(counts, a.trace, name, ordered=False):
            return name
    return FUNCTION


@exercise("dask-scatter", lesson="01-distributed-python/11-the-engines-own-api.ipynb",
          title="Scatter a large array once, in Dask's own API", hints=HINTS, native_api=True)
def dask_scatter(a: Attempt) -> Verdict:
    """Grade scattering: the right counts, from one task per limit, all reading one scattered copy of the array."""
    _dask_run(a)
    counts = a.require("counts")
    p = problems.given(a)  # the checker's own copy of the inputs the run was handed
    expected = expected_counts(p)
    n_limits = len(p.limits)
    try:
        right = [int(c) for c in counts] == expected
    except (TypeError, ValueError):
        right = False
    if not right:
        return a.not_yet(f"`counts` is not the {n_limits} counts of readings above each limit, in the order of "
                         "p.limits.", mistake="results")
    fname = _graded_function(a, list(counts), n_limits)
    n = measure.tasks(a.trace, fname)
    if n < n_limits:
        return a.not_yet(f"only {n} of the {n_limits} {fname} calls ran as Dask tasks.", mistake="local")
    came = derivation.listed(list(counts), a.trace, fname, name="counts", ordered=False)
    if not came:
        steps.from_tasks(a, came, fname, mistake="decoy")
    steps.not_handed_in(a, fname, list(counts), "counts")
    data_bytes = p.readings.nbytes
    size = fmt_bytes(data_bytes, ".3g")
    shipped = measure.bytes_in(a.trace, fname)
    if shipped > MAX_SHIPPED_SHARE * data_bytes:
        return a.not_yet(f"the {n} {fname} tasks were sent {fmt_bytes(shipped, '.3g')} of arguments in all, about "
                         f"{fmt_bytes(shipped / n, '.3g')} each: the {size} array went by value with every task.",
                         mistake="by-value")
    fn = measure.carried(a.trace, fname)
    if fn is not None and fn.captured_bytes > MAX_SHIPPED_SHARE * data_bytes:
        names = (" (" + ", ".join(f"`{name}`" for name, _ in fn.captured) + ")") if fn.captured else ""
        return a.not_yet(f"the {fname} function was pickled at {fmt_bytes(fn.payload_bytes, '.3g')} and Dask sent it "
                         f"{measure.plural(fn.sends, 'time')}, with every task: it carried the array{names}, a global "
                         "it reads, so the array went with every task anyway.", mistake="captured")
    scatters = len(a.trace.puts["ref"])
    if scatters == 0:
        return a.not_yet(f"the cell never called scatter, and the {fname} tasks' own arguments were small: whatever "
                         f"they read, it was not the one copy of the {size} array that client.scatter places on the "
                         "workers before any task asks for it.", mistake="no-scatter")
    if scatters > 1:
        return a.not_yet(f"the cell called scatter {scatters} times: each call sends another copy of the {size} "
                         "array.", mistake="scatter-per-task")
    reading = len(measure.tasks_reading_stored(a.trace, fname))
    if reading < n:
        return a.not_yet(f"the cell scattered the array, but {reading} of the {n} {fname} tasks read the scattered "
                         "copy on their workers: the future scatter returned did not reach "
                         f"{'them' if not reading else 'the others'} as an argument.", mistake="scatter-unused")
    return a.passed(f"all {n} {fname} tasks read the one scattered copy of the array on their workers "
                    "(1 client.scatter)",
                    f"their arguments came to under {MAX_SHIPPED_SHARE:.0%} of the array's {size}, and the function "
                    "carried no copy of it",
                    f"`counts` is the {n_limits} values those tasks returned, in the order of the limits",
                    details=(f"{fmt_bytes(shipped, '.3g')} of arguments shipped",))
