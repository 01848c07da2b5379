"""``analyze(trace)``: run every detector on a trace and assemble the :class:`Report`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from eugo_lab.analysis import finding_capture
from eugo_lab.analysis import findings as fd
from eugo_lab.analysis import findings_more as fm
from eugo_lab.analysis import findings_tasks as ft
from eugo_lab.analysis.breakdown import breakdown, per_task_overhead, queue_waits
from eugo_lab.analysis.critical_path import critical_path
from eugo_lab.analysis.inputs import as_trace, takes_trace
from eugo_lab.analysis.report import INFO, NOTE, PROBLEM, WARNING, Finding, Report
from eugo_lab.analysis.simulate import replay_of
from eugo_lab.analysis.timeline import units, window
from eugo_lab.contract.row import ERROR, OK
from eugo_lab.tracing.trace import Trace


def serial_time(trace: Trace) -> float:
    """Sum of task body times (``end - start``) of successful and failed attempts."""
    t = trace.tasks
    body = t["end"] - t["start"]
    sel = np.isfinite(body) & np.isin(t["status"], (OK, ERROR))
    return float(body[sel].sum())


def _order(found: list[Finding], wall: float) -> list[Finding]:
    """Notes for cheap fixes, then: priced mistakes by time saved, the speedup, the rest by severity.

    A finding whose fix saves under ``NOTE_SHARE`` of the run becomes a note. Ties keep
    detector order (the sort is stable), so the same trace gives the same order.
    """
    out = []
    for f in found:
        if f.saves is not None and f.severity in (PROBLEM, WARNING) and f.saves < fd.NOTE_SHARE * wall:
            f = dataclasses.replace(f, severity=NOTE)
        out.append(f)

    def key(f: Finding) -> tuple[int, float]:
        if f.severity in (PROBLEM, WARNING) and f.saves is not None:
            return (0, -f.saves)
        if f.code == "speedup":
            return (1, 0.0)
        rank = {PROBLEM: 2, WARNING: 3, NOTE: 4, INFO: 5}[f.severity]
        return (rank, -(f.saves or 0.0))

    return sorted(out, key=key)


@takes_trace
def analyze(trace: Trace, baseline: Any = None) -> Report:
    """Analyse a trace: speedup, time breakdown, critical path and findings (see :class:`Report`).

    ``baseline``: the same work traced on 1 worker (``%%eugo --compare`` runs it): the
    speedup is then the measured one and the Contention finding compares task durations
    with it. Findings are ordered by the time their fix is predicted to save (see
    :func:`_order`) and are the same for the same trace.
    """
    base = as_trace(baseline, "analyze") if baseline is not None else None
    u = units(trace)
    win = window(trace)
    q = queue_waits(u)
    ctx = fd.Context(trace=trace, units=u, window=win, breakdown=breakdown(trace, u, win), queue=q,
                     overhead=per_task_overhead(u), critical_path=critical_path(trace),
                     serial_time=serial_time(trace), replay=replay_of(trace, u), baseline=base)
    found: list[Finding] = []
    blocked = fd.blocking(ctx)
    found += blocked
    found += fm.submission_order(ctx)
    found += fm.slow_submission(ctx)
    found += fd.critical(ctx, bool(blocked))
    balance = fm.unbalanced(ctx)
    found += balance
    found += fd.stragglers(ctx, frozenset(f.evidence["function"] for f in balance))
    found += fd.long_tail(ctx)
    found += ft.tasks_too_small(ctx)
    found += ft.serialization(ctx)
    found += finding_capture.detect(ctx)
    found += ft.boundness(ctx)
    found += fm.contention(ctx)
    found = fd.speedup(ctx, found) + found
    found = _order(found, win.length)
    return Report(tasks=len(trace), functions=trace.functions, backend=str(trace.meta.get("backend", "?")),
                  workers=trace.n_workers, wall_time=win.length, serial_time=ctx.serial_time,
                  breakdown=ctx.breakdown, critical_path=ctx.critical_path, findings=tuple(found),
                  baseline_wall=None if base is None else float(base.wall_time))
