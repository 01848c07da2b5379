"""Satellite-like GeoTIFF tiles and the pipeline of course 4: read, resample, write a Cloud-Optimized GeoTIFF.

The tiles are real GeoTIFFs (rasterio writes them, GDAL reads them): four uint16 bands
(blue, green, red, near infrared) as surface reflectance x 10,000, 10 m pixels in WGS 84 /
UTM zone 33N, laid out side by side on a grid like a satellite's tiling. A 10,980-pixel
scene is scaled down to ``size`` pixels (512 by default: 2 MB a tile). Each is stored
tiled (256 x 256 blocks) and band-interleaved, so a reader that asks for two bands or one
window fetches only those blocks: :func:`read_tile` counts the bytes it really read.

Each step runs inside an ``hpc.phase`` ("read", "compute", "write"), so a traced run shows
where a task's time goes. Outside a task the phases cost nothing.

:func:`open_tile` is rasterio's own ``open`` with the same counting: code that reads with
``src.read(..., window=...)`` itself gets a :class:`ReadReceipt` of what GDAL fetched, which a
task can return beside its result.

Example::

    tiles = make_tiles(folder, n=8)
    result = process_tile(tiles.paths[0], out_dir, bands=("red", "nir"), product="ndvi")
    print(result.bytes_read, cog_info(result.output).overviews)
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from eugo_lab.contract.phases import phase
from eugo_lab.workloads import require
from eugo_lab.workloads.storage import Meter, Throttle, counting_opener

BANDS = ("blue", "green", "red", "nir")
CRS = "EPSG:32633"  # WGS 84 / UTM zone 33N (central Europe)
RESOLUTION = 10.0  # metres per pixel, like Sentinel-2's visible and near-infrared bands
ORIGIN = (399_960.0, 5_600_040.0)  # upper-left corner of the grid, in metres of the UTM zone
BLOCK = 256  # input block size: 256 x 256 pixels per band, as GDAL's tiled GeoTIFFs default to
PRODUCTS = ("resample", "ndvi")

# Surface reflectance x 10,000 per land cover, blue/green/red/near infrared: open water is dark
# and darkest in the infrared, vegetation reflects the infrared strongly, bare soil rises to the red.
_COVER = {"water": (600, 500, 300, 150), "vegetation": (400, 700, 350, 3500), "soil": (900, 1200, 1500, 2200)}


@dataclass(frozen=True)
class TileSet:
    """The tiles :func:`make_tiles` wrote: their paths and what every one of them holds."""

    folder: Path
    paths: tuple[Path, ...]
    sizes: tuple[int, ...]  # each tile's width and height in pixels
    bands: tuple[str, ...]
    crs: str
    resolution: float

    def __len__(self) -> int:
        return len(self.paths)

    def __iter__(self) -> Any:
        return iter(self.paths)

    @property
    def total_bytes(self) -> int:
        """Bytes of all the tiles on disk."""
        return sum(p.stat().st_size for p in self.paths)

    def __str__(self) -> str:
        kinds = sorted(set(self.sizes))
        of = " or ".join(f"{s} x {s}" for s in kinds)
        return (f"{len(self)} tiles of {of} pixels, {len(self.bands)} uint16 bands "
                f"({', '.join(self.bands)}), {self.resolution:g} m pixels in {self.crs}: "
                f"{self.total_bytes / 1e6:.1f} MB in {self.folder}")


class Tile(NamedTuple):
    """Pixels with their georeferencing, as read or computed, and the bytes the read took from the file."""

    data: np.ndarray  # (bands, rows, cols)
    transform: Any  # affine.Affine: pixel -> map coordinates
    crs: Any  # rasterio CRS
    bands: tuple[str, ...]
    bytes_read: int = 0
    file_bytes: int = 0
    reads: int = 0  # read calls GDAL made on the file: on object storage, each would be a ranged request
    store_wait: float = 0.0  # seconds the storage model charged for those bytes (0: read from the local disk)
    # When the read began and ended, by this machine's clock (time.time()), so reads in different
    # worker processes or threads can be set side by side: how many were waiting at once.
    read_start: float = 0.0
    read_end: float = 0.0


class TileResult(NamedTuple):
    """What :func:`process_tile` did to one tile (small: it travels back to the notebook)."""

    source: str
    output: str
    bytes_read: int
    file_bytes: int
    bytes_written: int
    shape_in: tuple[int, ...]
    shape_out: tuple[int, ...]
    reads: int = 0  # read calls GDAL made on the input file
    store_wait: float = 0.0  # seconds the storage model charged for the input's bytes (0: the local disk)
    read_start: float = 0.0  # the input's read, by time.time() on the worker (see Tile)
    read_end: float = 0.0


class ReadReceipt(NamedTuple):
    """What the reads through one :func:`open_tile` took from the file, recorded as they happened.

    A task returns it beside what it computed, so the notebook can see what the task read
    without trusting anybody's arithmetic: every number here was counted by the opener.
    """

    path: str
    file_bytes: int
    bytes_read: int  # headers included: every byte GDAL asked the file for
    reads: int  # read calls GDAL made on the file (ranged requests, on object storage)
    windows: tuple[tuple[int, int, int, int] | None, ...]  # per read() call: (col_off, row_off, width, height)
    bands: tuple[tuple[int, ...], ...]  # per read() call: the 1-based band indexes it asked for
    shapes: tuple[tuple[int, ...], ...]  # per read() call: the shape of the array it returned
    store_wait: float = 0.0  # seconds the storage model charged (0: read from the local disk)
    # When the file was opened (time.time() where it was read): two reads of the same window are
    # still two readings, so a receipt made in the notebook never passes for a task's.
    opened: float = 0.0


class CogInfo(NamedTuple):
    """How a GeoTIFF is laid out: what makes it cloud-optimized (see :func:`cog_info`)."""

    layout: str | None  # "COG" when GDAL's COG driver wrote it
    tiled: bool
    blocksize: tuple[int, int]
    overviews: tuple[int, ...]
    compression: str | None
    width: int
    height: int
    count: int
    crs: str

    @property
    def is_cog(self) -> bool:
        """Tiled, with overviews and compressed, in GDAL's COG layout (header and overviews first)."""
        return self.layout == "COG" and self.tiled and bool(self.overviews) and self.compression is not None


def _field(rng: np.random.Generator, x: np.ndarray, y: np.ndarray, waves: int, scale: float) -> np.ndarray:
    """A smooth random surface over map coordinates: a sum of plane waves of wavelengths around ``scale`` metres."""
    out = np.zeros((len(y), len(x)))
    for _ in range(waves):
        angle = rng.uniform(0, math.pi)
        k = 2 * math.pi / (scale * rng.uniform(0.5, 2.0))
        phase_ = rng.uniform(0, 2 * math.pi)
        # sin(a + b) = sin a cos b + cos a sin b: two outer products instead of a sine per pixel.
        ax, by = k * math.cos(angle) * x, k * math.sin(angle) * y + phase_
        out += np.outer(np.cos(by), np.sin(ax)) + np.outer(np.sin(by), np.cos(ax))
    return out / math.sqrt(waves / 2)


def _scene(seed: int, x: np.ndarray, y: np.ndarray, index: int) -> np.ndarray:
    """Four bands of reflectance for one tile: land cover from a smooth field continuous across tiles."""
    # One field for the whole grid (same generator for every tile), so neighbouring tiles join up.
    cover = _field(np.random.default_rng([seed, 0]), x, y, waves=6, scale=3_000.0)
    vigour = _field(np.random.default_rng([seed, 1]), x, y, waves=4, scale=800.0)
    noise = np.random.default_rng([seed, 2, index])
    water, veg = cover < -0.9, cover > -0.1
    bands = np.empty((len(BANDS), len(y), len(x)), dtype=np.float64)
    for b in range(len(BANDS)):
        base = np.where(water, _COVER["water"][b], np.where(veg, _COVER["vegetation"][b], _COVER["soil"][b]))
        if BANDS[b] == "nir":
            base = base * np.where(veg, 1.0 + 0.15 * vigour, 1.0)  # healthier vegetation, brighter infrared
        bands[b] = base * (1.0 + 0.05 * noise.standard_normal(base.shape, dtype=np.float32))
    return np.clip(np.rint(bands), 1, 10_000).astype(np.uint16)


def _check_count(name: str, value: Any, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")
    return int(value)


def make_tiles(folder: str | os.PathLike, n: int = 8, size: int | Sequence[int] = 512, seed: int = 0, *,
               crs: str = CRS, resolution: float = RESOLUTION) -> TileSet:
    """Write ``n`` satellite-like GeoTIFF tiles of ``size`` x ``size`` pixels into ``folder``.

    ``size`` may also be a sequence of ``n`` sizes, one per tile (scenes of different
    extents: a bigger one is that much more work). Deterministic from ``seed``: the same
    arguments write the same pixels. Tiles sit on a grid (``ceil(sqrt(n))`` columns, one
    slot per largest tile) starting at :data:`ORIGIN`, named ``tile_ROW_COL.tif``. Each
    file is written to a temporary name and moved into place.
    """
    rasterio = require("rasterio")
    from affine import Affine

    n = _check_count("n", n)
    sizes = [size] * n if isinstance(size, (int, np.integer)) else list(size)
    if len(sizes) != n:
        raise ValueError(f"size must be one number or {n} of them (one per tile), got {len(sizes)}")
    sizes = [_check_count("size", s, 16) for s in sizes]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cols = math.ceil(math.sqrt(n))
    span = max(sizes) * resolution
    paths = []
    for i, size in enumerate(sizes):
        r, c = divmod(i, cols)
        left, top = ORIGIN[0] + c * span, ORIGIN[1] - r * span
        x = left + (np.arange(size) + 0.5) * resolution
        y = top - (np.arange(size) + 0.5) * resolution
        data = _scene(seed, x, y, i)
        path = folder / f"tile_{r:02d}_{c:02d}.tif"
        tmp = path.with_name(path.name + ".tmp")
        block = min(BLOCK, size - size % 16)
        with rasterio.open(tmp, "w", driver="GTiff", width=size, height=size, count=len(BANDS), dtype="uint16",
                           crs=crs, transform=Affine(resolution, 0.0, left, 0.0, -resolution, top), tiled=True,
                           blockxsize=block, blockysize=block, interleave="band") as dst:
            dst.write(data)
            dst.descriptions = BANDS
        os.replace(tmp, path)
        paths.append(path)
    return TileSet(folder=folder, paths=tuple(paths), sizes=tuple(sizes), bands=BANDS, crs=crs,
                   resolution=resolution)


def band_indexes(bands: Sequence[str | int] | None) -> list[int]:
    """1-based band indexes for band names or indexes (None: all four bands)."""
    if bands is None:
        return list(range(1, len(BANDS) + 1))
    if isinstance(bands, (str, int)):
        bands = [bands]
    out = []
    for b in bands:
        if isinstance(b, str) and b in BANDS:
            out.append(BANDS.index(b) + 1)
        elif isinstance(b, (int, np.integer)) and not isinstance(b, bool) and 1 <= b <= len(BANDS):
            out.append(int(b))
        else:
            raise ValueError(f"unknown band {b!r}: use names {', '.join(BANDS)} or indexes 1-{len(BANDS)}")
    if not out:
        raise ValueError("bands is empty: name at least one band, or pass None for all of them")
    return out


def _window(window: Any) -> Any:
    if window is None:
        return None
    from rasterio.windows import Window

    if isinstance(window, Window):
        return window
    try:
        col, row, width, height = (int(v) for v in window)
    except (TypeError, ValueError):
        raise ValueError(f"window must be a rasterio Window or (col_off, row_off, width, height), got {window!r}")
    return Window(col, row, width, height)


_gdal_ready = False


def _warm_gdal(rasterio: Any) -> None:
    """Once per process: open a tiny GeoTIFF through the counting opener, outside any phase.

    A process's first ``rasterio.open`` through a Python opener sets up GDAL's driver, the
    opener's virtual file system and the projection database: ~30-60 ms measured here, a one-off
    start-up cost like an import. Paid inside the first "read" phase it would read as a slow
    read (and as hidden waiting for every later one); paid here it counts as task time only.
    """
    global _gdal_ready
    if _gdal_ready:
        return
    import tempfile

    from rasterio.io import MemoryFile

    with MemoryFile() as mem:
        with mem.open(driver="GTiff", width=16, height=16, count=1, dtype="uint8", crs=CRS,
                      transform=rasterio.Affine(RESOLUTION, 0.0, ORIGIN[0], 0.0, -RESOLUTION, ORIGIN[1])) as ds:
            ds.write(np.zeros((1, 16, 16), dtype=np.uint8))
        data = mem.read()
    fd, name = tempfile.mkstemp(suffix=".tif", prefix="eugo-gdal-warm-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        with rasterio.open(name, opener=counting_opener(Meter())) as src:
            src.read(1)
            _ = src.crs.to_wkt()
    finally:
        os.unlink(name)
    _gdal_ready = True


def read_tile(path: str | os.PathLike, bands: Sequence[str | int] | None = None, window: Any = None,
              throttle: Throttle | None = None) -> Tile:
    """Read ``bands`` (names or 1-based indexes; None: all) of one tile, or only ``window`` of it.

    Runs inside ``hpc.phase("read")``. ``bytes_read`` counts what GDAL took from the file
    (headers and every block it touched); ``throttle`` makes those bytes cost what the
    modelled network storage would (see :class:`~eugo_lab.workloads.storage.Throttle`).
    """
    rasterio = require("rasterio")
    idx = band_indexes(bands)
    win = _window(window)
    meter = Meter(throttle=throttle or Throttle())
    _warm_gdal(rasterio)
    start = time.time()
    with phase("read"):
        with rasterio.open(path, opener=counting_opener(meter)) as src:
            data = src.read(idx, window=win)
            transform = src.transform if win is None else src.window_transform(win)
            crs = src.crs
        size = os.path.getsize(path)
    return Tile(data, transform, crs, tuple(BANDS[i - 1] for i in idx), meter.bytes_read, size, meter.reads,
                meter.charged, start, time.time())


class TileReader:
    """A rasterio dataset opened by :func:`open_tile`: reads as rasterio does, and counts what each read took.

    Every attribute is the dataset's own (``crs``, ``transform``, ``window_transform``,
    ``height``...); :meth:`read` is ``DatasetReader.read`` with the same arguments, recording
    the window and bands asked for and the shape returned. :attr:`receipt` holds the record.
    """

    def __init__(self, dataset: Any, meter: Meter, path: str, opened: float):
        self._dataset = dataset
        self._opened = opened
        self._meter = meter
        self._path = path
        self._windows: list[tuple[int, int, int, int] | None] = []
        self._bands: list[tuple[int, ...]] = []
        self._shapes: list[tuple[int, ...]] = []

    def read(self, indexes: Any = None, *args: Any, window: Any = None, **kwargs: Any) -> np.ndarray:
        """``DatasetReader.read(indexes, window=...)``, recorded: rasterio's arguments, rasterio's result."""
        data = self._dataset.read(indexes, *args, window=window, **kwargs)
        self._windows.append(_window_tuple(window, self._dataset))
        if indexes is None:
            bands: tuple[int, ...] = tuple(self._dataset.indexes)
        elif isinstance(indexes, (int, np.integer)):
            bands = (int(indexes),)
        else:
            bands = tuple(int(i) for i in indexes)
        self._bands.append(bands)
        self._shapes.append(tuple(int(n) for n in np.shape(data)))
        return data

    @property
    def receipt(self) -> ReadReceipt:
        """What the reads so far took from the file (bytes, GDAL's read calls) and what they asked for."""
        return ReadReceipt(self._path, os.path.getsize(self._path), self._meter.bytes_read, self._meter.reads,
                           tuple(self._windows), tuple(self._bands), tuple(self._shapes), self._meter.charged,
                           self._opened)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dataset, name)

    def __repr__(self) -> str:
        return f"<TileReader {Path(self._path).name}: {self._meter.bytes_read:,} bytes read so far>"


def _window_tuple(window: Any, dataset: Any) -> tuple[int, int, int, int] | None:
    """A rasterio window argument as (col_off, row_off, width, height) in whole pixels (None: the whole band)."""
    if window is None:
        return None
    from rasterio.windows import Window

    if not isinstance(window, Window):
        window = Window.from_slices(*window, height=dataset.height, width=dataset.width)
    w = window.round_offsets().round_lengths()
    return int(w.col_off), int(w.row_off), int(w.width), int(w.height)


@contextmanager
def open_tile(path: str | os.PathLike, throttle: Throttle | None = None) -> Iterator[TileReader]:
    """Open one tile with rasterio, counting every byte GDAL reads from it (see :class:`TileReader`).

    ``throttle`` makes those bytes cost what the modelled storage would. Use it like
    ``rasterio.open``::

        with geotiles.open_tile(path, throttle=store) as src:
            red = src.read(3, window=Window(0, 0, 256, 256))
        print(src.receipt.bytes_read)
    """
    rasterio = require("rasterio")
    meter = Meter(throttle=throttle or Throttle())
    _warm_gdal(rasterio)
    opened = time.time()
    with rasterio.open(path, opener=counting_opener(meter)) as src:
        yield TileReader(src, meter, os.fspath(path), opened)


def resample(tile: Tile, factor: float = 2, crs: str | None = None, method: str = "average") -> Tile:
    """Coarser pixels: ``factor`` times the pixel size (2: 10 m -> 20 m), optionally reprojected to ``crs``.

    Runs inside ``hpc.phase("compute")``. ``method`` is a rasterio resampling name
    (average, bilinear, nearest, ...).
    """
    require("rasterio")
    from rasterio.enums import Resampling
    from rasterio.transform import array_bounds
    from rasterio.warp import calculate_default_transform, reproject

    if not (isinstance(factor, (int, float)) and factor > 0):
        raise ValueError(f"factor must be a positive number (2 doubles the pixel size), got {factor!r}")
    try:
        how = Resampling[method]
    except KeyError:
        raise ValueError(f"unknown resampling {method!r}: use one of {', '.join(m.name for m in Resampling)}")
    count, rows, cols = tile.data.shape
    with phase("compute"):
        if crs is None:
            dst_crs = tile.crs
            width, height = max(1, round(cols / factor)), max(1, round(rows / factor))
            transform = tile.transform @ tile.transform.scale(cols / width, rows / height)
        else:
            dst_crs = crs
            transform, width, height = calculate_default_transform(
                tile.crs, crs, cols, rows, *array_bounds(rows, cols, tile.transform),
                dst_width=max(1, round(cols / factor)), dst_height=max(1, round(rows / factor)))
        out = np.zeros((count, height, width), dtype=tile.data.dtype)
        reproject(tile.data, out, src_transform=tile.transform, src_crs=tile.crs, dst_transform=transform,
                  dst_crs=dst_crs, resampling=how)
    return tile._replace(data=out, transform=transform, crs=tile.crs if crs is None else _crs(crs))


def _crs(crs: Any) -> Any:
    import rasterio.crs

    return rasterio.crs.CRS.from_user_input(crs)


def ndvi(tile: Tile) -> Tile:
    """The vegetation index (nir - red) / (nir + red) as int16 x 10,000; needs the red and nir bands.

    Runs inside ``hpc.phase("compute")``.
    """
    missing = [b for b in ("red", "nir") if b not in tile.bands]
    if missing:
        raise ValueError(f"ndvi needs the red and nir bands; this tile holds {', '.join(tile.bands)}: "
                         "read it with bands=('red', 'nir')")
    with phase("compute"):
        red = tile.data[tile.bands.index("red")].astype(np.float32)
        nir = tile.data[tile.bands.index("nir")].astype(np.float32)
        total = nir + red
        index = np.divide(nir - red, total, out=np.zeros_like(total), where=total > 0)
        out = np.rint(index * 10_000).astype(np.int16)[None]
    return tile._replace(data=out, bands=("ndvi",))


def write_cog(tile: Tile, path: str | os.PathLike, throttle: Throttle | None = None, blocksize: int = 128,
              compress: str = "deflate") -> int:
    """Write ``tile`` as a Cloud-Optimized GeoTIFF at ``path``; return the bytes written.

    Runs inside ``hpc.phase("write")``: GDAL's COG driver writes internal tiles of
    ``blocksize`` pixels, overviews down to one block (``average`` resampling) and
    compressed blocks (horizontal predictor), headers first. The file is written under a
    temporary name and moved into place. ``throttle`` charges the upload of those bytes to
    the modelled storage.
    """
    require("rasterio")
    from rasterio import shutil as rio_shutil
    from rasterio.io import MemoryFile

    blocksize = _check_count("blocksize", blocksize, 16)
    if blocksize % 16:
        raise ValueError(f"blocksize must be a multiple of 16 (GeoTIFF tiles), got {blocksize}")
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    count, height, width = tile.data.shape
    with phase("write"):
        profile = {"driver": "GTiff", "width": width, "height": height, "count": count,
                   "dtype": tile.data.dtype.name, "crs": tile.crs, "transform": tile.transform}
        with MemoryFile() as mem:
            with mem.open(**profile) as staged:
                staged.write(tile.data)
                staged.descriptions = tile.bands
            with mem.open() as staged:
                rio_shutil.copy(staged, tmp, driver="COG", compress=compress, blocksize=blocksize,
                                overview_resampling="average", predictor=2)
        os.replace(tmp, path)
        written = path.stat().st_size
        if throttle is not None:
            throttle.upload(written)
    return written


def cog_info(path: str | os.PathLike) -> CogInfo:
    """Read how a GeoTIFF is laid out: tiling, block size, overview levels, compression, GDAL's layout tag."""
    rasterio = require("rasterio")
    with rasterio.open(path) as src:
        structure = src.tags(ns="IMAGE_STRUCTURE")
        profile = src.profile
        return CogInfo(layout=structure.get("LAYOUT"), tiled=bool(profile.get("tiled", False)),
                       blocksize=tuple(src.block_shapes[0]), overviews=tuple(src.overviews(1)),
                       compression=src.compression.value if src.compression else None, width=src.width,
                       height=src.height, count=src.count, crs=src.crs.to_string() if src.crs else "")


def _check_product(product: str) -> None:
    if product not in PRODUCTS:
        raise ValueError(f"unknown product {product!r}: use one of {', '.join(PRODUCTS)}")


def _finish(tile: Tile, path: str | os.PathLike, out_dir: str | os.PathLike, product: str, factor: float,
            upload: Throttle | None) -> TileResult:
    """Compute and write one tile that has been read (the pipeline after its read step)."""
    out = ndvi(tile) if product == "ndvi" else tile
    out = resample(out, factor)
    target = Path(out_dir) / f"{Path(path).stem}_{product}.tif"
    written = write_cog(out, target, throttle=upload)
    return TileResult(str(path), str(target), tile.bytes_read, tile.file_bytes, written, tuple(tile.data.shape),
                      tuple(out.data.shape), tile.reads, tile.store_wait, tile.read_start, tile.read_end)


def process_tile(path: str | os.PathLike, out_dir: str | os.PathLike, *, bands: Sequence[str | int] | None = None,
                 product: str = "resample", factor: float = 2, throttle: Throttle | None = None,
                 upload: Throttle | None = None) -> TileResult:
    """The pipeline on one tile: read ``bands``, compute ``product``, write a COG into ``out_dir``.

    ``product``: ``"resample"`` (the bands at ``factor`` times coarser pixels) or ``"ndvi"``
    (the vegetation index from red and nir, then resampled). Phases: read, compute, write.
    ``throttle`` models the storage the tile is read from, ``upload`` the one it is written to.
    """
    _check_product(product)
    return _finish(read_tile(path, bands=bands, throttle=throttle), path, out_dir, product, factor, upload)


def process_tiles(paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *, prefetch: int = 2,
                  bands: Sequence[str | int] | None = None, product: str = "resample", factor: float = 2,
                  throttle: Throttle | None = None, upload: Throttle | None = None) -> list[TileResult]:
    """The pipeline on several tiles in one task, reading up to ``prefetch`` tiles ahead in threads.

    While tile i is computed and written, the reads of the next ``prefetch`` tiles are
    already waiting on storage: reading overlaps compute. Here the "read" phase is the time
    the task *waited* for its next tile (the reads themselves run in the threads), so on the
    timeline it shrinks as the overlap hides the reads. ``prefetch=0`` reads each tile only
    when it is needed, like a loop over :func:`process_tile`.
    """
    from concurrent.futures import ThreadPoolExecutor

    _check_product(product)
    prefetch = _check_count("prefetch", prefetch, 0)
    paths = list(paths)
    if prefetch == 0:
        return [process_tile(p, out_dir, bands=bands, product=product, factor=factor, throttle=throttle,
                             upload=upload) for p in paths]
    results: list[TileResult] = []
    with ThreadPoolExecutor(max_workers=prefetch, thread_name_prefix="eugo-prefetch") as pool:
        pending = [pool.submit(read_tile, p, bands, None, throttle) for p in paths[:prefetch]]
        for i, p in enumerate(paths):
            with phase("read"):
                tile = pending[i].result()
            pending[i] = None  # type: ignore[call-overload]  # the tile is ours now: let the future go
            if i + prefetch < len(paths):
                pending.append(pool.submit(read_tile, paths[i + prefetch], bands, None, throttle))
            results.append(_finish(tile, p, out_dir, product, factor, upload))
    return results
