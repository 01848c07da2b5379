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

if TYPE_CHECKING:
    from eugo_lab.hpc.session import Runtime

#: Default price per worker-hour: a round number, in the user's currency, for the lessons.
DEFAULT_PRICE = 0.10


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

    def cost(self, price: float = DEFAULT_PRICE) -> float:
        """Workers x elapsed hours x ``price`` per worker-hour: an idle cluster bills like a busy one."""
        return self.workers * self.elapsed / 3600.0 * price


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
