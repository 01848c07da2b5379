"""The Idle cluster finding of :func:`eugo_lab.analysis.cost`: workers paid for after the work ended."""

from __future__ import annotations

from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import WARNING, fmt_pct
from eugo_lab.units import fmt_seconds as fmt_s

# Flag an idle cluster once its idle time costs at least a tenth of the work it did:
# below that, keeping it warm for the next run is usually worth the start-up it saves.
IDLE_CLUSTER_SHARE = 0.1


def idle_cluster(workers: int, wall: float, idle_s: float, run_cost: float, idle_cost: float) -> list[Finding]:
    """Idle time after ``wall`` seconds of work that costs at least ``IDLE_CLUSTER_SHARE`` of the run."""
    if not (idle_s > 0 and idle_cost >= IDLE_CLUSTER_SHARE * run_cost):
        return []
    share = idle_cost / (run_cost + idle_cost) if run_cost + idle_cost > 0 else 1.0
    return [Finding(
        Code.IDLE_CLUSTER, "Idle cluster", WARNING,
        f"The {workers} workers stayed up {fmt_s(idle_s)} after {fmt_s(wall)} of work: {fmt_pct(share)} of the bill "
        "paid for nothing.",
        "Shut the cluster down when the work ends (hpc.shutdown()), or give it an idle timeout of a few minutes.",
        {"idle_seconds": idle_s, "idle_cost": idle_cost, "run_cost": run_cost, "share": share})]
