"""``eugo_lab.hpc``: distributed Python with a decorator, futures and ``get()``.

Example::

    from eugo_lab import hpc

    @hpc.remote
    def square(x):
        return x * x

    futures = [square.remote(i) for i in range(10)]   # returns at once
    print(hpc.get(futures))                            # [0, 1, 4, ...]

The same code runs on the embedded local pool (default), Dask or Ray: ``hpc.init(backend=...)``.
"""

from eugo_lab.hpc.api import (
    as_completed,
    cancel,
    cluster,
    get,
    init,
    is_initialized,
    last_trace,
    map,
    put,
    shutdown,
    trace,
    wait,
)
from eugo_lab.hpc.errors import (
    BackendError,
    GetTimeoutError,
    HpcError,
    NoWorkersError,
    RemoteTraceback,
    SerializationError,
    TaskCancelledError,
    WorkerCrashedError,
    WorkerMemoryError,
)
from eugo_lab.hpc.future import Future
from eugo_lab.hpc.objects import ObjectRef
from eugo_lab.hpc.phases import phase
from eugo_lab.hpc.remote import RemoteFunction, remote

__all__ = [
    "remote", "RemoteFunction", "Future", "ObjectRef",
    "init", "shutdown", "cluster", "is_initialized",
    "get", "wait", "as_completed", "cancel", "put", "map", "phase", "trace", "last_trace",
    "HpcError", "SerializationError", "WorkerCrashedError", "WorkerMemoryError", "TaskCancelledError",
    "GetTimeoutError", "NoWorkersError", "BackendError", "RemoteTraceback",
]
