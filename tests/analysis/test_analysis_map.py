"""Analyses of a real hpc.map run: batching is the runtime's, so the findings must say what is left."""

from __future__ import annotations

from eugo_lab import analysis, hpc


def noop(x):
    return x


def test_map_of_tiny_items_gets_the_right_advice(local2):
    with hpc.trace() as t:
        hpc.get(hpc.map(noop, range(20_000)))
    report = analysis.analyze(t.trace)
    codes = report.codes()
    assert "critical-path" not in codes, report.finding("critical-path")  # batches pace each other: no chain
    assert "io-bound" not in codes and "compute-bound" not in codes  # microsecond bodies: no verdict
    small = report.finding("tasks-too-small")
    assert small is not None and "already sends noop() items in batches" in small.verdict
    assert "vectorize" in small.advice
    cp = analysis.critical_path(t.trace)
    assert len(cp) == 1


def test_map_with_one_item_per_task_is_priced_as_single_tasks(local2):
    # batch=1: every hpc.map task holds one item, so the fix is batching them, priced like plain calls.
    with hpc.trace() as t:
        hpc.get(hpc.map(noop, range(2_000), batch=1))
    small = analysis.analyze(t.trace).finding("tasks-too-small")
    assert small is not None and "batch=" in small.advice
    assert small.saves is not None and 0 < small.saves < t.trace.wall_time
