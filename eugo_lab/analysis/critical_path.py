"""The critical path: the longest chain of tasks that had to run one after another.

Task B *follows* task A when B could not start before A's result existed. Two things
make that happen:

- **Data**: B was passed A's future. Traces recorded by this version hold these edges
  exactly (``trace.deps``, meta ``deps_recorded``).
- **The driver**: B was submitted only after A's result reached the driver (a ``get()``
  between them, or code that used A's result to decide B). The runtime records the plain
  case, B passed the very value a ``get()`` returned for A (``trace.driver_deps``, see
  :mod:`eugo_lab.tracing.returned`). Other uses of a result are read from the driver's recorded
  waits: A counts when its result arrived no later than the end of the last ``get()``/
  ``wait()`` before B's submission. Without a wait there, the driver was busy with its own
  work (building B's input, say), not waiting for A, and the two are independent however
  late B was submitted.

For traces without recorded edges (saved by earlier versions, or built by hand) both are
inferred from ``ready`` instead: B follows A when B became ready (all its inputs existed
and it went to the backend) no earlier than A's result arrived. A real dependency always
looks like that, but so does a task made ready late by another input, so the inferred path
is an upper bound of the true chain.

The path's length counts, for each task on it, its round trip without queueing:
``(received - ready) - queue_wait``. That is the time the chain would take with unlimited
workers, so no number of workers can make the run shorter than the path plus the
driver's own serial time.

``hpc.map`` batches never follow anything through driver order: the map feeder submits a
batch when an earlier one returns, which would otherwise read as a chain through the
whole map (their recorded data edges, if any, still count). A task that depended on an
``hpc.put`` object or on state outside the trace is invisible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eugo_lab.analysis.breakdown import queue_waits
from eugo_lab.analysis.inputs import takes_trace
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
    exact: bool = False  # True: built from recorded dependency edges, not inferred from timing

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


def recorded_predecessors(trace: Trace, u: Units, table: dict[str, np.ndarray] | None = None
                          ) -> dict[int, set[int]]:
    """Per unit index, the units whose futures it was passed (from ``trace.deps``, or ``table`` of its columns)."""
    d = trace.deps if table is None else table
    if not len(d["task"]) or not len(u):
        return {}
    t = trace.tasks
    wanted = np.union1d(d["task"], d["on"])
    # Only rows named by an edge: a task id, or a map batch id (a batch's edges use its id).
    rows = np.flatnonzero((np.isin(t["task_id"], wanted) | np.isin(t["batch"], wanted)) & (u.row_unit >= 0))
    unit_of: dict[int, int] = {}
    for r in rows.tolist():
        unit = int(u.row_unit[r])
        unit_of[int(t["task_id"][r])] = unit
        if t["batch"][r] >= 0:
            unit_of[int(t["batch"][r])] = unit
    preds: dict[int, set[int]] = {}
    for task, on in zip(d["task"].tolist(), d["on"].tolist()):
        a, b = unit_of.get(task), unit_of.get(on)
        if a is not None and b is not None and a != b:
            preds.setdefault(a, set()).add(b)
    return preds


def driver_predecessors(trace: Trace, u: Units) -> dict[int, set[int]]:
    """Per unit index, the units whose returned values it was passed through the driver (``trace.driver_deps``)."""
    return recorded_predecessors(trace, u, trace.driver_deps) if len(trace.driver_deps["task"]) else {}


def last_wait_before(trace: Trace, times: np.ndarray) -> np.ndarray:
    """Per time, the end of the latest recorded driver wait that ended by then (``-inf``: none).

    A result the driver could have used before a submission reached it in such a wait: a
    ``get()``/``wait()`` that returned it. A result that merely arrived while the driver was
    busy elsewhere was not looked at before the submission.
    """
    ends = np.sort(trace.blocks["end"][np.isfinite(trace.blocks["end"])])
    k = np.searchsorted(ends, times + TOLERANCE, side="right") - 1
    return np.where(k >= 0, ends[np.clip(k, 0, None)] if len(ends) else 0.0, -np.inf)


@takes_trace
def critical_path(trace: Trace, u: Units | None = None, q: np.ndarray | None = None) -> CriticalPath:
    """The longest chain of tasks that ran one after another (see the module docstring).

    ``u``/``q``: the trace's :func:`units` and their queue waits, when the caller has them already.
    """
    u = units(trace) if u is None else u
    wall = window(trace).length
    n = len(u)
    if n == 0:
        return CriticalPath((), (), (), 0.0, wall, exact=False)
    exact = bool(trace.meta.get("deps_recorded"))
    data = recorded_predecessors(trace, u) if exact else {}
    for j, on in driver_predecessors(trace, u).items():
        data.setdefault(j, set()).update(on)
    w = chain_weights(u, q)
    order = np.lexsort((u.received, u.ready))
    by_rcv = np.argsort(u.received, kind="stable")
    # Driver order: the units whose results had arrived when the driver last finished waiting
    # before each unit's submission (recorded edges) or when it became ready (inferred): a prefix of by_rcv.
    when = last_wait_before(trace, u.submit) if exact else u.ready
    limit = np.searchsorted(u.received[by_rcv], when + TOLERANCE, side="right")
    # Python lists, not arrays, in the sweep: it runs once per unit, and indexing a list is
    # many times faster than indexing an array element by element (the numbers are the same).
    best = [0.0] * n
    prev = [-1] * n
    # prefix_best[k]/prefix_arg[k]: the best chain among units by_rcv[:k+1], filled as the
    # sweep reaches them (each is final by then: its result arrived before the unit asking).
    prefix_best = [0.0] * n
    prefix_arg = [-1] * n
    filled = 0
    by_rcv_l, limit_l, batch_l, w_l = by_rcv.tolist(), limit.tolist(), u.is_batch.tolist(), w.tolist()
    for j in order.tolist():
        lim = limit_l[j]
        while filled < lim:
            i = by_rcv_l[filled]
            if filled and prefix_best[filled - 1] >= best[i]:
                prefix_best[filled], prefix_arg[filled] = prefix_best[filled - 1], prefix_arg[filled - 1]
            else:
                prefix_best[filled], prefix_arg[filled] = best[i], i
            filled += 1
        run_best, run_arg = 0.0, -1
        if lim and not batch_l[j]:
            # hpc.map sends its next batch when an earlier one returns: that is the feeder
            # pacing itself, not a dependency, so batches skip driver order.
            run_best, run_arg = prefix_best[lim - 1], prefix_arg[lim - 1]
        for p in data.get(j, ()):
            if best[p] > run_best:
                run_best, run_arg = best[p], p
        best[j], prev[j] = w_l[j] + run_best, run_arg
    j = int(np.argmax(best))
    chain = []
    while j >= 0:
        chain.append(j)
        j = prev[j]
    chain.reverse()
    funcs = trace.functions
    return CriticalPath(
        task_ids=tuple(int(u.task_id[c]) for c in chain),
        functions=tuple(funcs[int(u.function[c])] for c in chain),
        durations=tuple(float(w[c]) for c in chain),
        length=float(sum(w[c] for c in chain)),
        wall_time=wall,
        exact=exact,
    )
