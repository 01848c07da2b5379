"""Exercises of course 4 (Scaling a real workload), lessons 1 and 2: ``phases`` and ``io-overlap``.

The lessons run :mod:`eugo_lab.workloads.geotiles` on real GeoTIFFs; an earlier cell makes
``tiles`` (a TileSet), ``out_dir``, ``store`` (the Throttle that models object storage) and
``process = hpc.remote(geotiles.process_tile)``.

``phases`` — starter (graded ``not yet``: the pipeline runs here in the notebook)::

    %%eugo --exercise phases
    results = [geotiles.process_tile(p, out_dir) for p in tiles.paths]

reference::

    %%eugo --exercise phases
    results = hpc.get([process.remote(p, out_dir) for p in tiles.paths])

Criteria: ``results`` holds one TileResult per tile of ``tiles``, each output a valid COG;
one task per tile ran, and every one of them recorded a read, a compute and a write phase.

``io-overlap`` — starter (graded ``not yet``: two reads at a time, all four bands read)::

    %%eugo --exercise io-overlap -w 2
    results = hpc.get([process.remote(p, out_dir, product="ndvi", throttle=store) for p in tiles.paths])

reference (more workers than cores; ``geotiles.process_tiles(..., prefetch=4)`` per batch of
tiles passes too)::

    %%eugo --exercise io-overlap -w 8
    results = hpc.get([process.remote(p, out_dir, product="ndvi", bands=("red", "nir"), throttle=store)
                       for p in tiles.paths])

Criteria: NDVI COGs for every tile; the waiting overlapped — at some moment at least
``MIN_READS_IN_FLIGHT`` reads in flight together, or, with
reads prefetched in threads, a task's later tiles waiting at most half of its first, whole,
read (``MIN_HIDDEN``); each tile read at
most ``MAX_BYTES_SHARE`` of its file (red and nir: half the bands). Graded on the trace and the
bytes GDAL read, never on CPU added: a faster compute step leaves the reads waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eugo_lab.exercises import derivation, measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise

LESSON_1 = "04-scaling-a-real-workload/01-where-the-time-goes.ipynb"
LESSON_2 = "04-scaling-a-real-workload/02-reading-large-datasets-without-stalling.ipynb"
PHASES = ("read", "compute", "write")
# Reads "overlap" when at some moment at least 3 wait together: more than the starter's 2 workers
# can hold (process_tile reads once per task, so a worker has one read at a time), and more than
# the cores of this 2-core VM or a 1-core Binder, so it takes overlapping (more workers than
# cores, or reads in threads). The peak, not the average: freshly started workers load GDAL on
# their first tile, which staggers the first reads of an 8-worker run and pulls its average
# towards 2 on a busy machine. A fixed count rather than cores + 1, so the lesson's 8-worker fix
# passes on bigger machines too.
MIN_READS_IN_FLIGHT = 3
_PHASES_SOLUTION = "results = hpc.get([process.remote(p, out_dir) for p in tiles.paths])"
_TILES = "tiles = geotiles.make_tiles(...)   # the lesson's cell that makes the tiles"
PHASES_HINTS = {
    DEFAULT: Hint("Submit one task per tile with the lesson's remote `process` (it runs process_tile, which "
                  "marks its read, compute and write phases), then wait for all of them with one get().",
                  _PHASES_SOLUTION),
    "no-tiles": Hint("Run the lesson's cell that makes the tiles, then this cell again.", _TILES),
    "results": Hint("`results` must be what process_tile returned for every tile of `tiles`, each a "
                    "Cloud-Optimized GeoTIFF: run it on every path and keep the list get() returns.",
                    _PHASES_SOLUTION),
    "local": Hint("Run each tile as a task on a worker: the remote `process` instead of calling process_tile "
                  "here, one submission per path, then one get().", _PHASES_SOLUTION),
    "loop-in-task": Hint("Give every tile a task of its own instead of one task looping over several, so the "
                         "workers share the tiles and each tile's phases show on its own.", _PHASES_SOLUTION),
    "not-from-tasks": Hint("Keep what the tasks return: `results` is the list get() hands back for the tasks "
                           "that processed the tiles, not a list made here in the notebook or by an earlier cell.",
                           _PHASES_SOLUTION),
    "no-phases": Hint("Run each step inside a phase named after it, or use the geotiles helpers, which mark "
                      "the read, compute and write phases for you.",
                      "with hpc.phase(\"read\"):\n    ...\nwith hpc.phase(\"compute\"):\n    ...\n"
                      "with hpc.phase(\"write\"):\n    ..."),
}
_OVERLAP_SOLUTION = ("%%eugo --exercise io-overlap -w 8\n"
                     "results = hpc.get([process.remote(p, out_dir, product=\"ndvi\", bands=(\"red\", \"nir\"), "
                     "throttle=store)\n                   for p in tiles.paths])")
IO_HINTS = {
    DEFAULT: Hint("Let the reads wait together, since waiting needs no core: more workers than cores (or reads "
                  "ahead in threads); and read only the red and nir bands, all NDVI needs.", _OVERLAP_SOLUTION),
    "no-tiles": PHASES_HINTS["no-tiles"],
    "results": Hint("`results` must be the NDVI outputs for every tile, each a Cloud-Optimized GeoTIFF: ask "
                    "process_tile for the ndvi product on every path.", _OVERLAP_SOLUTION),
    "not-from-tasks": Hint("Keep what the tasks return: `results` is the list get() hands back for the tasks "
                           "that made the NDVI tiles in this cell, unchanged.", _OVERLAP_SOLUTION),
    "no-store": Hint("Read through the lesson's modelled network storage (its `store` throttle, passed to "
                     "process_tile), so the reads wait as they would on object storage; then overlap them.",
                     _OVERLAP_SOLUTION),
    "no-overlap": Hint("Run more workers than this machine's cores (the -w option of the exercise line), or "
                       "read ahead in threads with process_tiles and its prefetch: several reads then wait at "
                       "once.", _OVERLAP_SOLUTION),
    "all-bands": Hint("Ask process_tile for only the red and nir bands: each read then fetches about half the "
                      "file.", "results = hpc.get([process.remote(p, out_dir, product=\"ndvi\", "
                      "bands=(\"red\", \"nir\"), throttle=store)\n                   for p in tiles.paths])"),
}
# Red and nir are 2 of the 4 band-interleaved bands: a read of just those takes ~50% of the
# file (plus its header); reading every band takes ~100%. 60% sits clearly between.
MAX_BYTES_SHARE = 0.6
# Prefetching "hid" the reads when a task's later tiles waited at most half as long as its first
# (a whole read): reading only when needed keeps every wait a whole read (hidden ~0).
MIN_HIDDEN = 0.5
# Reads under a fifth of the task time are not what the exercise is about (the analysis's own bar
# for a phase worth a verdict): the cell most likely read from the local disk, without the store.
SMALL_READ_SHARE = 0.2
# "Compute is a small part of each task": under a sixth of the task time.
SMALL_COMPUTE_SHARE = 1 / 6


def tile_results(a: Attempt, product: str | None = None) -> list[Any]:
    """``results`` as TileResults covering every tile of ``tiles`` (raises NotYet saying what is missing)."""
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
    done = {str(r.source) for r in results}
    missing = [p for p in tiles.paths if str(p) not in done]
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


def in_flight(starts: np.ndarray, ends: np.ndarray) -> float:
    """Average number of spans open while at least one is: total span time / time covered by any span."""
    if not len(starts):
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts)[order], np.asarray(ends)[order]
    covered, cur_s, cur_e = 0.0, float(s[0]), float(e[0])
    for a, b in zip(s[1:].tolist(), e[1:].tolist()):
        if a > cur_e:
            covered += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    covered += cur_e - cur_s
    return float((e - s).sum()) / covered if covered > 0 else 0.0


def peak_in_flight(starts: np.ndarray, ends: np.ndarray) -> int:
    """The most spans open at one moment (at equal times an end comes before a start)."""
    if not len(starts):
        return 0
    times = np.concatenate([np.asarray(starts), np.asarray(ends)])
    deltas = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.lexsort((deltas, times))
    return int(np.cumsum(deltas[order]).max())


def phase_shares(trace: Any, tasks: Sequence[int] | None = None) -> dict[str, float]:
    """Each phase's seconds as a share of the task bodies that ran phases (of ``tasks``; None: all)."""
    p = _phase_frame(trace, tasks)
    if p.empty:
        return {}
    t = trace.tasks
    ids = np.asarray(t["task_id"])
    body = (np.asarray(t["end"]) - np.asarray(t["start"]))[np.isin(ids, p["task_id"].unique())]
    total = float(np.nansum(body))
    per = (p["end"] - p["start"]).groupby(p["phase"]).sum()
    return {str(k): float(v) / total for k, v in per.items()} if total > 0 else {}


@exercise("phases", lesson=LESSON_1, title="Read, compute, write on the timeline", hints=PHASES_HINTS)
def phases(a: Attempt) -> Verdict:
    """Grade the distributed pipeline: one task per tile, each with its read, compute and write phases."""
    results = tile_results(a)
    n = len(results)
    if measure.tasks(a.trace) == 0:
        return a.not_yet(f"the {n} tiles were processed here in the notebook, one after another: nothing ran on a "
                         "worker, so there are no tasks and no phases on the timeline.", mistake="local")
    src = from_tasks(a, results)
    ids = sorted(set(src.tasks))
    if len(ids) < n:
        k = len(ids)
        return a.not_yet(f"{n} tiles ran in {k} task{'s' if k != 1 else ''}: a task that loops over "
                         "several tiles keeps them on one worker, and their phases run together.",
                         mistake="loop-in-task")
    p = _phase_frame(a.trace, ids)
    have = p.groupby("task_id")["phase"].agg(set).to_dict() if not p.empty else {}
    gaps = [ph for ph in PHASES if any(ph not in have.get(i, set()) for i in ids)]
    if gaps:
        names = " and ".join(f"'{g}'" for g in gaps)
        missing = sum(1 for i in ids if any(g not in have.get(i, set()) for g in gaps))
        return a.not_yet(f"{missing} of the {len(ids)} {src.function} tasks recorded no {names} phase, so the "
                         "timeline cannot say how much of their time that step took.", mistake="no-phases")
    shares = phase_shares(a.trace, ids)
    others = measure.tasks(a.trace) - len(ids)
    return a.passed(f"`results` is what the {n} {src.function} tasks of this cell returned"
                    + (f" (the cell's {measure.plural(others, 'other task')} "
                       f"{'is' if others == 1 else 'are'} not counted)" if others else ""),
                    f"{n} tiles ran as {n} tasks, each with its read, compute and write phases on the timeline",
                    f"all {n} outputs are Cloud-Optimized GeoTIFFs (tiled, overviews, compressed)",
                    details=tuple(f"{k} {v:.0%} of task time" for k, v in sorted(shares.items())))


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


def hidden_reads(trace: Any, tasks: Sequence[int] | None = None) -> float | None:
    """Share of a read's wait that prefetching hid, from tasks that read several tiles (None: no such task).

    In a task that prefetches, its first "read" phase waits a whole read (nothing was read
    ahead yet) and each later one only what the read-ahead did not cover. So 1 - (median later
    wait / median first wait): ~0 when each tile is read only when needed, near 1 when the
    reads ran while the task computed.
    """
    p = _phase_frame(trace, tasks)
    reads = p[p["phase"] == "read"].sort_values("start")
    first, later = [], []
    for _, spans in reads.groupby("task_id"):
        d = (spans["end"] - spans["start"]).to_numpy()
        if len(d) >= 2:
            first.append(d[0])
            later.extend(d[1:].tolist())
    if not first or float(np.median(first)) <= 0:
        return None
    return max(0.0, 1.0 - float(np.median(later)) / float(np.median(first)))


@exercise("io-overlap", lesson=LESSON_2, title="Overlap the waiting, read only what you need", hints=IO_HINTS)
def io_overlap(a: Attempt) -> Verdict:
    """Grade an I/O-bound pipeline: the reads' waiting overlapped, and only red and nir read."""
    results = tile_results(a, product="ndvi")
    n = len(results)
    # Every fact below is read off the tasks `results` came from: decoys beside them count for nothing.
    ids = sorted(set(from_tasks(a, results).tasks))
    cores = int(a.trace.meta.get("cores", 0) or 0) or 1
    need = MIN_READS_IN_FLIGHT
    spans = _read_spans(a.trace, ids)
    flight, peak = in_flight(*spans), peak_in_flight(*spans)
    shares = phase_shares(a.trace, ids)
    read_share, compute_share = shares.get("read", 0.0), shares.get("compute", 0.0)
    hidden = hidden_reads(a.trace, ids)
    overlapped = peak >= need or (hidden is not None and hidden >= MIN_HIDDEN)
    share = max(r.bytes_read / r.file_bytes for r in results if r.file_bytes)
    details = (f"up to {peak} reads in flight, {flight:.1f} on average while reading",
               *(() if hidden is None else (f"prefetch hid {hidden:.0%} of a read's wait",)),
               f"read {read_share:.0%} and compute "
               f"{compute_share:.0%} of task time", f"largest read {share:.0%} of its file",
               f"{a.workers} worker{'s' if a.workers != 1 else ''}, {cores} core{'s' if cores != 1 else ''}")
    lines = []
    if not overlapped and read_share < SMALL_READ_SHARE:
        return a.not_yet("the reads took only a small part of each task, so there was little waiting to overlap: "
                         "the reads did not go through the lesson's modelled network storage (its `store`), "
                         "which this exercise is about.", mistake="no-store", details=details)
    if not overlapped:
        w = f"{a.workers} worker{'s' if a.workers != 1 else ''}"
        most = "most of" if read_share >= 0.5 else "much of"
        lines.append(f"the tasks still spent {most} their time waiting in the 'read' phase, and never more than "
                     f"{need - 1} reads waited at once: on {w} each read waited its turn.")
        if compute_share < SMALL_COMPUTE_SHARE:
            lines.append("Compute is a small part of each task, so a faster compute step (vectorized, or with more "
                         "CPU) cannot hide the waiting.")
        lines.append(f"Waiting needs no core, and this machine has {cores} core{'s' if cores != 1 else ''}: "
                     f"the run had {w}, no more.")
    if share > MAX_BYTES_SHARE:
        lines.append("Each tile read all four bands (the whole file), but NDVI uses only red and nir.")
    if lines:
        return a.not_yet(*lines, mistake="no-overlap" if not overlapped else "all-bands", details=details)
    how = (f"{need} or more reads waited at once, more than the starter's 2 workers could hold"
           if peak >= need
           else f"reads prefetched in threads ran while the tasks computed (later tiles waited under "
                f"{1 - MIN_HIDDEN:.0%} of a read)")
    bands = sorted({r.shape_in[0] for r in results})
    read = (f"each read fetched only red and nir (at most {MAX_BYTES_SHARE:.0%} of its file)" if bands == [2]
            else f"each read fetched at most {MAX_BYTES_SHARE:.0%} of its file "
                 f"({' or '.join(map(str, bands))} bands)")
    return a.passed(f"all {n} tiles became NDVI Cloud-Optimized GeoTIFFs, returned by {len(ids)} "
                    f"task{'s' if len(ids) != 1 else ''} of this cell",
                    f"the waiting overlapped: {how}", read, details=details)
