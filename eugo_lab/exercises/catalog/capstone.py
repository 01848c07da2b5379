"""Exercise ``capstone`` (Course 5, lesson 1): one pipeline, four mistakes, fixed one by one.

The pipeline's inputs come from the checker (:mod:`eugo_lab.exercises.problems`): the lesson's setup
cell (not graded) takes ``p = exercises.problem("capstone")`` and binds ``readings = p.readings``
(2,000,000 float64 readings, 16 MB, seed 42; reading ``i`` comes from sensor ``i % p.sensors``, 2000
sensors) and ``days = p.days`` (eleven ranges of 100,000 readings and a backlog day of 900,000), and
defines the two remote steps, ``gain(sensor)`` (a sensor's calibration gain, about 0.1 ms of Python) and
``score(readings, gains, start, stop)`` (the readings of a range times their sensors' gains, added up).
A passing cell is run again on a hidden case: 1000, 1250, 1500 or 1600 sensors, 8 to 11 ordinary
days of 25,000-32,000 readings (whole rounds of the sensors, as in the lesson) and a backlog of 6 to 9
days' worth, 350,000-640,000 readings in all, so sensors counted for the lesson, or pieces of the
lesson's 100,000 readings (over 3x an ordinary day there: a straggler), do not carry over.

Starter cell (graded ``not yet``: 4 of 4 mistakes remain)::

    %%eugo --exercise capstone
    gains = hpc.get([gain.remote(sensor) for sensor in range(p.sensors)])

    total = 0.0
    for start, stop in days:
        total += hpc.get(score.remote(readings, gains, start, stop))

Reference solution::

    %%eugo --exercise capstone --solution
    gains = hpc.get(hpc.map(gain, range(p.sensors)))
    stored = hpc.put(readings)
    day = min(stop - start for start, stop in days)  # an ordinary day's readings
    pieces = [(a, min(a + day, stop)) for start, stop in days for a in range(start, stop, day)]
    futures = [score.remote(stored, gains, a, b) for a, b in pieces]
    total = sum(hpc.get(futures))

Gates, in the order checked (each a ``not yet`` of its own): ``gains`` equals ``gain(s)`` for
the ``p.sensors`` sensors and ``total`` the sum of every reading times its sensor's gain, both computed
here from the checker's own copy of ``p``; ``gains`` is what tasks of one function returned
(:func:`~eugo_lab.exercises.derivation.returned_by`) and that function is ``gain`` or calls it;
``total`` is the sum of the scalar results of one other function's tasks
(:func:`~eugo_lab.exercises.derivation.combined`), and those tasks received the readings (a
stored reference they resolved, arguments holding them, or a function that carried them), so
tasks that only hand back scores computed in the notebook fail (a rewritten ``score`` that
reads the readings passes); the cell took those tasks' values with get().

Then the four mistakes, each judged on this run's trace and reported together, so a partial
fix is told exactly what remains:

1. *blocking*: at least ``BLOCKING_MIN_WAITS`` waits of the driver fell between the
   submissions of one step's plain tasks (a wait that begins before the last submission holds
   the loop up); counted in the order the driver made its calls, never timed;
2. *tiny tasks*: under ``MIN_ITEMS_PER_TASK`` sensors per ``gains`` task (tasks and ``hpc.map``
   batches counted from the trace), or over ``MAX_SCORE_TASKS`` scoring tasks;
3. *straggler*: a scoring task covered over ``STRAGGLER_RATIO`` times the readings of the
   median one, or the pieces packed on 2 workers (this run's when it had more) in the order
   submitted keep them busy for under ``MIN_PACKED_SPEEDUP``; sizes are read off each task's
   result (a reading adds about ``total / 2,000,000`` to it), never off its duration;
4. *data sent with every task*: the scoring tasks' arguments came to over
   ``MAX_SHIPPED_SHARE`` times the readings, or the scoring function carried them inside its
   pickle (a global it reads), or the cell stored them with put more than once.

The Blocking, Scheduling overhead, Straggler, Long tail and Serialization findings measure
time, so a verdict names them when this run's analysis raised them, and never depends on them.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from eugo_lab.analysis.findings import STRAGGLER_RATIO, Code
from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_source as display_source

LESSON = "05-capstone/01-tune-a-pipeline.ipynb"
SEED = 42
N_SENSORS = 2000
DAY = 100_000  # an ordinary day's readings; the last day holds nine of them
ORDINARY_DAYS, BACKLOG_DAYS = 11, 9
# The hidden case: fewer sensors and readings (a fraction of the lesson's work), and ordinary days under a third of
# the lesson's 100,000 readings, so pieces of 100,000 typed for the lesson leave one over STRAGGLER_RATIO times the
# median there, while pieces of the hidden case's own ordinary day stay equal. As in the lesson (100,000 = 50 x
# 2000), a day holds whole rounds of the sensors, so a day's readings start at sensor 0 (a slice of a day indexed
# from 0 meets the sensors it came from).
HIDDEN_SENSORS = (1000, 1250, 1500, 1600)
HIDDEN_DAY = range(25_000, 32_001)
HIDDEN_ORDINARY, HIDDEN_BACKLOG = range(8, 12), range(6, 10)
GAIN, SCORE = "gain", "score"
# The Blocking finding's own minimum (three tasks in a row, each submitted after the previous
# one's get() returned): one or two waits among the submissions are a set-up step, not a loop.
BLOCKING_MIN_WAITS = 3
# A task round trip costs ~0.1-0.5 ms here (more on a loaded machine) and one gain ~0.1 ms: one
# task per sensor spends as much on the trip as on the work; from 10 sensors a task, the trip
# is a small share. hpc.map's auto batches hold tens to hundreds of sensors.
MIN_ITEMS_PER_TASK = 10
# An ordinary day (100,000 readings) is ~20 ms of plain Python; 250 tasks are pieces of 8,000
# readings (~1.5 ms), still several times a round trip. Far below that, overhead takes over.
MAX_SCORE_TASKS = 250
# 20 equal pieces pack on 2 workers at 2.0x; the days left whole at 20/14 = 1.4x (the giant day,
# nine twentieths of the work, comes last); a single task at 1.0x. 1.5x sits between.
MIN_PACKED_SPEEDUP = 1.5
# Each byte of the readings crossing once (every task its own slice) is 1.0x; one full copy per
# task is 12x or more. 1.5x leaves room for small arguments beside the slices.
MAX_SHIPPED_SHARE = 1.5
# An argument, a stored copy or a captured global "holds the readings" from half their bytes.
HOLDS_SHARE = 0.5
FINDING_NAMES = {Code.BLOCKING: "Blocking", Code.TASKS_TOO_SMALL: "Scheduling overhead", Code.STRAGGLER: "Straggler",
                 Code.LONG_TAIL: "Long tail", Code.UNBALANCED_PARTITIONS: "Unbalanced partitions",
                 Code.REPEATED_ARGUMENT: "Serialization (repeated argument)",
                 Code.CAPTURED_OBJECT: "Serialization (captured object)", Code.SERIALIZATION: "Serialization"}


def gain_of(sensor: int) -> float:
    """What the lesson's ``gain(sensor)`` returns, computed here for the reference."""
    code = sum((sensor * k) % 97 for k in range(1000))
    return 0.5 + code % 1000 / 1000


@problems.declare("capstone")
@dataclass(frozen=True, repr=False, eq=False)  # an array field: compared by identity, never element by element
class CapstoneProblem(problems.Problem):
    """The pipeline's inputs: the readings (read-only), how many sensors took them, and the days' ranges."""

    readings: np.ndarray
    sensors: int
    days: tuple[tuple[int, int], ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> CapstoneProblem:
        """The lesson's 2,000,000 readings (seed 42), 2000 sensors and twelve days, or a smaller case from ``rng``.

        Either way: ordinary days of one size, then a backlog day holding several days' worth, last.
        """
        if hidden:
            sensors = rng.choice(HIDDEN_SENSORS)
            day = sensors * rng.choice([m for m in range(1, 100) if sensors * m in HIDDEN_DAY])
            ordinary, backlog, seed = rng.choice(HIDDEN_ORDINARY), rng.choice(HIDDEN_BACKLOG), rng.randrange(2**32)
        else:
            sensors, day, ordinary, backlog, seed = N_SENSORS, DAY, ORDINARY_DAYS, BACKLOG_DAYS, SEED
        days = tuple((d * day, (d + 1) * day) for d in range(ordinary)) + ((ordinary * day,
                                                                           (ordinary + backlog) * day),)
        readings = np.random.default_rng(seed).uniform(0.5, 1.5, (ordinary + backlog) * day)
        return cls(problems.frozen_array(readings), sensors, days)


@lru_cache(maxsize=4)
def _gains(sensors: int) -> tuple[float, ...]:
    """The gain of each of ``sensors`` sensors, in sensor order (cached: a grader runs often)."""
    return tuple(gain_of(s) for s in range(sensors))


def reference(p: CapstoneProblem | None = None) -> tuple[np.ndarray, tuple[float, ...], float]:
    """``(readings, gains, total)`` of ``p`` (the lesson's case by default), computed here from its inputs."""
    p = p if p is not None else problems.lesson_case("capstone")
    gains = _gains(p.sensors)
    by_reading = np.asarray(gains)[np.arange(p.readings.size) % p.sensors]  # reading i comes from sensor i % sensors
    return p.readings, gains, float(np.dot(p.readings, by_reading))


def ordinary_day(p: CapstoneProblem) -> int:
    """The readings of an ordinary day of ``p``: its shortest day."""
    return min(stop - start for start, stop in p.days)


_DAY = "day = min(stop - start for start, stop in days)  # an ordinary day's readings\n"
_PIECES = _DAY + "pieces = [(a, min(a + day, stop)) for start, stop in days for a in range(start, stop, day)]"
_SOLUTION = ("gains = hpc.get(hpc.map(gain, range(p.sensors)))\n"
             "stored = hpc.put(readings)\n" + _PIECES + "\n"
             "futures = [score.remote(stored, gains, a, b) for a, b in pieces]\n"
             "total = sum(hpc.get(futures))")
HINTS = {
    DEFAULT: Hint("Fix one mistake at a time, in the order the verdict lists them, and run the cell after each: "
                  "wait once after submitting, batch the gains, cut the big day, store the readings once.",
                  _SOLUTION),
    "results": Hint("Keep the two results the pipeline makes: `gains`, the gain of each of the p.sensors sensors in "
                    "sensor order, and `total`, every reading times its sensor's gain, each reading counted once "
                    "(pieces that start where the previous one stopped).", _SOLUTION),
    "local": Hint("Run both steps as tasks: the gains with map (or batches of sensors you submit yourself), the "
                  "scores with .remote, and keep what get() returns.", _SOLUTION),
    "copied": Hint("Compute `gains` and `total` in this cell, from tasks it runs; a value left by the earlier run "
                   "of the pipeline does not count.", _SOLUTION),
    "decoy": Hint("Keep in `gains` and `total` what the gain and score tasks returned (get() gives it to you), "
                  "not numbers computed here in the notebook beside tasks, and let those tasks do the work: call "
                  "gain and score there, on the readings.", _SOLUTION),
    "not-taken": Hint("Take the scores with get() (one get() on the list of futures, or one per future as they "
                      "finish) and add those values up.", "futures = [score.remote(stored, gains, a, b) for a, b in "
                      "pieces]\ntotal = sum(hpc.get(futures))"),
    "blocking": Hint("Take get() out of the loop: let the loop only submit, keep the futures in a list, and wait "
                     "once after it (or take them as they finish with as_completed).",
                     "futures = [score.remote(stored, gains, a, b) for a, b in pieces]\n"
                     "total = sum(hpc.get(futures))"),
    "tiny": Hint("Stop sending one task per sensor: give map the gain function and all p.sensors sensors and let "
                 "it group them into batches, or submit a few tasks that each compute the gains of many sensors.",
                 "gains = hpc.get(hpc.map(gain, range(p.sensors)))"),
    "crumbs": Hint("Cut the days less finely: pieces of about an ordinary day (the shortest of `days`) give one task "
                   "per ordinary day's worth of readings, each worth its trip.", _PIECES),
    "straggler": Hint("Cut every day, the big one included, into pieces of about an ordinary day's readings, so "
                      "no single task holds up the end of the run.",
                      _PIECES + "\nfutures = [score.remote(stored, gains, a, b) for a, b in pieces]"),
    "by-value": Hint("Store the readings once with put before the loop and pass the reference put returns in "
                     "their place: every task then reads the one stored copy instead of receiving its own 16 MB.",
                     "stored = hpc.put(readings)\nfutures = [score.remote(stored, gains, a, b) for a, b in pieces]"),
    "captured": Hint("Let score read the readings from its argument, not from the notebook's global (a global it "
                     "reads is pickled with the function); pass the reference put returns as that argument.",
                     "stored = hpc.put(readings)\nfutures = [score.remote(stored, gains, a, b) for a, b in pieces]"),
    "put-per-task": Hint("Call put once, before the loop, and pass the same reference to every task.",
                         "stored = hpc.put(readings)\nfutures = [score.remote(stored, gains, a, b) for a, b in "
                         "pieces]"),
    problems.CARRY_OVER: Hint("Take the sizes from the inputs the checker hands out: the sensors from p.sensors, and "
                              "the pieces from `days` (an ordinary day is its shortest), instead of the lesson's "
                              "2000 sensors or 100,000 readings written into the cell.",
                              "p = exercises.problem(\"capstone\")\n" + _SOLUTION),
}


@dataclass(frozen=True)
class Remains:
    """A mistake still in the run: its hint key and the sentence of evidence from this trace."""

    key: str
    line: str


@dataclass(frozen=True)
class Fixed:
    """A mistake the run no longer has: the sentence of evidence that shows it."""

    line: str


Judged = Remains | Fixed


@exercise("capstone", lesson=LESSON, title="Tune a pipeline with four mistakes", hints=HINTS)
def capstone(a: Attempt) -> Verdict:
    """Grade the pipeline: right results from this cell's tasks, then each of the four mistakes gone or named."""
    gains = a.require("gains")
    total = a.require("total")
    p = problems.given(a)  # the checker's own copy of the inputs the run was handed
    readings, want_gains, want_total = reference(p)
    if not measure.same_within_tolerance(_as_list(gains), list(want_gains)):
        return a.not_yet(f"`gains` is not the gain of each of the {p.sensors} sensors (p.sensors), sensor 0 to "
                         f"{p.sensors - 1} in that order.", mistake="results")
    if not isinstance(total, (int, float, np.number)) or not math.isclose(float(total), want_total, rel_tol=1e-9):
        return a.not_yet(f"`total` is not the sum of all {readings.size:,} readings, each times its sensor's gain: "
                         "every reading must be counted once, in one piece or another.", mistake="results")
    stage1 = _gains_source(a, gains)
    stage2 = _total_source(a, total, stage1.function, readings.nbytes)
    n2 = measure.tasks(a.trace, stage2)
    steps.taken(a, stage2, "total", n2, got=_taken_after(a.trace, stage2))
    judged = {"blocking": _blocking(a, (stage1.function, stage2)),
              "tiny": _tiny(a, stage1.function, len(_as_list(gains)), stage2, n2, p),
              "straggler": _straggler(a, stage2, want_total, readings.size),
              "data": _data(a, stage2, n2, readings.nbytes)}
    remaining = [j for j in judged.values() if isinstance(j, Remains)]
    if remaining:
        fixed = [name for name, j in zip(("the wait in the loop", "the tiny tasks", "the straggler",
                                          "the data sent with every task"), judged.values()) if isinstance(j, Fixed)]
        head = (f"{len(remaining)} of {len(judged)} mistakes remain{'s' if len(remaining) == 1 else ''}"
                + (f" (fixed: {', '.join(fixed)})" if fixed else "")
                + ("; %eugo hint answers the first one below." if len(remaining) > 1 else "."))
        return a.not_yet(head, *(r.line for r in remaining), mistake=remaining[0].key,
                         details=_findings_raised(a))
    return a.passed(*(j.line for j in judged.values()),
                    f"`gains` is what the {stage1.function} tasks returned and `total` the sum of the "
                    f"{n2} {stage2} tasks' results; both equal the reference computed here",
                    details=_findings_raised(a))


# -- where the values came from ----------------------------------------------------------------


def _as_list(values: Any) -> list[Any]:
    """``values`` as a list (a NumPy array's items as Python numbers); a non-sequence as it is."""
    if isinstance(values, np.ndarray):
        return values.tolist()
    try:
        return list(values)
    except TypeError:
        return values


def _gains_source(a: Attempt, gains: Any) -> derivation.Sources:
    """The function and tasks ``gains`` came from; raises :class:`NotYet` when not from tasks doing gain's work."""
    found = derivation.returned_by(_as_list(gains), a.trace, name="gains")
    if not found and isinstance(gains, np.ndarray):  # tasks that returned NumPy values, kept as an array
        found = derivation.returned_by(list(gains), a.trace, name="gains")
    if not found:
        _not_from_tasks(a, "gains", gains, found.why)
    steps.fetched(a, gains, found.function, "gains", mistake="decoy")  # a NumPy array's numbers are not checked
    if not steps.does_work_of(a, found.function, GAIN):
        raise NotYet(f"`gains` holds what the {measure.plural(len(found.tasks), found.function + ' task')} "
                     f"returned, but {found.function} never calls gain: {_made_outside(a, GAIN, 'the gains')}.",
                     mistake="decoy")
    return found


def _total_source(a: Attempt, total: Any, gains_function: str, readings: int) -> str:
    """The function whose tasks' results add up to ``total`` (``score`` first); :class:`NotYet` when none does.

    ``readings``: the bytes of the readings (what "received the readings" is measured against).
    """
    names = [f for f in a.trace.task_counts() if f != gains_function and a.trace.task_counts()[f]]
    names.sort(key=lambda f: (f != SCORE, f))
    for fn in names:
        if derivation.scalar_values(a.trace, fn) is not None and derivation.combined(total, a.trace, fn, sum):
            break
    else:
        why = derivation.combined(total, a.trace, names[0] if names else SCORE, sum, name="total",
                                  how="summed").why
        if not names and not _left_by_earlier_cell(total, a.before.get("total")) and len(a.trace.tasks["task_id"]):
            here = steps.ran_here(a, SCORE)
            raise NotYet(f"no {SCORE} task ran in this cell, only the {gains_function} tasks"
                         + (f"; {here}" if here else ": `total` did not come from scoring tasks")
                         + ", so the mistakes of the scoring step are hidden, not fixed.", mistake="local")
        _not_from_tasks(a, "total", total, why)
    stored = _big_puts(a.trace, readings)
    resolved = measure.tasks_resolving(a.trace, fn, set(stored)) if stored else 0
    shipped = measure.bytes_in(a.trace, fn)
    carried = measure.carried(a.trace, fn)
    if not resolved and shipped < HOLDS_SHARE * readings and not (
            carried is not None and carried.captured_bytes >= HOLDS_SHARE * readings):
        raise NotYet(f"`total` is the sum of what the {fn} tasks returned, but they never received the readings "
                     f"(no stored copy they read, {fmt_bytes(shipped, '.3g')} of arguments in all): "
                     f"{_made_outside(a, SCORE, 'the scores')}.", mistake="decoy")
    return fn


def _not_from_tasks(a: Attempt, name: str, value: Any, why: str) -> None:
    """Raise the ``not yet`` for a value no task of this cell produced: copied, run in the notebook, or a decoy."""
    if _left_by_earlier_cell(value, a.before.get(name)):
        raise NotYet(f"`{name}` is the value an earlier cell left (the first run of the pipeline); this cell's "
                     f"tasks did not produce it ({why}).", mistake="copied")
    if not len(a.trace.tasks["task_id"]):
        here = steps.functions_here(a, (GAIN, SCORE))
        raise NotYet("no task ran in this cell" + (f" ({here})" if here else "")
                     + ", so none of the pipeline's four mistakes is fixed; they are hidden.", mistake="local")
    steps.from_tasks(a, derivation.Derivation(False, why), GAIN if name == "gains" else SCORE, mistake="decoy")


def _made_outside(a: Attempt, step: str, what: str) -> str:
    """Where ``what`` (values the tasks handed back) came from: the notebook when ``step`` ran there, else unsaid."""
    here = steps.ran_here(a, step)
    if here:
        return f"{here}, so {what} were computed there and the tasks only handed them back"
    return f"the tasks only handed back {what} made outside them"


def _left_by_earlier_cell(value: Any, before: Any) -> bool:
    """``value`` is the very object an earlier cell left (a list of its very items, or a view of its array).

    Identity, not equality: an honest cell recomputes the very numbers the earlier run did.
    """
    if before is None:
        return False
    if value is before:
        return True
    if isinstance(value, np.ndarray) and isinstance(before, np.ndarray):
        return bool(np.shares_memory(value, before))
    if isinstance(value, (list, tuple)) and isinstance(before, (list, tuple)) and len(value) == len(before) > 0:
        return all(x is y for x, y in zip(value, before))
    return False


def _taken_after(trace: Any, function: str) -> int:
    """How many futures the driver's get()/await calls took once ``function``'s first task was submitted."""
    submits = np.asarray(trace.tasks["submit"])[trace.first_attempts(function)]
    first = float(np.nanmin(submits)) if len(submits) else math.inf
    b = trace.blocks
    kinds = trace.block_kinds
    return int(sum(int(n) for k, n, s in zip(np.asarray(b["kind"]).tolist(), np.asarray(b["futures"]).tolist(),
                                             np.asarray(b["start"]).tolist())
                   if kinds[k] in measure.TAKING and s >= first))


# -- the four mistakes ---------------------------------------------------------------------------


def _blocking(a: Attempt, functions: tuple[str, ...]) -> Judged:
    """Waits between one step's plain-task submissions (the order of the driver's calls, not their timing)."""
    counted = {fn: _waits_between(a.trace, fn) for fn in dict.fromkeys(functions)}
    fn = max(counted, key=lambda f: len(counted[f][0]))
    waits, n = counted[fn]
    if len(waits) >= BLOCKING_MIN_WAITS:
        kind, where = Counter(waits).most_common(1)[0][0]
        finding = " (the Blocking finding)" if a.report.finding(Code.BLOCKING) is not None else ""
        return Remains("blocking", f"the wait in the loop: the driver still waits in {kind}() {len(waits)} times "
                                   f"between submitting the {n} {fn} tasks ({where}), and each wait holds back "
                                   f"every submission after it{finding}.")
    last = functions[-1]
    n2 = measure.tasks(a.trace, last)
    before = (f"all {n2} {last} tasks were submitted before the driver waited" if not counted[last][0] else
              f"only {measure.plural(len(counted[last][0]), 'wait')} fell between the {n2} {last} submissions "
              f"(a loop shows {BLOCKING_MIN_WAITS} or more)")
    return Fixed(f"no wait held up the loop: {before}, and the cell took every value {_how_taken(a.trace)}")


def _waits_between(trace: Any, function: str) -> tuple[list[tuple[str, str]], int]:
    """The driver's waits that began after the first and before the last submission of ``function``'s plain tasks.

    ``hpc.map`` batches and coalesced calls are sent by the runtime as earlier ones finish, not
    by the driver's loop, so only plain tasks count. Returns the waits (kind, where) and the
    number of plain tasks.
    """
    u = measure.dispatch_units(trace, function)
    submits = np.sort(u.submit[~u.is_batch])
    submits = submits[np.isfinite(submits)]
    if len(submits) < 2:
        return [], len(submits)
    b = trace.blocks
    kinds, sources = trace.block_kinds, trace.sources
    found = [(kinds[int(k)], display_source(sources[int(src)]))
             for k, src, start in sorted(zip(np.asarray(b["kind"]).tolist(), np.asarray(b["source"]).tolist(),
                                             np.asarray(b["start"], dtype=float).tolist()), key=lambda w: w[2])
             if submits[0] < start < submits[-1]]
    return found, len(submits)


def _how_taken(trace: Any) -> str:
    """``with 1 get() call`` / ``one at a time as they finished (as_completed)``: how the driver took results."""
    kinds = [k for k, _, _ in measure.waits(trace)]
    if "as_completed" in kinds or "wait" in kinds:
        return "as they finished"
    gets = sum(1 for k in kinds if k in measure.TAKING)
    return f"with {measure.plural(gets, 'get() call')} in all"


def _tiny(a: Attempt, gains_function: str, n_gains: int, score_function: str, n_scores: int,
          p: CapstoneProblem) -> Judged:
    """Sensors per gains task (tasks and map batches), and whether the days were cut into crumbs."""
    units = len(measure.dispatch_units(a.trace, gains_function))
    per_task = n_gains / max(units, 1)
    finding = (" (the Scheduling overhead finding)" if any(
        f.code == Code.TASKS_TOO_SMALL and f.evidence.get("function") == gains_function for f in a.report.findings)
        else "")
    if per_task < MIN_ITEMS_PER_TASK:
        each = ("one sensor per task" if units == n_gains else
                f"{per_task:.1f} sensors per task on average (from {MIN_ITEMS_PER_TASK} a task is worth its trip)")
        return Remains("tiny", f"the tiny tasks: the {n_gains} gains still came from "
                               f"{measure.plural(units, gains_function + ' task')}, {each}, so every sensor paid "
                               f"a whole task's scheduling and round trip{finding}.")
    if n_scores > MAX_SCORE_TASKS:
        return Remains("crumbs", f"the tiny tasks: {n_scores} {score_function} tasks, over {MAX_SCORE_TASKS}: "
                                 f"pieces of {_about(p.readings.size / n_scores):,} readings on average, where "
                                 f"an ordinary day holds {ordinary_day(p):,}, so every piece pays a whole task's "
                                 "scheduling and round trip for a sliver of work.")
    return Fixed(f"{n_gains} gains in {measure.plural(units, gains_function + ' task')}, {per_task:.0f} sensors per "
                 f"task on average (at least {MIN_ITEMS_PER_TASK}), and {n_scores} {score_function} tasks (at most "
                 f"{MAX_SCORE_TASKS})")


def _straggler(a: Attempt, function: str, want_total: float, n_readings: int) -> Judged:
    """The readings each scoring task covered (from its result), the largest against the median, and how they pack."""
    per_reading = want_total / n_readings
    values = derivation.scalar_values(a.trace, function) or []
    sizes = [float(v) / per_reading for v in values]
    med, largest = float(np.median(sizes)), max(sizes)
    ratio = largest / med if med > 0 else math.inf
    tail = [name for code, name in FINDING_NAMES.items() if code in (Code.STRAGGLER, Code.LONG_TAIL,
                                                                      Code.UNBALANCED_PARTITIONS)
            and a.report.finding(code) is not None]
    found = f" (the {' and '.join(tail)} finding{'s' if len(tail) > 1 else ''})" if tail else ""
    if ratio > STRAGGLER_RATIO:
        return Remains("straggler", f"the straggler: one {function} task still covered about {_about(largest):,} "
                                    f"readings, {fmt_x(ratio)} the median task's {_about(med):,} (read from what "
                                    "each task returned), so the run cannot end before that one task does, however "
                                    f"many workers share the rest{found}.")
    w = max(a.workers, 2)
    packed = measure.packed_speedup(sizes, w)
    on = f"on {w} workers" + (" (this run had 1, so the check counts 2)" if a.workers < 2 else "")
    if packed < MIN_PACKED_SPEEDUP:
        keep = "keeps" if len(sizes) == 1 else "keep"
        return Remains("straggler", f"the straggler: the {measure.plural(len(sizes), function + ' task')}, handed "
                                    f"out in the order submitted {on}, {keep} them busy for only {fmt_x(packed)} one "
                                    f"worker's work, under {fmt_x(MIN_PACKED_SPEEDUP)}: too few pieces to share"
                                    f"{found}.")
    low, high = _about(min(sizes)), _about(largest)
    each = f"about {low:,}" if low == high else f"about {low:,} to {high:,}"
    return Fixed(f"each {function} task covered {each} readings, the largest {ratio:.1f}x the median (at most "
                 f"{STRAGGLER_RATIO:g}x); handed out in the order submitted {on}, they keep them busy for "
                 f"{fmt_x(packed)} one worker's work (at least {fmt_x(MIN_PACKED_SPEEDUP)})")


def _about(n: float) -> int:
    """``n`` to 3 significant digits: a size read off a result is exact only to a fraction of a percent."""
    return int(float(f"{n:.3g}"))


def _big_puts(trace: Any, nbytes: int) -> list[int]:
    """The references of this region's puts that hold at least half of ``nbytes`` (a copy of the readings)."""
    p = trace.puts
    return [int(r) for r, b in zip(np.asarray(p["ref"]).tolist(), np.asarray(p["bytes"]).tolist())
            if b >= HOLDS_SHARE * nbytes]


def _data(a: Attempt, function: str, n: int, nbytes: int) -> Judged:
    """Bytes of arguments the scoring tasks received, what their function carried, how many copies were stored."""
    size = fmt_bytes(nbytes, ".3g")
    shipped = measure.bytes_in(a.trace, function)
    serialization = [name for code, name in FINDING_NAMES.items()
                     if code in (Code.REPEATED_ARGUMENT, Code.SERIALIZATION) and a.report.finding(code) is not None]
    found = f" (the {serialization[0]} finding)" if serialization else ""
    if shipped > MAX_SHIPPED_SHARE * nbytes:
        u = measure.dispatch_units(a.trace, function)
        whole = int(np.count_nonzero(np.asarray(u.bytes_in) >= HOLDS_SHARE * nbytes))
        return Remains("by-value", f"the data sent with every task: the {size} readings array is still sent with "
                                   f"{'each' if whole == len(u) else str(whole)} of the {len(u)} {function} tasks, "
                                   f"{fmt_bytes(shipped, '.3g')} of arguments in all{found}.")
    carried = measure.carried(a.trace, function)
    if carried is not None and carried.captured_bytes >= HOLDS_SHARE * nbytes:
        names = ", ".join(f"`{name}`" for name, b in carried.captured if b >= HOLDS_SHARE * nbytes)
        captured = " (the Serialization finding: a captured object)" if a.report.finding(
            Code.CAPTURED_OBJECT) is not None else ""
        return Remains("captured", f"the data sent with every task: the {function} function reads the global "
                                   f"{names} and was pickled with it at {fmt_bytes(carried.payload_bytes, '.3g')}, "
                                   f"sent {measure.plural(carried.sends, 'time')}, so the readings still travel with "
                                   f"the function instead of being stored once{captured}.")
    stored = _big_puts(a.trace, nbytes)
    if len(stored) > 1:
        return Remains("put-per-task", f"the data sent with every task: the cell stored the readings with put "
                                       f"{len(stored)} times, about once per task, and each call stores another "
                                       f"{size} copy.")
    if stored:
        reading = measure.tasks_resolving(a.trace, function, set(stored))
        return Fixed(f"{reading} of the {n} {function} tasks read the one stored copy of the readings on their "
                     f"workers (1 put); their arguments came to {fmt_bytes(shipped, '.3g')} in all")
    return Fixed(f"each {function} task received only its own readings: {fmt_bytes(shipped, '.3g')} of arguments "
                 f"in all, {shipped / nbytes:.1f}x the {size} array (at most {MAX_SHIPPED_SHARE:g}x)")


def _findings_raised(a: Attempt) -> tuple[str, ...]:
    """The timing findings this run's analysis raised (measured details: they vary with the machine's load)."""
    raised = [name for code, name in FINDING_NAMES.items() if a.report.finding(code) is not None]
    return (f"findings of this run: {', '.join(raised) if raised else 'none of the four mistakes'}",)


