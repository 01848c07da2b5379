"""``optimize=True`` and ``%%eugo --optimize``: the function records that carry the JIT trial to the workers.

Where the swap happens: the driver submits the function wrapped in
:class:`eugo_lab.accel.jit.Optimized` instead of the function itself. The wrapper is an
ordinary callable, so every worker shim (local pool, Dask, Ray, threads) runs it without
change, and each worker's existing function cache (the local pool's per-worker ``functions``
dict, ``_cluster._load_function``) keeps the one unpickled wrapper, whose verdict and
compiled version are cached per process under the code's hash (see ``accel.jit``).

The wrapped record is made once per function record and kept, so its pickle is sent once
per worker like any function's.
"""

from __future__ import annotations

import threading

from eugo_lab.hpc.task import FunctionRecord

# function id -> its optimized record. Bounded like the workers' function caches: a notebook that
# redefines a function in a loop must not grow this forever.
_MAX = 256
_records: dict[int, FunctionRecord] = {}
_lock = threading.Lock()


def optimized_record(record: FunctionRecord) -> FunctionRecord:
    """The record of ``record``'s function wrapped in the JIT trial (made once, then reused)."""
    from eugo_lab.accel.jit import Optimized, code_key
    from eugo_lab.hpc.phases import phase

    if isinstance(record.fn, Optimized):
        return record
    with _lock:
        opt = _records.get(record.fid)
        if opt is None:
            opt = FunctionRecord(Optimized(record.fn, code_key(record.payload), phase), record.name)
            _records[record.fid] = opt
            while len(_records) > _MAX:
                _records.pop(next(iter(_records)))
        return opt
