"""Course 4's exercises on real GeoTIFF runs, one table of cells per exercise run through ``%%eugo --exercise``.

Each table holds the lesson's reference (passes), an honest variant that differs from it (passes),
the typical mistakes (each ``not yet`` with its own message and hint tiers) and shortcuts: the
right value while the taught technique was not what produced it (``not yet``, naming what happened).
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("rasterio")

from _exercise_cells import code_in, hint_code, hint_words, run_exercise, shell, tier_code

from eugo_lab import hpc
from eugo_lab.analysis.sizing import Job, plan
from eugo_lab.exercises import catalog

BASE = """
import dataclasses, math, pathlib, tempfile
import numpy as np
import rasterio
from eugo_lab import exercises, hpc
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



# The tiles and the factor are the checker's (p.tiles, p.factor): each cell takes them from the problem.
PHASES_P = 'p = exercises.problem("phases")\n'
QUICKLOOK = PHASES_P + """
@hpc.remote
def quicklook(path, factor):
    with rasterio.open(path) as src:
        rgb = src.read((3, 2, 1)).astype("float32")
        crs, transform = src.crs, src.transform @ src.transform.scale(factor)
    bands, rows, cols = rgb.shape
    small = rgb.reshape(bands, rows // factor, factor, cols // factor, factor).mean(axis=(2, 4))
    img = np.clip(small / np.percentile(small, 98) * 255, 0, 255).astype("uint8")
    target = out_dir / f"{pathlib.Path(path).stem}_rgb.tif"
    with rasterio.open(target, "w", driver="GTiff", width=cols // factor, height=rows // factor, count=3,
                       dtype="uint8", crs=crs, transform=transform) as dst:
        dst.write(img)
    return str(target)
"""
SUBMIT = "results = hpc.get([quicklook.remote(tiles.folder / name, p.factor) for name in p.tiles])\n"
STARTER_PHASES = QUICKLOOK + SUBMIT
REF_PHASES = PHASES_P + """
@hpc.remote
def quicklook(path, factor):
    with hpc.phase("read"):
        with rasterio.open(path) as src:
            rgb = src.read((3, 2, 1)).astype("float32")
            crs, transform = src.crs, src.transform @ src.transform.scale(factor)
    with hpc.phase("compute"):
        bands, rows, cols = rgb.shape
        small = rgb.reshape(bands, rows // factor, factor, cols // factor, factor).mean(axis=(2, 4))
        img = np.clip(small / np.percentile(small, 98) * 255, 0, 255).astype("uint8")
    with hpc.phase("write"):
        target = out_dir / f"{pathlib.Path(path).stem}_rgb.tif"
        with rasterio.open(target, "w", driver="GTiff", width=cols // factor, height=rows // factor, count=3,
                           dtype="uint8", crs=crs, transform=transform) as dst:
            dst.write(img)
    return str(target)
""" + SUBMIT
# Other names, the steps split into helpers, the tiles submitted in reverse order: honest.
OWN_PHASES = PHASES_P + """
def load(path, k):
    with rasterio.open(path) as src:
        return src.read((3, 2, 1)).astype("float32"), src.crs, src.transform @ src.transform.scale(k)

@hpc.remote
def thumb(path, k):
    with hpc.phase("read"):
        rgb, crs, transform = load(path, k)
    with hpc.phase("compute"):
        n = rgb.shape[1] // k
        img = np.clip(rgb.reshape(3, n, k, n, k).mean(axis=(2, 4)) / 12, 0, 255).astype("uint8")
    target = out_dir / (pathlib.Path(path).stem + "_thumb.tif")
    with hpc.phase("write"), rasterio.open(target, "w", driver="GTiff", width=n, height=n, count=3,
                                           dtype="uint8", crs=crs, transform=transform) as dst:
        dst.write(img)
    return target
pending = [thumb.remote(tiles.folder / name, k=p.factor) for name in reversed(p.tiles)]
results = hpc.get(pending)
"""
# Phases opened and closed around nothing at the top of the task, the work after them.
EMPTY_PHASES = QUICKLOOK.replace("def quicklook(path, factor):\n", "def quicklook(path, factor):\n"
                                 "    for step in ('read', 'compute', 'write'):\n"
                                 "        with hpc.phase(step):\n            pass\n") + SUBMIT
ONLY_READ = REF_PHASES.replace('with hpc.phase("compute"):', 'if True:').replace('with hpc.phase("write"):', 'if True:')
# Phases marked by hand in a task of the learner's own (a decoy: it processes nothing).
FAKE_PHASES = """
@hpc.remote
def fake(q):
    with hpc.phase("read"):
        pass
    with hpc.phase("compute"):
        pass
    with hpc.phase("write"):
        pass
hpc.get([fake.remote(p) for p in tiles.paths])
"""
LOCAL_RUN = "results = [quicklook(tiles.folder / name, p.factor) for name in p.tiles]\n"
LOCAL = QUICKLOOK.replace("@hpc.remote\n", "") + LOCAL_RUN
LOCAL_REF = REF_PHASES.replace("@hpc.remote\n", "").replace(SUBMIT, "") + LOCAL_RUN
BATCH = REF_PHASES.replace("@hpc.remote\n", "").replace(SUBMIT, "") + (
    "batch = hpc.remote(lambda paths, k: [quicklook(q, k) for q in paths])\n"
    "results = hpc.get(batch.remote([tiles.folder / name for name in p.tiles], p.factor))\n")


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
    row("reference", REF_PHASES, True, "`results` is what the 16 quicklook tasks of this cell returned",
        "16 tiles ran as 16 tasks, each with its read, compute and write phases",
        "the phases hold the work: at least 50% of every task's time is inside them", absent=("other task",),
        id="each-step-in-its-phase"),
    row("honest", OWN_PHASES, True, "`results` is what the 16 thumb tasks of this cell returned",
        "16 tiles ran as 16 tasks", id="helpers-other-names-other-order"),
    row("mistake", STARTER_PHASES, False, "16 of the 16 quicklook tasks recorded no 'read' and 'compute' and "
        "'write' phase", mistake="no-phases", id="starter-no-phase-marked"),
    row("mistake", ONLY_READ, False, "recorded no 'compute' and 'write' phase", mistake="no-phases",
        id="only-the-read-marked"),
    row("mistake", LOCAL_REF, False, "no task ran in this cell (quicklook ran 16 times here in the notebook): "
        "nothing ran on a worker",
        mistake="local", id="in-the-notebook"),
    row("mistake", BATCH, False, "16 tiles ran in 1 task: a task that loops over several tiles keeps them on one "
        "worker", mistake="loop-in-task", id="all-tiles-in-one-task"),
    row("mistake", REF_PHASES.replace("for name in p.tiles", "for name in p.tiles[:10]"), False,
        "`results` names 10 distinct output files that exist, for the 16 tiles of p.tiles", mistake="results",
        id="missing-tiles"),
    # A tile on ground of its own beside the 16 (17 tiles sit on a grid of 5 columns: its 5th is east of them all,
    # tile_00_04), the others made tiny: its quicklook is of a tile p.tiles does not name.
    row("mistake", REF_PHASES.replace(SUBMIT, "results = hpc.get([quicklook.remote(q, p.factor) for q in tiles.paths] "
                                              "+ [quicklook.remote(more.paths[4], p.factor)])\n"),
        False, "`results` names 1 output file beside the quicklooks of the 16 tiles of p.tiles", mistake="results",
        setup=EVEN + 'more = geotiles.make_tiles(work / "more", n=17, size=[512 if i == 4 else 16 '
                     'for i in range(17)])\n',
        id="one-more-output"),
    row("mistake", REF_PHASES.replace("quicklook.remote(tiles.folder / name, p.factor)",
                                      "quicklook.remote(tiles.folder / name, 2)"), False,
        "the quicklook of tile_00_00.tif holds 3 bands of 256 x 256 pixels: averaging p.factor x p.factor pixels into "
        "one makes 3 bands (red, green, blue) of 128 x 128", mistake="size", id="another-factor"),
    row("shortcut", EMPTY_PHASES, False, "16 of the 16 quicklook tasks opened their read, compute and write "
        "phases, but the phases hold less than 50% of the task's time", mistake="empty-phases",
        id="phases-around-nothing"),
    row("shortcut", FAKE_PHASES + LOCAL, False,
        "`results` was not computed from the tasks' results: 0 of its 16 values are among what the 16 fake tasks",
        mistake="not-from-tasks", id="local-results-beside-fake-phases"),
    row("shortcut", REF_PHASES.replace(SUBMIT, "hpc.get([quicklook.remote(tiles.folder / name, p.factor) "
                                               "for name in p.tiles[:8]])\n")
        + "results = saved\n", False, "8 of its 16 values are among what the 8 quicklook tasks of this cell "
        "returned", mistake="not-from-tasks", setup=EVEN + LOCAL.replace("results =", "saved ="),
        id="results-of-an-earlier-cell-beside-decoy-tasks"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", PHASES_TABLE)
def test_phases_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("phases", cell, passed, phrases, absent, mistake, setup, line)


def test_phases_evidence_follows_the_run():
    """The passing lines state this run's facts: a task beside the tiles is counted apart from them."""
    cell = REF_PHASES + "\nhpc.get(hpc.remote(len).remote('extra'))\n"
    _, text = lines(run_exercise("phases", cell, setup=EVEN))
    assert "`results` is what the 16 quicklook tasks of this cell returned (the cell's 1 other task is not " \
           "counted)" in text, text
    assert "16 tiles ran as 16 tasks" in text


# -- io-overlap --------------------------------------------------------------------------------------
# The regions are the checker's (p.regions): each cell takes its tiles from the problem it hands out.
IO_P = 'p = exercises.problem("io-overlap")\n'
REGIONS = IO_P + """
@hpc.remote
def region(paths):
    return {body}

{submit}
results = [r for part in parts for r in part]
"""
IO_SUBMIT = "parts = hpc.get([region.remote([tiles.folder / name for name in names]) for names in p.regions])"
# The regions' tiles split k ways instead of two.
IO_SPLIT = ("names = [n for r in p.regions for n in r]\n"
            "parts = hpc.get([region.remote([tiles.folder / n for n in names[i::{k}]]) for i in range({k})])")
LOOP_BODY = '[geotiles.process_tile(path, out_dir, product="ndvi", throttle=store) for path in paths]'
STARTER_IO = REGIONS.format(body=LOOP_BODY, submit=IO_SUBMIT)
REF_IO = REGIONS.format(body='geotiles.process_tiles(paths, out_dir, prefetch=4, product="ndvi", throttle=store)',
                        submit=IO_SUBMIT)
PER_TILE = IO_P + (f"results = hpc.get([process.remote(tiles.folder / n, out_dir, {NDVI}) "
                   "for r in p.regions for n in r])")
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
W8 = "-w 8 --no-live"
IO_TABLE = [
    row("reference", REF_IO, True, "all 16 tiles became NDVI Cloud-Optimized GeoTIFFs, returned by 2 tasks",
        "every read went through the modelled store, which charged about",
        "reads of read-ahead threads included), more than two tasks reading one tile at a time can hold",
        id="read-ahead-in-each-region"),
    row("honest", PER_TILE, True, "returned by 16 tasks of this cell", "by the tasks' 'read' phases on the timeline",
        line=W8, id="a-task-per-tile-on-8-workers"),
    row("honest", REGIONS.format(body='geotiles.process_tiles(paths, out_dir, prefetch=2, product="ndvi", '
                                      'throttle=store)', submit=IO_SPLIT.format(k=4)), True, "returned by 4 tasks",
        line=W8, id="four-regions-two-ahead"),
    row("mistake", STARTER_IO, False, "never more than 2 reads waited at once",
        "The 16 tiles ran in 2 tasks, each reading its tiles one after another", mistake="no-overlap",
        id="starter"),
    row("mistake", STARTER_IO, False, "The 16 tiles ran in 2 tasks, each reading its tiles one after another: 2 "
        "reads at a time, however many workers", mistake="no-overlap", line=W8, id="regions-on-8-workers"),
    row("mistake", REGIONS.format(body='geotiles.process_tiles(paths, out_dir, prefetch=0, product="ndvi", '
                                       'throttle=store)', submit=IO_SUBMIT), False,
        "never more than 2 reads waited at once", mistake="no-overlap", id="process-tiles-without-read-ahead"),
    row("mistake", PER_TILE, False, "Waiting needs no core, and this machine has", mistake="no-overlap",
        id="a-task-per-tile-on-2-workers"),
    row("mistake", REF_IO.replace(", throttle=store", ""), False, "did not go through the lesson's modelled "
        "network storage (its `store`)", mistake="no-store", id="without-the-store"),
    row("mistake", REF_IO.replace('product="ndvi", ', ""), False, "the outputs are not NDVI", mistake="results",
        id="not-ndvi"),
    row("mistake", REF_IO.replace("for names in p.regions", "for names in p.regions[:1]"), False,
        "8 of the 16 tiles of p.regions have no result in `results` (the first missing is tile_00_01.tif)",
        mistake="results", id="one-of-the-regions"),
    row("shortcut", STARTER_IO + NESTED_READS, False, "never more than 2 reads waited at once",
        absent=("passed",), mistake="no-overlap", id="nested-read-phases-beside"),
    row("shortcut", STARTER_IO + "results = [r._replace(read_start=r.read_start - 1) for r in results]\n", False,
        "`results` was not computed from the tasks' results: 0 of its 16 values are among what the 2 "
        "region tasks of this cell returned", mistake="not-from-tasks", id="read-times-edited-afterwards"),
    row("shortcut", STARTER_IO + "results = saved\n", False,
        "0 of its 16 values are among what the 2 region tasks", mistake="not-from-tasks", line=W8,
        setup=EVEN + 'saved = geotiles.process_tiles(tiles.paths, out_dir, prefetch=4, product="ndvi", '
                     'throttle=store)\n', id="read-ahead-results-of-an-earlier-cell"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", IO_TABLE)
def test_io_overlap_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("io-overlap", cell, passed, phrases, absent, mistake, setup, line)


def test_io_overlap_hint_tiers_carry_the_code():
    assert "prefetch=4" in tier_code("io-overlap", "no-overlap")
    assert "throttle=store" in tier_code("io-overlap", "no-store")
    assert 'product=\"ndvi\"' in tier_code("io-overlap", "results")
    assert "parts" in tier_code("io-overlap", "not-from-tasks")
    assert 'hpc.phase(\"read\")' in tier_code("phases", "no-phases")


# -- windowed-read -----------------------------------------------------------------------------------
PLOTS = BASE + """
tiles = geotiles.make_tiles(work / "in", n=16)
from rasterio.windows import Window
from eugo_lab import exercises
"""
# The plots are the checker's (p.plots): each cell takes them from the problem it hands out.
PLOT_P = 'p = exercises.problem("windowed-read")\n'
PLOT_SUBMIT = "results = hpc.get([plot_ndvi.remote(tiles.folder / name, col, row) for name, col, row in p.plots])"
PLOT_TASK = PLOT_P + """
@hpc.remote
def plot_ndvi(path, col, row):
    with geotiles.open_tile(path, throttle=store) as src:
        {read}
    {cut}
    return float(((nir - red) / (nir + red)).mean()), src.receipt

""" + PLOT_SUBMIT + "\n"
CUT = "red, nir = red[row:row + 128, col:col + 128], nir[row:row + 128, col:col + 128]"
STARTER_WIN = PLOT_TASK.format(read='red, nir = src.read((3, 4)).astype("float32")', cut=CUT)
REF_WIN = PLOT_TASK.format(read='red, nir = src.read((3, 4), window=Window(col, row, 128, 128)).astype("float32")',
                           cut="")
TWO_CALLS = PLOT_TASK.format(read="w = Window.from_slices((row, row + 128), (col, col + 128))\n"
                                  "        red = src.read(3, window=w).astype('float64')\n"
                                  "        nir = src.read(4, window=w).astype('float64')", cut="")
ALL_BANDS = PLOT_TASK.format(read="_, _, red, nir = src.read(window=Window(col, row, 128, 128)).astype(float)", cut="")
SWAPPED = PLOT_TASK.format(read='red, nir = src.read((3, 4), window=Window(row, col, 128, 128)).astype("float32")',
                           cut="")
INTEGER = PLOT_TASK.format(read="red, nir = src.read((3, 4), window=Window(col, row, 128, 128))", cut="")
BY_HAND = PLOT_P + """
@hpc.remote
def plot_ndvi(path, col, row):
    with rasterio.open(path) as src:
        red, nir = src.read((3, 4), window=Window(col, row, 128, 128)).astype("float32")
    return float(((nir - red) / (nir + red)).mean())

""" + PLOT_SUBMIT + "\n"
WINDOW_TABLE = [
    row("reference", REF_WIN, True, "`results` is what the 16 plot_ndvi tasks of this cell returned",
        "every task read only its plot: at most 13% of its file, by the bytes GDAL took on the worker",
        "all 16 values are the mean NDVI of their tile's 128 x 128 plot", setup=PLOTS, line=W8, id="window"),
    row("honest", TWO_CALLS, True, "every task read only its plot", setup=PLOTS, line=W8,
        id="from-slices-one-band-a-call"),
    row("mistake", STARTER_WIN, False, "16 of the 16 tasks read more than 1.5x the bytes of their plot's window",
        "Its read asked for the whole bands, and the plot was cut out afterwards", mistake="whole-band",
        setup=PLOTS, line=W8, id="starter-whole-bands-sliced"),
    row("mistake", ALL_BANDS, False, "The window was right, but the read also asked for bands 1, 2",
        mistake="all-bands", setup=PLOTS, line=W8, id="window-of-every-band"),
    row("mistake", SWAPPED, False, "of the 16 tasks read a window that does not hold their tile's plot",
        mistake="wrong-window", setup=PLOTS, line=W8, id="column-and-row-swapped"),
    row("mistake", INTEGER, False, "the value is not the plot's mean NDVI", mistake="wrong-value", setup=PLOTS,
        line=W8, id="unsigned-integer-arithmetic"),
    row("mistake", REF_WIN.replace(PLOT_SUBMIT, "results = hpc.get([plot_ndvi.remote(tiles.folder / name, col, row) "
                                    "for name, col, row in p.plots[:10]])"), False,
        "6 of the 16 plots of p.plots have no result in `results` (the first missing is in tile_02_02.tif)",
        mistake="results", setup=PLOTS, line=W8, id="ten-of-the-plots"),
    row("mistake", BY_HAND, False, "the tasks returned no receipt of what they read", mistake="no-receipt",
        setup=PLOTS, line=W8, id="plain-rasterio-open"),
    row("shortcut", STARTER_WIN.replace("results = hpc.get(", "hpc.get(") + "results = saved\n", False,
        "0 of its 16 values are among what the 16 plot_ndvi tasks", mistake="not-from-tasks",
        setup=PLOTS + PLOT_P + "saved = [(0.5, geotiles.ReadReceipt(str(tiles.folder / name), 2_000_000, 200_000, "
                      "20, ((col, row, 128, 128),), ((3, 4),), ((2, 128, 128),))) for name, col, row in p.plots]\n",
        line=W8, id="receipts-typed-by-hand-beside-the-tasks"),
    row("shortcut", PLOT_SUBMIT.replace("results = ", "") + "\nresults = saved\n", False,
        "0 of its 16 values are among what the 16 plot_ndvi tasks", mistake="not-from-tasks",
        setup=PLOTS + REF_WIN.replace("@hpc.remote\n", "").replace(PLOT_SUBMIT, "")
              + "saved = [plot_ndvi(tiles.folder / name, col, row) for name, col, row in p.plots]\n"
              + "plot_ndvi = hpc.remote(plot_ndvi)\n",
        line=W8, id="computed-in-the-notebook-decoy-tasks"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", WINDOW_TABLE)
def test_windowed_read_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("windowed-read", cell, passed, phrases, absent, mistake, setup, line)


# -- sizing ------------------------------------------------------------------------------------------
# The tiles and the job are the checker's (p.tiles, p.job): each cell takes them from the problem it hands out.
SIZING_P = 'p = exercises.problem("sizing")\n'
SIZING_SMALL = SIZING_P + ("with hpc.trace() as small:\n    results = hpc.get([process.remote(tiles.folder / name, "
                           "out_dir) for name in p.tiles])\n")
REF_SIZING = SIZING_SMALL + "workers = sizing.plan(small, p.job).workers\n"
SAVED = "saved = [geotiles.process_tile(p, out_dir) for p in tiles.paths]\n"
NAP = "@hpc.remote\ndef nap():\n    import time\n    time.sleep(0.01)\n"
SIZING_TABLE = [
    row("reference", REF_SIZING, True, "within 15% of the simulator's replay of the 16 process_tile tasks of this cell",
        "scaling the median tile would have given fewer workers than the replay needs",
        "dividing the work by the whole 120 s would have given fewer workers", setup=UNEVEN, id="plan"),
    row("honest", SIZING_P + "with hpc.trace() as probe:\n    measured = hpc.get([process.remote(tiles.folder / q, "
        "out_dir) for q in reversed(p.tiles)])\nresults = measured\nanswer = sizing.plan(probe, p.job)\n"
        "workers = answer.workers + 1\n", True, "within 15% of the simulator's replay", setup=UNEVEN,
        id="other-names-one-spare-worker"),
    row("mistake", SIZING_SMALL + 'workers = math.ceil(p.job.tasks * small.to_dataframe().eval("end - start")'
        '.median() / p.job.deadline)\n', False, "you scaled one typical tile (the median)", mistake="typical",
        setup=UNEVEN, id="starter-median-tile"),
    row("mistake", SIZING_SMALL + 'workers = math.ceil(p.job.tasks * small.to_dataframe().eval("end - start")'
        '.mean() / p.job.deadline)\n', False,
        "you divided the work by the whole 120 s deadline, but the first 60 s go to starting the cluster",
        mistake="no-startup", setup=UNEVEN, id="whole-deadline"),
    row("mistake", SIZING_SMALL + "workers = math.ceil(p.job.tasks * (lambda c: (c.end - c.start).groupby("
        "c.task_id).sum().mean())(small.phases_dataframe().query('phase == \"compute\"')) / "
        "(p.job.deadline - p.job.startup))\n", False, "you sized from the compute phase alone",
        mistake="compute-only", setup=UNEVEN, id="compute-phase-only"),
    row("mistake", SIZING_SMALL + "workers = sizing.plan(small, p.job).workers * 3\n", False,
        "that many workers meet the deadline, but fewer already do", mistake="too-many", setup=UNEVEN,
        id="three-times-too-many"),
    # A job of the learner's own: the checker sizes its own copy of p.job, whatever `job` says.
    row("mistake", SIZING_SMALL + "job = sizing.Job(tasks=100, deadline=120)\n"
        "workers = sizing.plan(small, job).workers\n", False,
        "with that many workers the simulator's replay of your run misses the deadline", mistake="misses",
        setup=UNEVEN, id="another-job"),
    row("shortcut", SIZING_P + "with hpc.trace() as small:\n    hpc.get([nap.remote() for _ in range(16)])\n"
        "results = saved\nworkers = sizing.plan(small, p.job).workers\n", False,
        "0 of its 16 values are among what the 16 nap tasks of this cell returned", mistake="not-from-tasks",
        setup=UNEVEN + SAVED + NAP, id="decoy-small-run-results-of-an-earlier-cell"),
    row("shortcut", SIZING_P + "with hpc.trace() as small:\n    results = hpc.get([process.remote(q, out_dir) "
        "for q, s in zip(tiles.paths, sizes) if s == 512])\nworkers = sizing.plan(small, p.job).workers\n", False,
        "3 of the 16 tiles of p.tiles have no result in `results`", mistake="results", setup=UNEVEN,
        id="only-the-small-tiles-measured"),
    row("shortcut", SIZING_P + "with hpc.trace() as small:\n    results = hpc.get([process.remote(tiles.folder / n, "
        "out_dir) for n in p.tiles])\n    hpc.get([nap.remote() for _ in range(32)])\n"
        "workers = sizing.plan(small, p.job).workers\n", False,
        "the cell ran 32 tasks beside the 16 process_tile tasks that measured the tiles", mistake="only-tiles",
        setup=UNEVEN + NAP, id="quick-tasks-beside-the-tiles"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", SIZING_TABLE)
def test_sizing_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("sizing", cell, passed, phrases, absent, mistake, setup, line)


# -- seven-terabytes ---------------------------------------------------------------------------------
# The question, the warm start-up and the tiles are the checker's (p): each cell takes them from the problem.
SEVEN_P = 'p = exercises.problem("seven-terabytes")\n'
SEVEN_SMALL = SEVEN_P + """with hpc.trace() as small:
    results = hpc.get([process.remote(tiles.folder / name, out_dir, throttle=store) for name in p.tiles])
reads_per_file = sum(r.reads for r in results) / len(results)
"""
WARM = ("file_bytes = p.total_bytes / p.files\ntile_bytes = sum(r.file_bytes for r in results) / len(results)\n"
        "warm = sizing.Job(tasks=p.files, deadline=p.deadline, startup=p.startup, scale=file_bytes / tile_bytes,\n"
        "                  task_bytes=file_bytes, price_per_worker_hour=0.0408)\n")
REF_SEVEN = (SEVEN_SMALL + WARM + "warm_plan = sizing.plan(small, warm)\nworkers = warm_plan.workers\n"
             "prefixes = math.ceil(p.files * reads_per_file / (warm_plan.wall_time - warm.startup) / 5_500)\n")
STARTER_SEVEN = (SEVEN_SMALL + WARM + "workers = sizing.plan(small, job).workers\n"
                 "prefixes = math.ceil(p.files * reads_per_file / p.deadline / 5_500)\n")
SEVEN_TABLE = [
    row("reference", REF_SEVEN, True,
        "workers within 15% of the plan replayed with a 20 s start-up from the 16 process_tile tasks of this cell",
        "read calls a file x 192,000 files in the", "prefixes keep each under 5,500", setup=SEVEN, id="plan-again"),
    row("honest", SEVEN_SMALL + "size = p.total_bytes / p.files\n"
        "q = sizing.plan(small, sizing.Job(tasks=p.files, deadline=p.deadline, startup=p.startup, "
        "scale=size * len(results) / sum(r.file_bytes for r in results), task_bytes=size))\nworkers = q.workers + 1\n"
        "prefixes = math.ceil(p.files * reads_per_file / (q.wall_time - p.startup) / 5_500) + 1\n", True,
        "workers within 15% of the plan", setup=SEVEN, id="a-new-job-one-spare-each"),
    row("mistake", STARTER_SEVEN, False, "is a count for the lesson's 60 s start-up", "with 20 s the tasks have 160 s",
        "prefixes: you spread the read requests over the whole 180 s",
        mistake="old-startup", setup=SEVEN, id="starter-the-60-s-plan"),
    row("mistake", REF_SEVEN.replace("(warm_plan.wall_time - warm.startup)", "p.deadline"), False,
        "prefixes: you spread the read requests over the whole 180 s", absent=("workers:",),
        mistake="prefixes-deadline", setup=SEVEN, id="requests-over-the-whole-deadline"),
    row("mistake", REF_SEVEN.replace("/ 5_500)", "/ 5_500 / 4)"), False, "prefixes: with", "than the 5,500 a "
        "prefix is guaranteed", absent=("workers:",), mistake="prefixes", setup=SEVEN, id="a-quarter-of-the-prefixes"),
    # The warm job without its scale: files as big as the tiles, so far too few workers for the checker's plan.
    row("mistake", REF_SEVEN.replace("scale=file_bytes / tile_bytes,", ""), False,
        "workers: the plan that replays this cell's run with the 20 s start-up needs more than", mistake="workers",
        setup=SEVEN, id="files-as-big-as-the-tiles"),
    row("shortcut", SEVEN_P + "with hpc.trace() as small:\n    hpc.get([nap.remote() for _ in range(16)])\n"
        "results = saved\nreads_per_file = 30\n" + WARM + "warm_plan = sizing.plan(small, warm)\n"
        "workers = warm_plan.workers\nprefixes = 10\n", False,
        "0 of its 16 values are among what the 16 nap tasks of this cell returned",
        mistake="not-from-tasks", setup=SEVEN + SAVED + NAP, id="decoy-small-run-results-of-an-earlier-cell"),
    row("shortcut", REF_SEVEN.replace("for name in p.tiles", "for name in p.tiles[:8]"), False,
        "8 of the 16 tiles of p.tiles have no result in `results`", mistake="results", setup=SEVEN,
        id="half-the-tiles-measured"),
]


@pytest.mark.parametrize("cell, passed, phrases, absent, mistake, setup, line", SEVEN_TABLE)
def test_seven_terabytes_table(cell, passed, phrases, absent, mistake, setup, line):
    check_row("seven-terabytes", cell, passed, phrases, absent, mistake, setup, line)


def _says(text: str, number: int) -> bool:
    """``number`` stands in ``text`` as a number of its own (``1234`` or ``1,234``), not inside another."""
    import re

    return any(re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d]|[.,]\d)", text)
               for form in {str(number), f"{number:,}"})


@pytest.mark.parametrize("cell", [SIZING_TABLE[i].values[0] for i in (2, 3, 5)],
                         ids=["median-tile", "whole-deadline", "too-many"])
def test_a_sizing_not_yet_never_states_the_simulators_count(cell):
    """A ``not yet`` of sizing says what the learner's arithmetic did, never the count the simulator found."""
    from eugo_lab.exercises.catalog.geo_sizing import SIZING_JOB

    v = run_exercise("sizing", cell, setup=UNEVEN)
    assert not v.passed, v.to_text()
    answer = plan(hpc.last_trace(), Job(**SIZING_JOB)).workers
    assert answer is not None and answer >= 10  # a count of its own, not a digit any sentence may hold
    for text in (v.to_text(), v.to_text(precise=True)):
        assert not _says(text, answer), f"the answer {answer} in\n{text}"


@pytest.mark.parametrize("cell", [STARTER_SEVEN,
                                  REF_SEVEN.replace("(warm_plan.wall_time - warm.startup)", "p.deadline"),
                                  REF_SEVEN.replace("/ 5_500)", "/ 5_500 / 4)")],
                         ids=["starter", "requests-over-the-deadline", "a-quarter-of-the-prefixes"])
def test_a_seven_terabytes_not_yet_never_states_the_plan(cell):
    """Neither the warm plan's workers, nor its end, nor the prefixes it needs appear in a ``not yet``."""
    import dataclasses
    import math

    from eugo_lab.exercises.catalog.geo_sizing import GETS_PER_PREFIX, WARM_STARTUP

    v = run_exercise("seven-terabytes", cell, setup=SEVEN)
    assert not v.passed, v.to_text()
    ns = shell().user_ns
    job = ns["job"]
    warm = plan(hpc.last_trace(), dataclasses.replace(job, startup=WARM_STARTUP))
    reads = sum(r.reads for r in ns["results"]) / len(ns["results"])
    running = warm.wall_time - WARM_STARTUP
    need = max(1, math.ceil(job.tasks * reads / running / GETS_PER_PREFIX))
    given = round(job.deadline - WARM_STARTUP)  # the question's own arithmetic, stated to every learner
    for text in (v.to_text(), v.to_text(precise=True)):
        # The learner's own typed values are echoed back ("yours: ..."): they are not the checker's answer
        # even where they coincide with it.
        text = re.sub(r"yours: [^;]*", "yours: ...", text)
        assert not _says(text, warm.workers), f"the plan's {warm.workers} workers in\n{text}"
        assert f"{need} prefixes" not in text, text
        assert round(running) == given or f"{running:.0f} s" not in text, text
        assert f"{job.tasks * reads / running:,.0f}" not in text, text  # the requests a second: the answer x 5,500


def test_registered_with_their_lessons():
    course = "04-scaling-a-real-workload/"
    assert catalog.get("phases").lesson == course + "01-where-the-time-goes.ipynb"
    assert catalog.get("io-overlap").lesson == course + "02-overlapping-the-waits.ipynb"
    assert catalog.get("windowed-read").lesson == course + "03-reading-less.ipynb"
    assert catalog.get("sizing").lesson == course + "04-sizing-a-cluster-for-your-workload.ipynb"
    assert catalog.get("seven-terabytes").lesson == course + "05-seven-terabytes-in-three-minutes.ipynb"
