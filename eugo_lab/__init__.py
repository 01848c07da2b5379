"""Eugo Lab: learn to make Python fast, across a cluster and on a GPU, by doing.

``from eugo_lab import hpc`` is the distributed API. Heavy dependencies (NumPy, pandas,
Bokeh, Dask, Ray, IPython) are imported only when a feature needs them, so importing the
package stays fast.
"""

__version__ = "0.1.0"

__all__ = ["hpc", "__version__", "load_ipython_extension"]


def __getattr__(name: str):  # PEP 562 hook
    if name == "hpc":
        import importlib

        return importlib.import_module("eugo_lab.hpc")
    raise AttributeError(f"module 'eugo_lab' has no attribute {name!r}")


def load_ipython_extension(ipython):  # IPython's hook
    """``%load_ext eugo_lab``: register the ``%%eugo`` cell magic and the ``%eugo`` line magic."""
    from eugo_lab.magics import load

    load(ipython)


def _jupyter_server_extension_points():  # Jupyter's hook
    """Lets ``jupyter server extension enable eugo_lab`` find :mod:`eugo_lab.server`."""
    return [{"module": "eugo_lab.server"}]


def _jupyter_labextension_paths():  # JupyterLab's hook (`jupyter labextension develop .`)
    """The built JupyterLab extension (``labextension/`` compiled into ``eugo_lab/labextension``)."""
    return [{"src": "labextension", "dest": "eugo-lab-labextension"}]
