"""Worker processes of the local pool: how one is started and what the pool tracks about it."""

from __future__ import annotations

import collections
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from eugo_lab.hpc.task import Task

if TYPE_CHECKING:  # the driver imports psutil only when a memory limit is watched
    import psutil

_WORKER_CMD = "from eugo_lab.backends.local_worker import main; main()"
# What workers run when nobody replaced _WORKER_CMD (tests do, to slow or break a worker):
# only this command is what the template's pre-imported code would run, so only it is forked.
DEFAULT_WORKER_CMD = _WORKER_CMD
_TEMPLATE_CMD = "from eugo_lab.backends.local_zygote import main; main()"
_STARTUP_PREFIXES = ("PYTHON", "LD_", "MALLOC_", "GLIBC_")
# The wire format of local_zygote (see its docstring).
_MSG = struct.Struct("<1sii")
# How long a fork request may wait for its answer: the template's first answer waits for it to
# boot (~20 ms of CPU, far more on a loaded machine); one stuck longer is replaced by spawning.
TEMPLATE_ANSWER_SECONDS = 20.0
# EUGO_LOCAL_TEMPLATE=0 spawns every worker afresh (diagnosis, and timing one way against the other).
USE_TEMPLATE = os.environ.get("EUGO_LOCAL_TEMPLATE", "1") != "0"
# How long a dead forked worker's exit status may take to arrive after its result pipe closed.
EXIT_REPORT_SECONDS = 5.0
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS")


def usable_cores() -> int:
    """CPU cores this process may run on (respects affinity and cgroup pinning)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class Worker:
    """The pool's view of one worker process: its pipes, buffers and the tasks it holds."""

    __slots__ = ("index", "proc", "forked", "task_w", "result_r", "lifeline_w", "cancel_w", "outbuf", "inbuf",
                 "inflight", "known_fns", "pid", "host", "started", "dead", "kill_reason", "ps", "greeted",
                 "cancel_target", "cancel_deadline")

    def __init__(self, index: int):
        self.index = index
        # Started process: a subprocess.Popen, or a Forked (by the template); both answer pid,
        # wait(timeout) (exit code; subprocess.TimeoutExpired) and kill().
        self.proc: subprocess.Popen | Forked | None = None
        self.forked = False
        self.task_w = self.result_r = self.lifeline_w = self.cancel_w = -1
        self.outbuf = bytearray()
        self.inbuf = bytearray()
        self.inflight: collections.deque[Task] = collections.deque()
        self.known_fns: set[int] = set()
        self.pid = 0
        self.host = ""
        self.started = time.time()
        self.dead = False
        self.kill_reason: Any = None  # "cancel", or an outcome.Crash for a memory-limit kill
        self.ps: psutil.Process | None = None
        self.greeted = False  # the worker said hello: it started properly
        self.cancel_target: Task | None = None  # a running task asked to stop
        self.cancel_deadline = 0.0  # when the worker is killed if that task is still running

    def close_pipes(self) -> None:
        """Close this worker's pipe ends once; they read -1 afterwards.

        Closing a descriptor twice is not harmless: by the second close its number may name
        a file some other code opened since, which that close would take away from it.
        """
        for name in ("result_r", "task_w", "lifeline_w", "cancel_w"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                try:
                    os.close(fd)
                except OSError:
                    pass


def worker_env(threads_per_worker: int, extra_env: dict[str, str]) -> dict[str, str]:
    """The environment a worker starts with: the driver's, its sys.path, and thread limits."""
    env = dict(os.environ)
    # Workers must import what the driver imports: give them the driver's sys.path.
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Two processes each running a BLAS with one thread per core oversubscribe the
    # machine (we measured small BLAS calls 3-11x slower): split the cores instead,
    # unless the user chose a value.
    for var in _THREAD_VARS:
        env.setdefault(var, str(threads_per_worker))
    env.update(extra_env)
    return env


def spawn_worker(index: int, store_dir: str, env: dict[str, str]) -> Worker:
    """Start worker process ``index`` with its three pipes; the caller registers ``result_r``."""
    w = Worker(index)
    task_r, result_w, life_r, cancel_r = _new_pipes(w)
    try:
        w.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_CMD, str(task_r), str(result_w), str(life_r),
             str(os.getpid()), store_dir, str(cancel_r)],
            pass_fds=(task_r, result_w, life_r, cancel_r),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=os.getcwd(),
        )
    finally:
        os.close(task_r)
        os.close(result_w)
        os.close(life_r)
        os.close(cancel_r)
    w.pid = w.proc.pid
    return _ready(w)


class Template:
    """The driver's side of the template process (``local_zygote``) that forks workers.

    Only one thread at a time uses it: the thread that pre-starts it, then the pool's I/O thread.
    Its environment is fixed when it starts: ``fits`` says whether a worker may fork from it.
    """

    def __init__(self, env: dict[str, str]):
        self.env = env
        self._base = _startup_env(env)
        self.exits: dict[int, int] = {}  # exit codes reported and not yet asked for
        self.forked: set[int] = set()  # pids forked whose exit was not reported yet
        self.alive = True
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _TEMPLATE_CMD, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=os.getcwd(),
            )
        except BaseException:
            self.sock.close()
            raise
        finally:
            theirs.close()
        self.sock.setblocking(False)

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a worker that should start with ``env`` may be forked from this template."""
        return self.alive and _startup_env(env) == self._base

    @property
    def pid(self) -> int:
        """The template's process id."""
        return self.proc.pid

    def fileno(self) -> int:
        """The socket the I/O thread watches (exit reports, and EOF when the template dies)."""
        return self.sock.fileno()

    def request(self, index: int, fds: tuple[int, int, int, int], store_dir: str, env: dict[str, str]) -> bool:
        """Ask for worker ``index`` on these pipe ends; False if the template is gone."""
        if not self.alive:
            return False
        msg = pickle.dumps((index, store_dir, env, os.getcwd()))
        try:
            self.sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("<4i", *fds))])
            return True
        except OSError:  # the template died (EPIPE), or its socket is full of unread requests
            self._died()
            return False

    def answer(self, timeout: float = TEMPLATE_ANSWER_SECONDS) -> int | None:
        """The pid of the next worker forked, in request order; None if the template failed or died."""
        deadline = time.monotonic() + timeout
        while self.alive:
            msg = self._recv(deadline - time.monotonic())
            if msg is None:
                if self.alive:  # no answer in time: a template that hangs is no template
                    self.kill()
                return None
            kind, a, b = msg
            if kind == b"F":
                if b > 0:
                    self.forked.add(b)
                    return b
                return None  # fork failed in the template
        return None

    def poll(self) -> None:
        """Take every report that arrived (the I/O thread calls this when the socket is readable)."""
        while self.alive and self._recv(0) is not None:
            pass

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        """The exit code of forked worker ``pid``; None if the template died before reporting it.

        ``timeout`` None: give up (None) after EXIT_REPORT_SECONDS rather than raise.
        """
        deadline = time.monotonic() + (EXIT_REPORT_SECONDS if timeout is None else timeout)
        while pid not in self.exits:
            if not self.alive or pid not in self.forked:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                if timeout is None:
                    return None
                raise subprocess.TimeoutExpired(f"worker {pid}", timeout)
            self._recv(left)
        return self.exits.pop(pid)

    def _recv(self, timeout: float) -> tuple[bytes, int, int] | None:
        """One message (exit reports are filed in ``exits``), or None after ``timeout`` or at EOF."""
        try:
            data = self.sock.recv(_MSG.size)
        except BlockingIOError:
            if timeout <= 0 or not select.select([self.sock], [], [], timeout)[0]:
                return None
            try:
                data = self.sock.recv(_MSG.size)
            except BlockingIOError:  # pragma: no cover - readable, then not
                return None
            except OSError:
                data = b""
        except OSError:
            data = b""
        if len(data) != _MSG.size:
            self._died()
            return None
        kind, a, b = _MSG.unpack(data)
        if kind == b"X":
            self.forked.discard(a)
            self.exits[a] = b
        return kind, a, b

    def _died(self) -> None:
        # Its workers live on (re-parented), but their exit statuses can no longer be read.
        self.alive = False

    def kill(self) -> None:
        """Stop the template now (its workers keep running)."""
        self._died()
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self, timeout: float = 3.0) -> None:
        """Close the socket (the template's lifeline) and wait for the template to exit."""
        self._died()
        self.sock.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Forked:
    """A worker process forked by the template: what ``Worker.proc`` offers, by way of the template."""

    __slots__ = ("pid", "template")

    def __init__(self, template: Template, pid: int):
        self.pid = pid
        self.template = template

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code the template reported (None if it died first); subprocess.TimeoutExpired."""
        return self.template.wait_exit(self.pid, timeout)

    def kill(self) -> None:
        """SIGKILL the worker, unless it was already reported dead (its pid may name another process now)."""
        if self.pid in self.template.forked or not self.template.alive:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _new_pipes(w: Worker) -> tuple[int, int, int, int]:
    """Open ``w``'s four pipes; return the worker's ends (task_r, result_w, life_r, cancel_r)."""
    task_r, w.task_w = os.pipe()
    w.result_r, result_w = os.pipe()
    life_r, w.lifeline_w = os.pipe()
    cancel_r, w.cancel_w = os.pipe()
    return task_r, result_w, life_r, cancel_r


def _ready(w: Worker) -> Worker:
    os.set_blocking(w.task_w, False)
    os.set_blocking(w.cancel_w, False)
    os.set_blocking(w.result_r, False)
    return w


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    # The variables read only when a process starts (the interpreter's, the dynamic linker's,
    # glibc malloc's): a forked worker keeps the template's, so they must be what it should get.
    # The rest is set in the forked worker; tools do change os.environ while a pool runs.
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_PREFIXES)}


def fork_workers(template: Template, indices: list[int], store_dir: str, env: dict[str, str]) -> list[Worker | None]:
    """Have the template fork a worker per index (all asked first, then all answered); None: not forked.

    Asking for every worker before reading any answer lets the template boot and fork them
    while the driver goes on; a None is for the caller to spawn instead.
    """
    asked: list[Worker | None] = []
    for index in indices:
        w = Worker(index)
        theirs = _new_pipes(w)
        try:
            ok = template.request(index, theirs, store_dir, env)
        finally:
            for fd in theirs:  # the template holds its own copies now (SCM_RIGHTS duplicates them)
                os.close(fd)
        if not ok:
            w.close_pipes()
        asked.append(w if ok else None)
    out: list[Worker | None] = []
    for w in asked:
        pid = template.answer() if w is not None else None
        if w is None or pid is None:
            if w is not None:
                w.close_pipes()
            out.append(None)
            continue
        w.proc, w.pid, w.forked = Forked(template, pid), pid, True
        out.append(_ready(w))
    return out


# A template started by hpc.init() before it imports the rest of the runtime (prestart_template),
# for the pool that init() then starts to adopt (take_prestarted).
_prestarted: Template | None = None


def prestart_template() -> None:
    """Start the worker template now, so its boot (~20 ms of CPU) overlaps the driver's imports.

    Only on the main thread: the template dies with the thread that started it (PR_SET_PDEATHSIG
    follows the thread), and the main thread lives as long as the driver.
    """
    global _prestarted
    if _prestarted is not None or not USE_TEMPLATE:
        return
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    try:
        _prestarted = Template(worker_env(1, {}))
    except OSError:
        pass


def take_prestarted() -> Template | None:
    """The pre-started template, now the caller's (to close), or None."""
    global _prestarted
    t, _prestarted = _prestarted, None
    return t


def discard_prestarted() -> None:
    """Close the pre-started template if no pool took it (its hpc.init() failed)."""
    t = take_prestarted()
    if t is not None:
        t.close()
