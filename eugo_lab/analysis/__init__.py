"""Analysis of a :class:`~eugo_lab.tracing.Trace`: pure functions, no rendering.

- :func:`analyze` → :class:`Report` (speedup, time breakdown, findings)
- :func:`critical_path` → :class:`CriticalPath`
- :func:`simulate`, :func:`workers_for`, :func:`scale`: replay on other worker counts
- :func:`cost`, :func:`cheapest_workers`: what a run costs
- :mod:`eugo_lab.analysis.sizing`: workers for a bigger job against a deadline (``sizing.plan``)
"""

from eugo_lab.analysis.analyzer import analyze, serial_time
from eugo_lab.analysis.breakdown import Breakdown, breakdown
from eugo_lab.analysis.cost import CostChoice, CostReport, cheapest_workers, cost
from eugo_lab.analysis.critical_path import CriticalPath, critical_path
from eugo_lab.analysis.findings import Finding
from eugo_lab.analysis.report import Report
from eugo_lab.analysis.simulate import SimRow, WorkersFor, scale, simulate, to_dataframe, workers_for

__all__ = [
    "analyze", "serial_time", "Report", "Finding", "Breakdown", "breakdown",
    "CriticalPath", "critical_path",
    "simulate", "SimRow", "to_dataframe", "workers_for", "WorkersFor", "scale",
    "cost", "CostReport", "cheapest_workers", "CostChoice",
]
