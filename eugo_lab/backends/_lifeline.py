"""A lifeline for an embedded engine's processes: they end with the driver, even when it is SIGKILLed.

:class:`Lifeline` starts one small watcher process and keeps the only write end of a pipe
to it. The watcher polls the process trees rooted at the engine's processes (every
``REFRESH_SECONDS``, so it also knows the workers and agents they start later) and blocks
on the pipe. When the driver goes away, by ``close()``, a normal exit or SIGKILL, the
kernel closes the pipe, the watcher reads EOF and SIGKILLs every process it knew that is
still running, then exits.

Why a separate process: code in the driver cannot run once it is SIGKILLed, and
``PR_SET_PDEATHSIG`` (which Ray already sets on the processes it starts directly) does not
reach their children: Ray's dashboard and runtime-env agents outlive a killed Jupyter
kernel by a minute or more, waiting on a GCS that died with it.

The watcher starts in its own session (Jupyter's Interrupt, which signals the kernel's
process group, does not reach it) and ignores SIGINT. A process is killed only while
``psutil`` confirms that its pid still names the process it saw (same creation time).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

REFRESH_SECONDS = 0.5
_CMD = "from eugo_lab.backends._lifeline import main; main()"


class Lifeline:
    """The driver's end: ``Lifeline(root_pids)`` starts the watcher; ``close()`` lets it reap and exit."""

    def __init__(self, root_pids: list[int]):
        read_fd, self._write_fd = os.pipe()  # both close-on-exec: no other child inherits the write end
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CMD, str(read_fd), *map(str, root_pids)],
                pass_fds=(read_fd,), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)},
            )
        except BaseException:
            os.close(self._write_fd)
            raise
        finally:
            os.close(read_fd)

    def close(self, timeout: float = 10.0) -> None:
        """Close the pipe: the watcher kills what is left of the engine's processes, then exits."""
        if self._write_fd < 0:
            return
        os.close(self._write_fd)
        self._write_fd = -1
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - the watcher itself is stuck
            self.proc.kill()
            self.proc.wait()


def main() -> None:
    """The watcher process: ``python -c ... READ_FD ROOT_PID...``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import psutil

    fd = int(sys.argv[1])
    known: dict[int, psutil.Process] = {}
    for pid in sys.argv[2:]:
        try:
            known[int(pid)] = psutil.Process(int(pid))
        except psutil.Error:
            pass
    roots = list(known.values())

    def refresh() -> None:
        for root in roots:
            try:
                for child in root.children(recursive=True):
                    known.setdefault(child.pid, child)
            except psutil.Error:
                pass

    while True:
        ready, _, _ = select.select([fd], [], [], REFRESH_SECONDS)
        if ready and not os.read(fd, 4096):
            break  # EOF: the driver closed the lifeline or died
        refresh()
    refresh()
    procs = list(known.values())
    for p in procs:
        try:
            if p.is_running():  # False too when the pid now names another process (create time differs)
                p.kill()
        except psutil.Error:
            pass
    os._exit(0)  # no waiting: SIGKILL cannot be refused, and the orphans are init's to reap
