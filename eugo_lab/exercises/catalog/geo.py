"""Exercises of course 4 (Scaling a real workload), lessons 1 and 2: ``phases`` and ``io-overlap``.

The lessons run :mod:`eugo_lab.workloads.geotiles` on real GeoTIFFs; an earlier cell makes
``tiles`` (a TileSet), ``out_dir``, ``store`` (the Throttle that models object storage) and
``process = hpc.remote(geotiles.process_tile)``.

``phases`` — a pipeline the lesson did not show, written with rasterio itself: a true-colour
quicklook of every tile. The inputs are the checker's: ``p.tiles``, the file names of the tiles to
process, and ``p.factor``, how many pixels a side are averaged into one (the lesson's 16 tiles and 4;
in the hidden case 8 of them and 2 or 8). The starter (graded ``not yet``: one task per tile, but no
step marked) defines ``quicklook(path, factor)``, which reads three bands with rasterio, averages
them down ``factor`` times, scales them to bytes and writes a small GeoTIFF, and runs it as one
task per tile of ``p.tiles`` into ``results``; the lesson's cell is the code.

reference: the same body with each step inside ``with hpc.phase("read"):``,
``with hpc.phase("compute"):`` and ``with hpc.phase("write"):``.

Criteria: ``results`` is what this cell's tasks returned, one output file per tile of the checker's
copy of ``p.tiles``; one task per tile ran; the outputs are the quicklooks of those tiles and no
other (each covers its tile's ground, 3 bands of ``1 / p.factor`` its pixels a side, read off the
files); every one of them recorded a read, a compute and a write phase; and the phases hold the
work (at least ``MIN_COVERED`` of each task's time): a ratio of two spans of the same task, which
a busy machine stretches alike, unlike a duration.

``io-overlap`` — the tiles come in two regions, one task per region. The regions are the
checker's: ``p.regions``, each a tuple of tile file names (the lesson's 16 tiles, alternately, as
before; in the hidden case two regions of 5 or 6 other tiles, fewer in all). Starter (graded ``not
yet``: each task reads its tiles one after another, so two reads wait at a time)::

    %%eugo --exercise io-overlap -w 2
    p = exercises.problem("io-overlap")

    @hpc.remote
    def region(paths):
        return [geotiles.process_tile(path, out_dir, product="ndvi", throttle=store) for path in paths]

    parts = hpc.get([region.remote([tiles.folder / name for name in names]) for names in p.regions])
    results = [r for part in parts for r in part]

reference: ``return geotiles.process_tiles(paths, out_dir, prefetch=4, product="ndvi",
throttle=store)`` (reads ahead in threads); one task per tile on more workers than cores passes too.

Criteria, counts only: NDVI COGs for every tile of the checker's copy of ``p.regions`` and no
other, returned by this cell's tasks; the reads went
through the modelled store (the model charged them: a function of their bytes); and at some
moment at least ``MIN_READS_IN_FLIGHT`` reads waited together, by the read times each worker
recorded and by the tasks' 'read' phases. Two tasks that each read one tile at a time can never
show three, however slow or fast the machine: the verdict is the same on one busy core.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise

LESSON_1 = "04-scaling-a-real-workload/01-where-the-time-goes.ipynb"
LESSON_2 = "04-scaling-a-real-workload/02-overlapping-the-waits.ipynb"
PHASES = ("read", "compute", "write")
# Reads "overlap" when at some moment at least 3 wait together: more than the starter's 2 tasks
# can hold (each reads one tile at a time), and more than the cores of this 2-core VM or a 1-core
# Binder, so it takes overlapping (reads ahead in threads, or more tasks on more workers than
# cores). The peak, not the average: freshly started workers load GDAL on their first tile, which
# staggers the first reads of an 8-worker run. A fixed count rather than cores + 1, so the
# lesson's fixes pass on bigger machines too.
MIN_READS_IN_FLIGHT = 3
# The marked phases hold the work when they cover at least half of every task's time: a quicklook
# spends ~all of its time reading, computing and writing, while phases opened around nothing
# (`pass`) cover a few microseconds of a task of tens of milliseconds. Both spans are of the same
# task, so a busy core stretches them alike: the ratio holds on one loaded core.
MIN_COVERED = 0.5
# The lessons' tiles: make_tiles(n=16) names them tile_ROW_COL.tif on a grid of 4 columns.
TILES, GRID_COLUMNS = 16, 4
# phases: the lesson averages 4 x 4 pixels into one; the hidden case 2 x 2 or 8 x 8 (a 512-pixel tile divides
# by each), on 8 of the tiles (half the tasks: a pass costs less, the bigger 2x quicklooks included).
QUICKLOOK_FACTOR, HIDDEN_FACTORS, HIDDEN_QUICKLOOKS = 4, (2, 8), 8


def tile_name(i: int) -> str:
    """The file name make_tiles gives tile ``i`` of the lessons' 16."""
    r, c = divmod(i, GRID_COLUMNS)
    return f"tile_{r:02d}_{c:02d}.tif"


@problems.declare("phases")
@dataclass(frozen=True, repr=False)
class PhasesProblem(problems.Problem):
    """The tiles to make quicklooks of (file names) and the pixels a side each quicklook pixel averages."""

    tiles: tuple[str, ...]
    factor: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> PhasesProblem:
        """The lesson's 16 tiles averaged 4 x 4, or 8 of them drawn from ``rng``, averaged 2 x 2 or 8 x 8."""
        if not hidden:
            return cls(tuple(tile_name(i) for i in range(TILES)), QUICKLOOK_FACTOR)
        return cls(tuple(tile_name(i) for i in sorted(rng.sample(range(TILES), HIDDEN_QUICKLOOKS))),
                   rng.choice(HIDDEN_FACTORS))


@problems.declare("io-overlap")
@dataclass(frozen=True, repr=False)
class IoOverlapProblem(problems.Problem):
    """The two regions to process, each a tuple of tile file names (one task per region in the starter)."""

    regions: tuple[tuple[str, ...], ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> IoOverlapProblem:
        """The lesson's 16 tiles, alternately in two regions, or two regions of 5 or 6 tiles drawn from ``rng``.

        Two regions in both: two tasks that read one tile at a time keep two reads waiting, under
        :data:`MIN_READS_IN_FLIGHT`, so the starter's shape fails either case. The hidden case holds
        10 to 12 tiles (a pass costs less than the lesson's 16), each region more than a read-ahead of 4.
        """
        if not hidden:
            return cls(tuple(tuple(tile_name(i) for i in range(TILES)[k::2]) for k in range(2)))
        picked = rng.sample(range(TILES), rng.choice((5, 6)) + rng.choice((5, 6)))
        cut = len(picked) // 2
        return cls((tuple(tile_name(i) for i in picked[:cut]), tuple(tile_name(i) for i in picked[cut:])))
_QUICKLOOK = ("@hpc.remote\n"
              "def quicklook(path, factor):\n"
              "    with hpc.phase(\"read\"):\n"
              "        with rasterio.open(path) as src:\n"
              "            ...\n"
              "    with hpc.phase(\"compute\"):\n"
              "        small = ...\n"
              "        img = ...\n"
              "    with hpc.phase(\"write\"):\n"
              "        target = ...\n"
              "        with rasterio.open(target, \"w\", ...) as dst:\n"
              "            dst.write(img)\n"
              "    return str(target)")
_TILES = "tiles = geotiles.make_tiles(...)   # the lesson's cell that makes the tiles"
_SUBMIT = "results = hpc.get([quicklook.remote(tiles.folder / name, p.factor) for name in p.tiles])"
PHASES_HINTS = {
    DEFAULT: Hint("Put each step of the task's body inside a phase named after it: the rasterio read inside "
                  "'read', the averaging and stretching inside 'compute', the rasterio write inside 'write'.",
                  _QUICKLOOK),
    "no-tiles": Hint("Run the lesson's cell that makes the tiles, then this cell again.", _TILES),
    "results": Hint("`results` must be the list get() returns: one output file per tile of p.tiles, from one "
                    "task per tile, and no other.", _SUBMIT),
    "size": Hint("Average p.factor x p.factor pixels into one, the factor the checker handed out: reshape by it, "
                 "scale the transform by it, and write the quicklook at the size that gives.",
                 "bands, rows, cols = rgb.shape\n"
                 "small = rgb.reshape(bands, rows // factor, factor, cols // factor, factor).mean(axis=(2, 4))"),
    "local": Hint("Run each tile as a task on a worker: make the function remote, submit one task per "
                  "path, then wait for them all with one get().", _SUBMIT),
    "loop-in-task": Hint("Give every tile a task of its own instead of one task looping over several, so the "
                         "workers share the tiles and each tile's phases show on its own.", _SUBMIT),
    "not-from-tasks": Hint("Keep what the tasks return: `results` is the list get() hands back for the tasks "
                           "that made the quicklooks, not a list made here in the notebook or by an earlier cell.",
                           _SUBMIT),
    "no-phases": Hint("Mark every step: a phase block for the read, one for the compute and one "
                      "for the write, inside the task's body, around the lines that do each.", _QUICKLOOK),
    "empty-phases": Hint("Move the work into the phases: each phase must hold the lines of its step (indent them "
                         "under it), not open and close around nothing before the work runs.", _QUICKLOOK),
    problems.CARRY_OVER: Hint("Take the tiles and the factor from p, the exercise's inputs (p.tiles, p.factor), "
                              "instead of tiles, sizes or factors written into the cell, and pass the factor to "
                              "each task as an argument.", 'p = exercises.problem("phases")\n' + _SUBMIT),
}
_OVERLAP_READ = ("    return geotiles.process_tiles(paths, out_dir, prefetch=4, product=\"ndvi\", "
                 "throttle=store)")
_OVERLAP_SOLUTION = "@hpc.remote\ndef region(paths):\n" + _OVERLAP_READ
_REGIONS = "parts = hpc.get([region.remote([tiles.folder / name for name in names]) for names in p.regions])"
IO_HINTS = {
    DEFAULT: Hint("Let the reads wait together, since waiting needs no core: read ahead in threads inside each "
                  "region's task (process_tiles with prefetch), or give every tile a task of its own on more "
                  "workers than cores.", _OVERLAP_SOLUTION),
    "no-tiles": PHASES_HINTS["no-tiles"],
    "results": Hint("`results` must be the NDVI outputs for every tile of p.regions and no other, each a "
                    "Cloud-Optimized GeoTIFF: ask for the ndvi product of every path of both regions.",
                    _OVERLAP_SOLUTION + "\n\n\n" + _REGIONS),
    "not-from-tasks": Hint("Keep what the tasks return: `results` is what get() hands back for the tasks "
                           "that made the NDVI tiles in this cell (the regions' lists joined), unchanged.",
                           "results = [r for part in parts for r in part]"),
    "no-store": Hint("Read through the lesson's modelled network storage (its `store` throttle, passed as "
                     "throttle=), so the reads wait as they would on object storage; then overlap them.",
                     _OVERLAP_SOLUTION),
    "no-overlap": Hint("Two tasks that each read one tile at a time keep two reads waiting, however many workers "
                       "you start: read ahead in threads inside each task (process_tiles and its prefetch), or "
                       "split the regions into a task per tile on more workers than cores.", _OVERLAP_SOLUTION),
    problems.CARRY_OVER: Hint("Take the regions from p.regions, the exercise's inputs (each a tuple of tile file "
                              "names), instead of tiles or slices of `tiles.paths` written into the cell.",
                              'p = exercises.problem("io-overlap")\n' + _REGIONS),
}


def tile_results(a: Attempt, product: str | None = None, names: Sequence[str] | None = None,
                 given: str = "p.regions") -> list[Any]:
    """``results`` as TileResults covering every tile of ``tiles`` (raises NotYet saying what is missing).

    ``names``: the tiles' file names the checker handed out (``given`` says where, for the message): then
    ``results`` must cover those tiles and no other; None: every tile of ``tiles``.
    """
    from eugo_lab.workloads.geotiles import TileResult, TileSet, cog_info

    results = a.require("results")
    tiles = a.namespace.get("tiles")
    if not isinstance(tiles, TileSet):
        raise NotYet("there is no `tiles` in the notebook: the lesson's cell that makes the tiles has not run "
                     "in this kernel.", mistake="no-tiles")
    if isinstance(results, TileResult):
        results = [results]
    if not isinstance(results, (list, tuple)) or not all(isinstance(r, TileResult) for r in results):
        raise NotYet("`results` is not the list of what process_tile returned for each tile; it holds something "
                     "else.", mistake="results")
    if names is not None:
        done_names = [Path(r.source).name for r in results]
        missing_names = [n for n in names if n not in done_names]
        if missing_names:
            raise NotYet(f"{len(missing_names)} of the {measure.plural(len(names), 'tile')} of {given} have no result "
                         f"in `results` (the first missing is {missing_names[0]}).", mistake="results")
        if len(done_names) != len(names):
            others = len(set(done_names) - set(names))
            said = f", {measure.plural(others, 'result')} of tiles it does not name" if others else ""
            raise NotYet(f"`results` holds {measure.plural(len(done_names), 'result')} for the "
                         f"{measure.plural(len(names), 'tile')} of {given}{said}: one for each of its tiles, and no "
                         "other.", mistake="results")
    done = {str(r.source) for r in results}
    missing = [p for p in tiles.paths if str(p) not in done] if names is None else []
    if missing:
        raise NotYet(f"{len(missing)} of the {len(tiles)} tiles have no result in `results` (the first missing is "
                     f"{missing[0].name}).", mistake="results")
    if product == "ndvi" and any(r.shape_out[0] != 1 for r in results):
        raise NotYet("the outputs are not NDVI, the vegetation index the lesson computes: each holds more than "
                     "one band.", mistake="results")
    bad = [r for r in results if not cog_info(r.output).is_cog]
    if bad:
        raise NotYet(f"{len(bad)} outputs are not Cloud-Optimized GeoTIFFs (tiled, with overviews, "
                     "compressed), which process_tile writes.", mistake="results")
    return list(results)


def _phase_frame(trace: Any, tasks: Sequence[int] | None = None) -> Any:
    """One row per phase span (first attempts of tasks that ended), with ``task_id`` and ``phase``.

    ``tasks``: only those tasks' spans (the ones ``results`` came from; None: every task).
    """
    p = trace.phases_dataframe()
    return p if tasks is None else p[p["task_id"].isin(list(tasks))]


def from_tasks(a: Attempt, results: list[Any]) -> derivation.Sources:
    """The tasks of this cell that returned ``results`` (raises NotYet, in plain words, when none did)."""
    src = derivation.returned_by(results, a.trace, name="results")
    if not src:
        raise NotYet(f"{src.why}. A list made here in the notebook, or left by an earlier cell, does not show what "
                     "the workers did.", mistake="not-from-tasks")
    return src


def peak_in_flight(starts: np.ndarray, ends: np.ndarray) -> int:
    """The most spans open at one moment (at equal times an end comes before a start)."""
    if not len(starts):
        return 0
    times = np.concatenate([np.asarray(starts), np.asarray(ends)])
    deltas = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.lexsort((deltas, times))
    return int(np.cumsum(deltas[order]).max())


def _outputs(a: Attempt, n: int) -> tuple[list[Any], Any]:
    """``results`` as existing output files, at least ``n`` (the tiles of p.tiles; NotYet saying what is missing)."""
    from eugo_lab.workloads.geotiles import TileSet

    results = a.require("results")
    tiles = a.namespace.get("tiles")
    if not isinstance(tiles, TileSet):
        raise NotYet("there is no `tiles` in the notebook: the lesson's cell that makes the tiles has not run "
                     "in this kernel.", mistake="no-tiles")
    if not isinstance(results, (list, tuple)) or not all(isinstance(r, (str, os.PathLike)) for r in results):
        raise NotYet("`results` is not the list of output files the tasks returned (one path per tile); it holds "
                     "something else.", mistake="results")
    files = {os.fspath(r) for r in results if os.path.isfile(os.fspath(r))}
    if len(files) < n:
        raise NotYet(f"`results` names {len(files)} distinct output file{'s' if len(files) != 1 else ''} that "
                     f"exist, for the {n} tiles of p.tiles: every tile needs its own quicklook.", mistake="results")
    return list(results), tiles


def _quicklooks(files: Sequence[str], tiles: Any, p: PhasesProblem) -> None:
    """The output ``files`` are the quicklooks of ``p.tiles``, one each, ``p.factor`` times smaller (NotYet if not).

    Read off the files: an output belongs to the tile whose ground it covers (its bounds, to a metre),
    so a quicklook of a tile p.tiles does not name, or of the wrong size, is told apart from the tile's own.
    """
    import rasterio

    def ground(src: Any) -> tuple[float, ...]:
        return tuple(round(v) for v in src.bounds)

    want = {}
    for name in p.tiles:
        with rasterio.open(tiles.folder / name) as src:
            want[ground(src)] = (name, src.width // p.factor, src.height // p.factor)
    got: dict[tuple[float, ...], tuple[int, int, int]] = {}
    others = 0
    for path in files:
        with rasterio.open(path) as out:
            key, shape = ground(out), (out.count, out.width, out.height)
        if key in want:
            got[key] = shape
        else:
            others += 1
    n = len(p.tiles)
    missing = [want[k][0] for k in want if k not in got]
    if missing:
        raise NotYet(f"{len(missing)} of the {n} tiles of p.tiles have no quicklook among the files of `results` (the "
                     f"first is {missing[0]}): each output covers the ground of the tile it was made from.",
                     mistake="results")
    if others:
        raise NotYet(f"`results` names {measure.plural(others, 'output file')} beside the quicklooks of the {n} tiles "
                     "of p.tiles, of tiles it does not name: one task for each of its tiles, and no other.",
                     mistake="results")
    for key, (name, width, height) in want.items():
        count, w, h = got[key]
        if (count, w, h) != (3, width, height):
            raise NotYet(f"the quicklook of {name} holds {measure.plural(count, 'band')} of {w} x {h} pixels: "
                         f"averaging p.factor x p.factor pixels into one makes 3 bands (red, green, blue) of "
                         f"{width} x {height}.", mistake="size")


def covered(trace: Any, tasks: Sequence[int]) -> dict[int, float]:
    """Per task: the share of its body that its phases cover (nested or overlapping phases counted once)."""
    p = _phase_frame(trace, tasks)
    t = trace.tasks
    body = dict(zip(np.asarray(t["task_id"]).tolist(), (np.asarray(t["end"]) - np.asarray(t["start"])).tolist()))
    out = {}
    for tid in tasks:
        spans = p[p["task_id"] == tid].sort_values("start")
        total, cur_s, cur_e = 0.0, None, None
        for s, e in zip(spans["start"].tolist(), spans["end"].tolist()):
            if cur_e is None or s > cur_e:
                total += 0.0 if cur_e is None else cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        total += 0.0 if cur_e is None else cur_e - cur_s
        out[tid] = total / body[tid] if body.get(tid, 0) > 0 else 0.0
    return out


@exercise("phases", lesson=LESSON_1, title="Read, compute, write on the timeline", hints=PHASES_HINTS)
def phases(a: Attempt) -> Verdict:
    """Grade a pipeline of the learner's own: one task per tile, each step inside the phase named after it.

    The tiles and the factor are the checker's own copy of the problem (``problems.given(a)``).
    """
    p = problems.given(a)
    n = len(p.tiles)
    results, tiles = _outputs(a, n)
    if measure.tasks(a.trace) == 0:
        here = steps.functions_here(a)
        return a.not_yet(f"no task ran in this cell{' (' + here + ')' if here else ''}: nothing ran on a worker, "
                         f"so the {n} tiles have no tasks and no phases on the timeline.", mistake="local")
    src = from_tasks(a, results)
    ids = sorted(set(src.tasks))
    if len(ids) < n:
        k = len(ids)
        return a.not_yet(f"{n} tiles ran in {k} task{'s' if k != 1 else ''}: a task that loops over "
                         "several tiles keeps them on one worker, and their phases run together.",
                         mistake="loop-in-task")
    _quicklooks(sorted({os.fspath(r) for r in results}), tiles, p)
    spans = _phase_frame(a.trace, ids)
    have = spans.groupby("task_id")["phase"].agg(set).to_dict() if not spans.empty else {}
    gaps = [ph for ph in PHASES if any(ph not in have.get(i, set()) for i in ids)]
    if gaps:
        names = " and ".join(f"'{g}'" for g in gaps)
        missing = sum(1 for i in ids if any(g not in have.get(i, set()) for g in gaps))
        return a.not_yet(f"{missing} of the {len(ids)} {src.function} tasks recorded no {names} phase, so the "
                         "timeline cannot say how much of their time that step took.", mistake="no-phases")
    cover = covered(a.trace, ids)
    thin = [i for i in ids if cover[i] < MIN_COVERED]
    details = (f"phases cover {min(cover.values()):.0%} to {max(cover.values()):.0%} of a task's time",)
    if thin:
        return a.not_yet(f"{len(thin)} of the {len(ids)} {src.function} tasks opened their read, compute and write "
                         f"phases, but the phases hold less than {MIN_COVERED:.0%} of the task's time: the work ran "
                         "outside them, so the timeline would put it in no step.", mistake="empty-phases",
                         details=details)
    others = measure.tasks(a.trace) - len(ids)
    return a.passed(f"`results` is what the {n} {src.function} tasks of this cell returned"
                    + (f" (the cell's {measure.plural(others, 'other task')} "
                       f"{'is' if others == 1 else 'are'} not counted)" if others else ""),
                    f"{n} tiles ran as {n} tasks, each with its read, compute and write phases on the timeline",
                    f"the phases hold the work: at least {MIN_COVERED:.0%} of every task's time is inside them",
                    details=details)


def _read_spans(trace: Any, tasks: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The times each task (of ``tasks``) waited in a 'read' phase, its nested or overlapping spans merged.

    Merged per task, so a count of spans open at once counts tasks waiting together: one task
    cannot pass for several by opening read phases inside each other.
    """
    p = _phase_frame(trace, tasks)
    sel = p[p["phase"] == "read"].sort_values(["task_id", "start"], kind="stable")
    starts: list[float] = []
    ends: list[float] = []
    last = None
    for tid, a, b in zip(sel["task_id"].tolist(), sel["start"].tolist(), sel["end"].tolist()):
        if tid == last and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
            continue
        starts.append(a)
        ends.append(b)
        last = tid
    return np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)


def reads_in_flight(results: Sequence[Any]) -> int:
    """The most tile reads waiting at one moment, by the read times the workers recorded in ``results``.

    Each TileResult carries when its read began and ended (``time.time()`` on its worker), the
    reads of prefetching threads included, which a task's phases do not show.
    """
    spans = [(r.read_start, r.read_end) for r in results if r.read_end > r.read_start > 0]
    if not spans:
        return 0
    starts, ends = zip(*spans)
    return peak_in_flight(np.asarray(starts), np.asarray(ends))


@exercise("io-overlap", lesson=LESSON_2, title="Overlap the waiting", hints=IO_HINTS)
def io_overlap(a: Attempt) -> Verdict:
    """Grade an I/O-bound pipeline: the reads went through the store, and their waiting overlapped.

    The tiles are the checker's own copy of ``p.regions`` (``problems.given(a)``), never the notebook's.
    """
    results = tile_results(a, product="ndvi", names=[n for r in problems.given(a).regions for n in r])
    n = len(results)
    # Every fact below is read off the tasks `results` came from: decoys beside them count for nothing.
    ids = sorted(set(from_tasks(a, results).tasks))
    k = len(ids)
    cores = int(a.trace.meta.get("cores", 0) or 0) or 1
    need = MIN_READS_IN_FLIGHT
    phase_peak = peak_in_flight(*_read_spans(a.trace, ids))
    worker_peak = reads_in_flight(results)
    peak = max(phase_peak, worker_peak)
    charged = sorted(r.store_wait for r in results)
    wait = charged[len(charged) // 2]
    w = f"{a.workers} worker{'s' if a.workers != 1 else ''}"
    details = (f"up to {peak} reads in flight at once", f"the store model charged {1000 * wait:.0f} ms a read",
               f"{k} task{'s' if k != 1 else ''} on {w}, {cores} core{'s' if cores != 1 else ''}")
    if charged[-1] <= 0:
        return a.not_yet("the reads did not go through the lesson's modelled network storage (its `store`): they "
                         "came from the local disk, which serves a tile in about a millisecond, so there was no "
                         "waiting to overlap, which this exercise is about.", mistake="no-store", details=details)
    if peak < need:
        lines = [f"never more than {peak} read{'s' if peak != 1 else ''} waited at once, and each waited about "
                 f"{1000 * wait:.0f} ms on the store (the model's charge for its bytes), time that no faster "
                 "compute step removes."]
        if k < need:
            lines.append(f"The {n} tiles ran in {k} task{'s' if k != 1 else ''}, each reading its tiles one after "
                         f"another: {k} read{'s' if k != 1 else ''} at a time, however many workers the cluster "
                         "has.")
        else:
            lines.append(f"Waiting needs no core, and this machine has {cores} core{'s' if cores != 1 else ''}: the "
                         f"run had {w}, so each read waited its turn.")
        return a.not_yet(*lines, mistake="no-overlap", details=details)
    how = ("by the read times the workers recorded, the reads of read-ahead threads included"
           if worker_peak > phase_peak else "by the tasks' 'read' phases on the timeline")
    return a.passed(f"all {n} tiles became NDVI Cloud-Optimized GeoTIFFs, returned by {k} "
                    f"task{'s' if k != 1 else ''} of this cell",
                    f"every read went through the modelled store, which charged about {1000 * wait:.0f} ms a read "
                    "for its bytes",
                    f"the waiting overlapped: up to {peak} reads waited at once ({how}), more than two tasks "
                    "reading one tile at a time can hold", details=details)
