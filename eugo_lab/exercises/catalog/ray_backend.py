"""Exercise ``ray-backend`` (Course 1, lesson 10): a two-step pipeline on Ray, the second step fed futures.

The lesson connects the runtime to a local Ray instance with
``hpc.init(backend="ray", workers=2, log_to_driver=False)``.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.days``, the days to
load (0-5 in the lesson); a passing cell is run again, on the same Ray, on a hidden case of 3-4
other days (6-365), so other peaks.

Starter cell (graded ``not yet``: it runs on Ray, but brings every day's readings back into
the notebook with get() before the second step starts)::

    %%eugo --exercise ray-backend
    from eugo_lab import exercises

    p = exercises.problem("ray-backend")  # this exercise's inputs: p.days, the days to load

    @hpc.remote
    def load(day):
        rng = random.Random(day)
        return [rng.gauss(20.0, 5.0) for _ in range(READINGS)]

    @hpc.remote
    def daily_peak(readings):
        return max(readings)

    readings = [hpc.get(load.remote(day)) for day in p.days]
    peaks = hpc.get([daily_peak.remote(r) for r in readings])

Reference solution (same functions, then)::

    days = [load.remote(day) for day in p.days]
    peaks = hpc.get([daily_peak.remote(d) for d in days])

Criteria, all read off the trace and the namespace, none off the clock, on the inputs the run was
handed: the cell's tasks ran through the runtime (a cell that calls Ray's own API runs nothing the
trace sees), on the Ray engine (not the local pool); one ``load`` and one ``daily_peak`` task ran
per day; ``peaks`` holds the days' peaks in the order of ``p.days``, is what the ``daily_peak``
tasks of this cell returned (:func:`~eugo_lab.exercises.derivation.listed`) and is no object an
earlier cell left; the
driver made no blocking call (get, wait, result) before it had submitted every ``daily_peak``
task, so nothing came back to the notebook between the steps; and every ``daily_peak`` task
was passed a ``load`` future (the dependency edges the runtime recorded), so the runtime, not
the notebook, handed each day's readings on. Then the same on the hidden case.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise
from eugo_lab.tracing.recorder import MAP_CALLS_KEY

DAYS = 6
#: Readings per day in the starter's ``load``; the lesson's cell uses the same number.
READINGS = 50_000
# The hidden case: fewer days (each two tasks), other ones, so other peaks; a second run costs about half the first.
HIDDEN_N = (3, 4)
HIDDEN_DAYS = range(6, 366)
FIRST, SECOND = "load", "daily_peak"
CONNECT = "hpc.init(backend=\"ray\", workers=2, log_to_driver=False)"
_SOLUTION = ("days = [load.remote(day) for day in p.days]\n"
             "peaks = hpc.get([daily_peak.remote(d) for d in days])")


@problems.declare("ray-backend")
@dataclass(frozen=True, repr=False)
class RayBackendProblem(problems.Problem):
    """The days whose readings the pipeline loads and whose peaks it finds."""

    days: tuple[int, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> RayBackendProblem:
        """The lesson's days 0-5; hidden: 3-4 other days, in an order drawn from ``rng``."""
        if not hidden:
            return cls(tuple(range(DAYS)))
        return cls(tuple(rng.sample(HIDDEN_DAYS, rng.choice(HIDDEN_N))))
HINTS = {
    DEFAULT: Hint("Keep the load futures and pass each one straight to daily_peak; call get() once, on the peaks, "
                  "at the end.", _SOLUTION),
    "wrong-engine": Hint("Connect the runtime to Ray before you run the cell: the lesson's 'One line changes' cell "
                         "does it.", CONNECT),
    "ray-direct": Hint("Write the pipeline with the runtime's own decorator and calls, as the starter does: they "
                       "run on the Ray engine the runtime is connected to, and they are traced; Ray's own calls go "
                       "around the runtime.", _SOLUTION),
    "local": Hint("Run each day in p.days as a load task and each peak as a daily_peak task, with .remote.",
                  _SOLUTION),
    "results": Hint("`peaks` must hold the peaks of the days in p.days, in that order, from the starter's load and "
                    "daily_peak functions unchanged.", _SOLUTION),
    "given": Hint("Let each daily_peak task find the peak in the readings its load future brings: pass it only that "
                  "future, never a peak worked out here in the notebook.", _SOLUTION),
    "not-from-tasks": Hint("Make `peaks` what get() returns for the daily_peak futures of this cell, not a list "
                           "computed or typed in the notebook.", _SOLUTION),
    "earlier-cell": Hint("Compute `peaks` in this cell, from this cell's daily_peak futures, instead of reusing "
                         "a list an earlier cell made.", _SOLUTION),
    "driver-between-steps": Hint("Do not call get() on the load futures: pass each future to daily_peak as its "
                                 "argument, and let the runtime hand the readings on when the load task is done.",
                                 _SOLUTION),
    "values-not-futures": Hint("Give daily_peak the future that load.remote returned, not readings computed in "
                               "the notebook.", _SOLUTION),
    problems.CARRY_OVER: Hint("Load each day in p.days, the exercise's inputs, instead of days or peaks written "
                              "into the cell.", "p = exercises.problem(\"ray-backend\")\n" + _SOLUTION),
}


def expected_peaks(days: Sequence[int] | None = None, readings: int = READINGS) -> list[float]:
    """What the starter's functions compute: the highest of ``readings`` made-up readings of each day, in order.

    ``days``: the lesson's (0-5) unless given.
    """
    out = []
    for day in (days if days is not None else range(DAYS)):
        rng = random.Random(day)
        out.append(max(rng.gauss(20.0, 5.0) for _ in range(readings)))
    return out


def _task_ids(trace: Any, function: str) -> set[int]:
    """Task ids of ``function``'s tasks (first attempts)."""
    t = trace.tasks
    return set(np.asarray(t["task_id"])[trace.first_attempts(function)].tolist())


def chained(trace: Any, step: str, on: str) -> int:
    """How many ``step`` tasks were passed a future of an ``on`` task (the runtime's recorded dependency edges).

    An ``hpc.map`` item counts when its batch was: ``hpc.map(step, futures)`` sends each batch of futures as
    one task that depends on them (the edges are the batch's), and its worker receives their values.
    """
    sources = _task_ids(trace, on)
    d = trace.deps
    fed = {int(t) for t, o in zip(np.asarray(d["task"]).tolist(), np.asarray(d["on"]).tolist()) if o in sources}
    first = trace.first_attempts(step)
    ids = np.asarray(trace.tasks["task_id"])[first].tolist()
    batches = np.asarray(trace.tasks["batch"])[first].tolist()
    return sum(1 for t, b in zip(ids, batches) if t in fed or (b >= 0 and b in fed))


def waits_before_last_submit(trace: Any, function: str) -> list[tuple[str, int, str]]:
    """The driver's blocking calls begun before the cell asked for its last ``function`` task: (kind, futures, where).

    A task is asked for by its ``.remote()`` (its row's submit time), an ``hpc.map`` item by the map's call
    (``meta["map_calls"]``): the map sends its batches later, sized from the first ones' times, and a get()
    of its futures that begins meanwhile waits on the runtime's batching, not between the cell's steps.
    """
    first = trace.first_attempts(function)
    single = np.asarray(trace.tasks["batch"])[first] < 0
    submits = np.asarray(trace.tasks["submit"])[first][single]
    asked = [*submits[np.isfinite(submits)].tolist(),
             *(t for name, t in trace.meta.get(MAP_CALLS_KEY, ()) if name == function)]
    if not asked:
        return []
    last = float(max(asked))
    b = trace.blocks
    starts = np.asarray(b["start"], dtype=float)
    every = measure.waits(trace)  # in start order
    return [w for w, s in zip(every, np.sort(starts).tolist()) if s < last]


def made_by_ray(namespace: dict[str, Any], names: frozenset[str]) -> list[str]:
    """Names the cell bound to Ray's own objects: a ``@ray.remote`` function, an ObjectRef, or a list of them."""
    ray = sys.modules.get("ray")
    if ray is None:
        return []
    from ray.remote_function import RemoteFunction

    kinds = (RemoteFunction, ray.ObjectRef)

    def is_ray(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return bool(v) and all(isinstance(x, kinds) for x in v)
        return isinstance(v, kinds)

    return sorted(n for n in names if is_ray(namespace.get(n)))


def _earlier_name(value: Any, before: dict[str, Any]) -> str | None:
    """The name under which an earlier cell left this very object (``peaks`` itself aside), else None."""
    if value is None or isinstance(value, (int, float, str, bool)):
        return None  # small values are shared objects in Python: identity proves nothing
    for name, old in before.items():
        if name != "peaks" and not name.startswith("_") and old is value:
            return name
    return None


@exercise("ray-backend", lesson="01-distributed-python/10-moving-to-ray.ipynb",
          title="A two-step pipeline on Ray, futures passed on", hints=HINTS)
def ray_backend(a: Attempt) -> Verdict:
    """Grade a pipeline on Ray: traced tasks on the Ray engine, the second step fed the first step's futures."""
    peaks = a.require("peaks")
    days = problems.given(a).days  # the checker's own copy of the inputs the run was handed
    n_days = len(days)
    n_first, n_second = measure.tasks(a.trace, FIRST), measure.tasks(a.trace, SECOND)
    if measure.tasks(a.trace) == 0:
        own = made_by_ray(a.namespace, a.assigned)
        if own:
            return a.not_yet("the runtime ran no task in this cell, so its trace is empty: no timeline, no "
                             f"findings, nothing to check. The cell called Ray itself ({', '.join(own)} "
                             "are Ray's own objects), which goes around the runtime.", mistake="ray-direct")
        steps.tasks_ran(a, SECOND, "the peaks")
    a.require_engine("ray", measure.tasks(a.trace), ", not on Ray: the runtime was not connected to Ray when the "
                     "cell ran.")
    if n_first < n_days or n_second < n_days:
        here = steps.functions_here(a, (FIRST, SECOND))
        return a.not_yet(f"{n_first} of the {n_days} days ran as {FIRST} tasks and {n_second} as {SECOND} tasks"
                         + (f"; {here}." if here else ": every day is a task of each step."),
                         mistake="local")
    if not measure.same_within_tolerance(list(peaks) if isinstance(peaks, (list, tuple)) else peaks,
                                         expected_peaks(days)):
        return a.not_yet(f"`peaks` is not the {n_days} days' peaks in day order (the order of p.days) that the "
                         "starter's functions compute.", mistake="results")
    steps.from_tasks(a, derivation.listed(peaks, a.trace, SECOND, name="peaks"), SECOND)
    earlier = _earlier_name(peaks, a.before)
    if earlier is not None:
        return a.not_yet(f"`peaks` is the very list an earlier cell left in `{earlier}`, not one this cell's "
                         f"{SECOND} tasks returned.", mistake="earlier-cell")
    steps.fetched(a, peaks, SECOND, "peaks", mistake="not-from-tasks")
    steps.not_handed_in(a, SECOND, peaks, "peaks")
    early = waits_before_last_submit(a.trace, SECOND)
    if early:
        kind, k, where = early[0]
        return a.not_yet(f"your cell waited in the notebook between the steps: {kind}() of "
                         f"{measure.plural(k, 'future')} at {where}, before every {SECOND} task was submitted "
                         f"({measure.plural(len(early), 'wait')} like it in all), so the second step could not "
                         "start until your code had the readings in hand.", mistake="driver-between-steps")
    linked = chained(a.trace, SECOND, FIRST)
    if linked < n_second:
        here = steps.ran_here(a, FIRST)
        return a.not_yet(f"only {linked} of the {n_second} {SECOND} tasks were passed a {FIRST} future; the "
                         "others were given readings the notebook held"
                         + (f" ({here}, while the load tasks ran beside them)." if here
                            else ", so your code had them in hand between the steps."),
                         mistake="values-not-futures")
    used = measure.workers_used(a.trace)
    return a.passed(f"the {n_first} {FIRST} and {n_second} {SECOND} tasks ran through the runtime on the Ray "
                    f"engine, on {used} of its {a.workers} workers",
                    f"each of the {n_second} {SECOND} tasks was passed its {FIRST} future, and the notebook made "
                    "no wait until every task was submitted, so your code never held the readings between the "
                    "steps",
                    f"`peaks` is the {n_days} values the {SECOND} tasks returned, in day order",
                    details=(f"{used} workers used of {a.workers}",
                             f"{linked} dependencies recorded from {SECOND} to {FIRST} tasks"))


__all__ = ["ray_backend", "expected_peaks", "chained", "waits_before_last_submit", "made_by_ray"]
