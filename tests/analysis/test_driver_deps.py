"""Dependencies through the driver: a task passed a value that a get()/result() of the region returned."""

from __future__ import annotations

import numpy as np

from eugo_lab import hpc
from eugo_lab.analysis import analyze
from eugo_lab.tracing.returned import MAX_HELD, DriverValues
from eugo_lab.tracing.trace import Trace


@hpc.remote
def step(x):
    return x + 1


@hpc.remote
def grow(a):
    return np.append(a, len(a))


@hpc.remote
def total(xs):
    return sum(xs)


@hpc.remote
def far(i):
    return 1000 + i  # no CPython-cached int: identity decides


def _edges(trace: Trace) -> list[tuple[int, int]]:
    d = trace.driver_deps
    return sorted(zip(d["task"].tolist(), d["on"].tolist()))


# -- the table of returned values, without a pool ------------------------------------------------------
def test_identity_not_equality_for_ordinary_objects():
    dv, epoch = DriverValues(), object()
    got = [1.5, 2]
    dv.note(epoch, got, 7)
    assert dv.sources(epoch, ([1.5, 2],), {}) == []  # equal, but another object
    assert dv.sources(epoch, (got,), {}) == [7]
    assert dv.sources(epoch, (), {"data": {"k": got}}) == [7]  # one level into a dict argument
    assert dv.sources(object(), (got,), {}) == []  # a new recording forgets the old one's values


def test_shared_constants_match_through_the_variable_only_until_the_next_submission():
    dv, epoch = DriverValues(), object()
    dv.note(epoch, 1, 3, stored=lambda: "x")
    dv.note(epoch, None, 4, stored=lambda: "y")
    assert dv.sources(epoch, (None, True), {}, loaded=lambda: ["y", "z"]) == []
    dv.note(epoch, 1, 3, stored=lambda: "x")
    assert dv.sources(epoch, (1,), {}, loaded=lambda: ["i"]) == []  # equal, but the loop counter, not x
    dv.note(epoch, 1, 3, stored=lambda: "x")
    assert dv.sources(epoch, (1,), {}, loaded=lambda: ["x"]) == [3]
    assert dv.sources(epoch, (1,), {}, loaded=lambda: ["x"]) == []  # the window closed at the previous submission
    dv.note(epoch, 1, 3)  # where it went is unknown (results.append(get(...))): never matched
    assert dv.sources(epoch, (1,), {}, loaded=lambda: ["x"]) == []


def test_values_held_strongly_are_bounded():
    dv, epoch = DriverValues(), object()
    kept = [[k] for k in range(MAX_HELD + 5)]
    for k, v in enumerate(kept):
        dv.note(epoch, v, k)
    assert dv.sources(epoch, (kept[0],), {}) == []  # dropped: its id could be reused
    assert dv.sources(epoch, (kept[-1],), {}) == [MAX_HELD + 4]


# -- recorded by the runtime ---------------------------------------------------------------------------
def test_a_value_passed_on_through_the_driver_is_recorded(local2, tmp_path):
    with hpc.trace() as t:
        x = 0
        chain = []
        for _ in range(4):  # small ints: each equals what the get() just before returned
            f = step.remote(x)
            chain.append(f.task_id)
            x = hpc.get(f)
        a = np.zeros(1)
        arrays = []
        for _ in range(3):  # arrays: the very object result() returned
            f = grow.remote(a)
            arrays.append(f.task_id)
            a = f.result()
        pair = hpc.get([far.remote(1), far.remote(2)])
        both = total.remote([0, pair[1]])
        independent = [far.remote(i) for i in range(3)]
        hpc.get([both, *independent])
    trace = t.trace
    expected = [(b, a) for a, b in zip(chain, chain[1:])] + [(b, a) for a, b in zip(arrays, arrays[1:])]
    expected.append((both.task_id, both.task_id - 1))  # the list held the value of the second far()
    assert _edges(trace) == sorted(expected)
    assert trace.meta["driver_deps_recorded"] is True
    path = tmp_path / "t.json"
    trace.save(str(path))
    assert _edges(Trace.load(str(path))) == _edges(trace)


def test_independent_gets_in_a_loop_record_nothing(local2):
    with hpc.trace() as t:
        out = [hpc.get(far.remote(i)) for i in range(5)]
        for i in range(5):  # step(i) returns i + 1, the next loop counter: equal, but not passed on
            r = hpc.get(step.remote(i))
        results = []
        for seed in range(5):
            results.append(hpc.get(step.remote(seed)))
    assert out == [1000 + i for i in range(5)] and r == 5 and results == [1, 2, 3, 4, 5]
    assert _edges(t.trace) == []


def test_a_chain_through_the_driver_gets_no_advice_to_move_the_get(local2):
    # Recorded facts only (no timing asserted): the Blocking finding's "move the get() out of the
    # loop" is impossible advice here, whatever the run's speed.
    with hpc.trace() as t:
        a = np.zeros(1)
        for _ in range(6):
            a = hpc.get(grow.remote(a))
    report = analyze(t.trace)
    assert "blocking" not in report.codes()
    assert all("out of the loop" not in f.advice for f in report.findings)
