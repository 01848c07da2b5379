"""``%eugo status``: the runtime's counters (from :mod:`eugo_lab.hpc.counters`) with a price put on them.

Cost = workers x hours since the runtime started x a price per worker-hour (``--price``).
It is an estimate for teaching: an idle cluster bills like a busy one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eugo_lab.hpc.counters import DEFAULT_PRICE, counters, unfinished_items

__all__ = ["DEFAULT_PRICE", "Status", "status", "unfinished_items"]


@dataclass(frozen=True)
class Status:
    """A snapshot of the runtime for ``%eugo status``."""

    running_runtime: bool
    backend: str = ""
    workers: int = 0
    running: int = 0
    queued: int = 0
    submitted: int = 0
    elapsed: float = 0.0
    idle: float = 0.0
    price: float = DEFAULT_PRICE

    @property
    def cost(self) -> float:
        """Workers x elapsed hours x price."""
        return self.workers * self.elapsed / 3600.0 * self.price


def status(runtime: Any, price: float = DEFAULT_PRICE, now: float | None = None) -> Status:
    """Describe ``runtime`` (``eugo_lab.hpc.session.current(start=False)``; ``None`` when stopped)."""
    if runtime is None:
        return Status(running_runtime=False, price=price)
    c = counters(runtime, now)
    return Status(running_runtime=True, backend=c.backend, workers=c.workers, running=c.running, queued=c.queued,
                  submitted=c.submitted, elapsed=c.elapsed, idle=c.idle, price=price)
