"""hpc.last_optimizations() for a run whose calls said nothing new: the verdict the same workers said before."""

from __future__ import annotations

from trace_builder import TraceBuilder

from eugo_lab.optimizations import earlier
from eugo_lab.optimizations import report as opt_report

VERDICT = "jit: compiled: the return value [trial plain=0.1 compile=0.3 compiled=0.001]"


def _run(with_verdict: bool, first_pid: int = 40000):
    """Four 0.1 s smooth() calls on 2 workers; ``with_verdict``: each worker's first call carries its JIT verdict."""
    b = TraceBuilder(workers=2)
    b.workers = {w: (f"host-{w}", first_pid + w) for w in range(2)}
    for k in range(4):
        row = b.task("smooth", worker=k % 2, start=0.1 * (k // 2), end=0.1 * (k // 2) + 0.1)
        if with_verdict and k < 2:
            b.phase(row, VERDICT, 0.1, 0.1, 0.0)
    return b.build()


def test_a_function_compiled_in_an_earlier_run_on_the_same_workers_is_not_declined():
    earlier._said.clear()
    first = opt_report.automatic(_run(with_verdict=True))
    assert [o.target for o in first.applied] == ["smooth"]
    again = opt_report.automatic(_run(with_verdict=False))  # compiled calls: nothing new said
    assert [o.target for o in again.applied] == ["smooth"] and not again.declined
    assert again.items[0].bucketed.endswith("(decided in an earlier run on these workers)")
    # New worker processes have decided nothing yet: the plain "not tried" line.
    fresh = opt_report.automatic(_run(with_verdict=False, first_pid=50000))
    # (0.2 s of CPU in one process and no verdict: "never sampled", not "too little CPU")
    assert not fresh.applied and fresh.items[0].numbers == {"code": "never-sampled"}
