"""``%eugo status``: the runtime's counters (from :mod:`eugo_lab.hpc.counters`) with a price put on them.

Cost = workers x hours since the runtime started x a price per worker-hour, the runtime's
:class:`~eugo_lab.hpc.counters.Rate` (``--price``, ``hpc.init(price_per_worker_hour=...)``, the
``EUGO_LAB_PRICE_PER_WORKER_HOUR`` setting; none of them on your own machine: no bill). It is an
estimate for teaching: an idle cluster bills like a busy one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eugo_lab.hpc.counters import Rate, counters, rate, unfinished_items

__all__ = ["Status", "status", "unfinished_items"]


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
    rate: Rate = field(default_factory=lambda: Rate(None, "own machine"))

    @property
    def cost(self) -> float | None:
        """Workers x elapsed hours x the rate; None where there is no bill."""
        return self.rate.cost(self.workers, self.elapsed)

    def cost_words(self) -> str:
        """``$0.0012 so far at $0.1 per worker-hour (--price)``, or ``on your own machine: no bill``."""
        if self.cost is None:
            return self.rate.words() + " (set a rate: --price P, hpc.init(price_per_worker_hour=P))"
        return f"${self.cost:.4f} so far {self.rate.words()}"


def status(runtime: Any, price: float | None = None, now: float | None = None) -> Status:
    """Describe ``runtime`` (``eugo_lab.hpc.session.current(start=False)``; ``None`` when stopped).

    ``price``: the rate ``%eugo status --price P`` asked for (None: the runtime's own, see
    :func:`eugo_lab.hpc.counters.rate`).
    """
    if runtime is None:
        return Status(running_runtime=False)
    c = counters(runtime, now)
    return Status(running_runtime=True, backend=c.backend, workers=c.workers, running=c.running, queued=c.queued,
                  submitted=c.submitted, elapsed=c.elapsed, idle=c.idle, rate=rate(runtime, price))
