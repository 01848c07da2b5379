"""``optimize=True`` and ``%%eugo --optimize``: the function records that carry the JIT trial to the workers.

Where the swap happens: the driver submits the function wrapped in
:class:`eugo_lab.jit.checked.Optimized` instead of the function itself. The wrapper is an
ordinary callable, so every worker shim (local pool, Dask, Ray, threads) runs it without
change, and each worker's existing function cache (the local pool's per-worker ``functions``
dict, ``_cluster._load_function``) keeps the one unpickled wrapper, whose verdict and
compiled version are cached per process under the code's hash (see :mod:`eugo_lab.jit.checked`).

The wrapped record is made once per function record and kept, so its pickle is sent once
per worker like any function's.
"""

from __future__ import annotations

import threading

from eugo_lab.hpc.task import FunctionRecord

# (function id, cell generation) -> its optimized record. Bounded like the workers' function caches:
# a notebook that redefines a function in a loop must not grow this forever.
_MAX = 256
_records: dict[tuple[int, int], FunctionRecord] = {}
_lock = threading.Lock()


def optimized_record(record: FunctionRecord, generation: int = 0) -> FunctionRecord:
    """The record of ``record``'s function wrapped in the JIT trial (made once per generation, then reused).

    ``generation``: each ``%%eugo --optimize`` run gets a new one, so its workers receive a fresh
    wrapper that announces their (cached) verdict in that run's trace; the compiled code itself
    stays cached on the workers under the code's key.
    """
    from eugo_lab.hpc.coalesce import _Spread
    from eugo_lab.hpc.phases import phase
    from eugo_lab.jit.checked import Optimized, code_key

    spread = isinstance(record.fn, _Spread)  # a batch="auto" batch: the function it spreads calls over is wrapped
    fn = record.fn.fn if spread else record.fn
    if isinstance(fn, Optimized) and not generation:
        return record  # optimize=True on the function already: its wrapper travels as given
    with _lock:
        opt = _records.get((record.fid, generation))
        if opt is None:
            # The key of the function itself (not of the batch wrapper): batches and the plain calls of a
            # batch="auto" function share one trial and one compiled version per worker.
            key = fn.key if isinstance(fn, Optimized) else code_key(
                record.payload if not spread else FunctionRecord(fn, record.name).payload)
            plain = fn.fn if isinstance(fn, Optimized) else fn
            wrapped = Optimized(plain, key, phase)
            opt = FunctionRecord(_Spread(wrapped) if spread else wrapped, record.name)
            _records[(record.fid, generation)] = opt
            while len(_records) > _MAX:
                _records.pop(next(iter(_records)))
        return opt
