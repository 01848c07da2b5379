"""The function a coalesced batch runs: one item is one ``.remote()`` call's ``(args, kwargs)``.

Its own module, with nothing else in it: a worker unpickles it for every ``batch="auto"`` batch,
and the automatic JIT looks for it on every call; neither should import the coalescer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Spread:
    """Runs one coalesced call: a batch item is ``(args, kwargs)``."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable):
        self.fn = fn

    def __reduce__(self) -> tuple:
        return Spread, (self.fn,)

    def __call__(self, item: tuple) -> Any:
        """The call one item stands for: ``fn(*args, **kwargs)``."""
        args, kwargs = item
        return self.fn(*args, **kwargs)
