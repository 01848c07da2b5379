"""Course 4's exercises on real GeoTIFF runs: each reference passes, each typical mistake gets its own ``not yet``."""

from __future__ import annotations

import pytest

pytest.importorskip("rasterio")

from _exercise_cells import run_exercise, tier_code

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


# -- phases ------------------------------------------------------------------------------------------
def test_phases_reference_passes():
    first, text = lines(run_exercise("phases", "results = hpc.get([process.remote(p, out_dir) for p in tiles.paths])",
                                     setup=EVEN))
    assert first == "exercise phases: passed", text
    assert "16 tiles ran as 16 tasks, each with its read, compute and write phases" in text
    assert "all 16 outputs are Cloud-Optimized GeoTIFFs" in text


def test_phases_in_the_notebook_is_not_yet():
    first, text = lines(run_exercise("phases", "results = [geotiles.process_tile(p, out_dir) for p in tiles.paths]",
                                     setup=EVEN))
    assert first == "exercise phases: not yet"
    assert "processed here in the notebook, one after another: nothing ran on a worker" in text


def test_phases_all_tiles_in_one_task_is_not_yet():
    cell = "results = hpc.get(hpc.remote(geotiles.process_tiles).remote(tiles.paths, out_dir))"
    first, text = lines(run_exercise("phases", cell, setup=EVEN))
    assert first == "exercise phases: not yet"
    assert "16 tiles ran in 1 task: a task that loops over several tiles keeps them on one worker" in text


def test_phases_missing_tiles_and_unmarked_steps():
    cell = "results = hpc.get([process.remote(p, out_dir) for p in tiles.paths[:10]])"
    _, text = lines(run_exercise("phases", cell, setup=EVEN))
    assert "6 of the 16 tiles have no result in `results`" in text
    unmarked = """
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
    first, text = lines(run_exercise("phases", unmarked, setup=EVEN))
    assert first == "exercise phases: not yet"
    assert "some tasks recorded no 'read' phase" in text and 'hpc.phase(\"read\")' in tier_code("phases", "no-phases")


# -- io-overlap --------------------------------------------------------------------------------------
REF_IO = f'results = hpc.get([process.remote(p, out_dir, {NDVI}, bands=("red", "nir")) for p in tiles.paths])'


def test_io_overlap_more_workers_than_cores_passes():
    first, text = lines(run_exercise("io-overlap", REF_IO, setup=EVEN, line="-w 8 --no-live"))
    assert first == "exercise io-overlap: passed", text
    assert "3 or more reads waited at once, more than the starter's 2 workers could hold" in text
    assert "each read fetched only red and nir" in text


def batches(prefetch: int) -> str:
    return (f"batch = hpc.remote(geotiles.process_tiles)\n"
            f"parts = hpc.get([batch.remote(tiles.paths[i::2], out_dir, prefetch={prefetch}, {NDVI}, "
            f"bands=('red', 'nir')) for i in range(2)])\n"
            "results = [r for part in parts for r in part]\n")


def test_io_overlap_prefetch_passes():
    first, text = lines(run_exercise("io-overlap", batches(4), setup=EVEN))
    assert first == "exercise io-overlap: passed", text
    assert "reads prefetched in threads ran while the tasks computed" in text


def test_io_overlap_batches_without_read_ahead_still_wait():
    first, text = lines(run_exercise("io-overlap", batches(0), setup=EVEN))
    assert first == "exercise io-overlap: not yet", text
    assert "never more than 2 reads waited at once" in text


def test_io_overlap_starter_names_both_problems():
    cell = f"results = hpc.get([process.remote(p, out_dir, {NDVI}) for p in tiles.paths])"
    first, text = lines(run_exercise("io-overlap", cell, setup=EVEN))
    assert first == "exercise io-overlap: not yet"
    assert "waiting in the 'read' phase, and never more than 2 reads waited at once: on 2 workers" in text
    assert "Each tile read all four bands (the whole file), but NDVI uses only red and nir" in text


def test_io_overlap_fewer_bytes_alone_does_not_overlap_and_faster_compute_cannot_help():
    # Reading only two bands on the same 2 workers: fewer bytes, but the reads still wait one per worker.
    first, text = lines(run_exercise("io-overlap", REF_IO, setup=EVEN))
    assert first == "exercise io-overlap: not yet"
    assert "Compute is a small part of each task, so a faster compute step" in text
    assert "all four bands" not in text


def test_io_overlap_more_workers_but_every_band_is_not_yet_for_the_bytes():
    cell = f"results = hpc.get([process.remote(p, out_dir, {NDVI}) for p in tiles.paths])"
    first, text = lines(run_exercise("io-overlap", cell, setup=EVEN, line="-w 8 --no-live"))
    assert first == "exercise io-overlap: not yet"
    assert "NDVI uses only red and nir" in text and "waited at once" not in text
    assert 'bands=(\"red\", \"nir\")' in tier_code("io-overlap", "all-bands")


def test_io_overlap_without_the_modelled_store_says_to_keep_it():
    cell = 'results = hpc.get([process.remote(p, out_dir, product="ndvi", bands=("red", "nir")) for p in tiles.paths])'
    first, text = lines(run_exercise("io-overlap", cell, setup=EVEN))
    assert first == "exercise io-overlap: not yet"
    assert "modelled network storage (its `store`)" in text and "throttle=store" in tier_code("io-overlap", "no-store")


def test_io_overlap_needs_ndvi_outputs():
    cell = 'results = hpc.get([process.remote(p, out_dir, bands=("red", "nir")) for p in tiles.paths])'
    _, text = lines(run_exercise("io-overlap", cell, setup=EVEN, line="-w 8 --no-live"))
    assert "the outputs are not NDVI" in text and 'product=\"ndvi\"' in tier_code("io-overlap", "results")


# -- sizing ------------------------------------------------------------------------------------------
def test_sizing_reference_passes():
    first, text = lines(run_exercise("sizing", SMALL.format("") + "workers = sizing.plan(small, job).workers\n",
                                     setup=UNEVEN))
    assert first == "exercise sizing: passed", text
    assert "within 15% of the simulator's answer" in text


@pytest.mark.parametrize("answer, message", [
    ('math.ceil(job.tasks * small.to_dataframe().eval("end - start").median() / job.deadline)',
     "you scaled one typical tile (the median)"),
    ('math.ceil(job.tasks * small.to_dataframe().eval("end - start").mean() / job.deadline)',
     "you divided the work by the whole 120 s deadline, but the first 60 s go to starting the cluster"),
    ("math.ceil(job.tasks * (lambda c: (c.end - c.start).groupby(c.task_id).sum().mean())"
     "(small.phases_dataframe().query('phase == \"compute\"')) / (job.deadline - job.startup))",
     "you sized from the compute phase alone"),
    ("sizing.plan(small, job).workers * 3", "that many workers meet the deadline, but fewer already do"),
])
def test_sizing_shortcuts_are_named(answer, message):
    first, text = lines(run_exercise("sizing", SMALL.format("") + f"workers = {answer}\n", setup=UNEVEN))
    assert first == "exercise sizing: not yet"
    assert message in text, text


def test_sizing_checks_the_job():
    cell = SMALL.format("") + "job = sizing.Job(tasks=100, deadline=120)\nworkers = sizing.plan(small, job).workers\n"
    _, text = lines(run_exercise("sizing", cell, setup=UNEVEN))
    assert "`job` is not the exercise's job: 20,000 tiles, 120 s from asking, 60 s of it start-up" in text


# -- seven-terabytes ---------------------------------------------------------------------------------
def test_seven_terabytes_reference_passes():
    cell = (SMALL.format(", throttle=store") + "plan = sizing.plan(small, job)\n"
            "workers, bandwidth, cost = plan.workers, plan.bandwidth, plan.cost\n")
    first, text = lines(run_exercise("seven-terabytes", cell, setup=SEVEN))
    assert first == "exercise seven-terabytes: passed", text


def test_seven_terabytes_naive_arithmetic_gets_one_message_per_answer():
    cell = (SMALL.format(", throttle=store")
            + 'per_file = small.to_dataframe().eval("end - start").mean() * job.scale\n'
              "workers = math.ceil(FILES * per_file / DEADLINE)\n"
              "bandwidth = TOTAL / DEADLINE\n"
              "cost = FILES * per_file / 3600 * job.price_per_worker_hour\n")
    first, text = lines(run_exercise("seven-terabytes", cell, setup=SEVEN))
    assert first == "exercise seven-terabytes: not yet"
    assert "workers: you spread the work over the whole 180 s, but 60 s of it is start-up" in text
    assert "bandwidth: you spread the 7 TB over the whole three minutes" in text
    assert "cost: you priced only the seconds the tasks computed" in text


def test_seven_terabytes_a_job_without_startup_is_not_yet():
    cell = ("job = sizing.Job(tasks=FILES, deadline=DEADLINE, scale=job.scale, task_bytes=file_bytes, "
            "price_per_worker_hour=0.04)\n" + SMALL.format(", throttle=store")
            + "plan = sizing.plan(small, job)\nworkers, bandwidth, cost = plan.workers, plan.bandwidth, plan.cost\n")
    first, text = lines(run_exercise("seven-terabytes", cell, setup=SEVEN))
    assert first == "exercise seven-terabytes: not yet"
    assert "`job.startup` is 0: thousands of workers do not start instantly" in text


def test_registered_with_their_lessons():
    course = "04-scaling-a-real-workload/"
    assert catalog.get("phases").lesson == course + "01-where-the-time-goes.ipynb"
    assert catalog.get("io-overlap").lesson == course + "02-reading-large-datasets-without-stalling.ipynb"
    assert catalog.get("sizing").lesson == course + "03-sizing-a-cluster-for-your-workload.ipynb"
    assert catalog.get("seven-terabytes").lesson == course + "04-seven-terabytes-in-three-minutes.ipynb"
