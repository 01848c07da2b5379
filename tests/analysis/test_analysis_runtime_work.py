"""Diagnoses that know the runtime's own work: the JIT's compiles and a worker's warm-up are not the tasks' code."""

from __future__ import annotations

import pytest
from trace_builder import TraceBuilder

from eugo_lab.analysis import analyze
from eugo_lab.units import fmt_seconds as fmt_s


def _compiled_cell(marked: bool = True):
    """Two trials (a 4 s compile at full CPU inside each), then eight calls that compute 70% of their time."""
    b = TraceBuilder(workers=2)
    for w in (0, 1):
        row = b.task("smooth", worker=w, start=0.0, end=4.2, cpu=4.1)
        if marked:
            b.phase(row, "jit: plain run", 0.0, 0.1, 0.05)
            b.phase(row, "jit: compile", 0.1, 4.1, 4.0)
            b.phase(row, "jit: compiled run", 4.1, 4.2, 0.05)
    for k in range(8):
        b.task("smooth", worker=k % 2, start=4.2 + (k // 2), end=5.2 + (k // 2), cpu=0.7)
    return b.build()


def test_a_jit_compile_inside_a_task_is_no_evidence_that_the_function_is_compute_bound():
    plain = analyze(_compiled_cell(marked=False))  # the same times without the trial's phases
    assert plain.finding("compute-bound") is not None
    r = analyze(_compiled_cell())
    assert r.finding("compute-bound") is None and r.finding("compute-bound-phase") is None, r.codes()


# -- overhead figures that add up ------------------------------------------------------------------
def _pipelined(body: float, gap: float = 0.0):
    """20 tasks on 2 workers, all submitted at 0, each result back 0.6 ms after its body; ``gap`` between bodies."""
    b = TraceBuilder(workers=2)
    for k in range(20):
        s = (k // 2) * (body + gap)
        b.task("tiny", worker=k % 2, ready=0.0, start=s, end=s + body, received=s + body + 0.0006)
    return b.build()


def test_per_task_overhead_is_bounded_by_the_workers_time_outside_bodies():
    # Each round trip is 600 us beyond a 100 us body, but the workers computed back to back: 2 workers x 1.6 ms
    # of wall time - 2 ms of bodies leaves 60 us a task, less than a body: no scheduling overhead to batch away.
    r = analyze(_pipelined(0.0001))
    assert r.finding("tasks-too-small") is None, r.codes()
    # With 1 ms between bodies the workers did wait: the figure quoted is the time they had, not the round trip.
    f = analyze(_pipelined(0.0001, gap=0.001)).finding("tasks-too-small")
    assert f is not None
    assert f.evidence["median_overhead"] == pytest.approx((2 * (9 * 0.0011 + 0.0007) - 20 * 0.0001) / 20)
    assert f"cost {fmt_s(f.evidence['median_overhead'])} of overhead each" in f.verdict


# -- the runtime's own work is not "other programs" ---------------------------------------------------
def _waited_for_cores(compiled: bool):
    """Six 0.5 s tasks on 2 workers that waited for a core 40% of the time; ``compiled``: the automatic JIT
    qualified count() in the first task on worker 0 and compiled it for 1.5 s in the background."""
    b = TraceBuilder(workers=2, cores=2)
    rows = [b.task("count", worker=k % 2, start=0.5 * (k // 2), end=0.5 * (k // 2) + 0.5, cpu=0.3, runq=0.2)
            for k in range(6)]
    if compiled:
        b.phase(rows[0], "jit: not tried: compiling: 97% of its sampled time in Python bytecode [trial plain=0.3]",
                0.1, 0.1, 0.0)
        b.phase(rows[4], "jit: compiled [trial plain=0.3 compile=1.5 compiled=0.01]", 1.2, 1.2, 0.0)
    return b.build()


def test_a_background_jit_compile_is_named_as_the_runtime_s_work_not_other_programs():
    other = analyze(_waited_for_cores(compiled=False)).finding("contention")
    assert "other programs kept this machine's cores busy" in other.advice
    f = analyze(_waited_for_cores(compiled=True)).finding("contention")
    assert "other programs" not in f.advice
    # 0.1-1.6 s of the workers' 0-1.5 s: 1.4 s of each worker's 1.5 s of bodies.
    assert ("the runtime's own work: the automatic JIT compiled count() with Numba in a background thread of the "
            "worker during 93% of these tasks' time") in f.advice
    assert "%%eugo --no-optimize" in f.advice


# -- large results, and one cause with one piece of advice --------------------------------------------
def _large_results(ser: float = 0.02, back: float = 0.03):
    """12 tile() tasks of 2 ms on 2 workers, each sending back 32 MB (``ser`` to pickle, ``back`` to arrive)."""
    b = TraceBuilder(workers=2)
    for k in range(12):
        s = (k // 2) * (0.002 + ser + back) + 0.001
        b.task("tile", worker=k % 2, ready=0.001 * k, start=s, end=s + 0.002, ser=ser,
               received=s + 0.002 + ser + back, bytes_out=32_000_000)
    return b.build()


def test_large_results_get_their_own_priced_finding_and_never_batching():
    r = analyze(_large_results())
    f = r.finding("large-results")
    assert f.verdict == ("12 tile() tasks sent back results of 32 MB each (384 MB in all): pickling them took the "
                         "workers 240 ms, and moving them to the notebook about 360 ms. The same cause explains the "
                         "workers' time pickling: not listed as separate fixes.")
    assert f.saves > 0 and "Do not batch these tasks" in f.advice
    assert f.evidence["total_bytes"] == 384_000_000 and f.evidence["explains"] == ["serialization"]
    assert r.finding("tasks-too-small") is None and r.finding("serialization") is None, r.codes()
    # Results too cheap to move for a finding of their own still get no batching advice.
    small = analyze(_large_results(ser=0.0002, back=0.0003))
    assert small.finding("large-results") is None and small.finding("tasks-too-small") is None, small.codes()


def _large_argument():
    """12 tasks of 28 us, each sent the same 64 MB array by value: the driver pickles a copy per .remote()."""
    b = TraceBuilder(workers=2)
    for k in range(12):
        r = 0.03 * k
        s = r + 0.024
        row = b.task("score", worker=k % 2, ready=r, start=s, end=s + 28e-6, deser=0.02, received=s + 0.004,
                     bytes_in=64_000_000)
        b.arg(row + 1, 7)
    return b.build()


def test_a_large_argument_by_value_is_one_finding_not_four():
    r = analyze(_large_argument())
    f = r.finding("repeated-argument")
    assert f.evidence["explains"] == ["slow-submission", "critical-path", "tasks-too-small", "serialization"]
    assert f.verdict.endswith("The same cause explains the slow submission loop, the chain of tasks the run seemed "
                              "to wait on, their scheduling overhead and the workers' time pickling: not listed as "
                              "separate fixes.")
    assert r.codes() == ["repeated-argument"], r.codes()


def test_a_long_tail_of_28_us_tasks_is_the_argument_s_not_a_reason_to_split_them():
    # Nine tasks sent the same 64 MB array; the last one's copy took 100 ms to unpickle, alone at the end.
    b = TraceBuilder(workers=2)
    for k in range(9):
        d = 0.1 if k == 8 else 0.02
        s = (k // 2) * 0.021 + d
        row = b.task("score", worker=k % 2, ready=0.0, start=s, end=s + 28e-6, deser=d, received=s + 0.001,
                     bytes_in=64_000_000)
        b.arg(row + 1, 7)
    r = analyze(b.build())
    assert "long-tail" in r.finding("repeated-argument").evidence["explains"]
    assert r.finding("long-tail") is None and r.finding("tasks-too-small") is None, r.codes()


# -- a worker's warm-up is not skew and not serialization -----------------------------------------------
def _warm_up(recorded: bool = True, import_s: float = 0.6, modules: int = 300, first: float = 0.7):
    """Eight identical load() tasks on 2 workers: each worker's first took ``first`` s (the others 0.1 s), of which
    its code spent ``import_s`` importing ``modules`` modules (pandas: 300 modules, 0.6 s)."""
    b = TraceBuilder(workers=2)
    for w in (0, 1):
        t = 0.0
        for k in range(4):
            body = first if k == 0 else 0.1
            row = b.task("load", worker=w, start=t, end=t + body)
            if recorded:
                b.imports(row, modules if k == 0 else 0, import_s if k == 0 else 0.0)
            t += body
    return b.build()


def test_a_worker_s_first_task_importing_its_libraries_is_warm_up_not_a_straggler():
    assert analyze(_warm_up(recorded=False)).finding("straggler") is not None  # no imports recorded: stragglers
    r = analyze(_warm_up())
    assert r.finding("straggler") is None, r.codes()
    f = r.finding("warm-up")
    assert f.verdict == ("2 load() tasks (task 1, 5) took 1.2 s more than the function's other tasks, and their code "
                         "spent 1.2 s importing 600 modules on 2 workers (measured on the worker): that is a worker's "
                         "warm-up (loading the libraries the task uses), not a bigger input or more data to send.")
    assert "paid once per worker process" in f.advice and f.saves > 0
    assert f.evidence["extra"] == pytest.approx(1.2) and f.evidence["modules"] == 600
    assert f.evidence["import_s"] == pytest.approx(1.2)


def test_a_slow_task_whose_imports_took_no_time_is_no_warm_up():
    # A sleeping task on a warm worker: 29 modules appeared while it ran (the runtime's own lazy imports, or
    # another function's), but the import time measured for its code is 1 ms: its 0.6 s extra is its own.
    r = analyze(_warm_up(import_s=0.001, modules=29))
    assert r.finding("warm-up") is None, r.codes()
    assert r.finding("straggler") is not None, r.codes()


def test_only_the_part_of_a_slow_task_that_its_imports_explain_is_warm_up():
    # Each worker's first task took 1.0 s more than the others; its imports took 0.1 s of that: 0.1 s is
    # warm-up, the remaining 0.9 s still makes it a straggler.
    r = analyze(_warm_up(import_s=0.1, modules=40, first=1.1))
    warm = r.finding("warm-up")
    assert warm is not None and warm.evidence["extra"] == pytest.approx(0.2), r.codes()
    assert "spent 200 ms importing 80 modules" in warm.verdict
    slow = r.finding("straggler")
    assert slow is not None and slow.evidence["tasks"][0]["duration"] == pytest.approx(1.0), r.codes()


def test_a_trace_without_measured_import_time_calls_nothing_warm_up():
    # Saved before the worker timed imports: a module count alone proves nothing about time.
    r = analyze(_warm_up(import_s=-1.0))
    assert r.finding("warm-up") is None and r.finding("straggler") is not None, r.codes()


def test_imports_while_unpickling_on_a_new_worker_are_not_called_serialization():
    # numpy imported while unpickling each worker's first arguments: 90 ms measured of the 94.5 ms spent unpickling.
    b = TraceBuilder(workers=2)
    for w in (0, 1):
        t = 0.0
        for k in range(4):
            deser = 0.0945 if k == 0 else 0.001
            row = b.task("stats", worker=w, start=t + deser, end=t + deser + 0.01, deser=deser, bytes_in=2000)
            b.imports(row, 40 if k == 0 else 0, 0.09 if k == 0 else 0.0)
            t += deser + 0.01
    r = analyze(b.build())
    assert r.finding("serialization") is None, r.codes()
    f = r.finding("warm-up")
    assert "180 ms of it while unpickling the arguments" in f.verdict


def test_arguments_pickled_at_every_remote_are_not_a_reason_to_batch():
    # Ten different 16 MB arrays, one per task: no argument repeats, but the driver pickled each at .remote().
    b = TraceBuilder(workers=2)
    for k in range(10):
        r = 0.05 * k
        s = r + 0.01
        row = b.task("score", worker=k % 2, ready=r, start=s, end=s + 13e-6, deser=0.005, received=s + 0.005,
                     bytes_in=16_000_000)
        b.submission(row + 1, r - 0.048, r - 0.001, r)
        b.arg(row + 1, k)  # a different array each time
    r = analyze(b.build(start=-0.05))
    slow = r.finding("slow-submission")
    assert slow.evidence["cause"] == "pickling" and slow.evidence["explains"] == ["tasks-too-small"], r.codes()
    assert r.finding("tasks-too-small") is None


def test_a_warm_up_waiting_for_cores_is_not_contention_nor_the_function_s_bound():
    # Both workers' first tasks imported pandas at once and waited for a core most of the time; the rest did not.
    b = TraceBuilder(workers=2, cores=2)
    for w in (0, 1):
        t = 0.0
        for k in range(4):
            body = 2.0 if k == 0 else 0.1
            row = b.task("load", worker=w, start=t, end=t + body, cpu=0.5 if k == 0 else 0.005,
                         runq=1.4 if k == 0 else 0.0)
            b.imports(row, 700 if k == 0 else 0, 1.8 if k == 0 else 0.0)
            t += body
    r = analyze(b.build())
    assert r.finding("warm-up") is not None
    assert r.finding("contention") is None and r.finding("compute-bound") is None, r.codes()


def test_tasks_beside_a_background_compile_are_not_warm_up():
    # The compile thread imports Numba in the worker while tasks run: their imports and their slowness are the
    # compile's (the Contention finding names it), not the tasks' warm-up.
    b = TraceBuilder(workers=2, cores=2)
    rows = []
    for w in (0, 1):
        t = 0.0
        for k in range(6):
            body = 0.3 if 1 <= k <= 3 else 0.1
            rows.append(b.task("count", worker=w, start=t, end=t + body))
            b.imports(rows[-1], 200 if 1 <= k <= 3 else 0, 0.2 if 1 <= k <= 3 else 0.0)
            t += body
    b.phase(rows[0], "jit: not tried: compiling: 97% of its sampled time in Python bytecode [trial plain=0.1]",
            0.1, 0.1, 0.0)
    b.phase(rows[4], "jit: compiled [trial plain=0.1 compile=0.9 compiled=0.01]", 1.1, 1.1, 0.0)
    r = analyze(b.build())
    assert r.finding("warm-up") is None, r.codes()


def test_a_task_slowed_by_a_background_compile_is_no_straggler():
    b = TraceBuilder(workers=2, cores=2)
    rows = []
    for w in (0, 1):
        t = 0.0
        for k in range(6):
            body = 0.4 if (w, k) == (0, 2) else 0.1  # ran while the compile held a core
            rows.append(b.task("count", worker=w, start=t, end=t + body))
            t += body
    assert analyze(b.build()).finding("straggler") is not None
    b.phase(rows[0], "jit: not tried: compiling: 97% of its sampled time in Python bytecode [trial plain=0.1]",
            0.05, 0.05, 0.0)
    b.phase(rows[4], "jit: compiled [trial plain=0.1 compile=0.3 compiled=0.01]", 0.7, 0.7, 0.0)
    r = analyze(b.build())
    assert r.finding("straggler") is None, r.codes()
