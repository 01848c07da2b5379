"""The local pool's worker template (``local_zygote``): workers forked from it, their exit codes, its death.

What must hold whichever way a worker was started (crash reporting, dying with the driver,
surviving an Interrupt) is covered for both here: with the template, and after falling back
to spawning fresh interpreters.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from _processes import children, start_driver, wait_gone
from _waiting import pool_pids, wait_for_pool
from tasks import whoami

from eugo_lab import hpc
from eugo_lab.backends import local, local_spawn
from eugo_lab.hpc import session


@hpc.remote
def exits_with(code):
    if code < 0:
        os.kill(os.getpid(), -code)
        time.sleep(5)
    os._exit(code)


@hpc.remote
def env_of(delay, *names):
    time.sleep(delay)
    return os.getpid(), [os.environ.get(n) for n in names], os.getcwd()


def _backend() -> local.LocalBackend:
    return session.current().backend


def _parent(pid: int) -> int:
    return psutil.Process(pid).ppid()


def _wait_template(other_than: int | None, timeout: float = 10.0) -> int:
    """The pid of the pool's live template once it is not ``other_than``."""
    deadline = time.monotonic() + timeout
    while True:
        pid = _backend().template_pid()
        if pid is not None and pid != other_than:
            return pid
        if time.monotonic() > deadline:
            raise AssertionError(f"no new template within {timeout} s (still {pid})")
        time.sleep(0.02)


def _wait_greeted(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(w.pid == pid and w.greeted and not w.dead for w in list(_backend()._workers)):
        if time.monotonic() > deadline:
            raise AssertionError(f"worker {pid} never said hello")
        time.sleep(0.01)


def test_workers_and_their_replacements_are_forked_from_the_template(local2):
    template = _backend().template_pid()
    assert template is not None
    pids = wait_for_pool(2)
    assert {_parent(p) for p in pids} == {template}
    victim = sorted(pids)[0]
    os.kill(victim, signal.SIGKILL)
    new = wait_for_pool(2, other_than=pids)
    assert victim not in new
    assert {_parent(p) for p in new} == {template}
    assert set(hpc.get([whoami.remote(0.05) for _ in range(6)], timeout=30)) <= new


@pytest.mark.parametrize(("code", "described"), [(-signal.SIGKILL, "signal 9 (SIGKILL)"),
                                                 (-signal.SIGSEGV, "signal 11 (SIGSEGV)"),
                                                 (7, "exit code 7")])
def test_a_forked_workers_exit_code_reaches_workercrashederror(local2, code, described):
    # The template, the worker's parent, reads the status and reports it to the driver.
    with pytest.raises(hpc.WorkerCrashedError, match=re.escape(f"died with {described}")):
        hpc.get(exits_with.options(retries=0).remote(code), timeout=30)
    assert hpc.get(whoami.remote(0), timeout=30) in wait_for_pool(2)


def test_a_killed_template_is_replaced_then_the_pool_falls_back_to_spawning(local2):
    first = _backend().template_pid()
    pids = wait_for_pool(2)
    templates = [first]
    for _ in range(local_spawn.MAX_TEMPLATE_STARTS):
        os.kill(templates[-1], signal.SIGKILL)
        assert not wait_gone({templates[-1]}, timeout=5)
        # The workers it forked keep serving (they do not die with it)...
        assert set(hpc.get([whoami.remote(0.05) for _ in range(4)], timeout=30)) <= pids | set(pool_pids())
        # ...and a crash still costs only its task; the exit status of a worker whose template is
        # gone cannot be read, so it is reported as unknown, not lost.
        with pytest.raises(hpc.WorkerCrashedError, match="signal 9|unknown exit status"):
            hpc.get(exits_with.options(retries=0).remote(-signal.SIGKILL), timeout=30)
        pids = wait_for_pool(2, other_than=pids)
        if len(templates) < local_spawn.MAX_TEMPLATE_STARTS:
            templates.append(_wait_template(other_than=templates[-1]))
    # Past MAX_TEMPLATE_STARTS templates, replacements are fresh interpreters, children of the driver.
    assert _backend().template_pid() is None
    victim = sorted(pids)[0]
    os.kill(victim, signal.SIGKILL)
    new = wait_for_pool(2, other_than=pids)
    spawned = new - pids
    assert spawned and {_parent(p) for p in spawned} == {os.getpid()}
    assert set(hpc.get([whoami.remote(0.05) for _ in range(6)], timeout=30)) <= new


def test_forked_workers_get_the_pools_environment_and_directory(tmp_path, monkeypatch):
    # env= and the thread limits differ from what the template hpc.init() pre-started has: the
    # forked workers get them, as they get a change to os.environ made while the pool runs; a
    # change to a variable read at process start (PYTHON*) is honoured by spawning instead.
    monkeypatch.chdir(tmp_path)
    hpc.init(workers=2, env={"EUGO_TEST_VAR": "x"}, threads_per_worker=3)
    template = _backend().template_pid()
    pid, values, cwd = hpc.get(env_of.remote(0, "EUGO_TEST_VAR", "OMP_NUM_THREADS"), timeout=30)
    assert values == ["x", "3"] and cwd == str(tmp_path)
    assert _parent(pid) == template
    for var, parent in (("EUGO_TEST_LATER", template), ("PYTHONWARNINGS", os.getpid())):
        monkeypatch.setenv(var, "default")
        pids = wait_for_pool(2)
        victim = min(pids)
        os.kill(victim, signal.SIGKILL)
        new = wait_for_pool(2, other_than=pids)
        (replacement,) = new - pids
        assert _parent(replacement) == parent, var
        _wait_greeted(replacement)  # else the other worker may run every task below
        answers = {p: (v, c) for p, v, c in hpc.get([env_of.remote(0.3, var) for _ in range(6)], timeout=30)}
        assert answers[replacement] == (["default"], str(tmp_path)), var



@hpc.remote
def open_fds() -> dict[int, str]:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the descriptor listdir itself held
            pass
    return out


def test_the_drivers_inheritable_descriptors_stay_out_of_template_and_workers(tmp_path):
    # The template is started with posix_spawn, which passes every inheritable descriptor on
    # (a kernel's sockets, a file a library opened): it must close them, as close_fds would,
    # or the workers it forks would hold the driver's files open.
    with open(tmp_path / "driver-only.txt", "w") as f:
        fd = f.fileno()
        os.set_inheritable(fd, True)
        hpc.init(workers=2)
        try:
            template = _backend().template_pid()
            held = set(os.listdir(f"/proc/{template}/fd"))
            worker_fds = [fds for _ in range(2) for fds in [hpc.get(open_fds.remote(), timeout=30)]]
        finally:
            hpc.shutdown()
    assert str(fd) not in held, held
    for fds in worker_fds:
        assert not any("driver-only.txt" in target for target in fds.values()), fds

def test_the_template_starts_with_no_signal_blocked_whatever_the_driver_blocks():
    # The template reaps its workers on SIGCHLD and leaves on SIGTERM: a mask inherited from the
    # thread that called hpc.init() would silence both.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, signal.SIGTERM})
    try:
        hpc.init(workers=2)
        try:
            template = _backend().template_pid()
            status = open(f"/proc/{template}/status").read()
            blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.M).group(1), 16)
            assert blocked == 0, f"SigBlk {blocked:#x}"
            assert hpc.get(whoami.remote(), timeout=30)
        finally:
            hpc.shutdown()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")  # the I/O thread's shutdown
@pytest.mark.parametrize("how", ["no posix_spawn session", "SIGCHLD ignored"])
def test_the_template_starts_and_stops_where_posix_spawn_cannot_start_a_session_or_children_are_auto_reaped(
        monkeypatch, how):
    # A libc without POSIX_SPAWN_SETSID raises NotImplementedError: the template is started with
    # subprocess instead. A driver that ignores SIGCHLD has its children reaped by the kernel: the
    # template's exit is then unreadable (ECHILD) and must not break shutdown.
    from eugo_lab.backends import local_template

    before = children()
    if how == "no posix_spawn session":
        def no_setsid(*args, **kwargs):
            raise NotImplementedError("setsid is not supported on this platform")

        monkeypatch.setattr(local_template.os, "posix_spawn", no_setsid)
    else:
        old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        hpc.init(workers=2)
        template = _backend().template_pid()
        assert template is not None
        pid = hpc.get(whoami.remote(), timeout=30)
        assert _parent(pid) == template
        hpc.shutdown()
    finally:
        if how == "SIGCHLD ignored":
            signal.signal(signal.SIGCHLD, old)
    assert not wait_gone(children() - before, timeout=10)


def test_a_failed_init_leaves_no_template_behind():
    before = children()
    with pytest.raises(ValueError, match="workers must be"):
        hpc.init(workers=0)
    assert not wait_gone(children() - before, timeout=5)


def test_without_the_template_workers_are_spawned(monkeypatch):
    monkeypatch.setattr(local_spawn, "USE_TEMPLATE", False)
    hpc.init(workers=2)
    assert _backend().template_pid() is None
    assert {_parent(p) for p in wait_for_pool(2)} == {os.getpid()}
    with pytest.raises(hpc.WorkerCrashedError, match="died with signal 9"):
        hpc.get(exits_with.options(retries=0).remote(-signal.SIGKILL), timeout=30)


# -- a driver of its own, killed or interrupted -------------------------------------------------

DRIVER = textwrap.dedent(
    """
    import os, signal, sys, time
    from eugo_lab import hpc
    from eugo_lab.hpc import session

    signal.signal(signal.SIGINT, signal.default_int_handler)  # see test_local_faults.DRIVER

    @hpc.remote
    def hold_gil():
        sum(range(10 ** 12))  # C code that never lets go of the GIL: the lifeline thread cannot run

    hpc.init(workers=2)
    be = session.current().backend
    print("PIDS", be.template_pid(), *be.worker_pids(), flush=True)
    if sys.argv[1] == "gil":
        futures = [hold_gil.remote() for _ in range(2)]
        time.sleep(1.0)
        print("READY", flush=True)
        time.sleep(60)
    else:
        try:
            print("READY", flush=True)
            time.sleep(30)
        except KeyboardInterrupt:
            print("KBI", flush=True)
        print("RESULT", be.template_pid(), *sorted(be.worker_pids()), flush=True)
        time.sleep(30)
    """
)


def _driver(tmp_path, mode: str) -> tuple[subprocess.Popen, list[int]]:
    return start_driver(tmp_path, DRIVER, mode, 3)  # the template, then 2 workers


def test_template_and_workers_survive_an_interrupt_then_go_with_the_killed_driver(tmp_path):
    proc, pids = _driver(tmp_path, "idle")
    try:
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.stdout.readline().strip() == "KBI"
        result = proc.stdout.readline().split()
        assert result[0] == "RESULT" and [int(p) for p in result[1:]] == [pids[0], *sorted(pids[1:])]
    finally:
        proc.kill()
        proc.wait()
    assert not wait_gone(set(pids), timeout=5), "orphaned template or workers"
    assert [d for d in os.listdir("/dev/shm") if d.startswith(f"eugo-store-{proc.pid}-")] == []


def test_workers_holding_the_gil_go_with_the_killed_driver(tmp_path):
    # Their lifeline thread cannot run; the template sees the driver go and kills them.
    proc, pids = _driver(tmp_path, "gil")
    proc.kill()
    proc.wait()
    assert not wait_gone(set(pids), timeout=5), "orphaned template or workers"
    assert [d for d in os.listdir("/dev/shm") if d.startswith(f"eugo-store-{proc.pid}-")] == []


LOOKUP_DRIVER = textwrap.dedent(
    """
    import sys, time
    import psutil
    from eugo_lab import hpc
    from eugo_lab.backends import local_template
    me = psutil.Process()
    get = hpc.get  # as hpc.get(f.remote(x)) does before .remote() runs
    booted = local_template._prestarted
    print("BOOTED", booted is not None and len(me.children()) == 1, flush=True)
    if sys.argv[1] == "adopt":
        print("RESULT", get(hpc.remote(abs).remote(-3)), flush=True)
        print("ADOPTED", hpc.cluster() and local_template._prestarted is None, flush=True)
    else:
        hpc.init(backend="threads")
        deadline = time.monotonic() + 10
        while me.children() and time.monotonic() < deadline:
            time.sleep(0.05)
        print("LEFT", len(me.children()), flush=True)
    hpc.shutdown()
    """
)


@pytest.mark.parametrize("then", ["adopt", "other engine"])
def test_looking_up_hpc_get_boots_the_template_the_first_remote_adopts_and_another_engine_closes(then):
    out = subprocess.run([sys.executable, "-c", LOOKUP_DRIVER, "adopt" if then == "adopt" else "threads"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "EUGO_ADDRESS": ""})
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["BOOTED"] == "True"
    if then == "adopt":
        assert lines["RESULT"] == "3" and lines["ADOPTED"] == "True"
    else:
        assert lines["LEFT"] == "0"  # the template no pool took is closed, not left behind
