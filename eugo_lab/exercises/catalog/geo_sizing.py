"""Exercises of course 4 (Scaling a real workload), lessons 4 and 5: ``sizing`` and ``seven-terabytes``.

Both time a small run of the tile pipeline inside the exercise cell (``with hpc.trace() as
small:``), then answer for a much bigger job. The checker replays the cell's own trace with
:func:`eugo_lab.analysis.sizing.plan` and compares; the typical shortcuts (scaling one typical
tile, dividing by the whole deadline, pricing only the task time) are recognised and named.

``sizing`` — the checker hands out the tiles to measure and the job: ``p.tiles`` (file names)
and ``p.job``. In the lesson, all 16 tiles and :data:`SIZING_JOB`: 20,000 tiles like the lesson's,
2 minutes from asking, 1 minute of it cluster start-up; in the hidden case 8 of the tiles and
another job (fewer tasks, another deadline and start-up). Starter (``not yet``: one typical tile,
whole deadline)::

    %%eugo --exercise sizing -w 2
    p = exercises.problem("sizing")
    with hpc.trace() as small:
        results = hpc.get([process.remote(tiles.folder / name, out_dir) for name in p.tiles])
    per_tile = small.to_dataframe().eval("end - start").median()
    workers = math.ceil(p.job.tasks * per_tile / p.job.deadline)

reference: the same small run, then ``workers = sizing.plan(small, p.job).workers``.

Criteria, against the checker's own copy of the problem: a result for every tile of ``p.tiles``
and no other, from this cell's tasks; at least ``MIN_MEASURED`` tasks ran; ``workers`` within
``TOLERANCE`` of the simulator's answer for ``p.job`` from this cell's trace.

``seven-terabytes`` — the question and the changed assumption are the checker's: ``p.files``,
``p.total_bytes`` and ``p.deadline`` (192,000 files, 7 TB, 3 minutes in the lesson, :data:`SEVEN_TB`),
``p.startup``, the start-up of a pool of warm workers (``WARM_STARTUP``, 20 s, where the lesson's plan
assumed :data:`PLAN_STARTUP`, 60), and ``p.tiles``, the tiles to measure; the hidden case asks about
fewer, smaller files, a deadline of 3 or 4 minutes and another warm start-up, measured on 8 of the tiles.
The cell answers ``workers`` (the plan for that start-up) and ``prefixes``: how many key prefixes the
files must be spread over so that the read requests (GDAL's read calls per file, as counted on the
workers, over the seconds the tasks run) stay within ``GETS_PER_PREFIX`` a second each. Starter:
the lesson's 60 s plan and the requests spread over the whole deadline. Reference (after the small
run of ``p.tiles``)::

    file_bytes = p.total_bytes / p.files
    tile_bytes = sum(r.file_bytes for r in results) / len(results)
    reads_per_file = sum(r.reads for r in results) / len(results)
    warm = sizing.Job(tasks=p.files, deadline=p.deadline, startup=p.startup, scale=file_bytes / tile_bytes,
                      task_bytes=file_bytes, price_per_worker_hour=0.0408)
    warm_plan = sizing.plan(small, warm)
    workers = warm_plan.workers
    prefixes = math.ceil(p.files * reads_per_file / (warm_plan.wall_time - warm.startup) / 5_500)

Criteria, against the checker's own copy of the problem (it builds the job itself, the scale a file's
bytes over the measured tiles' mean, and never reads the notebook's ``job``): a result for every tile
of ``p.tiles`` from this cell's tasks; ``workers`` within ``TOLERANCE`` of the plan replayed from this
cell's trace with ``p.startup``; ``prefixes`` the fewest that keep each prefix under the limit, or one
more. Every number is a count or a replay of the same trace.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from eugo_lab.analysis.sizing import Job, plan, predict
from eugo_lab.exercises import measure, problems
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.exercises.catalog.geo import TILES, from_tasks, tile_name, tile_results

LESSON_4 = "04-scaling-a-real-workload/04-sizing-a-cluster-for-your-workload.ipynb"
LESSON_5 = "04-scaling-a-real-workload/05-seven-terabytes-in-three-minutes.ipynb"
FUNCTION = "process_tile"
SIZING_JOB = {"tasks": 20_000, "deadline": 120.0, "startup": 60.0}
SEVEN_TB = {"tasks": 192_000, "deadline": 180.0, "total_bytes": 7e12}
# The start-up the lesson's plan assumed (its `job`): a count for it is what the starter answers.
PLAN_STARTUP = 60.0
# The published on-demand price per worker-hour the lessons use (AWS m7g.large, per vCPU): a plan's cost only.
PRICE_PER_WORKER_HOUR = 0.0408
# A sizing answer within 15% of the simulator's passes: the replay itself moves by a few
# percent between runs (this VM's speed drifts), and the shortcuts it must reject are 30% off
# or more (a typical tile of these uneven ones is ~0.7 of the mean; start-up is half the deadline).
TOLERANCE = 0.15
# A shortcut is "recognised" when the answer is what its arithmetic gives on this cell's own trace,
# give or take one worker (a ceiling taken on a number that rounds differently): the learner's
# arithmetic and the checker's read the same measurements, so they agree however loaded the
# machine was, and no near-miss of another shortcut is taken for it.
MATCH_WORKERS = 1
# The lesson's changed assumption: warm workers that start in 20 s instead of the plan's 60. A shorter
# start-up, not a longer one: the time left must stay well above the driver's time to submit 192,000
# tasks (18 s measured here on a quiet machine, several times that on a busy one), or the plan is
# out of reach on a loaded machine and the question has no answer.
WARM_STARTUP = 20.0
# The hidden case of seven-terabytes: 8 of the tiles (half the small run), 96,000 to 144,000 files (at most
# 3/4 of the lesson's: the checker's replays cost less) of 25 or 30 MB (the lesson's are 36.5), a deadline of
# 180 or 240 s and a warm start-up of 10, 15 or 30 s: never the lesson's 20, and at least 150 s left for the
# tasks, more than the lesson's 160 s per file submitted, so the plan stays in reach on a loaded machine.
HIDDEN_FILES = range(96_000, 144_001, 8_000)
HIDDEN_FILE_BYTES = (25e6, 30e6)
HIDDEN_SEVEN_DEADLINES = (180.0, 240.0)
HIDDEN_WARM_STARTUPS = (10.0, 15.0, 30.0)
# Amazon S3's performance guidelines: at least 5,500 GET/HEAD requests a second per prefix (published).
GETS_PER_PREFIX = 5_500
MIN_MEASURED = 8
# The hidden case of sizing: 8 of the 16 tiles (MIN_MEASURED: half the lesson's small run, so a pass costs
# about 1.5x), and a job of fewer tasks than the lesson's (the checker's replays cost no more) whose deadline
# and start-up are never the lesson's. Its tasks per second left after start-up are at most 16,000 / 105, under
# half the lesson's 20,000 / 60: a count for the lesson's job (typed in, or planned for a job typed in) is
# far outside TOLERANCE there, while every honest plan of p.job meets it.
HIDDEN_TILES = MIN_MEASURED
HIDDEN_TASKS = range(8_000, 16_001, 500)
HIDDEN_DEADLINES = (150.0, 180.0, 240.0)
HIDDEN_STARTUPS = (20.0, 30.0, 45.0)


@problems.declare("sizing")
@dataclass(frozen=True, repr=False)
class SizingProblem(problems.Problem):
    """The tiles to measure in the small run (file names) and the job to size from it."""

    tiles: tuple[str, ...]
    job: Job

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> SizingProblem:
        """The lesson's 16 tiles and :data:`SIZING_JOB`, or 8 of the tiles and another job drawn from ``rng``."""
        if not hidden:
            return cls(tuple(tile_name(i) for i in range(TILES)), Job(**SIZING_JOB))
        names = tuple(tile_name(i) for i in sorted(rng.sample(range(TILES), HIDDEN_TILES)))
        return cls(names, Job(tasks=rng.choice(HIDDEN_TASKS), deadline=rng.choice(HIDDEN_DEADLINES),
                              startup=rng.choice(HIDDEN_STARTUPS)))
_SMALL_RUN = ("with hpc.trace() as small:\n"
              "    results = hpc.get([process.remote(tiles.folder / name, out_dir) for name in p.tiles])")
_SIZING_SOLUTION = _SMALL_RUN + "\nworkers = sizing.plan(small, p.job).workers"
_SEVEN_RUN = ("with hpc.trace() as small:\n"
              "    results = hpc.get([process.remote(tiles.folder / name, out_dir, throttle=store) "
              "for name in p.tiles])")
SIZING_HINTS = {
    DEFAULT: Hint("Size from the whole small run, not from arithmetic on one tile: the sizing planner replays "
                  "every measured tile, its overheads and the start-up, and finds the fewest workers that meet "
                  "the deadline.", _SIZING_SOLUTION),
    "small-run": Hint(f"Measure first: run at least {MIN_MEASURED} tiles as tasks inside a traced block named "
                      "`small`, then size from that trace.", _SMALL_RUN),
    "no-tiles": Hint("Run the lesson's cell that makes the tiles, then this cell again.",
                     "tiles = geotiles.make_tiles(...)   # the lesson's cell that makes the tiles"),
    "results": Hint("Measure every tile of p.tiles, the small ones and the big ones, as tasks, and keep the list "
                    "get() returns in `results`: a sample of only some tiles misjudges the mean.", _SMALL_RUN),
    "not-from-tasks": Hint("Keep what the tasks of this cell return in `results`, unchanged: the planner sizes "
                           "from the tasks this cell ran, so the tiles must be measured here.", _SMALL_RUN),
    "only-tiles": Hint("Run only the tiles in the exercise cell: other tasks beside them are replayed with them "
                       "and change the answer. Do any other work in another cell.", _SMALL_RUN),
    "typical": Hint("Do not scale the median tile: the bigger tiles make the mean longer. Let the planner "
                    "replay every measured tile.", _SIZING_SOLUTION),
    "no-startup": Hint("Count the start-up in: the tiles have only the deadline minus the start-up, so the count "
                       "grows by the deadline / time-left ratio. The planner does that for you.", _SIZING_SOLUTION),
    "compute-only": Hint("Size from the whole task, reading and writing included, not the compute phase: the "
                         "planner replays the measured tasks.", _SIZING_SOLUTION),
    "misses": Hint("Take more workers: ask the planner for the fewest that finish in time.", _SIZING_SOLUTION),
    "too-many": Hint("Take fewer workers: the planner finds the fewest that still meet the deadline.",
                     _SIZING_SOLUTION),
    problems.CARRY_OVER: Hint("Take the tiles and the job from p, the exercise's inputs (p.tiles, p.job), instead "
                              "of a count, a job or tiles written into the cell, and size from this cell's own run.",
                              'p = exercises.problem("sizing")\n' + _SIZING_SOLUTION),
}
_WARM_JOB = ("file_bytes = p.total_bytes / p.files\n"
             "tile_bytes = sum(r.file_bytes for r in results) / len(results)\n"
             "warm = sizing.Job(tasks=p.files, deadline=p.deadline, startup=p.startup, scale=file_bytes / tile_bytes,\n"
             "                  task_bytes=file_bytes, price_per_worker_hour=0.0408)")
_SEVEN_SOLUTION = (_WARM_JOB + "\nreads_per_file = sum(r.reads for r in results) / len(results)\n"
                   "warm_plan = sizing.plan(small, warm)\n"
                   "workers = warm_plan.workers\n"
                   "prefixes = math.ceil(p.files * reads_per_file / (warm_plan.wall_time - warm.startup) / 5_500)")
SEVEN_HINTS = {
    DEFAULT: Hint("Plan again with the changed assumption (a job of p.files files in p.deadline seconds, with the "
                  "warm pool's p.startup), take the workers from that plan, and spread the read requests over the "
                  "seconds its tasks run.", _SEVEN_SOLUTION),
    "job": Hint("Measure the tiles on the workers as the lesson does (through the modelled store), then plan the "
                "question of p with the warm start-up; if no count meets the deadline, run the cell again on a "
                "quieter machine.", _SEVEN_SOLUTION),
    "small-run": Hint(f"Measure first: run at least {MIN_MEASURED} tiles as tasks inside a traced block named "
                      "`small`, then size from that trace.", _SEVEN_RUN),
    "no-tiles": SIZING_HINTS["no-tiles"],
    "results": Hint("Measure every tile of p.tiles as tasks, and keep the list get() returns in `results`: a "
                    "sample of only some tiles misjudges the mean.", _SEVEN_RUN),
    "not-from-tasks": Hint("Keep what the tasks of this cell return in `results`, unchanged: the planner sizes "
                           "from the tasks this cell ran, so the tiles must be measured here.", _SEVEN_RUN),
    "only-tiles": Hint("Run only the tiles in the exercise cell: other tasks beside them are replayed with them "
                       "and change the answer. Do any other work in another cell.", _SEVEN_RUN),
    "old-startup": Hint("Use the changed assumption: plan the job with the warm pool's start-up, p.startup, which "
                        "leaves the tasks more time, so fewer workers do, and they spread their requests over more "
                        "seconds.", _WARM_JOB + "\nwarm_plan = sizing.plan(small, warm)"),
    "workers": Hint("Take the count from the plan that replays your small run with the warm start-up, p.startup.",
                    _SEVEN_SOLUTION),
    "prefixes-deadline": Hint("The requests are made only while the tasks run: after start-up, until the plan's "
                              "predicted end. Divide the requests by those seconds, not by the whole deadline.",
                              "running = warm_plan.wall_time - warm.startup\n"
                              "prefixes = math.ceil(p.files * reads_per_file / running / 5_500)"),
    "prefixes": Hint("Count the requests: read calls per file times the files, over the seconds the tasks run, "
                     "then the fewest prefixes of 5,500 requests a second that carry them.", _SEVEN_SOLUTION),
    problems.CARRY_OVER: Hint("Take the question, the warm start-up and the tiles from p, the exercise's inputs "
                              "(p.files, p.total_bytes, p.deadline, p.startup, p.tiles), instead of the lesson's "
                              "numbers or a count written into the cell, and plan from this cell's own run.",
                              'p = exercises.problem("seven-terabytes")\n' + _SEVEN_SOLUTION),
}


def _near(value: float, target: float, rel: float, slack: float = 0.0) -> bool:
    """``value`` within ``rel`` of ``target`` (or within ``slack``: one worker either way for counts)."""
    return abs(value - target) <= max(rel * abs(target), slack)


@problems.declare("seven-terabytes")
@dataclass(frozen=True, repr=False)
class SevenTerabytesProblem(problems.Problem):
    """The tiles to measure, the question (files, bytes in all, deadline) and the warm pool's start-up."""

    tiles: tuple[str, ...]
    files: int
    total_bytes: float
    deadline: float
    startup: float

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> SevenTerabytesProblem:
        """The lesson's 192,000 files, 7 TB, 180 s and 20 s on all 16 tiles, or a smaller question from ``rng``."""
        if not hidden:
            return cls(tuple(tile_name(i) for i in range(TILES)), SEVEN_TB["tasks"], SEVEN_TB["total_bytes"],
                       SEVEN_TB["deadline"], WARM_STARTUP)
        names = tuple(tile_name(i) for i in sorted(rng.sample(range(TILES), MIN_MEASURED)))
        files = rng.choice(HIDDEN_FILES)
        return cls(names, files, files * rng.choice(HIDDEN_FILE_BYTES), rng.choice(HIDDEN_SEVEN_DEADLINES),
                   rng.choice(HIDDEN_WARM_STARTUPS))


def _number(a: Attempt, name: str, what: str, mistake: str | None = "") -> float:
    """``name``'s value as a positive finite number (NotYet naming what it holds otherwise).

    ``mistake``: the hint tiers of the ``not yet`` (``""``: the tiers named after ``name``; None: the default).
    """
    value = a.require(name)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or \
            not math.isfinite(float(value)) or value <= 0:
        raise NotYet(f"`{name}` should be {what} (a positive number); it holds {type(value).__name__} {value!r}.",
                     mistake=name if mistake == "" else mistake)
    return float(value)


def _measured(a: Attempt, names: Sequence[str] | None = None) -> tuple[list, str]:
    """``results``, checked to be what this cell's tasks returned for every tile, and the function that ran them.

    ``names``: the tiles' file names the checker handed out (``p.tiles``; None: every tile of ``tiles``).

    The planner replays every task of the cell, so a task beside the tiles (a decoy, a warm-up)
    would be sized with them: the cell must run the tiles alone (NotYet otherwise).
    """
    results = tile_results(a, names=names, given="p.tiles")
    src = from_tasks(a, results)
    ran, tiles = measure.tasks(a.trace), len(set(src.tasks))
    if ran > tiles:
        others = ran - tiles
        raise NotYet(f"the cell ran {others} task{'s' if others != 1 else ''} beside the {tiles} {src.function} "
                     "tasks that measured the tiles: the planner replays every task of the cell, so they would "
                     "be sized as if they were tiles.", mistake="only-tiles")
    return results, src.function


def _bodies(a: Attempt) -> tuple[np.ndarray, np.ndarray]:
    """Measured task bodies and compute-phase seconds per task of the small run (NotYet if too few)."""
    t = a.trace.tasks
    first = a.trace.first_attempts()
    n = int(first.sum())
    if n < MIN_MEASURED:
        raise NotYet(f"the cell ran {n} task{'s' if n != 1 else ''}; sizing needs a small run of at least "
                     f"{MIN_MEASURED} tiles as tasks, traced in this cell, to measure first.", mistake="small-run")
    body = (np.asarray(t["end"]) - np.asarray(t["start"]))[first]
    p = a.trace.phases_dataframe()
    comp = p[p["phase"] == "compute"]
    per_task = (comp["end"] - comp["start"]).groupby(comp["task_id"]).sum()
    return body, per_task.to_numpy()


def _linear(tasks: int, seconds: float, time_left: float) -> int:
    return max(1, math.ceil(tasks * seconds / time_left))


@exercise("sizing", lesson=LESSON_4, title="Workers for a deadline, from a small run", hints=SIZING_HINTS)
def sizing_check(a: Attempt) -> Verdict:
    """Grade a worker count for ``p.job`` against the simulator's answer for the cell's trace.

    The tiles and the job are the checker's own copy of the problem (``problems.given(a)``): nothing of
    the notebook's `job` is read.
    """
    p = problems.given(a)
    job = p.job
    measured, function = _measured(a, p.tiles)  # the small run first: an answer from decoys is no answer
    workers = _number(a, "workers", "the worker count for the job", mistake=None)
    body, compute = _bodies(a)
    ref = plan(a.trace, job)
    if ref.workers is None:
        raise NotYet(f"even one worker per tile would miss the deadline in the replay ({ref.reason}); "
                     "run the small job again on an idle machine.")
    # The simulator's count is the answer: in the passing verdict's details only, never a not yet's.
    details = (f"your answer {workers:g} workers", f"median tile {np.median(body):.3f} s, mean {body.mean():.3f} s")
    left = job.deadline - job.startup
    med, mean = float(np.median(body)), float(body.mean())
    if _near(workers, ref.workers, TOLERANCE, 1):
        # Each line below states a comparison made on this run's numbers, and appears only when it holds.
        evidence = [f"your worker count is within {TOLERANCE:.0%} of the simulator's replay of the "
                    f"{len(measured)} {function} tasks of this cell"]
        if _linear(job.tasks, med, left) < ref.workers:
            evidence.append("scaling the median tile would have given fewer workers than the replay needs: "
                            f"the {len(measured)} measured tiles are uneven, and the bigger ones set the mean")
        if _linear(job.tasks, mean, job.deadline) < ref.workers:
            evidence.append(f"dividing the work by the whole {job.deadline:g} s would have given fewer workers: "
                            f"the replay leaves the {job.startup:g} s start-up out of the tiles' time")
        return a.passed(*evidence, details=(*details, f"the simulator's {ref.workers} ({ref.reason})"))
    c = float(compute.mean()) if len(compute) else 0.0
    typical = ("you scaled one typical tile (the median): but some tiles are several times bigger, so the mean "
               "tile is longer than the typical one and your count falls short.", "typical")
    no_startup = (f"you divided the work by the whole {job.deadline:g} s deadline, but the first {job.startup:g} s "
                  f"go to starting the cluster: the tiles have only {left:g} s.", "no-startup")
    compute_only = ("you sized from the compute phase alone: reading and writing each tile are part of its time "
                    "too, and the deadline covers them.", "compute-only")
    shortcuts = [(_linear(job.tasks, med, left), typical), (_linear(job.tasks, med, job.deadline), typical),
                 (_linear(job.tasks, mean, job.deadline), no_startup)]
    if c:
        shortcuts += [(_linear(job.tasks, c, left), compute_only), (_linear(job.tasks, c, job.deadline), compute_only)]
    # The learner's arithmetic on the same trace gives one of these exactly; the closest names the shortcut.
    # Two shortcuts can round to the same count on some runs: then both are named.
    close = [(abs(workers - n), msg) for n, msg in shortcuts if abs(workers - n) <= MATCH_WORKERS]
    if close:
        best = min(d for d, _ in close)
        named = list(dict.fromkeys(msg for d, msg in close if d == best))
        tie = [] if len(named) == 1 else [
            f"on this run {len(named)} shortcuts give {workers:g} workers, so the checker cannot tell which one "
            "you took; each is named below."]
        return a.not_yet(*tie, *(m[0] for m in named), mistake=named[0][1], details=details)
    if workers < ref.workers:
        return a.not_yet("with that many workers the simulator's replay of your run misses the deadline.",
                         mistake="misses", details=details)
    return a.not_yet("that many workers meet the deadline, but fewer already do: the extra ones are paid to "
                     "wait.", mistake="too-many", details=details)


def _prefixes(files: int, reads: float, running: float) -> int:
    """The fewest prefixes that carry ``files * reads`` requests in ``running`` seconds at the published limit."""
    return max(1, math.ceil(files * reads / running / GETS_PER_PREFIX))


@exercise("seven-terabytes", lesson=LESSON_5, title="A warm pool: workers and prefixes", hints=SEVEN_HINTS)
def seven_terabytes(a: Attempt) -> Verdict:
    """Grade workers and key prefixes for the question of ``p`` with its warm start-up, against the plan of the trace.

    The job is the checker's own, built from its copy of the problem (``problems.given(a)``) and the
    bytes the workers read: nothing of the notebook's ``job`` is read.
    """
    p = problems.given(a)
    results, function = _measured(a, p.tiles)
    workers = _number(a, "workers", "the worker count")
    prefixes = _number(a, "prefixes", "the number of key prefixes")
    _bodies(a)  # enough tiles measured
    # A file is this many times the measured tiles (the work grows with the bytes, the lesson's assumption).
    file_bytes = p.total_bytes / p.files
    mean = float(np.mean([r.file_bytes for r in results]))
    job = Job(tasks=p.files, deadline=p.deadline, startup=PLAN_STARTUP, scale=file_bytes / mean,
              task_bytes=file_bytes, price_per_worker_hour=PRICE_PER_WORKER_HOUR)
    warm_startup = p.startup
    warm = replace(job, startup=warm_startup)
    ref = plan(a.trace, warm)
    if ref.workers is None:
        raise NotYet(f"with a {warm_startup:g} s start-up the plan finds no worker count that meets the deadline "
                     f"on this run's measurements ({ref.reason}).", mistake="job")
    # GDAL's read calls per file, as the opener counted them on the workers: a count, not a time.
    reads = float(np.mean([r.reads for r in results]))
    running = ref.wall_time - warm_startup
    need = _prefixes(job.tasks, reads, running)
    # The plan's workers, its end and the prefixes are the answer: the passing verdict's details only.
    details = (f"yours: {workers:g} workers, {prefixes:g} prefixes",
               f"{reads:.0f} read calls a tile, counted on the workers")
    answer = (f"plan with {warm_startup:g} s start-up: {ref.workers:,} workers, done {ref.wall_time:.0f} s after "
              f"asking; {need} prefixes",)
    # The learner's count replayed with the lesson's start-up: one replay of the same trace (a plan
    # searches many), so it says the same on a busy machine, and it is what the 60 s plan gave.
    count = max(1, round(workers))
    old_wall = predict(a.trace, job, count)
    lines, wrong = [], []
    if not _near(workers, ref.workers, TOLERANCE, 1):
        # The lesson's count: replayed with the 60 s start-up it lands on the deadline (within the tolerance).
        if workers > ref.workers and abs(old_wall - job.deadline) <= TOLERANCE * job.deadline:
            wrong.append("old-startup")
            lines.append(f"workers: {workers:g} is a count for the lesson's {job.startup:g} s start-up (replayed with "
                         f"it, they finish in {old_wall:.0f} s of the {job.deadline:g}); with {warm_startup:g} s the "
                         f"tasks have {job.deadline - warm_startup:g} s, so the plan needs fewer: the rest would be "
                         "paid to wait.")
        else:
            wrong.append("workers")
            lines.append(f"workers: the plan that replays this cell's run with the {warm_startup:g} s start-up "
                         f"needs {'more' if workers < ref.workers else 'fewer'} than {workers:g}.")
    if not need <= prefixes <= need + 1:
        if prefixes == _prefixes(job.tasks, reads, job.deadline):
            wrong.append("prefixes-deadline")
            lines.append(f"prefixes: you spread the read requests over the whole {job.deadline:g} s, but they are "
                         "made only while the tasks run, between start-up and the plan's predicted end.")
        elif old_wall > job.startup and prefixes == _prefixes(job.tasks, reads, old_wall - job.startup):
            wrong.append("old-startup")
            lines.append(f"prefixes: that many carry the requests of a run with the {job.startup:g} s start-up; "
                         f"with {warm_startup:g} s the tasks spread them over another span, so another count does.")
        else:
            wrong.append("prefixes")
            # Not the requests a second each would carry: times the learner's count, that gives the answer.
            lines.append(f"prefixes: with {prefixes:g}, each would carry "
                         + (f"more requests a second than the {GETS_PER_PREFIX:,} a prefix is guaranteed."
                            if prefixes < need else f"under {GETS_PER_PREFIX:,} requests a second, and fewer "
                            "prefixes already keep each under it."))
    if lines:
        return a.not_yet(*lines, mistake=wrong[0], details=details)
    n = len(results)
    evidence = [f"workers within {TOLERANCE:.0%} of the plan replayed with a {warm_startup:g} s start-up from the "
                f"{n} {function} tasks of this cell",
                f"prefixes: {reads:.0f} read calls a file x {job.tasks:,} files in the {running:.0f} s the "
                f"tasks run is {job.tasks * reads / running:,.0f} requests a second, so {need} prefixes keep "
                f"each under {GETS_PER_PREFIX:,}"]
    return a.passed(*evidence, details=(*details, *answer))
