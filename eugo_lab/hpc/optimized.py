"""The function records that carry the JIT to the workers: automatic by default, eager with ``optimize=True``.

By default (no annotation) every call's function is wrapped in
:class:`eugo_lab.jit.auto.AutoJit`, which compiles only what its own measurements say spends
its time in Python bytecode (see that module). ``@hpc.remote(optimize=True)`` and
``%%eugo --optimize`` wrap in :class:`eugo_lab.jit.checked.Optimized` instead: a trial on the
first call with arrays in each worker, however short the function. Off:
``@hpc.remote(optimize=False)`` (this function), ``hpc.init(optimize=False)`` (the runtime),
``%%eugo --no-optimize`` (one cell).

Where the swap happens: the driver submits the function wrapped in
:class:`eugo_lab.jit.checked.Optimized` instead of the function itself. The wrapper is an
ordinary callable, so every worker shim (local pool, Dask, Ray, threads) runs it without
change, and each worker's existing function cache (the local pool's per-worker ``functions``
dict, ``_cluster._load_function``) keeps the one unpickled wrapper, whose verdict and
compiled version are cached per process under the code's hash (see :mod:`eugo_lab.jit.checked`).

The wrapped record is made once per function record and kept, so its pickle is sent once
per worker like any function's.

The JIT's classes come from the contract's provider table (``"jit"``, ``"auto_jit"``): the runtime never
imports the JIT's package, and this module does not register itself: the session adds :func:`jit_trial` to its
wrappers when a runtime starts (this module importing the session back would make a circle).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from eugo_lab.contract import cellrecord
from eugo_lab.contract.hooks import provider
from eugo_lab.contract.refs import ObjectRef
from eugo_lab.contract.task import FunctionRecord
from eugo_lab.hpc.spread import Spread

_jit = provider("jit")
Optimized = _jit.Optimized

# A wrapped record is kept on the record it was made from (FunctionRecord.derived), for the latest cell
# generation only: it lives as long as the function's own record, so a notebook that redefines a function
# in a loop (or calls hpc.map on a plain function, a new record each time) keeps nothing alive, and a
# traced region, which reads every live record's send count, looks at the user's records alone.
_EAGER, _AUTO = "jit", "auto-jit"
_lock = threading.Lock()
# Records of functions declared @hpc.remote(optimize=False): never wrapped (by id: a record lives as long as
# its RemoteFunction, and a recycled id at worst leaves a new function plain).
_opted_out: set[int] = set()
# The names of those submitted go to the cell record open now (CellRecord.opted_out: its report says
# "optimize=False" for each), and the running %%eugo cell's run generation is that record's (0: none): each run's
# workers get fresh wrappers that announce their verdicts, also cached ones, in that run's trace.


def optimized_record(record: FunctionRecord, generation: int = 0) -> FunctionRecord:
    """The record of ``record``'s function wrapped in the JIT trial (made once per generation, then reused).

    ``generation``: each ``%%eugo --optimize`` run gets a new one, so its workers receive a fresh
    wrapper that announces their (cached) verdict in that run's trace; the compiled code itself
    stays cached on the workers under the code's key.
    """
    from eugo_lab.contract.phases import phase

    code_key = _jit.code_key
    spread = isinstance(record.fn, Spread)  # a batch="auto" batch: the function it spreads calls over is wrapped
    fn = record.fn.fn if spread else record.fn
    if isinstance(fn, Optimized) and not generation:
        return record  # optimize=True on the function already: its wrapper travels as given
    with _lock:
        opt = _derived(record, _EAGER, generation)
        if opt is None:
            # The key of the function itself (not of the batch wrapper): batches and the plain calls of a
            # batch="auto" function share one trial and one compiled version per worker.
            key = fn.key if isinstance(fn, Optimized) else code_key(
                record.payload if not spread else FunctionRecord(fn, record.name).payload)
            plain = fn.fn if isinstance(fn, Optimized) else fn
            wrapped = Optimized(plain, key, phase)
            opt = _keep(record, _EAGER, generation, FunctionRecord(Spread(wrapped) if spread else wrapped, record.name))
        return opt


def _derived(record: FunctionRecord, kind: str, gen: int) -> FunctionRecord | None:
    """The record of ``kind`` made from ``record`` for cell generation ``gen``, if there is one."""
    d = record.derived
    made = d.get(kind) if d is not None else None
    return made[1] if made is not None and made[0] == gen else None


def _keep(record: FunctionRecord, kind: str, gen: int, made: FunctionRecord) -> FunctionRecord:
    """Keep ``made`` on ``record`` as its ``kind`` for generation ``gen`` (replacing an earlier one); returns it."""
    if record.derived is None:
        record.derived = {}
    record.derived[kind] = (gen, made)
    return made


def opt_out(record: FunctionRecord) -> FunctionRecord:
    """Mark ``record`` as never to be JIT-compiled (``@hpc.remote(optimize=False)``); returns it."""
    _opted_out.add(record.fid)
    return record


def opted_out(record: FunctionRecord) -> bool:
    """Whether ``record``'s function was declared ``optimize=False``."""
    return record.fid in _opted_out


def auto_record(record: FunctionRecord, gen: int = 0) -> FunctionRecord:
    """The record of ``record``'s function under the automatic JIT (made once per cell generation, then reused).

    A function already wrapped for ``optimize=True`` maps to its own record: its wrapper decides.
    """
    opt = _derived(record, _AUTO, gen)
    if opt is not None:
        return opt
    from eugo_lab.contract.phases import phase

    AutoJit, code_key = provider("auto_jit").AutoJit, _jit.code_key  # noqa: N806 - the class, under its own name
    spread = isinstance(record.fn, Spread)
    fn = record.fn.fn if spread else record.fn
    with _lock:
        if isinstance(fn, Optimized):
            return _keep(record, _AUTO, gen, record)
        if spread:
            key = code_key(FunctionRecord(fn, record.name).payload)
            return _keep(record, _AUTO, gen, FunctionRecord(Spread(AutoJit(fn, key, phase)), record.name))
        plain = record.payload  # pickled once: its hash is the key, and the wrapper's pickle carries these bytes
        key = code_key(plain)
        opt = FunctionRecord(AutoJit(fn, key, phase), record.name)
        # Set here rather than pickled again (~0.4 ms of cloudpickle and the captured globals' sizes per function
        # and cell): the worker unpickles the very bytes it gets without the JIT, inside a small wrapper.
        opt._payload = packed_payload(plain, key, phase)
        opt.captured = record.captured
        return _keep(record, _AUTO, gen, opt)


def packed_payload(plain: bytes, key: str, phase: Any) -> bytes:
    """The pickle of ``AutoJit(fn, key, phase)`` built from ``plain``, the pickle of ``fn`` (no second cloudpickle)."""
    import pickle

    from eugo_lab.contract.serialization import PROTOCOL

    return pickle.dumps(provider("auto_jit").Packed(plain, key, phase), PROTOCOL)


def _arrays_in(args: Any, more: Any) -> bool:
    """A call a JIT could be for: an argument is a NumPy array, a list, or an ``hpc.put`` reference (maybe an array).

    Checked by type name (no NumPy import). A reference is resolved on the worker, where the trial sees what it
    holds: a task that takes ``hpc.put`` arrays gets its trial (and its line in the report) like one taking arrays.
    """
    for a in itertools.chain(args, more):
        t = type(a)
        if t is list or isinstance(a, ObjectRef) or (t.__name__ == "ndarray" and t.__module__ == "numpy"):
            return True
    return False


def jit_trial(rt: Any, record: FunctionRecord, args: tuple, kwargs: dict, items: Any) -> FunctionRecord:
    """Every call carries the automatic JIT (``rt.auto_optimize``); under ``%%eugo --optimize`` the eager trial.

    ``%%eugo --optimize`` (``rt.optimize``): calls with arrays carry the trial of
    :class:`~eugo_lab.jit.checked.Optimized`; a batch qualifies by its first item (a
    ``batch="auto"`` batch: that call's arguments). A function declared ``optimize=False``, or
    ``optimize=True`` (already wrapped), passes unchanged.
    """
    if record.fid in _opted_out:
        cellrecord.target().opted_out.add(record.name)
        return record
    if not rt.optimize:
        fn = record.fn.fn if isinstance(record.fn, Spread) else record.fn
        if isinstance(fn, Optimized):  # optimize=True: its own trial runs whatever else is off (the report says so)
            cellrecord.target().opted_in.add(record.name)
            return record
        # A profile (hpc.profile, %%eugo --profile) measures the code as written: a function compiled
        # halfway through the region would leave its hot lines unsampled and its profile of two programs.
        if not getattr(rt, "auto_optimize", True) or rt.profiling is not None:
            return record
        # Every call pays this line: one look at the record once its wrapped record is made (the worker's wrapper
        # decides the rest).
        gen = cellrecord.generation()
        return _derived(record, _AUTO, gen) or auto_record(record, gen)
    if items is not None:
        # A batch qualifies by its first item; a batch of plain scalars (hpc.map packs those ahead,
        # not a list) holds no array to compile for.
        if not isinstance(items, (list, tuple)) or not items:
            return record
        args, kwargs = items[0] if isinstance(record.fn, Spread) else ((items[0],), {})
    if not _arrays_in(args, kwargs.values()):
        return record
    return optimized_record(record, rt.optimize)

