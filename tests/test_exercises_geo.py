"""Course 4's exercises on real GeoTIFF runs, one table of cells per exercise run through ``%%eugo --exercise``.

Each table holds the lesson's reference (passes), an honest variant that differs from it (passes),
the typical mistakes (each ``not yet`` with its own message and hint tiers) and shortcuts: the
right value while the taught technique was not what produced it (``not yet``, naming what happened).
"""

from __future__ import annotations

import pytest

pytest.importorskip("rasterio")

from _exercise_cells import code_in, hint_code, hint_words, run_exercise, tier_code

from eugo_lab.exercises import catalog

BASE = """
import math, pathlib, tempfile
from eugo_lab import hpc
from eugo_lab.analysis import sizing
from eugo_lab.workloads import geotiles
from eugo_lab.workloads.storage import Throttle
work = pathlib.Path(tempfile.mkdtemp())
out_dir = work / "out"
out_dir.mkdir()
store = Throttle(latency=0.03, bandwidth=40e6)
process = hpc.remote(geotiles.process_tile)
workers = bandwidth = cost = results = None  # each cell's answers are its own
"""
EVEN = BASE + 'tiles = geotiles.make_tiles(work / "in", n=16)\n'
UNEVEN = (BASE + "sizes = [1024 if i % 5 == 2 else 512 for i in range(16)]  # 3 scenes of 16 are 4x the pixels\n"
          'tiles = geotiles.make_tiles(work / "in", n=16, size=sizes)\n'
          "job = sizing.Job(tasks=20_000, deadline=120, startup=60)\n")
SEVEN = EVEN + """
FILES, TOTAL, DEADLINE = 192_000, 7e12, 180
file_bytes = TOTAL / FILES
job = sizing.Job(tasks=FILES, deadline=DEADLINE, startup=60, scale=file_bytes / (tiles.total_bytes / len(tiles)),
                 task_bytes=file_bytes, price_per_worker_hour=0.0408)
"""
NDVI = 'product="ndvi", throttle=store'
SMALL = "with hpc.trace() as small:\n    results = hpc.get([process.remote(p, out_dir{}) for p in tiles.paths])\n"


def lines(v):
    text = v.to_text()
    return text.splitlines()[0], text



# A remote function of the learner's own, other names, the tiles submitted in another order: honest.
OWN_TASK = """
@hpc.remote
def tile_job(path):
    return geotiles.process_tile(path, out_dir)
pending = [tile_job.remote(q) for q in reversed(tiles.paths)]
results = hpc.get(pending)
"""
# Phases marked by hand in a task of the learner's own (a decoy: it processes nothing).
FAKE_PHASES = """
@hpc.remote
def fake(p):
    with hpc.phase("read"):
        pass
    with hpc.phase("compute"):
        pass
    with hpc.phase("write"):
        pass
hpc.get([fake.remote(p) for p in tiles.paths])
"""
LOCAL = "results = [geotiles.process_tile(p, out_dir) for p in tiles.paths]\n"
UNMARKED = """
@hpc.remote
def by_hand(path):
    import rasterio
    with rasterio.open(path) as src:          # read, but not inside hpc.phase("read")
        tile = geotiles.Tile(src.read(), src.transform, src.crs, geotiles.BANDS)
    out = geotiles.resample(tile, 2)
    return geotiles.TileResult(str(path), str(out_dir / pathlib.Path(path).name), 0, 0,
                               geotiles.write_cog(out, out_dir / pathlib.Path(path).name), (), ())
results = hpc.get([by_hand.remote(p) for p in tiles.paths])
"""
REF_PHASES = "results = hpc.get([process.remote(p, out_dir) for p in tiles.paths])"


def row(kind, cell, passed, *phrases, absent=(), mistake=None, setup=EVEN, line="-w 2 --no-live", id=None):
    """One row of an exercise's table: what kind of cell, its text, the verdict and phrases it must (not) show."""
    return pytest.param(cell, passed, phrases, absent, mistake, setup, line, id=f"{kind}-{id}")


def check_row(exercise_id, cell, passed, phrases, absent, mistake, setup, line):
    v = run_exercise(exercise_id, cell, setup=setup, line=line)
    first, text = lines(v)
    assert first == f"exercise {exercise_id}: {'passed' if passed else 'not yet'}", text
    for phrase in phrases:
        assert phrase in text, f"{phrase!r} not in\n{text}"
    for phrase in absent:
        assert phrase not in text, f"{phrase!r} in\n{text}"
    if not passed:
        # Shortcuts priced from this run's timings can coincide on a loaded machine; the verdict then
        # says so and names each, and the expected one must be among them.
        tied = "shortcuts give" in text and "cannot tell which one" in text
        assert v.mistake == mistake or (tied and phrases), text
        assert not code_in(" ".join(v.lines)), code_in(" ".join(v.lines))
        assert mistake in catalog.get(exercise_id).hints, f"no hint tiers of its own for {mistake!r}"
        assert hint_words(v) and hint_code(v)
    return v


# -- phases ------------------------------------------------------------------------------------------
PHASES_TABLE = [
    row("reference", REF_PHASES, True, "`results` is what the 16 process_tile tasks of this cell returned",
        "16 tiles ran as 16 tasks, each with its read, compute and write phases",
        "all 16 outputs are Cloud-Optimized GeoTIFFs", absent=("other task",), id="one-task-per-tile"),
    row("honest", OWN_TASK, True, "`results` is what the 16 tile_job tasks of this cell returned",
        "16 tiles ran as 16 tasks", id="own-remote-function-other-order"),
    row("mistake", LOCAL, False, "processed here in the notebook, one after another: nothing ran on a worker",
        mistake="local", id="in-the-notebook"),
    row("mistake", "results = hpc.get(hpc.remote(geotiles.process_tiles).remote(tiles.paths, out_dir))", False,
        "16 tiles ran in 1 task: a task that loops over several tiles keeps them on one worker",
        mistake="loop-in-task", id="all-tiles-in-one-task"),
    row("mistake", "results = hpc.get([process.remote(p, out_dir) for p in tiles.paths[:10]])", False,
        "6 of the 16 tiles have no result in `results`", mistake="results", id="missing-tiles"),
    row("mistake", UNMARKED, False, "16 of the 16 by_hand tasks recorded no 'read' phase",
        mistake="no-phases", id="unmarked-steps"),
    row("shortcut", FAKE_PHASES + LOCAL, False,
        "`results` was not computed from the tasks' results: 0 of its 16 values are among what the 16 fake tasks",
        mistake="not-from-tasks", id="local-results-beside-fake-phases"),
    row("shortcut", "hpc.get([process.remote(p, out_dir) for p in tiles.paths[:8]])\n" + LOCAL, False,
        "8 of its 16 values are among what the 8 process_tile tasks of this cell returned",
        mistake="not-from-tasks", id="local-results-beside-decoy-tasks"),
    row("shortcut", "hpc.get([process.remote(p, out_dir, product='ndvi') for p in tiles.paths])\nresults = saved\n",
        False, "0 of its 16 values are among what the 16 process_tile tasks of this cell returned",
        mistake="not-from-tasks", setup=EVEN + "saved = [geotiles.process_tile(p, out_dir) for p in tiles.paths]\n",
        id="results-of-an-earlier-cell"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", PHASES_TABLE)
def test_phases_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("phases", cell, passed, phrases, absent, mistake, setup, line)


def test_phases_evidence_follows_the_run():
    """The passing lines state this run's facts: another tile count, a task beside the tiles."""
    cell = REF_PHASES + "\nhpc.get(hpc.remote(len).remote('extra'))\n"
    _, text = lines(run_exercise("phases", cell, setup=BASE + 'tiles = geotiles.make_tiles(work / "in", n=9)\n'))
    assert "`results` is what the 9 process_tile tasks of this cell returned (the cell's 1 other task is not " \
           "counted)" in text, text
    assert "9 tiles ran as 9 tasks" in text and "all 9 outputs" in text and "16" not in text


# -- io-overlap --------------------------------------------------------------------------------------
REF_IO = f'results = hpc.get([process.remote(p, out_dir, {NDVI}, bands=("red", "nir")) for p in tiles.paths])'
STARTER_IO = f"results = hpc.get([process.remote(p, out_dir, {NDVI}) for p in tiles.paths])"
# One task that opens read phases inside each other: three "reads in flight" from one waiting task.
NESTED_READS = """
@hpc.remote
def waits():
    import time
    with hpc.phase("read"):
        with hpc.phase("read"):
            with hpc.phase("read"):
                time.sleep(0.3)
hpc.get(waits.remote())
"""


def batches(prefetch: int) -> str:
    return (f"batch = hpc.remote(geotiles.process_tiles)\n"
            f"parts = hpc.get([batch.remote(tiles.paths[i::2], out_dir, prefetch={prefetch}, {NDVI}, "
            f"bands=('red', 'nir')) for i in range(2)])\n"
            "results = [r for part in parts for r in part]\n")


W8 = "-w 8 --no-live"
IO_TABLE = [
    row("reference", REF_IO, True, "all 16 tiles became NDVI Cloud-Optimized GeoTIFFs, returned by 16 tasks",
        "3 or more reads waited at once, more than the starter's 2 workers could hold",
        "each read fetched only red and nir (at most 60% of its file)", line=W8, id="more-workers-than-cores"),
    row("honest", batches(4), True, "returned by 2 tasks of this cell",
        "reads prefetched in threads ran while the tasks computed", absent=("3 or more reads",),
        id="prefetch-in-threads"),
    row("mistake", STARTER_IO, False,
        "waiting in the 'read' phase, and never more than 2 reads waited at once: on 2 workers",
        "Each tile read all four bands (the whole file), but NDVI uses only red and nir", mistake="no-overlap",
        id="starter"),
    row("mistake", batches(0), False, "never more than 2 reads waited at once", mistake="no-overlap",
        id="batches-without-read-ahead"),
    row("mistake", REF_IO, False, "Compute is a small part of each task, so a faster compute step",
        absent=("all four bands",), mistake="no-overlap", id="fewer-bytes-on-2-workers"),
    row("mistake", STARTER_IO, False, "NDVI uses only red and nir", absent=("waited at once",),
        mistake="all-bands", line=W8, id="every-band-on-8-workers"),
    row("mistake", 'results = hpc.get([process.remote(p, out_dir, product="ndvi", bands=("red", "nir")) '
        'for p in tiles.paths])', False, "modelled network storage (its `store`)", mistake="no-store",
        id="without-the-store"),
    row("mistake", 'results = hpc.get([process.remote(p, out_dir, bands=("red", "nir")) for p in tiles.paths])',
        False, "the outputs are not NDVI", mistake="results", line=W8, id="not-ndvi"),
    row("shortcut", REF_IO + NESTED_READS, False, "never more than 2 reads waited at once",
        absent=("passed",), mistake="no-overlap", id="nested-read-phases-beside"),
    row("shortcut", STARTER_IO + "\nresults = [r._replace(bytes_read=r.bytes_read // 2) for r in results]\n", False,
        "`results` was not computed from the tasks' results: 0 of its 16 values are among what the 16 "
        "process_tile tasks of this cell returned", mistake="not-from-tasks", line=W8, id="bytes-edited-afterwards"),
    row("shortcut", STARTER_IO + "\nresults = saved\n", False,
        "0 of its 16 values are among what the 16 process_tile tasks", mistake="not-from-tasks", line=W8,
        setup=EVEN + 'saved = [geotiles.process_tile(p, out_dir, product="ndvi", bands=("red", "nir")) '
                     'for p in tiles.paths]\n', id="two-band-results-of-an-earlier-cell"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", IO_TABLE)
def test_io_overlap_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("io-overlap", cell, passed, phrases, absent, mistake, setup, line)


def test_io_overlap_hint_tiers_carry_the_code():
    assert 'bands=(\"red\", \"nir\")' in tier_code("io-overlap", "all-bands")
    assert "throttle=store" in tier_code("io-overlap", "no-store")
    assert 'product=\"ndvi\"' in tier_code("io-overlap", "results")
    assert "hpc.get(" in tier_code("io-overlap", "not-from-tasks")
    assert 'hpc.phase(\"read\")' in tier_code("phases", "no-phases")


# -- sizing ------------------------------------------------------------------------------------------
REF_SIZING = SMALL.format("") + "workers = sizing.plan(small, job).workers\n"
SAVED = "saved = [geotiles.process_tile(p, out_dir) for p in tiles.paths]\n"
NAP = "@hpc.remote\ndef nap():\n    import time\n    time.sleep(0.01)\n"
SIZING_TABLE = [
    row("reference", REF_SIZING, True, "within 15% of the simulator's replay of the 16 process_tile tasks of this cell",
        "scaling the median tile would have given fewer workers than the replay needs",
        "dividing the work by the whole 120 s would have given fewer workers", setup=UNEVEN, id="plan"),
    row("honest", "with hpc.trace() as probe:\n    measured = hpc.get([process.remote(q, out_dir) "
        "for q in reversed(tiles.paths)])\nresults = measured\nanswer = sizing.plan(probe, job)\n"
        "workers = answer.workers + 1\n", True, "within 15% of the simulator's replay", setup=UNEVEN,
        id="other-names-one-spare-worker"),
    row("mistake", SMALL.format("") + 'workers = math.ceil(job.tasks * small.to_dataframe().eval("end - start")'
        '.median() / job.deadline)\n', False, "you scaled one typical tile (the median)", mistake="typical",
        setup=UNEVEN, id="starter-median-tile"),
    row("mistake", SMALL.format("") + 'workers = math.ceil(job.tasks * small.to_dataframe().eval("end - start")'
        '.mean() / job.deadline)\n', False,
        "you divided the work by the whole 120 s deadline, but the first 60 s go to starting the cluster",
        mistake="no-startup", setup=UNEVEN, id="whole-deadline"),
    row("mistake", SMALL.format("") + "workers = math.ceil(job.tasks * (lambda c: (c.end - c.start).groupby("
        "c.task_id).sum().mean())(small.phases_dataframe().query('phase == \"compute\"')) / "
        "(job.deadline - job.startup))\n", False, "you sized from the compute phase alone", mistake="compute-only",
        setup=UNEVEN, id="compute-phase-only"),
    row("mistake", SMALL.format("") + "workers = sizing.plan(small, job).workers * 3\n", False,
        "that many workers meet the deadline, but fewer already do", mistake="too-many", setup=UNEVEN,
        id="three-times-too-many"),
    row("mistake", SMALL.format("") + "job = sizing.Job(tasks=100, deadline=120)\n"
        "workers = sizing.plan(small, job).workers\n", False,
        "`job` is not the exercise's job: 20,000 tiles, 120 s from asking, 60 s of it start-up", mistake="job",
        setup=UNEVEN, id="another-job"),
    row("shortcut", "with hpc.trace() as small:\n    hpc.get([nap.remote() for _ in range(16)])\n"
        "results = saved\nworkers = sizing.plan(small, job).workers\n", False,
        "0 of its 16 values are among what the 16 nap tasks of this cell returned", mistake="not-from-tasks",
        setup=UNEVEN + SAVED + NAP, id="decoy-small-run-results-of-an-earlier-cell"),
    row("shortcut", "with hpc.trace() as small:\n    results = hpc.get([process.remote(p, out_dir) "
        "for p, s in zip(tiles.paths, sizes) if s == 512])\nworkers = sizing.plan(small, job).workers\n", False,
        "3 of the 16 tiles have no result in `results`", mistake="results", setup=UNEVEN,
        id="only-the-small-tiles-measured"),
    row("shortcut", "with hpc.trace() as small:\n    results = hpc.get([process.remote(p, out_dir) "
        "for p in tiles.paths])\n    hpc.get([nap.remote() for _ in range(32)])\n"
        "workers = sizing.plan(small, job).workers\n", False,
        "the cell ran 32 tasks beside the 16 process_tile tasks that measured the tiles", mistake="only-tiles",
        setup=UNEVEN + NAP, id="quick-tasks-beside-the-tiles"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", SIZING_TABLE)
def test_sizing_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("sizing", cell, passed, phrases, absent, mistake, setup, line)


def test_sizing_evidence_follows_the_run():
    """The passing line counts this run's measured tiles: 12 tiles, 12 tasks."""
    twelve = UNEVEN.replace("range(16)", "range(12)").replace("n=16", "n=12")
    _, text = lines(run_exercise("sizing", REF_SIZING, setup=twelve))
    assert "within 15% of the simulator's replay of the 12 process_tile tasks of this cell" in text, text
    assert "16" not in text


# -- seven-terabytes ---------------------------------------------------------------------------------
REF_SEVEN = (SMALL.format(", throttle=store") + "plan = sizing.plan(small, job)\n"
             "workers, bandwidth, cost = plan.workers, plan.bandwidth, plan.cost\n")
SEVEN_TABLE = [
    row("reference", REF_SEVEN, True, "each within 15% of the plan replayed from the 16 measured tiles of this cell",
        "the store must serve more than the 38.9 GB/s of spreading the bytes over all 180 s",
        "the cost is more than the task seconds alone", setup=SEVEN, id="plan"),
    row("honest", "with hpc.trace() as run:\n    results = hpc.get([process.remote(q, out_dir, throttle=store) "
        "for q in tiles.paths])\np = sizing.plan(run, job)\nworkers = p.workers\n"
        "bandwidth = TOTAL / (p.wall_time - job.startup)\n"
        "cost = p.workers * p.wall_time / 3600 * job.price_per_worker_hour\n", True,
        "each within 15% of the plan", setup=SEVEN, id="bandwidth-and-cost-by-hand"),
    row("mistake", SMALL.format(", throttle=store")
        + 'per_file = small.to_dataframe().eval("end - start").mean() * job.scale\n'
          "workers = math.ceil(FILES * per_file / DEADLINE)\nbandwidth = TOTAL / DEADLINE\n"
          "cost = FILES * per_file / 3600 * job.price_per_worker_hour\n", False,
        "workers: you spread the work over the whole 180 s, but 60 s of it is start-up",
        "bandwidth: you spread the 7 TB over the whole three minutes",
        "cost: you priced only the seconds the tasks computed", mistake="workers", setup=SEVEN, id="starter"),
    row("mistake", "job = sizing.Job(tasks=FILES, deadline=DEADLINE, scale=job.scale, task_bytes=file_bytes, "
        "price_per_worker_hour=0.04)\n" + REF_SEVEN, False,
        "`job.startup` is 0: thousands of workers do not start instantly", mistake="job", setup=SEVEN,
        id="no-startup-in-the-job"),
    row("mistake", "job = sizing.Job(tasks=FILES, deadline=DEADLINE, startup=60, task_bytes=file_bytes, "
        "price_per_worker_hour=0.04)\n" + REF_SEVEN, False, "the job's scale is 1, but a file is about",
        mistake="job", setup=SEVEN, id="files-as-big-as-the-tiles"),
    row("shortcut", "with hpc.trace() as small:\n    hpc.get([nap.remote() for _ in range(16)])\nresults = saved\n"
        "plan = sizing.plan(small, job)\nworkers, bandwidth, cost = plan.workers, plan.bandwidth, plan.cost\n",
        False, "0 of its 16 values are among what the 16 nap tasks of this cell returned", mistake="not-from-tasks",
        setup=SEVEN + SAVED + NAP, id="decoy-small-run-results-of-an-earlier-cell"),
    row("shortcut", REF_SEVEN.replace("for p in tiles.paths", "for p in tiles.paths[:8]"), False,
        "8 of the 16 tiles have no result in `results`", mistake="results", setup=SEVEN,
        id="half-the-tiles-measured"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", SEVEN_TABLE)
def test_seven_terabytes_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("seven-terabytes", cell, passed, phrases, absent, mistake, setup, line)


def test_seven_terabytes_evidence_follows_the_run():
    """The passing line counts this run's measured tiles: 12, not the reference's 16."""
    seven = SEVEN.replace("n=16", "n=12")
    _, text = lines(run_exercise("seven-terabytes", REF_SEVEN, setup=seven))
    assert "each within 15% of the plan replayed from the 12 measured tiles of this cell" in text, text
    assert "16 measured tiles" not in text


def test_registered_with_their_lessons():
    course = "04-scaling-a-real-workload/"
    assert catalog.get("phases").lesson == course + "01-where-the-time-goes.ipynb"
    assert catalog.get("io-overlap").lesson == course + "02-reading-large-datasets-without-stalling.ipynb"
    assert catalog.get("sizing").lesson == course + "03-sizing-a-cluster-for-your-workload.ipynb"
    assert catalog.get("seven-terabytes").lesson == course + "04-seven-terabytes-in-three-minutes.ipynb"
