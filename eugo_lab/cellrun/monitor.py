"""What a graded cell's functions did in the notebook's process: the cell side of :mod:`eugo_lab.tracing.driver_calls`.

``%%eugo --exercise`` runs its main run under :func:`watching`: every function defined in the
notebook's cells, and every Python function the namespace held before the cell (a task function
imported from a module, plain or behind ``@hpc.remote``), is counted when it runs in the driver outside a task. The
count goes into the trace's ``meta`` (:data:`~eugo_lab.tracing.driver_calls.META_KEY`), where a
checker reads it (:func:`eugo_lab.exercises.measure.driver_calls`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from types import CodeType
from typing import Any

from eugo_lab.jit.auto import AutoJit
from eugo_lab.tracing.driver_calls import META_KEY, VALUES_KEY, DriverCalls


def cell_files(shell: Any) -> set[str]:
    """The file names IPython compiled the notebook's cells under (tracebacks' ``Cell In[N]``)."""
    return set(getattr(shell.compile, "_filename_map", {}) or ())


def namespace_codes(namespace: dict[str, Any]) -> set[CodeType]:
    """The code of each Python function the namespace holds, plain or behind ``@hpc.remote`` (wherever defined).

    A task function imported from a module is watched too, not only the ones the cells define.
    """
    out = set()
    for name, value in list(namespace.items()):
        # IPython's and the runtime's own names (_, __eugo_cell_jit__) and bound methods (an object's
        # machinery) are not the cell's functions
        if name.startswith("_") or inspect.ismethod(value):
            continue
        fn = value
        for _ in range(3):  # @hpc.remote over the automatic JIT's wrapper over the function
            inner = getattr(fn, "__wrapped__", None)
            if inner is None:
                break
            fn = inner
        code = getattr(fn, "__code__", None)
        if isinstance(code, CodeType):
            out.add(code)
    return out


@contextlib.contextmanager
def watching(shell: Any, region: Any, values_of: tuple[str, ...] = ()) -> Iterator[DriverCalls]:
    """Count the cell's functions' calls in the driver while the block runs; note them on ``region`` after it.

    ``values_of``: the functions whose calls are also kept by value (given objects, returned object),
    handed to the trace as a live fact (``trace.live``, :data:`~eugo_lab.tracing.driver_calls.VALUES_KEY`).
    The hook is removed when the block ends, whatever ended it (an error, an Interrupt).
    """
    calls = DriverCalls(cell_files(shell), namespace_codes(shell.user_ns), wrappers=(AutoJit.__call__.__code__,),
                        values_of=values_of)
    try:
        with calls:
            yield calls
    finally:
        region.note(META_KEY, calls.calls)
        if values_of:
            region.keep(VALUES_KEY, {"calls": calls.values, "dropped": calls.values_dropped})
