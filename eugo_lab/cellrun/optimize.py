"""``%%eugo --optimize``: switch the runtime's optimizations on for the cell's run, then build its report.

Kept out of ``runner.py`` so the runner's edit is two calls. What runs here: before the main
run, the runtime wraps every submitted function in the JIT trial (``Runtime.optimize``) and
the ``batch="auto"`` counters are read; after it, the report is built from the trace, the
counters' difference and the thread guard's plan for this runtime (``eugo_lab.optimizations.report``).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

from eugo_lab.backends.local_process import usable_cores
from eugo_lab.hpc import coalesce, optimized  # noqa: F401 - optimized: importing it hooks the JIT trial in
from eugo_lab.optimizations import report as opt_report
from eugo_lab.threadguard import limits as thread_guard

# A new wrapper per run, so each run's trace carries the workers' verdicts (see hpc.optimized).
_generations = itertools.count(1)


def guard_plan(rt: Any) -> thread_guard.GuardPlan | None:
    """The thread guard's plan for ``rt``'s workers (None for the threads backend: one process)."""
    if rt.backend_name == "threads":
        return None
    info = rt.backend.info()
    be = rt.backend
    if rt.backend_name == "local":  # what the pool gave its workers (threads_per_worker=, or cores / workers)
        explicit = be.threads_per_worker if getattr(be, "_threads_explicit", False) else None
        return thread_guard.plan(usable_cores(), info.workers, explicit=explicit)
    # Dask and Ray: the guard applies to the workers we started here (the embedded Dask cluster, local Ray),
    # task slots = worker processes x threads each; an address (or a cluster passed in) is not ours.
    external = bool(rt.options.get("address")) or not _started_here(be)
    slots = info.workers * max(1, int(getattr(info, "threads_per_worker", 1) or 1))
    return thread_guard.plan(usable_cores(), slots, external=external)


def _started_here(backend: Any) -> bool:
    """True when this process started the engine's workers (so they got the guard's environment)."""
    if getattr(backend, "_procs", None) is not None:  # the embedded Dask cluster's worker processes
        return True
    return bool(getattr(backend, "_owned", False)) and getattr(backend, "address", None) is None  # local Ray


def _delta(before: dict[str, Any], after: list[Any]) -> list[Any]:
    out = []
    for s in after:
        b = before.get(s.function)
        if b is None:
            out.append(s)
            continue
        out.append(coalesce.CoalesceStats(s.function, s.calls - b.calls, s.plain_tasks - b.plain_tasks,
                                          s.batches - b.batches, s.batched_calls - b.batched_calls,
                                          s.largest_batch, s.per_call, s.mode))
    return out


class CellOptimizer:
    """One cell's optimizations: :meth:`running` around the main run, then :attr:`report`."""

    def __init__(self) -> None:
        self.report: opt_report.OptimizationReport | None = None
        self._before: dict[str, Any] = {}

    @contextlib.contextmanager
    def running(self, rt: Any) -> Iterator[None]:
        """Optimizations on for the body's run on ``rt``."""
        self._before = {s.function: s for s in coalesce.all_stats()}
        rt.optimize = next(_generations)
        try:
            yield
        finally:
            rt.optimize = 0

    def finish(self, rt: Any, trace: Any, hot: Any = None) -> opt_report.OptimizationReport:
        """Build (and remember, for ``hpc.last_optimizations()``) the report of the run traced in ``trace``.

        ``hot``: the profile's hot functions; by default those of the run's own profile (an
        ``--optimize`` run is profiled), which the report words next to each JIT verdict.
        """
        if hot is None and getattr(trace, "profiles", ()):
            try:
                from eugo_lab.profile.model import Profile

                hot = Profile.from_trace(trace).hot_functions(limit=None)
            except Exception:  # noqa: BLE001 - the report stands without the profile's evidence
                hot = None
        note = "threads backend: one process, its BLAS threads are shared by the cell; nothing to limit"
        self.report = opt_report.build(trace, guard_plan(rt), _delta(self._before, coalesce.all_stats()), hot=hot,
                                       threads_note=note)
        opt_report.set_last(self.report)
        return self.report
