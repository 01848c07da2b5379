"""Running one task body on a worker: the same code on every backend.

``execute`` deserializes the arguments, runs the function, times the body (wall clock and
CPU), collects ``hpc.phase`` spans, pickles the result and captures any exception with its
traceback. It never raises: everything that happens becomes part of the returned outcome,
so a bad return value or a broken exception cannot take a worker down.

Timestamps: ``start`` is ``time.time()`` on the worker (wall clock, comparable across
processes of one host); every duration is measured with ``perf_counter`` and added to it,
so a wall-clock step during the task cannot produce negative durations. Lining up clocks
of *different hosts* is the driver's job (see ``eugo_lab.tracing``).
"""

from __future__ import annotations

import time
import traceback
from array import array
from collections.abc import Callable
from typing import Any

import cloudpickle

from eugo_lab.hpc import phases as _phase
from eugo_lab.hpc.errors import HpcError, SerializationError
from eugo_lab.hpc.serialization import PROTOCOL, dumps_value, loads_args

OK = 0
ERROR = 1

# stats tuple layout, shared with the driver's recorder:
# (start_wall, body_s, cpu_s, deser_s, ser_s, bytes_in, bytes_out, phases, item_ends)
# item_ends (map batches only): float64 bytes, one per item (8 bytes each on the wire,
# one object to unpickle, read by the recorder without conversion).
Stats = tuple


class TaskError(HpcError):
    """Stands in for a task exception that could not itself be pickled back to the driver."""


def _pickle_exception(exc: BaseException) -> bytes:
    try:
        return cloudpickle.dumps(exc, protocol=PROTOCOL)
    except Exception:  # noqa: BLE001 - any failure: send a picklable stand-in
        return cloudpickle.dumps(TaskError(f"{type(exc).__qualname__}: {exc}"), protocol=PROTOCOL)


def _format_tb(exc: BaseException) -> tuple[list[tuple[str, int, str, str]], str]:
    """The traceback as frames plus the exception line, for the driver to format.

    Source lines are looked up where the code lives: a frame whose file the worker cannot
    read (a notebook cell) keeps an empty line, and the driver fills it from its own
    ``linecache``, which holds the cells' source.
    """
    # Drop this module's own frame: the user's code is what they need to see.
    tb = exc.__traceback__
    if tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frames = [(f.filename, f.lineno or 0, f.name, f.line or "") for f in traceback.extract_tb(tb)]
    return frames, "".join(traceback.format_exception_only(type(exc), exc))


def _phase_offsets(phases: list, t0: float) -> list | None:
    if not phases:
        return None
    return [(name, s - t0, e - t0, cpu) for name, s, e, cpu in phases]


def execute(
    fn: Callable,
    function: str,
    args_bytes: bytes,
    load_token: Callable[[Any], Any] | None = None,
    cpu_clock: Callable[[], float] = time.process_time,
    buffers: Any = None,
) -> tuple[int, bytes, Any, Stats]:
    """Run ``fn`` on pickled arguments; return ``(status, payload, traceback, stats)``.

    ``payload`` is the pickled result when ``status == OK``, else the pickled exception.
    ``buffers`` are the out-of-band buffers of large arguments (see ``dumps_args``).
    ``cpu_clock`` is ``process_time`` where a process runs one task at a time (the local
    pool: this counts BLAS threads too) and ``thread_time`` on multi-threaded workers.
    """
    start_wall = time.time()
    p0 = time.perf_counter()
    p1 = p0
    c0 = cpu_clock()
    phases = _phase.begin_task()
    try:
        args, kwargs = loads_args(args_bytes, load_token, buffers)
        p1 = time.perf_counter()
        c0 = cpu_clock()
        value = fn(*args, **kwargs)
        status = OK
    except BaseException as exc:  # noqa: BLE001 - reported, never raised on the worker
        status, value, tb = ERROR, exc, _format_tb(exc)
    finally:
        _phase.end_task()
    p2 = time.perf_counter()
    cpu = cpu_clock() - c0
    if status == OK:
        try:
            payload = dumps_value(value)
            tb = None
        except Exception as exc:  # noqa: BLE001 - the worker must survive a bad result
            err = SerializationError(
                f"the value returned by {function}() could not be pickled: a "
                f"{type(value).__qualname__} ({exc}). Return plain data (numbers, arrays, "
                "dicts) or save the object to a file and return its path."
            )
            status, payload, tb = ERROR, _pickle_exception(err), _format_tb(err)
    else:
        payload = _pickle_exception(value)
    p3 = time.perf_counter()
    stats = (start_wall, p2 - p1, cpu, p1 - p0, p3 - p2, len(args_bytes), len(payload),
             _phase_offsets(phases, p1), None)
    return status, payload, tb, stats


def execute_batch(
    fn: Callable,
    function: str,
    args_bytes: bytes,
    load_token: Callable[[Any], Any] | None = None,
    cpu_clock: Callable[[], float] = time.process_time,
    buffers: Any = None,
) -> tuple[int, bytes, dict | None, Stats]:
    """Run ``fn(item)`` for every item of a pickled batch (``hpc.map``).

    Returns ``(OK, pickled list of results, errors, stats)``; ``errors`` maps an item's
    index to ``(pickled exception, traceback)`` and its slot in the list holds ``None``.
    ``stats[-1]`` holds each item's end (float64 bytes) as an offset from the body's start, so the trace
    can show every item as its own task.
    """
    start_wall = time.time()
    p0 = time.perf_counter()
    (items,), _ = loads_args(args_bytes, load_token, buffers)
    p1 = time.perf_counter()
    c0 = cpu_clock()
    results: list = []
    errors: dict | None = None
    ends = array("d")
    perf = time.perf_counter
    for i, item in enumerate(items):
        try:
            results.append(fn(item))
        except BaseException as exc:  # noqa: BLE001 - per item, reported
            results.append(None)
            if errors is None:
                errors = {}
            errors[i] = (_pickle_exception(exc), _format_tb(exc))
        ends.append(perf() - p1)
    p2 = time.perf_counter()
    cpu = cpu_clock() - c0
    try:
        payload = dumps_value(results)
    except Exception:  # noqa: BLE001 - find the item(s) at fault, keep the rest
        good = []
        for i, value in enumerate(results):
            try:
                dumps_value(value)
                good.append(value)
            except Exception as exc:  # noqa: BLE001
                good.append(None)
                err = SerializationError(
                    f"the value returned by {function}() for item {i} could not be pickled: "
                    f"a {type(value).__qualname__} ({exc})."
                )
                errors = errors or {}
                errors[i] = (_pickle_exception(err), _format_tb(err))
        payload = dumps_value(good)
    p3 = time.perf_counter()
    stats = (start_wall, p2 - p1, cpu, p1 - p0, p3 - p2, len(args_bytes), len(payload), None, ends.tobytes())
    return OK, payload, errors, stats
