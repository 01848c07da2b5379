"""What the runtime is doing right now, counted the way people read it: tasks and ``hpc.map`` items.

One source for every display of it: ``%eugo status`` and the ``%%eugo`` counters
(``eugo_lab.cellrun`` words them), and the status each kernel publishes for the Jupyter
server and its panel (:mod:`eugo_lab.hpc.status`). Cheap: no engine call but one
``info()``, no per-task work, so a display can poll it several times a second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eugo_lab.contract.base import engine

if TYPE_CHECKING:
    from eugo_lab.hpc.session import Runtime

#: The example price per worker-hour of a remote cluster no rate was set for: a round number, in the
#: user's currency, for the lessons. A pool on your own machine gets no bill unless a rate is set.
DEFAULT_PRICE = 0.10


@dataclass(frozen=True)
class Rate:
    """The price a runtime is billed at, and where it came from (every display of a cost shows both).

    ``per_worker_hour`` None: no bill (a pool on your own machine with no rate set).
    """

    per_worker_hour: float | None
    source: str  # "--price", "hpc.init(price_per_worker_hour=...)", the settings variable, or "example rate"

    def cost(self, workers: int, elapsed: float) -> float | None:
        """Workers x elapsed hours x the rate (an idle cluster bills like a busy one); None: no bill."""
        return None if self.per_worker_hour is None else workers * elapsed / 3600.0 * self.per_worker_hour

    def words(self) -> str:
        """``at $0.1 per worker-hour (example rate)`` or ``on your own machine: no bill``."""
        if self.per_worker_hour is None:
            return "on your own machine: no bill"
        return f"at ${self.per_worker_hour:g} per worker-hour ({self.source})"


def on_own_machine(runtime: Runtime) -> bool:
    """True when the runtime's workers run on this machine: the local pool, threads, or an engine's own cluster."""
    d = engine(runtime.backend_name)
    if d is not None and d.local:  # its descriptor says it runs on this machine only (the pool, threads)
        return True
    be = runtime.backend  # Dask and Ray: started here unless given an address (or, for Dask, a cluster)
    return getattr(be, "address", "remote") is None and getattr(be, "cluster", None) is None


def rate(runtime: Runtime | None, price: float | None = None) -> Rate:
    """The rate to bill ``runtime`` at (``None``: no runtime).

    ``price`` (``%eugo status --price``), else the runtime's ``hpc.init(price_per_worker_hour=...)``,
    else :data:`~eugo_lab.settings.PRICE_ENV`, else no bill on your own machine and
    :data:`DEFAULT_PRICE` (an example) for a remote cluster.

    A malformed settings variable raises ValueError naming it (a bill must never be a guess).
    """
    import os

    from eugo_lab.settings import PRICE_ENV

    if price is not None:
        return Rate(float(price), "--price")
    own = getattr(runtime, "price_per_worker_hour", None)
    if own is not None:
        return Rate(float(own), "hpc.init(price_per_worker_hour=...)")
    env = os.environ.get(PRICE_ENV, "").strip()
    if env:
        try:
            value = float(env)
        except ValueError:
            value = -1.0
        if not value >= 0 or value == float("inf"):
            raise ValueError(f"{PRICE_ENV}={env!r} is not a price: set it to a number >= 0 per worker-hour, "
                             "e.g. 0.096, or unset it")
        return Rate(value, PRICE_ENV)
    if runtime is None or on_own_machine(runtime):
        return Rate(None, "own machine")
    return Rate(DEFAULT_PRICE, "example rate: set yours with hpc.init(price_per_worker_hour=...)")


@dataclass(frozen=True)
class Counters:
    """A snapshot of one running runtime."""

    backend: str
    workers: int
    running: int  # tasks (map items) running now: at most one per worker
    queued: int  # submitted, not finished, not running
    submitted: int  # tasks submitted since the runtime started (a map batch counts once)
    elapsed: float  # seconds since the runtime started
    idle: float  # seconds since the last task finished, while nothing is unfinished (else 0)


def unfinished_items(runtime: Runtime) -> int:
    """Tasks submitted and not finished, counting each ``hpc.map`` item (not each batch) as one.

    ``Runtime.pending_tasks`` counts a map batch of 5,000 items as one task and items not
    sent yet not at all; the counters people read are about their items.
    """
    from eugo_lab.hpc.mapping import map_progress

    items, batches = map_progress(runtime)
    return max(int(runtime.pending_tasks) - batches, 0) + items


def counters(runtime: Runtime, now: float | None = None) -> Counters:
    """The counters of ``runtime`` at ``now`` (default: the current time)."""
    now = time.time() if now is None else now
    workers = int(runtime.backend.info().workers)
    unfinished = unfinished_items(runtime)
    running = min(unfinished, workers)
    idle = 0.0 if unfinished else max(now - runtime.last_activity, 0.0)
    return Counters(backend=runtime.backend_name, workers=workers, running=running, queued=unfinished - running,
                    submitted=int(runtime.tasks_submitted), elapsed=max(now - runtime.started_at, 0.0), idle=idle)


def change_key(runtime: Runtime | None) -> tuple:
    """What a new status would differ in; cheaper than :func:`counters` (no engine call), for pollers."""
    if runtime is None or runtime._closed:
        return (None,)
    from eugo_lab.hpc.mapping import map_progress

    return (id(runtime), runtime.tasks_submitted, runtime.tasks_finished, runtime.pending_tasks,
            map_progress(runtime), bool(runtime.recorder.active))
