"""The runtime's own work beside the tasks: the automatic JIT's background compiles, found in the trace.

A function the automatic JIT qualifies is compiled in a thread of its worker while that worker's
tasks go on (``JIT_COMPILING_PHASE`` marks the start, in the task where it qualified); the trial
that follows carries the compile's duration (``compile_seconds``). On a machine with few cores that
thread takes a core from the tasks: the Contention finding names it instead of "other programs".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from eugo_lab.analysis.timeline import covered, merge
from eugo_lab.contract.phases import JIT_COMPILING_PHASE, compile_seconds

if TYPE_CHECKING:  # the context reads this module's compiles for its units: a type, not an import
    from eugo_lab.analysis.findings.context import Context

# The compiles explain a wait for cores when they ran during at least a quarter of the waiting
# tasks' time: one compile thread beside two workers on two cores takes a third of each core's
# time while it runs, so a quarter of overlap is already most of a 20% run-queue wait.
COMPILE_EXPLAINS = 0.25


class Compiles(NamedTuple):
    """The background compiles of a trace: when each ran (epoch seconds) and which function it compiled."""

    start: np.ndarray
    end: np.ndarray
    function: list[str]


def compiles(ctx: Context) -> Compiles:
    """Every background compile the trace shows, from its marker to the end its trial reports.

    A compile whose trial never ran (the run ended first) is taken to last to the end of the run.
    """
    p, u, names = ctx.trace.phases, ctx.units, ctx.trace.phase_names
    marker = [i for i, n in enumerate(names) if str(n).startswith(JIT_COMPILING_PHASE)]
    if not marker or not len(p["row"]):
        return Compiles(np.zeros(0), np.zeros(0), [])
    took = {i: compile_seconds(str(n)) for i, n in enumerate(names)}
    rows = np.asarray(p["row"])
    unit = u.row_unit[rows]
    worker = np.where(unit >= 0, u.worker[np.clip(unit, 0, None)], -1)
    fn = np.where(unit >= 0, u.function[np.clip(unit, 0, None)], -1)
    order = np.argsort(p["start"], kind="stable")
    starts, ends, funcs = [], [], []
    for k in order[np.isin(p["name"][order], marker)]:
        if unit[k] < 0:
            continue
        t0 = float(p["start"][k])
        later = order[(p["start"][order] >= t0) & (worker[order] == worker[k]) & (fn[order] == fn[k])]
        seconds = next((took[int(p["name"][j])] for j in later if took[int(p["name"][j])] is not None), None)
        starts.append(t0)
        ends.append(t0 + seconds if seconds is not None else ctx.window.end)
        funcs.append(ctx.fname(int(fn[k])))
    return Compiles(np.array(starts), np.array(ends), funcs)


def compile_share(ctx: Context, idx: np.ndarray) -> tuple[float, float, list[str]]:
    """How much of units ``idx``'s body time a background compile ran beside: (seconds, share, functions compiled)."""
    c = compiles(ctx)
    u = ctx.units
    if not len(c.start) or not len(idx):
        return 0.0, 0.0, []
    start = u.occ_start[idx] + u.deser[idx]
    end = start + u.body[idx]
    during = covered(merge(c.start, c.end), start, end)
    total = float(u.body[idx].sum())
    overlapping = sorted({f for f, s, e in zip(c.function, c.start, c.end) if ((start < e) & (end > s)).any()})
    seconds = float(during.sum())
    return seconds, (seconds / total if total > 0 else 0.0), overlapping
