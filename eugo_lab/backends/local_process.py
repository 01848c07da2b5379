"""Worker processes of the local pool: how one is started and what the pool tracks about it."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from eugo_lab.backends.local_template import Forked, Template, worker_env  # noqa: F401 - worker_env: the pool's
from eugo_lab.contract.task import Task

if TYPE_CHECKING:  # the driver imports psutil only when a memory limit is watched
    import psutil

_WORKER_CMD = "from eugo_lab.backends.local_worker import main; main()"
# What workers run when nobody replaced _WORKER_CMD (tests do, to slow or break a worker):
# only this command is what the template's pre-imported code would run, so only it is forked.
DEFAULT_WORKER_CMD = _WORKER_CMD


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
                 "cancel_target", "cancel_deadline", "gpu", "held_by", "blocked", "progress")

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
        # The function ids loaded on this worker, least recently used first (the pool bounds it).
        self.known_fns: collections.OrderedDict[int, None] = collections.OrderedDict()
        self.pid = 0
        self.host = ""
        self.started = time.time()
        self.dead = False
        self.kill_reason: Any = None  # "cancel", or an outcome.Crash for a memory-limit kill
        self.ps: psutil.Process | None = None
        self.greeted = False  # the worker said hello: it started properly
        self.cancel_target: Task | None = None  # a running task asked to stop
        self.held_by: Task | None = None  # a cpus=N task running on another worker keeps this one idle
        self.cancel_deadline = 0.0  # when the worker is killed if that task is still running
        self.gpu = -1  # the device a GPU worker holds (its CUDA_VISIBLE_DEVICES), -1 for a CPU worker
        # Tasks on this worker's stack waiting in hpc.get on tasks they submitted, bottom first, as
        # (task id, whether the worker takes their children meanwhile, the ids it waits for): see
        # eugo_lab.backends.local_nested.
        self.blocked: list[tuple[int, bool, frozenset[int]]] = []
        # hpc.map batches running here that reported finished groups, by task id: the groups (lo, hi,
        # results, errors), their ends and the body's start, and the next group's size (LocalBackend._handle).
        self.progress: dict[int, list] = {}

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


def fork_workers(template: Template, indices: list[int], store_dir: str,
                 env: dict[str, str] | list[dict[str, str]]) -> list[Worker | None]:
    """Have the template fork a worker per index; None: not forked, for the caller to spawn instead."""
    return answered(template, ask_workers(template, indices, store_dir, env))


def ask_workers(template: Template, indices: list[int], store_dir: str,
                env: dict[str, str] | list[dict[str, str]]) -> list[Worker | None]:
    """Ask the template for a worker per index, without waiting; :func:`answered` completes them.

    ``env``: every worker's environment, or a list of one per index (GPU workers differ in
    ``CUDA_VISIBLE_DEVICES``). Asking for every worker before reading any answer lets the
    template boot and fork them while the driver goes on.
    """
    envs = env if isinstance(env, list) else [env] * len(indices)
    asked: list[Worker | None] = []
    for index, env in zip(indices, envs):
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
    return asked


def answered(template: Template, asked: list[Worker | None]) -> list[Worker | None]:
    """The workers of :func:`ask_workers` once the template says their pids; None: not forked."""
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
