"""Real workloads for the courses: code that runs inside tasks, on real files.

- :mod:`eugo_lab.workloads.geotiles`: satellite-like GeoTIFF tiles and the read / resample /
  write-a-Cloud-Optimized-GeoTIFF pipeline of course 4, each step inside an ``hpc.phase``.
- :mod:`eugo_lab.workloads.tables`: a Parquet table and reads with and without column selection.
- :mod:`eugo_lab.workloads.storage`: counting the bytes a reader really takes from a file, and
  :class:`~eugo_lab.workloads.storage.Throttle`, a model of network object storage.

The file libraries (rasterio, pyarrow) are the ``courses`` extra and are imported on first use,
so ``pip install eugo-lab`` without extras still imports this package.
"""

from __future__ import annotations

import importlib
from types import ModuleType

COURSES_EXTRA = 'pip install "eugo-lab[courses]"'


def require(module: str) -> ModuleType:
    """Import ``module`` (rasterio, pyarrow.parquet, ...) or raise ImportError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise ImportError(f"{top} is not installed: the course workloads read and write real files with it; "
                          f"{COURSES_EXTRA} (rasterio and pyarrow) and restart the kernel") from exc
