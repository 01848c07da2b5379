"""How much slower a function's tasks ran side by side than alone, within one trace.

A trace often holds its own 1-worker baseline: tasks that ran while nothing else did (a
setup step, a get() in a loop, the last task of a tail) and tasks of the same function
that ran while other workers were busy. Comparing their medians measures contention for
shared cores, memory bandwidth or oversubscribed BLAS threads without a second run.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis.timeline import Units, covered, crowded


def overlap_share(u: Units) -> np.ndarray:
    """Per unit: the share of its occupancy during which another unit was running too."""
    if not len(u):
        return np.zeros(0)
    occ = np.maximum(u.occ_end - u.occ_start, 0.0)
    inside = covered(crowded(u.occ_start, u.occ_end), u.occ_start, u.occ_end)
    return np.where(occ > 0, inside / np.where(occ > 0, occ, 1.0), 0.0)


def side_by_side(u: Units, fn: int, alone: float, together: float, min_tasks: int,
                 share: np.ndarray | None = None, exclude: np.ndarray | None = None) -> dict | None:
    """Median body of ``fn``'s single tasks alone (overlap under ``alone``) vs side by side (over ``together``).

    Returns None without ``min_tasks`` of each; else ``alone``, ``together`` (median seconds),
    ``slowdown`` (together / alone - 1), ``n_alone``, ``n_together`` and ``units`` (the
    side-by-side unit indices). ``exclude``: units (a mask) that count on neither side.
    """
    share = overlap_share(u) if share is None else share
    sel = (u.function == fn) & (u.n_items == 1)
    if exclude is not None:
        sel &= ~exclude
    a = np.flatnonzero(sel & (share < alone))
    t = np.flatnonzero(sel & (share > together))
    if len(a) < min_tasks or len(t) < min_tasks:
        return None
    ma, mt = float(np.median(u.body[a])), float(np.median(u.body[t]))
    if ma <= 0:
        return None
    return {"alone": ma, "together": mt, "slowdown": mt / ma - 1.0, "n_alone": int(len(a)),
            "n_together": int(len(t)), "units": t}
