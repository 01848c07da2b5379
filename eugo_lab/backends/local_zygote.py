"""The local pool's template process (a "zygote"): it imports the worker code once and forks workers.

Started by :class:`eugo_lab.backends.local_template.Template` as ``python -c "...main()" SOCK_FD
PARENT_PID``, as early as ``hpc.init()`` can (its boot then overlaps the driver's own imports).
Booting an interpreter and importing the worker code costs ~20 ms of CPU per worker; on a
2-core machine that is the pool's start-up. The template pays it once and a fork then costs
~1 ms, also for a replacement after a crash.

Protocol on the Unix socket (``SOCK_SEQPACKET``: one message per request or report):
- driver -> template: a pickled ``(index, store_dir, env, cwd)``, with the worker's four pipe
  ends (task, result, lifeline, cancel) as ``SCM_RIGHTS``. The child takes ``env`` as its
  environment and ``cwd`` as its directory; the driver forks only workers whose variables read
  at process start (``PYTHON*``, ``LD_*``...) are the template's, and spawns the others;
- template -> driver: ``local_wire.TEMPLATE_MSG`` ``(b"F", index, pid)`` once the worker is forked, and
  ``(b"X", pid, exit code)`` when a worker it forked exits (negative: killed by that signal,
  as ``subprocess`` reports it), since only the template, its parent, can read that status.

Why it is built this way:
- Single-threaded, always: ``fork`` copies only the calling thread, so a lock held by another
  thread would stay locked forever in the child. SIGCHLD is blocked while a worker is forked
  and answered, so the reaping handler never runs between a fork and its answer.
- It imports what a worker imports before its hello and what nearly every first task imports
  (nothing more: the socket is used through ``_socket``, the C module), so workers inherit no
  module a task does not need.
- It dies with the driver: the driver's end of the socket is the lifeline (EOF when the driver
  is gone, even by SIGKILL), ``PR_SET_PDEATHSIG`` backs it up. Leaving, it frees the shared
  memory store and kills its workers, which catches a worker whose task holds the GIL (its
  lifeline thread cannot run). Workers do not die with the template: if it is killed, they keep
  serving and the pool forks replacements from a new template (see ``LocalBackend``).
- SIGINT is ignored and it runs in its own session, like the workers (Jupyter's Interrupt).
"""

from __future__ import annotations

import _socket
import ctypes
import os
import pickle
import signal
import struct
import sys
from typing import Any

from eugo_lab.backends import _worker, local_worker  # noqa: F401 - pre-imported for the workers it forks
from eugo_lab.backends.local_wire import TEMPLATE_FDS as _FDS
from eugo_lab.backends.local_wire import TEMPLATE_MSG as _MSG
from eugo_lab.contract import serialization  # noqa: F401 - what a worker imports before its hello
from eugo_lab.contract.hooks import preload_worker_modules

# And what every worker's first task imports (the features' list, WORKER_PRELOADS, says what and why),
# paid once here rather than once per worker on the way to the first result.
preload_worker_modules()

_REQUEST_BYTES = 1 << 16  # more than any request: a store path, six variables and a directory
_MAX_FD = 1 << 20  # above any descriptor (close_range: one system call however large)


def main() -> None:
    """Fork a worker per request until the driver closes the socket or dies."""
    sock_fd, parent_pid = int(sys.argv[1]), int(sys.argv[2])
    # Started by posix_spawn, it inherited every inheritable descriptor of the driver (a
    # kernel's sockets...): keep only stdio and the socket, as subprocess's close_fds would,
    # so neither it nor the workers it forks hold the driver's files open.
    os.closerange(3, max(sock_fd, 3))
    os.closerange(max(sock_fd + 1, 3), _MAX_FD)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, sock_fd)
    live: set[int] = set()
    stores: set[str] = set()  # the shared-memory stores of the workers it forked

    def leave(*_: Any) -> None:
        # The driver is gone: free its shared memory, then stop its workers and exit. The store
        # goes first: whoever sees the workers gone may look for it. No handler may run in
        # here: reap() would re-enter leave() in the middle of `import shutil`, and get the
        # half-imported module.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, signal.SIGTERM})
        try:
            import shutil

            for store_dir in stores:
                shutil.rmtree(store_dir, ignore_errors=True)
        finally:
            for pid in list(live):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            os._exit(0)

    def reap(*_: Any) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            live.discard(pid)
            try:
                sock.send(_MSG.pack(b"X", pid, os.waitstatus_to_exitcode(status)))
            except OSError:
                leave()

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGCHLD, reap)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent_pid:  # the driver died before prctl took effect
        leave()
    cmsg_space = _socket.CMSG_SPACE(_FDS.size)
    while True:
        try:
            data, ancdata, _, _ = sock.recvmsg(_REQUEST_BYTES, cmsg_space)
        except OSError:
            data, ancdata = b"", []
        if not data:
            leave()
        fds = [fd for level, kind, raw in ancdata
               if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
               for fd in struct.unpack(f"<{len(raw) // 4}i", raw[: len(raw) - len(raw) % 4])]
        index, store_dir, env, cwd = pickle.loads(data)
        stores.add(store_dir)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            pid = _fork(sock, fds, store_dir, env, cwd, old_mask) if len(fds) == 4 else -1
            if pid > 0:
                live.add(pid)
            try:
                sock.send(_MSG.pack(b"F", index, pid))
            except OSError:
                leave()
        finally:
            for fd in fds:
                os.close(fd)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _fork(sock: Any, fds: list[int], store_dir: str, env: dict[str, str], cwd: str, old_mask: Any) -> int:
    """Fork one worker on ``fds`` (task, result, lifeline, cancel); the pid, or -1 if fork failed."""
    try:
        pid = os.fork()
    except OSError:
        return -1
    if pid:
        return pid
    try:  # the worker: undo what is the template's, then serve (never returns)
        os.setsid()  # its own session, as a spawned worker has: the driver's Interrupt does not reach it
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        sock.close()
        if env != os.environ:  # what the worker would have started with (thread limits, later changes)
            os.environ.clear()
            os.environ.update(env)
        if cwd != os.getcwd():
            os.chdir(cwd)
        task_fd, result_fd, lifeline_fd, cancel_fd = fds
        local_worker.serve(task_fd, result_fd, lifeline_fd, cancel_fd, store_dir, None)
    finally:
        os._exit(1)
    return 0  # pragma: no cover - serve() never returns
