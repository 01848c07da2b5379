"""Derivation checks: a graded value is shown to come from the cell's task results, or the check says why not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from eugo_lab import hpc
from eugo_lab.exercises import derivation


@hpc.remote
def chunk_sum(i):
    return float(np.arange(i * 10, (i + 1) * 10).sum())


@hpc.remote
def square(x):
    return x * x


@hpc.remote
def rows(i):
    return pd.DataFrame({"i": [i, i], "v": [i * 1.5, i * 2.5]}, index=[2 * i, 2 * i + 1])


@pytest.fixture(scope="module", autouse=True)
def pool():
    hpc.init(workers=2)
    yield
    hpc.shutdown()


def traced(fn, n):
    with hpc.trace() as t:
        values = hpc.get([fn.remote(i) for i in range(n)])
    return t.trace, values


def test_a_total_summed_from_the_tasks_passes_and_a_driver_total_beside_decoys_does_not():
    trace, parts = traced(chunk_sum, 4)
    assert derivation.combined(sum(parts), trace, "chunk_sum", sum, name="total", how="summed")
    assert derivation.combined(sum(reversed(parts)), trace, "chunk_sum", sum, name="total")  # another order
    honest_total = float(np.arange(40).sum())
    with hpc.trace() as t:  # decoys: the tasks ran, but on other inputs
        hpc.get([chunk_sum.remote(0) for _ in range(4)])
    bad = derivation.combined(honest_total, t.trace, "chunk_sum", sum, name="total", how="summed")
    assert not bad
    assert bad.why.startswith("`total` was not computed from the tasks' results: the 4 chunk_sum tasks returned "
                              "values that summed give 180, but `total` is 780")


def test_no_task_of_the_function_says_so():
    trace, _ = traced(square, 2)
    d = derivation.combined(5, trace, "chunk_sum", sum, name="total")
    assert not d and "no chunk_sum task returned a value in this cell" in d.why


def test_a_list_of_results_in_order_any_order_and_a_recomputed_list():
    trace, values = traced(square, 6)
    assert derivation.listed(values, trace, "square", name="results")
    shuffled = values[::-1]
    assert not derivation.listed(shuffled, trace, "square", name="results")
    assert "another order" in derivation.listed(shuffled, trace, "square", name="results").why
    assert derivation.listed(shuffled, trace, "square", ordered=False)
    wrong = [v + 1 for v in values]
    d = derivation.listed(wrong, trace, "square", name="results")
    assert not d and "1 of its 6 values are among what the 6 square tasks returned" in d.why  # 0+1 == 1*1


def test_one_of_and_concatenated_frames():
    trace, frames = traced(rows, 3)
    assert derivation.one_of(frames[1], trace, "rows")
    assert not derivation.one_of(frames[1].assign(v=0.0), trace, "rows")
    joined = pd.concat(frames)
    assert derivation.concatenated(joined, trace, "rows", name="df")
    altered = joined.copy()
    altered.iloc[3, 1] = -1.0
    d = derivation.concatenated(altered, trace, "rows", name="df")
    assert not d and "rows 2-3 differ from what rows task 2 of 3 returned" in d.why
    d = derivation.concatenated(joined.iloc[:4], trace, "rows", name="df")
    assert not d and "has 4 rows; the 3 rows tasks returned 6 in all" in d.why


def test_mapped_values_follow_the_tasks_results_and_a_driver_list_beside_decoys_does_not():
    trace, parts = traced(square, 5)
    assert derivation.mapped([p + 1 for p in reversed(parts)], trace, "square", lambda r: r + 1, name="handled")
    assert not derivation.mapped([p + 1 for p in reversed(parts)], trace, "square", lambda r: r + 1, ordered=True)
    with hpc.trace() as t:  # decoys: the tasks ran, on one input only
        hpc.get([square.remote(0) for _ in range(5)])
    bad = derivation.mapped([x * x + 1 for x in range(5)], t.trace, "square", lambda r: r + 1, name="handled",
                            how="handle()")
    assert not bad
    assert bad.why == ("`handled` was not computed from the tasks' results: 1 of its 5 values are handle() of one "
                       "of the 5 values the square tasks returned")


def test_scalar_values_of_one_result():
    from eugo_lab.exercises.derivation import scalar_values_of
    from eugo_lab.tracing.digest import digest
    from eugo_lab.tracing.provenance import Result

    assert scalar_values_of(Result(1, "f", digest(np.int64(3)))) == 3
    assert type(scalar_values_of(Result(1, "f", digest(np.int64(3))))) is int
    assert scalar_values_of(Result(1, "f", digest(np.zeros(3)))) is None
    assert scalar_values_of(Result(1, "f", digest([1, 2]), items=2)) is None


def test_code_references_reads_the_function_its_nested_code_and_its_helpers():
    from eugo_lab.exercises.measure import code_references

    def helper():
        return threadpool_limits(1)  # noqa: F821 - read, never called

    def direct():
        with threadpool_limits(2):  # noqa: F821
            return 1

    def through_helper():
        return helper()

    def clean():
        return 1

    names = {"threadpool_limits"}
    assert code_references(direct, names) == names
    assert code_references(through_helper, names) == set()
    assert code_references(through_helper, names, {"helper": helper}) == names
    assert code_references(clean, names, {"helper": helper}) == set()


@hpc.remote
def pairs(i):
    return [(i, "a"), (i, "b")]


def test_returned_by_names_the_function_and_tasks_beside_decoys():
    with hpc.trace() as t:
        hpc.get([chunk_sum.remote(i) for i in range(3)])  # decoys beside the tasks the value came from
        values = hpc.get([square.remote(i) for i in range(2, 6)])
    trace = t.trace
    src = derivation.returned_by(values[::-1], trace, name="results")  # any order: one task per item
    square_ids = [r.task_id for r in trace.results("square")]
    assert src and src.function == "square" and sorted(src.tasks) == sorted(square_ids)
    assert derivation.returned_by(values[:2], trace, "square") and \
        len(derivation.returned_by(values[:2], trace, "square").tasks) == 2
    twice = derivation.returned_by(values + values[:1], trace, "square", name="results")  # a task counts once
    assert not twice and "4 of its 5 values are among what the 4 square tasks of this cell returned" in twice.why
    driver = derivation.returned_by([i * i for i in range(6, 10)], trace, name="results")
    assert not driver and driver.why.startswith("`results` was not computed from the tasks' results: 0 of its 4")
    assert not derivation.returned_by([], trace, name="results")
    assert "no chunk_sum task" not in derivation.returned_by(values, trace, "rows").why
    assert "no rows task returned a value" in derivation.returned_by(values, trace, "rows").why


def test_returned_by_batches_joined_in_task_order():
    with hpc.trace() as t:
        batches = hpc.get([pairs.remote(i) for i in range(3)])
    joined = [p for b in batches for p in b]
    src = derivation.returned_by(joined, t.trace)
    assert src and src.function == "pairs" and len(src.tasks) == 3
    assert not derivation.returned_by(joined[::-1], t.trace)  # a batch's items are one digest: task order only
