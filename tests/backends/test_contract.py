"""One contract, every engine: the same user code must behave the same on each backend.

Each backend's engine is started once per module (a Dask ``LocalCluster``, a Ray
instance) and each test attaches a fresh runtime to it with ``hpc.init``; the local pool
and threads are cheap enough to start per test.
"""

from __future__ import annotations

import os
import sys
import time
from multiprocessing import resource_tracker

import numpy as np
import pytest
from _clusters import ray_cli_cluster
from _waiting import wait_for_file
from tasks import add, nap, square, total

from eugo_lab import hpc

BACKENDS = ["local", "threads", "dask", "ray"]
WORKERS = 2


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request):
    """Start the engine once; yields a function that attaches a new runtime to it."""
    name = request.param
    if name == "dask":
        from eugo_lab.backends.dask import DaskBackend

        resource_tracker.ensure_running()  # a per-interpreter helper, not a leak of one test
        engine = DaskBackend(workers=WORKERS, dashboard=False)
        engine.start()
        yield name, lambda: hpc.init(cluster=engine._local)
        hpc.shutdown()
        engine.shutdown()
    elif name == "ray":
        import ray

        from eugo_lab.backends.ray import RayBackend

        # A cluster of its own processes (`ray start`): Ray replaces and adds worker
        # processes as it sees fit, which must not count as processes a test leaked.
        with ray_cli_cluster(num_cpus=WORKERS) as address:
            connection = RayBackend(address=address)
            connection.start()  # each test's hpc.init(backend="ray") reuses this connection
            yield name, lambda: hpc.init(backend="ray")
            hpc.shutdown()
            connection.shutdown()
            assert not ray.is_initialized()
    else:
        # gpus=0: no GPU workers on the local pool, also on a machine with GPUs (the tests expect none)
        options = {"gpus": 0} if name == "local" else {}
        yield name, lambda: hpc.init(backend=name, workers=WORKERS, **options)


@pytest.fixture
def backend(engine):
    """A runtime on the engine; the autouse leak check shuts it down after the test."""
    name, attach = engine
    attach()
    return name


@hpc.remote
def fail(message):
    raise ValueError(message)


@hpc.remote
def array_sum(a, k):
    return float(a.sum()) + k


@hpc.remote
def phased(x):
    with hpc.phase("load"):
        y = x + 1
    with hpc.phase("compute"):
        return y * 2


def test_fan_out(backend):
    futures = [square.remote(i) for i in range(40)]
    assert hpc.get(futures) == [i * i for i in range(40)]


def test_nested_futures_as_arguments(backend):
    a, b, c = square.remote(2), square.remote(3), square.remote(4)
    assert hpc.get(total.remote([a, b, c])) == 29
    assert hpc.get(total.remote({"x": a, "y": b})) == 13
    chained = add.remote(add.remote(a, b), b=add.remote(c))
    assert hpc.get(chained) == 29


def test_get_nested_structures(backend):
    a, b = square.remote(5), square.remote(6)
    got = hpc.get({"list": [a, (b, 1)], "plain": "x", "deep": {"k": [a]}})
    assert got == {"list": [25, (36, 1)], "plain": "x", "deep": {"k": [25]}}


def test_get_timeout_raises_and_leaves_future_alive(backend):
    seconds = 4.0  # a get(timeout=0.1) that waited for the task would take about this long
    f = nap.remote(seconds, "late")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        hpc.get(f, timeout=0.1)
    assert time.monotonic() - t0 < seconds / 2
    with pytest.raises(hpc.GetTimeoutError):
        hpc.get(f, timeout=0.05)
    assert not f.done()
    assert hpc.get(f, timeout=30) == "late"


def test_wait_num_returns(backend):
    fast = [nap.remote(0.0, i) for i in range(2)]
    slow = nap.remote(2.0, "slow")
    done, pending = hpc.wait(fast + [slow], num_returns=2, timeout=30)
    assert len(done) >= 2 and set(fast) <= set(done)
    assert slow in pending
    hpc.cancel(slow)


def test_as_completed(backend):
    futures = [square.remote(i) for i in range(10)]
    seen = [hpc.get(f) for f in hpc.as_completed(futures, timeout=60)]
    assert sorted(seen) == [i * i for i in range(10)]


def test_cancel_queued_task(backend):
    blockers = [nap.remote(0.8, i) for i in range(WORKERS * 2)]
    queued = square.remote(7)
    assert hpc.cancel(queued) == 1
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(queued)
    assert queued.cancelled()
    assert hpc.get(blockers) == list(range(WORKERS * 2))
    assert hpc.get(square.remote(3)) == 9  # the engine still works


def test_put_numpy_array_shared_by_tasks(backend):
    arr = np.arange(100_000, dtype=np.float64)
    ref = hpc.put(arr)
    got = hpc.get([array_sum.remote(ref, k) for k in range(6)])
    assert got == [float(arr.sum()) + k for k in range(6)]
    np.testing.assert_array_equal(hpc.get(ref), arr)


@pytest.mark.parametrize("batch", ["auto", 1])
def test_map(backend, batch):
    futures = hpc.map(square, range(60), batch=batch)
    assert hpc.get(futures) == [i * i for i in range(60)]


@hpc.remote
def maybe_fail(x):
    if x % 7 == 3:
        raise KeyError(f"item {x}")
    return x * 10


def test_map_result_acts_as_the_list_of_its_futures(backend):
    r = hpc.map(square, range(200))
    assert isinstance(r, hpc.MapResult) and len(r) == 200
    assert hpc.get(r) == [i * i for i in range(200)]
    assert hpc.get(r[7]) == 49 and hpc.get(r[-1]) == 199 * 199 and hpc.get(r[10:13]) == [100, 121, 144]
    assert hpc.get(list(r)) == hpc.get(r) and r == list(r) and r[3:5] == [r[3], r[4]]
    assert hpc.get(total.remote(r)) == sum(i * i for i in range(200))  # passed whole: the list of values
    assert hpc.get(square.remote(r[3])) == 81
    done, pending = hpc.wait(r, num_returns=200, timeout=60)
    assert len(done) == 200 and not pending
    more = hpc.map(square, range(30))
    assert sorted(hpc.get(f) for f in hpc.as_completed(more, timeout=60)) == [i * i for i in range(30)]


def test_map_item_errors_keep_their_type_and_spare_the_rest(backend):
    r = hpc.map(maybe_fail, range(20))
    with pytest.raises(KeyError, match="item 3"):
        hpc.get(r, timeout=60)
    with pytest.raises(KeyError, match="item 10"):
        hpc.get(r[10])
    assert hpc.get(r[4]) == 40 and hpc.get(r[:3]) == [0, 10, 20]
    assert [f.status for f in r] == ["error" if i % 7 == 3 else "finished" for i in range(20)]


def test_map_cancel_one_item_and_then_all(backend):
    r = hpc.map(nap, [0.3] * 40)
    last = r[39]
    assert last.cancel() and last.cancelled()
    assert 0 < hpc.cancel(r) <= 39
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(r, timeout=60)
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(last)
    assert all(f.done() for f in r)
    assert hpc.get(square.remote(3)) == 9  # the engine still works


def test_exception_type_preserved(backend):
    f = fail.remote("boom 42")
    with pytest.raises(ValueError) as info:
        hpc.get(f)
    assert "boom 42" in str(info.value)
    assert "fail" in str(info.value)
    try:
        hpc.get(f)
    except ValueError:
        pass
    else:  # pragma: no cover - the assertion above already failed
        pytest.fail("except ValueError did not catch the task's error")


def _flaky_body(path, succeed_on):
    with open(path, "a") as fh:
        fh.write("x\n")
    with open(path) as fh:
        attempts = len(fh.readlines())
    if attempts < succeed_on:
        raise ConnectionError(f"attempt {attempts} failed")
    return attempts


def test_retry_exceptions_retries_then_succeeds(backend, tmp_path):
    counter = tmp_path / "attempts.txt"
    flaky = hpc.remote(_flaky_body).options(retries=3, retry_exceptions=(ConnectionError,))
    assert hpc.get(flaky.remote(str(counter), 3), timeout=60) == 3
    assert len(counter.read_text().splitlines()) == 3
    # without retry_exceptions a failure is final after one attempt
    counter2 = tmp_path / "once.txt"
    once = hpc.remote(_flaky_body).options(retries=3)
    with pytest.raises(ConnectionError):
        hpc.get(once.remote(str(counter2), 3), timeout=60)
    assert len(counter2.read_text().splitlines()) == 1


def _flaky_item(arg):
    folder, i = arg
    path = os.path.join(folder, str(i))
    with open(path, "a") as fh:
        fh.write("x\n")
    with open(path) as fh:
        if i % 3 == 0 and len(fh.readlines()) == 1:
            raise ConnectionError(f"item {i}: first attempt failed")
    return i * i


def test_map_items_are_retried_one_by_one(backend, tmp_path):
    flaky = hpc.remote(_flaky_item).options(retries=2, retry_exceptions=(ConnectionError,))
    result = hpc.map(flaky, [(str(tmp_path), i) for i in range(40)], batch=8)
    assert hpc.get(result, timeout=120) == [i * i for i in range(40)]
    runs = {int(p.name): len(p.read_text().splitlines()) for p in tmp_path.iterdir()}
    assert runs == {i: 2 if i % 3 == 0 else 1 for i in range(40)}  # the items that succeeded ran once


def test_dependents_of_failed_future_fail(backend):
    bad = fail.remote("upstream broke")
    child = square.remote(bad)
    grandchild = total.remote([child, square.remote(2)])
    for f in (child, grandchild):
        with pytest.raises(ValueError, match="upstream broke"):
            hpc.get(f, timeout=60)


def test_phases_recorded_in_trace(backend):
    with hpc.trace() as t:
        assert hpc.get([phased.remote(i) for i in range(4)]) == [(i + 1) * 2 for i in range(4)]
    df = t.to_dataframe()
    ok = df[df["status"] == "ok"]  # (an engine may add a crashed attempt that the runtime retried)
    assert sorted(ok["task_id"]) == sorted(set(df["task_id"])) and len(ok) == 4
    assert (ok["worker"] >= 0).all() and (ok["end"] >= ok["start"]).all()
    phases = t.phases_dataframe()
    assert set(phases["phase"]) == {"load", "compute"}
    assert len(phases) == 8


def test_cluster_repr(backend):
    info = hpc.cluster()
    text = repr(info)
    assert text.startswith("ClusterInfo(")
    assert f"backend={backend}" in text
    assert info.workers == WORKERS
    assert info.cores >= 1 and info.memory > 0
    assert "address=" in text
    # the workers' CPU, named as what it is (every engine in these tests runs its workers here)
    from eugo_lab.hardware.cpu import describe_cpu

    assert info.cpu == describe_cpu() and f"cpu={info.cpu}" in text


async def _await_with_a_ticker(futures: list, fails) -> tuple[list, int, str]:
    """Await ``futures`` while a ticker runs on the same loop; then await ``fails``."""
    import asyncio

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.create_task(ticker())
    first = await futures[0]
    rest = await asyncio.gather(*futures[1:])
    try:
        await fails
        error = "no error"
    except ValueError as exc:
        error = str(exc)
    t.cancel()
    return [first, *rest], ticks, error


def test_await_gives_values_and_errors_without_blocking_the_loop(backend):
    import asyncio

    futures = [nap.remote(0.3, "slow")] + [square.remote(i) for i in range(5)]
    values, ticks, error = asyncio.run(_await_with_a_ticker(futures, fail.remote("boom")))
    assert values == ["slow", 0, 1, 4, 9, 16]
    assert ticks >= 5, "the event loop was blocked while a future was awaited"
    assert "boom" in error

    async def traced() -> int:  # inside a traced region an await is recorded as a driver block
        with hpc.trace():
            return await nap.remote(0.2, 49)

    assert asyncio.run(traced()) == 49
    t = hpc.last_trace()
    assert list(t.block_kinds) == ["await"] and len(t.blocks["kind"]) == 1
    assert 0.15 < float(t.blocks["end"][0] - t.blocks["start"][0]) < 30



def _write_atomically(path: str, text: str) -> None:
    # Renamed into place whole: a poller never reads the file half written.
    with open(path + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(path + ".tmp", path)


def _until_cancelled(started: str, marker: str, seconds: float) -> str:
    open(started, "w").close()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.01)
    except hpc.TaskCancelled:
        _write_atomically(marker, "TaskCancelled")
        raise
    _write_atomically(marker, "ran to its end")
    return "done"


# Engines that stop a running task raise hpc.TaskCancelled inside it; the others let it finish unseen.
STOPS_RUNNING_TASKS = {"local": True, "ray": True, "dask": False, "threads": False}


def test_a_cancelled_running_task_gets_hpc_task_cancelled_inside(backend, tmp_path):
    started, marker = str(tmp_path / "started"), str(tmp_path / "marker")
    seconds = 4.0
    f = hpc.remote(_until_cancelled).remote(started, marker, seconds)
    assert wait_for_file(started) == ""  # exists, and is empty: the body is running
    assert os.path.exists(started)
    assert hpc.cancel(f) == 1
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(f)
    expected = "TaskCancelled" if STOPS_RUNNING_TASKS[backend] else "ran to its end"
    assert wait_for_file(marker, timeout=seconds + 30) == expected
    assert hpc.get(square.remote(4)) == 16  # the engine still works


def test_a_function_the_workers_cannot_import_is_a_function_load_error(backend, tmp_path, monkeypatch):
    # A module only the driver can import (added to sys.path after the workers started):
    # the function travels by reference, and a worker cannot resolve it.
    (tmp_path / "driver_only_mod.py").write_text("def triple(x):\n    return 3 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import driver_only_mod

        f = hpc.remote(driver_only_mod.triple).remote(2)
        if backend == "threads":  # the workers are threads of this process: they can import it
            assert hpc.get(f, timeout=60) == 6
            return
        with pytest.raises(hpc.FunctionLoadError, match=r"triple\(\) could not be loaded on a worker") as info:
            hpc.get(f, timeout=60)
        assert isinstance(info.value, ImportError) and isinstance(info.value, hpc.BackendError)
        assert "driver_only_mod" in str(info.value)
    finally:
        sys.modules.pop("driver_only_mod", None)
    assert hpc.get(square.remote(5)) == 25


def test_a_resource_request_no_worker_offers_fails_clearly(backend):
    # None of these test engines has a GPU worker: a gpus=1 task must fail saying so, not run on a CPU,
    # with the same error type on every engine, at submit (the future has failed before anyone waits).
    f = square.options(gpus=1).remote(2)
    assert f.done()
    with pytest.raises(hpc.ResourceRequestError, match=r"task square\(\) requested gpus=1, but ") as info:
        hpc.get(f, timeout=60)
    assert isinstance(info.value, hpc.NoWorkersError) and info.value.request == {"GPU": 1}
    have = {"local": "this local pool has no GPU workers (gpus=0 asked for none)",
            "threads": "the threads backend has no GPU workers", "dask": "no worker of the Dask cluster offers GPU=1",
            "ray": "no node of the Ray cluster offers CPU=1, GPU=1"}[backend]
    assert have in str(info.value) and "or drop the request (square.options(gpus=0))" in str(info.value)
    assert hpc.get(square.remote(2)) == 4
