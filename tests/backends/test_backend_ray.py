"""The Ray backend: a local Ray instance started by ``hpc.init(backend="ray")``.

Ray takes seconds to start, so one test drives a whole session on one instance (and one
each for its network exposure and its memory limits); the shared contract (``test_contract.py``)
covers the rest against a ``ray start`` cluster.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest
from _clusters import REPO, worker_env
from _crashes import check_a_worker_death_in_a_map_batch_costs_only_its_item
from _memory import check_a_map_item_over_its_limit_fails_alone, grow_ignoring_stops, stop_two_growing_tasks
from _processes import listening, wait_gone
from _waiting import wait_for_file
from tasks import pid_met, square, total

from eugo_lab import hpc
from eugo_lab.hpc import session


@hpc.remote
def array_stats(a, k):
    assert not a.flags.writeable  # Ray hands out the stored array zero-copy, read-only
    return float(a.mean()) + k


def _report_pid_then_sleep(path, seconds):
    with open(path, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return "survived"


def test_ray_missing_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "eugo_lab.backends.ray", raising=False)
    with pytest.raises(ImportError, match=r'pip install "eugo-lab\[ray\]"'):
        hpc.init(backend="ray", workers=1)
    assert not hpc.is_initialized()


def test_options_that_do_not_apply_are_refused():
    with pytest.raises(ValueError, match="cluster="):
        hpc.init(backend="ray", cluster=object())
    with pytest.raises(ValueError, match="workers="):
        hpc.init(backend="ray", workers=2, address="auto")


def _cuda_visible():
    import os

    return os.environ.get("CUDA_VISIBLE_DEVICES")


def test_local_ray_end_to_end(tmp_path):
    import ray

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    # num_gpus=1: one GPU declared (Ray takes the count as given; none stands behind it here)
    # cancel_grace: the force-cancel timer of the cancel below is still waiting at shutdown, however busy the machine
    info = hpc.init(backend="ray", workers=2, num_gpus=1, cancel_grace=600)
    assert ray.is_initialized()
    assert info.backend == "ray" and info.workers == 2 and info.cores == 2 and info.gpus == 1
    assert info.dashboard is None and "backend=ray" in repr(info)
    started = {p.pid for p in me.children(recursive=True)} - before
    assert started, "Ray's processes should be children of this process"

    # fan-out, nested futures, put, map
    assert hpc.get([square.remote(i) for i in range(30)]) == [i * i for i in range(30)]
    a, b = square.remote(3), square.remote(4)
    assert hpc.get(total.remote([a, b, square.remote(a)])) == 9 + 16 + 81
    arr = np.arange(20_000, dtype=np.float64)
    ref = hpc.put(arr)
    assert hpc.get([array_stats.remote(ref, k) for k in range(3)]) == [arr.mean() + k for k in range(3)]
    assert hpc.get(hpc.map(square, range(50))) == [i * i for i in range(50)]

    # the trace shows the workers, each index one real process
    with hpc.trace() as t:
        results = hpc.get([pid_met.remote(i, str(tmp_path)) for i in range(10)])
    df = t.to_dataframe().sort_values("task_id")
    by_index = {}
    for (_, pid), w in zip(results, df["worker"]):
        by_index.setdefault(int(w), set()).add(pid)
    assert len(by_index) >= 2 and all(len(p) == 1 for p in by_index.values())
    assert set(t.phases_dataframe()["phase"]) == {"work"}
    known = {w.index: w.pid for w in session.current().backend.workers()}
    assert all(known[i] in pids for i, pids in by_index.items())

    # a gpus=1 task gets the GPU Ray assigns it, and the trace says which (ray.get_gpu_ids())
    with hpc.trace() as t:
        assert hpc.get(hpc.remote(_cuda_visible).options(gpus=1).remote()) == "0"
        hpc.get(square.remote(1))
    assert sorted(t.to_dataframe()["gpu"].tolist()) == [-1, 0] and t.gpu_tasks() == {0: 1}

    # more GPUs than any node has: a clear error, quickly
    t0 = time.monotonic()
    with pytest.raises(hpc.ResourceRequestError, match="requested gpus=2, but no node of the Ray cluster offers "
                                                       "CPU=1, GPU=2: its 1 node"):
        hpc.get(square.options(gpus=2).remote(2), timeout=30)
    assert time.monotonic() - t0 < 10

    # a worker killed mid-task: Ray reports it crashed, the eugo runtime runs it again
    pid_file = tmp_path / "pids.txt"
    victim = hpc.remote(_report_pid_then_sleep).options(retries=2)
    with hpc.trace() as t:
        f = victim.remote(str(pid_file), 1.5)
        first_pid = int(wait_for_file(pid_file, "\n").split()[0])
        os.kill(first_pid, signal.SIGKILL)
        assert hpc.get(f, timeout=90) == "survived"
    df = t.to_dataframe()
    assert list(df.sort_values("attempt")["status"]) == ["crashed", "ok"]
    assert len(pid_file.read_text().split()) == 2

    # a worker's death in an hpc.map batch costs its item alone: Ray cannot say how far the batch got
    (tmp_path / "map").mkdir()
    check_a_worker_death_in_a_map_batch_costs_only_its_item(hpc, str(tmp_path / "map"))

    # cancelling a running task: reported at once, the worker survives the gentle cancel
    seconds = 30  # a cancel that waited for the running task would take the rest of this
    slow = victim.remote(str(tmp_path / "slow.txt"), seconds)
    wait_for_file(tmp_path / "slow.txt")
    t0 = time.monotonic()
    assert hpc.cancel(slow) == 1
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(slow, timeout=5)
    assert time.monotonic() - t0 < seconds / 4
    assert hpc.get(square.remote(6), timeout=60) == 36

    # shutdown stops every process this backend started, and first calls off the force-cancel timer
    # still waiting: Ray ends the whole process when a thread calls it during or after ray.shutdown()
    timers = list(session.current().backend._timers)
    assert timers and all(t.is_alive() for t in timers)
    hpc.shutdown()
    assert not any(t.is_alive() for t in timers) and all(t.args == () for t in timers)
    assert not ray.is_initialized()
    assert wait_gone(started, timeout=15) == set()


def test_unreachable_ray_address_fails_fast_naming_it():
    t = time.monotonic()
    with pytest.raises(hpc.BackendError, match=r"ray backend: nothing answers at ray://127\.0\.0\.1:1 "):
        hpc.init(address="ray://127.0.0.1:1")
    assert time.monotonic() - t < 10
    with pytest.raises(ValueError, match="is not 'ray://host:port'"):
        hpc.init(backend="ray", address="ray://nohost")


def _is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1, a dual-stack socket bound to 127.0.0.1
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def test_embedded_ray_listens_on_loopback_only_with_no_dashboard():
    from ray._private import ray_constants

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    info = hpc.init(backend="ray", workers=1)
    assert info.address.startswith("127.0.0.1:") and info.dashboard is None
    assert hpc.get(square.remote(3)) == 9  # a worker process is up: it listens too
    sockets = listening([me.pid, *({p.pid for p in me.children(recursive=True)} - before)])
    names = {name for name, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= names, sockets  # the test saw Ray's servers
    assert any(n.startswith("ray::") for n in names), sockets  # and a worker's or an agent's
    assert [s for s in sockets if not _is_loopback(s[1])] == []
    assert not [s for s in sockets if s[2] == 8265]  # Ray's dashboard port: no dashboard
    # the single-node switch was set only while Ray started
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ and ray_constants.ENABLE_RAY_CLUSTER


def test_memory_limits_on_ray_stop_the_task_or_kill_its_worker_and_never_retry():
    hpc.init(backend="ray", workers=2, memory_limit="250MB")  # a default for every task
    assert hpc.get([square.remote(i) for i in range(6)]) == [i * i for i in range(6)]  # limited, well within
    driver_before = psutil.Process().memory_info().rss
    with hpc.trace() as t:
        err, (f, g) = stop_two_growing_tasks(hpc)
        h = hpc.remote(grow_ignoring_stops).options(memory="200MB").remote()
        with pytest.raises(hpc.WorkerMemoryError) as killed:
            hpc.get(h, timeout=60)
    assert err.function == "grow_forever" and err.attempts == 1 and err.exit_code is None
    assert err.limit == 250_000_000 and err.limit < err.observed < err.limit + 150_000_000
    msg = str(err)
    assert "grow_forever()" in msg and "250.00 MB memory limit" in msg and "not retried" in msg and "Next step" in msg
    err = killed.value
    assert err.attempts == 1 and err.exit_code == -signal.SIGKILL and err.observed > err.limit == 200_000_000
    assert "did not stop when asked, so its worker process was killed" in str(err)
    assert psutil.Process().memory_info().rss - driver_before < 50_000_000
    df = t.to_dataframe()
    for fut in (f, g, h):
        assert list(df[df["task_id"] == fut.task_id]["status"]) == ["crashed"]  # one attempt each, no retry
    assert hpc.get([square.remote(i) for i in range(6)], timeout=60) == [i * i for i in range(6)]
    # an hpc.map item over its limit fails alone: the rest of its batch runs on
    check_a_map_item_over_its_limit_fails_alone(hpc)


# In a process of its own: Ray ends a driver whose cluster died about a minute later (exit 1),
# which must never be the test run itself.
LOST_CLUSTER_DRIVER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, "tests")
    from _clusters import ray_cli_cluster
    from eugo_lab import hpc

    @hpc.remote
    def nap(s):
        time.sleep(s)
        return s

    with ray_cli_cluster(num_cpus=2) as address:
        hpc.init(backend="ray", address=address)
        print("FIRST", hpc.get(nap.remote(0.1)), flush=True)
        futures = [nap.remote(30) for _ in range(3)]
        ref = hpc.put(list(range(10)))
        time.sleep(1)
    # the cluster is gone: every one of its processes was killed
    t = time.monotonic()
    for name, call in [("GET", lambda: hpc.get(futures, timeout=50)), ("NEW", lambda: hpc.get(nap.remote(0))),
                       ("PUT", lambda: hpc.get(ref))]:
        try:
            call()
            print(name, "no error", flush=True)
        except Exception as e:
            print(name, round(time.monotonic() - t, 1), type(e).__name__, str(e), flush=True)
    t = time.monotonic()
    hpc.shutdown()
    print("SHUTDOWN", round(time.monotonic() - t, 1), flush=True)
    try:
        hpc.init(backend="ray")
    except Exception as e:
        print("REINIT", type(e).__name__, str(e), flush=True)
    """
)


def test_a_cluster_that_dies_fails_its_tasks_clearly_before_ray_ends_the_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", LOST_CLUSTER_DRIVER], cwd=REPO, env=worker_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = {}
        for _ in range(6):
            line = proc.stdout.readline()
            if not line:
                break
            key, _, rest = line.strip().partition(" ")
            lines[key] = rest
        assert lines.get("FIRST") == "0.1", lines
        seconds, kind, message = lines["GET"].split(" ", 2)
        assert kind == "BackendError" and float(seconds) < 40, lines["GET"]  # Ray itself waits 60 s, then exits
        assert "task nap() (task 2) did not finish: the Ray cluster at" in message
        assert "stopped answering" in message and "restart the kernel" in message
        assert lines["NEW"].split(" ", 2)[1] == "BackendError" and "ray backend: the Ray cluster at" in lines["NEW"]
        assert lines["PUT"].split(" ", 2)[1] == "BackendError"  # never blocked in ray.get
        assert float(lines["SHUTDOWN"]) < 5  # never blocked in ray.shutdown()
        assert lines["REINIT"].startswith("BackendError ray backend: this process is still attached to a Ray "
                                          "cluster that went away")
    finally:
        proc.kill()
        proc.wait()



def test_a_local_start_that_fails_half_way_leaves_no_process_behind(monkeypatch):
    # On a busy machine the raylet can time out after the GCS and monitors started: the same failure here,
    # made certain by failing the driver's connection, the last step of ray.init.
    import ray._private.worker as ray_worker

    tries = []

    def refuse(*args, **kwargs):
        tries.append(1)
        raise RuntimeError("the node timed out during startup (made to fail here)")

    monkeypatch.setattr(ray_worker, "connect", refuse)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    # (a machine busy enough may time the real start out first: the same failure, and the same cleanup)
    with pytest.raises(hpc.BackendError, match="could not start or reach a local Ray instance: .*timed out during "
                                               "startup"):
        hpc.init(backend="ray", workers=1)
    assert len(tries) == 2  # a node that timed out is started once more before the start gives up
    left = [p for p in me.children(recursive=True) if p.pid not in before and p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], [p.cmdline()[:3] for p in left]
