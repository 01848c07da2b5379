"""``analyze(trace)``: run every detector on a trace and assemble the :class:`Report`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from eugo_lab.analysis import gil
from eugo_lab.analysis.breakdown import breakdown, per_task_overhead, queue_waits
from eugo_lab.analysis.critical_path import critical_path
from eugo_lab.analysis.findings import NOTE_SHARE, Code, Context, Finding, detect
from eugo_lab.analysis.inputs import as_trace, takes_trace
from eugo_lab.analysis.report import INFO, NOTE, PROBLEM, WARNING, Report
from eugo_lab.analysis.simulate import replay_of
from eugo_lab.analysis.timeline import units, window, work_time
from eugo_lab.contract.row import ERROR, OK
from eugo_lab.tracing.trace import Trace


def serial_time(trace: Trace) -> float:
    """Sum of task body times (``end - start``) of successful and failed attempts (:func:`timeline.work_time`).

    A task's waits on tasks it submitted itself are left out: those children's own bodies count them.
    """
    return work_time(trace)


def _order(found: list[Finding], wall: float) -> list[Finding]:
    """Notes for cheap fixes, then: priced mistakes by time saved, the speedup, the rest by severity.

    A finding whose fix saves under ``NOTE_SHARE`` of the run becomes a note. Ties keep
    detector order (the sort is stable), so the same trace gives the same order.
    """
    out = []
    for f in found:
        if f.saves is not None and f.severity in (PROBLEM, WARNING) and f.saves < NOTE_SHARE * wall:
            f = dataclasses.replace(f, severity=NOTE)
        out.append(f)

    def key(f: Finding) -> tuple[int, float]:
        if f.severity in (PROBLEM, WARNING) and f.saves is not None:
            return (0, -f.saves)
        if f.code == Code.SPEEDUP:
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
    serial, not_work = serial_time(trace), None
    if gil.shares_interpreter(trace.meta):  # threads: waiting for the one interpreter is neither work nor I/O
        serial, not_work = gil.work_time(u, np.isin(u.status, (OK, ERROR)))
    ctx = Context(trace=trace, units=u, window=win, breakdown=breakdown(trace, u, win), queue=q,
                  overhead=per_task_overhead(u), critical_path=critical_path(trace, u, q),
                  serial_time=serial, replay=replay_of(trace, u), baseline=base)
    found = _order(detect(ctx), win.length)
    return Report(tasks=len(trace), functions=trace.functions, backend=str(trace.meta.get("backend", "?")),
                  workers=trace.n_workers, wall_time=win.length, serial_time=ctx.serial_time,
                  breakdown=ctx.breakdown, critical_path=ctx.critical_path, findings=tuple(found),
                  baseline_wall=None if base is None else float(base.wall_time), interpreter_wait=not_work)
