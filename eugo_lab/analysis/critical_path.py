"""The critical path: the longest chain of tasks that had to run one after another.

The trace has no dependency column, so the chain is inferred from times the driver
measured: task B *follows* task A when B became ready (``ready``, the moment all its inputs
existed and it went to the backend) no earlier than A's result reached the driver
(``received``). A true data dependency (B was passed A's future) always looks like this,
and so does a driver that waited for A (``get()``) before submitting B.

The path's length counts, for each task on it, its round trip without queueing:
``(received - ready) - queue_wait``. That is the time the chain would take with unlimited
workers, so no number of workers can make the run shorter than the path plus the
driver's own serial time.

``hpc.map`` batches never follow anything: the map feeder submits a batch when an earlier
one returns, which would otherwise read as a chain through the whole map.

Limits: ordering is evidence of a dependency, not proof. A task the driver submitted late
for another reason (it was busy computing) also "follows" every task that finished before
it, so the path is an upper bound of the true dependency chain; a task that depended on
an ``hpc.put`` object or on state outside the trace is invisible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.breakdown import queue_waits
from eugo_lab.analysis.timeline import Units, units, window
from eugo_lab.tracing.trace import Trace

# Two driver timestamps this close count as "at the same time" (float rounding only:
# both come from the driver's clock, and a dependent task is launched after its input's
# result was recorded).
TOLERANCE = 1e-9


@dataclass(frozen=True)
class CriticalPath:
    """The chain of dependent tasks that bounds the run's wall time from below.

    ``task_ids`` are the chain's tasks in order (a map batch appears as its first item),
    ``durations`` each one's round trip without queueing, ``length`` their sum,
    ``fraction`` = ``length / wall_time``.
    """

    task_ids: tuple[int, ...]
    functions: tuple[str, ...]
    durations: tuple[float, ...]
    length: float
    wall_time: float

    @property
    def fraction(self) -> float:
        """Share of the wall time the chain accounts for (0 when the wall time is 0)."""
        return self.length / self.wall_time if self.wall_time > 0 else 0.0

    def __len__(self) -> int:
        return len(self.task_ids)


def chain_weights(u: Units, q: np.ndarray | None = None) -> np.ndarray:
    """Per unit: ``(received - ready) - queue_wait``, the unit's round trip with a free worker."""
    if q is None:
        q = queue_waits(u)
    return np.maximum(u.received - u.ready - q, 0.0)


def predecessors(u: Units) -> tuple[np.ndarray, np.ndarray]:
    """Units sorted by ``(ready, received)`` and, per position, how many units had been received by then.

    Returns ``(order, n_done)``: ``order`` sorts units by ready time; ``by_rcv = argsort(received)``;
    the units ``by_rcv[:n_done[k]]`` are those whose result arrived no later than unit
    ``order[k]`` became ready (its inferred predecessors).
    """
    order = np.lexsort((u.received, u.ready))
    by_rcv = np.argsort(u.received, kind="stable")
    n_done = np.searchsorted(u.received[by_rcv], u.ready[order] + TOLERANCE, side="right")
    return order, n_done


def critical_path(trace: Trace) -> CriticalPath:
    """Infer the longest chain of tasks that ran one after another (see the module docstring)."""
    u = units(trace)
    wall = window(trace).length
    n = len(u)
    if n == 0:
        return CriticalPath((), (), (), 0.0, wall)
    w = chain_weights(u)
    order, n_done = predecessors(u)
    by_rcv = np.argsort(u.received, kind="stable")
    best = np.zeros(n)
    prev = np.full(n, -1)
    run_best, run_arg, ptr = 0.0, -1, 0
    for k, j in enumerate(order):
        while ptr < n_done[k]:
            i = by_rcv[ptr]
            if best[i] > run_best:
                run_best, run_arg = best[i], i
            ptr += 1
        if u.is_batch[j]:
            # hpc.map sends its next batch when an earlier one returns: that is the feeder
            # pacing itself, not a data dependency, so a batch starts a chain of its own.
            best[j], prev[j] = w[j], -1
        else:
            best[j] = w[j] + run_best
            prev[j] = run_arg
    j = int(np.argmax(best))
    chain = []
    while j >= 0:
        chain.append(j)
        j = int(prev[j])
    chain.reverse()
    funcs = trace.functions
    return CriticalPath(
        task_ids=tuple(int(u.task_id[c]) for c in chain),
        functions=tuple(funcs[int(u.function[c])] for c in chain),
        durations=tuple(float(w[c]) for c in chain),
        length=float(sum(w[c] for c in chain)),
        wall_time=wall,
    )
