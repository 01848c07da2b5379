"""Booting the default pool's worker template early, before the runtime's own modules are imported.

Its own module, not the package's ``__init__``: ``hpc.get`` looked up first and ``.remote()`` called
first both start it, and the remote function importing the package back would make a circle.
"""

from __future__ import annotations


def prestart_default_pool() -> None:
    """Boot the default pool's worker template now if the next runtime of this process will be that pool.

    Only in a driver with no runtime yet and no cluster named by ``EUGO_ADDRESS``; never in one
    of the pool's own workers (a task that imports a module which looks up ``hpc.get``), nor in a
    Dask or Ray worker, whose tasks use the cluster they run on (``eugo_lab.hpc.engine_nested``). A
    template no pool takes is closed when a runtime on another engine starts.
    """
    import os
    import sys

    from eugo_lab.settings import ADDRESS_ENV

    running = sys.modules.get("eugo_lab.hpc.session")
    if (running is not None and running._current is not None) or os.environ.get(ADDRESS_ENV) \
            or "eugo_lab.backends.local_worker" in sys.modules or engine_worker() is not None:
        return
    from eugo_lab.backends.local_template import prestart_template

    prestart_template()


def in_pool_worker() -> bool:
    """True in a local-pool worker process whose task loop runs (its tasks reach the driver's runtime)."""
    import sys

    connection = sys.modules.get("eugo_lab.backends.local_nested")
    return connection is not None and connection.client is not None


def engine_worker() -> str | None:
    """``"ray"`` or ``"dask"`` in a process whose engine's task wrapper runs tasks (``_cluster.engine_worker``)."""
    import sys

    cluster = sys.modules.get("eugo_lab.backends._cluster")
    return None if cluster is None else cluster.engine_worker
