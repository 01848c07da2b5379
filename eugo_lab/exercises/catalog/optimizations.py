"""Exercises of Course 3, "How automatic optimizations work": profile, vectorize, JIT, threads, the report.

Each checker grades what the learner's run measured: the merged profile of its tasks
(``%%eugo --profile``), the CPU seconds of its task bodies (the trace's ``cpu`` column: the
worker process's CPU time, which a busy machine slows far less than the wall clock), the JIT
verdicts the workers sent back (``%%eugo --optimize``), the BLAS threads the workers report,
and the "what the runtime did for you" report. Ratios are taken between two functions of the
*same* run, so a slow machine slows both sides. The lines of a verdict hold no measured time (the
times go in its details), only counts this run's trace shows. Every graded value must be what the
cell's tasks returned (the trace's result digests, :mod:`eugo_lab.exercises.derivation`): a right
answer computed in the notebook beside a decoy task is ``not yet``.

``profile-first`` (lesson 1): ``station_report(seed)`` loads a day of readings (NumPy, in C),
sorts them for the median, and corrects 24 hourly means by ``sensor_offset(seed)``, a
30,000-step Python loop that the starter calls once an hour, so it tops the self column. The
learner acts on that: calls it once a task (or keeps its answer), results unchanged, and names
it in ``hot``. The stations are the checker's: ``p.stations`` (seeds 0 to 5 in the lesson, 3
others in the hidden case, so offsets or seeds typed into the cell do not carry over). Criteria:
the run was profiled; ``reports`` is what this cell's tasks returned, the starter's numbers for
each station of the checker's copy of ``p.stations``, in order (computed here, never read from the
learner's functions); ``hot`` names ``sensor_offset``; the tasks still call it; and, owning the
input, the checker calls the plain ``station_report`` itself on a station of its own: it must return
the starter's numbers for it and run ``sensor_offset`` at most :data:`MAX_HOT_CALLS` times (the starter:
24). A share of the samples is a ratio the cell can dilute (a heavy function of no use beside the hot one
brings its share down, the hot function unchanged) and it moves with a busy machine's sampling; a count
does neither, so the share is evidence, and graded (under :data:`MAX_HOT_SHARE`) only where there is no
``station_report`` to call.

``vectorize`` (lesson 2): ``bill_loop`` and ``bill`` (a two-step tariff: a loop with an ``if``
per element) each run 3 times on ``p.kwh``, the homes' use handed out by the checker (300,000
homes in the lesson, 120,000-150,000 others in the hidden case); the learner rewrites ``bill`` with
whole-array operations (a comparison and ``np.where``, or ``minimum``/``maximum``). Criteria:
``bills`` are what the ``bill`` tasks returned, each the tariff's bills of the checker's copy of
``p.kwh``; the plain ``bill``, called by the checker on homes of its own (never seen by the cell, the
tariff's step among them), returns their bills (an answer made in the notebook, saved to a file or passed
in instead of ``p.kwh``, fits only ``p.kwh``); ``bill`` is not a loop compiled by hand (Numba); the
baseline is the checker's too: ``bill_loop`` is the starter's loop (its instructions) and ``loop_bills``
is what every one of its tasks returned, those bills; ``bill`` carries no array with it; per call,
``bill``'s tasks spend at most ``1/MIN_PROFILE_DROP`` of the loop version's time in Python bytecode
(the merged profile); ``bill`` is at least ``MIN_VECTOR_SPEEDUP`` times faster than ``bill_loop`` (median
task CPU seconds, same run).

``jit`` (lesson 3): ``histogram(values, bins)`` is a loop the optimizer can compile, but the
starter passes ``p.values`` as a Python list (the checker hands out 300,000 floats and 20 bins in
the lesson; 120,000-150,000 other floats and another number of bins in the hidden case).
The function graded is the one whose tasks returned ``hists``, whatever its name.
Criteria: ``--optimize`` was on; ``hists`` are what the tasks returned, each the counts of the
checker's copy of ``p.values`` in ``p.bins`` bins; ``histogram`` keeps a loop, and what it returns is
made from what its loop changes (read from its source: a loop whose work is dropped is dead code a
compiler deletes, and its before/after numbers would time no loop); owning the input, the plain function,
called by the checker on values and bins of its own, returns their counts (counts made in the notebook fit
only ``p.values``), and the same function made again with its loops taken out does not (a loop that
changes nothing beside counts made some other way); the workers' verdict for
``histogram`` is *compiled* (the result check passed) and the report's before/after numbers show it
at least ``MIN_JIT_SPEEDUP`` times faster.

``threads`` (lesson 4): ``oversubscribed`` (the baseline: ``threadpool_limits(os.cpu_count())``
in every worker) and ``tuned`` run the same BLAS work, ``p.calls`` tasks each (the checker hands out
4 in the lesson, 2 or 3 in the hidden case, so a count typed into the cell does not carry over).
Criteria: both ran, each exactly ``p.calls`` times (the checker's copy); the workers' readings
(the threads in effect as each task started, and the count each task returned) show ``tuned`` at
most the guard's cores / workers, and ``tuned`` sets no thread limit of its own. Task times are
shown as evidence only: how much oversubscription costs depends on the neighbours' load.

``runtime-report`` (lesson 5): the cell runs ``ewma`` (compiled) on ``p.series`` and ``busiest_hour`` (a
dict in the loop: declined) on ``p.hours`` with ``--optimize`` and defines ``triage(report)``, which returns
the applied items' targets and a dict of each declined item's target to its advice. The checker hands out
the inputs: 200,000 values and hours in the lesson (seed 3, as the cell made them before), 120,000-150,000
others in the hidden case, whose busiest hour is another. Criteria: ``--optimize`` was on; the report of
this cell has both functions' lines; ``averages`` and ``peaks`` are what those tasks returned, each the
EWMA of the checker's copy of ``p.series`` and the busiest hour of ``p.hours``; ``triage`` sorts that report
and three reports unlike it (built from the same kinds of items), so an answer typed from reading this
run's report fails.
"""

from __future__ import annotations

import ast
import inspect
import os
import random
import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.contract import cellrecord
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.jit import auto
from eugo_lab.jit import verdicts as jit
from eugo_lab.optimizations import report as opt_report

COURSE = "03-automatic-optimizations/"


def _option_hint(exercise_id: str, option: str, what: str) -> Hint:
    """The tiers for a run made without the ``%%eugo`` option the exercise reads (``--profile``, ``--optimize``)."""
    return Hint(f"Put {option} back on the exercise cell's first line, so the run {what}, and run the cell again.",
                f"%%eugo --exercise {exercise_id} {option}")

# -- shared readings of a run ----------------------------------------------------------------------


def _profile(a: Attempt, what: str) -> Any:
    """The run's merged profile; ``not yet`` when the cell was not run with ``--profile``."""
    from eugo_lab.profile.model import Profile

    p = Profile.from_trace(a.trace) if getattr(a.trace, "profiles", ()) else None
    if p is None or p.total <= 0:
        raise NotYet(f"this run has no profile, so there is nothing to {what}: the cell ran without the --profile "
                     "option.", mistake="no-profile")
    return p


def _task_seconds(a: Attempt, function: str, cpu: bool) -> np.ndarray:
    """Seconds of each first-attempt task body of ``function``: the worker process's CPU time, or the wall clock."""
    t = a.trace.tasks
    sel = a.trace.first_attempts(function)
    if cpu:
        return np.asarray(t["cpu"], dtype=float)[sel]
    return (np.asarray(t["end"], dtype=float) - np.asarray(t["start"], dtype=float))[sel]


def _ratio(a: Attempt, slow: str, fast: str, cpu: bool) -> float:
    """Median task of ``slow`` over median task of ``fast``, both from this run."""
    return float(np.median(_task_seconds(a, slow, cpu)) / max(float(np.median(_task_seconds(a, fast, cpu))), 1e-6))


def _need_tasks(a: Attempt, function: str, n: int, how: str) -> None:
    got = measure.tasks(a.trace, function)
    if got < n:
        raise NotYet(f"{measure.plural(got, f'{function} task')} ran, the check needs {n}: {how}", mistake="tasks")


def _python_seconds(p: Any, function: str) -> float:
    """Seconds the profiled tasks of ``function`` spent in Python bytecode (any frame under it, not C code)."""
    total = 0.0

    def walk(node: Any) -> None:
        nonlocal total
        if node.kind in ("app", "library"):
            total += node.self_time
        for c in node.children:
            walk(c)

    for task in p.tree().children:
        if task.function == function:
            walk(task)
    return total


def _optimized(a: Attempt) -> None:
    if not a.trace.meta.get("optimize"):
        raise NotYet("this run was not optimized, so no optimization was tried: the cell ran without the "
                     "--optimize option.", mistake="no-optimize")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _jit_declined_line(v: jit.FunctionVerdict) -> str:
    # what happened only: what would help is the first hint's, so the verdict hands over no fix
    what, _ = jit.explain(v.code)
    detail = f" ({v.detail})" if v.detail and not v.detail.startswith("0x") else ""
    return f"the optimizer did not compile {v.function}: {what}{detail}."


def _from_tasks(a: Attempt, value: Any, function: str, name: str) -> None:
    """``not yet`` unless ``value`` holds exactly what ``function``'s tasks of this cell returned, in task order.

    The value is compared with the digests the trace recorded of each task's return value, so a
    right answer computed in the driver (beside a decoy call) or left by an earlier cell fails.
    """
    d = derivation.listed(value, a.trace, function, name=name)
    if not d:
        raise NotYet(f"{d.why}: this exercise grades what the {function} tasks of this cell returned, so `{name}` "
                     "must be the list their futures gave back.", mistake="not-from-tasks")
    steps.fetched(a, value, function, name, mistake="not-from-tasks")


def _from_tasks_hint(line: str) -> Hint:
    """The tiers for a graded value that did not come from the tasks' results."""
    return Hint("Assign the graded variable the list that get() returns for the tasks' futures, in the order you "
                "submitted them: not a value computed in the notebook, and not a copy from an earlier cell.", line)


def _compiled_functions(a: Attempt, *functions: str) -> list[str]:
    """Which of ``functions`` the JIT (automatic or ``--optimize``) compiled on some worker in this run."""
    return [v.function for v in jit.verdicts_from_trace(a.trace)
            if v.function in functions and v.status in (jit.VERDICT_COMPILED, "mixed")]


#: The JIT decline codes whose fix the exercises' hints name; any other is "declined".
_JIT_MISTAKES = {"lists": "lists", "no-arrays": "lists", "too-short": "numpy-instead", "not-faster": "numpy-instead",
                 "unsupported-call": "objects", "python-objects": "objects", "unknown-call": "objects"}


# -- lesson 1: profile first -------------------------------------------------------------------------


PROFILE_FN, PROFILE_HOT = "station_report", "sensor_offset"
PROFILE_HOURS, PROFILE_N, PROFILE_OFFSET_DRAWS = 24, 240_000, 30_000
# The starter calls sensor_offset once an hour, 24 times a task: it takes 75-90% of the sampled
# time there (its Python loop against NumPy's C code for the rest). Called once a task, it takes
# 10-25%. A third sits far from both, and a share is a ratio of samples of the same run, so a slow
# or busy machine moves both sides alike.
MAX_HOT_SHARE = 1 / 3
# The hidden case: 3 other stations (half the lesson's 6, so a passing cell costs at most ~1.5x), still a
# task for each of 2 workers with samples to spare: a hoisted sensor_offset's share stays far under a third.
PROFILE_STATIONS, PROFILE_HIDDEN_STATIONS = 6, 3


@problems.declare("profile-first")
@dataclass(frozen=True, repr=False)
class ProfileProblem(problems.Problem):
    """The stations to report on, by seed: 0 to 5 in the lesson, 3 others in the hidden case."""

    stations: tuple[int, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> ProfileProblem:
        """The lesson's seeds 0..5 (the ones its prose describes), or 3 distinct seeds from 100 up from ``rng``."""
        if not hidden:
            return cls(tuple(range(PROFILE_STATIONS)))
        return cls(tuple(rng.sample(range(100, 10_000), PROFILE_HIDDEN_STATIONS)))


def profile_reference(seed: int) -> tuple[float, list[float]]:
    """What ``station_report(seed)`` returns: the day's median reading and its 24 corrected hourly means."""
    import random

    values = np.random.default_rng(seed).normal(20.0, 5.0, PROFILE_N)
    rng = random.Random(seed)
    total = 0.0
    for _ in range(PROFILE_OFFSET_DRAWS):
        total += rng.random()
    offset = 10.0 * (total / PROFILE_OFFSET_DRAWS - 0.5)
    means = values.reshape(PROFILE_HOURS, -1).mean(axis=1)
    return float(np.sort(values)[PROFILE_N // 2]), [float(m) - offset for m in means]


# A share is a ratio the cell can dilute (more work of its own beside the hot function brings the share down, the
# hot function unchanged), so the checker also counts, on a station of its own, how often one station_report
# call runs sensor_offset: the starter 24 times (once an hour), a fix once. A count is the same on a busy
# machine and under any sampling interval. A third of the starter's sits far from both.
MAX_HOT_CALLS = PROFILE_HOURS // 3
# The checker's own stations are drawn from here, outside the lesson's and the hidden case's seeds.
PROFILE_OWN_STATIONS = range(10_000, 20_000)


def _offset_calls(fn: Any, seed: int) -> tuple[int, Any, BaseException | None]:
    """``(calls of sensor_offset, result, error)`` of the plain ``fn`` called here on station ``seed``.

    The calls are counted by the name of the code that runs (a Python function named sensor_offset,
    whichever name refers to it), with a trace function that sees only calls: no line is traced.
    """
    import sys

    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_name == PROFILE_HOT:
            calls += 1

    before = sys.gettrace()
    sys.settrace(count)
    try:
        got, error = steps.called_on_own_input(fn, seed)
    finally:
        sys.settrace(before)
    return calls, got, error


_REPORTS = "reports = hpc.get([station_report.remote(s) for s in p.stations])"
_HOISTED = ("def hourly_means(values, seed):\n    means = values.reshape(24, -1).mean(axis=1)\n"
            "    offset = sensor_offset(seed)   # the same for every hour: once a task is enough\n"
            "    return [float(m) - offset for m in means]\n\n"
            'hot = "sensor_offset"')
PROFILE_HINTS = {
    DEFAULT: Hint("Read the self column of the starter's profile, not the total: the function of your own code at "
                  "its top does the work. Then look at where it is called, and how often, with the same argument.",
                  _HOISTED),
    "no-profile": _option_hint("profile-first", "--profile", "is sampled"),
    "not-a-name": Hint("Give `hot` the name of the function you made cheaper, as a string.", 'hot = "sensor_offset"'),
    "no-tasks": Hint("Submit the station_report tasks in this cell, so their samples are in its profile.",
                     _REPORTS),
    "caller": Hint("A remote function's total includes every function it calls: look for the function called "
                   "from it whose own lines take the time, the top of the self column.", _HOISTED),
    "library": Hint("Name a function of your cell, not library code: the top row of the self column that is not "
                    "marked [library].", _HOISTED),
    "not-hot": Hint("Run the starter again and read the self column: the function at its top is the one to name and "
                    "to make cheaper, whatever the names suggest.", _HOISTED),
    "still-hot": Hint("The function does the same work every time it is called within a task, with the same "
                      "argument: call it once per task, keep its answer in a variable, and use that for every hour.",
                      _HOISTED),
    "offset-elsewhere": Hint("Let each task work out its own offset by calling sensor_offset, once, instead of "
                             "handing it a number made in the notebook.", _HOISTED),
    "result": Hint("Keep what each task returns, one task for each station of p.stations, in order: the median "
                   "and the 24 hourly means, each corrected by the same offset. Change how often the offset is worked "
                   "out, not how.", _HOISTED + "\n\n" + _REPORTS),
    "not-from-tasks": _from_tasks_hint(_REPORTS),
    problems.CARRY_OVER: Hint("Report on the stations of p.stations, the exercise's inputs, instead of seeds or "
                              "offsets written into the cell, and let each task work out its own offset.",
                              'p = exercises.problem("profile-first")\n' + _REPORTS),
}


def _function_name(value: Any) -> str | None:
    """The name ``value`` gives: a string as typed (without ``()``), or a function's ``__name__``."""
    name = getattr(value, "__name__", None) if callable(value) else value
    if not isinstance(name, str) or not name.strip():
        return None
    return name.strip().removesuffix("()")


@exercise("profile-first", lesson=COURSE + "01-profile-first.ipynb", title="Act on what the profile says",
          hints=PROFILE_HINTS)
def profile_first(a: Attempt) -> Verdict:
    """Grade acting on a profile: the starter's hot function made cheap, results unchanged, as this run's profile shows.

    The graded fact is a share of this run's samples (a ratio within one run, the same on a slow
    machine), never a time; ``reports`` must be what this cell's ``station_report`` tasks returned, the
    starter's numbers for the checker's stations (``problems.given(a).stations``).
    """
    stations = problems.given(a).stations
    prof = _profile(a, "read")
    hot = a.require("hot")
    reports = a.require("reports")
    name = _function_name(hot)
    if name is None:
        return a.not_yet(f"`hot` holds {type(hot).__name__} {hot!r}, not a function's name as a string.",
                         mistake="not-a-name")
    # The profile must be of the station report itself: a profile of other work (a decoy task that
    # runs one helper alone) would make any change look measured.
    n = measure.tasks(a.trace, PROFILE_FN)
    if n == 0:
        ran = ", ".join(f for f, k in a.trace.task_counts().items() if k) or "no task"
        return a.not_yet(f"no {PROFILE_FN} task ran in this cell (the profile is of {ran}), so it does not "
                         "measure the station report the exercise asks about.", mistake="no-tasks")
    _from_tasks(a, reports, PROFILE_FN, "reports")
    expected = [profile_reference(s) for s in stations]
    if len(reports) != len(expected):
        return a.not_yet(f"`reports` holds {measure.plural(len(reports), 'result')} and p.stations hands out "
                         f"{measure.plural(len(expected), 'station')}: one {PROFILE_FN} task for each, in order.",
                         mistake="result")
    got = [(r[0], list(r[1])) if isinstance(r, (list, tuple)) and len(r) == 2 else r for r in reports]
    if not measure.same_within_tolerance(got, expected):
        return a.not_yet(f"the {PROFILE_FN} tasks returned something else than the starter's for the "
                         f"{measure.plural(len(expected), 'station')} of p.stations: each should be the day's median "
                         "and its 24 hourly means, corrected by the station's offset.", mistake="result")
    rows = prof.hot_functions(None)
    share = {h.function: h for h in rows}
    mine = [h for h in rows if h.where == "app" and not h.function.startswith("<")]
    top = max(mine, key=lambda h: (h.self_share, h.total_share)) if mine else None
    hot_share = share[PROFILE_HOT].self_share if PROFILE_HOT in share else 0.0
    details = (f"{PROFILE_HOT}: {hot_share:.0%} self in this run",
               *([f"top of the self column: {top.function}, {top.self_share:.0%}"] if top is not None else []))
    if name != PROFILE_HOT:
        # The hot function's name is the answer: a not yet for another name shows no line that names it.
        details = ()
        if name in a.trace.functions:
            return a.not_yet(f"`hot` names {name}, the remote function you submitted: its total is all of the "
                             "task's time because it includes every function it calls, but its own lines do almost "
                             "nothing.", mistake="caller", details=details)
        if name in share and share[name].where != "app":
            return a.not_yet(f"`hot` names {name}, library code ({share[name].file}), not a function of yours.",
                             mistake="library", details=details)
        if name in share or callable(a.namespace.get(name)):
            own = f"{share[name].self_share:.0%}" if name in share else "too little to be sampled"
            return a.not_yet(f"`hot` names {name}, which is not the function at the top of the starter's self "
                             f"column (in this run its own lines take {own} of the sampled time).",
                             mistake="not-hot", details=details)
        known = ", ".join(sorted({h.function for h in mine})) or "none"
        return a.not_yet(f"`hot` names {name}, and no function of that name ran in the profiled tasks; the "
                         f"functions of your code in the profile are: {known}.", mistake="not-hot", details=details)
    if not measure.code_references(a.namespace.get(PROFILE_FN), frozenset({PROFILE_HOT}), a.namespace):
        # The offset reached the tasks some other way (worked out in the notebook, typed in): the
        # profile then measures tasks without the work the exercise asks to make cheaper.
        return a.not_yet(f"the {PROFILE_FN} tasks no longer call {PROFILE_HOT}: their offset comes from somewhere "
                         "else, so this run's profile does not measure the work it stands for.",
                         mistake="offset-elsewhere", details=details)
    task_fn = a.namespace.get(PROFILE_FN)
    calls: int | None = None
    if callable(task_fn):
        # Own the input, and a baseline the cell cannot dilute: one station_report call on a station of the
        # checker's own, here, its sensor_offset calls counted against the starter's once an hour.
        seed = random.Random(problems.draw_seed()).choice(PROFILE_OWN_STATIONS)
        calls, got, error = _offset_calls(task_fn, seed)
        if error is not None:
            return a.not_yet(f"the checker called {PROFILE_FN} on a station of its own (not one of p.stations) and "
                             f"it raised {type(error).__name__}: each task must work out its offset from the station "
                             f"it is given, with {PROFILE_HOT}.", mistake="offset-elsewhere", details=details)
        ref = profile_reference(seed)
        got = (got[0], list(got[1])) if isinstance(got, (list, tuple)) and len(got) == 2 else got
        if not measure.same_within_tolerance(got, ref):
            return a.not_yet(f"the checker called {PROFILE_FN} on a station of its own (not one of p.stations) and "
                             "it returned something else than the starter's numbers for that station: each should "
                             "be the day's median and its 24 hourly means, corrected by the station's offset.",
                             mistake="result", details=details)
        if calls > MAX_HOT_CALLS:
            lead = ("is still where the time goes" if hot_share > MAX_HOT_SHARE
                    else "still does its work as often as before")
            return a.not_yet(f"{PROFILE_HOT} {lead}: one {PROFILE_FN} call runs it {measure.plural(calls, 'time')}, "
                             f"as the starter does once an hour (the checker called {PROFILE_FN} on a station of its "
                             f"own and counted); in this run its own lines take {hot_share:.0%} of the sampled time, "
                             "and other work beside it does not change how often it runs.", mistake="still-hot",
                             details=details)
    elif hot_share > MAX_HOT_SHARE:  # nothing to call: the share of this run's samples is all there is
        return a.not_yet(f"{PROFILE_HOT} is still where the time goes: its own lines take {hot_share:.0%} of the "
                         f"sampled time of {measure.plural(prof.tasks, 'task')}, so the tasks still do its work as "
                         "often as before.", mistake="still-hot", details=details)
    now = f"; the top of the self column is now {top.function}" if top is not None and top.function != name else ""
    counted = (f"one {PROFILE_FN} call now runs it {measure.plural(calls, 'time')}, the starter {PROFILE_HOURS} "
               f"(the checker called {PROFILE_FN} on a station of its own and counted); " if calls is not None else "")
    return a.passed(f"`hot` = {name}: {counted}in this run's merged profile of {measure.plural(prof.tasks, 'task')} "
                    f"on {measure.plural(prof.workers, 'worker')} its own lines take {hot_share:.0%} of the sampled "
                    f"time{now}",
                    f"`reports` holds the {measure.plural(n, 'result')} the {PROFILE_FN} tasks returned, the same "
                    f"medians and hourly means as the starter's for the {measure.plural(len(stations), 'station')} "
                    "of p.stations", details=details)


# -- lesson 2: vectorization -------------------------------------------------------------------------

VEC_N = 300_000
VEC_SEED = 5
# The hidden case: 40-50% of the lesson's homes, so a passing cell costs at most ~1.5x. The speedup is a ratio
# of per-element work on both sides (the loop's bytecode against NumPy's C loop and the array's pickling), so it
# holds at these sizes as at 300,000.
VEC_HIDDEN_SIZES = range(120_000, 150_001)
VEC_LOOP, VEC_FN = "bill_loop", "bill"
VEC_CALLS = 3
# The tariff: the first VEC_STEP kWh of a day at VEC_LOW a kWh, the rest at VEC_HIGH.
VEC_STEP, VEC_LOW, VEC_HIGH = 10.0, 0.20, 0.35
# By median task CPU under --profile (the exercise's option: its sampler costs the short whole-array tasks
# most), a whole-array bill measured 8-14x the loop's speed here (300,000 elements); a call per element,
# np.vectorize, a comprehension or C builtins through map(), 1-3x. 4x sits between: at 10x, honest
# whole-array code failed one run in three.
MIN_VECTOR_SPEEDUP = 4.0
# The loop's tasks spend nearly all their time in bytecode; a whole-array version almost none: a fifth
# of the loop's is far from both.
MIN_PROFILE_DROP = 5.0
# The baseline the speedup is measured against is the checker's: bill_loop must be this loop, run on p.kwh (a
# loop made slower, or given a longer array, would make any bill look fast).
VEC_LOOP_SOURCE = ("def bill_loop(kwh):\n    out = np.empty_like(kwh)\n    for i in range(len(kwh)):\n"
                   "        if kwh[i] <= 10.0:\n            out[i] = kwh[i] * 0.20\n        else:\n"
                   "            out[i] = 2.0 + (kwh[i] - 10.0) * 0.35\n    return out\n")
# A bill function that carries this share of the homes' array with it (a global or closure it reads) ships an
# answer, not a computation: a few names and numbers are far below it.
MAX_CARRIED_SHARE = 0.1


@problems.declare("vectorize")
@dataclass(frozen=True, repr=False, eq=False)  # an array field: compared by identity, never element by element
class VectorizeProblem(problems.Problem):
    """Each home's use in a day, in kWh, read-only: 300,000 homes in the lesson, 120,000-150,000 in the hidden case."""

    kwh: np.ndarray

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> VectorizeProblem:
        """Gamma(2, 6) draws (a mean of 12 kWh, about half the homes past the 10 kWh step) from a seeded generator."""
        if not hidden:  # the lesson's own array, the one its prose and verdicts describe
            return cls(problems.frozen_array(np.random.default_rng(VEC_SEED).gamma(2.0, 6.0, VEC_N)))
        size = rng.choice(VEC_HIDDEN_SIZES)
        return cls(problems.frozen_array(np.random.default_rng(rng.randrange(2**32)).gamma(2.0, 6.0, size)))


def vector_inputs() -> np.ndarray:
    """The lesson's ``p.kwh``: a day's use of each of its 300,000 homes."""
    return problems.lesson_case("vectorize").kwh


def vector_reference(kwh: np.ndarray) -> np.ndarray:
    """Each home's bill under the two-step tariff, as the starter's loop computes it."""
    return np.where(kwh <= VEC_STEP, kwh * VEC_LOW, VEC_STEP * VEC_LOW + (kwh - VEC_STEP) * VEC_HIGH)


# The checker's own homes, which the cell never sees: a short draw of the same kind, plus the values around the
# tariff's step, where a bill that does not apply the tariff per home shows it.
VEC_OWN_HOMES = 997
VEC_OWN_EDGES = (0.0, 0.5, VEC_STEP - 1e-6, VEC_STEP, VEC_STEP + 1e-6, 10.5, 123.4)


def vector_own_homes(seed: int) -> np.ndarray:
    """Homes of the checker's own (a draw from ``seed`` and the tariff's edges): what it calls ``bill`` on itself."""
    rng = np.random.default_rng(seed)
    homes = np.concatenate([rng.gamma(2.0, 6.0, VEC_OWN_HOMES), np.asarray(VEC_OWN_EDGES)])
    return homes[rng.permutation(homes.size)]


def _hand_compiled(fn: Any, namespace: dict[str, Any]) -> list[str]:
    """The compiled-by-hand callables (Numba's ``njit``, ``jit``, ``vectorize``) ``fn`` is or calls, by name.

    Read from code and the namespace: ``fn`` itself wrapped by a JIT, or a name its code (or a helper's)
    refers to whose value is a JIT dispatcher or the ``numba`` module.
    """
    def jitted(v: Any) -> bool:
        module = v.__name__ if inspect.ismodule(v) else getattr(type(v), "__module__", "") or ""
        return module.split(".")[0] == "numba"

    f = steps.plain_function(fn)
    own = [getattr(f, "__name__", VEC_FN)] if jitted(f) else []
    names = {n for n, v in namespace.items() if jitted(v)}
    return own + sorted(measure.code_references(fn, names, namespace))


def _starter_loop() -> list[tuple[str, Any]]:
    """The instructions of the starter's bill_loop, compiled here from its text."""
    return steps.instructions(steps.source_code(VEC_LOOP_SOURCE))  # compiled, never run


def _is_starter_loop(fn: Any) -> bool:
    """``fn`` (a remote function or a plain one) runs the starter's bill_loop, whatever its docstring and layout."""
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    return code is not None and steps.instructions(code) == _starter_loop()


_BILL = ("@hpc.remote\ndef bill(kwh):\n"
         "    \"\"\"Both formulas on the whole array; np.where keeps, element by element, the one that applies.\"\"\"\n"
         "    return np.where(kwh <= 10.0, kwh * 0.20, 2.0 + (kwh - 10.0) * 0.35)")
_VEC_RUN = ("loop_bills = hpc.get([bill_loop.remote(p.kwh) for _ in range(3)])\n"
            "bills = hpc.get([bill.remote(p.kwh) for _ in range(3)])")
_BILL_LOOP = ("@hpc.remote\ndef bill_loop(kwh):\n    out = np.empty_like(kwh)\n    for i in range(len(kwh)):\n"
              "        if kwh[i] <= 10.0:\n            out[i] = kwh[i] * 0.20\n        else:\n"
              "            out[i] = 2.0 + (kwh[i] - 10.0) * 0.35\n    return out")
VECTOR_HINTS = {
    DEFAULT: Hint("Write bill without a loop over the homes: compute both formulas on the whole array, then let "
                  "NumPy pick, element by element, the one the condition selects (np.where takes the condition "
                  "as an array of booleans).", _BILL),
    "no-profile": _option_hint("vectorize", "--profile", "is sampled"),
    "tasks": Hint("Keep both lines of the starter that submit 3 tasks each (bill_loop's and bill's) and get "
                  "their results.", _VEC_RUN),
    "result": Hint("bill must return the same array as bill_loop: 0.20 a kWh up to 10 kWh, and past that 2.0 plus "
                   "0.35 for each kWh over 10, chosen per home by the condition kwh <= 10.", _BILL),
    "loop-profile": Hint("Leave bill_loop as the starter has it, give it p.kwh, and run the cell again: the check "
                         "compares your bill against it.", _BILL_LOOP + "\n\n" + _VEC_RUN),
    "still-looping": Hint("Remove the for loop and its if from bill: a comparison on the whole array gives the "
                          "condition for every home at once, and np.where chooses between two whole-array results.",
                          _BILL),
    "per-element": Hint("Avoid np.vectorize, map() and list comprehensions: they still call Python once per "
                        "element. Use a comparison on the whole array and np.where.", _BILL),
    "carried": Hint("Let bill compute the bills from the array it is given, with whole-array operations, instead of "
                    "returning an array made outside it (a global or closure is shipped with the function).", _BILL),
    "not-computed": Hint("Let bill work out each home's bill from the array it is given, with whole-array operations: "
                         "the checker calls it on homes of its own too, so an answer made in the notebook (a file, a "
                         "global, bills passed in instead of p.kwh) does not fit them.", _BILL + "\n\n" + _VEC_RUN),
    "hand-compiled": Hint("Leave compilers out of this exercise (the next lesson's technique): write bill with NumPy's "
                          "whole-array operations, a comparison on the whole array and np.where.", _BILL),
    "not-from-tasks": _from_tasks_hint(_VEC_RUN),
    "compiled": Hint("Keep --no-optimize on the exercise cell's first line, so both functions run as plain Python "
                     "and the comparison measures your whole-array version, not the compiler's work.",
                     "%%eugo --exercise vectorize --profile --no-optimize"),
    problems.CARRY_OVER: Hint("Give both functions p.kwh, the exercise's inputs, instead of an array made or typed in "
                              "the cell, and let bill compute from the array it is given.",
                              'p = exercises.problem("vectorize")\n' + _VEC_RUN),
}


def _every_bill(value: Any, want: np.ndarray) -> bool:
    """``value`` is a non-empty list of arrays, each equal to ``want`` (within float tolerance)."""
    return (isinstance(value, (list, tuple)) and bool(value)
            and all(measure.same_within_tolerance(v, want) for v in value))


def _times_faster(ratio: float) -> str:
    """``12x faster``, ``1.4x faster`` or ``3.1x slower``: never a ``0x``."""
    if ratio >= 1.95:
        return f"{ratio:.0f}x faster"
    if ratio >= 1.0:
        return f"{ratio:.1f}x faster"
    return f"{1 / max(ratio, 1e-9):.1f}x slower"


def _has_loop_statement(fn: Any) -> bool:
    """Whether the source of ``fn`` (its plain function's) has a ``for`` or ``while`` statement."""
    func = _function_tree(fn)
    return func is not None and any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(func))


def _computes_bills(a: Attempt, fn: Any) -> None:
    """``not yet`` unless the plain ``bill`` gives the tariff's bills of homes of the checker's own (called here)."""
    if not callable(fn):
        return
    homes = vector_own_homes(problems.draw_seed())
    got, error = steps.called_on_own_input(fn, homes.copy())
    if error is None and measure.same_within_tolerance(got, vector_reference(homes)):
        return
    if error is not None:
        said = f"it raised {type(error).__name__}"
    elif isinstance(got, np.ndarray) and got.shape != homes.shape:
        said = f"it returned {got.size:,} values"
    else:
        said = "it returned something else than their bills"
    raise NotYet(f"{VEC_FN} does not compute the bills from the array it is given: the checker called it on "
                 f"{homes.size:,} homes of its own (not p.kwh) and {said}, so the right bills of p.kwh came "
                 "from somewhere else than its work.", mistake="not-computed")


@exercise("vectorize", lesson=COURSE + "02-vectorization.ipynb", title="Vectorize a loop with a branch",
          hints=VECTOR_HINTS)
def vectorize(a: Attempt) -> Verdict:
    """Grade vectorizing a branch: same bills, the profile's Python time gone, a large speedup in the same run.

    The homes' use and the bills they should get are the checker's (``problems.given(a).kwh``), and so
    is the baseline: ``bill_loop`` must be the starter's loop, run on that array (``loop_bills``), so a
    loop made slower or given more work cannot make ``bill`` look fast.
    """
    homes = problems.given(a).kwh
    want = vector_reference(homes)
    results = a.require("bills")
    if not _every_bill(results, want):
        return a.not_yet("`bills` is not each home's bill under the tariff (0.20 a kWh up to 10 kWh, 0.35 past "
                         f"that) for the {homes.size:,} homes of p.kwh: your bill does not return the same array as "
                         "bill_loop.", mistake="result")
    how = f"both lines that submit {VEC_CALLS} tasks each (bill_loop's and bill's) must stay."
    _need_tasks(a, VEC_LOOP, VEC_CALLS, how)
    _need_tasks(a, VEC_FN, VEC_CALLS, how)
    _from_tasks(a, results, VEC_FN, "bills")
    # The baseline: the starter's loop, on the checker's array, every one of its tasks (a longer array in an extra
    # task would move the median the speedup is read from).
    if not _is_starter_loop(a.namespace.get(VEC_LOOP)):
        return a.not_yet(f"{VEC_LOOP} is not the starter's loop any more, and the check measures your {VEC_FN} "
                         "against that loop.", mistake="loop-profile")
    loop_bills = a.require("loop_bills")
    if not derivation.listed(loop_bills, a.trace, VEC_LOOP) or not _every_bill(loop_bills, want):
        return a.not_yet(f"`loop_bills` is not what the {VEC_LOOP} tasks returned for the {homes.size:,} homes of "
                         f"p.kwh: the check measures your {VEC_FN} against the loop run on the same homes, by every "
                         f"{VEC_LOOP} task of the cell.", mistake="loop-profile")
    carried = measure.carried(a.trace, VEC_FN)
    if carried is not None and carried.captured_bytes >= MAX_CARRIED_SHARE * homes.nbytes:
        return a.not_yet(f"{VEC_FN} carried {carried.captured_bytes:,} bytes of globals or closure with it to the "
                         "workers: it returns an array made outside it instead of computing the bills from the "
                         "array it is given.", mistake="carried")
    # Own the input: the bills above are judged on p.kwh, which the cell also had; a bill that hands back an answer
    # made in the notebook (a file, bills passed in instead of p.kwh) fits only that array.
    _computes_bills(a, a.namespace.get(VEC_FN))
    hand = _hand_compiled(a.namespace.get(VEC_FN), a.namespace)
    if hand:
        return a.not_yet(f"{VEC_FN} computes the bills with a loop compiled by hand ({', '.join(hand)}: Numba), not "
                         f"with NumPy's whole-array operations, and this exercise is about those: the profile of its "
                         "tasks shows the compiled loop and the compiler's own work, not vectorized code.",
                         mistake="hand-compiled")
    # With the automatic JIT on, a loop in bill is compiled and looks as fast as NumPy: the
    # comparison would grade the compiler's work, not the learner's rewrite.
    compiled = _compiled_functions(a, VEC_LOOP, VEC_FN)
    if compiled:
        return a.not_yet(f"the optimizer compiled {' and '.join(compiled)} in this run, so the comparison would "
                         "measure compiled loops, not whole-array operations: the cell ran without the "
                         "--no-optimize option.", mistake="compiled")
    prof = _profile(a, "compare")
    loop_py = _python_seconds(prof, VEC_LOOP) / VEC_CALLS
    mine_py = _python_seconds(prof, VEC_FN) / VEC_CALLS
    speedup = _ratio(a, VEC_LOOP, VEC_FN, cpu=True)
    details = (f"Python bytecode per call: {loop_py * 1e3:.1f} ms in {VEC_LOOP}, {mine_py * 1e3:.1f} ms in {VEC_FN}",
               f"{_times_faster(speedup)} by task CPU time")
    if loop_py <= 0:
        return a.not_yet(f"the profile caught no Python time in {VEC_LOOP}, so there is nothing to compare with: "
                         "bill_loop is not the starter's loop any more.", mistake="loop-profile", details=details)
    if mine_py * MIN_PROFILE_DROP > loop_py:
        # Why, read from bill's code: a `for` or `while` in it, or a Python function run per element (np.vectorize)
        why = ("the `for` loop is still there" if _has_loop_statement(a.namespace.get(VEC_FN))
               else "a Python function still runs once per element")
        return a.not_yet(f"the profile still shows {VEC_FN}'s tasks running Python bytecode for every element, as "
                         f"the loop does: {why}.", mistake="still-looping", details=details)
    if speedup < MIN_VECTOR_SPEEDUP:
        return a.not_yet(f"{VEC_FN} gives the right result but is under {MIN_VECTOR_SPEEDUP:.0f}x faster than the "
                         "loop in this run: it still makes a call per element.", mistake="per-element",
                         details=details)
    n_fn, n_loop = measure.tasks(a.trace, VEC_FN), measure.tasks(a.trace, VEC_LOOP)
    return a.passed(f"{VEC_FN} returns the same array as {VEC_LOOP}: `bills` holds the "
                    f"{measure.plural(n_fn, 'array')} its tasks returned, the bills of the {homes.size:,} homes of "
                    "p.kwh",
                    f"the profile shows its Python bytecode time under 1/{MIN_PROFILE_DROP:.0f} of the loop's",
                    f"{_times_faster(speedup)} than the loop, at least the {MIN_VECTOR_SPEEDUP:.0f}x the check asks "
                    f"(median task CPU time of {measure.plural(n_fn, f'{VEC_FN} task')} against {n_loop} of "
                    f"{VEC_LOOP}, same run)",
                    details=details)


# -- lesson 3: JIT -------------------------------------------------------------------------------------

JIT_N = 300_000
JIT_SEED = 4
JIT_BINS = 20
# The hidden case: 40-50% of the lesson's values, so a passing cell costs at most ~1.5x (its plain loop still
# takes tens of milliseconds a call, far from the optimizer's "too short to compile"), and another number of bins,
# so counts or a bin count written into the cell do not fit it.
JIT_HIDDEN_SIZES = range(120_000, 150_001)
JIT_HIDDEN_BINS = (12, 16, 24, 25, 32)
JIT_FN = "histogram"
# A compiled loop over 300,000 values runs 100x+ faster than the plain one here; 10x is the course's bar.
MIN_JIT_SPEEDUP = 10.0


@problems.declare("jit")
@dataclass(frozen=True, repr=False, eq=False)  # an array field: compared by identity, never element by element
class JitProblem(problems.Problem):
    """The values to count (read-only floats in [0, 1): 300,000 in the lesson) and how many equal bins (20 there)."""

    values: np.ndarray
    bins: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> JitProblem:
        """Uniform draws from a seeded NumPy generator; in the hidden case fewer, and another number of bins."""
        if not hidden:  # the lesson's own values, the ones its prose and verdicts describe
            return cls(problems.frozen_array(np.random.default_rng(JIT_SEED).random(JIT_N)), JIT_BINS)
        size, bins = rng.choice(JIT_HIDDEN_SIZES), rng.choice(JIT_HIDDEN_BINS)
        return cls(problems.frozen_array(np.random.default_rng(rng.randrange(2**32)).random(size)), bins)


def jit_reference(values: np.ndarray | None = None, bins: int = JIT_BINS) -> np.ndarray:
    """The counts every ``histogram`` task should return for ``values`` (the lesson's when None) in ``bins`` bins."""
    if values is None:
        values = problems.lesson_case("jit").values
    return np.bincount((values * bins).astype(np.int64), minlength=bins)


def _written_in_loops(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str] | None:
    """The local names the ``for`` and ``while`` loops of ``func`` change (None: it has no such loop).

    A name assigned in a loop, the container of an item or attribute assigned there, the object of a method
    called there (``counts.append``), and a local (not a parameter) handed to a call there (a helper that fills it).
    """
    loops = [n for n in ast.walk(func) if isinstance(n, (ast.For, ast.While))]
    if not loops:
        return None
    params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    written: set[str] = set()
    for loop in loops:
        for node in (n for stmt in (*loop.body, *loop.orelse) for n in ast.walk(stmt)):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    written |= _base_names(target)
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Attribute):
                    written |= _base_names(node.func.value)
                written |= {a.id for a in node.args if isinstance(a, ast.Name) and a.id not in params}
    return written


def _base_names(target: ast.expr) -> set[str]:
    """The names an assignment to ``target`` changes: ``x``, ``x[i]``, ``x.n``, ``a, b``."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _base_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_base_names(e) for e in target.elts))
    return set()


def _returned_from(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names what ``func`` returns is made from, followed back through the assignments of ``func``."""
    names = {n.id for r in ast.walk(func) if isinstance(r, ast.Return) and r.value is not None
             for n in ast.walk(r.value) if isinstance(n, ast.Name)}
    assigns = [n for n in ast.walk(func) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               and n.value is not None]
    grew = True
    while grew:
        grew = False
        for node in assigns:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if set().union(*(_base_names(t) for t in targets)) & names:
                more = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} - names
                if more:
                    names |= more
                    grew = True
    return names


def _function_tree(fn: Any) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The syntax tree of ``fn``'s plain function, read from its source (None: no source)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(steps.plain_function(fn))))
    except (OSError, TypeError, SyntaxError):
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)


def loop_feeds_result(fn: Any) -> bool | None:
    """Whether what ``fn`` returns is made from something its loops change; None where its source cannot be read.

    A loop whose work the function never returns (its result dropped, the answer made some other way) is
    dead code: a compiler deletes it, and the before/after numbers then time no loop at all. Read from
    ``fn``'s source (``@hpc.remote``: the wrapped function's); nothing is called. None also when it has no
    ``for`` or ``while`` loop (recursion, a comprehension): the other checks judge those.
    """
    f = getattr(fn, "__wrapped__", fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    written = _written_in_loops(func) if func is not None else None
    if func is None or written is None:
        return None
    return bool(written & _returned_from(func))


# The checker's own values, which the cell never sees: a short draw, the edges of [0, 1), and a number of bins no
# case hands out.
JIT_OWN_VALUES, JIT_OWN_BINS = 1_996, 7
JIT_OWN_EDGES = (0.0, 1 / JIT_OWN_BINS, 0.5, 0.999_999)


def jit_own_values(seed: int) -> tuple[np.ndarray, int]:
    """Values and bins of the checker's own: what it calls ``histogram`` on itself."""
    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.random(JIT_OWN_VALUES), np.asarray(JIT_OWN_EDGES)])
    return values[rng.permutation(values.size)], JIT_OWN_BINS


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
#: The name of the list the counting variant of a function adds 1 to, per loop, each time the loop's body runs.
_RUNS = "_eugo_loop_runs"


class _Loops(ast.NodeTransformer):
    """A function's loops (numbered as :func:`ast.walk` meets them) taken out, or counted.

    ``out``: the numbers of the loops replaced by ``pass`` (None: every one); ``count``: instead, each loop's
    body starts by adding 1 to its slot of :data:`_RUNS`.
    """

    def __init__(self, out: set[int] | None = None, count: bool = False):
        self.out, self.count = out, count

    def _loop(self, node: ast.AST) -> ast.AST:
        k = getattr(node, "_eugo_loop", -1)
        if not self.count and (self.out is None or k in self.out):
            return ast.copy_location(ast.Pass(), node)
        self.generic_visit(node)
        if self.count:
            bump = ast.parse(f"{_RUNS}[{k}] += 1").body[0]
            node.body.insert(0, ast.copy_location(bump, node))  # type: ignore[attr-defined]
        return node

    visit_For = visit_AsyncFor = visit_While = _loop  # noqa: N815 - ast.NodeTransformer's naming


def _numbered_loops(fn: Any) -> tuple[Any, list[ast.AST]] | None:
    """``(function tree, its loops)``, each loop numbered in the tree; None where the source cannot be read."""
    func = _function_tree(fn)
    if func is None:
        return None
    loops = [n for n in ast.walk(func) if isinstance(n, _LOOPS)]
    for k, loop in enumerate(loops):
        loop._eugo_loop = k  # type: ignore[attr-defined]
    return func, loops


def _remade(fn: Any, out: set[int] | None = None, count: bool = False, runs: list[int] | None = None) -> Any:
    """The plain function of ``fn`` made again from its source through :class:`_Loops`; None where it cannot be.

    Its globals are a copy of the function's (nothing of the cell's namespace changes), with ``runs`` as
    :data:`_RUNS`; a function that reads a closure's variables, or whose source cannot be read, gives None.
    """
    f = steps.plain_function(fn)
    numbered = _numbered_loops(fn)
    if numbered is None or getattr(f, "__closure__", None) or not hasattr(f, "__globals__"):
        return None
    func = numbered[0]
    func.decorator_list = []
    module = ast.fix_missing_locations(ast.Module(body=[_Loops(out, count).visit(func)], type_ignores=[]))
    scope = {**f.__globals__, _RUNS: runs if runs is not None else []}
    try:
        exec(compile(module, "<eugo: its loops changed>", "exec"), scope)  # the learner's own definition
    except Exception:  # noqa: BLE001 - a definition that needs what its loop made: the loop matters
        return None
    made = scope.get(func.name)
    if callable(made) and f.__defaults__:
        made.__defaults__ = f.__defaults__
    return made if callable(made) else None


def without_loops(fn: Any) -> Any:
    """The plain function of ``fn`` made again from its source with its loops taken out; None where it cannot be."""
    return _remade(fn)


def _redundant_loop(fn: Any, args: tuple, want: Any) -> int | None:
    """The line (the cell's, as the code numbers it) of a loop of ``fn`` that ran and changes nothing it returns.

    Each loop is taken out in turn and the function called on ``args`` (the checker's): a loop whose body ran
    and without which the result is still ``want`` is work a compiler deletes, so the before/after numbers
    would time work that never needed doing. A loop that may raise or assert (a check of the input) is not
    taken out: it is not free to delete.
    """
    numbered = _numbered_loops(fn)
    if numbered is None or len(numbered[1]) < 2:  # one loop: the check with every loop taken out covers it
        return None
    _, loops = numbered
    runs = [0] * len(loops)
    def fresh() -> tuple:  # a copy of each array for every call: a call may change its arguments in place
        return tuple(x.copy() if isinstance(x, np.ndarray) else x for x in args)

    counting = _remade(fn, count=True, runs=runs)
    if counting is None or steps.called_on_own_input(counting, *fresh())[1] is not None:
        return None
    for k, loop in enumerate(loops):
        if not runs[k] or any(isinstance(n, (ast.Raise, ast.Assert)) for n in ast.walk(loop)):
            continue
        bare = _remade(fn, out={k})
        if bare is None:
            continue
        got, error = steps.called_on_own_input(bare, *fresh())
        if error is None and measure.same_within_tolerance(np.asarray(got) if got is not None else got, want):
            # the source read starts at the function's first line (its decorator's): the code's own numbering
            first = getattr(getattr(steps.plain_function(fn), "__code__", None), "co_firstlineno", 1)
            return first + loop.lineno - 1  # type: ignore[attr-defined]
    return None


def _counts_own_values(a: Attempt, fn: Any, name: str) -> None:
    """``not yet`` unless the plain ``fn`` counts values of the checker's own, and its loop does that counting.

    All called here: the function on the checker's values and bins (an answer made in the notebook fits only
    p.values), then the same function with its loops taken out (a loop that changes nothing, beside counts
    made some other way, gives the same counts without it: dead code a compiler deletes), then without each
    loop that ran in turn (a redundant inner loop: work the compiler deletes, which would inflate the speedup).
    """
    if not callable(fn):
        return
    values, bins = jit_own_values(problems.draw_seed())
    want = jit_reference(values, bins)
    got, error = steps.called_on_own_input(fn, values.copy(), bins)
    if error is not None or not measure.same_within_tolerance(np.asarray(got) if got is not None else got, want):
        said = f"it raised {type(error).__name__}" if error is not None else "it returned other counts"
        raise NotYet(f"{name} does not count the values it is given: the checker called {name}(values, bins) on "
                     f"{values.size:,} values and {bins} bins of its own (not p.values) and {said}, so the right "
                     "counts of p.values came from somewhere else than its loop.", mistake="not-computed")
    bare = without_loops(fn)
    if bare is None:
        return
    same, error = steps.called_on_own_input(bare, values.copy(), bins)
    if error is None and measure.same_within_tolerance(np.asarray(same) if same is not None else same, want):
        raise NotYet(f"{name}'s loop changes nothing that the function returns: the checker ran {name} on values "
                     "of its own with its loops taken out, and it returned the same counts, so they are made beside "
                     "the loop; a compiler drops such a loop as dead code and the report's before/after numbers "
                     "time no loop at all.", mistake="dead-loop")
    line = _redundant_loop(fn, (values.copy(), bins), want)
    if line is not None:
        raise NotYet(f"one of {name}'s loops (the one at line {line} of its cell) changes nothing that the function "
                     f"returns: the checker ran {name} on values of its own without that loop, and it returned the "
                     "same counts. A compiler deletes such a loop, so the report's before/after numbers would time "
                     "work that never needed doing.", mistake="redundant-loop")


_HIST_LOOP = ("@hpc.remote\ndef histogram(values, bins):\n    counts = np.zeros(bins, dtype=np.int64)   # numbers, "
              "not a dict\n    for i in range(len(values)):\n        counts[int(values[i] * bins)] += 1\n"
              "    return counts")
_HIST_VALUES = ('p = exercises.problem("jit")\n'
                "values = p.values   # a NumPy array, as handed out: what Numba compiles for\n"
                "hists = hpc.get([histogram.remote(values, p.bins) for _ in range(6)])")
_HIST_SOLUTION = _HIST_LOOP + "\n\n" + _HIST_VALUES
JIT_HINTS = {
    DEFAULT: Hint("Fix what the report names, then run again and read it again: Numba stops at the first thing it "
                  "cannot compile, so the second reason shows only once the first is gone. A compiler needs a NumPy "
                  "array in, and numbers inside the loop.", _HIST_SOLUTION),
    "no-optimize": _option_hint("jit", "--optimize", "tries to compile the loop"),
    "result": Hint("Keep what each task counts: the values of p.values in each of the p.bins bins, as an array, and "
                   "`hists` the list the tasks returned.", _HIST_SOLUTION),
    "no-verdict": Hint("Submit histogram as tasks in this cell, so the optimizer tries it on the workers.",
                       _HIST_VALUES),
    "lists": Hint("Pass histogram a NumPy array, not a Python list: give it p.values as it is handed out (or "
                  "convert the list with NumPy's asarray). Then read the report again: it may name a second "
                  "reason.", _HIST_VALUES),
    "objects": Hint("The loop counts in a dict, a Python object Numba does not compile: count in a NumPy array of "
                    "integers, one slot per bin, and return that array.", _HIST_LOOP),
    "numpy-instead": Hint("This exercise is about the loop: keep the for loop, and give it a NumPy array and "
                          "numbers inside, instead of replacing it by NumPy calls.", _HIST_SOLUTION),
    "dead-loop": Hint("Let the loop do the counting: fill the array the function returns inside the loop, one value "
                      "at a time, instead of making the counts some other way beside it.", _HIST_LOOP),
    "declined": Hint("Keep the loop plain (arrays and numbers, a type that does not change, no Python objects "
                     "inside) and pass it a NumPy array.", _HIST_SOLUTION),
    "slow": Hint("Keep the work inside the loop over the array: what runs outside it is not compiled.",
                 _HIST_SOLUTION),
    "redundant-loop": Hint("Take out the loop that changes nothing the function returns, so that the plain version "
                           "and the compiled one do the same work: one pass over the values, one count each.",
                           _HIST_LOOP),
    "not-computed": Hint("Let histogram count the values it is given, in its loop: the checker calls it on values of "
                         "its own too, so counts made in the notebook do not fit them.", _HIST_SOLUTION),
    "not-from-tasks": _from_tasks_hint(_HIST_VALUES),
    problems.CARRY_OVER: Hint("Give histogram p.values and p.bins, the exercise's inputs, instead of values made or "
                              "a number of bins typed in the cell, and let it count what it is given.", _HIST_VALUES),
}


@exercise("jit", lesson=COURSE + "03-jit-compiling-loops.ipynb", title="Write a loop the optimizer can compile",
          hints=JIT_HINTS)
def jit_exercise(a: Attempt) -> Verdict:
    """Grade JIT-friendly code: compiled, its result checked by the trial, at least 10x faster.

    The values and the number of bins are the checker's (``problems.given(a)``), and so are the counts
    ``hists`` must hold; the loop must do the work the function returns, so a compiler cannot drop it as
    dead code and leave the before/after numbers timing no loop.
    """
    _optimized(a)
    p = problems.given(a)
    hists = a.require("hists")
    ref = jit_reference(p.values, p.bins)
    if not isinstance(hists, (list, tuple)) or not hists or not all(measure.same_within_tolerance(np.asarray(h), ref)
                                                                    for h in hists):
        return a.not_yet("`hists` should be the list of counts the histogram tasks returned, each the number of "
                         f"the {p.values.size:,} values of p.values in each of the {p.bins} bins; it holds something "
                         "else.", mistake="result")
    # The function graded is the one whose tasks returned `hists`, whatever its name (the lesson's is histogram).
    came = derivation.returned_by(hists, a.trace, name="hists")
    name = came.function if came else JIT_FN
    _from_tasks(a, hists, name, "hists")
    fn = steps.function_named(a.namespace, name)
    fn = fn if fn is not None else a.namespace.get(name)
    if callable(fn) and not auto.has_loop(fn):
        # Read from its code, not from how fast the trial found it: NumPy's bincount compiled by Numba
        # runs about as fast as NumPy's own, and a verdict on a 1.5x line would be a verdict on the clock.
        return a.not_yet(f"{name} has no loop left: your version does its work in NumPy's C code, and this "
                         "exercise is about the loop.", mistake="numpy-instead")
    if callable(fn) and loop_feeds_result(fn) is False:
        return a.not_yet(f"{name}'s loop changes nothing that the function returns: its counts are made beside "
                         "the loop, so a compiler drops the loop as dead code and the report's before/after numbers "
                         "time no loop at all.", mistake="dead-loop")
    _counts_own_values(a, fn, name)
    verdict = next((v for v in jit.verdicts_from_trace(a.trace) if v.function == name), None)
    if verdict is None:
        return a.not_yet(f"the run has no verdict for {name}: no {name} task ran in this cell, so the "
                         "optimizer never tried it.", mistake="no-verdict")
    if verdict.status != jit.VERDICT_COMPILED:
        if verdict.code in ("too-short", "not-faster"):
            return a.not_yet(_jit_declined_line(verdict),
                             "Your version already does its work in NumPy's C code: this exercise is about the loop.",
                             mistake="numpy-instead")
        mistake = _JIT_MISTAKES.get(verdict.code, "declined")
        if mistake == "objects":
            # The arguments passed Numba's typing (a list stops it before it reads the body), so the
            # reason is in the loop's own code: the second of the starter's two.
            return a.not_yet(_jit_declined_line(verdict), "This reason is in the loop's own code, not in its "
                             "arguments: what it stores or calls inside.", mistake=mistake)
        return a.not_yet(_jit_declined_line(verdict), mistake=mistake)
    speedup = verdict.speedup or 0.0
    details = (f"plain {verdict.plain_s or 0:.4f} s, compiled {verdict.after_s or 0:.6f} s a call, "
               f"{_times_faster(speedup)}",)
    if speedup < MIN_JIT_SPEEDUP:
        return a.not_yet(f"{name} compiled and its result checked, but the report's before/after numbers show it "
                         f"under {MIN_JIT_SPEEDUP:.0f}x faster: most of its time is not in the loop.",
                         mistake="slow", details=details)
    return a.passed(f"{name} compiled on {measure.plural(verdict.workers, 'worker')}; the trial checked that its "
                    "result is unchanged",
                    f"`hists` holds the {measure.plural(measure.tasks(a.trace, name), 'count')} the {name} tasks "
                    "returned",
                    f"the report's before/after numbers show it at least {MIN_JIT_SPEEDUP:.0f}x faster",
                    details=details)


# -- lesson 4: threads ---------------------------------------------------------------------------------

THREAD_BASE, THREAD_FN = "oversubscribed", "tuned"
THREAD_CALLS = 4
# The hidden case asks for fewer tasks than the lesson's 4 (half or three quarters of its run: the same BLAS work
# each), and the count is graded exactly, so a cell that types range(4) runs too many there.
THREAD_HIDDEN_CALLS = (2, 3)


@problems.declare("threads")
@dataclass(frozen=True, repr=False)
class ThreadsProblem(problems.Problem):
    """How many tasks of each function the cell runs: 4 in the lesson, 2 or 3 in the hidden case."""

    calls: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> ThreadsProblem:
        """The lesson's 4 tasks a function (the count its prose and verdict name), or 2 or 3 from ``rng``."""
        return cls(rng.choice(THREAD_HIDDEN_CALLS) if hidden else THREAD_CALLS)

# How much the guard saves depends on the machine's load: oversubscribed BLAS on 2 shared cores ran
# 5-10x slower than one thread per worker while other programs used the cores, 1.0x in a quiet CI run,
# and sometimes faster (each worker's two threads use a core the other worker left idle). A verdict on
# speed would be a verdict on the neighbours, so the guard is graded on the threads the workers report,
# and the measured task times are shown as evidence.


_TUNED = ("@hpc.remote\ndef tuned():\n    \"\"\"No override: the worker keeps the guard's cores / workers "
          "threads.\"\"\"\n    return blas_work()")
_THREAD_RUN = ("before = hpc.get([oversubscribed.remote() for _ in range(p.calls)])\n"
               "after = hpc.get([tuned.remote() for _ in range(p.calls)])")
THREAD_HINTS = {
    DEFAULT: Hint("Take the thread limit out of tuned: with no override inside the task, each worker keeps the "
                  "thread guard's share of the cores.", _TUNED),
    "tasks": Hint("Keep both lines of the starter that submit p.calls tasks each (oversubscribed's and tuned's) "
                  "and get their thread counts into `before` and `after`.", _THREAD_RUN),
    "counts": Hint("`before` and `after` must be the lists of thread counts the tasks returned: blas_work returns "
                   "how many BLAS threads the worker used.", _THREAD_RUN),
    "override": Hint("Remove the threadpool limit inside tuned: it overrides the guard. Leave the one in "
                     "oversubscribed, the baseline.", _TUNED),
    "guard-off": Hint("Let the guard choose the workers' threads: start the runtime without a threads-per-worker "
                      "option and without OMP_NUM_THREADS set in the notebook, then run the cell again.",
                      "import os\nos.environ.pop(\"OMP_NUM_THREADS\", None)\nhpc.shutdown()\nhpc.init()"),
    "not-from-tasks": _from_tasks_hint(_THREAD_RUN),
    problems.CARRY_OVER: Hint("Submit p.calls tasks of each function, the count the checker hands out, instead of "
                              "a number of tasks written into the cell.",
                              "p = exercises.problem(\"threads\")\n" + _THREAD_RUN),
}


#: What sets a BLAS thread count inside a task: a call of one of these overrides the guard's limit.
THREAD_SETTERS = frozenset({"threadpool_limits", "ThreadpoolController", "set_num_threads", "omp_set_num_threads",
                            "openblas_set_num_threads"})


def _task_thread_counts(a: Attempt, function: str, name: str) -> dict[int, int]:
    """``{task id: BLAS threads}`` each of ``function``'s tasks returned (what blas_work counted inside the body).

    Read from the trace's result digests (scalars keep their value), never from the learner's list;
    ``not yet`` when the tasks returned something other than positive whole numbers.
    """
    found = a.trace.results(function)
    counts = {r.task_id: derivation.scalar_values_of(r) for r in found}
    if not found or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts.values()):
        raise NotYet(f"the {function} tasks did not return BLAS thread counts (whole numbers): `{name}` needs the "
                     "numbers blas_work returns, the count threadpoolctl reports inside the worker.",
                     mistake="counts")
    return counts  # type: ignore[return-value]


@exercise("threads", lesson=COURSE + "04-threads-and-oversubscription.ipynb",
          title="Let the thread guard do its job", hints=THREAD_HINTS)
def threads(a: Attempt) -> Verdict:
    """Grade the guard: the tuned tasks ran with the guard's cores / workers BLAS threads, as the workers report.

    Two readings from the workers, never the learner's lists: the threads in effect as each task's
    body started (``Trace.blas_threads``: the guard's setting) and the count each task returned
    (``Trace.results``: measured inside the body, after any override). ``before`` and ``after``
    must be those returned counts, in task order.
    """
    after = a.require("after")
    before = a.require("before")
    p = problems.given(a)  # the checker's own copy of the inputs the run was handed
    for function in (THREAD_BASE, THREAD_FN):
        got = measure.tasks(a.trace, function)
        if got != p.calls:  # exactly: the same work on both sides, the count the checker handed out
            raise NotYet(f"{measure.plural(got, f'{function} task')} ran, the check needs {p.calls} (p.calls): both "
                         "lines that submit p.calls tasks each and get their thread counts must stay.", mistake="tasks")
    base = _task_thread_counts(a, THREAD_BASE, "before")
    body = _task_thread_counts(a, THREAD_FN, "after")
    started = a.trace.blas_threads(THREAD_FN)
    cores, workers = _cores(), a.workers
    limit = max(1, cores // workers)
    ratio = _ratio(a, THREAD_BASE, THREAD_FN, cpu=False)
    details = (f"{THREAD_FN} tasks {ratio:.1f}x shorter than {THREAD_BASE} (median)",)
    at_start = max(started.values(), default=-1)
    ran = max(body.values())
    if at_start > limit:
        return a.not_yet(f"the workers started the {THREAD_FN} tasks with {measure.plural(at_start, 'BLAS thread')} "
                         f"each on {measure.plural(workers, 'worker')} and {measure.plural(cores, 'core')}, more than "
                         f"the guard's {limit}: the thread guard was not in effect for this run.",
                         mistake="guard-off", details=details)
    raised = sorted(t for t, n in body.items() if n > started.get(t, n))
    setters = measure.code_references(a.namespace.get(THREAD_FN), THREAD_SETTERS, a.namespace)
    if raised or ran > limit:
        return a.not_yet(f"your {THREAD_FN} tasks started with the guard's {measure.plural(limit, 'BLAS thread')} "
                         f"per worker but ran their work with {ran}, as they report: {ran * workers} threads on "
                         f"{measure.plural(workers, 'worker')} for {measure.plural(cores, 'core')}; a thread limit "
                         f"inside {THREAD_FN} overrides the guard.", mistake="override", details=details)
    if setters:
        # The count returned says nothing here: a body that sets its own limit can return any number.
        return a.not_yet(f"{THREAD_FN} sets its own thread limit (it calls {', '.join(sorted(setters))}), so its "
                         f"tasks run with that limit, not the guard's {measure.plural(limit, 'thread')} per worker: "
                         f"a thread limit inside {THREAD_FN} overrides the guard.", mistake="override",
                         details=details)
    # What the workers did first (an override is the lesson's point, whatever the lists say), then the lists
    _from_tasks(a, before, THREAD_BASE, "before")
    _from_tasks(a, after, THREAD_FN, "after")
    peak = max(base.values())
    first = (f"the {measure.plural(len(body), f'{THREAD_FN} task')} report {measure.plural(ran, 'BLAS thread')} "
             f"each on {measure.plural(workers, 'worker')} and {measure.plural(cores, 'core')}, the guard's share "
             "(the workers' reading as each task started and the count each returned)")
    if peak <= ran:
        return a.passed(first, f"this machine is too small to oversubscribe: the baseline's tasks also ran with "
                        f"{measure.plural(peak, 'thread')} each, so the speed comparison does not apply here",
                        details=details)
    return a.passed(first + ": no oversubscription",
                    f"{measure.plural(peak, 'thread')} per worker in the baseline ({peak * workers} for "
                    f"{measure.plural(cores, 'core')}), {measure.plural(ran, 'thread')} with the guard; the measured "
                    "difference in task time (below) grows with how busy the machine's cores are", details=details)


# -- lesson 5: the report ------------------------------------------------------------------------------

REPORT_LOOP, REPORT_OBJECTS = "ewma", "busiest_hour"
REPORT_FN = "triage"
REPORT_N, REPORT_SEED = 200_000, 3
# The hidden case: fewer values (the compiled ewma's trial and the dict loop cost less), still far more than a
# loop the optimizer finds too short to compile.
REPORT_HIDDEN_N = range(120_000, 150_001)
EWMA_KEEP, EWMA_NEW = 0.95, 0.05  # the starter's weights: the average so far, the new value (as it writes them)


@problems.declare("runtime-report")
@dataclass(frozen=True, repr=False, eq=False)  # array fields: compared by identity, never element by element
class RuntimeReportProblem(problems.Problem):
    """The series ``ewma`` averages and the events' hours ``busiest_hour`` counts (both read-only)."""

    series: np.ndarray
    hours: np.ndarray

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> RuntimeReportProblem:
        """The lesson's 200,000 values and hours (seed 3, as its cell made them), or fewer others from ``rng``.

        The hidden case's busiest hour is never the lesson's: every 23rd event is moved to another hour, so
        that hour leads the count by far, and a peak typed from the lesson's run does not carry over.
        """
        if not hidden:
            g = np.random.default_rng(REPORT_SEED)
            series, hours = g.random(REPORT_N), g.integers(0, 24, REPORT_N)
            return cls(problems.frozen_array(series), problems.frozen_array(hours))
        n = rng.choice(REPORT_HIDDEN_N)
        g = np.random.default_rng(rng.randrange(2**32))
        series, hours = g.random(n), g.integers(0, 24, n)
        lesson_peak = busiest_hour_of(problems.lesson_case("runtime-report").hours)
        hours[::23] = rng.choice([h for h in range(24) if h != lesson_peak])
        return cls(problems.frozen_array(series), problems.frozen_array(hours))


def ewma_of(series: np.ndarray) -> np.ndarray:
    """What the starter's ``ewma`` returns for ``series``: each value leans on the average before it."""
    out, acc = [], float(series[0])
    for x in series.tolist():
        acc = EWMA_KEEP * acc + EWMA_NEW * x
        out.append(acc)
    return np.asarray(out)


def busiest_hour_of(hours: np.ndarray) -> int:
    """What the starter's ``busiest_hour`` returns: the hour counted most, a tie to the hour seen first."""
    counts = np.bincount(hours, minlength=24)
    tied = np.flatnonzero(counts == counts.max())
    first = {int(h): int(np.argmax(hours == h)) for h in tied}
    return min(first, key=first.get)


def triage_reference(report: opt_report.OptimizationReport) -> tuple[list[str], dict[str, str]]:
    """What ``triage`` should return for ``report``: the applied items' targets, and declined target -> advice."""
    return [o.target for o in report.applied], {o.target: o.advice for o in report.declined}


def _other_reports(real: opt_report.OptimizationReport) -> list[tuple[str, opt_report.OptimizationReport]]:
    """Reports unlike this run's, made of the same kinds of items: an answer typed for this run fails on them."""
    def item(kind: str, target: str, applied: bool, reason: str = "", advice: str = "") -> opt_report.Optimization:
        line = f"{target}: {'applied' if applied else 'declined: ' + reason}"
        return opt_report.Optimization(kind, target, applied, line, line, reason, advice)

    extra = (item("jit", "resample", False, "it was called with Python lists",
                  "pass NumPy arrays (np.asarray) instead of lists"),
             item("batch", "parse", True),
             item("jit", "stencil", True))
    flipped = tuple(opt_report.Optimization(o.kind, o.target, not o.applied, o.precise, o.bucketed,
                                            o.reason or "not kept in this made-up report",
                                            o.advice or "nothing to change", o.numbers)
                    for o in real.items)
    return [("the same report in reverse order, with three more items", opt_report.OptimizationReport(
                 tuple(reversed(real.items)) + extra)),
            ("one in which every applied item was declined and every declined one applied",
             opt_report.OptimizationReport(flipped)),
            ("one with nothing in it", opt_report.OptimizationReport(()))]


def _report_results(a: Attempt, p: RuntimeReportProblem) -> None:
    """``not yet`` unless ``averages`` and ``peaks`` are what the tasks returned, on the checker's copy of the inputs.

    The report is made of what the tasks did, so they must have done it on the inputs handed out: each average
    the EWMA of ``p.series``, each peak the busiest hour of ``p.hours`` (computed here, never read from the cell).
    """
    for name, function, want, what in (
            ("averages", REPORT_LOOP, ewma_of(p.series), f"the EWMA of the {len(p.series):,} values of p.series"),
            ("peaks", REPORT_OBJECTS, busiest_hour_of(p.hours),
             f"the busiest hour of the {len(p.hours):,} events of p.hours")):
        got = a.require(name)
        d = derivation.listed(got, a.trace, function, name=name) if isinstance(got, (list, tuple)) else None
        if not d:
            why = d.why if d is not None else f"`{name}` is {type(got).__name__}, not the list get() returns"
            raise NotYet(f"{why}: the report is made of what the {function} tasks of this cell did, so `{name}` must "
                         "be the list their futures gave back.", mistake="results")
        if not got or not all(measure.same_within_tolerance(v, want) for v in got):
            raise NotYet(f"the {function} tasks returned something else than {what}: the report the exercise asks "
                         "you to read is of those tasks run on the checker's inputs.", mistake="results")


def _same_triage(got: Any, want: tuple[list[str], dict[str, str]]) -> bool:
    """``got`` is ``(done, needs_you)`` as ``want`` has them: the targets in any order, the advice exactly."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return False
    done, needs = got
    try:
        return sorted(done) == sorted(want[0]) and dict(needs) == want[1]
    except (TypeError, ValueError):
        return False


_TRIAGE = ("def triage(report):\n"
           "    done = [item.target for item in report.applied]\n"
           "    needs_you = {item.target: item.advice for item in report.declined}\n"
           "    return done, needs_you")
_REPORT_RUN = ("averages = hpc.get([ewma.remote(p.series) for _ in range(4)])\n"
               "peaks = hpc.get([busiest_hour.remote(p.hours) for _ in range(2)])")
REPORT_HINTS = {
    DEFAULT: Hint("Read the report's items in triage: the targets of those applied are what the runtime did for "
                  "you; each declined one's target and its advice are what needs you.", _TRIAGE),
    "no-optimize": _option_hint("runtime-report", "--optimize", "tries the optimizations and reports them"),
    "no-tasks": Hint("Keep the starter's lines that run ewma and busiest_hour as tasks: the report of this cell "
                     "is made of what they did.", _REPORT_RUN),
    "results": Hint("Keep the starter's lines that run ewma on p.series and busiest_hour on p.hours as tasks, and "
                    "keep what get() returns for them in `averages` and `peaks`.", _REPORT_RUN),
    "not-a-function": Hint("Keep triage a function of one argument, the report, that returns two things: the list "
                           "`done` and the dict `needs_you`.", _TRIAGE),
    "raises": Hint("triage gets an OptimizationReport: its `applied` and `declined` are lists of items, each with "
                   "`target`, `reason` and `advice`.", _TRIAGE),
    "wrong-here": Hint("done: the targets of the applied items; needs_you: for each declined item, its target "
                       "mapped to its advice (what would help), not its reason.", _TRIAGE),
    "typed": Hint("Make triage read the report it is given: build both answers from its items, instead of "
                  "returning the names you read in this run's report.", _TRIAGE),
    problems.CARRY_OVER: Hint("Run ewma on p.series and busiest_hour on p.hours, the inputs the checker hands out, "
                              "instead of arrays of your own or values written into the cell.",
                              "p = exercises.problem(\"runtime-report\")\n" + _REPORT_RUN),
}


@exercise("runtime-report", lesson=COURSE + "05-what-the-runtime-did-for-you.ipynb",
          title="Sort the report: done for you, and what needs you", hints=REPORT_HINTS)
def runtime_report(a: Attempt) -> Verdict:
    """Grade reading the report as data: ``triage`` sorts this run's report, and reports unlike it, correctly.

    The learner's ``triage`` is called on the report this cell made (``--optimize``) and on
    reports built from the same kinds of items, so an answer typed from reading this run's
    report fails; nothing of it depends on time.
    """
    _optimized(a)
    fn = a.require(REPORT_FN)
    rep = cellrecord.read(opt_report.OPTIMIZATIONS)  # this cell's report, in its record
    targets = {o.target for o in rep.items} if rep is not None else set()
    missing = [f for f in (REPORT_LOOP, REPORT_OBJECTS) if f not in targets or measure.tasks(a.trace, f) == 0]
    if rep is None or missing:
        return a.not_yet(f"the report of this run has no line for {' and '.join(missing or [REPORT_LOOP])}: no "
                         "such task ran in this cell, so there is not the report the exercise asks you to read.",
                         mistake="no-tasks")
    _report_results(a, problems.given(a))
    if not callable(fn):
        return a.not_yet(f"`{REPORT_FN}` holds {type(fn).__name__}, not a function that takes the report.",
                         mistake="not-a-function")
    want = triage_reference(rep)
    details = (f"this run's report: {len(rep.applied)} applied ({', '.join(want[0]) or 'none'}), "
               f"{len(rep.declined)} declined ({', '.join(want[1]) or 'none'})",)

    def call(report: opt_report.OptimizationReport, which: str) -> Any:
        try:
            return fn(report)
        except Exception as e:  # noqa: BLE001 - the learner's function: its error is the verdict
            raise NotYet(f"{REPORT_FN} raised {type(e).__name__} on {which}: {e}", mistake="raises") from None

    got = call(rep, "this run's report")
    if not _same_triage(got, want):
        shape = (f"{type(got).__name__} {got!r}"[:160] if not (isinstance(got, (tuple, list)) and len(got) == 2)
                 else f"done {got[0]!r} and needs_you {got[1]!r}"[:200])
        return a.not_yet(f"on this run's report {REPORT_FN} gives {shape}; the report lists "
                         f"{measure.plural(len(want[0]), 'item')} as applied and {len(want[1])} as declined.",
                         mistake="wrong-here", details=details)
    for which, other in _other_reports(rep):
        if not _same_triage(call(other, which), triage_reference(other)):
            return a.not_yet(f"{REPORT_FN} sorts this run's report right, but not a report unlike it ({which}): it "
                             "answers with this run's names instead of reading the report it is given.",
                             mistake="typed", details=details)
    return a.passed(f"{REPORT_FN} sorts this run's report: {measure.plural(len(want[0]), 'optimization')} the runtime "
                    f"applied for you ({', '.join(want[0]) or 'none'}), {len(want[1])} declined with what would help "
                    f"({', '.join(want[1]) or 'none'})",
                    f"it also sorts {len(_other_reports(rep))} reports unlike this one, so it reads the report it is "
                    "given", details=details)
