"""The threads engine and the interpreter lock: waiting for the GIL is neither work nor I/O (synthetic traces)."""

from __future__ import annotations

import pytest
from pytest import approx

from eugo_lab.analysis import analyze
from eugo_lab.analysis.findings import Code
from eugo_lab.render import text
from tests.trace_builder import TraceBuilder


def _side_by_side(backend: str, cpu: float, runq: float = 0.0, fn: str = "spin"):
    """Four tasks on four workers, each body 1 s in the same second, ``cpu`` seconds of it computing."""
    b = TraceBuilder(workers=4, backend=backend, cores=2)
    for w in range(4):
        b.task(fn, worker=w, ready=0.0, start=0.0, end=1.0, cpu=cpu, runq=runq)
    return b.build(end=1.0)


def test_pure_python_on_threads_is_estimated_from_cpu_time_not_task_time():
    # Each thread computed 0.25 s and waited 0.75 s while the other three computed: the GIL, one at a time.
    # Task time said 4 s of work in 1 s ("4.0x, 100% efficiency"); the work was 1 s.
    r = analyze(_side_by_side("threads", cpu=0.25))
    assert r.estimated_speedup == approx(1.0) and r.serial_time == approx(1.0)
    assert r.interpreter_wait == approx(3.0) and r.estimate_basis == "CPU time"
    assert "estimated from CPU time" in r.speedup_text()
    assert text.speedup_words(r) == "speedup 1.0x (estimated from CPU time)"
    # Waiting for the lock is no I/O: no advice to run more workers than cores.
    assert Code.IO_BOUND not in r.codes()
    assert "more workers than cores" not in r.to_text()
    f = r.finding(Code.GIL_WAIT)
    assert f is not None and f.evidence["gil_wait"] == approx(3.0) and f.evidence["wait_ratio"] == approx(0.75)
    assert "only where tasks release the GIL" in f.advice and "-b local" in f.advice
    assert "CPU time" in r.finding(Code.SPEEDUP).verdict


def test_a_wait_for_a_core_on_threads_is_not_work_either():
    r = analyze(_side_by_side("threads", cpu=0.25, runq=0.75))
    assert r.estimated_speedup == approx(1.0)
    assert r.finding(Code.GIL_WAIT) is not None


def test_sleeping_threads_keep_their_waits_as_io_and_their_speedup():
    # Nobody computes while they wait: the lock is free, the waits are real, threads are the right engine.
    r = analyze(_side_by_side("threads", cpu=0.002, fn="nap"))
    assert r.estimated_speedup == approx(4.0, rel=0.01)
    assert Code.GIL_WAIT not in r.codes() and Code.IO_BOUND in r.codes()


@pytest.mark.parametrize("backend", ["local", "dask"])
def test_engines_with_a_process_per_worker_keep_the_task_time_estimate(backend):
    r = analyze(_side_by_side(backend, cpu=0.25))
    assert r.estimated_speedup == approx(4.0) and r.interpreter_wait is None and r.estimate_basis == "task time"
    assert Code.GIL_WAIT not in r.codes()
    assert text.speedup_words(r) == "speedup 4.0x (estimated from task time)"


def test_tasks_that_computed_at_different_times_waited_for_no_one():
    # Two threads one after the other: while each was off the CPU nobody else computed.
    b = TraceBuilder(workers=2, backend="threads", cores=2)
    b.task("f", worker=0, ready=0.0, start=0.0, end=1.0, cpu=0.5)
    b.task("f", worker=1, ready=0.0, start=1.0, end=2.0, cpu=0.5)
    r = analyze(b.build(end=2.0))
    assert r.interpreter_wait == approx(0.0) and r.serial_time == approx(2.0)


def test_the_cell_summary_names_what_the_serial_estimate_is_made_of():
    from eugo_lab.cellrun import report

    s = report.summarize([report.Run(4, _side_by_side("threads", cpu=0.25))], error=None, options={})
    precise = s.to_text(precise=True)
    assert "CPU time and waits 1 s, speedup 1.0x (estimated from CPU time)" in precise, precise
    assert "CPU time and waits (serial estimate)" in s.to_html()
    local = report.summarize([report.Run(4, _side_by_side("local", cpu=0.25))], error=None, options={})
    assert "task time 4 s, speedup 4.0x (estimated from task time)" in local.to_text(precise=True)
