"""The "what the runtime did for you" report of a ``%%eugo --optimize`` cell: text and HTML.

Input is an :class:`eugo_lab.optimizations.report.OptimizationReport`; nothing is computed here.
``precise=False`` (the ``text/plain`` of the rich display) uses each item's bucketed line:
deterministic run after run. HTML shows the measured lines, with all user text (function
names, Numba's details) escaped.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from eugo_lab.renderable import Drawn

if TYPE_CHECKING:  # named for the reader and the type checker; the report is built where it is computed
    from eugo_lab.optimizations.report import OptimizationReport

_KIND = {"jit": "JIT (Numba)", "batch": "batching", "map": "hpc.map batching", "threads": "threads"}


def heading(report: OptimizationReport) -> str:
    """``Optimizations: 2 applied, 1 declined``."""
    skipped = sum(1 for o in report.declined if not getattr(o, "tried", True))
    said = getattr(report, "in_force", "") or getattr(report, "mode", "--optimize")
    return f"Optimizations ({said}): {len(report.applied)} applied, " \
        f"{len(report.declined) - skipped} declined" + (f", {skipped} not tried" if skipped else "")


def optimizations_text(report: OptimizationReport, precise: bool = False) -> str:
    """The report as text: one line per optimization, applied ones first."""
    lines = [heading(report)]
    if not report.items:
        lines.append("  nothing to optimize: no remote function ran in this cell")
    for o in report.applied + report.declined:
        mark = "applied" if o.applied else "declined" if getattr(o, "tried", True) else "not tried"
        lines.append(f"  [{mark}] {_KIND.get(o.kind, o.kind)}: {o.precise if precise else o.bucketed}")
    return "\n".join(lines)


def optimizations_html(report: OptimizationReport) -> str:
    """The report as an HTML table (measured numbers; every piece of user text escaped)."""
    rows = []
    for o in report.applied + report.declined:
        color = "#2e7d32" if o.applied else "#b26a00"
        mark = "applied" if o.applied else "declined" if getattr(o, "tried", True) else "not tried"
        rows.append(f"<tr><td style='text-align:left;color:{color}'>{mark}</td>"
                    f"<td style='text-align:left'>{escape(_KIND.get(o.kind, o.kind))}</td>"
                    f"<td style='text-align:left'>{escape(o.precise)}</td></tr>")
    if not rows:
        rows.append("<tr><td colspan='3'>nothing to optimize: no remote function ran in this cell</td></tr>")
    return (f"<div class='eugo-optimizations'><div><b>{escape(heading(report))}</b></div>"
            f"<table>{''.join(rows)}</table></div>")


def optimizations_view(report: OptimizationReport) -> Drawn:
    """What ``--optimize`` did in one cell (its optimization report) as a renderable."""
    return Drawn(report, optimizations_text, optimizations_html)
