"""Diagnoses that know the runtime's own work: the JIT's compiles and a worker's warm-up are not the tasks' code."""

from __future__ import annotations

from trace_builder import TraceBuilder

from eugo_lab.analysis import analyze


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
