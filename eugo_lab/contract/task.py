"""What the runtime hands a backend: a function record, task options and one task."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from eugo_lab.contract.serialization import captured_sizes, dumps_function
from eugo_lab.units import parse_bytes

#: ``Task.state`` when the runtime hands a task (or its next attempt) to an engine: nothing done with it yet.
#: The states after it are each engine's own (the local pool: sent, done; the thread pool: ended).
TASK_STATE_NEW = 0

_function_ids = itertools.count(1)
# Every function record alive in this process: a traced region reads their send counts when it
# opens and closes (Recorder.open_region), which tells it what the region shipped.
_live: weakref.WeakSet[FunctionRecord] = weakref.WeakSet()
# Records sent while a traced region is open, held until the last region closes: a region must still
# see what it shipped when the user dropped the function (and its futures) before the region ended.
_sent_while_traced: dict[int, FunctionRecord] | None = None


class FunctionRecord:
    """A remote function's identity and its pickled code, pickled once and sent once per worker.

    ``sends`` counts the payload's trips to workers, added to by each engine where it sends it:
    the local pool once per worker process, Dask and Ray with every task (the payload is an
    argument of each submitted task). ``captured`` names what the pickle carries besides the
    code: the globals and closure cells the function uses, measured once with the payload.
    """

    __slots__ = ("fid", "name", "fn", "_payload", "sends", "captured", "derived", "__weakref__")

    def __init__(self, fn: Callable, name: str):
        self.fid = next(_function_ids)
        self.name = name
        self.fn = fn
        self._payload: bytes | None = None
        self.sends = 0
        #: ``((name, bytes), ...)`` of the captured globals and closure cells, largest first.
        self.captured: tuple[tuple[str, int], ...] = ()
        #: Records the runtime's wrappers made from this one (the JIT's), each under its wrapper's name as
        #: ``(generation, record)``: they live as long as this record, and no longer.
        self.derived: dict[str, tuple[int, FunctionRecord]] | None = None
        _live.add(self)

    @property
    def payload(self) -> bytes:
        """The cloudpickled function (raises ``SerializationError`` naming a bad capture)."""
        if self._payload is None:
            self._payload = dumps_function(self.fn, function=self.name)
            self.captured = captured_sizes(self.fn, len(self._payload))
        return self._payload

    def count_send(self) -> None:
        """Note one trip of the payload to a worker (each engine calls this where it sends it)."""
        self.sends += 1
        kept = _sent_while_traced
        if kept is not None:
            kept[self.fid] = self

    @property
    def captured_bytes(self) -> int:
        """Bytes of the function's pickle that its captured globals and closure cells account for."""
        return sum(n for _, n in self.captured)


def live_records() -> list[FunctionRecord]:
    """The function records a traced region compares the ``sends`` of: those alive, and those sent while it was open."""
    records = {rec.fid: rec for rec in list(_live)}
    records.update(_sent_while_traced or {})
    return list(records.values())


def keep_sent_records(keep: bool) -> None:
    """Hold every record sent from now on alive (``True``: a region opened) or let them go (``False``)."""
    global _sent_while_traced
    if keep:
        if _sent_while_traced is None:
            _sent_while_traced = {}
    else:
        _sent_while_traced = None


@dataclass(frozen=True)
class TaskOptions:
    """Per-function options of ``@hpc.remote``; ``.options()`` makes a modified copy."""

    cpus: float = 1
    gpus: float = 0
    memory: int | str | None = None
    retries: int = 3
    retry_exceptions: tuple[type[BaseException], ...] | bool = ()
    name: str | None = None
    resources: dict[str, float] = field(default_factory=dict)
    # JIT with Numba where a trial on the worker shows it checked and faster: None (default) automatically, for
    # functions measured to spend their time in Python bytecode; True on the first call; False never
    optimize: bool | None = None
    batch: str | None = None  # "auto": coalesce tight loops of .remote() calls of a tiny function

    def merged(self, **overrides: Any) -> TaskOptions:
        """A copy with ``overrides`` applied, each validated."""
        return validate_options(replace(self, **overrides))


def validate_options(opts: TaskOptions) -> TaskOptions:
    """Check every option; raise ``ValueError``/``TypeError`` naming the bad one."""
    if not isinstance(opts.cpus, (int, float)) or opts.cpus <= 0:
        raise ValueError(f"cpus must be a positive number, got {opts.cpus!r}")
    if not isinstance(opts.gpus, (int, float)) or opts.gpus < 0:
        raise ValueError(f"gpus must be 0 or a positive number, got {opts.gpus!r}")
    object.__setattr__(opts, "memory", parse_bytes(opts.memory, "memory"))
    if not isinstance(opts.retries, int) or isinstance(opts.retries, bool) or opts.retries < 0:
        raise ValueError(f"retries must be an int >= 0, got {opts.retries!r}")
    rex = opts.retry_exceptions
    if rex is not True and rex is not False:
        if isinstance(rex, type):
            rex = (rex,)
        rex = tuple(rex)
        bad = [r for r in rex if not (isinstance(r, type) and issubclass(r, BaseException))]
        if bad:
            raise TypeError(f"retry_exceptions must be exception classes or True, got {bad!r}")
        object.__setattr__(opts, "retry_exceptions", rex)
    if opts.optimize is not None and not isinstance(opts.optimize, bool):
        raise TypeError(f"optimize must be None (automatic), True or False, got {opts.optimize!r}")
    if opts.batch not in (None, "auto"):
        raise ValueError(f"batch must be 'auto' or None, got {opts.batch!r} (hpc.map takes batch sizes)")
    if opts.name is not None and not isinstance(opts.name, str):
        raise TypeError(f"name must be a string, got {opts.name!r}")
    return opts


class Task:
    """One unit of work as an engine sees it: a single call, or a batch of ``hpc.map`` items.

    It carries what an engine needs to run an attempt and nothing of the runtime's own
    bookkeeping: futures, batch items, argument tokens and callbacks stay in the runtime's
    pending record (:class:`eugo_lab.hpc.pending.Pending`, a subclass), so an engine never
    touches a ``Future``.
    """

    __slots__ = (
        "task_id",
        "fn",
        "args",
        "options",
        "attempt",
        "label",
        "is_batch",
        "item_count",
        "deps_payload",
        "submit_time",
        "batch_id",
        "state",
        "backend_data",
        "ready_time",
        "staged",
        "probe",
        "parent",
        "alone",
    )

    def __init__(self, task_id: int, fn: FunctionRecord, args: bytes, options: TaskOptions, label: str, *,
                 item_count: int = 0, submit_time: float = 0.0, batch_id: int = -1):
        self.task_id = task_id
        self.fn = fn
        self.args = args
        self.options = options
        self.attempt = 1
        self.label = label  # the name the trace and the engine's dashboard show
        self.is_batch = item_count > 0  # an hpc.map batch: the body runs once per item
        self.item_count = item_count
        self.deps_payload: dict[int, bytes] | None = None  # results of the futures it was passed, by task id
        self.submit_time = submit_time
        self.batch_id = batch_id
        self.state = TASK_STATE_NEW  # backend-private bookkeeping from here on
        self.backend_data: Any = None  # backend-private
        self.ready_time = 0.0  # when every input existed and the task went to the backend
        self.staged: Any = None  # the backend's handle to large argument buffers (out of band)
        # Submitted inside a traced region: the worker reports what it saw (TaskStats.facts).
        # Off, the worker does nothing more than before.
        self.probe = False
        # The task whose body submitted this one (a task that submits tasks), -1 for one the driver
        # submitted: the local pool lets a parent waiting on its children run them on its own stack.
        self.parent = -1
        # A batch whose every item runs as a group of its own on the worker: the items of a group a worker
        # died in, sent again so that a second death names its item (see hpc.mapping._Batch.finish).
        self.alone = False

    def __repr__(self) -> str:
        return f"<Task {self.fn.name} {self.task_id} attempt {self.attempt}>"
