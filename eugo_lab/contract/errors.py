"""The one flat exception tree of ``eugo_lab.hpc``.

Every error a user can meet from the runtime is defined here, so ``except hpc.HpcError``
catches all of them and each subclass also derives from the builtin a Python user would
reach for first (``SerializationError`` is a ``TypeError``, ``GetTimeoutError`` a
``TimeoutError``). Messages say what happened, the likely cause and what to do next.

Exceptions raised *inside* a task are not wrapped in a type of ours: ``get()`` re-raises
them as their own type (see :func:`remote_exception`), so ``except ValueError`` works.

Two exceptions are raised by the runtime *inside* a running task, the same type on every
engine, so a task can clean up (``try: ... except hpc.TaskCancelled: ...; raise``):
:class:`TaskCancelled` (the task was cancelled while it ran) and
:class:`MemoryLimitExceeded` (it outgrew its ``memory=`` limit). Both derive from
``BaseException``, like ``KeyboardInterrupt``, so a task's usual ``except Exception`` does
not swallow them. The driver never receives them: ``get()`` raises
:class:`TaskCancelledError` and :class:`WorkerMemoryError` instead.

The tree::

    HpcError (Exception)
    |-- SerializationError (also TypeError)     an argument, capture or result cannot be pickled
    |-- TaskError                               stands in for a task exception that could not be pickled
    |-- WorkerCrashedError                      the worker died on every attempt
    |   `-- WorkerMemoryError (also MemoryError) stopped at its memory limit
    |-- TaskCancelledError                      cancelled (hpc.cancel, Interrupt, a cancelled input)
    |-- GetTimeoutError (also TimeoutError)     get/wait/as_completed ran out of time
    |-- NoWorkersError                          no worker can run it
    |   `-- ResourceRequestError                cpus=/gpus=/resources=/memory= that no worker can give
    `-- BackendError                            the engine failed or went away
        `-- FunctionLoadError (also ImportError) a worker could not load the task's function
    TaskCancelled (BaseException)               raised inside a running task that was cancelled
    MemoryLimitExceeded (BaseException)         raised inside a task over its memory limit
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eugo_lab.contract.outcome import Crash

__all__ = [
    "HpcError",
    "SerializationError",
    "TaskError",
    "FunctionLoadError",
    "function_load_error",
    "TaskCancelled",
    "MemoryLimitExceeded",
    "WorkerCrashedError",
    "WorkerMemoryError",
    "TaskCancelledError",
    "cancelled",
    "GetTimeoutError",
    "NoWorkersError",
    "ResourceRequestError",
    "BackendError",
    "describe_exit",
    "crash_error",
    "RemoteTraceback",
    "remote_exception",
]


class HpcError(Exception):
    """Base class of every error raised by the ``eugo_lab.hpc`` runtime itself."""


class SerializationError(HpcError, TypeError):
    """A function, argument, captured variable or return value could not be pickled."""


class TaskError(HpcError):
    """Stands in for a task's exception that could not itself be pickled back to the driver."""


class WorkerCrashedError(HpcError):
    """The worker process running a task died (killed, segfault, out of memory) on every attempt."""

    def __init__(self, message: str, *, function: str = "", attempts: int = 0, exit_code: int | None = None):
        super().__init__(message)
        self.function = function
        self.attempts = attempts
        self.exit_code = exit_code


class WorkerMemoryError(WorkerCrashedError, MemoryError):
    """A task grew past its worker's memory limit and was stopped (``limit``, ``observed`` in bytes)."""

    def __init__(self, message: str, *, limit: int = 0, observed: int = 0, **kwargs: Any):
        super().__init__(message, **kwargs)
        self.limit = limit
        self.observed = observed


class TaskCancelledError(HpcError):
    """The future was cancelled (by ``hpc.cancel``, an interrupt, or a cancelled dependency)."""


def cancelled(function: str, task_id: int,
              why: str = "it was cancelled (hpc.cancel or an Interrupt)") -> TaskCancelledError:
    """The one wording of a cancellation: which task, why, and what to do about it."""
    return TaskCancelledError(
        f"task {function}() (task {task_id}) did not finish: {why}. Its result is gone; call "
        f"{function}.remote(...) again if you still need it."
    )


class GetTimeoutError(HpcError, TimeoutError):
    """``get()``/``wait()`` ran out of time; the futures stay alive and can be waited on again."""


class NoWorkersError(HpcError):
    """No worker is available to run tasks and none came back in time."""


class ResourceRequestError(NoWorkersError):
    """A task asks for what no worker of the cluster can give: ``cpus=``, ``gpus=``, ``resources=``, ``memory=``.

    More cores than any worker has, GPUs or resources no worker offers, or a memory limit
    an engine cannot enforce (the ``threads`` backend). The same type on every engine,
    raised by ``get()`` at once (the task never runs, never quietly without what it asked
    for); the message names the request, what the cluster has, and what to do. ``request``
    holds what was asked (``{"GPU": 1}``, ``{"CPU": 64}``, ``{"memory": 2**30}``).
    """

    def __init__(self, message: str, *, request: dict[str, float] | None = None):
        super().__init__(message)
        self.request = dict(request or {})

    def __reduce__(self) -> tuple:  # keeps ``request`` across pickling (Dask and Ray carry errors pickled)
        return (_resource_request_error, (str(self), self.request))


def _resource_request_error(message: str, request: dict[str, float]) -> ResourceRequestError:
    return ResourceRequestError(message, request=request)


class BackendError(HpcError):
    """The execution engine (local pool, Dask, Ray) failed or could not be reached."""


class FunctionLoadError(BackendError, ImportError):
    """A worker could not load the task's function (a module it needs is missing there); never retried."""


def function_load_error(function: str, exc: BaseException) -> FunctionLoadError:
    """The one wording, on every engine, of a worker that could not unpickle a task's function."""
    import os
    import socket

    return FunctionLoadError(
        f"the function {function}() could not be loaded on a worker ({socket.gethostname()}, pid {os.getpid()}): "
        f"{type(exc).__name__}: {exc}. Functions defined in a module are sent by reference: make that module "
        "importable on every worker (install it, or keep it next to the notebook), with the packages it "
        "imports in the same versions as on the driver."
    )


class TaskCancelled(BaseException):  # named for what happened, like KeyboardInterrupt
    """Raised *inside* a running task that was cancelled; the same type on every engine that stops tasks.

    Catch it only to clean up, then re-raise: a task that swallows it is killed with its
    worker process after the grace period (``hpc.init(cancel_grace=...)``).
    """


class MemoryLimitExceeded(BaseException):  # named for what happened, like KeyboardInterrupt
    """Raised *inside* a task whose worker grew past the task's memory limit (Dask and Ray).

    The driver never sees it: the attempt is reported as a memory stop and ``hpc.get``
    raises :class:`WorkerMemoryError`. (The local pool stops such a task by killing its
    worker process from the driver.)
    """


def describe_exit(code: int | None) -> str:
    """``-9`` -> ``signal 9 (SIGKILL)``; ``1`` -> ``exit code 1``."""
    if code is None:
        return "an unknown exit status"
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def crash_error(function: str, task_id: int, attempts: int, crash: Crash, item: int | None = None) -> HpcError:
    """The error ``get()`` raises for a task whose last attempt lost its worker, by what happened.

    ``item``: the task is that item (its position in the input) of an ``hpc.map``, and is named so.
    """
    from eugo_lab.contract import outcome
    from eugo_lab.units import fmt_bytes

    task = f"task {function}() (task {task_id})" if item is None else \
        f"item {item} of hpc.map({function}, ...) (task {task_id})"
    if crash.kind == outcome.MEMORY:
        limit = crash.limit
        killed = ""
        if crash.baseline is None:  # the local pool: the worker process's whole resident memory
            used = f"its worker used {fmt_bytes(crash.used, '.2f')}"
        else:  # Dask and Ray: what the task added to a worker process that runs other things too
            used = (f"it grew its worker's memory by {fmt_bytes(crash.used, '.2f')} (from "
                    f"{fmt_bytes(crash.baseline, '.2f')} to {fmt_bytes(crash.baseline + crash.used, '.2f')})")
            if crash.exit_code is not None:
                killed = "; it did not stop when asked, so its worker process was killed"
        return WorkerMemoryError(
            f"{task} was stopped on attempt {attempts}: {used}, over the {fmt_bytes(limit, '.2f')} memory "
            f"limit{killed}. It was not retried, since it would grow the same way again. Next step: process the "
            "input in smaller pieces (more, smaller partitions), or raise the limit with @hpc.remote(memory=...) "
            "or hpc.init(memory_limit=...).",
            function=function, attempts=attempts,
            exit_code=crash.exit_code, limit=limit, observed=crash.used,
        )
    if crash.kind == outcome.NO_WORKERS:
        return NoWorkersError(f"{task} cannot run: {crash.message}")
    if crash.kind == outcome.ENGINE_LOST:
        return BackendError(f"{task} did not finish: {crash.message}")
    plural = "s" if attempts != 1 else ""
    return WorkerCrashedError(
        f"{task} killed its worker on every attempt ({attempts} attempt{plural}); the last worker died with "
        f"{describe_exit(crash.exit_code)}. Likely causes: the task used more memory than the machine has and "
        "the OS killed it, a C extension crashed, or something outside killed the process. Next step: call "
        f"{function}() directly on one input in the notebook to see the failure, or give it more memory "
        "(fewer workers, smaller partitions).",
        function=function, attempts=attempts, exit_code=crash.exit_code,
    )


class RemoteTraceback(Exception):
    """Carries the worker-side traceback text; attached as ``__cause__`` of a re-raised error."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n" + self.text


def format_remote_traceback(tb: Any) -> str:
    """Text of a worker traceback sent as ``(frames, exception line)``; fills missing source lines here."""
    if tb is None:
        return ""
    if isinstance(tb, str):
        return tb
    import linecache

    frames, exc_line = tb
    out = ["Traceback (most recent call last):\n"]
    for filename, lineno, name, line in frames:
        line = line or linecache.getline(filename, lineno).strip()
        out.append(f'  File "{filename}", line {lineno}, in {name}\n')
        if line:
            out.append(f"    {line}\n")
    out.append(exc_line)
    return "".join(out)


_subclass_cache: dict[tuple[type, str], type] = {}


def _task_error_type(base: type[BaseException]) -> type[BaseException] | None:
    """A subclass of ``base`` that shows our message; cached per base type.

    We keep the *same name* as the original type so tracebacks read ``ValueError: ...``,
    and ``isinstance(err, ValueError)`` holds. Some builtins cannot be subclassed
    (``bool``-like finals) or need special constructor arguments; those return ``None``
    and the caller falls back to the original object.
    """
    key = (base, "task")
    if key in _subclass_cache:
        return _subclass_cache[key]

    def __str__(self: BaseException) -> str:  # noqa: N807 - dunder on a generated type
        return self._eugo_message  # type: ignore[attr-defined]

    try:
        cls = type(base.__name__, (base,), {"__str__": __str__, "__module__": base.__module__})
        cls.__qualname__ = base.__qualname__
    except TypeError:
        return None
    _subclass_cache[key] = cls
    return cls


def remote_exception(exc: BaseException, *, function: str, traceback_text: str, context: str) -> BaseException:
    """Rebuild a task's exception on the driver as the same type, with the task named in it.

    ``context`` is a short phrase such as ``"attempt 1 of 4 on worker 0"``. The worker's
    traceback becomes the ``__cause__`` (IPython and plain Python both print it above the
    driver's traceback, like loky does). The original object stays at ``.original``.
    """
    message = f"task {function}() failed ({context}): {type(exc).__name__}: {exc}"
    cls = _task_error_type(type(exc))
    new: BaseException
    if cls is not None:
        try:
            new = cls.__new__(cls)
            new.__dict__.update(getattr(exc, "__dict__", {}))
            new.args = exc.args
            new._eugo_message = message  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001  # pragma: no cover - exotic exception types keep the original object
            new = exc
    else:  # pragma: no cover - exotic exception types
        new = exc
    try:
        new.original = exc  # type: ignore[attr-defined]
        new.function = function  # type: ignore[attr-defined]
        new.remote_traceback = traceback_text  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - exceptions with __slots__
        pass
    new.__cause__ = RemoteTraceback(traceback_text)
    return new
