"""``@hpc.remote(batch="auto")``: tight loops of tiny calls coalesced; slow functions left alone."""

from __future__ import annotations

import numpy as np
import pytest
from _optimize_tasks import inc, slow_inc

from eugo_lab import hpc
from eugo_lab.optimizations import report as opt_report


@pytest.fixture
def local():
    hpc.init("local", workers=2)
    yield
    hpc.shutdown()


def test_a_tight_loop_of_tiny_calls_becomes_fewer_backend_tasks(local):
    f = hpc.remote(batch="auto")(inc)
    n = 2000
    with hpc.trace() as region:
        futs = [f.remote(i) for i in range(n)]
        hpc.wait(futs, num_returns=n, timeout=60)
    st = f._coalescer.stats()
    assert st.calls == n and st.mode == "tiny"
    assert st.backend_tasks < n / 10, st  # far fewer tasks than calls
    assert st.batched_calls + st.plain_tasks == n
    # Per-call futures: distinct ids, each its own result, one error on its own call only.
    assert len({fu.task_id for fu in futs}) == n
    for i, fu in enumerate(futs):
        if i == 13:
            with pytest.raises(ValueError, match="thirteen"):
                fu.result()
        else:
            assert fu.result() == i + 1
    # Tracing: every call is a row of the trace, as a plain .remote() call is (batch items are rows).
    t = region.trace.tasks
    assert len(t["task_id"]) == n
    assert set(np.asarray(t["task_id"]).tolist()) == {fu.task_id for fu in futs}
    assert int((np.asarray(t["status"]) == 1).sum()) == 1
    item = opt_report.build(region.trace, None, [st]).find("inc", "batch")
    assert item.applied and "fewer backend tasks" in item.bucketed


def test_a_slow_function_is_left_alone(local):
    f = hpc.remote(batch="auto")(slow_inc)
    futs = [f.remote(i) for i in range(12)]
    assert hpc.get(futs) == [i + 1 for i in range(12)]
    st = f._coalescer.stats()
    assert st.mode == "slow" and st.batches == 0 and st.plain_tasks == 12
    futs = [f.remote(i) for i in range(6)]  # decided: plain tasks from the first call on
    assert hpc.get(futs) == [i + 1 for i in range(6)]
    item = opt_report.build(hpc.last_trace() or _empty_trace(), None, [f._coalescer.stats()]).find("slow_inc")
    assert item is not None and not item.applied and "its own task" in item.bucketed


def _empty_trace():
    with hpc.trace() as region:
        pass
    return region.trace


def test_cancel_a_held_call_and_a_bad_option(local):
    f = hpc.remote(batch="auto")(inc)
    futs = [f.remote(i) for i in range(20, 520)]
    futs[-1].cancel()
    assert futs[-1].cancelled()
    assert hpc.get(futs[:-1])[:3] == [21, 22, 23]
    with pytest.raises(ValueError, match="batch must be"):
        hpc.remote(batch=10)(inc)


def test_futures_as_arguments_go_as_plain_tasks(local):
    f = hpc.remote(batch="auto")(inc)
    first = f.remote(1)
    second = f.remote(first)  # depends on a future: plain task, resolved as usual
    assert second.result(timeout=30) == 3


def test_shutdown_cancels_calls_still_held():
    from _optimize_tasks import slow_inc as _slow  # noqa: F401 - importable on workers

    hpc.init("local", workers=2)
    f = hpc.remote(batch="auto")(inc)
    hpc.get([f.remote(i) for i in range(20, 70)])  # measured: tiny
    futs = [f.remote(i) for i in range(20, 3000)]
    hpc.shutdown()
    # Every future ends: a result, or cancelled by the shutdown; none is left pending forever.
    assert all(fu.done() for fu in futs)


def test_profiled_tiny_calls_stay_batched(local):
    # A profiled batch's body also holds its recording being serialized (0.4 s the first time): timed by
    # its items' ends instead, the function stays tiny. (It used to turn "slow" and stay slow.)
    f = hpc.remote(batch="auto")(inc)
    with hpc.profile():
        assert hpc.get([f.remote(i) for i in range(100, 2100)]) == list(range(101, 2101))
    st = f._coalescer.stats()
    assert st.mode == "tiny" and st.backend_tasks < 200, st
