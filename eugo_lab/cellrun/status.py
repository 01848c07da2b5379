"""``%eugo status``: what the runtime is doing and what it has cost so far (kept simple on purpose).

Cost = workers x hours since the runtime started x a price per worker-hour (``--price``).
It is an estimate for teaching: an idle cluster bills like a busy one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

#: Default price per worker-hour (a round number, in the user's currency, for the lesson).
DEFAULT_PRICE = 0.10


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


def unfinished_items(runtime: Any) -> int:
    """Tasks submitted and not finished, counting each ``hpc.map`` item (not each batch) as one.

    ``Runtime.pending_tasks`` counts a map batch of 5,000 items as one task and items not
    sent yet not at all; the counters people read (``%%eugo``'s running/pending, ``%eugo
    status``) are about their items.
    """
    from eugo_lab.hpc.mapping import map_progress

    items, batches = map_progress(runtime)
    return max(int(runtime.pending_tasks) - batches, 0) + items


def status(runtime: Any, price: float = DEFAULT_PRICE, now: float | None = None) -> Status:
    """Describe ``runtime`` (``eugo_lab.hpc.session.current(start=False)``; ``None`` when stopped)."""
    if runtime is None:
        return Status(running_runtime=False, price=price)
    now = time.time() if now is None else now
    workers = int(runtime.backend.info().workers)
    unfinished = unfinished_items(runtime)
    running = min(unfinished, workers)
    idle = 0.0 if unfinished else max(now - runtime.last_activity, 0.0)
    return Status(running_runtime=True, backend=runtime.backend_name, workers=workers, running=running,
                  queued=unfinished - running, submitted=int(runtime.tasks_submitted),
                  elapsed=max(now - runtime.started_at, 0.0), idle=idle, price=price)
