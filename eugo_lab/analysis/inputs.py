"""What the analyses accept as a trace, checked once at each public entry point."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from eugo_lab.tracing.region import NOT_ENDED, Region
from eugo_lab.tracing.trace import Trace

F = TypeVar("F", bound=Callable[..., Any])


def as_trace(obj: Any, function: str) -> Trace:
    """``obj`` as a :class:`Trace`: a Trace, or the object of ``with hpc.trace() as t`` once its block ended."""
    if isinstance(obj, Trace):
        return obj
    if isinstance(obj, Region):
        if obj.trace is None:
            raise TypeError(f"{function}(): {NOT_ENDED}")
        return obj.trace
    raise TypeError(f"{function}() takes a Trace (from 'with hpc.trace() as t', hpc.last_trace() or "
                    f"Trace.load(path)), got {type(obj).__name__}")


def takes_trace(fn: F) -> F:
    """Decorator: the first argument goes through :func:`as_trace` (a clear error for anything else)."""

    @functools.wraps(fn)
    def wrapper(trace: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(as_trace(trace, fn.__name__), *args, **kwargs)

    return wrapper  # type: ignore[return-value]
