"""The simulator on exact synthetic traces, and validated against real runs of the local pool."""

from __future__ import annotations

import pytest
from tasks import nap
from trace_builder import TraceBuilder, even_trace

from eugo_lab import hpc
from eugo_lab.analysis import cheapest_workers, scale, simulate, to_dataframe, workers_for

approx = pytest.approx


def walls(trace, workers):
    return [row.wall_time for row in simulate(trace, workers)]


def test_independent_tasks_divide_among_workers():
    t = even_trace(workers=1, per_worker=4)  # 4 x 1 s measured on 1 worker
    assert walls(t, [1, 2, 3, 4, 8]) == approx([4.0, 2.0, 2.0, 1.0, 1.0])
    rows = simulate(t, [1, 4])
    assert rows[1].speedup == approx(4.0) and rows[1].efficiency == approx(1.0)
    df = to_dataframe(rows)
    assert list(df.columns) == ["workers", "wall_time", "speedup", "efficiency"]


def test_default_worker_counts():
    rows = simulate(even_trace(workers=1, per_worker=2))
    assert [r.workers for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def test_dependent_chain_stays_serial():
    b = TraceBuilder(workers=1)
    for k in range(3):
        b.task(ready=float(k), start=float(k), end=k + 1.0)
    assert walls(b.build(), [1, 4]) == approx([3.0, 3.0])


def test_dependency_delay_is_kept_after_predecessor():
    # On 2 workers: a (0..1) and b (0..1) run together; c became ready 0.5 s after their results.
    b = TraceBuilder(workers=2)
    b.task(worker=0, ready=0.0, start=0.0, end=1.0)
    b.task(worker=1, ready=0.0, start=0.0, end=1.0)
    b.task(worker=0, ready=1.5, start=1.5, end=2.0)
    t = b.build()
    # 1 worker: a 0..1, b 1..2, c ready 2 + 0.5, runs 2.5..3.0.
    assert walls(t, [1, 2]) == approx([3.0, 2.0])


def test_driver_time_stays_serial():
    b = TraceBuilder(workers=1)
    b.task(ready=0.0, start=0.0, end=0.5)
    b.task(ready=2.0, start=2.0, end=2.5)  # the driver submitted it at 2.0 without waiting for a result...
    b.block(3.0, 3.0, futures=2)  # ...computed until 3.0, then get() found both results done
    t = b.build(end=3.0)
    assert walls(t, [1, 8]) == approx([3.0, 3.0])


def test_per_task_overhead_is_kept():
    b = TraceBuilder(workers=1)
    for k in range(4):  # 0.1 s dispatch + 1 s body + 0.1 s return each, one after another
        r = 1.2 * k
        b.task(ready=r, start=r + 0.1, end=r + 1.1, received=r + 1.2)
    # Each task became ready when the previous result arrived: a chain, whatever the worker count.
    assert walls(b.build(), [1, 4]) == approx([4.8, 4.8])


def held_up_trace(gap: float):
    """4 tasks of 0.1 s queued on 1 worker, 1 ms apart except ``gap`` before the third."""
    b = TraceBuilder(workers=1)
    s = 0.0
    for k in range(4):
        b.task(ready=0.0, start=s, end=s + 0.1)
        s += 0.1 + (gap if k == 1 else 0.001)
    return b.build()


def test_a_held_up_dispatch_is_kept_for_its_unit():
    # The third unit waited 0.3 s with its worker free (the driver's I/O thread starved): the
    # replay keeps that hold-up for it, not the 1 ms turnaround of the others.
    t = held_up_trace(0.3)
    assert walls(t, [1]) == approx([0.702])
    # On 2 workers it still starts 0.3 s after its worker's previous unit (ready + 0.3 from the trace).
    assert walls(t, [2]) == approx([0.5])


def test_turnaround_jitter_is_not_a_hold_up():
    assert walls(held_up_trace(0.0018), [1]) == approx([0.403])  # 0.8 ms over the median turnaround: jitter


def test_workers_for_target():
    t = even_trace(workers=1, per_worker=8)  # 8 x 1 s
    ans = workers_for(t, 2.0)
    assert ans.workers == 4 and ans.wall_time == approx(2.0)
    assert workers_for(t, 100.0).workers == 1
    no = workers_for(t, 0.5)
    assert no.workers is None and no.wall_time == approx(1.0)
    assert "unreachable" in no.reason


def test_scale_more_tasks():
    t = even_trace(workers=1, per_worker=4)
    assert scale(t, 1, 4) == approx(1.0)
    assert scale(t, 2, 4) == approx(2.0)
    assert scale(t, 2.5, 1) == approx(10.0)
    assert scale(t, 0.5, 1) == approx(2.0)
    with pytest.raises(ValueError):
        scale(t, 0, 1)


def test_cheapest_workers_meets_deadline():
    t = even_trace(workers=1, per_worker=8)
    c = cheapest_workers(t, deadline=3.0, price_per_worker_hour=3600.0)
    # 2 workers take 4 s (late); 4 and 8 workers both cost 8; the tie goes to fewer workers.
    assert (c.workers, c.wall_time, c.cost) == (4, approx(2.0), approx(8.0))
    none = cheapest_workers(t, deadline=0.5, price_per_worker_hour=1.0)
    assert none.workers is None and "deadline" in none.reason


def test_cheapest_prefers_fewer_workers_when_driver_time_is_serial():
    b = TraceBuilder(workers=1)
    for k in range(4):
        b.task(ready=0.0, start=float(k), end=k + 1.0)
    t = b.build(end=6.0)  # 2 s of driver work after the last result
    c = cheapest_workers(t, deadline=5.0, price_per_worker_hour=3600.0, candidates=[1, 2, 4])
    # 1 worker: 6 s (late); 2 workers: 4 s, cost 8; 4 workers: 3 s, cost 12.
    assert (c.workers, c.wall_time, c.cost) == (2, approx(4.0), approx(8.0))


# -- validation against real runs ------------------------------------------------------------------
def _measure(fn, workers: int, tasks: int = 12, seconds: float = 0.05):
    hpc.init(backend="local", workers=workers)
    try:
        hpc.get([fn.remote(0.001) for _ in range(workers * 2)])  # warm: workers started, function known
        with hpc.trace() as t:
            hpc.get([fn.remote(seconds) for _ in range(tasks)])
        return t.trace
    finally:
        hpc.shutdown()


def _cross_predict(fn):
    t1 = _measure(fn, 1)
    t2 = _measure(fn, 2)
    pred2 = simulate(t1, [2])[0].wall_time
    pred1 = simulate(t2, [1])[0].wall_time
    self1 = simulate(t1, [1])[0].wall_time
    err2 = pred2 / t2.wall_time - 1
    err1 = pred1 / t1.wall_time - 1
    print(f"\n{fn.__name__ if hasattr(fn, '__name__') else fn}: measured 1w {t1.wall_time:.3f} s, 2w "
          f"{t2.wall_time:.3f} s; predicted 2w from 1w {pred2:.3f} s ({err2:+.0%}), 1w from 2w {pred1:.3f} s "
          f"({err1:+.0%}); 1w trace replayed on 1w {self1:.3f} s")
    return t1, t2, self1, err1, err2


def test_simulator_predicts_real_sleeping_tasks():
    # Sleeping tasks do not compete for cores, so this checks the replay model itself even on a
    # machine shared with other test runs.
    t1, _, self1, err1, err2 = _cross_predict(nap)
    assert self1 == approx(t1.wall_time, rel=0.1)  # replaying a trace on its own worker count reproduces it
    assert abs(err2) < 0.35
    assert abs(err1) < 0.35


def test_entry_points_refuse_what_is_not_a_trace_and_bad_numbers():
    from eugo_lab.analysis import analyze, breakdown, cost, critical_path

    for fn in (analyze, breakdown, critical_path, simulate):
        with pytest.raises(TypeError, match=rf"{fn.__name__}\(\) takes a Trace \(from 'with hpc.trace\(\) as t', "
                                            r"hpc.last_trace\(\) or Trace.load\(path\)\), got dict"):
            fn({"tasks": []})
    trace = even_trace()
    with pytest.raises(ValueError, match="target_time must be a positive number of seconds, got -1"):
        workers_for(trace, -1)
    with pytest.raises(ValueError, match="factor must be positive, got nan"):
        scale(trace, float("nan"), 2)
    with pytest.raises(ValueError, match="deadline must be a positive number of seconds, got 0"):
        cheapest_workers(trace, 0, 1.0)
    with pytest.raises(ValueError, match="price_per_worker_hour must not be negative, got -2"):
        cheapest_workers(trace, 10, -2)
    assert cost(trace, 1.0).workers == trace.n_workers


def test_gates_come_from_recorded_waits_and_dependencies_not_from_timing():
    from eugo_lab.analysis.simulate import replay_of

    def loop(wait: bool) -> TraceBuilder:
        # Each task done before the next submission, 1 s apart: a driver building inputs, or waiting.
        b = TraceBuilder(workers=4)
        for k in range(4):
            b.task("fit", worker=k, submit=k + 0.1, start=k + 0.1, end=k + 0.6)
            if wait:
                b.block(k + 0.1, k + 0.6)
        b.deps_recorded = True
        return b

    # Busy building, never waiting: no task held the next one up.
    assert replay_of(loop(False).build()).gates.tolist() == [False] * 4
    # A get() after each submission: the first three results could have decided the next submission.
    assert replay_of(loop(True).build()).gates.tolist() == [True, True, True, False]
    b = loop(False)
    b.driver_dep(3, 2)  # a value passed on through the driver gates without any wait
    assert replay_of(b.build()).gates.tolist() == [False, True, False, False]
    old = loop(False)
    old.deps_recorded = False  # a trace saved before dependencies were recorded: inferred from timing
    assert replay_of(old.build()).gates is None
