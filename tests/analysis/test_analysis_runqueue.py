"""Run-queue time: a body that waited for a busy core is CPU-starved, not waiting for I/O.

The real tests pin a task and a CPU hog process to the same core, so the task can compute
only about half of the time whatever else the machine does; what they assert is behaviour
(run-queue time recorded, which finding fires), never a duration.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from trace_builder import TraceBuilder

from eugo_lab import analysis, hpc
from eugo_lab.analysis import analyze
from eugo_lab.contract import run_queue

linux_only = pytest.mark.skipif(not run_queue.supported(), reason="no /proc/thread-self/schedstat here")

HOG = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def _core() -> int:
    return min(os.sched_getaffinity(0))


class _Hog:
    """A busy-looping process pinned to one core, stopped (by its pid) on exit."""

    def __init__(self, core: int):
        self.core = core

    def __enter__(self) -> _Hog:
        self.proc = subprocess.Popen([sys.executable, "-c", HOG, str(self.core)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait until it runs pinned (its affinity is set by itself)
            try:
                if os.sched_getaffinity(self.proc.pid) == {self.core}:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait(10)


def spin(core: int, n: int) -> int:
    """Pure-Python CPU work pinned to ``core`` (the hog's), so it competes for that core alone."""
    os.sched_setaffinity(0, {core})
    x = 0
    for i in range(n):
        x += i
    return x


# The point here is plain Python competing for a core: the automatic JIT would change the work under test.
spin_task = hpc.remote(optimize=False)(spin)


@hpc.remote(optimize=False)
def phased(core: int, n: int) -> int:
    with hpc.phase("crunch"):
        return spin(core, n)


@hpc.remote
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@linux_only
def test_reading_is_fresh_and_grows_while_a_hog_shares_the_core():
    before = os.sched_getaffinity(0)
    core = _core()
    with _Hog(core):
        os.sched_setaffinity(0, {core})
        try:
            start = run_queue.waited_ns()
            spin(core, 3_000_000)
            waited = run_queue.since(start)
        finally:
            os.sched_setaffinity(0, before)
    assert waited > 0.0  # the file is re-read (pread at offset 0), not a value cached at open
    t0 = run_queue.waited_ns()
    time.sleep(0.05)  # sleeping is not waiting for a core: hardly any run-queue time
    assert run_queue.since(t0) < 0.05


@linux_only
def test_cpu_bound_task_on_a_shared_core_is_not_io_bound():
    core = _core()
    hpc.init(backend="local", workers=1)
    hpc.get(spin_task.remote(core, 100_000))  # started, pinned, and a body long enough to be measured next
    with _Hog(core):
        with hpc.trace() as t:
            hpc.get([spin_task.remote(core, 2_000_000) for _ in range(4)])
    tasks = t.trace.tasks
    body = tasks["end"] - tasks["start"]
    assert np.isfinite(tasks["runq"]).all()
    # Two runnable processes on one core: each waits for it about half of the time.
    assert float(tasks["runq"].sum()) > 0.25 * float(body.sum()), (tasks["runq"], body, tasks["cpu"])
    report = analysis.analyze(t.trace)
    assert report.finding("io-bound") is None, report.finding("io-bound")
    cont = report.finding("contention")
    assert cont is not None and "waited for a core" in cont.verdict, report.findings
    assert cont.evidence["runq_ratio"] > 0.25
    assert "more workers than cores" not in report.to_text()
    assert "runq" in t.trace.to_dataframe().columns


@linux_only
def test_a_phase_on_a_shared_core_records_its_wait_and_is_not_io_bound():
    core = _core()
    hpc.init(backend="local", workers=1)
    hpc.get(phased.remote(core, 100_000))
    with _Hog(core):
        with hpc.trace() as t:
            hpc.get([phased.remote(core, 2_000_000) for _ in range(3)])
    ph = t.trace.phases_dataframe()
    assert (ph["runq"] > 0.25 * (ph["end"] - ph["start"])).all(), ph
    assert analysis.analyze(t.trace).finding("io-bound-phase") is None


@linux_only
def test_a_sleeping_task_is_still_io_bound():
    hpc.init(backend="local", workers=1)
    hpc.get(nap.remote(0.0))
    with hpc.trace() as t:
        hpc.get([nap.remote(0.05) for _ in range(4)])
    tasks = t.trace.tasks
    body = tasks["end"] - tasks["start"]
    assert float(np.nansum(tasks["runq"])) < 0.5 * float(body.sum())
    io = analysis.analyze(t.trace).finding("io-bound")
    assert io is not None and "mostly waits" in io.verdict


def test_tiny_bodies_skip_the_reads_and_record_not_measured():
    from eugo_lab.backends import _worker
    from eugo_lab.contract.serialization import dumps_args

    args, _, _ = dumps_args((1,), {}, function="inc")
    stats = [_worker.execute(lambda x: x + 1, "inc-tiny", args)[3] for _ in range(3)]
    # The first body is measured (its function is new here); after a tiny one the next is not.
    assert math.isnan(stats[1].runq) and math.isnan(stats[2].runq)
    slow = _worker.execute(lambda x: time.sleep(0.001), "inc-tiny", args)[3]
    assert math.isnan(slow.runq)  # decided before it ran: the last body was tiny
    again = _worker.execute(lambda x: time.sleep(0.001), "inc-tiny", args)[3]
    assert math.isnan(again.runq) != run_queue.supported()  # measured again once a body was long


# -- the analysis, on synthetic traces ---------------------------------------------------------------
def _starved(runq: float | None, workers: int = 1, cores: int = 2) -> TraceBuilder:
    b = TraceBuilder(workers=workers, cores=cores)
    for k in range(4):
        b.task("crunch", worker=k % workers, ready=0.0, start=float(k), end=k + 1.0, cpu=0.42,
               runq=math.nan if runq is None else runq)
    return b


def test_run_queue_time_turns_io_bound_into_compute_bound_and_contention():
    r = analyze(_starved(0.55).build())
    assert r.finding("io-bound") is None
    cb = r.finding("compute-bound")
    assert cb is not None and "waited 55% for a core" in cb.verdict and "limited by the CPU" in cb.verdict
    cont = r.finding("contention")
    assert cont.term == "Contention"
    assert "crunch() tasks waited for a core 55% of the time" in cont.verdict
    assert cont.evidence["runq_ratio"] == pytest.approx(0.55)
    assert "other programs kept this machine's cores busy" in cont.advice
    assert cont.saves == pytest.approx(4 * 0.55) and cont.fix.startswith("give crunch()'s tasks cores")


def test_more_workers_than_cores_is_named_as_the_cause():
    cont = analyze(_starved(0.55, workers=4, cores=2).build()).finding("contention")
    assert "4 workers share 2 cores" in cont.advice


def test_waiting_tasks_on_more_workers_than_cores_get_one_advice_on_the_worker_count():
    # 4 workers on 2 cores; the tasks computed 10% and waited for a core 25% of their time: I/O-bound (more
    # workers than cores), so no finding may tell the same tasks to use at most 2 workers.
    b = TraceBuilder(workers=4, cores=2)
    for k in range(8):
        b.task("fetch", worker=k % 4, ready=0.0, start=float(k // 4), end=k // 4 + 1.0, cpu=0.1, runq=0.25)
    r = analyze(b.build())
    io = r.finding("io-bound")
    assert io is not None and "more workers than cores" in io.advice, r.codes()
    assert not any("use at most" in f.advice.lower() for f in r.findings), [f.to_text() for f in r.findings]
    cont = r.finding("contention")
    assert cont is not None and "the worker count is not what slows them" in cont.advice


def test_the_shares_of_computing_and_waiting_for_a_core_add_up_to_at_most_the_run():
    # Measured apart (the process clock ticks coarsely and counts every thread), CPU 89% and a run-queue wait
    # of 13% pass the wall time: the wait is bounded by what computing leaves (11%).
    b = TraceBuilder(workers=2, cores=2)
    for k in range(4):
        b.task("sim", worker=k % 2, ready=0.0, start=float(k // 2), end=k // 2 + 1.0, cpu=0.89, runq=0.13)
    cb = analyze(b.build()).finding("compute-bound")
    assert "computed 89% of its run time and waited 11% for a core" in cb.verdict, cb.verdict
    assert cb.evidence["cpu_ratio"] + cb.evidence["runq_ratio"] == pytest.approx(1.0)
    # Above 100% CPU (threaded code) there is no room left to have waited.
    b = TraceBuilder(workers=2, cores=4)
    for k in range(4):
        b.task("blas", worker=k % 2, ready=0.0, start=float(k // 2), end=k // 2 + 1.0, cpu=1.6, runq=0.3)
    r = analyze(b.build())
    assert r.finding("compute-bound").evidence["runq_ratio"] == 0.0
    assert r.finding("contention") is None or "waited for a core" not in r.finding("contention").verdict


def test_without_run_queue_time_the_verdict_is_as_before():
    r = analyze(_starved(None).build())  # NaN: not measured (macOS, an old trace)
    assert r.finding("io-bound") is not None and r.finding("contention") is None
    r = analyze(_starved(0.01).build())  # measured and small: the task really waited for something else
    io = r.finding("io-bound")
    assert io is not None and "for a core" not in io.verdict and r.finding("contention") is None


def test_a_phase_that_waited_for_a_core_is_not_io_bound():
    b = TraceBuilder(workers=1, cores=2)
    for k in range(4):
        row = b.task("load", ready=0.0, start=float(k), end=k + 1.0, cpu=0.45, runq=0.5)
        b.phase(row, "crunch", float(k), k + 1.0, 0.45, runq=0.5)
    r = analyze(b.build())
    assert r.finding("io-bound-phase") is None and r.finding("io-bound") is None
    assert "waited 50% for a core" in r.finding("compute-bound-phase").verdict


def test_an_old_trace_without_the_column_loads_as_not_measured():
    d = _starved(0.3).build().to_dict()
    del d["tasks"]["runq"]
    del d["phases"]["runq"]
    t = type(_starved(0.3).build()).from_dict(d)
    assert np.isnan(t.tasks["runq"]).all() and analyze(t).finding("io-bound") is not None
