"""Sizing a job from a small run: the fewest workers the simulator says meet the deadline, cost and bandwidth."""

from __future__ import annotations

import math

import pytest
from trace_builder import TraceBuilder, even_trace

from eugo_lab.analysis import sizing
from eugo_lab.analysis.sizing import Job

approx = pytest.approx


def test_even_tasks_need_total_work_over_the_time_left():
    t = even_trace(workers=1, per_worker=4)  # 4 x 1 s
    p = sizing.plan(t, Job(tasks=100, deadline=30, startup=5))
    # 100 s of work in the 25 s left after start-up: 4 workers (3 would need 34 s)
    assert p.workers == 4 and p.wall_time == approx(30.0)
    assert sizing.predict(t, Job(tasks=100, deadline=30, startup=5), 3) == approx(5 + 34.0)
    assert p.measured_tasks == 4 and p.submit_time == 0.0 and p.cost is None and p.bandwidth == 0.0
    assert "4 workers finish in about 30 s" in p.to_text()


def test_startup_counts_against_the_deadline():
    t = even_trace(workers=1, per_worker=4)
    assert sizing.plan(t, Job(tasks=100, deadline=30)).workers == 4  # 100 / 4 = 25 s <= 30 s
    assert sizing.plan(t, Job(tasks=100, deadline=30, startup=10)).workers == 5  # only 20 s left


def test_scale_stretches_every_task():
    t = even_trace(workers=1, per_worker=4)
    # 100 tasks of 2 s in 25 s: 8 workers run 13 rounds (26 s), 9 run 12 (24 s)
    assert sizing.plan(t, Job(tasks=100, deadline=30, startup=5, scale=2)).workers == 9


def test_uneven_tasks_need_more_than_the_median_says_and_the_answer_is_the_fewest():
    b = TraceBuilder(workers=1)
    clock = 0.0
    for d in (1.0, 1.0, 1.0, 5.0):  # one long task in four
        b.task(ready=0.0, start=clock, end=clock + d)
        clock += d
    t = b.build()
    job = Job(tasks=40, deadline=12)
    p = sizing.plan(t, job)
    median_guess = math.ceil(40 * 1.0 / 12)  # scaling one typical task: 4 workers
    assert p.workers > median_guess
    assert sizing.predict(t, job, p.workers) <= 12 < sizing.predict(t, job, p.workers - 1)


def test_submission_pace_is_kept_and_can_make_a_deadline_unreachable():
    b = TraceBuilder(workers=2)
    for k in range(4):  # the driver submitted one task every 0.1 s
        b.task(worker=k % 2, ready=0.1 * k, start=0.1 * k, end=0.1 * k + 0.05)
    t = b.build()
    p = sizing.plan(t, Job(tasks=400, deadline=60))
    assert p.submit_time == approx(40.0)  # 400 submissions at the measured 0.1 s each
    out = sizing.plan(t, Job(tasks=400, deadline=30))
    assert out.workers is None and "unreachable" in out.reason and out.cost is None


def test_a_pause_in_the_small_run_is_not_repeated_for_every_copy():
    """A 50 ms pause among 16 submissions 0.5 ms apart (a busy machine) leaves the plan as it was."""
    def trace(pause: float):
        b = TraceBuilder(workers=2)
        for k in range(16):
            ready = 0.0005 * k + (pause if k >= 8 else 0.0)
            b.task(worker=k % 2, ready=ready, start=ready, end=ready + 0.2)
        return b.build()

    job = Job(tasks=192_000, deadline=180, startup=60)
    quiet, busy = sizing.plan(trace(0.0), job), sizing.plan(trace(0.05), job)
    assert quiet.workers is not None and busy.workers == quiet.workers
    assert busy.submit_time == approx(quiet.submit_time) == approx(96.0, rel=0.01)
    assert "unreachable" not in busy.reason


def test_cost_and_bandwidth():
    t = even_trace(workers=1, per_worker=4)
    p = sizing.plan(t, Job(tasks=100, deadline=30, startup=5, task_bytes=2e6, price_per_worker_hour=3.6))
    assert p.cost == approx(4 * 30 * 0.001)  # every worker billed for start-up and run
    assert p.bandwidth == approx(100 * 2e6 / 25)
    assert "0.008 GB/s" in p.to_text() and "cost per run 0.12 at 3.6 per worker-hour" in p.to_text()


@pytest.mark.parametrize("kwargs, message", [
    ({"tasks": 0, "deadline": 1}, "tasks must be a whole number"),
    ({"tasks": 10, "deadline": 0}, "deadline must be a positive number"),
    ({"tasks": 10, "deadline": 5, "startup": 5}, "leaves no time before the deadline"),
    ({"tasks": 10, "deadline": 5, "scale": -1}, "scale must be a positive number"),
    ({"tasks": 10, "deadline": 5, "price_per_worker_hour": -1}, "price_per_worker_hour must be"),
])
def test_bad_jobs_say_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Job(**kwargs)


def test_an_empty_trace_says_to_run_first():
    with pytest.raises(ValueError, match="the trace has no tasks"):
        sizing.plan(TraceBuilder().build(), Job(tasks=10, deadline=5))


def test_the_notebooks_work_after_the_last_result_is_not_part_of_the_job():
    # The same four tasks, traced alone and in a cell whose driver then worked 15 s more (planning
    # from its small run): a plan is "from asking to the last result", so both plan the same.
    def traced(end: float | None):
        b = TraceBuilder(workers=1)
        for k in range(4):
            b.task(ready=0.0, start=float(k), end=float(k + 1))
        return b.build(end=end)

    job = Job(tasks=100, deadline=30, startup=5)
    alone, in_cell = sizing.plan(traced(None), job), sizing.plan(traced(19.0), job)
    assert alone.workers == in_cell.workers == 4 and in_cell.wall_time == approx(alone.wall_time)
    assert sizing.predict(traced(19.0), job, 4) == approx(30.0)
