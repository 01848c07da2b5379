"""``hpc.map``'s lazy result: no Future per item until one is asked for, and the whole contract of a list of futures.

The contract points that must hold on every engine are in ``test_contract.py``; these use
the local pool (crashes, shutdown, counters, memory) or no runtime at all.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
import time

import numpy as np
import pytest

from eugo_lab import hpc
from eugo_lab.backends._worker import execute_batch
from eugo_lab.contract.item_ends import ItemEnds
from eugo_lab.contract.serialization import dumps_args
from eugo_lab.hpc import mapping, session
from eugo_lab.hpc.future import Future


def square(x):
    return x * x


def nap(x):
    time.sleep(0.05)
    return x


def maybe(x):
    if x % 10 == 3:
        raise KeyError(f"item {x}")
    return x


def _futures_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Future)


# -- no per-item cost until looked at -----------------------------------------------------------

def test_a_million_item_map_makes_no_future_until_indexed(local2):
    before = _futures_alive()
    result = hpc.map(nap, range(1_000_000))  # 50 ms items: nearly all stay pending while we look
    assert len(result) == 1_000_000
    assert _futures_alive() == before
    first, last = result[0], result[-1]
    assert _futures_alive() == before + 2
    assert result[0] is first and last.task_id == first.task_id + 999_999  # one block of consecutive ids
    t = time.perf_counter()
    assert hpc.cancel(result) >= 999_990  # in bulk: the items not sent yet too
    assert time.perf_counter() - t < 2
    assert _futures_alive() == before + 2 and first.done() and last.cancelled()
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(result, timeout=30)


def test_get_of_the_map_equals_the_list_of_values_and_makes_no_future(local2):
    before = _futures_alive()
    result = hpc.map(square, range(50_000))
    assert hpc.get(result) == [i * i for i in range(50_000)]
    assert _futures_alive() == before
    assert hpc.get(result[123]) == 123 * 123  # a future made after the fact starts finished
    assert result[123].done() and result[123].status == "finished"


# -- the list a user could expect ------------------------------------------------------------------

def test_len_indexing_slicing_iteration_equality(local2):
    result = hpc.map(square, range(10))
    futs = list(result)
    assert len(result) == 10 and all(type(f) is Future for f in futs)
    assert [f.task_id for f in futs] == list(range(futs[0].task_id, futs[0].task_id + 10))
    assert result[-1] is futs[9] and result[2] is futs[2]
    assert result[2:5] == futs[2:5] and result[::3] == futs[::3] and result[5:2] == []
    assert list(reversed(result)) == futs[::-1]
    assert futs[4] in result and result.index(futs[4]) == 4 and result.count(futs[4]) == 1
    with pytest.raises(IndexError):
        result[10]
    with pytest.raises(TypeError):
        result["a"]
    assert result == futs and futs == result and result == result
    assert result != futs[:-1] and result != list(hpc.map(square, range(10)))
    assert result + [futs[0]] == futs + [futs[0]] and [futs[0]] + result == [futs[0]] + futs
    with pytest.raises(TypeError):
        hash(result)
    assert isinstance(result, hpc.MapResult) and bool(result) and not hpc.map(square, [])
    assert hpc.get(futs) == hpc.get(result) == [i * i for i in range(10)]


def test_repr_is_deterministic_and_makes_no_future(local2):
    result = hpc.map(square, range(100))
    first = result._job.first_id
    text = repr(result)
    assert text == (f"hpc.MapResult(100 items: [<hpc.Future square() task {first}>, <hpc.Future square() task "
                    f"{first + 1}>, <hpc.Future square() task {first + 2}>, ..., <hpc.Future square() task "
                    f"{first + 99}>])")
    assert not result._job.futs  # only the reprs' text, no futures
    hpc.get(result)
    assert repr(result) == text  # no state in it
    small = hpc.map(square, range(2))
    assert repr(small) == f"hpc.MapResult(2 items: {list(small)!r})"


def test_empty_map():
    result = hpc.map(square, [])
    assert len(result) == 0 and list(result) == [] and hpc.get(result) == []
    assert hpc.wait(result, num_returns=0) == ([], [])


# -- get / wait / as_completed / await / cancel -------------------------------------------------

def test_get_of_nested_maps_and_a_timeout(local2):
    a, b = hpc.map(square, range(5)), hpc.map(square, range(3))
    f = hpc.remote(square).remote(7)
    assert hpc.get({"a": a, "both": [b, f]}) == {"a": [0, 1, 4, 9, 16], "both": [[0, 1, 4], 49]}
    slow = hpc.map(nap, range(400))
    with pytest.raises(hpc.GetTimeoutError, match=r"task\(s\) still running \(first: nap\(\), task"):
        hpc.get(slow, timeout=0.2)
    with pytest.raises(hpc.GetTimeoutError):
        hpc.get([slow], timeout=0.05)
    hpc.cancel(slow)


def test_wait_on_the_map(local2):
    result = hpc.map(nap, range(200))
    done, pending = hpc.wait(result, num_returns=3, timeout=30)
    assert len(done) >= 3 and len(done) + len(pending) == 200
    assert all(f.done() for f in done) and [f.task_id for f in done + pending] != []
    assert sorted(done + pending, key=lambda f: f.task_id) == list(result)
    done, pending = hpc.wait(result, num_returns=200, timeout=0.1)  # times out: no error, just what is done
    assert pending
    with pytest.raises(ValueError, match="num_returns"):
        hpc.wait(result, num_returns=201)
    hpc.cancel(result)
    done, pending = hpc.wait(result, num_returns=200, timeout=30)
    assert len(done) == 200 and not pending


def test_as_completed_and_await(local2):
    result = hpc.map(square, range(300))
    seen = [f for f in hpc.as_completed(result, timeout=60)]
    assert sorted(f.task_id for f in seen) == [f.task_id for f in result]
    assert sorted(hpc.get(seen)) == [i * i for i in range(300)]

    async def main() -> tuple:
        r = hpc.map(square, range(40))
        return await r[6], await asyncio.gather(*r)

    one, every = asyncio.run(main())
    assert one == 36 and every == [i * i for i in range(40)]


def test_cancel_one_item_sent_or_not(local2):
    result = hpc.map(nap, range(60))
    queued, running = result[55], result[0]
    assert queued.cancel() and queued.cancelled() and not queued.cancel()
    with pytest.raises(hpc.TaskCancelledError, match=f"task {queued.task_id}"):
        hpc.get(result, timeout=60)
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(queued)
    assert hpc.get(result[:55]) == list(range(55)) and hpc.get(result[56:]) == list(range(56, 60))
    assert not running.cancel()  # finished by now
    assert hpc.cancel(result) == 0


def test_cancel_every_item_of_a_batch_stops_its_task(local2):
    result = hpc.map(nap, range(40), batch=20)
    time.sleep(0.2)
    assert hpc.cancel(result[:20]) == 20
    assert hpc.get(result[20:], timeout=60) == list(range(20, 40))


def test_cancel_all_stops_the_items_not_sent_yet(local2):
    result = hpc.map(nap, range(500))
    time.sleep(0.2)
    n = session.current().cancel_all()
    assert n >= 490
    assert all(f.done() for f in result)
    assert mapping.map_progress(session.current()) == (0, 0)


def test_shutdown_ends_every_pending_item(local2):
    result = hpc.map(nap, range(500))
    one = result[400]
    time.sleep(0.2)
    hpc.shutdown()
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(result, timeout=10)
    assert one.cancelled() and all(f.done() for f in result)


# -- errors, retries, dependencies ------------------------------------------------------------------

def test_item_errors_keep_their_type_and_spare_the_rest(local2):
    result = hpc.map(maybe, range(30))
    with pytest.raises(KeyError, match="item 3"):  # the first failed item, in order
        hpc.get(result)
    with pytest.raises(KeyError, match="item 13"):
        hpc.get(result[13])
    assert hpc.get(result[:3]) == [0, 1, 2] and hpc.get(result[14:23]) == list(range(14, 23))
    assert [f.status for f in result] == ["error" if i % 10 == 3 else "finished" for i in range(30)]
    assert isinstance(result[23].exception(), KeyError) and result[22].exception() is None


def test_unpicklable_items_fail_alone(local2):
    import threading

    items = [1, 2, threading.Lock(), 4]
    items[0] = 1  # the first item is probed at the call: only later ones reach the batch check
    result = hpc.map(lambda x: x if isinstance(x, int) else "?", items, batch=4)
    with pytest.raises(hpc.SerializationError, match="item 2 of hpc.map"):
        hpc.get(result, timeout=30)
    assert hpc.get([result[0], result[1], result[3]]) == [1, 2, 4]


def test_a_batch_whose_worker_crashed_is_retried(local2, tmp_path):
    flag = tmp_path / "crashed"

    def fragile(i):
        if i == 2 and not flag.exists():
            flag.touch()
            os._exit(1)  # the worker dies mid-batch, on the first attempt only
        return i

    result = hpc.map(fragile, range(20), batch=5)
    assert hpc.get(result, timeout=60) == list(range(20))
    assert flag.exists()


def test_items_as_dependencies(local2):
    total = hpc.remote(sum)
    result = hpc.map(square, range(10))
    assert hpc.get(total.remote(result)) == sum(i * i for i in range(10))  # the whole map: a list of values
    assert hpc.get(hpc.remote(square).remote(result[3])) == 81
    assert hpc.get(hpc.map(square, result)) == [(i * i) ** 2 for i in range(10)]
    bad = hpc.map(maybe, range(5))
    with pytest.raises(KeyError):
        hpc.get(hpc.remote(square).remote(bad[3]), timeout=30)
    assert pickle.loads(pickle.dumps(hpc.get(result))) == hpc.get(result)


# -- tracing and live counters ------------------------------------------------------------------------

def test_every_item_is_a_trace_row(local2):
    with hpc.trace() as t:
        result = hpc.map(maybe, range(2000))
        with pytest.raises(KeyError):
            hpc.get(result)
        assert len(result._job.futs) <= 2 * len(result._job.batches)  # the recorder reads a batch's first/last ids
    df = t.to_dataframe()
    ids = [result._job.first_id + p for p in range(2000)]
    assert sorted(df["task_id"]) == ids
    errs = df.loc[df["status"] == "error", "task_id"] - result._job.first_id
    assert sorted(errs) == [p for p in range(2000) if p % 10 == 3]
    assert (df["end"] >= df["start"]).all()


def test_map_progress_counts_items(local2):
    rt = session.current()
    result = hpc.map(nap, range(100))
    items, batches = mapping.map_progress(rt)
    assert 90 <= items <= 100 and 1 <= batches <= 4
    hpc.get(result, timeout=60)
    assert mapping.map_progress(rt) == (0, 0)


# -- item ends measured per group on the worker -------------------------------------------------------

def test_item_ends_expand_to_one_end_per_item():
    ends = ItemEnds(np.array([1, 3, 2], dtype=np.int64).tobytes(), np.array([1.0, 4.0, 5.0]).tobytes())
    assert np.asarray(ends, dtype=np.float64).tolist() == [1.0, 2.0, 3.0, 4.0, 4.5, 5.0]
    assert len(ends) == 6 and pickle.loads(pickle.dumps(ends)).counts == ends.counts


def test_execute_batch_groups_tiny_items_and_times_slow_ones_alone():
    def f(x):
        if x == 500:
            raise ValueError("five hundred")
        if x >= 2000:
            time.sleep(0.002)
        return x

    args = dumps_args((list(range(2200)),), {}, function="f")[0]
    status, payload, errors, stats = execute_batch(f, "f", args)
    ends = np.asarray(stats.item_ends, dtype=np.float64)
    counts = np.frombuffer(stats.item_ends.counts, dtype=np.int64)
    assert len(ends) == 2200 and (np.diff(ends) >= 0).all() and ends[-1] <= stats.body
    assert list(errors) == [500] and pickle.loads(payload)[499:502] == [499, None, 501]
    assert counts.max() > 1 and len(counts) < 1000  # tiny items share clock reads
    # The group the first slow item fell in shares its time; from then on each is timed alone.
    assert (counts[-20:] == 1).all() and (np.diff(ends[-20:]) > 0.0015).all()
