"""Breakdown, wall/serial time, speedup and critical path on fully specified traces."""

from __future__ import annotations

import pytest
from trace_builder import TraceBuilder, even_trace

from eugo_lab.analysis import analyze, breakdown, critical_path

approx = pytest.approx


def test_even_run_is_all_compute():
    r = analyze(even_trace(workers=2, per_worker=2))
    assert r.wall_time == approx(2.0)
    assert r.serial_time == approx(4.0)
    assert r.speedup == approx(2.0)
    assert r.efficiency == approx(1.0)
    assert r.workers == 2
    b = r.breakdown
    assert (b.compute, b.serialization, b.scheduling, b.transfer, b.idle) == approx((4.0, 0, 0, 0, 0), abs=1e-9)
    assert b.queue_wait == approx(2.0)  # the second task on each worker waited 1 s for it
    assert b.driver_blocked == 0


def test_worker_categories_add_up_to_worker_time():
    b = TraceBuilder(workers=2)
    # Worker 0: ready at 0, starts unpickling at 0.2 (0.2 s waiting: 0.1 transfer of 100 MB at 1 GB/s, 0.1
    # scheduling), unpickles 0.1, body 0.3..1.3, pickles 0.05.
    b.task(worker=0, ready=0.0, start=0.3, end=1.3, deser=0.1, ser=0.05, bytes_in=100_000_000)
    # Worker 1: one 0.5 s task that starts at once; idle the rest of the 2 s region.
    b.task(worker=1, ready=0.0, start=0.0, end=0.5)
    b.block(0.0, 1.5, futures=2)
    t = b.build(end=2.0)
    bd = breakdown(t)
    assert bd.wall_time == approx(2.0)
    assert bd.compute == approx(1.5)
    assert bd.serialization == approx(0.15)
    assert bd.transfer == approx(0.1)
    assert bd.scheduling == approx(0.1)
    assert bd.idle == approx(4.0 - 1.5 - 0.15 - 0.2)
    assert sum(bd.worker_categories().values()) == approx(bd.worker_time)
    assert bd.driver_blocked == approx(1.5)


def test_serial_time_counts_failed_but_not_crashed():
    b = TraceBuilder(workers=1)
    b.task(start=0, end=1, status=0)
    b.task(start=1, end=1.5, status=1)  # failed: it ran
    b.task(start=1.5, end=3, status=2)  # crashed: its time is unknown to the body column
    r = analyze(b.build())
    assert r.serial_time == approx(1.5)


def test_wall_time_widens_to_cover_tasks_outside_region():
    b = TraceBuilder(workers=1)
    b.task(start=0.0, end=1.0, received=3.0)
    t = b.build(end=2.0)
    assert t.wall_time == approx(2.0)
    assert analyze(t).wall_time == approx(3.0)


def test_critical_path_follows_ready_after_received():
    b = TraceBuilder(workers=4)
    a = b.task("load", worker=0, ready=0.0, start=0.0, end=1.0)  # received 1.0
    b.task("step", worker=1, ready=1.0, start=1.0, end=2.5)  # ready when load's result arrived
    b.task("step", worker=2, ready=2.5, start=2.5, end=3.0)
    b.task("side", worker=3, ready=0.0, start=0.0, end=2.0)  # independent and longer than load
    cp = critical_path(b.build())
    assert a == 0
    assert cp.task_ids == (1, 2, 3)
    assert cp.functions == ("load", "step", "step")
    assert cp.length == approx(3.0)
    assert cp.fraction == approx(1.0)


def test_critical_path_of_independent_tasks_is_the_longest_task():
    b = TraceBuilder(workers=4)
    for w, d in enumerate([1.0, 2.0, 0.5]):
        b.task(worker=w, ready=0.0, start=0.0, end=d)
    cp = critical_path(b.build())
    assert cp.task_ids == (2,)
    assert cp.length == approx(2.0)


def test_map_batch_rows_form_one_unit():
    b = TraceBuilder(workers=1)
    # One hpc.map batch of 3 items (rows share batch, ready, received); deser/ser split per item.
    for k in range(3):
        b.task("sq", ready=0.0, start=0.1 + 0.1 * k, end=0.2 + 0.1 * k, received=0.5, deser=0.01, ser=0.01,
               batch=7, task_id=10 + k)
    t = b.build()
    cp = critical_path(t)
    assert cp.task_ids == (10,)
    r = analyze(t)
    assert r.serial_time == approx(0.3)
    assert r.breakdown.serialization == approx(0.06)


def test_recorded_dependencies_make_the_critical_path_exact():
    # "join" was submitted at 0 and passed the future of "slow" only; it went out late
    # (ready 1.0) for another reason. Timing alone reads it as following the a1 -> a2
    # driver chain (1.0 s); the recorded edge says its chain is slow -> join.
    def build(recorded: bool):
        b = TraceBuilder(workers=4)
        b.task("a1", worker=0, submit=0.0, ready=0.0, start=0.0, end=0.5)         # task 1
        b.task("a2", worker=0, submit=0.5, ready=0.5, start=0.5, end=1.0)         # task 2: submitted after a1's get()
        b.task("slow", worker=1, submit=0.0, ready=0.0, start=0.0, end=0.8)       # task 3
        b.task("join", worker=2, submit=0.0, ready=1.0, start=1.0, end=1.45)      # task 4
        if recorded:
            b.dep(4, on=3)
        return b.build()

    inferred = critical_path(build(False))
    assert not inferred.exact
    assert inferred.task_ids == (1, 2, 4) and inferred.length == approx(1.45)
    exact = critical_path(build(True))
    assert exact.exact
    assert exact.task_ids == (3, 4) and exact.length == approx(1.25)


def test_recorded_dependencies_keep_driver_order_chains():
    # No data edges at all, but b was submitted only after a's result arrived (a get()
    # between them): that chain is real and stays on the path.
    b = TraceBuilder(workers=4)
    b.task("a", worker=0, submit=0.0, ready=0.0, start=0.0, end=1.0)
    b.task("b", worker=1, submit=1.0, ready=1.0, start=1.0, end=2.0)
    b.task("c", worker=2, submit=0.0, ready=0.0, start=0.0, end=1.5)
    b.block(0.0, 1.0)
    b.deps_recorded = True
    cp = critical_path(b.build())
    assert cp.exact and cp.task_ids == (1, 2) and cp.length == approx(2.0)


def _threads_pickling_beside_python() -> TraceBuilder:
    """Threads engine: task 1 computes Python on worker 0 all along (1 s, 1 s CPU); task 2 on worker 1
    unpickles for 0.1 s, runs 0.3 s (0.15 s CPU), pickles for 0.1 s, all while task 1 holds the lock."""
    b = TraceBuilder(workers=2, backend="threads", cores=2)
    b.task("py", worker=0, ready=0.0, start=0.0, end=1.0, cpu=1.0)
    b.task("py", worker=1, ready=0.2, start=0.3, end=0.6, cpu=0.15, deser=0.1, ser=0.1, bytes_in=184)
    return b


def test_on_the_threads_engine_waiting_for_the_gil_is_not_serialization():
    # 184 bytes of ints take microseconds to pickle: the 0.2 s the steps took were the lock held by task 1.
    bd = breakdown(_threads_pickling_beside_python().build(end=1.0))
    assert bd.serialization == approx(0.0, abs=1e-9)
    assert bd.gil_wait == approx(0.2 + 0.15)  # the pickling steps, and the body's time off the CPU
    assert bd.compute == approx(1.0 + 0.15)
    cats = bd.worker_categories()
    assert list(cats)[:3] == ["compute", "GIL wait", "serialization"]
    assert sum(cats.values()) == approx(bd.worker_time)


def test_other_engines_keep_their_categories():
    b = _threads_pickling_beside_python()
    b.meta["backend"] = "local"  # processes: no shared lock, the steps' time is theirs
    bd = breakdown(b.build(end=1.0))
    assert bd.serialization == approx(0.2) and "GIL wait" not in bd.worker_categories()


def test_the_largest_loss_on_the_threads_engine_is_never_a_gil_wait_called_serialization():
    # Pure Python on 2 threads taking turns (each computes half the time): every unpickling and pickling step
    # of 184 bytes took 50 ms, of which the worker measured 20 us of CPU: the rest was waiting for the lock.
    b = TraceBuilder(workers=2, backend="threads", cores=2)
    for k in range(4):
        t = 0.3 * k
        b.imports(b.task("py", worker=0, ready=t, start=t, end=t + 0.3, cpu=0.15), 0, 0.0, pickling_cpu=0.0)
        row = b.task("py", worker=1, ready=t, start=t + 0.05, end=t + 0.25, cpu=0.1, deser=0.05, ser=0.05,
                     bytes_in=184)
        b.imports(row, 0, 0.0, pickling_cpu=2e-5)
    r = analyze(b.build())
    assert r.breakdown.serialization == approx(4 * 2e-5)
    assert r.breakdown.gil_wait >= 0.4 - 4 * 2e-5
    assert r.finding("serialization") is None, r.codes()
    assert not any("largest loss is serialization" in f.advice for f in r.findings), [f.to_text() for f in r.findings]


def _slow_submission_loop(wait: bool) -> TraceBuilder:
    """Four tasks submitted 1 s apart by a driver building each input; with ``wait``, a get() before each."""
    b = TraceBuilder(workers=4)
    for k in range(4):
        b.task("fit", worker=k, submit=k * 1.0 + 0.1, start=k * 1.0 + 0.1, end=k * 1.0 + 0.6)
        if wait:
            b.block(k * 1.0 + 0.1, k * 1.0 + 0.6)
    b.deps_recorded = True
    return b


def test_late_submission_without_a_wait_is_no_chain():
    # The driver built each input (busy, no get()) before submitting: every result was in before
    # the next submission, yet nothing was waited for, so no task follows another.
    cp = critical_path(_slow_submission_loop(wait=False).build())
    assert len(cp) == 1 and cp.length == approx(0.5)
    # The same timing with a get() after each submission: the driver could have used each result.
    cp = critical_path(_slow_submission_loop(wait=True).build())
    assert cp.task_ids == (1, 2, 3, 4)


def test_a_value_passed_through_the_driver_is_a_chain_without_timing():
    # x = hpc.get(step.remote(x)): recorded as driver edges, so the chain holds even where no
    # wait separates the tasks in the table (a wait recorded elsewhere, a trace cut short).
    b = _slow_submission_loop(wait=False)
    for k in (2, 3, 4):
        b.driver_dep(k, k - 1)
    cp = critical_path(b.build())
    assert cp.task_ids == (1, 2, 3, 4) and cp.length == approx(2.0)
