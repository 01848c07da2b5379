"""Each diagnosis on a real run: a worker's warm-up, large results, a large argument by value, overhead figures.

Assertions hold on one busy core: they read what the trace records (imports, bytes), and findings
whose firing depends on timing are checked only for what they must never say.
"""

from __future__ import annotations

import numpy as np

from eugo_lab import hpc
from eugo_lab.analysis import analyze
from eugo_lab.analysis.timeline import units


def load_table(i):
    import time

    import pandas  # the first task on each new worker imports it: 0.6 s here

    time.sleep(0.02)
    return len(pandas.DataFrame({"a": [i]}))


def test_a_new_worker_importing_pandas_is_warm_up_not_a_straggler(local2):
    task = hpc.remote(load_table, optimize=False)
    with hpc.trace() as t:
        assert sum(hpc.get([task.remote(i) for i in range(8)])) == 8
    facts = t.trace.facts
    assert int(facts["imports"].max()) > 100  # pandas and what it loads, on each worker's first task
    assert float(facts["import_s"].max()) > 0.02  # measured on the worker (pandas: 0.6 s here; slower when busy)
    r = analyze(t.trace)
    assert r.finding("straggler") is None, [f.to_text() for f in r.findings]
    warm = r.finding("warm-up")
    assert warm is not None, [f.to_text() for f in r.findings]
    assert "worker's warm-up" in warm.verdict and warm.evidence["modules"] > 100


def block(i):
    return np.full(1_000_000, float(i))  # 8 MB back per task


def test_large_results_are_their_own_finding_and_never_batching_advice(local2):
    task = hpc.remote(block, optimize=False)
    with hpc.trace() as t:
        hpc.get([task.remote(i) for i in range(12)])
    assert int(units(t.trace).bytes_out.min()) >= 8_000_000
    r = analyze(t.trace)
    assert r.finding("tasks-too-small") is None, [f.to_text() for f in r.findings]
    # (the Large results finding names batch=2 only to say why not)
    assert not any("batch=" in f.advice for f in r.findings if f.code != "large-results"), \
        [f.to_text() for f in r.findings]
    f = r.finding("large-results")
    if f is not None:  # priced: reported when returning a summary would save 5% of this run
        assert "Do not batch these tasks" in f.advice and f.evidence["tasks"] == 12


def score(data, k):
    return float(data[k])


def test_a_large_argument_by_value_gets_one_piece_of_advice(local2):
    data = np.random.default_rng(0).random(2_000_000)  # 16 MB sent with every task
    task = hpc.remote(score, optimize=False)
    with hpc.trace() as t:
        hpc.get([task.remote(data, k) for k in range(10)])
    r = analyze(t.trace)
    f = r.finding("repeated-argument")
    assert f is not None, [g.to_text() for g in r.findings]
    # What the argument explains is folded into its finding, never offered beside it.
    for code in f.evidence.get("explains", []):
        assert r.finding(code) is None
    assert r.finding("long-tail") is None and r.finding("tasks-too-small") is None, r.codes()


def tiny(x):
    return x + 1


def test_overhead_per_task_never_exceeds_what_the_wall_clock_allows(local2):
    task = hpc.remote(tiny, optimize=False)
    with hpc.trace() as t:
        hpc.get([task.remote(i) for i in range(300)])
    r = analyze(t.trace)
    u = units(t.trace)
    room = max(r.workers * r.wall_time - float(u.body.sum()), 0.0) / len(u)
    f = r.finding("tasks-too-small")
    if f is not None:
        assert f.evidence["median_overhead"] <= room + 1e-12


def py_loop(n):
    s = 0
    for i in range(n):
        s += i % 7
    return s


def test_on_threads_pickling_counts_only_its_measured_cpu_as_serialization():
    # Pure Python on 2 threads: every (un)pickling step of a few bytes waits for the lock while the other
    # task runs. The worker records the steps' CPU; only that is serialization, whatever the waits were.
    hpc.init(backend="threads", workers=2)
    try:
        task = hpc.remote(py_loop, optimize=False)
        with hpc.trace() as t:
            hpc.get([task.remote(200_000) for _ in range(6)])
    finally:
        hpc.shutdown()
    facts = t.trace.facts
    assert len(facts["pickling_cpu"]) == 6 and float(facts["pickling_cpu"].min()) >= 0.0
    r = analyze(t.trace)
    assert r.breakdown.serialization <= float(facts["pickling_cpu"].sum()) + 1e-9
    assert "GIL wait" in r.breakdown.worker_categories()
    assert not any("largest loss is serialization" in f.advice for f in r.findings), [f.to_text() for f in r.findings]


def plus_one(x):
    return x + 1


def test_tiny_arguments_never_get_send_less_advice(local2):
    """2,000 tasks of an int: their (un)pickling is most of the workers' time, but it is each task's framing,
    not its 40 bytes; sending less data cannot shorten it (the Serialization finding advised it)."""
    task = hpc.remote(plus_one, optimize=False)
    with hpc.trace() as t:
        hpc.get([task.remote(i) for i in range(2000)])
    u = units(t.trace)
    assert int((u.bytes_in + u.bytes_out).max()) < 1_000
    r = analyze(t.trace)
    assert r.finding("serialization") is None, [f.to_text() for f in r.findings]
    assert not any("Send less" in f.advice for f in r.findings), [f.to_text() for f in r.findings]


def matmul(n):
    a = np.full((n, n), 0.5)
    return float((a @ a).sum())


def test_a_task_that_is_one_numpy_call_is_never_told_to_vectorize(local2):
    """Its time is in C code (BLAS), as the automatic JIT samples it: the compute-bound advice said "vectorize
    with NumPy" from the verdict alone."""
    task = hpc.remote(matmul)  # the automatic JIT watches it and says where its time was
    with hpc.trace() as t:
        hpc.get([task.remote(1100) for _ in range(12)])
    r = analyze(t.trace)
    assert not any("(vectorize with NumPy)" in f.advice for f in r.findings), [f.to_text() for f in r.findings]
