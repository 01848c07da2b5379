"""``eugo_lab.hpc``: distributed Python with a decorator, futures and ``get()``.

Example::

    from eugo_lab import hpc

    @hpc.remote
    def square(x):
        return x * x

    futures = [square.remote(i) for i in range(10)]   # returns at once
    print(hpc.get(futures))                            # [0, 1, 4, ...]

A pandas analysis runs on row partitions of a DataFrame, one task each, and the results
are joined: ``hpc.map_partitions(summarize, df, partitions="auto")``.

The same code runs on the embedded local pool (default), Dask or Ray: ``hpc.init(backend=...)``.

Names load on first use (PEP 562): worker processes import only the few modules that run
tasks, which keeps a worker's start-up short.
"""

from __future__ import annotations

import importlib
import sys as _sys

from eugo_lab.hpc.prestart import engine_worker, in_pool_worker

# typing.TYPE_CHECKING without importing typing (~5 ms with the re, enum and collections it
# imports): hpc.init() starts the worker template first, and everything before that delays it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eugo_lab.contract.base import ClusterInfo

_EXPORTS = {
    "eugo_lab.hpc.api": ("as_completed", "cancel", "cluster", "get", "is_initialized", "last_optimizations",
                         "last_trace", "map", "put", "shutdown", "trace", "wait"),
    "eugo_lab.contract.errors": ("BackendError", "FunctionLoadError", "GetTimeoutError", "HpcError",
                                 "MemoryLimitExceeded", "NoWorkersError", "RemoteTraceback", "ResourceRequestError",
                                 "SerializationError", "TaskCancelled", "TaskCancelledError", "TaskError",
                                 "WorkerCrashedError", "WorkerMemoryError"),
    "eugo_lab.hpc.future": ("Future",),
    "eugo_lab.hpc.mapping": ("MapResult",),
    "eugo_lab.contract.refs": ("ObjectRef",),
    "eugo_lab.hpc.partitions": ("map_partitions",),
    "eugo_lab.contract.phases": ("phase",),
    "eugo_lab.hpc.remote_function": ("RemoteFunction", "remote"),
    "eugo_lab.hpc.profiling": ("profile",),  # the region; the profiler itself is eugo_lab/profile
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted([*_WHERE, "init"])


def _report_to_server() -> None:
    """In a kernel of a Jupyter server with this package's extension, publish every runtime change there.

    Importing :mod:`eugo_lab.hpc.status` subscribes its publisher to the runtime being set; a
    plain script or a kernel without the extension (no status folder) imports nothing more.
    """
    import os

    from eugo_lab.settings import STATUS_DIR_ENV

    if os.environ.get(STATUS_DIR_ENV):
        importlib.import_module("eugo_lab.hpc.status")


_report_to_server()


def init(backend: str | None = None, workers: int | None = None, *, address: str | None = None,
         cluster: Any = None, **options: Any) -> ClusterInfo:
    """Start the runtime explicitly and return :func:`cluster` info.

    ``backend``: ``"local"`` (default: worker processes on this machine) or another name
    from ``eugo_lab.backends.available()``; ``workers``: how many (default: usable cores);
    ``address``: an existing Dask scheduler or Ray cluster; ``cluster``: a Dask cluster
    manager; other options go to the engine (``memory_limit``, ``cancel_grace``,
    ``idle_timeout``, ...). Calling ``init`` again replaces the running runtime (its pending
    tasks are cancelled). It returns once the workers are up, so a traced region that
    follows measures tasks, not worker start-up.

    Defined here rather than in ``api`` so that, for the local pool, the process its workers
    are forked from starts first and boots while the runtime's own modules are imported
    (~20 ms of CPU each).
    """
    if in_pool_worker():
        from eugo_lab.contract.errors import BackendError

        raise BackendError("hpc.init() was called inside a task: a task on the local pool uses the driver's "
                           "runtime (its .remote(), get, wait, put and map go there), and a pool of its own would "
                           "compete with the pool for the same cores. Call hpc.init() on the driver, before the "
                           "tasks start.")
    engine = engine_worker()
    if engine is not None:
        from eugo_lab.contract.errors import BackendError

        raise BackendError(f"hpc.init() was called inside a task on the {engine} engine: a task "
                           "there uses the cluster it runs on (its .remote(), get, wait, put and map go there), and "
                           "a runtime of its own would start a private pool inside the worker. Call hpc.init() on "
                           "the driver, before the tasks start.")
    options = {**options, "address": address, "cluster": cluster}
    if backend in (None, "local") and address is None and cluster is None:
        import os

        from eugo_lab.settings import ADDRESS_ENV

        if backend == "local" or not os.environ.get(ADDRESS_ENV):
            from eugo_lab.backends.local_template import prestart_template

            prestart_template()
    from eugo_lab.hpc.api import init as api_init

    try:
        return api_init(backend, workers, **options)
    except BaseException:
        from eugo_lab.backends.local_template import discard_prestarted

        discard_prestarted()
        raise


# The names whose use needs this process's runtime. ``hpc.get(f.remote(x))`` looks up ``get``
# before ``.remote()`` runs, and the lookup imports the runtime (~25 ms): the default pool's
# worker template starts first, so that its boot overlaps those imports instead of following them.
_NEEDS_RUNTIME = frozenset({"as_completed", "get", "map", "map_partitions", "put", "wait"})


# Inside a task on the local pool these come from eugo_lab.hpc.nested: the driver's runtime through
# the worker's pipes, without importing the runtime's own modules into the worker.
_IN_TASK = frozenset({"as_completed", "cancel", "get", "map", "put", "wait"})


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'eugo_lab.hpc' has no attribute {name!r}")
    if name in _IN_TASK and in_pool_worker():
        module = "eugo_lab.hpc.nested"
    if name in _NEEDS_RUNTIME and "eugo_lab.hpc.session" not in _sys.modules:
        from eugo_lab.hpc.prestart import prestart_default_pool

        prestart_default_pool()
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
