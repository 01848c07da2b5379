"""``analyze(trace)``: run every detector on a trace and assemble the :class:`Report`."""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis import findings as fd
from eugo_lab.analysis.breakdown import breakdown, per_task_overhead, queue_waits
from eugo_lab.analysis.critical_path import critical_path
from eugo_lab.analysis.inputs import takes_trace
from eugo_lab.analysis.report import SEVERITY_ORDER, Report
from eugo_lab.analysis.timeline import units, window
from eugo_lab.tracing.row import ERROR, OK
from eugo_lab.tracing.trace import Trace


def serial_time(trace: Trace) -> float:
    """Sum of task body times (``end - start``) of successful and failed attempts."""
    t = trace.tasks
    body = t["end"] - t["start"]
    sel = np.isfinite(body) & np.isin(t["status"], (OK, ERROR))
    return float(body[sel].sum())


@takes_trace
def analyze(trace: Trace) -> Report:
    """Analyse a trace: speedup, time breakdown, critical path and findings (see :class:`Report`).

    Findings are ordered by severity (problems first), then by detector, and are the same
    for the same trace.
    """
    u = units(trace)
    win = window(trace)
    q = queue_waits(u)
    ctx = fd.Context(trace=trace, units=u, window=win, breakdown=breakdown(trace, u, win), queue=q,
                     overhead=per_task_overhead(u), critical_path=critical_path(trace),
                     serial_time=serial_time(trace))
    found = fd.speedup(ctx)
    blocked = fd.blocking(ctx)
    found += blocked
    found += fd.critical(ctx, bool(blocked))
    found += fd.stragglers(ctx)
    found += fd.long_tail(ctx)
    found += fd.tasks_too_small(ctx)
    found += fd.serialization(ctx)
    found += fd.boundness(ctx)
    found = sorted(found, key=lambda f: SEVERITY_ORDER[f.severity])  # stable: detector order within a severity
    return Report(tasks=len(trace), functions=trace.functions, backend=str(trace.meta.get("backend", "?")),
                  workers=trace.n_workers, wall_time=win.length, serial_time=ctx.serial_time,
                  breakdown=ctx.breakdown, critical_path=ctx.critical_path, findings=tuple(found))
