"""Worker processes of the local pool: how one is started and what the pool tracks about it."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from eugo_lab.hpc.task import Task

if TYPE_CHECKING:  # the driver imports psutil only when a memory limit is watched
    import psutil

_WORKER_CMD = "from eugo_lab.backends.local_worker import main; main()"
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

    __slots__ = ("index", "proc", "task_w", "result_r", "lifeline_w", "cancel_w", "outbuf", "inbuf", "inflight",
                 "known_fns", "pid", "host", "started", "dead", "kill_reason", "ps", "greeted", "cancel_target",
                 "cancel_deadline")

    def __init__(self, index: int):
        self.index = index
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


def worker_env(threads_per_worker: int, extra_env: dict[str, str], explicit: bool = False) -> dict[str, str]:
    """The environment a worker starts with: the driver's, its sys.path, and thread limits.

    ``explicit``: the user passed ``threads_per_worker`` themselves (it then wins over the
    thread variables of the driver's environment).
    """
    from eugo_lab.accel import thread_guard

    env = dict(os.environ)
    # Workers must import what the driver imports: give them the driver's sys.path.
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Two processes each running a BLAS with one thread per core oversubscribe the
    # machine (we measured small BLAS calls 3-11x slower): split the cores instead,
    # unless the user chose a value (a thread variable set here, or threads_per_worker=).
    user = thread_guard.user_thread_vars()
    if user and not explicit:
        env[thread_guard.USER_ENV] = ",".join(user)
    else:
        env.update({v: str(threads_per_worker) for v in _THREAD_VARS})
        env[thread_guard.LIMIT_ENV] = str(threads_per_worker)
    env.update(extra_env)
    return env


def spawn_worker(index: int, store_dir: str, env: dict[str, str]) -> Worker:
    """Start worker process ``index`` with its three pipes; the caller registers ``result_r``."""
    w = Worker(index)
    task_r, w.task_w = os.pipe()
    w.result_r, result_w = os.pipe()
    life_r, w.lifeline_w = os.pipe()
    cancel_r, w.cancel_w = os.pipe()
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
    os.set_blocking(w.task_w, False)
    os.set_blocking(w.cancel_w, False)
    os.set_blocking(w.result_r, False)
    return w
