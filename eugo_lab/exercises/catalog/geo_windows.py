"""Exercise of course 4 (Scaling a real workload), lesson 3: ``windowed-read``.

The lesson's setup cell makes ``tiles`` (a TileSet of 16 tiles) and ``store`` (the Throttle that
models object storage). The field plots are the checker's: ``p.plots`` holds, per plot, the tile's
file name and the ``(col_off, row_off)`` of a 128 x 128 square inside it (one in each of the 16
tiles in the lesson; in the hidden case 8 of the tiles, at other offsets). The question: the mean
NDVI of every plot, computed in tasks.

Starter (graded ``not yet``: each task reads the whole red and nir bands, then cuts the plot out)::

    %%eugo --exercise windowed-read -w 8
    from rasterio.windows import Window

    p = exercises.problem("windowed-read")

    @hpc.remote
    def plot_ndvi(path, col, row):
        with geotiles.open_tile(path, throttle=store) as src:
            red, nir = src.read((3, 4)).astype("float32")
        red, nir = red[row:row + 128, col:col + 128], nir[row:row + 128, col:col + 128]
        return float(((nir - red) / (nir + red)).mean()), src.receipt

    results = hpc.get([plot_ndvi.remote(tiles.folder / name, col, row) for name, col, row in p.plots])

reference: the read asks rasterio for the plot's window,
``src.read((3, 4), window=Window(col, row, 128, 128))``.

Criteria, all from what the tasks returned (each item of ``results`` proved to be a task's
return value by the trace), against the checker's own copy of ``p.plots``: one ``(value, receipt)``
per plot, for its tile and no other, where the receipt is the
:class:`~eugo_lab.workloads.geotiles.ReadReceipt` that :func:`~eugo_lab.workloads.geotiles.open_tile`
recorded on the worker as GDAL read; the windows read cover the tile's plot; the value is the
plot's mean NDVI; and the bytes read are at most ``MAX_OVER_WINDOW`` times what a read of just
the plot's red and nir window takes (the checker performs that read itself: GDAL fetches the
same blocks every time, so the comparison is of byte counts, never of durations).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from eugo_lab.exercises import measure, problems
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.exercises.catalog.geo import TILES, from_tasks, tile_name

LESSON_3 = "04-scaling-a-real-workload/03-reading-less.ipynb"
PLOT = 128  # the plots' width and height in pixels
RED, NIR = 3, 4  # 1-based band indexes of the tiles (geotiles.BANDS)
# A read may take up to 1.5x the bytes of the plot's red and nir window alone: room for a reader
# that splits it into two calls, or rounds the window out, and still under the next wasteful
# read (the window's four bands take 2x; the whole red and nir bands 4x; every band 8x).
MAX_OVER_WINDOW = 1.5
# The value must be the plot's mean NDVI to 4 decimals: float32 and float64 arithmetic agree to
# ~1e-7, while the mean of a neighbouring 128-pixel square differs by ~1e-2 or more.
VALUE_TOLERANCE = 1e-4
# The lesson's 16 tiles (geo.tile_name) are 512 pixels a side in blocks of 256. The hidden case reads 8
# of them (half the lesson's tasks: a pass costs less).
TILE_SIZE, BLOCK = 512, 256
HIDDEN_PLOTS = 8


@problems.declare("windowed-read")
@dataclass(frozen=True, repr=False)
class WindowedReadProblem(problems.Problem):
    """The field plots to read: per plot, ``(tile file name, col_off, row_off)`` of its 128 x 128 square."""

    plots: tuple[tuple[str, int, int], ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> WindowedReadProblem:
        """The lesson's plot in each of its 16 tiles, or plots in 8 of them at offsets drawn from ``rng``.

        Every plot lies inside one 256-pixel block of its bands, as the lesson's do: a read of the
        whole bands then takes 4x the bytes of the plot's window, so reading less is measurable.
        """
        if not hidden:
            return cls(tuple((tile_name(i), 256 * (i % 2) + 16 * (i % 8), 256 * (i // 2 % 2) + 8 * i + 4)
                             for i in range(TILES)))
        picked = sorted(rng.sample(range(TILES), HIDDEN_PLOTS))
        return cls(tuple((tile_name(i), BLOCK * rng.randrange(TILE_SIZE // BLOCK) + rng.randrange(BLOCK - PLOT + 1),
                          BLOCK * rng.randrange(TILE_SIZE // BLOCK) + rng.randrange(BLOCK - PLOT + 1))
                         for i in picked))

_READ = 'red, nir = src.read((3, 4), window=Window(col, row, 128, 128)).astype("float32")'
_SOLUTION = ("with geotiles.open_tile(path, throttle=store) as src:\n    " + _READ + "\n"
             "return float(((nir - red) / (nir + red)).mean()), src.receipt")
_SUBMIT = "results = hpc.get([plot_ndvi.remote(tiles.folder / name, col, row) for name, col, row in p.plots])"
HINTS = {
    DEFAULT: Hint("Ask rasterio for the plot alone: pass the read a window at the plot's column and row offsets, "
                  "128 pixels wide and high, instead of reading the whole bands and slicing.", _SOLUTION),
    "no-tiles": Hint("Run the lesson's first cell (it makes the 16 tiles and the store), then this cell again.",
                     "tiles = geotiles.make_tiles(...)   # the lesson's first cell"),
    "results": Hint("Keep the list get() returns in `results`: one task per plot of p.plots, each reading its "
                    "plot's tile and returning the plot's mean NDVI and the receipt of what it read.", _SUBMIT),
    "no-receipt": Hint("Open each tile with geotiles.open_tile (rasterio, with every byte counted) and return its "
                       "receipt beside the value, so the check can see what the task read.",
                       "return float(((nir - red) / (nir + red)).mean()), src.receipt"),
    "not-from-tasks": Hint("Keep what the tasks of this cell return in `results`, unchanged: the receipts are "
                           "what the workers read, and only the tasks can show that.", _SUBMIT),
    "whole-band": Hint("Do not read the whole bands and slice afterwards: give the read itself the plot's window, "
                       "so GDAL fetches only the blocks under it.", _SOLUTION),
    "all-bands": Hint("Keep the window, and ask it for red and nir only (bands 3 and 4): NDVI needs no other.",
                      _READ),
    "too-many-bytes": Hint("Read the plot once, as one window of exactly its size, red and nir only.", _READ),
    "wrong-window": Hint("rasterio's Window takes the column offset first, then the row offset, then width and "
                         "height: the plot's offsets are (col, row).", _READ),
    "wrong-value": Hint("Compute NDVI per pixel of the plot, (nir - red) / (nir + red), in floating point, and "
                        "return its mean.", "return float(((nir - red) / (nir + red)).mean()), src.receipt"),
    problems.CARRY_OVER: Hint("Take the plots from p.plots, the exercise's inputs (each plot's tile, column and row), "
                              "instead of tiles or offsets written into the cell, and pass each task its plot's "
                              "values as arguments.", 'p = exercises.problem("windowed-read")\n' + _SUBMIT),
}


@lru_cache(maxsize=256)
def _plot_truth(path: str, col: int, row: int, mtime_ns: int) -> tuple[float, int]:
    """The plot's mean NDVI and the bytes a read of its red and nir window takes, measured here once.

    ``mtime_ns`` keys the cache to the file as it is now, so a regenerated tile is read again.
    """
    from rasterio.windows import Window

    from eugo_lab.workloads.geotiles import open_tile

    with open_tile(path) as src:
        red, nir = src.read((RED, NIR), window=Window(col, row, PLOT, PLOT)).astype(np.float64)
    return float(((nir - red) / (nir + red)).mean()), src.receipt.bytes_read


def _covers(window: tuple[int, int, int, int] | None, col: int, row: int, size: tuple[int, int]) -> bool:
    """Whether a read's window (None: the whole band) holds the plot at (col, row)."""
    if window is None:
        return True
    c, r, w, h = window
    width, height = size
    # a window that runs past the edge reads only to the edge
    return c <= col and r <= row and min(c + w, width) >= col + PLOT and min(r + h, height) >= row + PLOT


def _tiles(a: Attempt) -> Any:
    """The notebook's TileSet: where the lesson's first cell wrote the tiles (NotYet when it has not run)."""
    from eugo_lab.workloads.geotiles import TileSet

    tiles = a.namespace.get("tiles")
    if not isinstance(tiles, TileSet) or not all((tiles.folder / name).is_file() for name in
                                                 {tile_name(i) for i in range(TILES)}):
        raise NotYet("there is no `tiles` holding the lesson's 16 tiles in the notebook: the lesson's first cell has "
                     "not run in this kernel.", mistake="no-tiles")
    return tiles


def _pairs(a: Attempt, plots: tuple[tuple[str, int, int], ...]) -> list[tuple[float, Any]]:
    """``results`` as (value, ReadReceipt) pairs, one for each plot's tile (NotYet naming what it holds otherwise)."""
    from eugo_lab.workloads.geotiles import ReadReceipt

    results = a.require("results")
    if not isinstance(results, (list, tuple)) or not results:
        raise NotYet(f"`results` should be the list get() returned, one item per plot; it holds "
                     f"{type(results).__name__}.", mistake="results")
    pairs = []
    for item in results:
        receipt = item[-1] if isinstance(item, tuple) and item else None
        if not isinstance(receipt, ReadReceipt):
            raise NotYet("the tasks returned no receipt of what they read (the last item of each result is "
                         f"{type(receipt).__name__ if receipt is not None else type(item).__name__}), so nothing "
                         "shows which bytes they took from the files.", mistake="no-receipt")
        value = item[0] if len(item) == 2 else None
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise NotYet(f"each result should be the plot's mean NDVI and the receipt; the first item is "
                         f"{type(value).__name__}.", mistake="results")
        pairs.append((float(value), receipt))
    want = [name for name, _, _ in plots]
    seen = [Path(r.path).name for _, r in pairs]
    missing = [name for name in want if name not in seen]
    if missing:
        raise NotYet(f"{len(missing)} of the {measure.plural(len(want), 'plot')} of p.plots have no result in "
                     f"`results` (the first missing is in {missing[0]}).", mistake="results")
    if len(seen) != len(want):
        others = sorted(set(seen) - set(want))
        said = f": {len(others)} of other tiles, which p.plots does not name" if others else ""
        raise NotYet(f"`results` holds {measure.plural(len(seen), 'result')} for the "
                     f"{measure.plural(len(want), 'plot')} of p.plots{said}; one task for each plot, and no other.",
                     mistake="results")
    return pairs


@exercise("windowed-read", lesson=LESSON_3, title="Read only the field plot", hints=HINTS)
def windowed_read(a: Attempt) -> Verdict:
    """Grade the plots' NDVI: the right values, from tasks whose receipts show they read only each plot's window.

    The plots are the checker's own copy of ``p.plots`` (``problems.given(a)``); the truth of each is
    read here from the lesson's tile of that name, never from the learner's values.
    """
    plot_of = {name: (col, row) for name, col, row in problems.given(a).plots}
    tiles = _tiles(a)
    pairs = _pairs(a, problems.given(a).plots)
    src = from_tasks(a, list(a.require("results")))
    n = len(pairs)
    rows = []
    for value, receipt in pairs:
        path = tiles.folder / Path(receipt.path).name  # the lesson's tile, whatever path the task was given
        col, row = plot_of[path.name]
        truth, window_bytes = _plot_truth(str(path), col, row, path.stat().st_mtime_ns)
        rows.append((path.name, col, row, value, truth, receipt, window_bytes))
    # Where the tasks read: every fact below is the receipts' (what GDAL took on the worker).
    from eugo_lab.workloads.geotiles import open_tile

    with open_tile(tiles.folder / rows[0][0]) as probe:
        size = (probe.width, probe.height)
    astray = [r for r in rows if not any(_covers(w, r[1], r[2], size) for w in r[5].windows)]
    if astray:
        name, col, row, _, _, receipt, _ = astray[0]
        read = [w for w in receipt.windows if w is not None]
        # The window's whole extent: where it began alone can equal the plot's corner (a 1 x 1 read there).
        at = (f"{read[0][2]} x {read[0][3]} pixels at column {read[0][0]}, row {read[0][1]}" if read else "nowhere")
        return a.not_yet(f"{len(astray)} of the {n} tasks read a window that does not hold their tile's plot: "
                         f"for {name} the read was {at}, but the plot is {PLOT} x {PLOT} pixels at column {col}, "
                         f"row {row}.", mistake="wrong-window")
    wrong = [r for r in rows if not (math.isfinite(r[3]) and abs(r[3] - r[4]) <= VALUE_TOLERANCE)]
    if wrong:
        name, _, _, value, truth, _, _ = wrong[0]
        return a.not_yet(f"for {len(wrong)} of the {n} tiles the value is not the plot's mean NDVI: for {name} "
                         f"the task returned {value:.4f}, and the plot's mean NDVI is {truth:.4f}.",
                         mistake="wrong-value")
    over = [r for r in rows if r[5].bytes_read > MAX_OVER_WINDOW * r[6]]
    share = max(r[5].bytes_read / r[5].file_bytes for r in rows)
    worst = max(rows, key=lambda r: r[5].bytes_read / r[6])
    details = (f"the most a task read: {worst[5].bytes_read / 1e3:,.0f} kB in {worst[5].reads} read calls, "
               f"{share:.0%} of its file", f"the plot's red and nir window alone: {worst[6] / 1e3:,.0f} kB")
    if over:
        name, _, _, _, _, receipt, window_bytes = worst
        took = (f"{len(over)} of the {n} tasks read more than {MAX_OVER_WINDOW:g}x the bytes of their "
                f"plot's window: for {name}, {receipt.bytes_read / 1e3:,.0f} kB "
                f"({receipt.bytes_read / receipt.file_bytes:.0%} of the file) where the plot's red and nir take "
                f"{window_bytes / 1e3:,.0f} kB.")
        if any(w is None for w in receipt.windows):
            return a.not_yet(took, "Its read asked for the whole bands, and the plot was cut out afterwards: GDAL "
                             "fetched every block of them.", mistake="whole-band", details=details)
        if any(set(b) - {RED, NIR} for b in receipt.bands):
            extra = sorted({i for b in receipt.bands for i in b} - {RED, NIR})
            return a.not_yet(took, f"The window was right, but the read also asked for band"
                             f"{'s' if len(extra) != 1 else ''} {', '.join(map(str, extra))}, which NDVI does not use.",
                             mistake="all-bands", details=details)
        return a.not_yet(took, f"Its {len(receipt.windows)} read calls asked for more of the file than the plot.",
                         mistake="too-many-bytes", details=details)
    others = measure.tasks(a.trace) - len(set(src.tasks))
    return a.passed(f"`results` is what the {len(set(src.tasks))} {src.function} tasks of this cell returned"
                    + (f" (the cell's {measure.plural(others, 'other task')} "
                       f"{'is' if others == 1 else 'are'} not counted)" if others else ""),
                    f"every task read only its plot: at most {share:.0%} of its file, by the bytes GDAL took on "
                    "the worker",
                    f"all {n} values are the mean NDVI of their tile's {PLOT} x {PLOT} plot", details=details)
