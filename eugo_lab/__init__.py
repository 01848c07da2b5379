"""Eugo Lab: learn to make Python fast, across a cluster and on a GPU, by doing.

``from eugo_lab import hpc`` is the distributed API. Heavy dependencies (NumPy, pandas,
Bokeh, Dask, Ray) are imported only when a feature needs them, so importing the package
stays fast.
"""

__version__ = "0.1.0"

from eugo_lab import hpc  # noqa: E402 - after __version__ so submodules can read it

__all__ = ["hpc", "__version__"]
