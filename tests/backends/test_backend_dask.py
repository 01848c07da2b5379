"""The Dask backend against real Dask processes on 127.0.0.1.

Most tests use a cluster started from the command line (``dask scheduler`` and two
``dask worker`` processes, as on a real cluster) and connect with ``hpc.init(address=)``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time

import numpy as np
import psutil
import pytest
from _clusters import BIN, DaskCLICluster, dask_cli_cluster, free_port, worker_env
from _memory import check_a_map_item_over_its_limit_fails_alone, grow_ignoring_stops, stop_two_growing_tasks
from _processes import listening, wait_gone
from tasks import pid_of, square, total

from eugo_lab import hpc
from eugo_lab.backends.dask import parse_idle_timeout
from eugo_lab.hpc import session

pytestmark = pytest.mark.usefixtures("resource_tracker_running")  # Dask clusters start it


@pytest.fixture(scope="module")
def cli_cluster():
    """A scheduler and two single-threaded workers, started with the ``dask`` command."""
    with dask_cli_cluster(n_workers=2) as c:
        yield c


@hpc.remote
def slow_square(x, seconds=0.4):
    time.sleep(seconds)
    return x * x


@hpc.remote
def array_stats(a, k):
    return float(a.mean()) + k


def test_fan_out_nested_put_map_and_trace_on_a_cli_cluster(cli_cluster):
    info = hpc.init(address=cli_cluster.address)
    assert info.backend == "dask" and info.workers == 2 and info.cores == 2
    assert info.address == cli_cluster.address

    assert hpc.get([square.remote(i) for i in range(30)]) == [i * i for i in range(30)]
    parts = [square.remote(i) for i in range(5)]
    assert hpc.get(total.remote([parts[0], parts[1], square.remote(parts[2])])) == 0 + 1 + 16
    assert hpc.get({"a": parts[3], "b": [parts[4]]}) == {"a": 9, "b": [16]}

    arr = np.arange(50_000, dtype=np.float64)
    ref = hpc.put(arr)
    assert hpc.get([array_stats.remote(ref, k) for k in range(4)]) == [arr.mean() + k for k in range(4)]
    assert hpc.get(hpc.map(square, range(100))) == [i * i for i in range(100)]

    with hpc.trace() as t:
        results = hpc.get([pid_of.remote(i) for i in range(12)])
    df = t.to_dataframe()
    worker_pids = {p.pid for p in cli_cluster.workers}
    assert {pid for _, pid in results} == worker_pids  # both workers ran tasks
    assert set(df["worker"]) == {0, 1} or len(set(df["worker"])) == 2
    assert set(t.phases_dataframe()["phase"]) == {"work"}
    # each index is one real worker: same index, same process
    by_index = {}
    for (_x, pid), w in zip(results, df.sort_values("task_id")["worker"]):
        by_index.setdefault(int(w), set()).add(pid)
    assert all(len(p) == 1 for p in by_index.values())
    known = hpc.session.current().backend.workers()
    assert {w.pid for w in known} == worker_pids
    assert all(w.host and w.address.startswith("tcp://127.0.0.1:") for w in known)


def test_worker_killed_mid_run_every_result_arrives(cli_cluster):
    extra = cli_cluster.start_worker()
    try:
        cli_cluster.wait_for_workers(3)
        hpc.init(address=cli_cluster.address)
        with hpc.trace() as t:
            futures = [slow_square.remote(i, 0.5) for i in range(12)]
            time.sleep(0.3)  # every worker is running its first task now
            os.kill(extra.pid, signal.SIGKILL)
            assert hpc.get(futures, timeout=60) == [i * i for i in range(12)]
        extra.wait(10)
        df = t.to_dataframe()
        # the scheduler gives a task up when its worker dies (allowed-failures=0): the
        # eugo runtime records the crashed attempt and runs it again elsewhere
        assert (df["status"] == "crashed").sum() >= 1
        assert (df[df["status"] == "crashed"]["worker"] == -1).all()
        retried = set(df[df["status"] == "crashed"]["task_id"])
        assert retried <= set(df[(df["status"] == "ok") & (df["attempt"] == 2)]["task_id"])
        assert hpc.cluster().workers == 2
    finally:
        if extra.poll() is None:
            extra.kill()
            extra.wait()


def test_cluster_manager_object_is_accepted_and_left_running(cli_cluster):
    class FakeJobqueueCluster:  # any object with .scheduler_address, like dask-jobqueue's
        scheduler_address = cli_cluster.address

    info = hpc.init(cluster=FakeJobqueueCluster())
    assert info.backend == "dask" and info.workers == 2
    assert hpc.get(square.remote(12)) == 144
    hpc.shutdown()
    assert all(p.poll() is None for p in cli_cluster.workers[:2])  # not ours to stop
    assert cli_cluster.scheduler.poll() is None


def test_unsatisfiable_resource_fails_clearly(cli_cluster):
    hpc.init(address=cli_cluster.address)
    t0 = time.monotonic()
    f = square.options(gpus=1).remote(3)
    with pytest.raises(hpc.NoWorkersError) as info:
        hpc.get(f, timeout=30)
    assert time.monotonic() - t0 < 10
    msg = str(info.value)
    assert "GPU=1" in msg and "square" in msg and "2 worker(s)" in msg and "no resources" in msg
    assert hpc.get(square.remote(3)) == 9  # other tasks are unaffected


def test_unreachable_address_fails_fast_naming_it():
    address = f"tcp://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(hpc.BackendError) as info:
        hpc.init(address=address)
    assert time.monotonic() - t0 < 10
    assert "dask" in str(info.value) and address in str(info.value)
    assert not hpc.is_initialized()


def test_embedded_cluster_without_dashboard_serves_none_and_takes_no_fixed_port(recwarn):
    info = hpc.init(backend="dask", workers=1, dashboard=False)
    assert info.dashboard is None and "dashboard=" not in repr(info)
    listening = [c.laddr for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    assert listening and all(a.ip == "127.0.0.1" for a in listening), listening
    assert 8787 not in {a.port for a in listening}  # a second cluster would collide with the first there
    assert not [w for w in recwarn if "8787" in str(w.message)]
    assert hpc.get(square.remote(3)) == 9


def test_embedded_cluster_listens_on_loopback_only_and_leaves_nothing():
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    info = hpc.init(backend="dask", workers=2, resources={"GPU": 1})
    assert info.workers == 2 and info.gpus == 2 and info.threads_per_worker == 1
    assert info.address.startswith("tcp://127.0.0.1:")
    assert info.dashboard and info.dashboard.startswith("http://127.0.0.1:")
    assert "dashboard=http://127.0.0.1:" in repr(info)
    assert hpc.get([square.remote(i) for i in range(8)]) == [i * i for i in range(8)]
    # a GPU request is a Dask resource request; one no worker offers fails clearly
    assert hpc.get(square.options(gpus=1).remote(5)) == 25
    with pytest.raises(hpc.NoWorkersError, match="GPU=2"):
        hpc.get(square.options(gpus=2).remote(5), timeout=30)

    new = {p.pid for p in me.children(recursive=True)} - before
    assert len(new) >= 2
    sockets = listening([me.pid, *new])
    assert sockets, "the cluster should be listening somewhere"
    public = [s for s in sockets if s[1] not in ("127.0.0.1", "::1")]
    assert public == []
    hpc.shutdown()
    assert not wait_gone(new, timeout=10)


def _cuda_visible():
    import os

    return os.environ.get("CUDA_VISIBLE_DEVICES")


def test_embedded_gpu_workers_are_pinned_to_a_device_each_and_the_trace_says_which(monkeypatch):
    # Two devices named (as the local pool takes them; no GPU stands behind them here): each worker
    # offering GPU=1 gets one of them as its CUDA_VISIBLE_DEVICES, as dask-cuda pins its workers.
    monkeypatch.setenv("EUGO_LAB_GPU_DEVICES", "0,1")
    hpc.init(backend="dask", workers=2, resources={"GPU": 1}, dashboard=False)
    on_gpu = hpc.remote(_cuda_visible).options(gpus=1)
    with hpc.trace() as t:
        seen = hpc.get([on_gpu.remote() for _ in range(8)])
        hpc.get(square.remote(2))
    df = t.to_dataframe()
    assert set(seen) <= {"0", "1"} and len(set(seen)) >= 1
    g = df[df["function"] == "_cuda_visible"]
    by_worker = g.groupby("worker")["gpu"].agg(set).to_dict()
    assert all(len(v) == 1 for v in by_worker.values()) and set().union(*by_worker.values()) <= {0, 1}
    devices = [next(iter(v)) for v in by_worker.values()]
    assert len(devices) == len(set(devices))  # each worker its own device
    assert sorted(int(s) for s in seen) == sorted(g["gpu"].tolist())  # the column is the device the task saw
    assert (df[df["function"] == "square"]["gpu"] == -1).all()


def test_idle_timeout_stops_the_embedded_cluster_and_restarts_it(caplog):
    caplog.set_level(logging.WARNING, logger="eugo_lab")
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    hpc.init(backend="dask", workers=1, idle_timeout="2s")
    backend = session.current().backend
    assert hpc.get(square.remote(4)) == 16
    workers = {p.pid for p in me.children(recursive=True)} - before
    first_address = hpc.cluster().address
    deadline = time.monotonic() + 15
    while backend.client is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert backend.client is None, "the idle cluster was not shut down"
    assert "idle" in caplog.text and "idle_timeout=2 s" in caplog.text
    assert hpc.cluster().workers == 0 and "idle" in hpc.cluster().address
    assert psutil.wait_procs([psutil.Process(p) for p in workers if psutil.pid_exists(p)], timeout=10)[1] == []
    # the next task starts a fresh cluster transparently
    assert hpc.get(square.remote(5), timeout=60) == 25
    assert hpc.cluster().workers == 1 and hpc.cluster().address != first_address


def test_idle_timeout_values():
    assert parse_idle_timeout("10m") == 600
    assert parse_idle_timeout("30s") == 30
    assert parse_idle_timeout(45) == 45
    assert parse_idle_timeout(None) is None
    for bad in ("soon", 0, -3, True):
        with pytest.raises(ValueError, match="idle_timeout"):
            parse_idle_timeout(bad)
    with pytest.raises(ValueError, match="embedded"):
        hpc.init(address="tcp://127.0.0.1:1", idle_timeout="1m")


def _rss() -> int:
    return psutil.Process().memory_info().rss


def test_memory_limit_stops_the_task_inside_its_worker_and_never_retries_it():
    hpc.init(backend="dask", workers=2, dashboard=False, memory_limit="250MB")  # a default for every task
    backend = session.current().backend
    assert hpc.get([square.remote(i) for i in range(8)]) == [i * i for i in range(8)]  # limited, well within
    workers = {w.pid for w in backend.workers()}
    driver_before = _rss()
    with hpc.trace() as t:
        err, (f, g) = stop_two_growing_tasks(hpc)
    assert isinstance(err, MemoryError) and err.function == "grow_forever" and err.attempts == 1
    assert err.limit == 250_000_000 and err.limit < err.observed < err.limit + 150_000_000
    assert err.exit_code is None  # stopped inside the worker, not killed
    msg = str(err)
    assert "grow_forever()" in msg and "grew its worker's memory by" in msg and "250.00 MB memory limit" in msg
    assert "not retried" in msg and "Next step" in msg
    assert _rss() - driver_before < 50_000_000  # nothing big reached the driver
    df = t.to_dataframe()
    for fut in (f, g):
        assert list(df[df["task_id"] == fut.task_id]["status"]) == ["crashed"]  # one attempt, no retry
    # the workers survived and serve the next tasks
    assert hpc.get([square.remote(i) for i in range(8)], timeout=60) == [i * i for i in range(8)]
    assert {w.pid for w in backend.workers()} == workers


def test_a_map_item_over_its_memory_limit_fails_alone():
    hpc.init(backend="dask", workers=1, dashboard=False)
    check_a_map_item_over_its_limit_fails_alone(hpc)


def test_memory_limit_kills_the_worker_of_a_task_that_ignores_the_stop():
    hpc.init(backend="dask", workers=1, dashboard=False)
    with pytest.raises(hpc.WorkerMemoryError) as info:
        hpc.get(hpc.remote(grow_ignoring_stops).options(memory="200MB").remote(), timeout=60)
    err = info.value
    assert err.attempts == 1 and err.exit_code == -signal.SIGKILL and err.observed > err.limit == 200_000_000
    assert "did not stop when asked, so its worker process was killed" in str(err)
    assert hpc.get(square.remote(7), timeout=60) == 49  # the nanny started a replacement worker


def test_dask_extra_missing_names_the_install_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)
    monkeypatch.delitem(sys.modules, "eugo_lab.backends.dask", raising=False)
    with pytest.raises(ImportError, match=r'pip install "eugo-lab\[dask\]"'):
        hpc.init(backend="dask", workers=1)



def test_losing_every_worker_fails_queued_tasks_with_noworkerserror():
    # A scheduler that gives unrunnable tasks up after 3 s, and one worker without a nanny
    # (an embedded LocalCluster would just start a new worker).
    c = DaskCLICluster()
    c.scheduler = subprocess.Popen(
        [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(c.port), "--no-dashboard"],
        env=worker_env(DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT="3s"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        worker = c.start_worker()
        c.wait_for_workers(1)
        hpc.init(address=c.address)
        assert hpc.get(square.remote(3)) == 9
        worker.kill()
        worker.wait()
        t = time.monotonic()
        with pytest.raises(hpc.NoWorkersError, match="no worker able to run it"):
            hpc.get(square.remote(4), timeout=60)
        assert time.monotonic() - t < 30
    finally:
        hpc.shutdown()
        c.stop()


def test_losing_the_scheduler_fails_tasks_with_backenderror_naming_it():
    with dask_cli_cluster(n_workers=1) as c:
        try:
            hpc.init(address=c.address)
            assert hpc.get(square.remote(3)) == 9
            stored = hpc.put(list(range(5)))
            running = [slow_square.remote(i, 5.0) for i in range(3)]
            c.scheduler.kill()  # the scheduler dies (and its worker after it)
            c.scheduler.wait()
            t = time.monotonic()
            for f in running:
                with pytest.raises(hpc.BackendError, match=rf"connection to the Dask scheduler at {c.address} "
                                                           r"was lost .* call hpc.init"):
                    hpc.get(f, timeout=60)
            assert time.monotonic() - t < 30
            assert not any(f.cancelled() for f in running)  # nobody cancelled them: an error, not a cancel
            # Once Dask gave up reconnecting, a new task fails at once with the same advice.
            deadline = time.monotonic() + 30
            while not session.current().backend._connection_lost() and time.monotonic() < deadline:
                time.sleep(0.1)
            with pytest.raises(hpc.BackendError, match=rf"scheduler at {c.address} is closed"):
                hpc.get(square.remote(4), timeout=10)
            with pytest.raises(hpc.BackendError, match=rf"scheduler at {c.address} is closed"):
                hpc.put([1, 2])
            with pytest.raises(hpc.BackendError, match="objects stored through it are gone"):
                hpc.get(stored)
            assert hpc.cluster().address == "(scheduler lost)"
        finally:
            hpc.shutdown()
