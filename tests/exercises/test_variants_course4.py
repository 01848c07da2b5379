"""Course 4's exercises own their problem, and a passing cell is run again on a hidden case (``exercises.problems``).

Through the real ``%%eugo --exercise`` magic on real GeoTIFFs, per exercise: the lesson's reference
passes on both cases; a cell that types in the lesson's inputs passes the lesson's case but not the
hidden one, with the "did not carry over" message and nothing of the hidden case in it; honest
solutions unlike the reference pass both; the mistakes the exercise names are still named. The
hidden case's seed is fixed here (``problems.draw_seed``) so the test knows what must not be shown.
Every assertion is on counts, structure and words, never on a duration.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytest.importorskip("rasterio")

from _exercise_cells import run_exercise
from _variants import carried_over, hidden, lesson, never_shown, not_yet, passed_twice

from eugo_lab import hpc

pytestmark = pytest.mark.usefixtures("hidden_seed")  # every hidden case here is made from _variants.SEED

BASE = """
import pathlib, tempfile
import numpy as np
import rasterio
from eugo_lab import exercises, hpc
from eugo_lab.workloads import geotiles
from eugo_lab.workloads.storage import Throttle
work = pathlib.Path(tempfile.mkdtemp())
out_dir = work / "out"
out_dir.mkdir()
store = Throttle(latency=0.03, bandwidth=40e6)
process = hpc.remote(geotiles.process_tile)
results = None
"""
W8 = "-w 8 --no-live"
# As the lessons' first cells do: two workers, each of which has loaded GDAL on a tile already (a worker's
# first task imports it, outside any phase or measurement the exercise cell makes).
WARM_UP = "hpc.init(workers=2)\nwarm_up = hpc.get([process.remote(q, out_dir) for q in tiles.paths[:4]])\n"


@pytest.fixture(scope="module", autouse=True)
def _workers():
    yield
    hpc.shutdown()


# -- windowed-read -----------------------------------------------------------------------------------------------
TILES = BASE + 'tiles = geotiles.make_tiles(work / "in", n=16)\nfrom rasterio.windows import Window\n'
PLOT_HEAD = 'p = exercises.problem("windowed-read")\n'
PLOT_TASK = """
@hpc.remote
def plot_ndvi(path, col, row):
    with geotiles.open_tile(path, throttle=store) as src:
        red, nir = src.read((3, 4), window=Window(col, row, 128, 128)).astype("float32")
    return float(((nir - red) / (nir + red)).mean()), src.receipt

"""
PLOT_SUBMIT = "results = hpc.get([plot_ndvi.remote(tiles.folder / name, col, row) for name, col, row in p.plots])\n"
# The lesson's plots as its first cell used to type them: one in every tile, at offsets of a formula.
LESSON_PLOTS = ("plots = {q.name: (256 * (i % 2) + 16 * (i % 8), 256 * (i // 2 % 2) + 8 * i + 4) "
                "for i, q in enumerate(tiles.paths)}\n")


def _windowed(cell: str, setup: str = TILES):
    return run_exercise("windowed-read", cell, setup=setup, line=W8)


def _plot_hidden_values() -> list[str]:
    """What of the hidden case a verdict must never show: its plots' offsets and their mean NDVI to 4 decimals."""
    import rasterio
    from rasterio.windows import Window

    from eugo_lab.exercises.catalog.geo_windows import PLOT
    from eugo_lab.workloads import geotiles

    tiles = geotiles.make_tiles(Path(tempfile.mkdtemp()), n=16)  # the same pixels as the setup's tiles
    out = []
    for name, col, row in hidden("windowed-read").plots:
        out += [f"({col}, {row}", f"column {col}, row {row}", f"{name}, {col}"]
        with rasterio.open(tiles.folder / name) as src:
            red, nir = src.read((3, 4), window=Window(col, row, PLOT, PLOT)).astype("float64")
        out.append(f"{float(((nir - red) / (nir + red)).mean()):.4f}")
    return out


def test_windowed_read_the_hidden_case_has_other_plots():
    from eugo_lab.exercises.catalog.geo_windows import BLOCK, PLOT, tile_name

    p, h = lesson("windowed-read"), hidden("windowed-read")
    # The plots the lesson's first cell used to make: one in each of the 16 tiles, at the offsets of its formula.
    assert p.plots == tuple((tile_name(i), 256 * (i % 2) + 16 * (i % 8), 256 * (i // 2 % 2) + 8 * i + 4)
                            for i in range(16))
    assert len(h.plots) == 8 and {n for n, _, _ in h.plots} < {n for n, _, _ in p.plots}  # half the tasks
    assert not set(h.plots) & set(p.plots)
    for _, col, row in (*p.plots, *h.plots):  # each inside one block: a whole-band read takes 4x the window
        assert col // BLOCK == (col + PLOT - 1) // BLOCK and row // BLOCK == (row + PLOT - 1) // BLOCK


def test_windowed_read_reference_passes_on_both_cases():
    text = passed_twice(_windowed(PLOT_HEAD + PLOT_TASK + PLOT_SUBMIT))
    assert "all 16 values are the mean NDVI of their tile's 128 x 128 plot" in text, text
    never_shown(text, *_plot_hidden_values())


def test_windowed_read_typed_plots_do_not_carry_over():
    # The lesson's plots typed in, one for every tile of `tiles`: 16 results where the hidden case names 8 plots.
    cell = (PLOT_HEAD + LESSON_PLOTS + PLOT_TASK
            + "results = hpc.get([plot_ndvi.remote(q, *plots[q.name]) for q in tiles.paths])\n")
    never_shown(carried_over(_windowed(cell)), *_plot_hidden_values())


def test_windowed_read_typed_offsets_for_p_s_tiles_do_not_carry_over():
    # p's tiles, but each plot's offsets looked up in the lesson's typed formula: the hidden plots are elsewhere.
    cell = (PLOT_HEAD + LESSON_PLOTS + PLOT_TASK
            + "results = hpc.get([plot_ndvi.remote(tiles.folder / name, *plots[name]) for name, _, _ in p.plots])\n")
    never_shown(carried_over(_windowed(cell)), *_plot_hidden_values())


# Honest cells unlike the reference: each passes on both cases.
WINDOWED_HONEST = [
    ("from-slices-one-band-a-call-float64",
     "@hpc.remote\ndef plot_ndvi(path, col, row):\n"
     "    w = Window.from_slices((row, row + 128), (col, col + 128))\n"
     "    with geotiles.open_tile(path, throttle=store) as src:\n"
     "        red = src.read(3, window=w).astype('float64')\n        nir = src.read(4, window=w).astype('float64')\n"
     "    return float(np.mean((nir - red) / (nir + red))), src.receipt\n\n" + PLOT_SUBMIT),
    ("a-plot-as-one-argument-string-paths-a-loop",
     "@hpc.remote\ndef mean_ndvi(tile, plot):\n    col, row = plot\n"
     "    with geotiles.open_tile(tile, throttle=store) as src:\n"
     "        bands = src.read([3, 4], window=Window(col_off=col, row_off=row, width=128, height=128))\n"
     "    red, nir = bands.astype(np.float32)\n"
     "    return float(((nir - red) / (nir + red)).mean()), src.receipt\n\n"
     "futures = []\nfor name, col, row in reversed(p.plots):\n"
     "    futures.append(mean_ndvi.remote(f'{tiles.folder}/{name}', (col, row)))\nresults = hpc.get(futures)\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in WINDOWED_HONEST], ids=[i for i, _ in WINDOWED_HONEST])
def test_windowed_read_honest_cells_pass_on_both_cases(cell):
    passed_twice(_windowed(PLOT_HEAD + cell))


def test_windowed_read_plots_bound_in_an_earlier_cell_pass_on_both_cases():
    # `plots = p.plots` in an earlier cell: the very tuple handed out, so the hidden run gets its own.
    setup = TILES + PLOT_HEAD + "plots = p.plots\n"
    passed_twice(_windowed(PLOT_TASK + PLOT_SUBMIT.replace("p.plots", "plots"), setup=setup))


@pytest.mark.parametrize(("read", "mistake", "says"), [
    ('red, nir = src.read((3, 4)).astype("float32")\n'
     "    red, nir = red[row:row + 128, col:col + 128], nir[row:row + 128, col:col + 128]",
     "whole-band", "16 of the 16 tasks read more than 1.5x the bytes of their plot's window"),
    ('red, nir = src.read((3, 4), window=Window(row, col, 128, 128)).astype("float32")', "wrong-window",
     "of the 16 tasks read a window that does not hold their tile's plot"),
    ('red, nir = src.read((3, 4), window=Window(col, row, 1, 1)).astype("float32")', "wrong-window",
     "the read was 1 x 1 pixels at column"),  # begun at the plot's corner: its size is what is wrong
], ids=["whole-bands-sliced", "column-and-row-swapped", "one-pixel-at-the-corner"])
def test_windowed_read_named_mistakes_are_still_named(read, mistake, says):
    cell = PLOT_HEAD + PLOT_TASK.replace('red, nir = src.read((3, 4), window=Window(col, row, 128, 128))'
                                         '.astype("float32")', read) + PLOT_SUBMIT
    not_yet(_windowed(cell), mistake, says)


def test_windowed_read_plots_of_other_tiles_are_named():
    # Every tile of `tiles` read at p's first plot's offsets: results for tiles p.plots does not name.
    cell = (PLOT_HEAD + PLOT_TASK
            + "results = hpc.get([plot_ndvi.remote(q, *p.plots[0][1:]) for q in tiles.paths[:15]]"
              " + [plot_ndvi.remote(tiles.folder / n, c, r) for n, c, r in p.plots])\n")
    not_yet(_windowed(cell), "results", "`results` holds 31 results for the 16 plots of p.plots; one task for each")


# -- io-overlap --------------------------------------------------------------------------------------------------
IO_HEAD = 'p = exercises.problem("io-overlap")\n'
REGION_TASK = """
@hpc.remote
def region(paths):
    return {body}

"""
READ_AHEAD = 'geotiles.process_tiles(paths, out_dir, prefetch=4, product="ndvi", throttle=store)'
ONE_AT_A_TIME = '[geotiles.process_tile(path, out_dir, product="ndvi", throttle=store) for path in paths]'
IO_SUBMIT = ("parts = hpc.get([region.remote([tiles.folder / name for name in names]) for names in p.regions])\n"
             "results = [r for part in parts for r in part]\n")
IO_TILES = BASE + 'tiles = geotiles.make_tiles(work / "in", n=16, seed=2)\n'


def _io(cell: str, line: str = "-w 2 --no-live", setup: str = IO_TILES):
    return run_exercise("io-overlap", cell, setup=setup, line=line)


def _io_hidden_values() -> list[str]:
    """What of the hidden case a verdict must never show: how many tiles it holds, and its regions."""
    h = hidden("io-overlap")
    n = sum(len(r) for r in h.regions)
    return [f"{n} tiles", f"{n} results", f"all {n}", *(str(r) for r in h.regions)]


def test_io_overlap_the_hidden_case_has_other_regions():
    from eugo_lab.exercises.catalog.geo import tile_name

    p, h = lesson("io-overlap"), hidden("io-overlap")
    # The regions the starter used to slice: tiles.paths[0::2] and tiles.paths[1::2].
    assert p.regions == tuple(tuple(tile_name(i) for i in range(16)[k::2]) for k in range(2))
    names = [n for r in h.regions for n in r]
    assert len(h.regions) == 2 and all(5 <= len(r) <= 6 for r in h.regions)  # two tasks; fewer tiles than 16
    assert len(set(names)) == len(names) and set(names) < set(p.regions[0] + p.regions[1])
    assert h.regions != p.regions


def test_io_overlap_reference_passes_on_both_cases():
    text = passed_twice(_io(IO_HEAD + REGION_TASK.format(body=READ_AHEAD) + IO_SUBMIT))
    assert "all 16 tiles became NDVI Cloud-Optimized GeoTIFFs, returned by 2 tasks of this cell" in text, text
    never_shown(text, *_io_hidden_values())


def test_io_overlap_typed_regions_do_not_carry_over():
    # The starter's old slices of `tiles.paths`: every tile of the notebook, where the hidden case names fewer.
    cell = (IO_HEAD + REGION_TASK.format(body=READ_AHEAD)
            + "parts = hpc.get([region.remote(tiles.paths[i::2]) for i in range(2)])\n"
              "results = [r for part in parts for r in part]\n")
    never_shown(carried_over(_io(cell)), *_io_hidden_values())


# Honest cells unlike the reference: each passes on both cases.
IO_HONEST = [
    ("a-task-per-tile-on-8-workers",
     "results = hpc.get([process.remote(tiles.folder / n, out_dir, product='ndvi', throttle=store)\n"
     "                   for names in p.regions for n in names])\n", "-w 8 --no-live"),
    ("threads-of-its-own-in-each-region",
     "from concurrent.futures import ThreadPoolExecutor\n\n@hpc.remote\ndef region(paths):\n"
     "    with ThreadPoolExecutor(max_workers=3) as pool:\n"
     "        return list(pool.map(lambda q: geotiles.process_tile(q, out_dir, product='ndvi', throttle=store), "
     "paths))\n\n"
     "futures = [region.remote([str(tiles.folder / n) for n in names]) for names in p.regions]\n"
     "results = [r for part in hpc.get(futures) for r in part]\n", "-w 2 --no-live"),
]


@pytest.mark.parametrize(("cell", "line"), [(c, w) for _, c, w in IO_HONEST], ids=[i for i, _, _ in IO_HONEST])
def test_io_overlap_honest_cells_pass_on_both_cases(cell, line):
    passed_twice(_io(IO_HEAD + cell, line=line))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    (REGION_TASK.format(body=ONE_AT_A_TIME) + IO_SUBMIT, "no-overlap",
     "The 16 tiles ran in 2 tasks, each reading its tiles one after another"),
    (REGION_TASK.format(body=READ_AHEAD.replace(", throttle=store", "")) + IO_SUBMIT, "no-store",
     "did not go through the lesson's modelled network storage"),
], ids=["starter-one-tile-at-a-time", "without-the-store"])
def test_io_overlap_named_mistakes_are_still_named(cell, mistake, says):
    not_yet(_io(IO_HEAD + cell), mistake, says)


# -- phases ------------------------------------------------------------------------------------------------------
PHASES_HEAD = 'p = exercises.problem("phases")\n'
QUICKLOOK_REF = """
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

"""
QUICKLOOK_SUBMIT = "results = hpc.get([quicklook.remote(tiles.folder / name, p.factor) for name in p.tiles])\n"
PHASES_TILES = BASE + 'tiles = geotiles.make_tiles(work / "in", n=16, seed=1)\n' + WARM_UP


def _phases(cell: str):
    return run_exercise("phases", cell, setup=PHASES_TILES)


def _phases_hidden_values() -> list[str]:
    """What of the hidden case a verdict must never show: its tile count, its factor and the quicklooks' size."""
    h = hidden("phases")
    side = 512 // h.factor
    return [f"{len(h.tiles)} tiles", f"{len(h.tiles)} quicklook", f"{side} x {side}", f"{h.factor} x {h.factor}"]


def test_phases_the_hidden_case_has_other_tiles_and_another_factor():
    from eugo_lab.exercises.catalog.geo import tile_name

    p, h = lesson("phases"), hidden("phases")
    assert p.tiles == tuple(tile_name(i) for i in range(16)) and p.factor == 4  # the lesson's 4 x 4 into one
    assert len(h.tiles) == 8 and set(h.tiles) < set(p.tiles)  # half the tasks
    assert h.factor in (2, 8) and 512 % h.factor == 0


def test_phases_reference_passes_on_both_cases():
    text = passed_twice(_phases(PHASES_HEAD + QUICKLOOK_REF + QUICKLOOK_SUBMIT))
    assert "16 tiles ran as 16 tasks, each with its read, compute and write phases on the timeline" in text, text
    never_shown(text, *_phases_hidden_values())


@pytest.mark.parametrize("cell", [
    # The lesson's sizes typed in: 4 x 4 pixels into one, 128-pixel quicklooks, the factor passed as 4.
    QUICKLOOK_REF.replace("bands, rows, cols = rgb.shape\n        ", "")
    .replace("rgb.reshape(bands, rows // factor, factor, cols // factor, factor)", "rgb.reshape(3, 128, 4, 128, 4)")
    .replace("width=cols // factor, height=rows // factor", "width=128, height=128")
    .replace("scale(factor)", "scale(4)") + QUICKLOOK_SUBMIT.replace("p.factor", "4"),
    # Every tile of the notebook instead of p.tiles.
    QUICKLOOK_REF + "results = hpc.get([quicklook.remote(q, p.factor) for q in tiles.paths])\n",
], ids=["typed-factor-and-sizes", "every-tile-of-the-notebook"])
def test_phases_typed_inputs_do_not_carry_over(cell):
    never_shown(carried_over(_phases(PHASES_HEAD + cell)), *_phases_hidden_values())


# Honest cells unlike the reference: each passes on both cases.
PHASES_HONEST = [
    # rasterio averages while it reads (out_shape with average resampling): the read phase holds the averaging.
    ("rasterio-averages-on-read-keywords",
     "from rasterio.enums import Resampling\n\n@hpc.remote\ndef quicklook(path, factor):\n"
     "    with hpc.phase('read'), rasterio.open(path) as src:\n"
     "        shape = (3, src.height // factor, src.width // factor)\n"
     "        small = src.read((3, 2, 1), out_shape=shape, resampling=Resampling.average).astype('float32')\n"
     "        profile = dict(crs=src.crs, transform=src.transform * src.transform.scale(factor))\n"
     "    with hpc.phase('compute'):\n"
     "        img = (255 * np.clip(small / np.percentile(small, 98), 0, 1)).astype(np.uint8)\n"
     "    with hpc.phase('write'):\n"
     "        target = str(out_dir / ('ql_' + pathlib.Path(path).name))\n"
     "        with rasterio.open(target, 'w', driver='GTiff', width=shape[2], height=shape[1], count=3, "
     "dtype='uint8', **profile) as dst:\n"
     "            dst.write(img)\n    return target\n\n"
     "futures = {name: quicklook.remote(path=tiles.folder / name, factor=p.factor) for name in p.tiles}\n"
     "results = hpc.get(list(futures.values()))\n"),
    ("helpers-reversed-order",
     "def load(path, k):\n    with rasterio.open(path) as src:\n"
     "        return src.read((3, 2, 1)).astype('float32'), src.crs, src.transform @ src.transform.scale(k)\n\n"
     "@hpc.remote\ndef thumb(path, k):\n    with hpc.phase('read'):\n        rgb, crs, transform = load(path, k)\n"
     "    with hpc.phase('compute'):\n        n = rgb.shape[1] // k\n"
     "        img = np.clip(rgb.reshape(3, n, k, n, k).mean(axis=(2, 4)) / 12, 0, 255).astype('uint8')\n"
     "    target = out_dir / (pathlib.Path(path).stem + '_thumb.tif')\n"
     "    with hpc.phase('write'), rasterio.open(target, 'w', driver='GTiff', width=n, height=n, count=3, "
     "dtype='uint8', crs=crs, transform=transform) as dst:\n        dst.write(img)\n    return target\n\n"
     "results = hpc.get([thumb.remote(tiles.folder / name, p.factor) for name in reversed(p.tiles)])\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in PHASES_HONEST], ids=[i for i, _ in PHASES_HONEST])
def test_phases_honest_cells_pass_on_both_cases(cell):
    passed_twice(_phases(PHASES_HEAD + cell))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    (QUICKLOOK_REF.replace('with hpc.phase("read"):', "if True:").replace('with hpc.phase("compute"):', "if True:")
     .replace('with hpc.phase("write"):', "if True:") + QUICKLOOK_SUBMIT, "no-phases",
     "16 of the 16 quicklook tasks recorded no 'read' and 'compute' and 'write' phase"),
    (QUICKLOOK_REF + QUICKLOOK_SUBMIT.replace("p.factor", "8"), "size",
     "the quicklook of tile_00_00.tif holds 3 bands of 64 x 64 pixels"),
], ids=["no-step-marked", "another-factor"])
def test_phases_named_mistakes_are_still_named(cell, mistake, says):
    not_yet(_phases(PHASES_HEAD + cell), mistake, says)


# -- sizing ------------------------------------------------------------------------------------------------------
SIZING_HEAD = 'p = exercises.problem("sizing")\n'
SIZING_TILES = BASE + ('import math\nfrom eugo_lab.analysis import sizing\n'
                       "sizes = [1024 if i % 5 == 2 else 512 for i in range(16)]  # 3 scenes of 16 are 4x the pixels\n"
                       'tiles = geotiles.make_tiles(work / "in", n=16, size=sizes, seed=3)\n') + WARM_UP
SIZING_SMALL = ("with hpc.trace() as small:\n"
                "    results = hpc.get([process.remote(tiles.folder / name, out_dir) for name in p.tiles])\n")


def _sizing(cell: str):
    return run_exercise("sizing", SIZING_HEAD + cell, setup=SIZING_TILES)


def _sizing_hidden_values() -> list[str]:
    """What of the hidden case a verdict must never show: its job's figures and how many tiles it measures."""
    job = hidden("sizing").job
    return [f"{job.tasks:,}", f"whole {job.deadline:g} s", f"{job.startup:g} s start-up",
            f"first {job.startup:g} s", f"the {len(hidden('sizing').tiles)} process_tile"]


def test_sizing_the_hidden_case_measures_half_the_tiles_for_another_job():
    from eugo_lab.analysis.sizing import Job
    from eugo_lab.exercises import problems
    from eugo_lab.exercises.catalog.geo import tile_name

    p = lesson("sizing")
    assert p.tiles == tuple(tile_name(i) for i in range(16))
    assert p.job == Job(tasks=20_000, deadline=120, startup=60)  # the job the lesson's prose sizes
    for seed in range(1, 40):
        h = problems.make("sizing", seed, hidden=True)
        assert len(h.tiles) == 8 and set(h.tiles) < set(p.tiles)  # half the small run
        assert h.job.tasks < p.job.tasks
        # The work per second left is under half the lesson's: the lesson's count is never within 15% of it.
        assert h.job.tasks / (h.job.deadline - h.job.startup) < 0.5 * p.job.tasks / (p.job.deadline - p.job.startup)


def test_sizing_reference_passes_on_both_cases():
    text = passed_twice(_sizing(SIZING_SMALL + "workers = sizing.plan(small, p.job).workers\n"))
    assert "within 15% of the simulator's replay of the 16 process_tile tasks of this cell" in text, text
    never_shown(text, *_sizing_hidden_values())


@pytest.mark.parametrize("cell", [
    # The lesson's job typed in and planned: the right count for the lesson, not for the hidden job.
    SIZING_SMALL + "workers = sizing.plan(small, sizing.Job(tasks=20_000, deadline=120, startup=60)).workers\n",
    # The tiles of the notebook instead of p.tiles, sized for p.job.
    "with hpc.trace() as small:\n    results = hpc.get([process.remote(q, out_dir) for q in tiles.paths])\n"
    "workers = sizing.plan(small, p.job).workers\n",
], ids=["the-lesson-s-job-typed-in", "every-tile-of-the-notebook"])
def test_sizing_typed_inputs_do_not_carry_over(cell):
    never_shown(carried_over(_sizing(cell)), *_sizing_hidden_values())


# Honest cells unlike the reference: each passes on both cases.
SIZING_HONEST = [
    ("the-job-rebuilt-from-its-fields",
     SIZING_SMALL + "target = sizing.Job(tasks=p.job.tasks, deadline=p.job.deadline, startup=p.job.startup)\n"
                    "workers = sizing.plan(small, target).workers\n"),
    ("other-names-reversed-one-spare",
     "with hpc.trace() as probe:\n"
     "    measured = hpc.get([process.remote(tiles.folder / q, out_dir) for q in reversed(p.tiles)])\n"
     "results = measured\nworkers = sizing.plan(probe, p.job).workers + 1\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in SIZING_HONEST], ids=[i for i, _ in SIZING_HONEST])
def test_sizing_honest_cells_pass_on_both_cases(cell):
    passed_twice(_sizing(cell))


@pytest.mark.parametrize(("answer", "mistake", "says"), [
    ('math.ceil(p.job.tasks * small.to_dataframe().eval("end - start").median() / p.job.deadline)', "typical",
     "you scaled one typical tile (the median)"),
    ("sizing.plan(small, p.job).workers * 3", "too-many", "that many workers meet the deadline, but fewer already do"),
], ids=["starter-median-tile", "three-times-too-many"])
def test_sizing_named_mistakes_are_still_named(answer, mistake, says):
    not_yet(_sizing(SIZING_SMALL + f"workers = {answer}\n"), mistake, says)


# -- seven-terabytes ---------------------------------------------------------------------------------------------
SEVEN_HEAD = 'p = exercises.problem("seven-terabytes")\n'
# The lesson's cells before the exercise: the tiles, its 60 s plan's job for the lesson's question.
SEVEN_TILES = BASE + ('import dataclasses, math\nfrom eugo_lab.analysis import sizing\n'
                      'tiles = geotiles.make_tiles(work / "in", n=16, seed=4)\n' + WARM_UP
                      + "FILES, TOTAL, DEADLINE = 192_000, 7e12, 180\nfile_bytes = TOTAL / FILES\n"
                        "tile_bytes = tiles.total_bytes / len(tiles)\n"
                        "job = sizing.Job(tasks=FILES, deadline=DEADLINE, startup=60, scale=file_bytes / tile_bytes,\n"
                        "                 task_bytes=file_bytes, price_per_worker_hour=0.0408)\n")
SEVEN_SMALL = """with hpc.trace() as small:
    results = hpc.get([process.remote(tiles.folder / name, out_dir, throttle=store) for name in p.tiles])
reads_per_file = sum(r.reads for r in results) / len(results)
"""
WARM_JOB = ("file_bytes = p.total_bytes / p.files\ntile_bytes = sum(r.file_bytes for r in results) / len(results)\n"
            "warm = sizing.Job(tasks=p.files, deadline=p.deadline, startup=p.startup, scale=file_bytes / tile_bytes,\n"
            "                  task_bytes=file_bytes, price_per_worker_hour=0.0408)\n")
SEVEN_ANSWER = ("warm_plan = sizing.plan(small, warm)\nworkers = warm_plan.workers\n"
                "prefixes = math.ceil(p.files * reads_per_file / (warm_plan.wall_time - warm.startup) / 5_500)\n")


def _seven(cell: str):
    return run_exercise("seven-terabytes", SEVEN_HEAD + cell, setup=SEVEN_TILES)


def _seven_hidden_values() -> list[str]:
    """What of the hidden case a verdict must never show: its question, its start-up and its tile count."""
    h = hidden("seven-terabytes")
    return [f"{h.files:,}", f"{h.total_bytes / 1e12:.2g} TB", f"whole {h.deadline:g} s", f"{h.startup:g} s start-up",
            f"with {h.startup:g} s", f"the {len(h.tiles)} process_tile"]


def test_seven_terabytes_the_hidden_case_asks_a_smaller_question():
    from eugo_lab.exercises import problems
    from eugo_lab.exercises.catalog.geo import tile_name

    p = lesson("seven-terabytes")
    assert (p.files, p.total_bytes, p.deadline, p.startup) == (192_000, 7e12, 180, 20)  # the lesson's prose
    assert p.tiles == tuple(tile_name(i) for i in range(16))
    for seed in range(1, 40):
        h = problems.make("seven-terabytes", seed, hidden=True)
        assert len(h.tiles) == 8 and set(h.tiles) < set(p.tiles)  # half the small run
        assert h.files <= 0.75 * p.files and h.total_bytes / h.files < p.total_bytes / p.files  # cheaper replays
        assert h.startup != p.startup and h.deadline - h.startup >= 150  # another start-up, the plan in reach


def test_seven_terabytes_reference_passes_on_both_cases():
    text = passed_twice(_seven(SEVEN_SMALL + WARM_JOB + SEVEN_ANSWER))
    assert "workers within 15% of the plan replayed with a 20 s start-up from the 16 process_tile tasks" in text, text
    never_shown(text, *_seven_hidden_values())


@pytest.mark.parametrize("cell", [
    # The lesson's question and start-up typed in: the lesson's job from the notebook, made warm by a typed 20 s.
    SEVEN_SMALL + "warm = dataclasses.replace(job, startup=20)\nwarm_plan = sizing.plan(small, warm)\n"
                  "workers = warm_plan.workers\n"
                  "prefixes = math.ceil(FILES * reads_per_file / (warm_plan.wall_time - warm.startup) / 5_500)\n",
    # Every tile of the notebook measured instead of p.tiles.
    SEVEN_SMALL.replace("tiles.folder / name", "q").replace("for name in p.tiles", "for q in tiles.paths")
    + WARM_JOB + SEVEN_ANSWER,
], ids=["the-lesson-s-job-and-20-s-typed-in", "every-tile-of-the-notebook"])
def test_seven_terabytes_typed_inputs_do_not_carry_over(cell):
    never_shown(carried_over(_seven(cell)), *_seven_hidden_values())


# Honest cells unlike the reference: each passes on both cases.
SEVEN_HONEST = [
    ("the-lesson-s-job-replaced-by-p-s-fields",
     SEVEN_SMALL + "size = p.total_bytes / p.files\n"
     "warm = dataclasses.replace(job, tasks=p.files, deadline=p.deadline, startup=p.startup, task_bytes=size,\n"
     "                           scale=size / (sum(r.file_bytes for r in results) / len(results)))\n"
     "answer = sizing.plan(small, warm)\nrunning = answer.wall_time - p.startup\n"
     "workers = answer.workers + 1\nprefixes = -(-p.files * reads_per_file // (running * 5_500))\n"),
    ("own-names-reversed-tiles",
     "with hpc.trace() as probe:\n"
     "    measured = hpc.get([process.remote(str(tiles.folder / n), out_dir, throttle=store) for n in p.tiles[::-1]])\n"
     "results = measured\nmb = p.total_bytes / p.files\n"
     "mean = sum(r.file_bytes for r in measured) / len(measured)\n"
     "q = sizing.plan(probe, sizing.Job(p.files, p.deadline, p.startup, scale=mb / mean, task_bytes=mb))\n"
     "calls = sum(r.reads for r in measured) * p.files / len(measured)\n"
     "workers, prefixes = q.workers, math.ceil(calls / (q.wall_time - p.startup) / 5_500)\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in SEVEN_HONEST], ids=[i for i, _ in SEVEN_HONEST])
def test_seven_terabytes_honest_cells_pass_on_both_cases(cell):
    passed_twice(_seven(cell))


@pytest.mark.parametrize(("answer", "mistake", "says"), [
    ("workers = sizing.plan(small, job).workers\nprefixes = math.ceil(p.files * reads_per_file / p.deadline / 5_500)\n",
     "old-startup", "is a count for the lesson's 60 s start-up"),
    (SEVEN_ANSWER.replace("(warm_plan.wall_time - warm.startup)", "p.deadline"), "prefixes-deadline",
     "prefixes: you spread the read requests over the whole 180 s"),
], ids=["starter-the-60-s-plan", "requests-over-the-whole-deadline"])
def test_seven_terabytes_named_mistakes_are_still_named(answer, mistake, says):
    not_yet(_seven(SEVEN_SMALL + WARM_JOB + answer), mistake, says)
