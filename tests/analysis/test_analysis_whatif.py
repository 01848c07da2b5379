"""Findings that teach: each mistake found by its cost, priced by replaying the trace with the fix.

Synthetic traces with exact numbers (a fake clock), each next to a near miss that must not be flagged.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np
import pytest
from trace_builder import TraceBuilder

from eugo_lab.analysis import analyze, whatif
from eugo_lab.analysis.simulate import replay, replay_of

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "data"))
from make_golden import partial_blocking

approx = pytest.approx
CELL = "/tmp/ipykernel_4242/2718.py"


# -- item 1/2: partial blocking, found by its cost, with its line and saves ------------------------
def test_partial_blocking_is_flagged_with_line_and_saves():
    r = analyze(partial_blocking())
    f = r.findings[0]
    assert f.code == "blocking" and f.severity == "problem"
    assert f.evidence["source"] == f"{CELL}:4" and "cell line 4" in f.verdict
    assert f.evidence["serialized_tasks"] == 6 and "6 of 20 tasks" in f.verdict
    assert f.evidence["concurrency"] == approx(1.0)
    assert r.wall_time == approx(3.101)
    # The fix: all 20 submitted together at the side-by-side speed this trace measured (250 ms,
    # not the 200 ms the serialized ones took alone): 10 per worker of 10 ms dispatch + 250 ms.
    assert f.wall_after == approx(2.6035, abs=1e-3)
    assert f.saves == approx(3.101 - 2.6035, abs=1e-3)
    assert f.fix == "move the get() at cell line 4 out of the loop"
    assert r.to_text().splitlines()[0] == "Biggest win: move the get() at cell line 4 out of the loop — predicted " \
                                          "3.1 s → 2.6 s"
    assert "saves 498 ms: 3.1 s → 2.6 s predicted" in f.to_text()
    # The headline no longer says scaling is good at 76% efficiency.
    sp = r.finding("speedup")
    assert "Scaling is good" not in sp.advice and "move the get() at cell line 4" in sp.advice


def test_findings_are_ordered_by_time_saved():
    r = analyze(partial_blocking())
    priced = [f.saves for f in r.findings if f.saves is not None and f.severity in ("problem", "warning")]
    assert priced == sorted(priced, reverse=True) and r.codes()[:2] == ["blocking", "contention"]


def test_a_short_setup_loop_is_not_blocking():
    # Near miss: 3 tasks of 20 ms waited on one by one (a setup step), then 20 x 200 ms fanned out.
    b = TraceBuilder(workers=2)
    t = 0.0
    for _ in range(3):
        b.task("setup", submit=t, ready=t, start=t + 0.002, end=t + 0.022, received=t + 0.023)
        b.block(t + 0.0005, t + 0.0235, source=f"{CELL}:2")
        t += 0.024
    for k in range(20):
        s = t + 0.2 * (k // 2)
        b.task("work", worker=k % 2, submit=t, ready=t, start=s, end=s + 0.2)
    b.block(t + 0.001, t + 2.0, futures=20, source=f"{CELL}:5")
    r = analyze(b.build())
    assert "blocking" not in r.codes(), r.to_text()


# -- item 3: waiting in submission order ------------------------------------------------------------
def submission_order_trace(slow_first: bool) -> object:
    """6 tasks submitted at 0; the loop gets them in order and handles each for 100 ms."""
    b = TraceBuilder(workers=2)
    first = 1.0 if slow_first else 0.05
    b.task("f", worker=0, ready=0.0, start=0.0, end=first)
    for k in range(5):
        b.task("f", worker=1, ready=0.0, start=0.1 * k, end=0.1 * (k + 1))
    arrive = [first] + [0.1 * (k + 1) for k in range(5)]
    t = 0.001
    for a in arrive:
        end = max(t, a)
        b.block(t, end, source=f"{CELL}:3")
        t = end + 0.1
    return b.build(end=t - 0.1 + 0.1)


def test_waiting_in_submission_order_is_priced_by_replaying_the_driver():
    r = analyze(submission_order_trace(True))
    f = r.finding("submission-order")
    assert f.term == "Submission order" and f.severity == "warning"
    assert r.wall_time == approx(1.6)
    # In order: done at 1.0 + 6 x 100 ms = 1.6 s. As completed: the five quick results handled by
    # 0.6 s, the slow one at 1.0 + 0.1 = 1.1 s.
    assert f.saves == approx(0.5) and f.wall_after == approx(1.1)
    assert f.evidence["task_id"] == 1 and f.evidence["done_meanwhile"] == 5
    assert f.evidence["waited"] == approx(0.999)
    assert "hpc.as_completed" in f.advice and "cell line 3" in f.advice
    assert "5 later results were already done" in f.verdict


def test_results_arriving_in_order_are_not_flagged():
    r = analyze(submission_order_trace(False))
    assert "submission-order" not in r.codes(), r.to_text()


# -- item 3 / 4: contention from a compare pair ----------------------------------------------------
def compare_pair(together: float) -> tuple[object, object]:
    base = TraceBuilder(workers=1)
    for k in range(8):
        base.task("crunch", ready=0.0, start=0.2 * k, end=0.2 * (k + 1))
    main = TraceBuilder(workers=2)
    for k in range(8):
        main.task("crunch", worker=k % 2, ready=0.0, start=together * (k // 2), end=together * (k // 2 + 1))
    return base.build(), main.build()


def test_contention_from_a_compare_pair_explains_the_speedup_gap():
    base, main = compare_pair(0.25)
    r = analyze(main, baseline=base)
    assert r.measured_speedup == approx(1.6) and r.speedup == approx(1.6)
    assert r.estimated_speedup == approx(2.0)
    assert "measured against 1 worker (1.6 s); task-time estimate 2x" in r.to_text()
    f = r.finding("contention")
    assert f.term == "Contention"
    assert f.evidence["slowdown"] == approx(0.25) and f.evidence["alone"] == approx(0.2)
    assert "25% slower side by side" in f.verdict and "in the 1-worker run" in f.verdict
    assert "measured speedup, 1.6x, is below the task-time estimate, 2x" in f.verdict
    assert f.saves == approx(0.2) and f.wall_after == approx(0.8)
    sp = r.finding("speedup")
    assert sp.evidence["measured_speedup"] == approx(1.6) and "measured against the 1-worker run" in sp.verdict


def test_no_contention_within_noise():
    base, main = compare_pair(0.21)  # 5% slower: within noise
    r = analyze(main, baseline=base)
    assert "contention" not in r.codes()
    assert "estimated from task time" in analyze(main).to_text()


def test_contention_within_one_trace_uses_its_tasks_that_ran_alone():
    f = analyze(partial_blocking()).finding("contention")
    assert f.evidence["alone"] == approx(0.2) and f.evidence["together"] == approx(0.25)
    assert "when they ran alone in this run" in f.verdict and f.evidence["baseline"] is False


# -- item 3: slow submission -------------------------------------------------------------------------
def slow_submission_trace(build: float, body: float = 0.1, workers: int = 4, n: int = 10) -> object:
    b = TraceBuilder(workers=workers, cores=workers)
    for k in range(n):
        r = build * (k + 1)
        b.task("fit", worker=k % workers, submit=r, ready=r, start=r + 0.001, end=r + 0.001 + body)
    last = build * n + 0.001 + body
    b.block(build * n + 0.0005, last, futures=n, source=f"{CELL}:7")
    return b.build()


def test_slow_submission_is_priced_as_tasks_building_their_own_inputs():
    r = analyze(slow_submission_trace(0.1))
    f = r.finding("slow-submission")
    assert f.term == "Slow submission" and f.evidence["tasks"] == 10
    assert f.evidence["gap"] == approx(0.1) and f.evidence["span"] == approx(0.9)
    assert "hpc.map(fit, inputs)" in f.advice
    assert r.wall_time == approx(1.101)
    # The fix: submitted 0.5 ms apart from the start, each task 100 ms of building + 100 ms of
    # work (the first's input too: it was built on the driver before the first submission): 4 workers,
    # 3 rounds.
    assert f.wall_after == approx(0.6, abs=0.01)
    assert r.findings[0].code == "slow-submission"


def test_fast_submission_or_busy_workers_are_not_slow_submission():
    assert "slow-submission" not in analyze(slow_submission_trace(0.0003)).codes()
    # 5 ms between submissions, but 2 workers are busy anyway with 1 s tasks: feeding faster saves nothing.
    busy = TraceBuilder(workers=2)
    for k in range(10):
        r = 0.005 * (k + 1)
        s = max(r, (k // 2) * 1.0) + 0.001
        busy.task("fit", worker=k % 2, submit=r, ready=r, start=s, end=s + 1.0)
    busy.block(0.051, 5.1, futures=10)
    assert "slow-submission" not in analyze(busy.build()).codes()


# -- item 3: unbalanced partitions -------------------------------------------------------------------
def partitions_trace(mb: list[float], seconds: list[float]) -> object:
    b = TraceBuilder(workers=2)
    free = [0.0, 0.0]
    for size, d in zip(mb, seconds):
        w = 0 if free[0] <= free[1] else 1
        b.task("summarize", worker=w, ready=0.0, start=free[w], end=free[w] + d, bytes_in=int(size * 1_000_000))
        free[w] += d
    return b.build()


def test_unbalanced_partitions_suggest_equal_ones():
    r = analyze(partitions_trace([8, 1, 2, 1, 1, 3], [0.8, 0.1, 0.2, 0.1, 0.1, 0.3]))
    f = r.finding("unbalanced-partitions")
    assert f.term == "Unbalanced partitions" and f.related == ("Partition",)
    assert f.evidence["bytes_min"] == 1_000_000 and f.evidence["bytes_max"] == 8_000_000
    assert f.evidence["duration_max"] == approx(0.8) and f.evidence["correlation"] >= 0.8
    assert "np.array_split" in f.advice
    # 1.6 s of work in 6 equal parts of 267 ms on 2 workers: 3 rounds, 0.8 s.
    assert r.wall_time == approx(0.8) and f.wall_after == approx(0.8)
    assert "straggler" not in r.codes()  # the partitions are the cause; no second finding for task 1


def test_sizes_or_durations_alone_varying_are_not_unbalanced():
    sizes = [8, 1, 2, 1, 1, 3]
    assert "unbalanced-partitions" not in analyze(partitions_trace(sizes, [0.2] * 6)).codes()
    # Durations spread but against the sizes (small input, long task): not a partitioning problem.
    assert "unbalanced-partitions" not in analyze(partitions_trace(sizes, [0.1, 0.8, 0.3, 0.8, 0.8, 0.2])).codes()


# -- batching and put: priced fixes ----------------------------------------------------------------
def test_batching_priced_on_a_fan_out_of_tiny_tasks():
    b = TraceBuilder(workers=1)
    for k in range(20):
        r = 0.0002 * k
        s = max(r + 0.002, 0.003 * k + 0.002)
        b.task("tiny", ready=r, start=s, end=s + 0.001, received=s + 0.003)
    r = analyze(b.build())
    f = r.finding("tasks-too-small")
    # Each round trip is 4 ms beyond a 1 ms body, but the result's return overlapped the next dispatch: the worker
    # sat 2 ms between bodies (61 ms x 1 worker - 20 ms of bodies = 2.1 ms a task), twice the body, not four times.
    assert f.evidence["median_overhead"] == approx((r.wall_time - 0.02) / 20)
    assert f.evidence["suggested_batch"] == 10 and f.severity == "warning"
    assert f.fix == "batch tiny() 10 items per task with hpc.map"
    # Two batches of 10 ms each, one dispatch (2 ms) each: about a third of the 61 ms run.
    assert f.wall_after == approx(r.wall_time - f.saves) and f.saves > 0.3 * r.wall_time


def test_driver_paced_tiny_tasks_are_a_note():
    b = TraceBuilder(workers=1)
    for k in range(20):  # the driver made one task per 20 ms: batching cannot make it faster
        r = 0.02 * k
        b.task("tiny", ready=r, start=r + 0.002, end=r + 0.003, received=r + 0.005)
    f = analyze(b.build()).finding("tasks-too-small")
    assert f.severity == "note" and "saves almost nothing" in f.to_text()


def test_repeated_argument_priced_as_put():
    b = TraceBuilder(workers=2)
    for k in range(8):
        r = 0.006 * k  # the driver pickles 5 MB per call
        s = max(r + 0.01, 0.11 * (k // 2) + 0.01)
        b.task("model", worker=k % 2, ready=r, start=s + 0.05, end=s + 0.1, deser=0.05, bytes_in=5_000_000)
    r = analyze(b.build())
    f = r.finding("repeated-argument")
    assert f.fix == "send model()'s 5 MB argument once with hpc.put"
    assert f.saves > 0.1 and f.wall_after < r.wall_time


def put_trace():
    """4 tasks of 30 ms get a 5 MB copy each; the driver pickles each for 80 ms, dispatch waits for it."""
    b = TraceBuilder(workers=2)
    # (ready, worker, start of unpickling, unpickling): the first two unpickle while the driver
    # pickles the next copies (40 ms), the last two after (20 ms); 8 ms between a worker's units
    # and 5 ms before each result: a copy in flight (5 MB at the local pool's 1 GB/s).
    for ready, w, occ, deser in [(0.08, 0, 0.33, 0.04), (0.16, 1, 0.335, 0.04), (0.24, 0, 0.408, 0.02),
                                 (0.32, 1, 0.413, 0.02)]:
        b.task("model", worker=w, ready=ready, start=occ + deser, end=occ + deser + 0.03,
               received=occ + deser + 0.035, deser=deser, bytes_in=5_000_000)
    return b.build()


def test_put_is_priced_without_the_copies_latency_and_contention():
    r = analyze(put_trace())
    f = r.finding("repeated-argument")
    # The fix replayed: the first copy's pickling is gone (the driver is free from 0.5 ms), the put
    # itself (a plain pickle: half the median unpickling, 15 ms) ends at 15.5 ms; each worker loads the
    # object once at the median unpickling (30 ms) and then runs its tasks 3 ms apart (8 ms less one
    # copy's 5 ms transfer), results arrive at once.
    assert r.wall_time == approx(0.468)
    assert f.wall_after == approx(0.112)


def test_put_fix_drops_the_copies_dispatch_hold_ups():
    rp = replay_of(put_trace())
    held = dataclasses.replace(rp, stall=np.array([0.0, 0.0, 0.2, 0.0]))
    fixed = whatif.sent_once(held, np.arange(4), np.zeros(4), np.array([0.04, 0.04, 0.02, 0.02]), keep=2,
                             pre=0.003, post=0.0)
    assert fixed.stall.tolist() == [0.0] * 4
    assert fixed.occupancy.tolist() == approx([0.06, 0.06, 0.03, 0.03])


# -- item 5: advice weighted by share ------------------------------------------------------------------
def phase_trace(read: float, compute: float) -> object:
    b = TraceBuilder(workers=2, cores=2)
    for k in range(4):
        s = (read + compute) * (k // 2)
        row = b.task("load", worker=k % 2, ready=0.0, start=s, end=s + read + compute, cpu=compute)
        b.phase(row, "read", s, s + read, 0.001)
        b.phase(row, "compute", s + read, s + read + compute, compute)
    return b.build()


def test_a_short_waiting_phase_is_overlapped_not_given_more_workers():
    r = analyze(phase_trace(0.05, 0.15))
    f = r.finding("io-bound-phase")
    assert "is 25% of its tasks' time" in f.verdict and f.evidence["task_share"] == approx(0.25)
    assert "Overlap the phase 'read' with compute" in f.advice
    assert "More workers than cores would slow the 75% of the task that computes" in f.advice
    assert "hpc.init(workers=" not in f.advice
    # Prefetching hides the 50 ms read behind the previous item's compute: 2 rounds of 150 ms.
    assert f.wall_after == approx(0.3)


def test_a_waiting_task_gets_more_workers():
    f = analyze(phase_trace(0.15, 0.05)).finding("io-bound-phase")
    assert "hpc.init(workers=4)" in f.advice
    assert f.wall_after == approx(0.2)  # 4 workers, one round


# -- item 6: honest on 1 core ----------------------------------------------------------------------------
def one_worker_loop(overhead: bool) -> object:
    b = TraceBuilder(workers=1, cores=1)
    t = 0.0
    for _ in range(6):
        d, back = (0.01, 0.002) if overhead else (0.0, 0.0)
        b.task("f", submit=t, ready=t, start=t + d, end=t + d + 0.2, received=t + d + 0.2 + back)
        b.block(t, t + d + 0.2 + back, source=f"{CELL}:4")
        t += d + 0.2 + back
    return b.build()


def test_one_worker_run_says_what_two_workers_would_do():
    r = analyze(one_worker_loop(overhead=True))
    sp = r.finding("speedup")
    assert sp.severity == "info" and "1 worker: nothing ran in parallel" in sp.verdict
    assert sp.evidence["on_2_workers"]["before"] == approx(r.wall_time, abs=0.01)
    f = r.finding("blocking")
    assert f is not None and "On 2 workers the replay predicts 1.27 s as written and 612 ms with the fix" in f.verdict
    # 3 rounds of 200 ms per worker, after the first dispatch (10 ms) and before the last return (2 ms).
    assert f.evidence["on_2_workers"]["after"] == approx(0.612, abs=1e-3)
    # On this one worker, submitting first still overlaps each dispatch with the previous task.
    assert f.saves == approx(0.06, abs=0.005)


def test_one_worker_headline_prices_the_fix_on_two_workers():
    r = analyze(one_worker_loop(overhead=False))
    f = r.finding("blocking")
    assert f.severity == "note" and f.saves == approx(0.0, abs=1e-9)  # nothing to overlap with on 1 worker
    assert r.to_text().splitlines()[0] == ("Biggest win on 2 workers: move the get() at cell line 4 out of the loop "
                                           "— predicted 1.2 s → 600 ms (this run had 1 worker)")


# -- the replay's what-if helpers ------------------------------------------------------------------------
def test_without_waits_keeps_real_dependencies():
    b = TraceBuilder(workers=2)
    b.task(worker=0, ready=0.0, start=0.0, end=1.0)
    b.task(worker=1, ready=1.5, start=1.5, end=2.0)  # depends on the first (ready after its result)
    r = replay_of(b.build())
    fixed = whatif.without_waits(r, [1.2], [1.4], [])  # cut driver waiting not related to the chain
    assert replay(fixed, 2) == approx(1.8)


def test_every_finding_names_a_glossary_term():
    from eugo_lab import glossary

    traces = [partial_blocking(), submission_order_trace(True), slow_submission_trace(0.1),
              partitions_trace([8, 1, 2, 1, 1, 3], [0.8, 0.1, 0.2, 0.1, 0.1, 0.3]), phase_trace(0.05, 0.15)]
    base, main = compare_pair(0.25)
    reports = [analyze(t) for t in traces] + [analyze(main, baseline=base)]
    terms = {f.term for r in reports for f in r.findings} | {t for r in reports for f in r.findings for t in f.related}
    assert {"Contention", "Submission order", "Slow submission", "Unbalanced partitions"} <= terms
    for term in terms:
        assert glossary.lookup(term).term == term


def test_a_speedup_gap_without_slower_tasks_is_explained_by_the_speedup_finding():
    base, main = compare_pair(0.2)  # same task time side by side...
    slow_base = TraceBuilder(workers=1)
    for k in range(8):  # ...but the 1-worker run had 50 ms of dispatch between tasks
        slow_base.task("crunch", ready=0.0, start=0.25 * k + 0.05, end=0.25 * (k + 1))
    r = analyze(main, baseline=slow_base.build())
    assert "contention" not in r.codes()
    assert r.measured_speedup == approx(2.5) and r.estimated_speedup == approx(2.0)
    assert "time outside the tasks" in r.finding("speedup").verdict
