"""``eugo_lab.hpc``: distributed Python with a decorator, futures and ``get()``.

Example::

    from eugo_lab import hpc

    @hpc.remote
    def square(x):
        return x * x

    futures = [square.remote(i) for i in range(10)]   # returns at once
    print(hpc.get(futures))                            # [0, 1, 4, ...]

The same code runs on the embedded local pool (default), Dask or Ray: ``hpc.init(backend=...)``.

Names load on first use (PEP 562): worker processes import only the few modules that run
tasks, which keeps a worker's start-up short.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "eugo_lab.hpc.api": ("as_completed", "cancel", "cluster", "get", "init", "is_initialized", "last_optimizations",
                         "last_trace", "map", "put", "shutdown", "trace", "wait"),
    "eugo_lab.hpc.errors": ("BackendError", "FunctionLoadError", "GetTimeoutError", "HpcError", "MemoryLimitExceeded",
                            "NoWorkersError", "RemoteTraceback", "SerializationError", "TaskCancelled",
                            "TaskCancelledError", "TaskError", "WorkerCrashedError", "WorkerMemoryError"),
    "eugo_lab.hpc.future": ("Future",),
    "eugo_lab.hpc.mapping": ("MapResult",),
    "eugo_lab.hpc.objects": ("ObjectRef",),
    "eugo_lab.hpc.phases": ("phase",),
    "eugo_lab.hpc.remote_function": ("RemoteFunction", "remote"),
    "eugo_lab.profile.region": ("profile",),  # profiling lives in its own package (eugo_lab/profile)
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'eugo_lab.hpc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
