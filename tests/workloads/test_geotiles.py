"""Course 4's workload on real files: GeoTIFF tiles through rasterio, COGs, bytes read, phases, Parquet."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

rasterio = pytest.importorskip("rasterio")

from eugo_lab import hpc  # noqa: E402
from eugo_lab.workloads import geotiles as g  # noqa: E402
from eugo_lab.workloads import storage, tables  # noqa: E402
from eugo_lab.workloads.storage import Throttle  # noqa: E402


@pytest.fixture(scope="module")
def tiles(tmp_path_factory):
    return g.make_tiles(tmp_path_factory.mktemp("tiles"), n=4, size=512, seed=7)


def test_tiles_are_georeferenced_satellite_like_geotiffs(tiles):
    assert len(tiles) == 4 and [p.name for p in tiles.paths] == [
        "tile_00_00.tif", "tile_00_01.tif", "tile_01_00.tif", "tile_01_01.tif"]
    with rasterio.open(tiles.paths[0]) as a, rasterio.open(tiles.paths[1]) as b, rasterio.open(tiles.paths[2]) as c:
        assert a.crs.to_epsg() == 32633 and a.count == 4 and a.dtypes == ("uint16",) * 4
        assert a.res == (10.0, 10.0) and (a.width, a.height) == (512, 512)
        assert a.profile["tiled"] and a.block_shapes[0] == (256, 256) and a.profile["interleave"] == "band"
        assert a.descriptions == g.BANDS
        # neighbours on the grid share their edges
        assert b.bounds.left == a.bounds.right and c.bounds.top == a.bounds.bottom
        data = a.read()
    assert 1 <= data.min() and data.max() <= 10_000
    mean = data.reshape(4, -1).mean(axis=1)
    assert mean[3] > 2 * mean[2]  # a mostly vegetated scene: bright in the near infrared, dark in the red
    assert tiles.total_bytes > 4 * 512 * 512 * 2 * 4
    assert str(tiles).startswith("4 tiles of 512 x 512 pixels, 4 uint16 bands (blue, green, red, nir), 10 m pixels")


def test_tiles_of_several_sizes(tmp_path):
    mixed = g.make_tiles(tmp_path, n=3, size=[256, 512, 256])
    assert mixed.sizes == (256, 512, 256) and str(mixed).startswith("3 tiles of 256 x 256 or 512 x 512 pixels")
    with rasterio.open(mixed.paths[1]) as big, rasterio.open(mixed.paths[2]) as small:
        assert big.width == 512 and small.width == 256
        assert small.bounds.top == g.ORIGIN[1] - 512 * 10.0  # second row: one slot per largest tile
    with pytest.raises(ValueError, match="size must be one number or 3 of them"):
        g.make_tiles(tmp_path, n=3, size=[256, 512])


def test_tiles_are_deterministic_from_the_seed(tmp_path, tiles):
    again = g.make_tiles(tmp_path / "a", n=2, size=512, seed=7)
    other = g.make_tiles(tmp_path / "b", n=2, size=512, seed=8)
    same = g.read_tile(again.paths[1]).data
    assert np.array_equal(same, g.read_tile(tiles.paths[1]).data)
    assert not np.array_equal(same, g.read_tile(other.paths[1]).data)
    assert not list(tmp_path.rglob("*.tmp"))


def test_bad_arguments_name_what_to_do(tmp_path, tiles):
    with pytest.raises(ValueError, match="n must be a whole number >= 1"):
        g.make_tiles(tmp_path, n=0)
    with pytest.raises(ValueError, match="unknown band 'swir'.*blue, green, red, nir"):
        g.read_tile(tiles.paths[0], bands=["swir"])
    with pytest.raises(ValueError, match=r"ndvi needs the red and nir bands.*bands=\('red', 'nir'\)"):
        g.ndvi(g.read_tile(tiles.paths[0], bands=["blue", "green"]))
    with pytest.raises(ValueError, match="unknown product 'thumb'"):
        g.process_tile(tiles.paths[0], tmp_path, product="thumb")
    with pytest.raises(ValueError, match="unknown resampling 'best'"):
        g.resample(g.read_tile(tiles.paths[0]), 2, method="best")
    with pytest.raises(ValueError, match="bandwidth must be a positive number"):
        Throttle(bandwidth=0)
    with pytest.raises(ValueError, match="latency must be a finite number"):
        Throttle(latency=-1)


def test_bytes_read_follow_the_bands_and_the_window(tiles):
    path = tiles.paths[0]
    size = path.stat().st_size
    whole = g.read_tile(path)
    two = g.read_tile(path, bands=("red", "nir"))
    corner = g.read_tile(path, bands=(3, 4), window=(0, 0, 100, 100))
    inner = g.read_tile(path, bands=["nir"], window=(256, 256, 200, 200))
    assert whole.file_bytes == size and whole.bytes_read >= 0.99 * size
    assert whole.reads > two.reads > corner.reads > 0  # GDAL's read calls: a request each on object storage
    # band-interleaved blocks: two of four bands are half the pixels, plus the header
    assert 0.45 * size < two.bytes_read < 0.55 * size
    # 2 x 2 blocks of 256 pixels per band: a window inside one block reads that block of each band
    assert 0.2 * two.bytes_read < corner.bytes_read < 0.3 * two.bytes_read
    assert 0.4 * corner.bytes_read < inner.bytes_read < 0.6 * corner.bytes_read
    assert np.array_equal(two.data, whole.data[2:4])
    assert np.array_equal(corner.data, whole.data[2:4, :100, :100])
    assert np.array_equal(inner.data, whole.data[3:4, 256:456, 256:456])
    assert corner.transform == whole.transform  # the window starts at the corner
    assert inner.transform.c == whole.transform.c + 256 * 10.0


def test_the_throttle_sleeps_for_the_bytes_actually_read(tiles, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(storage.time, "sleep", slept.append)
    model = Throttle(latency=0.03, bandwidth=40e6)
    tile = g.read_tile(tiles.paths[0], bands=("red", "nir"), throttle=model)
    assert slept[0] == 0.03  # the first byte of the one file opened
    assert sum(slept[1:]) == pytest.approx(tile.bytes_read / 40e6)
    assert sum(slept) == pytest.approx(model.transfer_time(tile.bytes_read))
    slept.clear()
    g.read_tile(tiles.paths[0], bands=("red", "nir"))  # no throttle: the local disk as it is
    assert slept == []
    assert "40 MB/s" in str(model) and str(Throttle()) == "no throttle (local disk)"


def test_resample_keeps_the_footprint_and_the_mean(tiles):
    tile = g.read_tile(tiles.paths[0])
    coarse = g.resample(tile, 2)
    assert coarse.data.shape == (4, 256, 256) and coarse.data.dtype == np.uint16
    assert coarse.transform.a == 20.0 and coarse.transform.c == tile.transform.c
    assert coarse.transform.f == tile.transform.f and coarse.crs == tile.crs
    assert np.allclose(coarse.data.reshape(4, -1).mean(1), tile.data.reshape(4, -1).mean(1), rtol=0.01)
    geo = g.resample(tile, 2, crs="EPSG:4326")
    assert geo.crs.to_epsg() == 4326 and 10 < geo.transform.c < 20 and 45 < geo.transform.f < 55


def test_ndvi_marks_vegetation_and_water(tiles):
    idx = g.ndvi(g.read_tile(tiles.paths[0], bands=("red", "nir")))
    assert idx.bands == ("ndvi",) and idx.data.dtype == np.int16 and idx.data.shape == (1, 512, 512)
    assert -10_000 <= idx.data.min() and idx.data.max() <= 10_000
    assert np.median(idx.data) > 5_000  # mostly vegetation


def test_write_cog_writes_a_cloud_optimized_geotiff(tiles, tmp_path):
    tile = g.resample(g.read_tile(tiles.paths[0]), 2)
    out = tmp_path / "out.tif"
    written = g.write_cog(tile, out, blocksize=64)
    info = g.cog_info(out)
    assert written == out.stat().st_size and not list(tmp_path.glob("*.tmp"))
    assert info.is_cog and info.layout == "COG" and info.tiled and info.blocksize == (64, 64)
    assert info.overviews == (2, 4) and info.compression == "DEFLATE" and info.crs == "EPSG:32633"
    with rasterio.open(out) as src:
        assert np.array_equal(src.read(), tile.data) and src.transform == tile.transform
    # a plain tiled GeoTIFF without overviews is not a COG
    assert not g.cog_info(tiles.paths[0]).is_cog


def test_process_tile_phases_on_the_local_pool(tiles, tmp_path):
    hpc.init(backend="local", workers=2)
    task = hpc.remote(g.process_tile)
    with hpc.trace() as t:
        results = hpc.get([task.remote(p, tmp_path, bands=("red", "nir"), product="ndvi") for p in tiles.paths])
    phases = t.phases_dataframe()
    per_task = phases.groupby("task_id")["phase"].apply(tuple)
    assert len(per_task) == 4 and set(per_task) == {("read", "compute", "compute", "write")}
    for r in results:
        assert r.shape_in == (2, 512, 512) and r.shape_out == (1, 256, 256)
        assert r.bytes_read < 0.6 * r.file_bytes and r.bytes_written > 0
        assert g.cog_info(r.output).is_cog


class _Counting(Throttle):
    """A throttle that also records how many first-byte waits were in flight at once."""

    lock = threading.Lock()
    now = 0
    most = 0

    def first_byte(self) -> None:
        with _Counting.lock:
            _Counting.now += 1
            _Counting.most = max(_Counting.most, _Counting.now)
        super().first_byte()
        with _Counting.lock:
            _Counting.now -= 1


@pytest.mark.parametrize("prefetch, in_flight", [(0, 1), (3, 3)])
def test_prefetch_keeps_reads_in_flight_while_computing(tiles, tmp_path, prefetch, in_flight):
    _Counting.most = 0
    paths = list(tiles.paths) * 2
    results = g.process_tiles(paths, tmp_path, prefetch=prefetch, product="ndvi", bands=("red", "nir"),
                              throttle=_Counting(latency=0.05))
    assert _Counting.most == in_flight
    assert [r.source for r in results] == [str(p) for p in paths]
    one = g.process_tile(tiles.paths[1], tmp_path / "..", product="ndvi", bands=("red", "nir"))
    with rasterio.open(one.output) as a, rasterio.open(results[1].output) as b:
        assert np.array_equal(a.read(), b.read())


def test_parquet_column_selection_reads_a_fraction_of_the_bytes(tmp_path):
    path = tables.make_observations(tmp_path / "obs.parquet", rows=100_000, seed=3)
    whole = tables.read_table(path)
    two = tables.read_table(path, columns=["red", "nir"])
    assert whole.table.num_rows == two.table.num_rows == 100_000 and two.table.column_names == ["red", "nir"]
    assert whole.bytes_read >= whole.file_bytes * 0.99
    assert two.bytes_read < 0.25 * whole.bytes_read
    assert two.table.equals(whole.table.select(["red", "nir"]))
    again = tables.read_table(tables.make_observations(tmp_path / "again.parquet", rows=100_000, seed=3))
    assert again.table.equals(whole.table)
    with pytest.raises(ValueError, match="no column 'ndvi'.*red, nir"):
        tables.read_table(path, columns=["ndvi"])


def test_without_the_courses_extra_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "rasterio", None)
    with pytest.raises(ImportError, match=r'rasterio is not installed.*pip install "eugo-lab\[courses\]"'):
        g.make_tiles(tmp_path)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r'pyarrow is not installed.*pip install "eugo-lab\[courses\]"'):
        tables.make_observations(tmp_path / "x.parquet")


@pytest.mark.parametrize("shared, most", [(False, 3), (True, 1)])
def test_a_shared_link_makes_readers_take_turns(tmp_path, monkeypatch, shared, most):
    # Three readers at once: on their own streams they wait together; on one link they queue.
    real_sleep = storage.time.sleep
    lock, state = threading.Lock(), {"now": 0, "most": 0}

    def sleep(seconds):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        real_sleep(seconds)
        with lock:
            state["now"] -= 1

    monkeypatch.setattr(storage.time, "sleep", sleep)
    model = Throttle(bandwidth=1e6, link=tmp_path / "link" if shared else None)
    readers = [threading.Thread(target=model.stream, args=(50_000,)) for _ in range(3)]
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    assert state["most"] == most
    assert ("shared by all readers" in str(model)) == shared


def test_a_link_needs_a_finite_bandwidth(tmp_path):
    with pytest.raises(ValueError, match="a Throttle link shares a finite bandwidth"):
        Throttle(link=tmp_path / "link")


def test_open_tile_reads_as_rasterio_does_and_keeps_a_receipt_of_the_bytes(tiles):
    from rasterio.windows import Window

    path = tiles.paths[0]
    with rasterio.open(path) as plain:
        want = plain.read((3, 4), window=Window(256, 0, 128, 128))
    receipts = []
    for window in (None, Window(256, 0, 128, 128), ((0, 128), (256, 384))):
        with g.open_tile(path) as src:
            got = src.read((3, 4), window=window)
            assert src.crs == plain.crs and src.height == plain.height  # the dataset's own attributes
        receipts.append(src.receipt)
        if window is not None:
            np.testing.assert_array_equal(got, want)
    whole, win, slices = receipts
    assert whole.windows == (None,) and win.windows == slices.windows == ((256, 0, 128, 128),)
    assert win.bands == ((3, 4),) and win.shapes == ((2, 128, 128),)
    # a window inside one 256-pixel block of two bands fetches that block of each, not the bands
    assert win.bytes_read == slices.bytes_read < whole.bytes_read / 2
    assert whole.bytes_read < whole.file_bytes * 0.6 and whole.store_wait == 0.0
    assert win.opened != slices.opened  # two readings, two receipts


def test_the_meter_charges_what_the_model_says_for_the_bytes_read(tiles):
    store = Throttle(latency=0.001, bandwidth=400e6)
    with g.open_tile(tiles.paths[0], throttle=store) as src:
        src.read(3)
    r = src.receipt
    assert r.store_wait == pytest.approx(store.transfer_time(r.bytes_read))
    tile = g.read_tile(tiles.paths[0], bands=("red",), throttle=store)
    assert tile.store_wait == pytest.approx(store.transfer_time(tile.bytes_read))
    assert 0 < tile.read_start <= tile.read_end
