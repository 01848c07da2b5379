"""The one flat exception tree of ``eugo_lab.hpc``.

Every error a user can meet from the runtime is defined here, so ``except hpc.HpcError``
catches all of them and each subclass also derives from the builtin a Python user would
reach for first (``SerializationError`` is a ``TypeError``, ``GetTimeoutError`` a
``TimeoutError``). Messages say what happened, the likely cause and what to do next.

Exceptions raised *inside* a task are not wrapped in a type of ours: ``get()`` re-raises
them as their own type (see :func:`remote_exception`), so ``except ValueError`` works.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HpcError",
    "SerializationError",
    "WorkerCrashedError",
    "WorkerMemoryError",
    "TaskCancelledError",
    "cancelled",
    "GetTimeoutError",
    "NoWorkersError",
    "BackendError",
    "RemoteTraceback",
    "remote_exception",
]


class HpcError(Exception):
    """Base class of every error raised by the ``eugo_lab.hpc`` runtime itself."""


class SerializationError(HpcError, TypeError):
    """A function, argument, captured variable or return value could not be pickled."""


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


class BackendError(HpcError):
    """The execution engine (local pool, Dask, Ray) failed or could not be reached."""


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
        except Exception:  # pragma: no cover - exotic exception types
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
