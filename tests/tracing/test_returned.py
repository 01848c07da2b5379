"""The record of the objects get()/result() handed the driver (``tracing.returned.Handed``), for graders."""

from __future__ import annotations

import gc

import numpy as np

from eugo_lab import hpc
from eugo_lab.tracing import returned
from eugo_lab.tracing.returned import Handed, identifiable


class Box:
    """A result that can be referenced weakly (as arrays and most objects of a class can)."""


@hpc.remote
def scaled(x):
    return x * 1.5  # a float: never a CPython-shared object


@hpc.remote
def batch(xs):
    return [x * 1000 for x in xs]  # ints outside -5..256


def test_identity_not_equality():
    h = Handed()
    a, b = float("3.75"), float("3.75")  # two objects (a constant expression would be folded into one)
    h.note([a], [7])
    assert h.task_of(a) == 7
    assert a == b and h.task_of(b) is None  # an equal value made again is another object


def test_futures_stand_for_their_task_ids_and_ranges_too():
    class Fut:
        def __init__(self, task_id: int) -> None:
            self.task_id = task_id

    h = Handed()
    xs = [float(i) + 0.5 for i in range(5)]
    h.note(xs, [Fut(10 + i) for i in range(5)])
    ys = [float(i) + 0.25 for i in range(3)]
    h.note(ys, range(40, 43))
    assert [h.task_of(x) for x in xs] == [10, 11, 12, 13, 14]
    assert [h.task_of(y) for y in ys] == [40, 41, 42]
    assert len(h) == 8


def test_shared_constants_are_never_matched():
    h = Handed()
    vals = [None, True, 5, "a", ()]
    h.note(vals, range(len(vals)))
    assert all(h.task_of(v) is None for v in vals)
    assert not identifiable(5) and not identifiable(None) and identifiable(1000 + len(vals)) and identifiable(0.5)


def test_a_batch_s_items_count_as_its_task_s_results():
    h = Handed()
    out = [1000 + i for i in range(4)]
    h.note([out], [3])
    assert h.task_of(out) == 3 and all(h.task_of(v) == 3 for v in out)
    d = {"a": 2.5, "b": 3.5}
    h.note([d], [4])
    assert h.task_of(d["b"]) == 4
    long = [0.5 + i for i in range(returned.MAX_ELEMENTS + 500)]  # a big batch: every item, not the first ones only
    h.note([long], [5])
    assert h.task_of(long[-1]) == 5


def test_weakly_referenced_results_are_not_kept_alive():
    h = Handed()
    box = Box()
    h.note([box, 2.5], [1, 2])
    assert h.task_of(box) == 1
    del box
    gc.collect()
    assert h.task_of(Box()) is None  # its id may be reused: the record knows its object is gone


def test_the_bytes_kept_alive_are_bounded_oldest_get_dropped_first(monkeypatch):
    monkeypatch.setattr(returned, "MAX_HANDED_BYTES", 10 * returned._NUMBER_BYTES)
    h = Handed()
    first = [0.5 + i for i in range(6)]
    second = [100.5 + i for i in range(6)]
    h.note(first, range(6))
    h.note(second, range(6, 12))
    assert h.dropped == 6 and h.task_of(first[0]) is None and h.task_of(second[0]) == 6
    held = (np.zeros(1000), "meta")  # a tuple cannot be referenced weakly: held, its array counted
    h.note([held], [20])
    assert h.task_of(held) is None and h.dropped == 13  # alone over the cap: nothing is kept
    box = Box()
    h.note([box], [21])  # a weak reference keeps nothing alive
    assert h.task_of(box) == 21 and h.dropped == 13


def test_the_runtime_notes_every_get_and_result_of_a_region(local2):
    with hpc.trace(settle=0) as t:
        futs = [scaled.remote(i) for i in range(returned.MAX_FUTURES_NOTED + 36)]  # over the chain's table's cap
        got = hpc.get(futs)
        one = scaled.remote(1001).result()
        mapped = hpc.get(hpc.map(scaled, range(300, 310)))
        by_key = hpc.get({"x": scaled.remote(7), "y": scaled.remote(8)})
        batches = hpc.get([batch.remote([1, 2]), batch.remote([3])])
        flat = [s for b in batches for s in b]
    h = t.trace.handed
    assert [h.task_of(v) for v in got] == [f.task_id for f in futs]
    assert h.task_of(one) is not None and h.task_of(by_key["y"]) is not None
    ids = {r.task_id for r in t.trace.results("scaled")}
    assert all(h.task_of(v) in ids for v in mapped)  # each item of the map is its own item's task
    batch_ids = {r.task_id for r in t.trace.results("batch")}
    assert all(h.task_of(s) in batch_ids for s in flat)
    assert h.task_of(got[0] * 1.0 + 0.0) is None and h.task_of(np.float64(got[1])) is None
    assert h.dropped == 0


def test_each_region_has_its_own_record(local2):
    with hpc.trace(settle=0) as first:
        before = hpc.get(scaled.remote(3))
    with hpc.trace(settle=0) as second:
        after = hpc.get(scaled.remote(4))
    assert first.trace.handed.task_of(before) is not None and first.trace.handed.task_of(after) is None
    assert second.trace.handed.task_of(before) is None and second.trace.handed.task_of(after) is not None
