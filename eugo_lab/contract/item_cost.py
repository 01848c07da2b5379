"""What one item of a function's work costs, as a running estimate: one estimator for every batch size.

``hpc.map`` sizes its batches with it, ``batch="auto"`` coalescing sizes its batches and tells
tiny functions from slow ones with it, and the local pool sizes how much work a worker may
prefetch with it. Each feeds it the timings its tasks report (:class:`~eugo_lab.contract.row.TaskStats`)
and asks how many items fill a span of time.
"""

from __future__ import annotations

from typing import Any

#: Weight of a new timing in the running estimate: a function whose items get slower (or faster)
#: is followed within a few batches, while one noisy timing moves the estimate only half way.
ALPHA = 0.5
#: The smallest per-item cost a size is computed from: a body timed at 0 (a clock tick too coarse
#: for it) would otherwise ask for an unbounded batch.
FLOOR_SECONDS = 1e-7


def task_seconds(stats: Any) -> float:
    """What an attempt cost its worker: the body, unpickling the arguments and pickling the result."""
    return stats.body + stats.deser + stats.ser


class ItemCost:
    """A running estimate of seconds per item; ``None`` until the first timing arrives."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float | None = None):
        self.seconds = seconds

    def add(self, seconds: float, items: int = 1, weight: float = 1.0) -> None:
        """Take in ``seconds`` measured for ``items`` items; ``weight`` (0-1) scales how far it moves the estimate."""
        est = seconds / max(1, items)
        old = self.seconds
        self.seconds = est if old is None else old + ALPHA * weight * (est - old)

    def items_in(self, span: float, default: float | None = None) -> int:
        """How many items fill ``span`` seconds (0: not one); ``default``: the cost assumed before any timing."""
        per = self.seconds if self.seconds is not None else default
        if per is None:
            raise ValueError("no timing yet and no default cost per item")
        return int(span / max(per, FLOOR_SECONDS))
