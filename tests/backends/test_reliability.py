"""Reliability of the local pool under memory blow-ups, hung tasks, chaos and load.

Also the worker-side memory watchdog that Dask and Ray workers run (``_worker.run_limited``),
tested here without an engine; ``test_backend_dask``/``test_backend_ray`` test it through them.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
from _clusters import worker_env
from _memory import grow_forever
from _processes import wait_gone
from _waiting import pool_pids, wait_for_file, wait_for_pool
from tasks import spin, whoami

from eugo_lab import hpc
from eugo_lab.backends import _worker, local_process
from eugo_lab.contract.serialization import dumps_args, loads_value

grow = hpc.remote(name="grow")(grow_forever)  # grows without bound until something stops it


@hpc.remote
def hang():
    while True:
        time.sleep(0.1)


@hpc.remote
def echo(x):
    return x


@hpc.remote
def short(x):
    spin(0.01)
    return x * 2


def _rss() -> int:
    return psutil.Process().memory_info().rss


def test_task_over_its_memory_limit_is_stopped_near_the_limit(local2):
    before_pids = set(pool_pids())
    driver_before = _rss()
    limit = 300_000_000
    f = grow.options(memory="300MB").remote()
    with pytest.raises(hpc.WorkerMemoryError) as info:
        hpc.get(f, timeout=60)
    err = info.value
    assert isinstance(err, MemoryError) and isinstance(err, hpc.WorkerCrashedError)
    assert err.limit == limit and limit < err.observed < limit + 250_000_000
    msg = str(err)
    assert "grow()" in msg and "300.00 MB memory limit" in msg and "not retried" in msg and "Next step" in msg
    assert err.attempts == 1
    assert _rss() - driver_before < 50_000_000  # the kernel's own memory barely moved
    after = wait_for_pool(2, other_than=before_pids)
    assert len(after) == 2 and len(after & before_pids) == 1  # a replacement started
    assert hpc.get(echo.remote(5)) == 5


def test_pool_wide_memory_limit_from_init():
    hpc.init(workers=1, memory_limit="250MB")
    with pytest.raises(hpc.WorkerMemoryError, match="250.00 MB memory limit"):
        hpc.get(grow.remote(), timeout=60)
    assert hpc.get(echo.remote("after")) == "after"


def test_bad_memory_values_are_clear_errors():
    with pytest.raises(ValueError, match="memory_limit='lots' is not a size"):
        hpc.init(workers=1, memory_limit="lots")
    with pytest.raises(ValueError, match="memory must be positive"):
        echo.options(memory=0)
    with pytest.raises(ValueError, match="backend 'threads' does not take memory_limit"):
        hpc.init(backend="threads", memory_limit="1GB")


# -- the worker-side memory watchdog (Dask and Ray workers) ------------------------------------------

def _args(*args) -> bytes:
    return dumps_args(args, {}, function="t", token_of=lambda obj: None, oob_threshold=None)[0]


def test_watchdog_stops_a_growing_task_inside_its_thread_and_frees_the_memory():
    before = _rss()
    t = time.monotonic()
    status, payload, verdict, stats = _worker.run_limited(
        _worker.execute, 200_000_000, None, grow_forever, "grow_forever", _args(), None)
    assert time.monotonic() - t < 20
    assert status == _worker.CRASHED and payload == b""
    assert verdict.kind == "memory" and verdict.limit == 200_000_000
    assert 200_000_000 < verdict.used < 200_000_000 + 150_000_000  # the growth, seen within a poll or two
    assert verdict.exit_code is None  # stopped, not killed: this process is still here
    assert stats is not None and stats.body > 0  # the attempt keeps its timing for the trace
    assert _rss() - before < 100_000_000  # its memory went back (gc + malloc_trim)

    # an hpc.map batch stops the item that grows, alone: the items after it run, each within its limit
    ran = []

    def item(x):
        ran.append(x)
        return grow_forever() if x == 2 else x

    status, payload, item_errors, _ = _worker.run_limited(_worker.execute_batch, 150_000_000, None, item, "item",
                                                          _args([1, 2, 3, 4]), None)
    assert status == _worker.OK and ran == [1, 2, 3, 4]
    assert loads_value(payload) == [1, None, 3, 4]
    assert list(item_errors) == [1]
    stopped = item_errors[1][1]
    assert stopped.kind == "memory" and stopped.limit == 150_000_000 and stopped.exit_code is None
    assert _rss() - before < 100_000_000  # the stopped item's memory went back before the next one ran
    # a task within its limit is untouched, and the thread takes no stray exception afterwards
    status, payload, _, _ = _worker.run_limited(_worker.execute, 200_000_000, None, len, "len", _args("abc"), None)
    assert status == _worker.OK
    time.sleep(3 * _worker.MEMORY_POLL_SECONDS)


UNLIMITED = """
import sys, threading
from eugo_lab.backends import _cluster, _worker
from eugo_lab.contract.serialization import dumps_args, dumps_function
args = dumps_args(("abc",), {}, function="len", token_of=lambda o: None, oob_threshold=None)[0]
out = _cluster.run_task(("d", 1), dumps_function(len, function="len"), "len", args, None, False, (), (),
                        _worker.time.thread_time)
print(out[0], _worker._watchdog is None, "psutil" in sys.modules,
      any(t.name == "eugo-memory-watchdog" for t in threading.enumerate()))
"""


def test_a_task_without_a_limit_starts_no_watchdog():
    out = subprocess.run([sys.executable, "-c", UNLIMITED], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["0", "True", "False", "False"], out.stderr


# After the watchdog stopped a task, a profile function (the driver's record of a graded cell, pyinstrument)
# must still let functions run: a withdrawn exception left CPython 3.11 marking one pending for good, and
# every function entry under sys.setprofile then spun on that mark forever.
AFTER_A_STOP = """
import sys
from _memory import grow_forever
from eugo_lab.backends import _worker
from eugo_lab.contract.serialization import dumps_args
args = dumps_args((), {}, function="g", token_of=lambda o: None, oob_threshold=None)[0]
status = _worker.run_limited(_worker.execute, 150_000_000, None, grow_forever, "g", args, None)[0]
def called():
    return "ran"
sys.setprofile(lambda frame, event, arg: None)
print(status == _worker.CRASHED, called(), flush=True)
"""


def test_a_profile_function_still_runs_functions_after_the_watchdog_stopped_a_task():
    out = subprocess.run([sys.executable, "-c", AFTER_A_STOP], capture_output=True, text=True, timeout=120,
                         env=worker_env())
    assert out.stdout.split() == ["True", "ran"], out.stderr[-2000:]


STUBBORN = """
import sys, time
from _memory import grow_ignoring_stops
from eugo_lab.backends import _worker
from eugo_lab.contract.serialization import dumps_args, loads_value
args = dumps_args((), {}, function="g", token_of=lambda o: None, oob_threshold=None)[0]
t = time.monotonic()
def tell_driver(verdict):
    print("VERDICT", verdict["kind"], verdict["limit"], verdict["used"] > verdict["limit"], verdict["exit_code"],
          round(time.monotonic() - t, 1), flush=True)
_worker.run_limited(_worker.execute, 100_000_000, tell_driver, grow_ignoring_stops, "g", args, None)
print("SURVIVED", flush=True)
"""


def test_watchdog_kills_the_worker_of_a_task_that_ignores_the_stop_after_telling_the_engine():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(__file__)), *sys.path]))
    t = time.monotonic()
    out = subprocess.run([sys.executable, "-c", STUBBORN], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == -signal.SIGKILL, out.stderr
    line = out.stdout.split()
    assert line[:5] == ["VERDICT", "memory", "100000000", "True", "-9"], out.stdout
    assert float(line[5]) >= _worker.MEMORY_GRACE_SECONDS  # it had its grace to stop first
    assert "SURVIVED" not in out.stdout
    assert time.monotonic() - t < 30


def test_hung_task_times_out_then_cancel_stops_it_without_retry(local2, tmp_path):
    f = hang.remote()
    timeout = 2.0
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        hpc.get(f, timeout=timeout)
    # It waited its timeout, then stopped waiting (the task never ends): the upper bound leaves a
    # loaded machine two more timeouts of slack and still fails a get() that kept waiting.
    assert 0.95 * timeout < time.monotonic() - t < 3 * timeout
    assert hpc.cancel(f) == 1
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(f)
    with hpc.trace() as tr:
        assert hpc.get([echo.remote(i) for i in range(4)]) == [0, 1, 2, 3]
    df = tr.to_dataframe()
    rows = df[df["task_id"] == f.task_id]
    assert list(rows["status"]) in ([], ["cancelled"])  # at most the cancellation itself: never run again
    assert len(pool_pids()) == 2  # the pool is whole (the task stopped inside its worker)


def test_cancelling_a_future_cancels_its_dependents(local2):
    upstream = hang.remote()
    middle = echo.remote(upstream)
    downstream = echo.remote([middle, 1])
    hpc.cancel(upstream)
    for f in (middle, downstream):
        with pytest.raises(hpc.TaskCancelledError):
            hpc.get(f, timeout=10)
        assert f.cancelled()


# -- the cancel grace period ---------------------------------------------------------------------------

def _log(path: str, line: str) -> None:
    with open(path, "a") as fh:
        fh.write(line + "\n")


@hpc.remote
def ignores_cancel(path):
    _log(path, f"start {os.getpid()}")
    while True:
        try:
            time.sleep(30)
        except BaseException as exc:  # noqa: BLE001 - swallows TaskCancelled, and keeps going
            _log(path, f"caught {type(exc).__name__}")


@hpc.remote
def cleans_up_on_cancel(path, seconds):
    _log(path, f"start {os.getpid()}")
    try:
        time.sleep(30)
    except BaseException:
        time.sleep(seconds)  # clean-up that takes a while (closing files, a checkpoint...)
        _log(path, "cleaned")
        raise


def test_cancel_grace_is_validated():
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="cancel_grace must be a finite number of seconds >= 0"):
            hpc.init(workers=1, cancel_grace=bad)
    for bad in ("5s", True):
        with pytest.raises(TypeError, match="cancel_grace must be a number of seconds"):
            hpc.init(workers=1, cancel_grace=bad)
    with pytest.raises(ValueError, match="backend 'threads' does not take cancel_grace"):
        hpc.init(backend="threads", cancel_grace=1)
    assert not hpc.is_initialized()
    from eugo_lab.backends.ray import RayBackend

    with pytest.raises(ValueError, match="cancel_grace"):
        RayBackend(cancel_grace=-0.5)


def test_task_that_ignores_cancel_is_killed_after_the_grace_and_not_retried(tmp_path):
    hpc.init(workers=2, cancel_grace=2.0)
    log = tmp_path / "log"
    f = ignores_cancel.remote(str(log))
    pid = int(wait_for_file(log, "start").split()[1])
    t0 = time.monotonic()
    assert hpc.cancel(f) == 1
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(f, timeout=1)  # the future is cancelled at once, whatever the task does
    wait_for_file(log, "caught TaskCancelled", timeout=5)
    assert psutil.pid_exists(pid)  # it swallowed the stop, and its grace is not over yet
    assert not wait_gone({pid}, timeout=15), "the worker outlived the grace period"
    assert time.monotonic() - t0 >= 1.9  # killed after the 2 s grace, not before
    after = wait_for_pool(2)
    assert len(after) == 2 and pid not in after  # a replacement started
    assert hpc.get([echo.remote(i) for i in range(4)], timeout=30) == [0, 1, 2, 3]
    assert log.read_text().count("start") == 1  # never run again


def test_task_that_stops_within_the_grace_keeps_its_worker(tmp_path):
    grace = 4.0
    hpc.init(workers=2, cancel_grace=grace)
    log = tmp_path / "log"
    f = cleans_up_on_cancel.remote(str(log), 1.5)  # longer than the default 1 s grace
    pid = int(wait_for_file(log, "start").split()[1])
    before = sorted(pool_pids())
    t0 = time.monotonic()
    hpc.cancel(f)
    wait_for_file(log, "cleaned", timeout=10)
    time.sleep(max(0.0, t0 + grace + 0.5 - time.monotonic()))  # past the deadline it no longer had
    assert psutil.pid_exists(pid) and sorted(pool_pids()) == before  # no worker was killed or replaced
    assert pid in hpc.get([whoami.remote(0.05) for _ in range(6)], timeout=30)
    assert log.read_text().count("start") == 1


def test_workers_that_never_start_fail_tasks_with_noworkerserror(monkeypatch):
    monkeypatch.setattr(local_process, "_WORKER_CMD", "import sys; sys.exit(3)")
    hpc.init(workers=1)
    t = time.monotonic()
    with pytest.raises(hpc.NoWorkersError, match="exit code 3 before they could start"):
        hpc.get(echo.remote(1), timeout=30)
    assert time.monotonic() - t < 10
    with pytest.raises(hpc.NoWorkersError, match="call hpc.init"):
        hpc.get(echo.remote(2), timeout=5)  # later tasks fail at once too


def test_local_pool_listens_on_no_network_port(local2):
    hpc.get(echo.remote(1))
    for pid in pool_pids():
        assert psutil.Process(pid).net_connections(kind="inet") == []


def test_chaos_soak_random_worker_kills_lose_nothing(local2):
    n = 2000
    expected = [2 * i for i in range(n)]
    t = time.monotonic()
    assert hpc.get([short.remote(i) for i in range(n)]) == expected
    clean = time.monotonic() - t

    threads_before = threading.active_count()
    rng = random.Random(20261129)
    stop = threading.Event()
    kills = []

    def killer():
        while not stop.wait(rng.uniform(1.5, 2.5)):
            pids = pool_pids()
            if pids:
                victim = rng.choice(pids)
                try:
                    os.kill(victim, signal.SIGKILL)
                    kills.append(victim)
                except ProcessLookupError:
                    pass

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    t = time.monotonic()
    try:
        with hpc.trace() as tr:
            results = hpc.get([short.remote(i) for i in range(n)], timeout=120)
    finally:
        stop.set()
        th.join()
    chaotic = time.monotonic() - t
    assert results == expected
    assert kills, "the killer never fired: the soak proved nothing"
    assert chaotic <= 3 * clean + 2.0, (chaotic, clean)
    df = tr.to_dataframe()
    assert (df["status"] == "crashed").sum() >= 1  # kills hit running tasks, which were retried
    for victim in kills:
        assert not psutil.pid_exists(victim) or psutil.Process(victim).status() == psutil.STATUS_ZOMBIE
    assert threading.active_count() <= threads_before


LOAD_DRIVER = textwrap.dedent(
    """
    import os, signal, time, psutil
    from eugo_lab import hpc

    signal.signal(signal.SIGINT, signal.default_int_handler)  # see test_local_faults.DRIVER

    @hpc.remote
    def tiny(x):
        return x

    hpc.init(workers=2)
    hpc.get(tiny.remote(0))
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    t = time.monotonic()
    futures = [tiny.remote(i) for i in range(100_000)]
    submit_s = time.monotonic() - t
    rss1 = proc.memory_info().rss
    t = time.monotonic()
    # Announce from a timer, so that the Interrupt the test then sends lands inside get().
    import threading
    threading.Timer(0.3, lambda: print("SUBMITTED", round(submit_s, 2), rss1 - rss0, flush=True)).start()
    try:
        hpc.get(futures)
        print("FINISHED", flush=True)
    except KeyboardInterrupt:
        print("KBI", round(time.monotonic() - t, 2), flush=True)
    done = sum(f.done() for f in futures)
    print("DONE", done, sum(f.cancelled() for f in futures), flush=True)
    print("NEXT", hpc.get(tiny.remote(7), timeout=30), flush=True)
    """
)


def test_100k_tasks_submit_fast_stay_bounded_and_one_interrupt_stops_them(tmp_path):
    script = tmp_path / "load.py"
    script.write_text(LOAD_DRIVER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=tmp_path)
    try:
        line = proc.stdout.readline().split()
        assert line[0] == "SUBMITTED", line
        submit_s, growth = float(line[1]), int(line[2])
        assert growth < 400_000_000, f"100k pending tasks grew the driver by {growth / 1e6:.0f} MB"
        assert submit_s < 60
        os.killpg(proc.pid, signal.SIGINT)  # one Interrupt
        line = proc.stdout.readline().split()
        assert line[0] in ("KBI", "FINISHED"), line
        done = proc.stdout.readline().split()
        assert done[0] == "DONE" and int(done[1]) == 100_000  # every future settled: finished or cancelled
        if line[0] == "KBI":
            assert int(done[2]) > 0
        assert proc.stdout.readline().split() == ["NEXT", "7"]
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    print(f"100k submit: {submit_s:.2f} s, driver growth {growth / 1e6:.0f} MB")
