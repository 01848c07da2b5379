"""A plain function mapped again and again keeps one record, and a worker keeps a bounded number of functions."""

from __future__ import annotations

from eugo_lab import hpc
from eugo_lab.backends import local
from eugo_lab.hpc import plain_records


def _loaded(_: int) -> int:
    from eugo_lab.backends import local_worker

    return local_worker.loaded_functions()


def _double(x: int) -> int:
    return 2 * x


def test_a_plain_function_mapped_many_times_keeps_one_record(local2):
    backend = hpc.session.current().backend
    for _ in range(60):
        assert hpc.get(hpc.map(_double, range(4)), timeout=60) == [0, 2, 4, 6]
    # one cost estimate for _double (not one per call); _loaded's own map adds the other
    assert len(backend._item_cost) == 1
    counts = hpc.get(hpc.map(_loaded, range(8), batch=1), timeout=60)
    assert max(counts) <= 2  # _double once, _loaded itself


def test_a_function_whose_globals_changed_gets_a_new_record():
    ns: dict = {"factor": 2}
    exec("def scaled(x):\n    return factor * x\n", ns)  # globals pickled by value, as in a notebook cell
    scaled = ns["scaled"]
    scaled.__module__ = "__main__"
    first = plain_records.record_for(scaled, "scaled")
    assert plain_records.record_for(scaled, "scaled") is first
    ns["factor"] = 3
    assert plain_records.record_for(scaled, "scaled") is not first


def test_workers_keep_a_bounded_number_of_functions(local2, monkeypatch):
    monkeypatch.setattr(local, "WORKER_FUNCTIONS", 5)
    backend = hpc.session.current().backend
    for k in range(40):  # a new function object each time: each is a new function to the workers
        fn = eval(f"lambda x: x + {k}")
        assert hpc.get(hpc.map(fn, range(3), batch=1), timeout=60) == [k, k + 1, k + 2]
    assert len(backend._item_cost) <= 5
    counts = hpc.get(hpc.map(_loaded, range(8), batch=1), timeout=60)
    assert 1 <= max(counts) <= 5
    # an evicted function is sent again when it is needed: it still runs
    assert hpc.get(hpc.map(_double, range(3), batch=1), timeout=60) == [0, 2, 4]
