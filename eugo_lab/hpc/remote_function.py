"""``@hpc.remote``: turn a function into a remote function."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, overload

from eugo_lab.contract.task import FunctionRecord, TaskOptions, validate_options
from eugo_lab.hpc.future import Future
from eugo_lab.hpc.prestart import in_pool_worker, prestart_default_pool
from eugo_lab.tracing.driver_calls import unwatched

if TYPE_CHECKING:
    from eugo_lab.hpc.mapping import MapResult

_session_module: Any = None


def _session() -> Any:
    # Imported on first use (the runtime pulls in the backends), then kept: an import
    # statement in .remote() itself cost ~2 us on every call.
    global _session_module
    if _session_module is None:
        if in_pool_worker():  # a task on the local pool: the driver's runtime, through the worker's pipes
            from eugo_lab.hpc import nested

            _session_module = nested
            return nested
        prestart_default_pool()
        from eugo_lab.hpc import (
            engine_nested,  # noqa: F401 - a task on Dask or Ray: session finds that cluster
            session,
        )

        _session_module = session
    return _session_module


def display_name(fn: Callable) -> str:
    """``Class.method`` or ``function``; the ``outer.<locals>.`` prefix of nested functions is noise."""
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return qualname.rsplit("<locals>.", 1)[-1]


class RemoteFunction:
    """A function that runs as a task with ``.remote(...)`` and as plain Python when called.

    ``f(x)`` runs here, now, as ordinary Python; ``f.remote(x)`` returns an
    :class:`~eugo_lab.hpc.Future` at once and runs on a worker; ``f.options(gpus=1)``
    returns a copy with different options for the calls made through it.
    """

    def __init__(self, fn: Callable, options: TaskOptions, record: FunctionRecord | None = None):
        if not callable(fn):
            raise TypeError(f"@hpc.remote needs a function, got {type(fn).__name__}")
        self._fn = fn
        self._options = options
        self._record = record or FunctionRecord(fn, display_name(fn))
        self._coalescer: Any = None  # batch="auto": made on the first .remote() (eugo_lab.hpc.coalesce)
        if options.optimize is not None:  # True: the JIT trial travels with it; False: never (eugo_lab.hpc.optimized)
            from eugo_lab.hpc.optimized import opt_out, optimized_record

            self._record = optimized_record(self._record) if options.optimize else opt_out(self._record)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function here, now, as plain Python."""
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<hpc.remote function {self.function_name}>"

    @property
    def function_name(self) -> str:
        """The name tasks of this function carry in traces and errors."""
        return self._options.name or self._record.name

    @unwatched  # the runtime's own work: not counted, and not slowed, by a graded cell's call monitor
    def remote(self, *args: Any, **kwargs: Any) -> Future:
        """Submit one call; returns its future immediately."""
        rt = _session().current()
        # batch="auto": coalesce tiny calls (eugo_lab.hpc.coalesce), on the driver; a task's own calls go one by one
        if self._options.batch is not None and not getattr(rt, "nested", False):
            return self._coalesced(args, kwargs)
        return rt.submit(self._record, args, kwargs, self._options)  # type: ignore[union-attr]

    def _coalesced(self, args: tuple, kwargs: dict) -> Future:
        if self._coalescer is None:
            from eugo_lab.hpc.coalesce import Coalescer

            self._coalescer = Coalescer(self._record, self._options, self.function_name)
        return self._coalescer.submit(args, kwargs)

    def options(self, **overrides: Any) -> RemoteFunction:
        """A copy with some options changed (``cpus``, ``gpus``, ``memory``, ``retries``, ...)."""
        unknown = set(overrides) - set(TaskOptions.__dataclass_fields__)
        if unknown:
            valid = ", ".join(sorted(TaskOptions.__dataclass_fields__))
            raise TypeError(f"unknown option(s) {', '.join(sorted(unknown))}; valid options: {valid}")
        opts = self._options.merged(**overrides)
        plain = getattr(self._record.fn, "fn", None) if not opts.optimize and self._options.optimize else None
        record = self._record if plain is None else FunctionRecord(plain, self._record.name)
        return RemoteFunction(self._fn, opts, record)

    @unwatched
    def map(self, iterable: Iterable, batch: int | str = "auto") -> MapResult:
        """Same as ``hpc.map(self, iterable, batch=batch)``."""
        from eugo_lab.hpc.mapping import map_items

        rt = _session().running()
        if getattr(rt, "nested", False):  # inside a task on the local pool: one child task per item
            return rt.map(self, iterable, batch)  # type: ignore[attr-defined]
        return map_items(rt, self._record, iterable, self._options, batch)


@overload
def remote(fn: Callable, *, cpus: float = 1, gpus: float = 0, memory: int | str | None = None, retries: int = 3,
           retry_exceptions: Any = (), name: str | None = None,
           resources: dict[str, float] | None = None, optimize: bool | None = None,
           batch: str | None = None) -> RemoteFunction: ...


@overload
def remote(fn: None = None, *, cpus: float = 1, gpus: float = 0, memory: int | str | None = None, retries: int = 3,
           retry_exceptions: Any = (), name: str | None = None,
           resources: dict[str, float] | None = None, optimize: bool | None = None,
           batch: str | None = None) -> Callable[[Callable], RemoteFunction]: ...


def remote(fn: Callable | None = None, *, cpus: float = 1, gpus: float = 0, memory: int | str | None = None,
           retries: int = 3, retry_exceptions: Any = (), name: str | None = None,
           resources: dict[str, float] | None = None, optimize: bool | None = None,
           batch: str | None = None) -> RemoteFunction | Callable[[Callable], RemoteFunction]:
    """Decorator: ``@hpc.remote`` or ``@hpc.remote(cpus=1, gpus=0, retries=3, ...)``.

    - ``retries``: how many times a task is re-run when its worker dies (crash, kill).
    - ``retry_exceptions``: exception classes (or ``True`` for any) that also trigger a re-run.
    - ``memory``: bytes the task may use (a task that outgrows it is stopped: ``WorkerMemoryError``;
      the threads backend cannot enforce it and refuses it).
    - ``cpus``: cores the task needs. The local pool holds ``cpus`` of its one-core workers for it
      while it runs (a fraction rounds up), the embedded Dask cluster reserves that many of a
      worker's threads (its ``CPU`` resource), Ray its ``num_cpus``; the threads backend refuses
      more than 1. A request no worker can meet raises ``ResourceRequestError`` at once.
    - ``gpus``/``resources``: GPUs and custom resources it needs from a worker (refused the same way).
    - ``name``: the name shown in traces and errors (default: the function's qualified name).
    - ``optimize``: ``None`` (default): the runtime's automatic JIT, which compiles only functions whose
      measured time is in Python bytecode; ``True``: try Numba on the first call in each worker; ``False``:
      never. Either way a compiled version is kept only if its result matches the plain one and it is
      faster (see the README, "Automatic optimizations").
    - ``batch="auto"``: ``.remote()`` calls of a function measured as tiny (< 1 ms) are coalesced
      into batch tasks; each call keeps its own future.
    """
    opts = validate_options(TaskOptions(cpus=cpus, gpus=gpus, memory=memory, retries=retries,
                                        retry_exceptions=retry_exceptions, name=name,
                                        resources=dict(resources or {}), optimize=optimize, batch=batch))
    if fn is None:
        return lambda f: _wrap(f, opts)
    return _wrap(fn, opts)


def _wrap(fn: Any, opts: TaskOptions) -> RemoteFunction:
    if isinstance(fn, RemoteFunction):
        raise TypeError("this function is already an hpc.remote function; use .options(...) to change its options")
    if isinstance(fn, type):
        # Ray turns a class into an actor; here .remote() would build the object on a worker
        # and send a copy back, silently losing every later change: refuse instead.
        raise TypeError(
            f"hpc.remote takes a function, and {fn.__name__} is a class: stateful remote objects "
            "(Ray's actors) are not part of hpc. Decorate a function that creates the object and "
            "does the work, keep the state in the notebook and pass it to tasks, or share "
            "read-only data with hpc.put()."
        )
    if not callable(fn):
        raise TypeError(f"hpc.remote takes a function, got {type(fn).__name__} {fn!r:.80}")
    _refuse_generators(fn)
    if inspect.ismethod(fn) and not isinstance(fn.__self__, type):
        _warn_bound_method(fn)
    return RemoteFunction(fn, opts)


def _refuse_generators(fn: Any) -> None:
    """Refuse, at decoration, a function whose call returns a generator or coroutine instead of running.

    Its task would "succeed" at once and then fail in ``get()``: a generator or coroutine object
    cannot travel back from the worker, and its body would never have run there.
    """
    target = getattr(fn, "__func__", fn)
    name = display_name(fn)
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise TypeError(
            f"hpc.remote cannot run {name}(): it is a generator function (it uses yield), so calling it on a "
            "worker only creates a generator, which cannot be sent back and whose body would not run. "
            "Return a list instead (return [ ... ] or return list(...)), or make one item's work a plain function "
            "and submit it with hpc.map(function, items)."
        )
    if inspect.iscoroutinefunction(target):
        raise TypeError(
            f"hpc.remote cannot run {name}(): it is an async function, so calling it on a worker only creates a "
            "coroutine, which cannot be sent back and whose body would not run. Make it a plain def (tasks "
            "already run in parallel), or run it with asyncio.run() inside a plain function."
        )


# Bound methods already warned about (class qualified name, method name): one warning per method.
_warned_methods: set[tuple[str, str]] = set()


def _warn_bound_method(method: Any) -> None:
    """Say once, per method, that a bound method's tasks run on a copy of its object in each worker."""
    obj = method.__self__
    cls = type(obj).__qualname__
    key = (f"{type(obj).__module__}.{cls}", method.__name__)
    if key in _warned_methods:
        return
    _warned_methods.add(key)
    warnings.warn(
        f"hpc.remote got {cls}.{method.__name__}, a method bound to one object: that object is copied to "
        f"each worker with the task, so every change {method.__name__}() makes to its state (self.x = ..., "
        "appending to a list) stays in that worker's copy: the object in the notebook never changes, and "
        "workers' copies differ from each other. Return the new state from the task and keep it in the "
        "notebook (state = hpc.get(step.remote(state, x))), or use an engine with stateful actors "
        "(Ray's @ray.remote classes) for objects that must live on a worker.",
        UserWarning, stacklevel=4,
    )
