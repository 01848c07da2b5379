"""Fault behaviour of the embedded pool: crashes, poison tasks, errors, pickling, signals, orphans."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest
from _processes import start_driver, wait_gone
from _waiting import pool_pids, wait_for_file, wait_for_pool
from tasks import nap, whoami

from eugo_lab import hpc
from eugo_lab.backends import local_process


@hpc.remote
def poison():
    os.kill(os.getpid(), signal.SIGKILL)


@hpc.remote
def fails(x):
    if x < 0:
        raise ValueError(f"negative input {x}")
    return x


def _one_slow_worker(monkeypatch: pytest.MonkeyPatch, delay: float) -> None:
    """Make worker 0 of the next pool sleep ``delay`` seconds before it starts; the others start as usual."""
    real_spawn, real_cmd = local_process.spawn_worker, local_process._WORKER_CMD

    def spawn(index: int, store_dir: str, env: dict) -> local_process.Worker:
        if index != 0:
            return real_spawn(index, store_dir, env)
        local_process._WORKER_CMD = f"import time; time.sleep({delay}); {real_cmd}"
        try:
            return real_spawn(index, store_dir, env)
        finally:
            local_process._WORKER_CMD = real_cmd

    monkeypatch.setattr(local_process, "spawn_worker", spawn)


def test_first_task_runs_on_the_first_worker_up_not_on_a_slow_one(monkeypatch):
    # The first .remote() starts the pool without waiting (init(_wait_ready=False)); workers
    # start side by side, and a task goes to one that said hello, not to the slow worker 0.
    delay = 6.0
    _one_slow_worker(monkeypatch, delay)
    t = time.monotonic()
    hpc.init(workers=4, _wait_ready=False)
    slow = pool_pids()[0]
    pids = hpc.get([whoami.remote() for _ in range(3)], timeout=60)
    took = time.monotonic() - t
    assert took < delay / 2, f"the first tasks waited {took:.1f} s for the slow worker"
    assert slow not in pids


def test_init_still_waits_for_every_worker(monkeypatch):
    # hpc.init() returns once all workers are up, so a traced region that follows measures tasks.
    delay = 3.0
    _one_slow_worker(monkeypatch, delay)
    t = time.monotonic()
    hpc.init(workers=4)
    assert time.monotonic() - t >= delay
    assert len(set(hpc.get([whoami.remote(0.3) for _ in range(8)], timeout=60))) == 4


def test_killed_worker_retries_only_its_task(local2):
    with hpc.trace() as t:
        futures = [nap.remote(0.6, i) for i in range(6)]
        time.sleep(0.3)
        victim = pool_pids()[0]
        os.kill(victim, signal.SIGKILL)
        assert hpc.get(futures, timeout=60) == list(range(6))
    df = t.to_dataframe()
    # Only the task the victim was running failed, once; its prefetched task was not charged.
    assert (df["status"] == "crashed").sum() == 1
    assert (df["status"] == "ok").sum() == 6
    assert sorted(df.loc[df["status"] == "ok", "attempt"]).count(2) == 1
    pids = wait_for_pool(2)
    assert victim not in pids
    assert len(set(hpc.get([whoami.remote(0.2) for _ in range(4)]))) == 2  # both workers serve again


@hpc.remote
def started_then_nap(path: str, seconds: float, value: str) -> str:
    with open(path + ".tmp", "w") as fh:  # the pid of the worker running it, written whole
        fh.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(seconds)
    return value


def test_crash_is_recorded_as_a_retried_attempt(local2, tmp_path):
    started = tmp_path / "started"
    with hpc.trace() as t:
        f = started_then_nap.remote(str(started), 1.0, "ok")
        pid = int(wait_for_file(started))  # running, not just sent: a busy machine can take a while
        # Only the worker running it: the retry goes to any worker that is up (the other one, or
        # the replacement, forked in milliseconds), and must not be killed too.
        os.kill(pid, signal.SIGKILL)
        assert hpc.get(f, timeout=60) == "ok"
    df = t.to_dataframe()
    rows = df[df["task_id"] == f.task_id].sort_values("attempt")
    assert list(rows["status"]) == ["crashed", "ok"]
    assert list(rows["attempt"]) == [1, 2]


def test_poison_task_fails_alone_with_workercrashederror(local2):
    good = [nap.remote(0.2, i) for i in range(4)]
    bad = poison.remote()
    with pytest.raises(hpc.WorkerCrashedError) as info:
        hpc.get(bad, timeout=60)
    err = info.value
    assert err.function == "poison" and err.attempts == 4 and err.exit_code == -signal.SIGKILL
    msg = str(err)
    assert "poison()" in msg and "4 attempts" in msg and "SIGKILL" in msg and "Next step" in msg
    assert hpc.get(good) == [0, 1, 2, 3]
    wait_for_pool(2)


def test_retries_option_limits_attempts(local2):
    with pytest.raises(hpc.WorkerCrashedError) as info:
        hpc.get(poison.options(retries=0).remote(), timeout=30)
    assert info.value.attempts == 1 and "1 attempt)" in str(info.value)


def test_task_exception_keeps_its_type_with_remote_traceback(local2):
    f = fails.remote(-1)
    with pytest.raises(ValueError) as info:
        hpc.get(f)
    err = info.value
    assert "fails()" in str(err) and "negative input -1" in str(err)
    assert type(err).__name__ == "ValueError"
    assert isinstance(err.__cause__, hpc.RemoteTraceback)
    assert 'raise ValueError(f"negative input {x}")' in err.__cause__.text
    assert f.exception() is not None and f.status == "error"


def test_dependents_of_a_failed_future_fail_with_it(local2):
    base = fails.remote(-2)
    child = fails.remote(base)
    grandchild = fails.remote(child)
    for f in (child, grandchild):
        with pytest.raises(ValueError, match="negative input -2"):
            hpc.get(f)


def test_retry_exceptions_reruns_the_task(local2, tmp_path):
    counter = tmp_path / "attempts"

    @hpc.remote(retry_exceptions=[ConnectionError], retries=3)
    def flaky():
        n = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(n + 1))
        if n < 2:
            raise ConnectionError("transient")
        return n

    assert hpc.get(flaky.remote()) == 2
    assert counter.read_text() == "3"


def test_other_exceptions_are_not_retried(local2, tmp_path):
    counter = tmp_path / "attempts"

    @hpc.remote(retry_exceptions=[ConnectionError])
    def broken():
        counter.write_text(counter.read_text() + "x" if counter.exists() else "x")
        raise KeyError("no")

    with pytest.raises(KeyError):
        hpc.get(broken.remote())
    assert counter.read_text() == "x"


# -- serialization --------------------------------------------------------------------------------

def test_unpicklable_argument_fails_at_remote_time(local2):
    lock = threading.Lock()
    with pytest.raises(hpc.SerializationError) as info:
        fails.remote(lock)
    msg = str(info.value)
    assert isinstance(info.value, TypeError)
    assert "argument 0 of fails()" in msg and "lock" in msg and "Create them inside the task" in msg
    with pytest.raises(hpc.SerializationError, match="argument 'x' of fails\\(\\).*generator"):
        fails.remote(x=(i for i in range(3)))


def test_unpicklable_captured_variable_is_named(local2):
    sock = socket.socket()
    try:
        @hpc.remote
        def uses_socket():
            return sock.fileno()

        with pytest.raises(hpc.SerializationError, match="uses the variable 'sock'.*socket"):
            uses_socket.remote()
    finally:
        sock.close()


def test_unpicklable_return_value_fails_the_task_not_the_worker(local2):
    @hpc.remote
    def returns_lock():
        import threading

        return os.getpid(), threading.Lock()

    before = pool_pids()
    with pytest.raises(hpc.SerializationError, match="returned by returns_lock\\(\\) could not be pickled"):
        hpc.get(returns_lock.remote())
    assert sorted(pool_pids()) == sorted(before)
    assert hpc.get(fails.remote(1)) == 1


# -- signals and orphans (in a separate driver process, as Jupyter's kernel would be) --------------

DRIVER = textwrap.dedent(
    """
    import os, signal, sys, time
    from eugo_lab import hpc

    # A shell that starts a job in the background (CI runners do) makes it ignore SIGINT,
    # and Python then never raises KeyboardInterrupt: act as a kernel does, which handles it.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    @hpc.remote
    def nap(s):
        time.sleep(s)
        return os.getpid()

    hpc.init(workers=2)
    rt = hpc.api.session.current()
    print("PIDS", *rt.backend.worker_pids(), flush=True)
    mode = sys.argv[1]
    if mode == "idle-sigint":
        try:
            print("READY", flush=True)
            time.sleep(30)
        except KeyboardInterrupt:
            print("KBI", flush=True)
        print("RESULT", hpc.get(nap.remote(0)) in rt.backend.worker_pids(), *rt.backend.worker_pids(), flush=True)
    elif mode == "get-sigint":
        futures = [nap.remote(20) for _ in range(4)]
        time.sleep(0.5)
        print("READY", flush=True)
        t = time.monotonic()
        try:
            hpc.get(futures)
        except KeyboardInterrupt:
            print("KBI", round(time.monotonic() - t, 1), flush=True)
        print("CANCELLED", sum(f.cancelled() for f in futures), flush=True)
        print("RESULT", hpc.get(nap.remote(0), timeout=20) in rt.backend.worker_pids(), flush=True)
    elif mode == "busy":
        futures = [nap.remote(60) for _ in range(4)]
        print("READY", flush=True)
        time.sleep(60)
    elif mode == "exit":
        hpc.get(nap.remote(0))
        print("READY", flush=True)
    """
)


def _start_driver(tmp_path, mode: str) -> tuple[subprocess.Popen, list[int]]:
    return start_driver(tmp_path, DRIVER, mode, 2)  # its 2 workers


@contextlib.contextmanager
def _interrupted_driver(tmp_path, mode: str) -> Iterator[tuple[subprocess.Popen, list[int]]]:
    """The driver in ``mode``; afterwards it is killed and its workers must be gone within 10 s."""
    proc, pids = _start_driver(tmp_path, mode)
    try:
        yield proc, pids
    finally:
        proc.kill()
        proc.wait()
    assert not wait_gone(set(pids), timeout=10)


def test_idle_workers_survive_sigint_to_the_process_group(tmp_path):
    with _interrupted_driver(tmp_path, "idle-sigint") as (proc, pids):
        os.killpg(proc.pid, signal.SIGINT)  # what Jupyter's Interrupt does
        assert proc.stdout.readline().strip() == "KBI"
        result = proc.stdout.readline().split()
        assert result[0] == "RESULT" and result[1] == "True"
        assert sorted(int(p) for p in result[2:]) == sorted(pids)  # the same workers, none replaced


def test_sigint_while_blocked_in_get_cancels_that_calls_tasks(tmp_path):
    with _interrupted_driver(tmp_path, "get-sigint") as (proc, _):
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        kbi = proc.stdout.readline().split()
        assert kbi[0] == "KBI" and float(kbi[1]) < 20 / 4  # the get() did not wait for its 20 s tasks
        assert proc.stdout.readline().split() == ["CANCELLED", "4"]
        assert proc.stdout.readline().split() == ["RESULT", "True"]
        assert proc.wait(timeout=20) == 0


def test_workers_exit_when_the_driver_is_killed_mid_task(tmp_path):
    proc, pids = _start_driver(tmp_path, "busy")
    time.sleep(0.5)
    proc.kill()  # SIGKILL: no atexit, no cleanup code runs in the driver
    proc.wait()
    assert not wait_gone(set(pids), timeout=5), "orphaned workers"
    store = [d for d in os.listdir("/dev/shm") if d.startswith(f"eugo-store-{proc.pid}-")]
    assert store == []


def test_interpreter_exit_without_shutdown_leaves_no_workers(tmp_path):
    proc, pids = _start_driver(tmp_path, "exit")
    assert proc.wait(timeout=20) == 0
    assert not wait_gone(set(pids), timeout=5)


def test_shutdown_stops_every_worker_even_mid_task():
    hpc.init(workers=2)
    pids = pool_pids()
    nap.remote(60)
    nap.remote(60)
    time.sleep(0.3)
    t = time.monotonic()
    hpc.shutdown()
    assert time.monotonic() - t < 5
    assert not wait_gone(set(pids), timeout=5)


SHUTDOWN_RACE = textwrap.dedent(
    """
    from eugo_lab import hpc

    @hpc.remote
    def echo(x):
        return x

    for i in range(20):
        hpc.init(workers=1)
        futures = [echo.remote(k) for k in range(50)]
        hpc.wait(futures, num_returns=1)  # results are on their way back while the pool shuts down
        hpc.shutdown()
    print("DONE", flush=True)
    """
)


def test_shutdown_while_a_result_is_sent_prints_no_worker_traceback(tmp_path):
    script = tmp_path / "race.py"
    script.write_text(SHUTDOWN_RACE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "DONE", out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
