"""What the notebook handed its tasks by value: to tell a task that returns a value it was given.

A cell can compute an exercise's answer here in the notebook and pass it to tasks that only hand
it back (``f.remote(data_ref, seed, answer)`` with ``return answer``; a dict of answers looked up
by the task). The values then come from the tasks' results, through get(), and every check of
where a value came from holds. What gives it away is that each task returned a number it was
sent. While :func:`collecting` is on (an exercise cell's runs), every submission on every path
(``.remote()``, ``hpc.map``'s items, Dask's ``submit``/``map``, Ray's ``.remote()``) notes the
digests of the numbers among its arguments, and of those one level inside a list, tuple or
dict argument (two for ``hpc.map``'s items, each a tuple of arguments), per function. Futures,
object references and arrays are not numbers given: what a task reads through them is its input.

Off (the default, every other cell), a submission pays one read of a module global.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from eugo_lab.contract.digest import Digest, digest

#: Elements of one container argument looked at (a longer one is data, not a handful of answers).
MAX_ELEMENTS = 10_000

_NUMBERS = (int, float, complex)


def is_number(v: Any) -> bool:
    """A number (int, float, complex or a NumPy scalar), not a bool."""
    t = type(v)
    if t is bool:
        return False
    if t in _NUMBERS:
        return True
    return getattr(t, "__module__", "") == "numpy" and hasattr(v, "dtype") and getattr(v, "ndim", 1) == 0


class Given:
    """Digests of the numbers each function's tasks were sent by value, by function name."""

    def __init__(self) -> None:
        self.digests: dict[str, set[Digest]] = {}
        self._lock = threading.Lock()

    def add(self, function: str, values: Iterable[Any]) -> None:
        """Note the numbers among ``values`` (a call's arguments), and those one level inside a container."""
        found: list[Digest] = []
        _collect(values, 1, found)
        if found:
            with self._lock:
                self.digests.setdefault(function, set()).update(found)

    def sent(self, function: str, value: Any) -> bool:
        """Whether ``value`` is a number ``function``'s tasks were sent by value."""
        return is_number(value) and digest(value) in self.digests.get(function, ())


def _collect(values: Iterable[Any], depth: int, out: list[Digest]) -> None:
    for v in values:
        if is_number(v):
            out.append(digest(v))
        elif depth > 0:
            t = type(v)
            if t is list or t is tuple:
                if len(v) <= MAX_ELEMENTS:
                    _collect(v, depth - 1, out)
            elif t is dict and len(v) <= MAX_ELEMENTS:
                _collect(v.values(), depth - 1, out)


_active: tuple[Given, ...] = ()
_active_lock = threading.Lock()


@contextlib.contextmanager
def collecting() -> Iterator[Given]:
    """While the block runs, note what every submission sends by value; yields the :class:`Given` it fills."""
    global _active
    given = Given()
    with _active_lock:
        _active = (*_active, given)
    try:
        yield given
    finally:
        with _active_lock:
            _active = tuple(g for g in _active if g is not given)


def note(function: str, args: Iterable[Any], kwargs: dict[str, Any] | None = None) -> None:
    """A submission of ``function`` with ``args`` (and ``kwargs``): noted while :func:`collecting` is on.

    Off, this is one read of a module global: callers pass what they already hold, nothing built for it.
    """
    if not _active:
        return
    values = [*args, *(kwargs or {}).values()]
    for given in _active:
        given.add(function, values)
