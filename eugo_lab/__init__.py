"""Eugo Lab: learn to make Python fast, across a cluster and on a GPU, by doing.

``from eugo_lab import hpc`` is the distributed API. Heavy dependencies (NumPy, pandas,
Bokeh, Dask, Ray) are imported only when a feature needs them, so importing the package
stays fast.
"""

__version__ = "0.1.0"

__all__ = ["hpc", "__version__"]


def __getattr__(name: str):  # noqa: ANN202 - PEP 562 hook
    if name == "hpc":
        import importlib

        return importlib.import_module("eugo_lab.hpc")
    raise AttributeError(f"module 'eugo_lab' has no attribute {name!r}")
