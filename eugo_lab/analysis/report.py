"""The analysis result: :class:`Report` and its deterministic text (a :class:`Finding` is in :mod:`findings`).

The text goes into notebooks compared by nbval, so it contains only rounded numbers,
function names and source lines shown without machine-specific directories: never pids,
hostnames or addresses.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eugo_lab.analysis.breakdown import Breakdown
from eugo_lab.analysis.critical_path import CriticalPath
from eugo_lab.renderable import Rendered, TextRepr
from eugo_lab.units import fmt_seconds as fmt_s

if TYPE_CHECKING:  # the findings import this module's formatting
    from eugo_lab.analysis.findings.finding import Finding

INFO, NOTE, WARNING, PROBLEM = "info", "note", "warning", "problem"
SEVERITY_ORDER = {PROBLEM: 0, WARNING: 1, NOTE: 2, INFO: 3}


@dataclass(frozen=True, repr=False)
class Report(TextRepr, Rendered):
    """What :func:`eugo_lab.analysis.analyze` found in a trace.

    ``wall_time``: seconds of the analysed window (the region, widened to cover every
    task's submit..received span; see :class:`eugo_lab.analysis.timeline.Window`).
    ``serial_time``: the sum of task body times of successful and failed attempts, i.e.
    roughly what one worker would have spent computing. ``speedup`` = serial / wall,
    ``workers`` the ideal speedup, ``efficiency`` = speedup / workers.

    One speedup story: with a measured baseline (``baseline_wall``: the wall time of the
    same work run on 1 worker, from ``%%eugo --compare``/``--scaling`` or
    ``analyze(trace, baseline=...)``) ``speedup`` is the measured one, ``baseline_wall /
    wall_time``; without one it is the estimate from task time, ``serial_time / wall_time``
    (:attr:`estimated_speedup` is always that estimate). ``findings`` are ordered by the time
    their fix saves, biggest first (:attr:`biggest_win`).

    ``interpreter_wait``: on the threads engine (all tasks in one Python process), the seconds
    of task time spent ready to run while another task held the interpreter lock (the GIL) or
    the cores (:mod:`eugo_lab.analysis.gil`). One worker would not have spent them, so they are
    left out of ``serial_time``, which is then CPU time plus real waits (:attr:`estimate_basis`).
    ``None`` on engines with a process per worker.
    """

    tasks: int
    functions: tuple[str, ...]
    backend: str
    workers: int
    wall_time: float
    serial_time: float
    breakdown: Breakdown
    critical_path: CriticalPath
    findings: tuple[Finding, ...]
    baseline_wall: float | None = None
    interpreter_wait: float | None = None

    @property
    def estimate_basis(self) -> str:
        """What the speedup estimate is built from: ``"task time"``, or on the threads engine ``"CPU time"``."""
        return "task time" if self.interpreter_wait is None else "CPU time"

    @property
    def estimated_speedup(self) -> float:
        """``serial_time / wall_time`` (0 for an empty window): what the task time says, overheads aside."""
        return self.serial_time / self.wall_time if self.wall_time > 0 else 0.0

    @property
    def measured_speedup(self) -> float | None:
        """``baseline_wall / wall_time`` when a 1-worker baseline was measured, else None."""
        if self.baseline_wall is None or not self.wall_time > 0:
            return None
        return self.baseline_wall / self.wall_time

    @property
    def speedup(self) -> float:
        """The measured speedup when a baseline exists, else the task-time estimate."""
        m = self.measured_speedup
        return self.estimated_speedup if m is None else m

    @property
    def biggest_win(self) -> Finding | None:
        """The finding whose fix saves the most (notes included only when nothing saves more), or None."""
        priced = [f for f in self.findings if f.saves is not None and f.saves > 0]
        return max(priced, key=lambda f: f.saves, default=None)  # type: ignore[arg-type, return-value]

    def headline(self) -> str:
        """The report's first line: the biggest win and its predicted effect on the wall time."""
        f = self.biggest_win
        if f is not None and f.severity != NOTE and f.wall_after is not None:
            return f"Biggest win: {f.fix} — predicted {fmt_s(self.wall_time)} → {fmt_s(f.wall_after)}"
        # One worker (Binder's one core): the mistakes that need parallelism are priced on 2 workers.
        two = [g for g in self.findings if g.fix and g.evidence.get("on_2_workers", {}).get("saves", 0) > 0]
        if two:
            g = max(two, key=lambda x: x.evidence["on_2_workers"]["saves"])
            w2 = g.evidence["on_2_workers"]
            return (f"Biggest win on 2 workers: {g.fix} — predicted {fmt_s(w2['before'])} → {fmt_s(w2['after'])} "
                    f"(this run had {self.workers} worker)")
        return "Biggest win: none found (no fix the analysis knows would save more than a few percent)"

    def speedup_text(self) -> str:
        """The speedup, saying whether it was measured against 1 worker or estimated from task time."""
        m = self.measured_speedup
        if m is None:
            return (f"speedup {fmt_x(self.speedup)} of {self.workers} ({fmt_pct(self.efficiency)} efficiency), "
                    f"estimated from {self.estimate_basis} (no 1-worker run to measure it against)")
        return (f"speedup {fmt_x(m)} of {self.workers} ({fmt_pct(self.efficiency)} efficiency), measured against "
                f"1 worker ({fmt_s(self.baseline_wall)}); {self.estimate_basis.replace(' ', '-')} estimate "
                f"{fmt_x(self.estimated_speedup)}")

    @property
    def efficiency(self) -> float:
        """``speedup / workers``: 1.0 means every worker computed all the time."""
        return self.speedup / self.workers if self.workers else 0.0

    def finding(self, code: str) -> Finding | None:
        """The first finding with this ``code``, or None."""
        return next((f for f in self.findings if f.code == code), None)

    def codes(self) -> list[str]:
        """The codes of all findings, in report order."""
        return [f.code for f in self.findings]

    def to_text(self) -> str:
        """A deterministic plain-text report (same trace, same text)."""
        b = self.breakdown
        lines = [
            self.headline(),
            f"{self.tasks} task{'s' if self.tasks != 1 else ''} on {self.workers} "
            f"worker{'s' if self.workers != 1 else ''} ({self.backend})",
            f"wall time {fmt_s(self.wall_time)}, serial time {fmt_s(self.serial_time)}, {self.speedup_text()}",
            f"worker time ({self.workers} x {fmt_s(self.wall_time)} = {fmt_s(b.worker_time)}):",
        ]
        total = b.worker_time
        for name, v in b.worker_categories().items():
            share = v / total if total > 0 else 0.0
            lines.append(f"  {name:<14} {fmt_s(v):>9}  {fmt_pct(share):>4}")
        lines.append(f"driver blocked in get()/wait()/await {fmt_s(b.driver_blocked)}; "
                     f"tasks queued for a busy worker {fmt_s(b.queue_wait)} in total")
        cp = self.critical_path
        if len(cp):
            lines.append(f"critical path {len(cp)} task{'s' if len(cp) != 1 else ''}, {fmt_s(cp.length)} "
                         f"({fmt_pct(cp.fraction)} of wall time)")
        lines.append("findings:")
        lines.extend("  " + f.to_text().replace("\n", "\n  ") for f in self.findings)
        return "\n".join(lines)

    def to_html(self) -> str:
        """The same text, escaped, in a ``<pre>`` (a notebook shows it as the terminal does)."""
        return f"<pre class='eugo-report'>{html.escape(self.to_text())}</pre>"


# -- formatting: fixed rounding so reports are stable ---------------------------------------------
def fmt_x(x: float) -> str:
    """A ratio such as a speedup: ``3.2x``."""
    return f"{x:.2g}x" if x < 10 else f"{x:.0f}x"


def fmt_pct(x: float) -> str:
    """A share as a whole percentage: ``42%``."""
    return f"{x * 100:.0f}%"
