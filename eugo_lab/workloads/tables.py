"""A Parquet table of satellite observations, and reads that fetch only the columns they need.

Parquet is a columnar format: each row group stores every column as its own
contiguous chunk, so a reader that names its columns fetches only those chunks (plus the
footer that says where they are). :func:`read_table` counts the bytes pyarrow really took
from the file, with or without column selection.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from eugo_lab.contract.phases import phase
from eugo_lab.workloads import require
from eugo_lab.workloads.geotiles import BANDS
from eugo_lab.workloads.storage import CountingFile, Meter, Throttle

# Rows per row group: 64k rows keeps each column chunk large enough (a few hundred KB) that a
# column read is one sequential range, as engines writing Parquet default to (~64-128 MB groups
# at full scale).
ROW_GROUP = 65_536


class TableRead(NamedTuple):
    """A table as read, with the bytes the read took from the file."""

    table: Any  # pyarrow.Table
    bytes_read: int
    file_bytes: int


def make_observations(path: str | os.PathLike, rows: int = 200_000, seed: int = 0) -> Path:
    """Write ``rows`` pixel observations as Parquet: where, when, four bands, cloud probability, quality flag.

    Deterministic from ``seed``; written under a temporary name and moved into place.
    """
    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ValueError(f"rows must be a whole number >= 1, got {rows!r}")
    rng = np.random.default_rng(seed)
    columns: dict[str, Any] = {
        "tile": pa.array(rng.integers(0, 64, rows).astype(np.int16)),
        "acquired": pa.array(np.datetime64("2026-06-01") + rng.integers(0, 90 * 86_400, rows).astype("m8[s]")),
        "x": pa.array(399_960.0 + rng.uniform(0, 40_960, rows)),
        "y": pa.array(5_600_040.0 - rng.uniform(0, 40_960, rows)),
    }
    for b, mean in zip(BANDS, (600, 800, 700, 2600)):
        columns[b] = pa.array(np.clip(rng.normal(mean, mean * 0.3, rows), 1, 10_000).astype(np.uint16))
    columns["cloud"] = pa.array(rng.beta(0.5, 3.0, rows).astype(np.float32))
    columns["quality"] = pa.array(rng.integers(0, 4, rows).astype(np.uint8))
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.table(columns), tmp, row_group_size=ROW_GROUP, compression="snappy")
    os.replace(tmp, path)
    return path


def read_table(path: str | os.PathLike, columns: list[str] | None = None,
               throttle: Throttle | None = None) -> TableRead:
    """Read ``columns`` (None: all) of a Parquet file inside ``hpc.phase("read")``, counting the bytes read."""
    require("pyarrow")
    pq = require("pyarrow.parquet")
    meter = Meter(throttle=throttle or Throttle())
    with phase("read"):
        with CountingFile(path, meter) as f:
            pf = pq.ParquetFile(f)
            if columns is not None:
                unknown = sorted(set(columns) - set(pf.schema_arrow.names))
                if unknown:
                    raise ValueError(f"no column {', '.join(map(repr, unknown))} in {path}: it has "
                                     f"{', '.join(pf.schema_arrow.names)}")
            table = pf.read(columns=columns)
    return TableRead(table, meter.bytes_read, os.path.getsize(path))
