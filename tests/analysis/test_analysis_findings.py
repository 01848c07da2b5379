"""Each finding fires on a synthetic trace built to show it (exact numbers) and not on a near miss."""

from __future__ import annotations

import math

import pytest
from trace_builder import TraceBuilder, even_trace

from eugo_lab.analysis import analyze, cost

approx = pytest.approx


def codes(trace):
    return analyze(trace).codes()


# -- Speedup ---------------------------------------------------------------------------------------
def test_speedup_graded_where_tasks_ran_side_by_side():
    good = analyze(even_trace(workers=4, per_worker=3)).finding("speedup")
    assert good.term == "Speedup" and good.severity == "info"
    assert good.evidence["speedup"] == approx(4.0) and good.evidence["efficiency"] == approx(1.0)
    b = TraceBuilder(workers=4)
    b.task(worker=0, start=0, end=4)
    b.task(worker=1, start=0, end=1)  # side by side for 1 s of 4: a quarter of the run, enough to grade
    poor = analyze(b.build()).finding("speedup")
    assert poor.severity == "problem"  # 1.25x of 4: 31% efficiency
    assert poor.evidence["speedup"] == approx(1.25)
    assert poor.verdict == ("1.2x on 4 workers, ideal 4x (31% efficiency): 5 s of task time in 4 s "
                            "(estimated from task time).")


def test_no_speedup_finding_where_tasks_never_ran_side_by_side():
    # Two tasks one after the other on 4 workers: task time / wall time is 1x, which says nothing about parallelism.
    b = TraceBuilder(workers=4)
    b.task(worker=0, start=0, end=1)
    b.task(worker=0, start=1, end=2)
    rep = analyze(b.build())
    assert rep.finding("speedup") is None
    # A cell of driver work with one microsecond task: no "0.0x" finding either.
    b = TraceBuilder(workers=2)
    b.task(worker=0, start=0.5, end=0.50001)
    assert analyze(b.build(end=1.0)).finding("speedup") is None


# -- Straggler and Long tail ------------------------------------------------------------------------
def straggler_trace(slow: float) -> object:
    b = TraceBuilder(workers=4)
    for w in range(4):
        b.task("f", worker=w, ready=0.0, start=0.0, end=0.1)
    for w in range(3):
        b.task("f", worker=w, ready=0.0, start=0.1, end=0.2)
    b.task("f", worker=3, ready=0.0, start=0.1, end=0.1 + slow, task_id=99)
    return b.build()


def test_straggler_found_with_tail_cost():
    r = analyze(straggler_trace(1.0))
    f = r.finding("straggler")
    assert f.term == "Straggler"
    assert f.evidence["median"] == approx(0.1)
    assert f.evidence["tasks"] == [{"task_id": 99, "duration": approx(1.0)}]
    assert f.evidence["tail_cost"] == approx(0.9)  # last end 1.1 -> 0.2 had it taken the median
    assert "task 99" in f.verdict


def test_long_tail_found():
    f = analyze(straggler_trace(1.0)).finding("long-tail")
    assert f.term == "Long tail"
    assert f.evidence["tail"] == approx(0.9)
    assert f.evidence["fraction"] == approx(0.9 / 1.1)
    assert f.evidence["idle_worker_time"] == approx(4 * 0.9 - 0.9)
    assert f.evidence["tasks"] == [99]


def tail_trace(gap: float) -> object:
    """Five 0.3 s tasks then a 1 s one, submitted ``gap`` apart (0.1 s: the driver built each input)."""
    b = TraceBuilder(workers=2)
    free = [0.0, 0.0]
    for k, d in enumerate([0.3] * 5 + [1.0]):
        t = gap * (k + 1)
        w = 0 if free[0] <= free[1] else 1
        s = max(t + 0.001, free[w])
        b.task("fit", worker=w, submit=t, ready=t, start=s, end=s + d)
        free[w] = s + d
    b.block(gap * 6 + 0.001, max(free) + 0.001, futures=6)
    return b.build()


def test_submitting_the_long_task_first_only_where_its_input_existed():
    # A bare submission loop: the last task could have gone first.
    assert analyze(tail_trace(0.0005)).finding("long-tail").fix == "submit task 6 first"
    # The driver spent 0.1 s building each input (busy, no wait): task 6's input did not exist
    # before the others', so reordering is no advice; splitting the long task still is.
    f = analyze(tail_trace(0.1)).finding("long-tail")
    assert f.fix == "split task 6 into smaller pieces"


def test_no_straggler_below_ratio_or_floor():
    assert "straggler" not in codes(straggler_trace(0.25))  # 2.5x the median
    b = TraceBuilder(workers=1)
    for k in range(5):
        b.task(start=0.01 * k, end=0.01 * k + 0.001)
    b.task(start=0.1, end=0.11)  # 10x the median but only 9 ms longer
    assert "straggler" not in codes(b.build())


def test_no_long_tail_when_workers_finish_together():
    assert "long-tail" not in codes(even_trace(workers=4, per_worker=3))
    b = TraceBuilder(workers=4)
    for w in range(4):
        b.task(worker=w, ready=0.0, start=0.0, end=1.0)
    b.task(worker=0, ready=0.0, start=1.0, end=1.2)  # tail 0.2 of 1.2 s = 17% < 20%
    assert "long-tail" not in codes(b.build())


# -- Blocking ---------------------------------------------------------------------------------------
def blocking_trace(get_inside_loop: bool, kind: str = "get", through_driver: bool = False) -> object:
    """Five tasks; ``through_driver``: each was passed the value the get() before it returned."""
    b = TraceBuilder(workers=2)
    if through_driver:
        for k in range(2, 6):
            b.driver_dep(k, k - 1)
    t = 0.0
    for k in range(5):
        if get_inside_loop:
            b.task("g", worker=k % 2, submit=t, ready=t, start=t + 0.01, end=t + 0.11, received=t + 0.12)
            b.block(t + 0.001, t + 0.121, futures=1, kind=kind, source="/home/student/loop.py:7")
            t += 0.13
        else:
            b.task("g", worker=k % 2, submit=0.001 * k, ready=0.001 * k, start=0.13 * k, end=0.13 * k + 0.1,
                   received=0.13 * k + 0.11)
    if not get_inside_loop:
        for k in range(5):
            b.block(0.01 if k == 0 else 0.13 * (k - 1) + 0.111, 0.13 * k + 0.111, futures=1)
    return b.build()


def test_blocking_found_with_source_line():
    f = analyze(blocking_trace(True)).finding("blocking")
    assert f.term == "Blocking" and f.severity == "problem"
    assert f.evidence["source"] == "/home/student/loop.py:7"
    assert f.evidence["serialized_tasks"] == 5
    assert f.evidence["blocked"] == approx(5 * 0.12)
    assert f.evidence["concurrency"] == approx(1.0)
    assert "(loop.py:7)" in f.verdict and "/home/student" not in f.verdict
    assert "loop.py:7" in f.advice


def test_awaiting_each_task_in_the_loop_is_blocking_too_with_async_advice():
    f = analyze(blocking_trace(True, kind="await")).finding("blocking")
    assert f.evidence["serialized_tasks"] == 5 and f.evidence["blocked"] == approx(5 * 0.12)
    assert f.verdict.startswith("The driver awaited each task right after submitting it (loop.py:7)")
    assert "asyncio.gather(*futures)" in f.advice and "hpc.get()" not in f.advice


def test_no_blocking_when_all_submitted_first():
    r = analyze(blocking_trace(False))
    assert "blocking" not in r.codes()


def test_blocking_explains_the_chain_so_no_fan_out():
    assert "critical-path" not in codes(blocking_trace(True))


def test_a_chain_through_the_driver_is_no_blocking_mistake():
    # x = hpc.get(step.remote(x)): the runtime recorded that each task was passed the previous
    # result. Moving the get() out of the loop is impossible; the chain must be told as a chain.
    r = analyze(blocking_trace(True, through_driver=True))
    assert "blocking" not in r.codes()
    f = r.finding("critical-path")
    assert f.term == "Fan-out" and f.evidence["through_driver"] == 4
    assert "out of the loop" not in f.advice and "Submit all tasks first" not in f.advice
    assert "g.remote(fut)" in f.advice and "round trip" in f.advice
    # Passing futures along saves the round trips only: never below the steps run one after another.
    assert f.wall_after >= 5 * 0.12 - 1e-9
    assert f.saves == approx(4 * 0.01, abs=0.002)  # each get() returned 1 ms after the result, 9 ms to submit


def test_chain_through_the_driver_for_some_pairs_only_keeps_the_others_blocking():
    b = TraceBuilder(workers=2)
    t = 0.0
    for k in range(8):
        b.task("g", worker=k % 2, submit=t, ready=t, start=t + 0.01, end=t + 0.11, received=t + 0.12)
        b.block(t + 0.001, t + 0.121, futures=1, source="/home/student/loop.py:7")
        t += 0.13
    b.driver_dep(2, 1)  # one pair passes a value on; six pairs are independent
    f = analyze(b.build()).finding("blocking")
    assert f.evidence["serialized_tasks"] == 7


# -- Scheduling overhead / Batching ----------------------------------------------------------------
def small_tasks_trace(body: float) -> object:
    b = TraceBuilder(workers=1)
    for k in range(20):
        r = 0.02 * k
        b.task("tiny", ready=r, start=r + 0.002, end=r + 0.002 + body, received=r + 0.004 + body)
    return b.build()


def test_tasks_too_small_suggests_batch():
    f = analyze(small_tasks_trace(0.001)).finding("tasks-too-small")
    assert f.term == "Scheduling overhead" and f.related == ("Batching",)
    assert f.evidence["median_body"] == approx(0.001)
    assert f.evidence["median_overhead"] == approx(0.004)
    assert f.evidence["total_overhead"] == approx(0.08)
    # 0.2 s / 1 ms = 200 items, capped at 20 items / (2 batches x 1 worker) = 10.
    assert f.evidence["suggested_batch"] == 10
    # The driver made one task per 20 ms: batching does not make that faster, so it is a note by its cost.
    assert f.severity == "note"
    assert "batch=10" in f.advice


def test_tasks_not_too_small_when_body_dominates():
    assert "tasks-too-small" not in codes(small_tasks_trace(0.01))


# -- I/O-bound / Compute-bound ---------------------------------------------------------------------
def test_io_and_compute_bound_per_function_and_phase():
    b = TraceBuilder(workers=2, cores=2)
    b.task("fetch", worker=0, start=0, end=1, cpu=0.1)
    row = b.task("crunch", worker=1, start=0, end=1, cpu=0.95)
    b.task("tiny", worker=1, start=1, end=1.05, cpu=0.0)  # 2.5% of serial time: no verdict
    b.phase(row, "read", 0.0, 0.5, 0.02)
    b.phase(row, "compute", 0.5, 1.0, 0.5)
    r = analyze(b.build())
    io = [f for f in r.findings if f.code == "io-bound"]
    cb = [f for f in r.findings if f.code == "compute-bound"]
    assert [f.evidence["function"] for f in io] == ["fetch()"]
    assert io[0].term == "I/O-bound" and io[0].evidence["cpu_ratio"] == approx(0.1)
    assert "hpc.init(workers=4)" in io[0].advice
    assert [f.evidence["function"] for f in cb] == ["crunch()"]
    assert cb[0].term == "Compute-bound" and cb[0].evidence["cpu_ratio"] == approx(0.95)
    assert r.finding("io-bound-phase").evidence["phase"] == "phase 'read'"
    assert r.finding("compute-bound-phase").evidence["phase"] == "phase 'compute'"
    assert not any("tiny" in str(f.evidence.get("function")) for f in r.findings)


def test_compute_bound_advice_rests_on_where_the_time_was_not_on_the_code():
    """Vectorizing is advised only where the automatic JIT sampled the function's time in Python bytecode; a
    task that is one NumPy call (its time in C code) is told so; unmeasured, the profile is named to find out."""
    def advice(verdict: str | None) -> str:
        b = TraceBuilder(workers=1, cores=1)
        row = b.task("crunch", start=0, end=1, cpu=0.95)
        b.task("crunch", start=1, end=2, cpu=0.95)
        if verdict is not None:  # said in the task where the JIT judged the function
            b.phase(row, verdict, 0.5, 0.5, 0.0)
        return analyze(b.build()).finding("compute-bound").advice

    in_c = advice("jit: not tried: in-c: 4% of its sampled time in Python bytecode, the rest in C code or waiting "
                  "[trial plain=0.5]")
    assert "vectorize" not in in_c.lower() and "96% of its sampled time was in C code" in in_c
    loop = advice("jit: not tried: compiling: 91% of its sampled time in Python bytecode [trial plain=0.5]")
    assert "91% of its sampled time was Python bytecode (vectorize with NumPy)" in loop
    unknown = advice(None)
    assert "%%eugo --profile" in unknown and "(vectorize with NumPy)" not in unknown


def test_mixed_ratio_is_neither():
    b = TraceBuilder(workers=1)
    b.task("mixed", start=0, end=1, cpu=0.65)
    assert not {"io-bound", "compute-bound"} & set(codes(b.build()))


# -- Serialization ---------------------------------------------------------------------------------
def test_serialization_time_dominates():
    b = TraceBuilder(workers=1)
    b.task("big", start=0.2, end=0.5, deser=0.2, ser=0.1, bytes_in=300_000_000, bytes_out=1000)
    f = analyze(b.build()).finding("serialization")
    assert f.term == "Serialization"
    assert f.evidence["serialization"] == approx(0.3)
    assert f.evidence["share"] == approx(0.5)
    assert f.evidence["function"] == "big"


def test_no_send_less_advice_when_the_pickling_is_the_tasks_framing_not_their_bytes():
    """2,000 tasks of an int each: 20 ms of (un)pickling, 90% of the workers' busy time, but 40 bytes a task.
    Sending less cannot remove a task's own framing: no Serialization finding (the tasks are too small).
    The same time spent on a different 2 MB array a task is the data's, and is advised on."""
    def trace(nbytes: int, step: int = 0):
        b = TraceBuilder(workers=1)
        t = 0.0
        for k in range(2000):  # back to back on the worker: its (un)pickling is the run's time
            deser = 6e-6 + 1e-6 * (k % 7)  # the machine's jitter, the same for both sizes
            b.task("inc", ready=0.0, start=t + deser, end=t + deser + 1e-6, deser=deser, ser=4e-6,
                   bytes_in=nbytes + step * k, bytes_out=20)
            t += deser + 1e-6 + 4e-6
        return b.build()

    assert "serialization" not in codes(trace(40))
    f = analyze(trace(2_000_000, step=1)).finding("serialization")  # a different array each
    assert f is not None and "hpc.put" in f.advice


def test_serialization_counts_bytes_shipped_inside_the_function_too():
    # A partial's bound array (or a captured global) goes with the function's pickle: "in" must show it.
    from eugo_lab.tracing.provenance import FunctionShipped

    b = TraceBuilder(workers=1)
    b.task("partial", start=0.2, end=0.5, deser=0.2, ser=0.1, bytes_in=3_000, bytes_out=1000)
    b.shipped.append(FunctionShipped("partial", 32_000_000, 32_000_000, (("bound argument 'a'", 32_000_000),), 2))
    f = analyze(b.build()).finding("serialization")
    assert f.evidence["bytes_in"] == 64_003_000 and "64 MB in" in f.verdict


def test_repeated_large_argument_suggests_put():
    b = TraceBuilder(workers=2)
    for k in range(4):
        b.task("model", worker=k % 2, ready=0.0, start=1.0 * (k // 2), end=1.0 * (k // 2) + 1, bytes_in=5_000_000)
    f = analyze(b.build()).finding("repeated-argument")
    assert f.term == "Serialization"
    assert f.evidence == {"function": "model", "bytes": 5_000_000, "count": 4, "total_bytes": 20_000_000}
    assert "hpc.put" in f.advice
    assert "serialization" not in codes(b.build())  # no (un)pickling time recorded


def test_the_put_what_if_keeps_the_one_copy_the_put_makes():
    """A Dask cell: 12 submits of the same 8 MB array, 40 ms of the driver's time each, unpickling not timed
    (0 s). Scattering it once still costs one such copy before the loop: the fixed run is not priced as if
    the array were free (it was, and the saving read 3-9x what scattering achieved)."""
    b = TraceBuilder(workers=2, backend="dask")
    b.meta.update(api="dask")
    for k in range(12):
        r = 0.04 * (k + 1)
        b.task("total", worker=k % 2, ready=r, start=r + 0.001, end=r + 0.0011, received=r + 0.002,
               bytes_in=8_000_000)
        b.arg(int(b.tasks["task_id"][-1]), 5)
    f = analyze(b.build(end=0.5)).finding("repeated-argument")
    assert f is not None and "client.scatter" in f.advice
    assert f.wall_after >= 0.035, f.wall_after  # one copy's ~40 ms stays in the fixed run


def _percentiles(keys: list[int] | None) -> object:
    """8 tasks sent one 8 MB array beside a percentile level; the level 99.9 pickles 7 bytes larger than 99."""
    b = TraceBuilder(workers=2)
    for k in range(8):
        s = 0.2 * (k // 2) + 0.05
        row = b.task("pct", worker=k % 2, ready=0.01 * k, start=s, end=s + 0.1, deser=0.05,
                     bytes_in=8_000_190 + (7 if k == 4 else 0))
        if keys is not None:
            b.arg(int(b.tasks["task_id"][row]), keys[k])
    return b.build()


def test_repeats_are_counted_by_the_argument_not_the_exact_pickle_size():
    f = analyze(_percentiles([77] * 8)).finding("repeated-argument")
    assert f.evidence["count"] == 8 and "argument 8 times" in f.verdict
    assert f.evidence["total_bytes"] == 8 * 8_000_190 + 7
    assert f.fix == "send pct()'s 8 MB argument once with hpc.put" and f.saves > 0
    # Without the driver's record (an older trace), the exact size is all there is.
    assert analyze(_percentiles(None)).finding("repeated-argument").evidence["count"] == 7


def test_equal_sized_different_arguments_are_not_repeats():
    assert analyze(_percentiles(list(range(1, 9)))).finding("repeated-argument") is None


def test_no_serialization_findings_for_small_or_distinct_arguments():
    b = TraceBuilder(workers=1)
    for k in range(4):
        b.task("f", start=k, end=k + 1, bytes_in=900_000)  # under 1 MB
    for k in range(4):
        b.task("g", start=4 + k, end=5 + k, bytes_in=2_000_000 + k)  # different sizes
    assert not {"serialization", "repeated-argument"} & set(codes(b.build()))


# -- Critical path: Fan-out / Partition ------------------------------------------------------------
def test_fan_out_for_a_chain_of_steps():
    b = TraceBuilder(workers=4)
    for k in range(4):
        b.task("step", worker=0, ready=float(k), start=float(k), end=k + 1.0)
    f = analyze(b.build()).finding("critical-path")
    assert f.term == "Fan-out"
    assert f.evidence["tasks"] == [1, 2, 3, 4]
    assert f.evidence["length"] == approx(4.0) and f.evidence["fraction"] == approx(1.0)
    assert f.evidence["idle_share"] == approx(0.75)


def test_a_chain_of_passed_futures_is_told_to_keep_its_order():
    # step.remote(fut) in a loop: the learner already passes futures; "pass futures instead of get()"
    # and "submit independent steps together" would be advice they cannot follow.
    b = TraceBuilder(workers=4)
    for k in range(4):
        b.task("step", worker=0, ready=float(k), start=float(k), end=k + 1.0, submit=0.0)
        if k:
            b.dep(k + 1, k)
    f = analyze(b.build()).finding("critical-path")
    assert f.evidence["passed_futures"] == 3
    assert "Keep the steps in order" in f.advice and "pass futures instead" not in f.advice


def test_partition_for_one_dominant_task():
    b = TraceBuilder(workers=4)
    b.task("big", worker=0, ready=0.0, start=0.0, end=3.0)
    for w in (1, 2, 3):
        b.task("small", worker=w, ready=0.0, start=0.0, end=0.1)
    f = analyze(b.build()).finding("critical-path")
    assert f.term == "Partition"
    assert f.evidence["tasks"] == [1]
    assert "big()" in f.advice


def test_no_critical_path_finding_when_workers_are_busy():
    # 4 equal tasks on 4 workers: the path is the whole run but nobody was idle.
    assert "critical-path" not in codes(even_trace(workers=4, per_worker=1))


# -- Idle cluster ----------------------------------------------------------------------------------
def test_idle_cluster_cost():
    t = even_trace(workers=2, per_worker=2)  # 2 workers x 2 s
    c = cost(t, price_per_worker_hour=3600.0, idle=10.0)  # 1 per worker-second
    assert c.run_cost == approx(4.0)
    assert c.idle_cost == approx(20.0)
    assert c.total == approx(24.0)
    assert c.wasted_in_run == approx(0.0)
    (f,) = c.findings
    assert f.term == "Idle cluster" and f.code == "idle-cluster"
    assert f.evidence["share"] == approx(20 / 24)


def test_no_idle_cluster_when_idle_is_short():
    import datetime

    c = cost(even_trace(workers=2, per_worker=2), price_per_worker_hour=3600.0, idle=datetime.timedelta(seconds=0.1))
    assert c.idle_cost == approx(0.2)
    assert c.findings == ()


def _jit_cell(marked: bool):
    """The JIT lesson's cell: one trial per worker side by side (plain run, compile, compiled run), then
    six compiled calls one after another. ``marked``: the trials carry the trial's phases, as they do."""
    b = TraceBuilder(workers=2)
    for w in (0, 1):
        row = b.task("smooth", worker=w, start=0.0, end=0.9)
        if marked:
            b.phase(row, "jit: plain run", 0.0, 0.05, 0.05)
            b.phase(row, "jit: compile", 0.05, 0.85, 0.8)
            b.phase(row, "jit: compiled run", 0.85, 0.9, 0.05)
    for k in range(6):
        b.task("smooth", worker=k % 2, start=1.0 + 0.01 * k, end=1.0 + 0.01 * k + 0.001)
    return b.build()


def test_jit_trials_are_no_stragglers_and_no_contention_beside_the_compiled_calls():
    plain = analyze(_jit_cell(marked=False))  # the same durations without the phases: both findings fire
    assert plain.finding("straggler") is not None and plain.finding("contention") is not None
    r = analyze(_jit_cell(marked=True))
    assert r.finding("straggler") is None and r.finding("contention") is None, [f.code for f in r.findings]


def test_a_cell_whose_every_task_was_cancelled_is_analysed():
    # An Interrupt stopped the cell before any task finished: rows, but no unit of work to read a warm-up from.
    from eugo_lab.contract.row import CANCELLED

    b = TraceBuilder(workers=2)
    for k in range(4):
        b.task(worker=k % 2, ready=0.0, start=math.nan, end=math.nan, status=CANCELLED)
    report = analyze(b.build(end=1.0))
    assert "warm-up" not in report.codes() and "straggler" not in report.codes()


# -- the engine's own tasks -------------------------------------------------------------------------
def test_no_finding_aims_at_the_engines_own_tasks():
    """Dask's finalize- tasks (its gathering of a collection's result), marked by the recording as the engine's
    own, are never a finding's subject: the same tiny tasks of a user's function are."""
    def trace(own: list[str]):
        b = TraceBuilder(workers=1, backend="dask")
        b.meta.update(api="dask", engine_functions=own)
        for k in range(20):
            r = 0.02 * k
            b.task("finalize-hlgfinalizecompute", ready=r, start=r + 0.002, end=r + 0.003, received=r + 0.005)
        return b.build()

    assert "tasks-too-small" in codes(trace([]))
    found = analyze(trace(["finalize-hlgfinalizecompute"])).findings
    assert not [f for f in found if "finalize" in f.to_text()], [f.to_text() for f in found]
